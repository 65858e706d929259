"""The continuous-time kernel compiled ahead of time (hetlb.simulation.ahead_of_time): the same
results as the JIT-compiled kernel, bit for bit; never used for arguments or sources it was not
compiled for; and a short ``hetlb simulate`` with it does not import numba."""

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import hetlb
from hetlb import jit
from hetlb.model.job_sizes import JobSizes
from hetlb.policies.registry import CONTINUOUS, policies_where
from hetlb.simulation import ahead_of_time, precompile

pytestmark = pytest.mark.skipif(jit.DISABLED, reason="compiled kernels")

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture(scope="module")
def compiled():
    """The compiled module for the current sources, built if missing (seconds, once)."""
    kernels = ahead_of_time.compiled_kernels()
    if kernels is None:
        precompile.build(quiet=True)
        kernels = ahead_of_time.compiled_kernels()
    assert kernels is not None
    return kernels


@pytest.fixture
def jit_only(monkeypatch):
    """Runs in this test use the JIT-compiled kernel only."""
    monkeypatch.setattr(ahead_of_time, "_looked", True)
    monkeypatch.setattr(ahead_of_time, "_loaded", None)


def results(result) -> dict:
    """Every number of a result, run by run (its wall-clock time left out)."""
    return [
        {key: value for key, value in dataclasses.asdict(run).items() if key not in ("wall_seconds", "metadata")}
        for run in result.runs
    ]


def assert_same(a, b):
    assert len(a) == len(b)
    for run_a, run_b in zip(a, b, strict=True):
        assert run_a.keys() == run_b.keys()
        for key in run_a:
            x, y = run_a[key], run_b[key]
            if isinstance(x, dict):
                assert x.keys() == y.keys(), key
                for inner in x:
                    np.testing.assert_array_equal(np.asarray(x[inner]), np.asarray(y[inner]), err_msg=f"{key}.{inner}")
            else:
                np.testing.assert_array_equal(np.asarray(x, dtype=object), np.asarray(y, dtype=object), err_msg=key)


SYSTEMS = {
    "complete": hetlb.System.from_speeds([2.0, 1.0, 1.0, 0.5, 0.5, 0.25], load=0.85, buffer=6),
    "sparse, finite buffers, H2 sizes": hetlb.System.from_speeds(
        [2.0, 1.0, 1.0, 0.5],
        arrival_rate=[1.2, 1.0],
        graph=[[0, 1, 2], [1, 2, 3]],
        buffer=[3, 3, 4, 2],
        job_sizes=JobSizes("hyperexponential", 6.0),
    ),
}


@pytest.mark.parametrize("system_name", list(SYSTEMS))
@pytest.mark.parametrize("policy", policies_where(model=CONTINUOUS))
def test_the_compiled_kernel_gives_the_jit_results_bit_for_bit(compiled, monkeypatch, system_name, policy):
    system = SYSTEMS[system_name]
    run = dict(jobs=3000, replications=2, seed=11, trace=100, state_distribution=True)
    calls = compiled.calls
    with_compiled = hetlb.simulate(system, policy, **run)
    assert compiled.calls >= calls + 2 * 2  # advance and selection_keys of each replication, at least
    monkeypatch.setattr(ahead_of_time, "_loaded", None)  # now the JIT's
    with_jit = hetlb.simulate(system, policy, **run)
    assert_same(results(with_compiled), results(with_jit))


def test_a_run_to_a_horizon_is_bit_for_bit_too(compiled, monkeypatch):
    run = dict(horizon=300.0, warmup=30.0, seed=4)
    calls = compiled.calls
    with_compiled = hetlb.simulate(SYSTEMS["complete"], "jfiq", **run)
    assert compiled.calls > calls
    monkeypatch.setattr(ahead_of_time, "_loaded", None)
    assert_same(results(with_compiled), results(hetlb.simulate(SYSTEMS["complete"], "jfiq", **run)))


def test_arguments_of_other_types_are_never_given_to_compiled_code(compiled):
    from hetlb.policies.registry import make_policy
    from hetlb.simulation import continuous
    from hetlb.simulation.options import RunOptions

    system = SYSTEMS["complete"]
    model = continuous.pack_model(system, make_policy("jsq"), RunOptions(jobs=100, batches=10, occupancy_levels=8))
    state = continuous.new_state(model, system.n_servers, 0)
    rng = np.random.default_rng(0)
    assert compiled.find("advance", (model, state, rng, rng, 10)) is not None
    for changed in (
        model._replace(buffer=model.buffer.astype(np.int32)),  # another dtype
        model._replace(speed=model.speed[::2]),  # not contiguous
        model._replace(n_classes=2.0),  # a float for an integer
        model._replace(speed=np.zeros((2, 3))),  # two dimensions
    ):
        assert compiled.find("advance", (changed, state, rng, rng, 10)) is None
    assert compiled.find("advance", (model, state, rng, rng, 10.0)) is None


def test_another_source_gives_another_stamp(tmp_path, monkeypatch):
    package = tmp_path / "hetlb"
    for part in ahead_of_time.SOURCES:
        source = ahead_of_time.PACKAGE / part
        target = package / part
        if source.is_dir():
            target.mkdir(parents=True)
            for file in source.glob("*.py"):
                (target / file.name).write_bytes(file.read_bytes())
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
    monkeypatch.setattr(ahead_of_time, "PACKAGE", package)
    before = ahead_of_time.stamp()
    rules = package / "policies" / "rules.py"
    rules.write_text(rules.read_text() + "\n# an edit\n")
    assert ahead_of_time.stamp() != before


def test_disabled_by_the_environment_or_with_the_jit_off():
    code = "from hetlb.simulation import ahead_of_time as a; print(a.compiled_kernels() is None)"
    for variable in ("HETLB_AHEAD_OF_TIME", "NUMBA_DISABLE_JIT"):
        env = {**os.environ, "PYTHONPATH": str(SRC), variable: "1" if variable == "NUMBA_DISABLE_JIT" else "0"}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert out.stdout.strip() == "True", variable


def test_a_short_simulation_does_not_import_numba(compiled):
    code = (
        "import sys; from hetlb.cli import main; "
        "status = main(['simulate', '--speeds', '2,1', '--load', '0.5', '--jobs', '100', '--quiet']); "
        "assert status == 0; print('numba' in sys.modules)"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False"
