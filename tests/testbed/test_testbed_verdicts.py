"""The testbed's verdicts without live runs: --json, the exit status, intervals above zero, the
figure's panels on one y scale (tests/testbed/test_live_testbed.py runs it live)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import matplotlib.figure
import numpy as np
import pytest

from hetlb import testbed as testbed_module
from hetlb.cli import main
from hetlb.cli.testbed import EXIT_DIFFERS
from hetlb.stats.intervals import interval, positive_interval

SCENARIO = {"system": {"speeds": "2x1,2x0.25"}, "testbed": {"loads": [0.5, 0.8], "policies": ["jsq", "jiq"]}}


def recorded(tmp_path: Path, agreeing: dict, loads=(0.5, 0.8)) -> testbed_module.Testbed:
    """A testbed whose hetlb runs are recorded by hand: ``agreeing`` maps a policy to its verdict;
    the simulated runs' means are ten times the live ones, so the two panels differ in scale."""
    scenario = testbed_module.TestbedScenario.from_mapping(
        {**SCENARIO, "testbed": {**SCENARIO["testbed"], "loads": list(loads)}}
    )
    bed = testbed_module.Testbed(scenario, tmp_path)
    for load in loads:
        for number, (policy, agrees) in enumerate(agreeing.items()):
            live = 10.0 * (1 + number) * load
            bed.rows.append(
                {
                    "balancer": "hetlb",
                    "policy": policy,
                    "load": load,
                    "live_mean_ms": live + 1.0,
                    "live_ci_low_ms": live,
                    "live_ci_high_ms": live + 2.0,
                    "live_minus_overhead_ms": live,
                    "agrees": agrees,
                    "sim_run_mean_ms": 10 * live,
                    "sim_run_low_ms": 9 * live,
                    "sim_run_high_ms": 11 * live,
                    "errors": 0,
                    "live_blocking": 0.0,
                }  # fmt: skip
            )
    return bed


@pytest.mark.parametrize(
    "verdicts, status", [({"jsq": True, "jiq": True}, 0), ({"jsq": True, "jiq": False}, EXIT_DIFFERS)]
)
def test_the_exit_status_says_whether_every_run_agreed_and_json_is_the_result(
    tmp_path, monkeypatch, capsys, verdicts, status
):
    path = tmp_path / "bed.toml"
    path.write_text('[system]\nspeeds = "2x1"\n')
    bed = recorded(tmp_path / "out", verdicts)
    monkeypatch.setattr(testbed_module, "run_testbed", lambda *args, **kwargs: bed)
    assert main(["testbed", str(path), "--out", str(tmp_path / "out"), "--json"]) == status
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert result["compared"] == 4 and result["agreeing"] == 4 - (status != 0) * 2
    assert result["all_agree"] == (status == 0)
    assert ("2 of 4 runs differ" in err) == (status != 0)
    assert main(["testbed", str(path), "--out", str(tmp_path / "out")]) == status  # the table: same status
    assert "order at load 0.5" in capsys.readouterr().out


def test_earlier_results_are_not_replaced_silently(tmp_path, monkeypatch, capsys):
    path = tmp_path / "bed.toml"
    path.write_text('[system]\nspeeds = "2x1"\n')
    out = tmp_path / "out"
    out.mkdir()
    (out / "testbed.json").write_text("{}")
    monkeypatch.setattr(testbed_module, "run_testbed", lambda *args, **kwargs: recorded(out, {"jsq": True}))
    assert main(["testbed", str(path), "--out", str(out)]) == 0
    assert f"replacing the earlier testbed.json in {out}" in capsys.readouterr().err


@pytest.mark.parametrize("loads", [(0.5, 0.8), (0.5,)])
def test_the_live_and_simulated_panels_share_one_y_scale(tmp_path, monkeypatch, loads):
    """By load (lines) and, with one load, by run (intervals): the simulated means are ten times
    the live ones, and still every panel has the same y limits."""
    figures = []
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", lambda figure, *a, **k: figures.append(figure))
    recorded(tmp_path, {"jsq": True, "jiq": True}, loads).plot(tmp_path / "testbed.png")
    (figure,) = figures
    limits = {axes.get_ylim() for axes in figure.axes}
    assert len(figure.axes) == 2 and len(limits) == 1
    (low, high), largest = limits.pop(), 11 * 20.0 * max(loads)
    assert low <= 0.5 * 10 and high >= largest  # both panels' data inside the shared scale


def test_the_simulated_interval_is_above_zero_where_a_t_interval_is_not():
    """Two replications of jiq at load 0.9 with Pareto job sizes (scv 20): their means differ by a
    factor of three, so the t interval's lower end is far below zero; the testbed's interval is Cox's
    on the log scale of the same means, above zero."""
    system = {"speeds": "2x1,2x0.25", "job_sizes": "pareto", "scv": 20}
    scenario = testbed_module.TestbedScenario.from_mapping(
        {"system": system, "testbed": {"loads": [0.9]}, "run": {"jobs": 2000, "replications": 2}}
    )
    simulation = scenario.scenario({"id": "jiq"}, 0.9, None, None)
    means = [run.mean_response_time for run in simulation.simulate().runs]
    summary = testbed_module.Testbed(scenario, Path("unused")).simulate(simulation)
    assert interval(means)[0] < 0  # the case
    assert summary["mean_response_time"] == pytest.approx(np.mean(means))
    assert summary["mean_response_time_ci"] == pytest.approx(positive_interval(means))
    assert summary["mean_response_time_ci"][0] > 0 and not math.isnan(summary["mean_response_time_ci"][1])
