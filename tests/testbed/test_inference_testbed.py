"""hetlb testbed on emulated inference engines: the [testbed] engine keys, the request's work as the
simulator's job size, what hetlb serve, HAProxy and nginx are given (the models, one pool per
model), the live herd against the continuous model's count, and a reduced run of
examples/testbed-inference.toml (every process stopped at the end)."""

from __future__ import annotations

import asyncio
import math
import tomllib
from pathlib import Path

import numpy as np
import pytest

from hetlb import testbed as testbed_module
from hetlb.errors import InputError
from hetlb.kernels.decisions import record_herd
from hetlb.load.inference import herd_fraction
from hetlb.processes import program_path
from hetlb.testbed import scenario
from hetlb.testbed.balancer_pools import ROUTE_HEADER
from hetlb.testbed.commands import backend_specs, listen_arguments, serve_arguments
from hetlb.testbed.peers import PEERS, ROUTERS, haproxy_config, nginx_config
from hetlb.wire.addresses import free_port_block

from support.serve_processes import leftover_processes

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "testbed-inference.toml"
SEVERAL = ROOT / "examples" / "testbed-inference-dispatchers.toml"
PROGRAMS = [program for program in ("haproxy", "nginx", "vllm-router", "sglang-router") if program_path(program)]


def engine_scenario(**testbed) -> dict:
    """Three engines (speeds 1, 1, 1/2, up to 4 requests each), two models placed on two each."""
    settings = {
        "engine": "openai",
        "models": ["a", "b"],
        "token_time_ms": 2.0,
        "prefill_cost": 0.05,
        "prompt_tokens": 20,
        "output_tokens": 6,
        "loads": [0.5],
        "policies": ["jsq"],
        "warmup": 0.3,
        "duration": 1.0,
        **testbed,
    }
    system = {"speeds": "2x1,1x0.5", "concurrency": 4, "rate_curve": "saturating:alpha=0.2", "graph": [[0, 1], [1, 2]]}
    return {"system": system, "testbed": settings, "run": {"jobs": 5000, "replications": 2}}


def test_the_time_unit_is_the_token_time_times_the_mean_work():
    """Deterministic laws: W = round(P) x prefill_cost + round(n) exactly, deterministic sizes."""
    bed = testbed_module.TestbedScenario.from_mapping(engine_scenario(prompt_tokens=20.4, output_tokens=6))
    assert bed.mean_service_ms == (20 * 0.05 + 6) * 2.0
    system = bed.system_at(0.5)
    assert system.job_sizes.kind == "deterministic" and system.n_types == 2
    assert bed.type_names() == ["a", "b"]


def test_random_token_laws_give_the_empirical_law_of_the_work():
    """Exponential outputs of mean 32, deterministic prompts of 100 at 0.02: the sample's mean work is
    E[round(32 X) clipped at 1] + 2 within 4 standard errors of the sample (X exponential: the
    rounded law's mean is sum_k k P(k - 1/2 <= 32 X < k + 1/2), P(N = 1) = P(32 X < 3/2))."""
    bed = testbed_module.TestbedScenario.from_mapping(
        engine_scenario(prompt_tokens=100, prefill_cost=0.02, output_tokens=32, output_law="exponential")
    )
    sizes = bed.system_at(0.5).job_sizes
    assert sizes.kind == "empirical" and math.isclose(sizes.values.mean(), 1.0)
    k = np.arange(2, 2000)
    exact = 1 - math.exp(-1.5 / 32) + float(np.sum(k * (np.exp(-(k - 0.5) / 32) - np.exp(-(k + 0.5) / 32))))
    work_mean = bed.mean_service_ms / 2.0
    standard_error = math.sqrt(32**2 / scenario.WORK_SAMPLE)
    assert abs(work_mean - (exact + 2.0)) < 4 * standard_error


@pytest.mark.parametrize(
    "change, message",
    [
        ({"testbed": {"engine": "vllm"}}, "testbed.engine: must be one of openai"),
        ({"testbed": {"models": ["a"]}}, "testbed.models: name one model per job type of [system]: 2, got 1"),
        ({"testbed": {"models": ["a", "a"]}}, "testbed.models: each model once"),
        ({"testbed": {"models": "a,b"}}, "testbed.models: must be a list of model names"),
        ({"testbed": {"mean_service_ms": 20.0}}, "testbed.mean_service_ms: an engine's time unit"),
        ({"testbed": {"token_time_ms": 0}}, "testbed.token_time_ms: must be a finite number > 0"),
        ({"testbed": {"output_law": "lognormal"}}, "testbed.output_law: lognormal needs its scv"),
        ({"testbed": {"engine": None, "models": ["a", "b"]}}, "testbed.models: unknown key"),
        ({"system": {"job_sizes": "exponential"}}, "system.job_sizes: an engine's job sizes follow"),
        ({"system": {"graph": [[0], [1]]}}, "system.graph: server 2 holds no model"),
    ],
)
def test_bad_engine_scenarios_are_one_line_errors(change, message):
    data = engine_scenario()
    data["testbed"] |= change.get("testbed", {})
    data["system"] |= change.get("system", {})
    with pytest.raises(InputError) as error:
        testbed_module.TestbedScenario.from_mapping(data)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_policies_that_decide_otherwise_live_run_without_a_prediction():
    """On batching engines hetlb serve knows no concurrency: sed and jiq decide otherwise than the
    simulator's (run live only); jfsq (one concurrency and curve) and l-jba (one phi(c)) alike."""
    bed = testbed_module.TestbedScenario.from_mapping(engine_scenario(policies=["jsq", "jfsq", "sed", "jiq", "l-jba"]))
    assert sorted(bed.live_only) == ["jiq", "sed"]
    assert [bed.simulated({"id": p}) for p in ("jsq", "jfsq", "sed", "jiq", "l-jba")] == [
        True,
        True,
        False,
        False,
        True,
    ]
    other_curves = engine_scenario(policies=["jfsq"])
    other_curves["system"]["concurrency"] = "2x4,1x8"
    assert list(testbed_module.TestbedScenario.from_mapping(other_curves).live_only) == ["jfsq"]


def test_engines_serve_and_the_balancers_are_given_the_models():
    bed = testbed_module.TestbedScenario.from_mapping(engine_scenario())
    system = bed.system_at(0.5)
    listen = listen_arguments(system, bed.type_names())
    assert [listen[i].rsplit(",models=", 1)[1] for i in range(1, 6, 2)] == ["a", "a|b", "b"]
    urls = [f"http://127.0.0.1:{9000 + s}" for s in range(3)]
    specs = backend_specs(system, urls, bed.type_names())
    assert [spec.split(",types=")[1] for spec in specs] == ["a", "a|b", "b"]
    arguments = serve_arguments({"id": "jsq"}, 8000, 8100, specs, bed)
    assert arguments[arguments.index("--type-body-field") + 1] == "model"
    backends = list(zip(urls, [1.0, 1.0, 0.5]))
    pools = {"a": [0, 1], "b": [1, 2]}
    haproxy = haproxy_config(8000, backends, "leastconn", pools=pools)
    assert f"use_backend pool_%[req.hdr({ROUTE_HEADER})]" in haproxy
    assert (
        "backend pool_b" in haproxy
        and "server s1 127.0.0.1:9001 weight 256\n    server s2 127.0.0.1:9002 weight 128" in haproxy
    )
    nginx = nginx_config(8000, backends, "least_conn", Path("/tmp/x"), pools=pools)
    assert (
        "map $http_x_model $pool" in nginx and "proxy_buffering off;" in nginx and "proxy_pass http://$pool;" in nginx
    )
    assert "upstream pool_a {" in nginx and "server 127.0.0.1:9002 weight=128;" in nginx


def test_the_live_herd_counts_as_the_continuous_model_does():
    """Exact small case, then random decisions against the kernel's own record_herd run in order."""
    times = np.array([0.0, 0.5, 0.7, 2.0, 2.1])
    dispatchers = np.array([0, 1, 1, 0, 1])
    servers = np.array([0, 0, 0, 0, 1])
    # 0.5: after dispatcher 0 at 0.0 (herd); 0.7: after itself; 2.0: 1.3 after; 2.1: first on server 1
    assert herd_fraction(times, dispatchers, servers, 1.0) == 1 / 5
    assert math.isnan(herd_fraction(np.zeros(0), np.zeros(0, int), np.zeros(0, int), 1.0))
    rng = np.random.default_rng(3)
    n, n_servers, n_dispatchers, window = 5000, 6, 4, 0.3
    times = np.sort(rng.exponential(0.05, n).cumsum())
    dispatchers = rng.integers(0, n_dispatchers, n)
    servers = rng.integers(0, n_servers, n)
    decisions, same, other = (np.zeros(n_dispatchers, np.int64) for _ in range(3))
    last_time, last_dispatcher = np.full(n_servers, -np.inf), np.full(n_servers, -1, np.int64)
    for t, m, s in zip(times, dispatchers, servers):
        record_herd(decisions, same, other, last_time, last_dispatcher, m, s, t, window)
        last_time[s], last_dispatcher[s] = t, m
    order = rng.permutation(n)  # any order of the records
    assert herd_fraction(times[order], dispatchers[order], servers[order], window) == other.sum() / n


def test_each_request_goes_to_its_models_target_with_the_same_draws():
    """target_per_model: every request is sent to the target of its model's place in ``models``, and
    the epochs and marks are those of the same seed without it (the drawn targets still drawn)."""
    from hetlb.load.inference import InferenceLoadGenerator, InferenceLoadSpec

    first = free_port_block(3)
    targets = tuple(f"http://127.0.0.1:{first + m}" for m in range(3))  # nothing listens there
    common = {"rate": 200.0, "duration": 0.3, "seed": 4, "models": {"a": 1.0, "b": 2.0, "c": 1.0}, "timeout": 2.0}
    sent: list = []
    spec = InferenceLoadSpec(targets=targets, target_per_model=True, **common)
    asyncio.run(
        InferenceLoadGenerator(spec, progress=False, on_send=lambda t, target, r: sent.append((target, r))).run()
    )
    assert sent and all(target == targets["abc".index(request.model)] for target, request in sent)
    plain = InferenceLoadGenerator(InferenceLoadSpec(targets=targets, **common), progress=False)
    arrivals = plain.arrivals(np.random.default_rng(4))
    assert [next(arrivals)[2] for _ in sent] == [request for _, request in sent]
    with pytest.raises(InputError, match="target_per_model: needs one target per model"):
        InferenceLoadSpec(targets=targets[:2], target_per_model=True, **common)


def test_the_example_scenarios_are_the_documented_ones():
    bed = testbed_module.TestbedScenario.from_toml(EXAMPLE)
    system = bed.system_at(0.6)
    assert sorted(system.speed.tolist()) == [0.5] * 3 + [1.0] * 3 + [2.0] * 2 and bed.engine is not None
    assert bed.engine.models == ("llama-3-70b", "llama-3-8b", "qwen-2-7b") and system.arrivals.kind == "mmpp"
    assert [p["id"] for p in bed.policies] == ["jfsq", "sed", "jiq", "l-jba", "jsq"]
    several = testbed_module.TestbedScenario.from_toml(SEVERAL)
    assert several.dispatchers == 4 and [several.signals_of(p) for p in several.policies] == [
        "inflight",
        "inflight,metrics:vllm:tau=50ms",
        "piggyback,push",
    ]


def test_a_reduced_example_run_streams_routes_on_the_model_and_is_predicted(tmp_path):
    """examples/testbed-inference.toml cut to jfsq and the installed balancers and routers, 1 s
    measured: no request errs (an engine answers 404 to a model it does not hold, so 0 errors is 0
    misrouted), the streams carry tokens, and jfsq's end-to-end mean lies in its prediction
    interval; each router got exactly its model's requests; every process stopped."""
    data = tomllib.loads(EXAMPLE.read_text())
    data["testbed"] |= {"policies": ["jfsq"], "compare": PROGRAMS, "warmup": 0.3, "duration": 1.0}
    data["testbed"] |= {"prediction_runs": 40}
    data["run"] = {"jobs": 20_000, "replications": 2, "warmup": 100.0}
    bed = testbed_module.run_testbed_mapping(data, tmp_path, say=lambda _: None)
    assert {row["balancer"] for row in bed.rows} == {"hetlb"} | {p.id for p in PEERS.values() if p.program in PROGRAMS}
    for detail in bed.details:
        live, row = detail["live"], detail["row"]
        assert live["errors"] == 0 and live["answered"] == live["requests"] > 20, (
            row["balancer"],
            live["errors_by_kind"],
        )
        assert live["output_tokens"] >= live["answered"] and 0 < live["mean_ttft"] < live["mean_e2e"]
        balancer = detail["row"]["balancer"]
        if balancer != "hetlb" and PEERS[balancer].program in ROUTERS:  # target m is model m's router
            per_model = [live["per_model"][name]["requests"] for name in data["testbed"]["models"]]
            assert sorted(live["per_target"].values()) == sorted(per_model)
    (jfsq,) = [row for row in bed.rows if row["balancer"] == "hetlb"]
    assert jfsq["agrees"], jfsq
    assert (tmp_path / "testbed.png").stat().st_size > 0
    if PROGRAMS:
        assert set(bed.against_peers()["0.6"]["best"]) == set(PROGRAMS)
    assert leftover_processes(" backend --listen 127.0.0.1:0") == [] and leftover_processes("hetlb-nginx") == []
    assert leftover_processes(" backend --openai") == [] and leftover_processes("hetlb-haproxy") == []
    assert leftover_processes("vllm-router --host") == [] and leftover_processes("sglang-router launch") == []
