"""hetlb testbed: its scenario files, the command lines it gives hetlb serve, HAProxy and nginx on
real backends (their weights are the speeds; every process stopped at the end), and a live run of
hetlb serve against the simulator."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
from scipy import stats

from hetlb import testbed as testbed_module
from hetlb.cli import build_parser, main
from hetlb.errors import InputError
from hetlb.processes import ChildFailed, program_path
from hetlb.testbed import commands, report, runs
from hetlb.testbed.balancer_pools import weight_of
from hetlb.testbed.commands import backend_specs, serve_arguments
from hetlb.testbed.peers import PEERS, haproxy_config, nginx_config

from support.serve_processes import leftover_processes

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "testbed.toml"
ALPHA = 0.001


def scenario(**testbed) -> dict:
    return {
        "system": {"speeds": "2x1,2x0.25"},
        "testbed": {"mean_service_ms": 5.0, "loads": [0.5], "warmup": 0.3, "duration": 1.0, **testbed},
        "run": {"jobs": 5000, "replications": 3},
    }


def test_the_example_scenario_is_the_documented_one():
    example = testbed_module.TestbedScenario.from_toml(EXAMPLE)
    system = example.system_at(0.8)
    assert sorted(system.speed.tolist()) == sorted([1, 0.5, 0.25, 0.125] * 4)
    assert example.loads == [0.5, 0.8] and example.mean_service_ms == 20.0
    assert [p["id"] for p in example.policies] == ["jsq", "jfsq", "jfiq", "jiq", "weighted-random"]
    assert math.isclose(system.total_arrival_rate, 0.8 * 7.5)
    several = testbed_module.TestbedScenario.from_toml(ROOT / "examples" / "testbed-dispatchers.toml")
    assert several.dispatchers == 4 and [bed.signals_of(p) for bed in [several] for p in several.policies] == [
        "poll:tau=100ms",
        "piggyback,push",
        "piggyback,push",
        "inflight,piggyback",
    ]
    batching = testbed_module.TestbedScenario.from_toml(ROOT / "examples" / "testbed-batch-servers.toml").system_at(0.7)
    assert batching.concurrency.tolist() == [8] * 4 and batching.arrivals.kind == "mmpp"
    assert math.isclose(batching.total_arrival_rate, 0.7 * 3 * 8 / (1 + 0.2 * 7))


@pytest.mark.parametrize(
    "change, message",
    [
        ({"system": {"speeds": "2x1", "load": 0.5}}, "system.load: the testbed sets the load"),
        ({"testbed": {"loads": []}}, "testbed.loads: must be a non-empty list"),
        ({"testbed": {"loads": [1.2]}}, "arrival_rate"),
        ({"testbed": {"rate": 3}}, "testbed.rate: unknown key"),
        (
            {"testbed": {"compare": ["traefik"]}},
            "testbed.compare: must be one of haproxy, nginx, envoy, vllm-router, sglang-router",
        ),
        ({"testbed": {"compare": ["vllm-router"]}}, "testbed.compare: vllm-router routes inference engines only"),
        ({"testbed": {"policies": [], "compare": []}}, "testbed.policies: give policies"),
        ({"testbed": {"policies": ["jsq-lisf"]}}, "testbed.policies: 'jsq-lisf' is not a live policy"),
        ({"testbed": {"policies": ["random"], "loads": [0.7]}}, "policy: random is unstable here: server 2"),
        ({"testbed": {"mean_service_ms": 0}}, "testbed.mean_service_ms: must be a finite number > 0"),
        ({"policy": {"id": "jsq"}}, "policy: a testbed runs the policies of testbed.policies"),
        ({"system": {"speeds": "2x1", "model": "slotted"}}, "system.model: the testbed runs the continuous"),
        (
            {"system": {"speeds": "2x1,2x0.5", "graph": [[0, 1], [2, 3]]}, "testbed": {"compare": ["haproxy"]}},
            "testbed.compare: HAProxy and nginx know no job types",
        ),
    ],
)
def test_bad_scenarios_are_one_line_errors(change, message):
    data = scenario()
    for table, values in change.items():
        data[table] = values if table != "testbed" else {**data["testbed"], **values}
    with pytest.raises(InputError) as error:
        testbed_module.TestbedScenario.from_mapping(data)
    assert message in str(error.value)


def test_serve_gets_speeds_types_buffers_and_the_policy():
    data = scenario(policies=[{"id": "pod", "d": 2}, {"id": "l-jba", "signals": "piggyback,push"}], dispatchers=2)
    data["testbed"]["signals"] = "poll:tau=100ms"
    data["system"] = {"speeds": "1,1,0.5", "graph": [[0, 1], [1, 2]], "buffer": 4, "arrival_rate": None}
    del data["system"]["arrival_rate"]
    bed = testbed_module.TestbedScenario.from_mapping(data)
    system = bed.system_at(0.5)
    specs = backend_specs(system, ["http://a", "http://b", "http://c"])
    assert specs == [
        "http://a,speed=1,types=t0,buffer=4",
        "http://b,speed=1,types=t0|t1,buffer=4",
        "http://c,speed=0.5,types=t1,buffer=4",
    ]
    arguments = serve_arguments(bed.policies[0], 8000, 9000, specs, bed)
    assert arguments[:5] == ["serve", "--listen", "127.0.0.1:8000", "--admin", "127.0.0.1:9000"]
    for flag, value in [("--policy", "pod"), ("--d", "2"), ("--dispatchers", "2"), ("--signals", "poll:tau=100ms")]:
        assert arguments[arguments.index(flag) + 1] == value
    assert [arguments[i + 1] for i, a in enumerate(arguments) if a == "--backend"] == specs
    build_parser().parse_args(["testbed", str(EXAMPLE), "--compare", "haproxy,nginx"])
    # two dispatchers: the model of several dispatchers, with the live signals as update signals
    assert bed.simulated(bed.policies[0]) and bed.simulated(bed.policies[1])
    assert bed.model_update(bed.policies[0]) == "snapshot:tau=20:phases=independent"  # 100 ms / 5 ms
    assert bed.model_update(bed.policies[1]) == "piggyback,push:p_hat=1:d=2"
    # the answers' measured lag (1 ms: 0.2 time units of 5 ms) delays the piggybacked reports only
    assert bed.model_update(bed.policies[1], 1.0) == "piggyback:delay=0.2,push:p_hat=1:d=2"
    # the polls' measured delay (0.5 ms: 0.1 time units) delays the snapshots
    assert bed.model_update(bed.policies[0], 1.0, 0.5) == "snapshot:tau=20:phases=independent:delay=0.1"
    assert report.mean_delay_ms([{"scrape_delay": {"count": 4, "mean_ms": 0.5}}], "scrape_delay") == 0.5
    one = testbed_module.TestbedScenario.from_mapping(scenario(policies=["jfsq"]))
    assert one.model_update(one.policies[0]) is None  # exact counts: the single-dispatcher model
    lagged = one.model_update(one.policies[0], 2.0)
    assert lagged == f"increment,piggyback:delay={2.0 / one.mean_service_ms:.6g}"
    statuses = [
        {"answer_lag": {"count": 3, "mean_ms": 1.0}, "forward_delay": {"count": 3, "mean_ms": 0.5}},
        None,
        {"answer_lag": {"count": 1, "mean_ms": 3.0}, "forward_delay": {"count": 0, "mean_ms": None}},
    ]
    assert report.mean_delay_ms(statuses, "answer_lag") == 1.5  # weighted by requests
    assert report.mean_delay_ms(statuses, "forward_delay") == 0.5
    assert report.unseen_delay_ms(statuses) == 2.0 and report.unseen_delay_ms([None]) is None
    assert bed.scenario(bed.policies[1], 0.5).system.n_servers == 3
    led = serve_arguments(bed.policies[1], 8000, 9000, specs, bed)
    assert led[led.index("--signals") + 1] == "piggyback,push" and "--set" not in led


def test_multi_slot_backends_and_bursts_reach_the_backends_and_the_load():
    """concurrency, rate_curve and arrivals of [system]: each backend's --listen carries its own
    (every digit of the curve), the load generator the arrivals in the time unit; the capacity
    sets the rate (2 servers of speed 1, c = 8, saturating 0.25: phi(8) = 8 / 2.75 each)."""
    system = {
        "speeds": "1,0.5",
        "concurrency": "8,inf",
        "rate_curve": [[1, "saturating:alpha=0.25"], [1, "table:1,1.5,1.8333333333333333"]],
        "arrivals": "mmpp:ratio=4,on=10,off=30",
        "job_sizes": "lognormal",
        "scv": 2.0,
    }
    bed = testbed_module.TestbedScenario.from_mapping({**scenario(policies=["jsq"]), "system": system})
    at = bed.system_at(0.5)
    assert commands.listen_arguments(at) == [
        "--listen", "127.0.0.1:0,speed=1.0,concurrency=8,rate_curve=saturating:alpha=0.25",
        "--listen", "127.0.0.1:0,speed=0.5,concurrency=inf,rate_curve=table:1.0,1.5,1.8333333333333333",
    ]  # fmt: skip
    assert commands.job_size_arguments(at.job_sizes) == ["--job-sizes", "lognormal", "--scv", "2.0"]
    spec = testbed_module.Testbed(bed, Path("unused")).load_spec(["http://x"], at)
    assert spec.arrivals == at.arrivals and spec.time_unit_ms == 5.0
    assert math.isclose(spec.rate, 0.5 * (8 / 2.75 + 0.5 * 1.8333333333333333) / 5.0 * 1e3)


@pytest.mark.parametrize("policy", ["jfsq", "jiq", "sed", "weighted-random", "l-jba"])
def test_policies_that_need_the_curves_are_refused_on_multi_slot_backends(policy):
    system = {"speeds": "2x1,2x0.5", "concurrency": "2x8,2x4", "rate_curve": "saturating:alpha=0.2"}
    with pytest.raises(InputError, match=f"testbed.policies: '{policy}' decides on the backends' concurrency"):
        testbed_module.TestbedScenario.from_mapping({**scenario(policies=[policy]), "system": system})
    # one concurrency and curve: capacity = speed x phi(8) for all (weights alike), and at equal n the
    # rate mu phi(b')/b' of jfsq's ties is in the speeds' order; jiq's idle and sed's delay still differ
    same_curve = {**system, "concurrency": 8}
    if policy in ("weighted-random", "l-jba", "jfsq"):
        testbed_module.TestbedScenario.from_mapping({**scenario(policies=[policy]), "system": same_curve})
    else:
        with pytest.raises(InputError, match=f"'{policy}' decides on the backends' concurrency"):
            testbed_module.TestbedScenario.from_mapping({**scenario(policies=[policy]), "system": same_curve})


def test_compare_names_known_balancers(tmp_path, capsys):
    assert main(["testbed", str(EXAMPLE), "--compare", "haproxy,traefik", "--out", str(tmp_path / "out")]) == 2
    assert (
        capsys.readouterr().err
        == "hetlb: error: --compare: must be one of haproxy, nginx, envoy, vllm-router, sglang-router, got 'traefik'\n"
    )
    assert not (tmp_path / "out").exists()


def test_peer_configs_weigh_by_speed():
    assert weight_of([1, 0.5, 0.25, 0.125]) == [256, 128, 64, 32]
    assert weight_of([1000, 1]) == [256, 1]
    backends = [("http://127.0.0.1:9001", 1.0), ("http://127.0.0.1:9002", 0.25)]
    config = haproxy_config(8000, backends, "leastconn")
    assert "bind 127.0.0.1:8000" in config and "balance leastconn" in config
    assert "server s0 127.0.0.1:9001 weight 256" in config and "server s1 127.0.0.1:9002 weight 64" in config
    config = nginx_config(8000, backends, "random two least_conn", Path("/tmp/x"))
    assert "listen 127.0.0.1:8000;" in config and "random two least_conn;" in config
    assert "server 127.0.0.1:9002 weight=64;" in config and "pid /tmp/x/nginx.pid;" in config


PROGRAMS = [program for program in ("haproxy", "nginx") if program_path(program)]  # the plain backends' peers


@pytest.mark.skipif(not PROGRAMS, reason="neither haproxy nor nginx is installed")
def test_peers_on_real_backends(tmp_path):
    """Each installed balancer in front of 2 backends of speed 1 and 2 of speed 1/4: every request
    answered and attributed to a backend; round robin splits them 4:1 by weight (within one cycle of
    the weights per batch); every process stopped."""
    bed = testbed_module.run_testbed_mapping(
        scenario(policies=[], compare=PROGRAMS, warmup=0.2, duration=0.6), tmp_path, say=lambda _: None
    )
    rows = {row["balancer"]: row for row in bed.rows}
    assert set(rows) == {peer.id for peer in PEERS.values() if peer.program in PROGRAMS}
    for detail in bed.details:
        live = detail["live"]
        assert live["errors"] == 0 and live["blocked"] == 0 and live["answered"] == live["requests"] > 0
        assert sum(live["per_backend"].values()) == live["answered"] and len(live["per_backend"]) == 4
        if detail["row"]["balancer"] == "haproxy-roundrobin":
            fast = sum(count for url, count in live["per_backend"].items() if url in bed.backend_urls[:2])
            assert abs(fast / live["answered"] - 0.8) * live["answered"] <= 2 * (256 + 64) / 64 + 1
        assert detail["simulated"] is None and "sim_mean_ms" not in detail["row"]  # no registered rule
    with (tmp_path / "testbed.csv").open() as handle:
        assert len(list(csv.DictReader(handle))) == len(rows)
    assert json.loads((tmp_path / "testbed.json").read_text())["runs"]
    assert (tmp_path / "testbed.png").stat().st_size > 0
    assert leftover_processes("hetlb-haproxy") == [] and leftover_processes("hetlb-nginx") == []
    assert leftover_processes(" backend --listen 127.0.0.1:0") == []


def test_signals_serve_would_refuse_are_refused_before_anything_starts(tmp_path, capsys):
    path = tmp_path / "bad.toml"
    path.write_text('[system]\nspeeds = "2x1"\n[testbed]\nloads = [0.3]\nsignals = "smoke"\nduration = 1.0\n')
    assert main(["testbed", str(path), "--out", str(tmp_path / "out"), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hetlb: error: testbed.signals:") and err.count("\n") == 1
    assert leftover_processes(" backend --listen 127.0.0.1:0") == []


def test_a_failing_dispatcher_stops_everything(tmp_path, capsys, monkeypatch):
    """A dispatcher that exits at its start (here: a flag hetlb serve does not know): the testbed
    reports one line, exit 1, and the backends it started are stopped."""
    arguments = commands.serve_arguments
    monkeypatch.setattr(runs, "serve_arguments", lambda *a: [*arguments(*a), "--no-such-flag"])
    path = tmp_path / "bed.toml"
    path.write_text('[system]\nspeeds = "2x1"\n[testbed]\nloads = [0.3]\nduration = 1.0\n[run]\njobs = 1000\n')
    assert main(["testbed", str(path), "--out", str(tmp_path / "out"), "-q"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("hetlb: testbed failed: hetlb serve exited with status 2") and err.count("\n") == 1
    assert leftover_processes(" backend --listen 127.0.0.1:0") == []
    with pytest.raises(ChildFailed):
        testbed_module.run_testbed_mapping(
            {**scenario(), "run": {"jobs": 1000}}, tmp_path / "again", say=lambda _: None
        )
    assert leftover_processes(" backend --listen 127.0.0.1:0") == []


SERVE = "serve" in build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]


@pytest.mark.skipif(not SERVE, reason="hetlb serve is not part of this build")
def test_hetlb_serve_against_the_simulator(tmp_path):
    """jsq and jfsq behind one hetlb serve on 4 backends at load 0.5: each live mean minus the path
    overhead has an interval (batch means, Bonferroni over the two) that meets the simulated one
    widened by 5% plus the backends' timer lateness (at most 2 ms a request, one-sided)."""
    bed = testbed_module.run_testbed_mapping(
        {**scenario(policies=["jsq", "jfsq"], duration=2.5), "run": {"jobs": 50_000, "replications": 5}},
        tmp_path,
        say=lambda _: None,
    )
    for detail in bed.details:
        row, live = detail["row"], detail["live"]
        assert live["errors"] == 0 and live["answered"] == live["requests"]
        low, high = live["mean_response_time_ci"]
        widen = stats.t.ppf(1 - ALPHA / 4, 19) / stats.t.ppf(0.975, 19)
        shift = live["mean_response_time"] - row["live_minus_overhead_ms"]
        low, high = (
            row["live_minus_overhead_ms"] - widen * (row["live_minus_overhead_ms"] - (low - shift)),
            (row["live_minus_overhead_ms"] + widen * ((high - shift) - row["live_minus_overhead_ms"])),
        )
        assert low <= row["sim_ci_high_ms"] * 1.05 + 2.0 and high >= row["sim_ci_low_ms"] * 0.95


@pytest.mark.skipif(not SERVE, reason="hetlb serve is not part of this build")
def test_saturating_backends_under_mmpp_traffic_are_predicted(tmp_path):
    """THE check of multi-slot backends and bursts: jsq behind one hetlb serve on 2 backends of
    speed 1 that serve up to 8 requests at once (saturating, alpha 0.2: 3.3 times one request's
    rate with 8), mean 40 ms alone, under MMPP traffic (the on phase 4 times the off phase's
    rate, over capacity, phases of 80 ms and 240 ms on average: short enough that an 8 s run
    holds many, so that its prediction interval is narrow) at load 0.6: the live mean minus the
    path's overhead lies in the prediction interval of simulated runs of its length (widened by
    5%)."""
    system = {
        "speeds": "2x1",
        "concurrency": 8,
        "rate_curve": "saturating:alpha=0.2",
        "arrivals": "mmpp:ratio=4,on=2,off=6",
    }
    testbed = {"mean_service_ms": 40.0, "loads": [0.6], "policies": ["jsq"], "warmup": 1.0, "duration": 8.0}
    bed = testbed_module.run_testbed_mapping(
        {"system": system, "testbed": testbed, "run": {"jobs": 20_000, "replications": 3}}, tmp_path, say=lambda _: None
    )
    (detail,) = bed.details
    live, row = detail["live"], detail["row"]
    assert live["errors"] == 0 and live["answered"] == live["requests"] > 400
    assert row["agrees"], row


def test_a_live_run_is_predicted_by_simulated_runs_of_its_length():
    """The prediction runs have the live run's warm-up and window in time units (5 ms): at load 0.5
    on speeds 2 x 1 and 2 x 0.25 (lambda = 1.25 per unit), a 1 s window holds 250 expected jobs."""
    bed = testbed_module.TestbedScenario.from_mapping(scenario(prediction_runs=40))
    run = bed.live_length_run(0.5)
    assert run == {"jobs": 250, "warmup": pytest.approx(60.0), "replications": 40}
    prediction = testbed_module.Testbed(bed, Path("unused")).predict(bed.scenario({"id": "jsq"}, 0.5, None, run))
    assert prediction["runs"] == 40 and prediction["low"] < prediction["mean"] < prediction["high"]
    with pytest.raises(InputError, match="testbed.prediction_runs"):
        testbed_module.TestbedScenario.from_mapping(scenario(prediction_runs=10))


def test_the_order_counts_only_the_pairs_a_run_of_this_length_determines():
    """a and b have apart prediction intervals, c overlaps b: the live order b < a is a real
    disagreement, while c's place beside b is either way in runs of this length."""
    bed = testbed_module.Testbed(testbed_module.TestbedScenario.from_mapping(scenario()), Path("unused"))

    def row(policy, live, low, high):
        return {"balancer": "hetlb", "load": 0.5, "policy": policy, "live_minus_overhead_ms": live,
                "sim_run_mean_ms": (low + high) / 2, "sim_run_low_ms": low, "sim_run_high_ms": high}  # fmt: skip

    bed.rows = [row("a", 10.0, 9.0, 11.0), row("b", 30.0, 20.0, 40.0), row("c", 25.0, 30.0, 50.0)]
    order = bed.order_agreement()["0.5"]
    assert order["live"] == ["a", "c", "b"] and order["simulated"] == ["a", "b", "c"]
    assert not order["same"] and order["same_where_determined"] and order["overlapping"] == [["b", "c"]]
    bed.rows[0]["live_minus_overhead_ms"] = 35.0  # now above b, whose interval lies above a's
    assert not bed.order_agreement()["0.5"]["same_where_determined"]
