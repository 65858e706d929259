"""Reproductions of paper 001 (hetlb.experiments.zhou) at a scale small enough for the test suite:
the files, the claims' contract and the exit status; and the static pod threshold and the message
closed forms against values worked out by hand."""

import json

import numpy as np
import pandas as pd
import pytest

import hetlb
from hetlb.cli import main
from hetlb.errors import InputError
from hetlb.experiments import reproduce
from hetlb.experiments.zhou import herding_claims, messages_per_arrival, pod_overload_load, policy_table

TINY = {
    "zhou-fig1": {"loads": [0.3, 0.9], "slots": 1500, "warmup": 500, "replications": 2},
    "zhou-fig2": {
        "loads": [0.5, 0.8],
        "corollary_p_hats": [1.0, 0.01],
        "slots": 1500,
        "warmup": 500,
        "replications": 2,
    },
    "zhou-heavy-traffic": {
        "loads": [0.8, 0.9, 0.95],
        "relaxation_times": 20.0,
        "warmup_relaxation_times": 5.0,
        "replications": 2,
    },
}
CLAIM_IDS = {"zhou-fig1": {"C10", "C11"}, "zhou-fig2": {"C10", "C12"}, "zhou-heavy-traffic": {"C13", "C14"}}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(TINY))
def test_writes_points_figure_and_claims(name, tmp_path):
    report = reproduce(name, out=tmp_path, store=str(tmp_path / "store.sqlite"), executor="serial", **TINY[name])
    assert (tmp_path / f"{name}.png").stat().st_size > 10_000
    assert (tmp_path / "points.csv").read_text().startswith("point,load,")
    written = json.loads((tmp_path / "claims.json").read_text())
    assert {claim["id"] for claim in written["claims"]} == CLAIM_IDS[name]
    assert "loads" in written["parameters_lost_by_the_paper"]
    assert written["all_claims_hold"] == all(claim["holds"] for claim in written["claims"])
    assert report["claims"] == written["claims"]


def test_cli_exit_status_follows_the_claims(tmp_path):
    settings = [f"--set={key}={json.dumps(value)}" for key, value in TINY["zhou-heavy-traffic"].items()]
    status = main(
        [
            "reproduce",
            "zhou-heavy-traffic",
            "--out",
            str(tmp_path),
            "--store",
            str(tmp_path / "s.sqlite"),
            "--executor",
            "serial",
            *settings,
        ]
    )
    assert status == (0 if json.loads((tmp_path / "claims.json").read_text())["all_claims_hold"] else 1)


def test_pod_threshold_by_hand():
    # speeds 1, 1, 0.1, 0.1 and d = 2: both samples are the two slow servers with probability
    # 1 / C(4, 2) = 1/6, so they receive at least lambda / 6 against their capacity 0.2: unstable
    # from load 0.2 / (2.2 / 6); the three slowest (capacity 1.2, probability 3/6) give a larger load
    assert pod_overload_load([1.0, 1.0, 0.1, 0.1], 2) == pytest.approx(0.2 * 6 / 2.2)


def test_message_closed_forms_by_hand():
    options = {"p_hat": 0.5, "push_d": 3, "pod_d": 2, "push_trigger": "arrival", "increment_on_dispatch": False}
    per_job = hetlb.SlottedSystem.from_speeds([1.0] * 4, n_dispatchers=2, load=0.5, routing="job")
    assert messages_per_arrival("jsq", policy_table("jsq", options), per_job) == pytest.approx(8.0)
    per_slot = hetlb.SlottedSystem.from_speeds([1.0] * 4, n_dispatchers=2, load=0.5, arrivals="bernoulli")
    # Bernoulli arrivals: a decision, and a push try, in every slot with an arrival, one job each
    assert messages_per_arrival("pod", policy_table("pod", options), per_slot) == pytest.approx(4.0)
    assert messages_per_arrival("l-jsq-push", policy_table("l-jsq-push", options), per_slot) == pytest.approx(3.0)
    assert messages_per_arrival("jiq", policy_table("jiq", options), per_slot) is None


def test_unknown_series_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="unknown series 'l-jsq-poll'"):
        reproduce("zhou-fig1", out=tmp_path, policies=["l-jsq-poll", "jsq"], store=None, executor="serial")


def herding_tables(delays: dict, growing: dict):
    """A summary table and its runs for herding_claims: ``delays[label][load]`` is the list of
    per-replication mean delays (paired by replication), ``growing[label]`` the loads that grow."""
    runs = pd.DataFrame(
        [
            {"policy": label, "system.load": load, "replication": r, "mean_delay": value}
            for label, by_load in delays.items()
            for load, values in by_load.items()
            for r, value in enumerate(values)
        ]
    )
    table = pd.DataFrame(
        [
            {
                "policy": label,
                "load": load,
                "mean_delay": float(np.mean(values)),
                "grows": load in growing.get(label, []),
                "number_in_system_growth": 0.0,
            }
            for label, by_load in delays.items()
            for load, values in by_load.items()
        ]
    )
    return table, runs


def test_herding_verdict_names_each_load_where_an_led_policy_is_not_below_jsq():
    jsq = {0.5: [10.0, 11.0, 10.5], 0.9: [20.0, 21.0, 20.5]}
    delays = {
        "jsq": jsq,
        "l-jba-push": {0.5: [5.0, 5.5, 5.2], 0.9: [15.0, 16.0, 15.2]},
        "l-jsq-push": {0.5: [6.0, 6.4, 6.1], 0.9: [30.0, 31.0, 30.1]},
        "pod": {0.5: [50.0, 60.0, 70.0], 0.9: [90.0, 95.0, 99.0]},
    }
    table, runs = herding_tables(delays, {"pod": [0.5, 0.9]})
    herding, stability = herding_claims(table, runs, pod_threshold=0.4)
    assert herding.measured["loads_where_led_is_not_below_jsq"] == {"l-jba-push": [], "l-jsq-push": [0.9]}
    assert not herding.holds and stability.holds
    # level at a load (paired differences around 0) is not below either
    delays["l-jsq-push"][0.9] = [19.0, 22.0, 20.5]
    herding, _ = herding_claims(*herding_tables(delays, {"pod": [0.5, 0.9]}), pod_threshold=0.4)
    assert herding.measured["loads_where_led_is_not_below_jsq"]["l-jsq-push"] == [0.9] and not herding.holds
    delays["l-jsq-push"][0.9] = [12.0, 13.0, 12.4]
    herding, _ = herding_claims(*herding_tables(delays, {"pod": [0.5, 0.9]}), pod_threshold=0.4)
    assert herding.holds
