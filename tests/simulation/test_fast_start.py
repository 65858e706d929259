"""Fast starts (hetlb.simulation.fast_start): a short run's kernels as plain Python in a process
that compiles, with the compiled kernels' results bit for bit and without importing numba; and
``hetlb compile``, which fills numba's cache quietly and leaves no temporary folder."""

import dataclasses
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import hetlb
from hetlb import jit
from hetlb.model.job_sizes import JobSizes
from hetlb.policies.registry import CONTINUOUS, policies_where
from hetlb.simulation import fast_start

pytestmark = pytest.mark.skipif(jit.DISABLED, reason="compiled kernels")

SRC = Path(__file__).resolve().parents[2] / "src"
ENV = {**os.environ, "PYTHONPATH": str(SRC)}

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
RUN = dict(jobs=300, replications=1, seed=11, trace=40, state_distribution=True)


def numbers(result) -> list:
    """Every number of a result, run by run (its wall-clock time left out)."""
    return [
        {key: value for key, value in dataclasses.asdict(run).items() if key not in ("wall_seconds", "metadata")}
        for run in result.runs
    ]


def every_run() -> dict:
    """Every continuous policy on both systems, several dispatchers, and the slotted model."""
    from hetlb.model.slotted import SlottedSystem

    runs = {
        (name, policy): numbers(hetlb.simulate(system, policy, **RUN))
        for name, system in SYSTEMS.items()
        for policy in policies_where(model=CONTINUOUS)
    }
    runs["dispatchers"] = numbers(
        hetlb.simulate(SYSTEMS["complete"], "l-jsq", jobs=300, dispatchers=2, seed=3, update="push:p_hat=0.2:d=1")
    )
    slotted = SlottedSystem.from_speeds([1.0, 1.0, 0.5], dispatchers=2, load=0.6)
    runs["slotted"] = numbers(hetlb.simulate_slotted(slotted, "l-jsq", slots=300, seed=3))
    return runs


PLAIN = (  # every run short enough to run as plain Python
    "import pickle, sys\n"
    "from hetlb.simulation import fast_start\n"
    "from tests.simulation.test_fast_start import every_run\n"
    "fast_start.PLAIN_PYTHON_EVENTS = float('inf')\n"
    "runs = every_run()\n"
    "assert 'numba' not in sys.modules\n"
    "sys.stdout.buffer.write(pickle.dumps(runs))\n"
)


def test_plain_python_in_a_compiling_process_gives_the_compiled_results_bit_for_bit():
    root = SRC.parent
    env = {**ENV, "PYTHONPATH": f"{SRC}{os.pathsep}{root}{os.pathsep}{root / 'tests'}"}
    finished = subprocess.run([sys.executable, "-c", PLAIN], env=env, capture_output=True, check=False, cwd=root)
    assert finished.returncode == 0, finished.stderr.decode()
    plain = pickle.loads(finished.stdout)
    jit.compile_everything()  # this process: numba's kernels
    compiled = every_run()
    assert plain.keys() == compiled.keys()
    for key in compiled:
        for run_plain, run_compiled in zip(plain[key], compiled[key], strict=True):
            assert run_plain.keys() == run_compiled.keys()
            for name, value in run_compiled.items():
                if isinstance(value, dict):
                    for inner in value:
                        np.testing.assert_array_equal(run_plain[name][inner], value[inner], err_msg=f"{key} {name}")
                elif isinstance(value, float) and value != value:  # nan (a ratio of nothing): nan in both
                    assert run_plain[name] != run_plain[name], f"{key} {name}"
                else:
                    np.testing.assert_array_equal(
                        np.asarray(run_plain[name], dtype=object),
                        np.asarray(value, dtype=object),
                        err_msg=f"{key} {name}",
                    )


def test_a_short_simulation_does_not_import_numba_and_a_long_one_does():
    code = (
        "import sys; from hetlb.cli import main; "
        "args = ['simulate', '--speeds', '2,1', '--load', '0.5', '--quiet', '--jobs']; "
        "assert main([*args, '100']) == 0; print('numba' in sys.modules); "
        "assert main([*args, '20000']) == 0; print('numba' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True, check=True)
    assert [line for line in out.stdout.splitlines() if line in ("False", "True")] == ["False", "True"]


def test_a_process_runs_plain_python_up_to_its_budget_then_compiles(monkeypatch):
    """Runs of a third of the budget: three as plain Python, the fourth compiled, which is the one
    that the compile notice precedes; none plain once numba is loaded, or with fast starts off."""
    monkeypatch.setattr(fast_start, "_plain_events", 0.0)
    monkeypatch.setattr(jit, "numba_loaded", lambda: False)
    notices = []
    fast_start.before_compiled_run(lambda: notices.append(len(notices)))
    share = fast_start.PLAIN_PYTHON_EVENTS / 3
    plain = []
    for _ in range(5):
        with fast_start.kernels_for(share) as is_plain:
            plain.append(is_plain)
    assert plain == [True, True, True, False, False] and notices == [0]
    monkeypatch.setattr(fast_start, "_plain_events", 0.0)
    monkeypatch.setattr(fast_start, "ENABLED", False)
    with fast_start.kernels_for(1.0) as is_plain:
        assert not is_plain
    monkeypatch.setattr(fast_start, "ENABLED", True)
    monkeypatch.setattr(jit, "numba_loaded", lambda: True)
    with fast_start.kernels_for(1.0) as is_plain:
        assert not is_plain


def test_hetlb_compile_prints_one_line_or_nothing_and_leaves_no_temporary_folder(tmp_path):
    """With the cache filled (as make's set-up leaves it; the first call here fills it if not)."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    env = {**ENV, "TMPDIR": str(temporary)}
    command = [sys.executable, "-m", "hetlb", "compile"]
    first = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    again = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    quiet = subprocess.run([*command, "--quiet"], env=env, capture_output=True, text=True, check=True)
    assert first.stdout.count("\n") == 1 and first.stderr == ""
    assert again.stdout.startswith("up to date: numba's cache in ") and again.stdout.count("\n") == 1
    assert quiet.stdout == quiet.stderr == ""
    assert list(temporary.iterdir()) == []
