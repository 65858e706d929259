"""Bad input: one line naming the field and the rule, exit status 2, never a traceback."""

import math
import subprocess
import sys

import numpy as np
import pytest

import hetlb
from hetlb import InputError

BAD_SYSTEMS = [
    (dict(speeds=[1.0, -1.0], load=0.5), "speeds"),
    (dict(speeds=[1.0, math.inf], load=0.5), "speeds"),
    (dict(speeds=[1.0, math.nan], load=0.5), "speeds"),
    (dict(speeds=[], load=0.5), "speeds"),
    (dict(speeds=[1.0], arrival_rate=0.0), "arrival_rate"),
    (dict(speeds=[1.0], arrival_rate=[0.5, -0.1]), "arrival_rate"),
    (dict(speeds=[1.0], load=1.0), "arrival_rate"),  # unstable, infinite buffers
    (dict(speeds=[1.0], load=0.5, arrival_rate=0.5), "arrival_rate"),  # both given
    (dict(speeds=[1.0, 1.0], arrival_rate=[1.0, 0.1], graph=[[0], []]), "graph"),  # type without server
    (dict(speeds=[1.0, 1.0], arrival_rate=[1.0], graph=[[0, 2]]), "graph"),  # no server 2
    (dict(speeds=[1.0, 1.0], arrival_rate=[1.0], graph=[[0, 0]]), "graph"),  # repeated edge
    (dict(speeds=[2.0, 0.5], arrival_rate=[1.0, 0.6], graph=[[0], [1]]), "arrival_rate"),  # 0.6 > 0.5 via graph
    (dict(speeds=[1.0], load=0.5, buffer=0), "buffer"),
    (dict(speeds=[1.0], load=0.5, buffer=2.5), "buffer"),
    (dict(speeds=[1.0], load=0.5, job_sizes="gamma"), "job_sizes.kind"),
    (dict(speeds=[1.0], load=0.5, job_sizes="pareto:sizes.txt"), "job_sizes"),  # only empirical names a file
    (dict(speeds=[1.0], load=0.5, job_sizes="empirical:/nonexistent/sizes.txt"), "job_sizes.path"),
    (dict(speeds=[1.0], load=0.5, concurrency=0), "concurrency"),
    (dict(speeds=[1.0], load=0.5, concurrency="2x8"), "concurrency"),  # 2 values for 1 server
    (dict(speeds=[1.0], load=0.5, concurrency="8.5"), "concurrency"),
    (dict(speeds=[1.0], load=0.5, concurrency="inf"), "rate_curve"),  # independent, unlimited: infinite capacity
    (dict(speeds=[1.0], load=0.5, rate_curve="saturating:alpha=1.5"), "rate_curve.alpha"),
    (dict(speeds=[1.0], load=0.5, rate_curve="saturating"), "rate_curve"),
    (dict(speeds=[1.0], load=0.5, rate_curve="table:1,2.5"), "rate_curve.values"),  # phi(b)/b rises
    (dict(speeds=[1.0], load=0.5, rate_curve="table:1,0.5"), "rate_curve.values"),  # phi falls
    (dict(speeds=[1.0], load=0.5, rate_curve="table:2,3"), "rate_curve.values"),  # phi(1) != 1
    (dict(speeds=[1.0], load=0.5, rate_curve="linear"), "rate_curve"),
    (dict(speeds=[1.0, 1.0], load=0.5, rate_curve=[[3, "shared"]]), "rate_curve"),  # 3 curves, 2 servers
    (dict(speeds=[1.0], load=0.5, arrivals="batch"), "arrivals"),
    (dict(speeds=[1.0], load=0.5, arrivals="batch:mean=0.5"), "arrivals.mean"),
    (dict(speeds=[1.0], load=0.5, arrivals="mmpp:ratio=4,on=1"), "arrivals"),
    (dict(speeds=[1.0], load=0.5, arrivals="mmpp:ratio=4,on=0,off=1"), "arrivals.on"),
    (dict(speeds=[1.0], load=0.5, arrivals="renewal"), "arrivals"),
    (dict(speeds=[1e-300], load=0.5), "speeds"),  # outside validation.RATE_RANGE
    (dict(speeds=[1.0, 1e101], load=0.5), "speeds"),
    (dict(speeds=[1.0], arrival_rate=1e-320), "arrival_rate"),
    (dict(speeds=[1.0], load=5e-324), "arrival_rate"),
    (dict(speeds=[3.0], arrival_rate=1e300, buffer=1), "arrival_rate"),
    (dict(speeds=[1.0], load=0.5, buffer=2**63), "buffer"),
    (dict(speeds=[1.0], excess_capacity=1e300, buffer=1), "excess_capacity"),
]


@pytest.mark.parametrize("kwargs,field", BAD_SYSTEMS)
def test_bad_system_names_the_field(kwargs, field):
    with pytest.raises(InputError) as error:
        hetlb.System.from_speeds(**kwargs)
    assert error.value.field.startswith(field)


def test_new_size_laws_need_a_positive_scv():
    for kind in ("lognormal", "pareto", "weibull"):
        with pytest.raises(InputError, match="job_sizes.scv"):
            hetlb.JobSizes(kind, 0.0)


def test_hyperexponential_needs_scv_above_one():
    with pytest.raises(InputError, match="job_sizes.scv"):
        hetlb.JobSizes("hyperexponential", 0.5)


@pytest.mark.parametrize(
    "kwargs,field",
    [
        (dict(policy="jsqq"), "policy"),
        (dict(policy="pod", d=0), "policy pod.d"),
        (dict(policy="jsq", d=2), "policy jsq"),
        (dict(policy="random"), "policy"),  # 1/2 of traffic > slow speed
        (dict(policy="jsq", jobs=0), "jobs"),
        (dict(policy="jsq", jobs=100, horizon=10.0), "jobs"),
        (dict(policy="jsq", horizon=5.0, warmup=10.0), "horizon"),
        (dict(policy="jsq", warmup=-1.0), "warmup"),
        (dict(policy="jsq", replications=0), "replications"),
        (dict(policy="jsq", seed=-3), "seed"),
        (dict(policy="jsq", jobs=2**63), "jobs"),
        (dict(policy="jsq", replications=2**63), "replications"),
        (dict(policy="jsq", batches=2**63), "batches"),
        (dict(policy="jsq", trace=-1), "trace"),
        (dict(policy="jsq", state_distribution=1), "state_distribution"),
        (dict(policy="jsq", jobs=10**15), "jobs"),  # 2e15 events
        (dict(policy="jsq", horizon=1e300), "horizon"),
        (dict(policy="jsq", occupancy_levels=10**15), "occupancy_levels"),  # memory
    ],
)
def test_bad_run_names_the_field(kwargs, field):
    system = hetlb.System.from_speeds([2.0, 0.5], load=0.6)
    policy = kwargs.pop("policy")
    with pytest.raises(InputError) as error:
        hetlb.simulate(system, policy, **kwargs)
    assert error.value.field == field


@pytest.mark.parametrize(
    "argv,words",
    [
        (["simulate", "--speeds", "1,-2", "--load", "0.5"], "speeds"),
        (["simulate", "--speeds", "2x", "--load", "0.5"], "speeds"),
        (["simulate", "--speeds", "1,1", "--load", "1.2"], "unstable"),
        (["simulate", "--speeds", "1,1", "--load", "0.5", "--policy", "nope"], "unknown policy"),
        (["simulate", "--speeds", "1,1", "--load", "0.5", "--buffer", "0"], "buffer"),
        (["simulate", "--speeds", "1,1", "--load", "0.5", "--jobs", "-5"], "jobs"),
        (["simulate", "--speeds", "1,1", "--load", "abc"], "invalid float"),
        (["simulate", "--config", "/nonexistent.toml"], "no such file"),
        (["simulate", "--speeds", "1", "--load", "0.5", "--jobs", "10", "--horizon", "5"], "not allowed"),
        (["exact", "--speeds", "1,1", "--load", "0.5"], "finite buffer"),
        (["bound", "--speeds", "1,1"], "arrival_rate"),
    ],
)
def test_cli_reports_one_line_and_exit_2(argv, words):
    completed = subprocess.run([sys.executable, "-m", "hetlb", *argv], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 2
    assert "Traceback" not in completed.stderr
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1, completed.stderr
    assert words in lines[0]


def test_cli_rejects_unknown_config_keys(tmp_path):
    config = tmp_path / "bad.toml"
    config.write_text('[system]\nspeeds = "2,1"\nlod = 0.5\n')
    completed = subprocess.run(
        [sys.executable, "-m", "hetlb", "simulate", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 2
    assert completed.stderr.strip().startswith("hetlb: error: system.lod: unknown key")


def test_continuous_only_commands_refuse_a_slotted_scenario(tmp_path, capsys):
    from hetlb.cli import main

    config = tmp_path / "slotted.toml"
    config.write_text('[system]\nmodel = "slotted"\nspeeds = "2,1"\nload = 0.5\n')
    for command in ("exact", "bound", "graph"):
        assert main([command, "--config", str(config)]) == 2
        assert capsys.readouterr().err.strip() == (
            f"hetlb: error: system.model: `hetlb {command}` applies to the continuous model only"
        )


def test_input_errors_survive_pickling():
    import pickle

    from hetlb.errors import InputError

    error = pickle.loads(pickle.dumps(InputError("speed_bins", "must be an integer >= 1, got 0")))
    assert (error.field, error.rule, str(error)) == (
        "speed_bins",
        "must be an integer >= 1, got 0",
        "speed_bins: must be an integer >= 1, got 0",
    )


@pytest.mark.parametrize(
    "argv,named",
    [
        (["simulate", "--speeds", "2,1", "--load", "1.5"], "--load"),  # the System's arrival_rate
        (["bound", "--speeds", "2,1", "--arrival-rate", "5"], "--arrival-rate"),
        (["simulate", "--n-servers", "10", "--load", "0.5"], "--n-servers"),  # system.n_servers
        (["simulate", "--speeds", "2,1,x", "--load", "0.5"], "--speeds"),
        (["simulate", "--speeds", "2,1", "--load", "0.5", "--warmup=-3"], "--warmup"),  # run.warmup
        (["simulate", "--speeds", "2,1", "--load", "0.5", "--scv", "3"], "--scv"),  # job_sizes.scv
        (["simulate", "--speeds", "2,1", "--load", "0.5", "--graph", "random:p=3"], "--graph p"),
        (
            ["simulate", "--speeds", "2,1", "--load", "0.5", "--policy", "jsq-df-ds", "--set", "p_fast=3"],
            "--set p_fast",
        ),
    ],
)
def test_cli_errors_name_the_flag_the_user_typed(argv, named, capsys):
    from hetlb.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hetlb: error: {named}: ") and err.count("\n") == 1


def test_a_field_set_in_the_config_keeps_its_key(tmp_path, capsys):
    from hetlb.cli import main

    config = tmp_path / "unstable.toml"
    config.write_text('[system]\nspeeds = "2,1"\nload = 1.5\n')
    assert main(["simulate", "--config", str(config)]) == 2
    assert capsys.readouterr().err.startswith("hetlb: error: arrival_rate: unstable with infinite buffers")


def test_n_servers_and_a_speed_mix_build_a_system_from_python():
    system = hetlb.System.from_speed_mix(8, [(2.0, 0.25), (0.5, 0.75)], load=0.5)
    np.testing.assert_array_equal(system.speed, [2.0, 2.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5])
    assert system.total_arrival_rate == 0.5 * (2 * 2.0 + 6 * 0.5)
    with pytest.raises(InputError) as error:
        hetlb.System.from_speed_mix(10, [(2.0, 0.25), (0.5, 0.75)], load=0.5)  # 2.5 servers of speed 2
    assert error.value.field == "speed_mix"


def test_the_number_of_job_types_has_one_name_in_python_and_toml():
    from hetlb.scenario import Scenario

    scenario = Scenario.from_mapping({"system": {"speeds": "2,1", "load": 0.5, "n_types": 3}})
    python = hetlb.System.from_speeds("2,1", load=0.5, n_types=3)
    assert scenario.system.n_types == python.n_types == 3
    np.testing.assert_array_equal(scenario.system.arrival_rate, python.arrival_rate)
    with pytest.raises(InputError) as error:  # the former key
        Scenario.from_mapping({"system": {"speeds": "2,1", "load": 0.5, "types": 3}})
    assert error.value.field == "system.types" and "n_types" in error.value.rule
