"""The command line in use: JSON output, TOML scenarios, the bound, the exact solver, the demo."""

import json
import subprocess
import sys

import numpy as np
import pytest

from hetlb.cli import main
from hetlb.theory import solve_exact_arrays, speed_lower_bound_arrays

REQUIRED_KEYS = {
    "mean_response_time",
    "mean_response_time_ci",
    "mean_waiting_time",
    "p_wait",
    "blocking_probability",
    "response_time_p99",
    "mean_number_in_system",
    "events",
    "events_per_second",
}


def run_json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_simulate_json_has_the_documented_keys(capsys):
    out = run_json(
        capsys,
        [
            "simulate",
            "--speeds",
            "2x1.0,2x0.5",
            "--load",
            "0.7",
            "--policy",
            "jfsq",
            "--jobs",
            "5000",
            "--warmup",
            "10",
            "--seed",
            "4",
            "--json",
        ],
    )
    assert REQUIRED_KEYS <= set(out)
    assert len(out["mean_response_time_ci"]) == 2
    assert out["mean_response_time_ci"][0] <= out["mean_response_time"] <= out["mean_response_time_ci"][1]
    assert out["metadata"]["policy"]["id"] == "jfsq"
    assert out["metadata"]["seed"] == 4
    assert {"hetlb", "numpy", "numba", "python"} <= set(out["metadata"]["versions"])
    assert out["runs"][0]["completed_jobs"] == 5000


def test_simulate_replications_give_replication_intervals(capsys):
    out = run_json(
        capsys, ["simulate", "--speeds", "1,0.5", "--load", "0.5", "--jobs", "2000", "--replications", "4", "--json"]
    )
    means = [run["mean_response_time"] for run in out["runs"]]
    assert out["replications"] == 4
    assert np.isclose(out["mean_response_time"], np.mean(means))
    assert out["mean_response_time_ci"][0] < np.mean(means) < out["mean_response_time_ci"][1]


def test_config_file_and_flag_override(tmp_path, capsys):
    config = tmp_path / "scenario.toml"
    config.write_text(
        "[system]\nspeeds = [2.0, 1.0, 0.5]\narrival_rate = [1.0, 1.0]\ngraph = [[0, 1], [1, 2]]\nbuffer = 4\n"
        '[policy]\nid = "pod"\nd = 2\n[run]\njobs = 3000\nseed = 9\n'
    )
    out = run_json(capsys, ["simulate", "--config", str(config), "--json"])
    assert out["metadata"]["policy"] == {"id": "pod", "d": 2}
    assert out["metadata"]["system"]["graph"]["n_edges"] == 4
    out = run_json(capsys, ["simulate", "--config", str(config), "--policy", "sed", "--jobs", "1000", "--json"])
    assert out["metadata"]["policy"] == {"id": "sed"}
    assert out["runs"][0]["completed_jobs"] == 1000


def test_readable_table(capsys):
    assert main(["simulate", "--speeds", "3,1", "--load", "0.5", "--jobs", "2000"]) == 0
    text = capsys.readouterr().out
    assert "mean response time" in text and "per speed class" in text and "events" in text


def test_bound_matches_theory(capsys):
    out = run_json(capsys, ["bound", "--speeds", "25x1,25x0.5,25x0.25,25x0.125", "--load", "0.9", "--json"])
    expected = speed_lower_bound_arrays(np.repeat([1, 0.5, 0.25, 0.125], 25), 0.9 * 46.875)
    assert out["K"] == expected.K == 3
    assert np.isclose(out["lower_bound"], expected.lower_bound)
    assert round(out["lower_bound"], 3) == 1.630  # the table of docs/reference/model.md


def test_exact_command(capsys):
    out = run_json(
        capsys, ["exact", "--speeds", "2,1", "--arrival-rate", "2.0", "--buffer", "3", "--policy", "jfsq", "--json"]
    )
    solution = solve_exact_arrays([2.0, 1.0], [2.0], [[0, 1]], 3, policy="jfsq")
    assert np.isclose(out["mean_response_time"], solution.mean_response_time)
    assert out["n_states"] == 16


def test_policies_lists_every_policy(capsys):
    from hetlb.policies import POLICIES

    assert main(["policies"]) == 0
    text = capsys.readouterr().out
    for policy_id in POLICIES:
        assert policy_id in text


@pytest.mark.slow
def test_demo_writes_table_and_plot(tmp_path):
    completed = subprocess.run(
        [sys.executable, "-m", "hetlb", "demo", "--out", str(tmp_path), "--jobs", "2000", "--replications", "2"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr
    assert "C*/lambda" in completed.stdout
    assert (tmp_path / "demo.png").stat().st_size > 10_000
    lines = (tmp_path / "demo.csv").read_text().splitlines()
    assert len(lines) == 1 + 6 * 5


def test_diffusion_command_agrees_with_the_closed_form_mean_of_x1(capsys):
    from hetlb.theory.diffusion import continuous_speeds, policy_diffusion, stationary_mean_x1

    argv = ["diffusion", "--policy", "jfsq", "--speed-distribution", "uniform:low=0.7,high=1.3", "--paths", "64"]
    out = run_json(capsys, [*argv, "--json"])
    x1 = out["stationary"]["x1"]
    exact = stationary_mean_x1(policy_diffusion("jfsq", continuous_speeds(0.7, 1.3), 1.0))  # -c / mu_min
    assert abs(x1["mean"] - exact) <= 4 * x1["standard_error"]


def test_graph_command_reports_the_construction_and_the_max_flow(capsys):
    out = run_json(
        capsys,
        [
            "graph",
            "--speeds",
            "8x1,8x0.5",
            "--load",
            "0.9",
            "--buffer",
            "5",
            "--graph",
            "random:p=0.5,ports=12,seed=4",
            "--assumption2",
            "--json",
        ],
    )
    assert out["construction"]["construction"] == "random" and out["construction"]["seed"] == 4
    assert out["construction"]["statistics"]["n_types"] == 12
    assert 0.9 <= out["routable"]["max_load_fraction"] <= 1.0 and out["routable"]["can_carry_offered_load"]
    assert "not a proof" in out["assumption2"]["note"] or out["assumption2"]["note"].startswith("every subset")


def test_simulate_reaches_constructions_distributions_and_policy_parameters(capsys):
    out = run_json(
        capsys,
        [
            "simulate",
            "--n-servers",
            "40",
            "--speed-distribution",
            "uniform:low=0.7,high=1.3,seed=2",
            "--excess-capacity",
            "1",
            "--policy",
            "jsq-df-ds",
            "--set",
            "p_fast=0.25",
            "--jobs",
            "2000",
            "--speed-bins",
            "2",
            "--json",
            "--compact",
        ],
    )
    system = out["metadata"]["system"]
    assert system["n_servers"] == 40 and len(system["speed_classes"]) == 40
    assert system["total_arrival_rate"] == pytest.approx(
        sum(c["speed"] for c in system["speed_classes"]) - 40**0.5, rel=1e-12
    )
    assert out["metadata"]["policy"]["p_fast"] == 0.25 and len(out["runs"][0]["speed_profile"]["eta"]) == 2
    out = run_json(
        capsys,
        [
            "simulate",
            "--speeds",
            "8x1,8x0.5",
            "--load",
            "0.8",
            "--buffer",
            "5",
            "--graph",
            "fig3:ports=20,seed=1",
            "--policy",
            "jfsq",
            "--jobs",
            "2000",
            "--json",
        ],
    )
    assert out["metadata"]["system"]["graph_construction"]["construction"] == "fig3"


def test_plot_of_a_slotted_sweep_and_its_bound_error(tmp_path, capsys):
    from hetlb.experiments import SweepSpec, sweep

    spec = SweepSpec(
        base={
            "system": {"model": "slotted", "speeds": "5x1,5x0.5", "load": 0.6, "dispatchers": 2},
            "policy": {"id": "l-jsq"},
            "run": {"slots": 1000},
        },
        axes={"system.load": [0.3, 0.6], "policy.id": ["l-jsq", "jsq"]},
        replications=2,
        seed=1,
    )
    sweep(spec, executor="serial", store=None, out=tmp_path)
    assert main(["plot", str(tmp_path), "--x", "system.load", "--metric", "mean_delay"]) == 0
    assert (tmp_path / "mean_delay.png").stat().st_size > 10_000
    assert main(["plot", str(tmp_path), "--x", "system.load", "--metric", "mean_delay", "--bound"]) == 2
    assert "--bound: this sweep has no speed lower bound" in capsys.readouterr().err


def test_tune_command_finds_the_known_optimum(capsys):
    # fast servers 100 times faster with capacity for the whole load: p_S = 0 is optimal (see
    # test_reproductions.test_tuner_finds_the_known_optimum)
    out = run_json(
        capsys,
        [
            "tune",
            "--speeds",
            "5x10,5x0.1",
            "--load",
            "0.4",
            "--buffer",
            "50",
            "--grid",
            "3",
            "--jobs",
            "20000",
            "--seed",
            "3",
            "--d-fast",
            "2",
            "--json",
        ],
    )
    assert out["p_slow"] == 0.0 and len(out["table"]) == 9
    assert out["mean_response_time"] == min(row["mean_response_time"] for row in out["table"])
