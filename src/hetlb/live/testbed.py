"""``hetlb testbed SCENARIO.toml``: a scenario run live and simulated, side by side.

The testbed starts the scenario's backends (``hetlb backend``: the model's servers, one process),
then for each load and policy a dispatcher (``hetlb serve``, M processes with ``dispatchers = M``)
and the open-loop load generator (``hetlb loadgen``'s engine, in this process) for a warm-up and a
measured window; and it simulates the same scenario (same speeds, graph, buffers, job sizes,
policy and load, time unit ``mean_service_ms``) with hetlb.simulate. With ``compare`` it also runs
the same backends behind HAProxy and nginx (hetlb.live.peers) at each load. Every child process is
stopped at the end, also when a run fails or the testbed is interrupted.

The scenario file is a simulator scenario whose load is set by the testbed, plus a [testbed] table::

    [system]                      # as in hetlb simulate (docs/reference/scenario.md), without load
    speeds = "4x1,4x0.5,4x0.25,4x0.125"
    concurrency = 8               # optional: the backends serve up to 8 requests at once,
    rate_curve = "saturating:alpha=0.2"  # at this rate curve
    arrivals = "mmpp:ratio=4,on=10,off=30"  # optional: the load generator's bursts

    [testbed]
    mean_service_ms = 20.0        # mean service time at speed 1: the time unit
    loads = [0.5, 0.8]
    policies = ["jsq", "jfsq"]    # ids, or tables such as {id = "pod", d = 2}
    warmup = 2.0                  # seconds sent before each measured window
    duration = 8.0                # measured seconds per run
    dispatchers = 1
    signals = "inflight,piggyback"
    compare = ["haproxy", "nginx"]
    seed = 1
    prediction_runs = 100         # simulated runs of the live run's length

    [run]                         # the simulator's run (hetlb.simulate's keywords)
    jobs = 100000
    replications = 5

Each hetlb run is simulated twice: in the steady state ([run]: the long-run mean and its
confidence interval), and as ``prediction_runs`` runs of the live run's own length (the same
warm-up and measured window from an empty system), whose 2.5% and 97.5% quantiles are the
interval one live run is predicted to fall in. A live mean response time is compared with it after
removing the path's overhead (the client's response time minus the backend's ``X-Sojourn-Ms``,
measured per request): it agrees when it lies within that prediction interval widened by
``AGREEMENT_MARGIN`` on each side. The prediction interval holds what the steady-state interval
leaves out: the live run is one finite run, and near saturation (a backend class close to its
capacity) a run of minutes scatters far more than the long-run mean's interval is wide.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import itertools
import json
import math
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hetlb import validation
from hetlb.errors import InputError
from hetlb.live.addresses import free_port_block, free_ports
from hetlb.live.balancer_pools import ROUTE_HEADER
from hetlb.live.inference_load import TOKEN_LIMIT, InferenceLoadSpec, generate_inference_load, parse_law, token_counts
from hetlb.live.loadgen import LoadSpec, generate_load
from hetlb.live.peers import PEERS, PROGRAMS, ROUTERS, start_peer, start_routers
from hetlb.model import System
from hetlb.model.job_sizes import SCV_KINDS, JobSizes
from hetlb.model.servers import RateCurve, concurrency_text
from hetlb.policies import POLICIES
from hetlb.policies.registry import JFSQ, L_JBA, WEIGHTED_RANDOM, policies_where
from hetlb.processes import ChildProcess, hetlb_command, program_path, wait_listening
from hetlb.results.base import Result, versions
from hetlb.scenario import Scenario, read_toml
from hetlb.signals import LiveRun, model_twin
from hetlb.signals import text as signal_text
from hetlb.simulation.dispatchers import default_herd_window
from hetlb.stats.intervals import positive_interval

AGREEMENT_MARGIN = 0.05
"""A live mean (minus the path's overhead) agrees with the simulation when it lies in the
prediction interval widened by this fraction on each side."""
PREDICTION_QUANTILES = (0.025, 0.975)
"""The prediction interval of one live run: these quantiles of the simulated runs of its length."""
TESTBED_DEFAULTS = {
    "mean_service_ms": 20.0,
    "loads": [0.5, 0.8],
    "policies": ["jsq", "jfsq"],
    "warmup": 2.0,
    "duration": 8.0,
    "dispatchers": 1,
    "signals": "inflight,piggyback",
    "compare": [],
    "seed": 1,
    "prediction_runs": 100,
    "engine": None,
    "gateway": "hetlb",
}
GATEWAYS = ("hetlb", "envoy")
"""testbed.gateway: the policies run in hetlb serve (M dispatcher processes), or in M pairs of
Envoy and a hetlb pick (its endpoint picker), each pair with its own estimates; a list runs each
policy through each, in its order, on the same traffic."""
ENGINES = ("openai",)
"""testbed.engine: the backends are emulated inference engines (``hetlb backend --openai``)."""
ENGINE_DEFAULTS = {
    "models": None,
    "token_time_ms": 20.0,
    "prefill_cost": 0.02,
    "prompt_tokens": 128.0,
    "prompt_law": "deterministic",
    "output_tokens": 64.0,
    "output_law": "deterministic",
}
"""The [testbed] keys of an engine scenario: the models (one per job type) and the token laws of
``hetlb loadgen --openai``, the token time and prefill cost of ``hetlb backend --openai``."""
WORK_SAMPLE = 100_000
"""Draws of a request's work that make the simulator's empirical job sizes when a token law is random."""
QUEUE_LENGTH_POLICIES = policies_where(speed_blind=True)
"""The policies that decide on queue lengths alone (or on nothing). hetlb serve knows its
backends' speeds, not their concurrency and rate curves, so on backends that serve several
requests at once only these decide as the simulator's (hetlb.policies.rules.slot_selection_key),
and weighted-random where every backend's capacity is its speed times one same phi(c)."""
RUN_DEFAULTS = {"jobs": 100_000, "replications": 5, "warmup": 100.0}
"""The simulator's run when [run] does not say: 5 replications of 100,000 jobs after 100 time units."""
CSV_COLUMNS = [
    "balancer",
    "policy",
    "load",
    "rate_per_s",
    "requests",
    "live_mean_ms",
    "live_ci_low_ms",
    "live_ci_high_ms",
    "overhead_ms",
    "live_minus_overhead_ms",
    "live_p50_ms",
    "live_p95_ms",
    "live_p99_ms",
    "live_ttft_mean_ms",
    "live_ttft_ci_low_ms",
    "live_ttft_ci_high_ms",
    "live_ttft_p50_ms",
    "live_ttft_p99_ms",
    "tokens_per_s",
    "live_herd_fraction",
    "live_blocking",
    "errors",
    "messages_per_request",
    "forward_delay_ms",
    "answer_lag_ms",
    "sim_policy",
    "sim_mean_ms",
    "sim_ci_low_ms",
    "sim_ci_high_ms",
    "sim_p99_ms",
    "sim_blocking",
    "sim_messages_per_request",
    "sim_herd_fraction",
    "sim_run_mean_ms",
    "sim_run_low_ms",
    "sim_run_high_ms",
    "agrees",
]


@dataclass(frozen=True)
class EngineSettings:
    """The emulated engines of ``[testbed] engine = "openai"``: ``models`` names job type k of
    [system] (its graph is the placement), ``token_time_ms`` is tau, ``prefill_cost`` the prefill
    work per prompt token (token times), and the prompt lengths and ``max_tokens`` are the means
    times the mean-1 laws of hetlb.live.inference_load (rounded, at least 1)."""

    models: tuple[str, ...]
    token_time_ms: float
    prefill_cost: float
    prompt_tokens: float
    prompt_law: JobSizes
    output_tokens: float
    output_law: JobSizes

    @classmethod
    def from_settings(cls, settings: dict) -> EngineSettings:
        models = settings["models"]
        if not isinstance(models, list) or not models or not all(isinstance(m, str) and m for m in models):
            raise InputError("testbed.models", f"must be a list of model names, one per job type, got {models!r}")
        if len(set(models)) != len(models) or any(" " in m or "|" in m or "," in m for m in models):
            raise InputError("testbed.models", "each model once, without spaces, '|' or ','")
        for name in ("prompt_tokens", "output_tokens"):
            validation.number(f"testbed.{name}", settings[name], 1.0, high=TOKEN_LIMIT)
        return cls(
            models=tuple(models),
            token_time_ms=validation.positive_number("testbed.token_time_ms", settings["token_time_ms"]),
            prefill_cost=validation.number("testbed.prefill_cost", settings["prefill_cost"], 0.0),
            prompt_tokens=float(settings["prompt_tokens"]),
            prompt_law=parse_law("testbed.prompt_law", settings["prompt_law"]),
            output_tokens=float(settings["output_tokens"]),
            output_law=parse_law("testbed.output_law", settings["output_law"]),
        )

    def work(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """``count`` requests' work W = P x prefill_cost + n in token times, P and n drawn as the
        load generator draws them (hetlb.live.inference_load.token_counts)."""
        prompts = token_counts(self.prompt_law, self.prompt_tokens, rng, count)
        outputs = token_counts(self.output_law, self.output_tokens, rng, count)
        return prompts * self.prefill_cost + outputs

    def job_sizes(self, seed: int) -> tuple[str, float]:
        """The simulator's job sizes and its time unit (ms) = tau x E[W]: deterministic when both
        laws are (W is then one number), else the empirical law of WORK_SAMPLE draws of W (a file
        in the temporary folder named by its content) and their mean."""
        deterministic = self.prompt_law.kind == self.output_law.kind == "deterministic"
        work = self.work(np.random.default_rng(seed), 1 if deterministic else WORK_SAMPLE)
        mean_ms = float(work.mean()) * self.token_time_ms
        if deterministic:
            return "deterministic", mean_ms
        text = "\n".join(repr(float(w)) for w in work) + "\n"
        path = Path(tempfile.gettempdir()) / f"hetlb-work-{hashlib.sha256(text.encode()).hexdigest()[:16]}.txt"
        if not path.exists():
            path.write_text(text)
        return f"empirical:{path}", mean_ms

    def backend_arguments(self) -> list[str]:
        """The engine flags of ``hetlb backend --openai`` (its --listen flags apart): every request the
        load generator can draw fits the model length."""
        return [
            "--openai",
            "--token-time-ms",
            repr(self.token_time_ms),
            "--prefill-cost",
            repr(self.prefill_cost),
            "--max-model-len",
            str(2 * TOKEN_LIMIT),
        ]

    def to_dict(self) -> dict:
        from hetlb.live.inference_load import law_text

        values = {name: getattr(self, name) for name in ("token_time_ms", "prefill_cost", "prompt_tokens")}
        values |= {"output_tokens": self.output_tokens, "models": list(self.models)}
        return values | {name: law_text(getattr(self, name)) for name in ("prompt_law", "output_law")}


@dataclass
class TestbedScenario:
    """A testbed scenario: the simulator's tables (``system`` without a load, ``run``) and the
    [testbed] settings."""

    system: dict
    run: dict
    mean_service_ms: float
    loads: list[float]
    policies: list[dict]
    warmup: float
    duration: float
    dispatchers: int
    signals: str
    compare: list[str]
    seed: int
    prediction_runs: int
    engine: EngineSettings | None = None
    gateways: tuple[str, ...] = ("hetlb",)
    live_only: dict = field(default_factory=dict)  # policy id -> why the simulator does not model it
    scenarios: dict = field(default_factory=dict)  # (policy, update, load, run) -> Scenario

    @classmethod
    def from_mapping(cls, data: dict) -> TestbedScenario:
        validation.table("scenario", data)
        unknown = sorted(set(data) - {"system", "testbed", "run", "policy"})
        if unknown:
            raise InputError(f"scenario.{unknown[0]}", "unknown table; use [system], [testbed] and [run]")
        if "policy" in data:
            raise InputError("policy", "a testbed runs the policies of testbed.policies; remove [policy]")
        system = dict(validation.table("system", data.get("system", {})))
        if system.get("model", "continuous") != "continuous":
            raise InputError("system.model", "the testbed runs the continuous-time model")
        for key in ("load", "arrival_rate", "excess_capacity"):
            if key in system:
                raise InputError(f"system.{key}", "the testbed sets the load: give testbed.loads")
        settings = dict(validation.table("testbed", data.get("testbed", {})))
        engine = None
        if settings.get("engine") is not None:
            validation.choice("testbed.engine", settings["engine"], ENGINES)
            allowed = set(TESTBED_DEFAULTS) - {"mean_service_ms"} | set(ENGINE_DEFAULTS)
            for key in ("job_sizes", "scv"):
                if key in system:
                    raise InputError(f"system.{key}", "an engine's job sizes follow from the token laws of [testbed]")
            if "mean_service_ms" in settings:
                raise InputError("testbed.mean_service_ms", "an engine's time unit is token_time_ms x the mean work")
            engine = EngineSettings.from_settings({**ENGINE_DEFAULTS, **settings})
            system["job_sizes"], settings["mean_service_ms"] = engine.job_sizes(settings.get("seed", 1))
        else:
            allowed = set(TESTBED_DEFAULTS)
        unknown = sorted(set(settings) - allowed - {"mean_service_ms"})
        if unknown:
            raise InputError(f"testbed.{unknown[0]}", f"unknown key; allowed: {', '.join(sorted(allowed))}")
        settings = {**TESTBED_DEFAULTS, **settings}
        run = {**RUN_DEFAULTS, **validation.table("run", data.get("run", {}))}
        loads = settings["loads"]
        if not isinstance(loads, list) or not loads:
            raise InputError("testbed.loads", f"must be a non-empty list of loads, got {loads!r}")
        policies = settings["policies"]
        if not isinstance(policies, list):
            raise InputError("testbed.policies", f"must be a list of policy ids or tables, got {policies!r}")
        policies = [
            {"id": p} if isinstance(p, str) else dict(validation.table("testbed.policies", p)) for p in policies
        ]
        compare = settings["compare"]
        if not isinstance(compare, list):
            raise InputError("testbed.compare", f"must be a list among {', '.join(PROGRAMS)}, got {compare!r}")
        for program in compare:
            validation.choice("testbed.compare", program, PROGRAMS)
        testbed = cls(
            system=system,
            run=run,
            mean_service_ms=validation.positive_number("testbed.mean_service_ms", settings["mean_service_ms"]),
            loads=[validation.positive_number("testbed.loads", load) for load in loads],
            policies=policies,
            warmup=validation.number("testbed.warmup", settings["warmup"], 0.0),
            duration=validation.positive_number("testbed.duration", settings["duration"]),
            dispatchers=validation.integer("testbed.dispatchers", settings["dispatchers"], 1, 64),
            signals=validation.text("testbed.signals", settings["signals"]),
            compare=list(compare),
            seed=validation.seed("testbed.seed", settings["seed"]),
            prediction_runs=validation.integer("testbed.prediction_runs", settings["prediction_runs"], 40, 100_000),
            engine=engine,
            gateways=parse_gateways(settings["gateway"]),
        )
        testbed.check()
        return testbed

    @classmethod
    def from_toml(cls, path) -> TestbedScenario:
        return cls.from_mapping(read_toml(path, "scenario"))

    def scenario(
        self,
        policy: dict,
        load: float,
        unseen_ms: float | None = None,
        run: dict | None = None,
        snapshot_delay_ms: float | None = None,
    ) -> Scenario:
        """The simulator's scenario of one run (checked by hetlb.scenario); ``policy`` a live policy
        (its testbed-only key ``signals`` becomes the model's update signals, see
        :meth:`model_update`); ``run`` replaces [run] (see :meth:`live_length_run`)."""
        run = self.run if run is None else run
        update = self.model_update(policy, unseen_ms, snapshot_delay_ms)
        parameters = POLICIES[policy["id"]].parameters
        serve_flags = {"signals", "p_hat"} | ({"d"} - set(parameters))  # --signals, --p-hat, push's --d
        policy = {name: value for name, value in policy.items() if name not in serve_flags}
        # repr for what JSON cannot write (a TOML date): hetlb.scenario refuses it below
        key = (
            json.dumps(policy, sort_keys=True, default=repr),
            update,
            load,
            json.dumps(run, sort_keys=True, default=repr),
        )
        if key not in self.scenarios:
            system = {**self.system, "load": load}
            if update is not None:
                system["dispatchers"] = self.dispatchers
                policy["update"] = update
            self.scenarios[key] = Scenario.from_mapping({"system": system, "policy": policy, "run": run})
        return self.scenarios[key]

    def live_length_run(self, load: float) -> dict:
        """[run] for ``prediction_runs`` runs as long as a live run: the warm-up and the measured
        window in time units (``mean_service_ms``), the window as its expected number of jobs."""
        unit_s = self.mean_service_ms / 1e3
        jobs = max(1, round(float(self.system_at(load).total_arrival_rate) * self.duration / unit_s))
        return {**self.run, "jobs": jobs, "warmup": self.warmup / unit_s, "replications": self.prediction_runs}

    def model_update(
        self, policy: dict, unseen_ms: float | None = None, snapshot_delay_ms: float | None = None
    ) -> str | None:
        """The update signals of hetlb.simulate(dispatchers=M) that model the run's live signals,
        in the time unit mean_service_ms: each live signal's simulated twin, an entry of
        hetlb.signals (docs/reference/testbed.md); None when one dispatcher knows every queue at
        once (its own in-flight counts, no delay given: the single-dispatcher model).
        ``unseen_ms`` is how long a completion stays unseen, the piggyback's constant delay in the
        model: the forward delay plus the answer lag measured live (see :func:`unseen_delay_ms`);
        ``snapshot_delay_ms`` the snapshots' (polls', scrapes') constant delay, measured live."""
        from hetlb.live.config import parse_signals

        field = "testbed.policies.signals" if "signals" in policy else "testbed.signals"
        chosen = parse_signals(field, self.signals_of(policy)).chosen
        run = LiveRun(
            time_unit_ms=self.mean_service_ms,
            dispatchers=self.dispatchers,
            led=POLICIES[policy["id"]].on_local_estimates,
            p_hat=policy.get("p_hat", 1.0),  # --p-hat and --d of hetlb serve (defaults 1 and 2)
            d=policy.get("d", 2),
            unseen_ms=unseen_ms,
            snapshot_delay_ms=snapshot_delay_ms,
        )
        twin = model_twin(chosen, run)
        return None if twin is None else signal_text(twin)

    def check(self) -> None:
        """The policies are live ones, every scenario builds and is stable (under its policy too, as
        the simulator would refuse it after the live run), before anything starts."""
        from hetlb.simulation.continuous import check_policy_stability

        if not self.policies and not self.compare:
            raise InputError("testbed.policies", "give policies, or balancers to compare, or both")
        live = [policy_id for policy_id, spec in POLICIES.items() if "live" in spec.models]
        for policy in self.policies:
            if policy.get("id") not in live:
                raise InputError(
                    "testbed.policies", f"{policy.get('id')!r} is not a live policy; use {', '.join(live)}"
                )
            if "signals" in policy:
                validation.text("testbed.policies.signals", policy["signals"])
        for load in self.loads:
            system = self.system_at(load)
            assert isinstance(system, System)  # system.model is continuous
            system.check_stability()
            if self.engine is not None:
                self.check_engines(system)
            for policy in self.policies:
                difference = decision_difference(policy["id"], system)
                if difference is not None and self.engine is None:
                    raise InputError("testbed.policies", difference)
                if difference is not None:
                    self.live_only[policy["id"]] = difference
            for policy in self.policies:
                if self.simulated(policy):
                    check_policy_stability(system, self.scenario(policy, load).policy)
                    self.scenario(policy, load, None, self.live_length_run(load))
        routers = [program for program in self.compare if program in ROUTERS]
        if routers and self.engine is None:
            raise InputError("testbed.compare", f"{routers[0]} routes inference engines only: it needs testbed.engine")
        if self.compare and self.engine is None and not self.system_at(self.loads[0]).graph.is_complete():
            raise InputError("testbed.compare", "HAProxy and nginx know no job types: compare needs the complete graph")

    def check_engines(self, system) -> None:
        """One model per job type, and every engine holds one at least."""
        assert self.engine is not None
        if len(self.engine.models) != system.n_types:
            raise InputError(
                "testbed.models",
                f"name one model per job type of [system]: {system.n_types}, got {len(self.engine.models)}",
            )
        held = {int(s) for k in range(system.n_types) for s in system.graph.servers_of(k)}
        if len(held) != system.n_servers:
            missing = min(set(range(system.n_servers)) - held)
            raise InputError("system.graph", f"server {missing} holds no model: every engine serves one at least")

    def type_names(self) -> list[str]:
        """The job types' names: the models of an engine scenario, else t0, t1, ..."""
        if self.engine is not None:
            return list(self.engine.models)
        return [type_name(k) for k in range(self.system_at(self.loads[0]).n_types)]

    def system_at(self, load: float):
        """The system at ``load`` (the same for every policy)."""
        return self.scenario({"id": "jsq"}, load).system

    def signals_of(self, policy: dict) -> str:
        """The load signals of a policy's dispatchers: its own ``signals`` key, else testbed.signals."""
        return policy.get("signals", self.signals)

    def simulated(self, policy: dict) -> bool:
        """Whether the simulator models this run: a policy of the continuous-time model, decided
        by one dispatcher with exact counts or by M dispatchers on their estimates."""
        spec = POLICIES.get(policy["id"])
        if policy["id"] in self.live_only:
            return False
        return spec is not None and ("continuous" in spec.models or spec.on_local_estimates)


def parse_gateways(value) -> tuple[str, ...]:
    """testbed.gateway: one of GATEWAYS, or a non-empty list of them without repeats."""
    items = value if isinstance(value, list) else [value]
    if not items:
        raise InputError("testbed.gateway", f"give one or more of {', '.join(GATEWAYS)}")
    gateways = tuple(validation.choice("testbed.gateway", item, GATEWAYS) for item in items)
    if len(set(gateways)) != len(gateways):
        raise InputError("testbed.gateway", "a gateway is listed twice")
    return gateways


def decision_difference(policy_id: str, system: System) -> str | None:
    """Why a policy's live decisions on multi-slot backends differ from the simulator's, or None
    when they are the same. hetlb serve knows speeds, not concurrencies and rate curves: the
    QUEUE_LENGTH_POLICIES decide alike; weighted-random and l-jba (weights by capacity mu phi(c) in
    the simulator, by speed live) where every backend has one phi(c); jfsq (ties to the fastest
    rate mu phi(b')/b', b' = min(n + 1, c), live to the fastest speed) where every backend has
    one concurrency and one rate curve, so that at equal n the rates are in the speeds' order."""
    if system.has_single_slots or policy_id in QUEUE_LENGTH_POLICIES:
        return None
    factors = system.server_capacity / system.speed
    one_capacity_factor = np.allclose(factors, factors[0], rtol=1e-12)
    code = POLICIES[policy_id].code
    if one_capacity_factor and code in (WEIGHTED_RANDOM, L_JBA):
        return None
    one_server_law = len(set(system.concurrency.tolist())) == 1 and len(set(system.rate_curve)) == 1
    if code == JFSQ and one_server_law:
        return None
    return (
        f"{policy_id!r} decides on the backends' concurrency and rate curves, which hetlb serve does not know; "
        f"on backends that serve several requests at once use {', '.join(QUEUE_LENGTH_POLICIES)} "
        "(or weighted-random and l-jba with one phi(c) for all, jfsq with one concurrency and rate curve)"
    )


def curve_argument(curve: RateCurve) -> str:
    """A rate curve as ``hetlb backend`` reads it, every digit kept (its text rounds to 6)."""
    if curve.kind == "saturating":
        return f"saturating:alpha={curve.alpha!r}"
    if curve.kind == "table":
        return "table:" + ",".join(repr(value) for value in curve.values)
    return curve.kind


def listen_arguments(system, models: list[str] | None = None) -> list[str]:
    """``hetlb backend --listen`` of each server: its speed, and its concurrency and rate curve when
    it serves several requests at once; with ``models`` (one per job type) the models it holds."""
    held = types_of_servers(system, models) if models is not None else None
    arguments = []
    for s, speed in enumerate(system.speed.tolist()):
        spec = f"127.0.0.1:0,speed={speed!r}"
        if system.concurrency[s] != 1:
            concurrency = concurrency_text(system.concurrency[s])
            spec += f",concurrency={'inf' if concurrency == 'unlimited' else concurrency}"
            spec += f",rate_curve={curve_argument(system.rate_curve[s])}"
        if held is not None:
            spec += ",models=" + "|".join(held[s])
        arguments += ["--listen", spec]
    return arguments


def types_of_servers(system, names: list[str]) -> list[list[str]]:
    """The names of the job types each server may serve (the compatibility graph)."""
    types_of: list[list[str]] = [[] for _ in range(system.n_servers)]
    for k in range(system.n_types):
        for s in system.graph.servers_of(k):
            types_of[s].append(names[k])
    return types_of


def job_size_arguments(job_sizes) -> list[str]:
    """``hetlb backend --job-sizes`` (and ``--scv``) of the system's job sizes."""
    kind = job_sizes.kind if job_sizes.path is None else f"empirical:{job_sizes.path}"
    return ["--job-sizes", kind] + (["--scv", repr(job_sizes.scv)] if job_sizes.kind in SCV_KINDS else [])


def type_name(job_type: int) -> str:
    return f"t{job_type}"


def backend_specs(system, urls: list[str], names: list[str] | None = None) -> list[str]:
    """``hetlb serve --backend`` specs of the system's servers at ``urls``: speed, job types (when
    the graph is not complete, or always when ``names`` names them: an engine's models) and buffer
    (when finite)."""
    from hetlb.constants import INFINITE_BUFFER

    always = names is not None
    types_of = types_of_servers(system, names if names is not None else [type_name(k) for k in range(system.n_types)])
    specs = []
    for s, url in enumerate(urls):
        spec = f"{url},speed={system.speed[s]:g}"
        if always or not system.graph.is_complete():
            spec += ",types=" + "|".join(types_of[s])
        if system.buffer[s] != INFINITE_BUFFER:
            spec += f",buffer={int(system.buffer[s])}"
        specs.append(spec)
    return specs


def serve_arguments(policy: dict, listen_port: int, admin_port: int, specs: list[str], testbed) -> list[str]:
    """The command line of ``hetlb serve`` for one run."""
    arguments = ["serve", "--listen", f"127.0.0.1:{listen_port}", "--admin", f"127.0.0.1:{admin_port}"]
    arguments += ["--dispatchers", str(testbed.dispatchers)]
    return arguments + dispatcher_arguments(policy, specs, testbed, testbed.seed)


def pick_arguments(policy: dict, grpc_port: int, admin_port: int, specs: list[str], testbed, m: int) -> list[str]:
    """The command line of picker m's ``hetlb pick`` for one run (its seed the testbed's + m, as
    hetlb serve seeds its dispatcher m)."""
    arguments = ["pick", "--listen", f"127.0.0.1:{grpc_port}", "--admin", f"127.0.0.1:{admin_port}"]
    return arguments + dispatcher_arguments(policy, specs, testbed, testbed.seed + m)


def dispatcher_arguments(policy: dict, specs: list[str], testbed, seed: int) -> list[str]:
    """The flags of a dispatcher's policy, signals, job types and backends, hetlb serve's and hetlb pick's."""
    arguments = ["--policy", policy["id"], "--signals", testbed.signals_of(policy)]
    arguments += ["--seed", str(seed), "--quiet"]
    if testbed.engine is not None:
        arguments += ["--type-body-field", "model"]
    for name, value in policy.items():
        if name == "d":
            arguments += ["--d", str(value)]
        elif name == "p_hat":
            arguments += ["--p-hat", str(value)]
        elif name not in ("id", "signals"):
            arguments += ["--set", f"{name}={value}"]
    for spec in specs:
        arguments += ["--backend", spec]
    return arguments


@dataclass(repr=False)
class Testbed(Result):
    """Runs a TestbedScenario; ``say`` receives one line per step (standard error in the command).
    After :meth:`run` it is the testbed's result: ``rows`` (testbed.csv, ``to_frame()``), ``details``
    and ``to_dict()`` (testbed.json), ``summary`` (the policies' order and how many runs agree)."""

    scenario: TestbedScenario
    out: Path
    say: Callable[[str], None] = print
    progress: bool = False
    rows: list = field(default_factory=list)
    details: list = field(default_factory=list)
    backend_urls: list = field(default_factory=list)
    simulations: dict = field(default_factory=dict)

    def run(self) -> list[dict]:
        testbed = self.scenario
        system = testbed.system_at(testbed.loads[0])
        peers = self.available_peers()
        for policy_id, why in testbed.live_only.items():
            self.say(f"hetlb testbed: note: {policy_id} runs live only, without a prediction: {why}")
        with contextlib.ExitStack() as stack:
            backends = self.start_backends(system, stack)
            for load in testbed.loads:
                for policy in testbed.policies:
                    for gateway in testbed.gateways:
                        self.run_hetlb(policy, load, backends, gateway)
                for peer in peers:
                    self.run_peer(peer, load, backends, stack)
        self.write()
        return self.rows

    def available_peers(self) -> list:
        peers = []
        for program in self.scenario.compare:
            if program_path(program) is None:
                self.say(f"hetlb testbed: note: {program} is not installed: its runs are skipped")
                continue
            peers += [peer for peer in PEERS.values() if peer.program == program]
        return peers

    def start_backends(self, system, stack: contextlib.ExitStack) -> list[str]:
        testbed = self.scenario
        if testbed.engine is not None:
            arguments = [
                "backend",
                *listen_arguments(system, testbed.type_names()),
                *testbed.engine.backend_arguments(),
            ]
        else:
            arguments = ["backend", *listen_arguments(system), "--mean-service-ms", repr(testbed.mean_service_ms)]
            arguments += job_size_arguments(system.job_sizes)
        arguments += ["--seed", str(testbed.seed)]
        child = ChildProcess("hetlb backend", hetlb_command(*arguments))
        stack.callback(child.stop)
        urls = [line.split()[0] for line in child.read_lines(system.n_servers)]
        self.backend_urls = urls
        self.say(f"hetlb testbed: {system.n_servers} backends listening ({urls[0]} ...)")
        return urls

    def load_spec(
        self, targets: list[str], system, route_header: bool = False, per_model: bool = False
    ) -> LoadSpec | InferenceLoadSpec:
        """The load of one run: ``hetlb loadgen``'s, or ``--openai``'s for engines (``route_header``:
        the model also in ROUTE_HEADER, for the balancers' pools; ``per_model``: target m serves
        model m, for the routers; the live herd with several dispatchers)."""
        testbed = self.scenario
        rate = system.total_arrival_rate / testbed.mean_service_ms * 1e3
        proportions = {name: float(r) for name, r in zip(testbed.type_names(), system.arrival_rate)}
        common = {
            "targets": tuple(targets),
            "rate": rate,
            "duration": testbed.duration,
            "warmup": testbed.warmup,
            "seed": testbed.seed,
            "arrivals": system.arrivals,
            "time_unit_ms": testbed.mean_service_ms,
        }
        if testbed.engine is None:
            return LoadSpec(job_types=proportions, **common)
        engine = testbed.engine
        several = len(targets) > 1 and not per_model
        return InferenceLoadSpec(
            models=proportions,
            prompt_tokens=engine.prompt_tokens,
            prompt_law=engine.prompt_law,
            output_tokens=engine.output_tokens,
            output_law=engine.output_law,
            model_header=ROUTE_HEADER if route_header else None,
            herd_window=default_herd_window(system) * testbed.mean_service_ms / 1e3 if several else None,
            target_per_model=per_model,
            **common,
        )

    def run_hetlb(self, policy: dict, load: float, backends: list[str], gateway: str = "hetlb") -> None:
        """One run of ``policy`` at ``load`` through ``gateway`` (GATEWAYS), live then simulated."""
        testbed = self.scenario
        system = testbed.system_at(load)
        names = testbed.type_names() if testbed.engine is not None else None
        specs = backend_specs(system, backends, names)
        with contextlib.ExitStack() as stack:
            if gateway == "envoy":
                targets, admins = self.start_envoy_gateways(policy, load, specs, stack)
            else:
                targets, admins = self.start_serve(policy, load, specs, stack)
            live = self.generate(self.load_spec(targets, system))
            status = [self.admin_status(admin) for admin in admins]
        unseen = unseen_delay_ms(status)
        snapshot_delay = mean_delay_ms(status, "scrape_delay")
        simulated = None
        if testbed.simulated(policy):
            simulated = self.simulate(testbed.scenario(policy, load, unseen, None, snapshot_delay))
            simulated["live_length_runs"] = self.predict(
                testbed.scenario(policy, load, unseen, testbed.live_length_run(load), snapshot_delay)
            )
        label = policy["id"] if "signals" not in policy else f"{policy['id']} ({policy['signals']})"
        if gateway == "envoy":
            label += " via Envoy+pick"
        self.record("hetlb", label, load, live, policy["id"] if simulated else "", simulated, status)

    def start_serve(self, policy: dict, load: float, specs: list[str], stack) -> tuple[list[str], list[int]]:
        """hetlb serve's M dispatchers for one run, stopped with ``stack``: their URLs and admin ports."""
        testbed = self.scenario
        listen = free_port_block(2 * testbed.dispatchers)  # M ports to listen on, then M admin ports
        admin = listen + testbed.dispatchers
        self.say(f"hetlb testbed: load {load:g}, hetlb serve --policy {policy['id']} ...")
        child = ChildProcess("hetlb serve", hetlb_command(*serve_arguments(policy, listen, admin, specs, testbed)))
        stack.callback(child.stop)
        for m in range(testbed.dispatchers):
            wait_listening("127.0.0.1", listen + m, child)
        dispatchers = range(testbed.dispatchers)
        return [f"http://127.0.0.1:{listen + m}" for m in dispatchers], [admin + m for m in dispatchers]

    def start_envoy_gateways(self, policy: dict, load: float, specs: list[str], stack) -> tuple[list[str], list[int]]:
        """M pairs of Envoy (one worker) and hetlb pick for one run, nothing shared between pairs,
        stopped with ``stack``: the Envoys' URLs and the pickers' admin ports."""
        from hetlb.live.config import Address
        from hetlb.live.envoy_config import envoy_command, picker_bootstrap

        testbed = self.scenario
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="hetlb-envoy-")))
        self.say(
            f"hetlb testbed: load {load:g}, {testbed.dispatchers} x (Envoy + hetlb pick --policy {policy['id']}) ..."
        )
        targets, admins = [], []
        for m in range(testbed.dispatchers):
            listen, grpc_port, admin = free_ports(3)
            picker = ChildProcess(
                f"hetlb pick {m}", hetlb_command(*pick_arguments(policy, grpc_port, admin, specs, testbed, m))
            )
            stack.callback(picker.stop)
            wait_listening("127.0.0.1", admin, picker)
            bootstrap = picker_bootstrap(
                Address("127.0.0.1", listen), [Address("127.0.0.1", grpc_port)], body=testbed.engine is not None
            )
            path = folder / f"envoy-{m}.json"
            path.write_text(json.dumps(bootstrap))
            envoy = ChildProcess(f"envoy {m}", envoy_command(str(path)))
            stack.callback(envoy.stop)
            wait_listening("127.0.0.1", listen, envoy)
            targets.append(f"http://127.0.0.1:{listen}")
            admins.append(admin)
        return targets, admins

    def run_peer(self, peer, load: float, backends: list[str], stack) -> None:
        testbed = self.scenario
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=f"hetlb-{peer.id}-")))
        (port,) = free_ports(1)
        system = testbed.system_at(load)
        self.say(f"hetlb testbed: load {load:g}, {peer.id} ...")
        pools = None
        if testbed.engine is not None:  # one pool per model, chosen by a header (hetlb.live.peers)
            pools = {name: system.graph.servers_of(k).tolist() for k, name in enumerate(testbed.type_names())}
        if peer.program in ROUTERS:  # a router per model, each request sent to its model's
            assert pools is not None
            ports = free_ports(2 * len(pools))
            urls = {name: [backends[s] for s in members] for name, members in pools.items()}
            children = start_routers(peer, ports, urls, folder)
            spec = self.load_spec([f"http://127.0.0.1:{p}" for p in ports[::2]], system, per_model=True)
        else:
            children = [start_peer(peer, port, list(zip(backends, system.speed.tolist())), folder, pools=pools)]
            spec = self.load_spec([f"http://127.0.0.1:{port}"], system, route_header=True)
        try:
            live = self.generate(spec)
        finally:
            for child in children:
                child.stop()
        # no registered policy is a balancer's rule (benchmarks/balancer_rules.py simulates them)
        self.record(peer.id, peer.method, load, live, "", None, [])

    def generate(self, spec: LoadSpec | InferenceLoadSpec) -> dict:
        """Run one load; of streamed completions, the end-to-end latency under the keys of a plain
        load's response time (its percentiles p50 and p99; the path is not subtracted: a stream's
        answer carries no sojourn), beside the TTFT, the tokens per second and the herd."""
        if isinstance(spec, InferenceLoadSpec):
            result = dict(generate_inference_load(spec, progress=self.progress))
            return result | {
                "mean_response_time": result["mean_e2e"],
                "mean_response_time_ci": result["mean_e2e_ci"],
                "mean_backend_sojourn": result["mean_e2e"],
                "mean_overhead": None,
                "response_time_p50": result["e2e_p50"],
                "response_time_p95": None,
                "response_time_p99": result["e2e_p99"],
            }
        return dict(generate_load(spec, progress=self.progress))

    @staticmethod
    def admin_status(port: int) -> dict | None:
        """A dispatcher's ``GET /status`` after its run (None if it does not answer)."""
        import urllib.request

        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=5) as response:
                return json.loads(response.read())
        except (OSError, ValueError):
            return None

    def simulate(self, scenario: Scenario) -> dict:
        """The simulation's summary, its mean response time's interval Cox's on the log scale over
        the replications' means (one run: its batch means), hetlb.stats.intervals.positive_interval:
        a t interval of a few heavy-tailed replications reaches below zero."""
        result = self.simulation(scenario)
        runs = result.runs
        means = [run.mean_response_time for run in runs] if len(runs) > 1 else runs[0].batch_response_means
        return dict(result.summary) | {"mean_response_time_ci": positive_interval(means)}

    def simulation(self, scenario: Scenario):
        """``scenario``'s simulation, run once (a policy run through two gateways is simulated once)."""
        key = id(scenario)  # the scenarios are kept by TestbedScenario.scenario, so their ids stay theirs
        if key not in self.simulations:
            self.simulations[key] = scenario.simulate()
        return self.simulations[key]

    def predict(self, scenario: Scenario) -> dict:
        """The mean and the prediction interval (PREDICTION_QUANTILES) of the mean response times of
        ``scenario``'s replications, in time units."""
        means = np.array([run.mean_response_time for run in self.simulation(scenario).runs])
        low, high = np.quantile(means, PREDICTION_QUANTILES)
        return {"mean": float(means.mean()), "low": float(low), "high": float(high), "runs": len(means)}

    def record(self, balancer, policy, load, live, sim_policy, simulated, status) -> None:
        unit = self.scenario.mean_service_ms
        live = {key: math.nan if value is None else value for key, value in live.items()}  # not computed: nan
        live["mean_response_time_ci"] = [math.nan if v is None else v for v in live["mean_response_time_ci"]]
        row = {
            "balancer": balancer,
            "policy": policy,
            "load": load,
            "rate_per_s": live["offered_rate"],
            "requests": live["requests"],
            "live_mean_ms": live["mean_response_time"],
            "live_ci_low_ms": live["mean_response_time_ci"][0],
            "live_ci_high_ms": live["mean_response_time_ci"][1],
            "overhead_ms": live["mean_overhead"],
            "live_minus_overhead_ms": live["mean_backend_sojourn"],
            "live_p50_ms": live["response_time_p50"],
            "live_p95_ms": live["response_time_p95"],
            "live_p99_ms": live["response_time_p99"],
            "live_blocking": live["blocking_probability"],
            "live_herd_fraction": live.get("herd_fraction", math.nan),
            "errors": live["errors"],
            "messages_per_request": messages_per_request(status),
            "forward_delay_ms": mean_delay_ms(status, "forward_delay") or math.nan,
            "answer_lag_ms": mean_delay_ms(status, "answer_lag") or math.nan,
            "sim_policy": sim_policy,
        }
        if "mean_ttft" in live:
            ttft_low, ttft_high = [math.nan if v is None else v for v in live["mean_ttft_ci"]]
            row |= {
                "live_ttft_mean_ms": live["mean_ttft"],
                "live_ttft_ci_low_ms": ttft_low,
                "live_ttft_ci_high_ms": ttft_high,
                "live_ttft_p50_ms": live["ttft_p50"],
                "live_ttft_p99_ms": live["ttft_p99"],
                "tokens_per_s": live["output_tokens_per_s"],
            }
        if simulated is not None:
            low, high = simulated["mean_response_time_ci"]
            row |= {
                "sim_mean_ms": simulated["mean_response_time"] * unit,
                "sim_ci_low_ms": low * unit,
                "sim_ci_high_ms": high * unit,
                "sim_p99_ms": simulated["response_time_p99"] * unit,
                "sim_blocking": simulated["blocking_probability"],
            }
            if "messages_per_job" in simulated:  # as live: probes and polls, a request and an answer each
                kinds = simulated["messages_per_job"]
                row["sim_messages_per_request"] = kinds["push"] + kinds["probe"] + 2 * kinds["snapshot"]
                row["sim_herd_fraction"] = simulated["herd_fraction"]
            prediction = simulated["live_length_runs"]
            row |= {f"sim_run_{key}_ms": prediction[key] * unit for key in ("mean", "low", "high")}
            corrected = row["live_minus_overhead_ms"]
            if balancer == "hetlb":
                row["agrees"] = (
                    (1 - AGREEMENT_MARGIN) * row["sim_run_low_ms"]
                    <= corrected
                    <= (1 + AGREEMENT_MARGIN) * row["sim_run_high_ms"]
                )
        self.rows.append(row)
        self.details.append({"row": row, "live": live, "simulated": simulated, "dispatchers": status})
        self.say("hetlb testbed: " + row_line(row))

    def order_agreement(self) -> dict:
        """Per load: the policies ranked by live mean (minus overhead) and by the mean of the
        simulated runs of the live run's length; ``same`` whether the two orders are one, and
        ``same_where_determined`` whether they agree on every pair whose prediction intervals are
        apart (``overlapping`` lists the others: in runs of this length they come in either order)."""
        orders = {}
        for load in self.scenario.loads:
            rows = [r for r in self.rows if r["balancer"] == "hetlb" and r["load"] == load and "sim_run_mean_ms" in r]
            live = [r["policy"] for r in sorted(rows, key=lambda r: r["live_minus_overhead_ms"])]
            simulated = [r["policy"] for r in sorted(rows, key=lambda r: r["sim_run_mean_ms"])]
            overlapping, determined_same = [], True
            for a, b in itertools.combinations(rows, 2):
                if a["sim_run_low_ms"] <= b["sim_run_high_ms"] and b["sim_run_low_ms"] <= a["sim_run_high_ms"]:
                    overlapping.append([a["policy"], b["policy"]])
                else:
                    lower, higher = (a, b) if a["sim_run_high_ms"] < b["sim_run_low_ms"] else (b, a)
                    determined_same &= lower["live_minus_overhead_ms"] < higher["live_minus_overhead_ms"]
            orders[f"{load:g}"] = {
                "live": live,
                "simulated": simulated,
                "same": live == simulated,
                "same_where_determined": determined_same,
                "overlapping": overlapping,
            }
        return orders

    @property
    def metadata(self) -> dict:
        """The [testbed] settings, the simulator's [system] and [run] tables, and the versions."""
        bed = self.scenario
        names = (
            "mean_service_ms",
            "loads",
            "policies",
            "warmup",
            "duration",
            "dispatchers",
            "signals",
            "compare",
            "gateways",
        )
        settings = {name: getattr(bed, name) for name in (*names, "seed", "prediction_runs")}
        if bed.engine is not None:
            settings |= {"engine": "openai", **bed.engine.to_dict()}
        return {"testbed": settings, "system": bed.system, "run": bed.run, "versions": versions()}

    def against_peers(self) -> dict:
        """Per load: each hetlb policy's mean (end-to-end latency, or response time) over that of the
        best rule of each balancer program (its least live mean at that load), with the best rule."""
        comparison = {}
        for load in self.scenario.loads:
            rows = [r for r in self.rows if r["load"] == load]
            best = {}
            for program in PROGRAMS:
                runs = [r for r in rows if r["balancer"] != "hetlb" and PEERS[r["balancer"]].program == program]
                if runs:
                    best[program] = min(runs, key=lambda r: r["live_mean_ms"])
            if best:
                comparison[f"{load:g}"] = {
                    "best": {program: row["balancer"] for program, row in best.items()},
                    "ratio": {
                        r["policy"]: {program: r["live_mean_ms"] / row["live_mean_ms"] for program, row in best.items()}
                        for r in rows
                        if r["balancer"] == "hetlb"
                    },
                }
        return comparison

    @property
    def summary(self) -> dict:
        """The time unit, the agreement margin, the policies' order at each load
        (:meth:`order_agreement`), how many hetlb runs were held to a prediction and agree, and the
        policies against the balancers' best rules (:meth:`against_peers`)."""
        compared = [row["agrees"] for row in self.rows if "agrees" in row]
        return {
            "mean_service_ms": self.scenario.mean_service_ms,
            "agreement_margin": AGREEMENT_MARGIN,
            "order": self.order_agreement(),
            "against_peers": self.against_peers(),
            "compared": len(compared),
            "agreeing": sum(compared),
            "all_agree": all(compared),
        }

    def to_dict(self) -> dict:
        """testbed.json: the summary, every run's row with its live and simulated figures and its
        dispatchers' /status, and the metadata."""
        return {**self.summary, "runs": self.details, "metadata": self.metadata}

    def to_frame(self):
        """testbed.csv as a DataFrame: one row per run (CSV_COLUMNS)."""
        import pandas as pd

        return pd.DataFrame.from_records(self.rows, columns=CSV_COLUMNS)

    def headline(self) -> tuple:
        return "agreeing with the simulation", self.summary["agreeing"], None

    def describe(self) -> str:
        bed = self.scenario
        return f"{len(bed.policies)} policies, {len(bed.compare)} balancers, {len(bed.loads)} loads"

    def extent(self) -> str:
        return f"{self.summary['compared']} of {len(self.rows)} runs compared"

    def write(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        with (self.out / "testbed.csv").open("w", newline="") as handle:
            writer = csv.DictWriter(handle, CSV_COLUMNS)
            writer.writeheader()
            writer.writerows(self.rows)
        (self.out / "testbed.json").write_text(self.to_json() + "\n")
        self.plot(self.out / "testbed.png")

    def plot(self, path: Path | None = None):
        """The matplotlib Figure of testbed.png (written to ``path`` when given; None when there is
        no run): the means against the load, live and simulated, on one y scale; with one load,
        each run's live mean with its interval and each prediction interval, by run."""
        from hetlb.plots.figures import plot_intervals, plot_panels

        loads = self.scenario.loads
        measure = "mean end-to-end latency (ms)" if self.scenario.engine is not None else "mean response time (ms)"
        if len(loads) == 1 and self.rows:
            live_rows = [
                (run_label(r), r["live_minus_overhead_ms"], *live_interval_minus_overhead(r)) for r in self.rows
            ]
            predicted = [
                (run_label(r), r["sim_run_mean_ms"], r["sim_run_low_ms"], r["sim_run_high_ms"])
                for r in self.rows
                if "sim_run_mean_ms" in r
            ]
            by_run: list[dict] = [
                {"title": f"live, load {loads[0]:g} (minus the path where known)", "ylabel": measure, "rows": live_rows}
            ]
            if predicted:
                title = "simulated runs of the live run's length (95% of the runs)"
                by_run.append({"title": title, "ylabel": measure, "rows": predicted})
            return plot_intervals(by_run, path)
        live: dict = {}
        simulated: dict = {}
        peers: dict = {}

        def series(target: dict, label: str, rows: list, mean: str, low: str, high: str) -> None:
            by_load = {r["load"]: r for r in rows}
            pick = [by_load.get(load, {}) for load in loads]
            target[label] = tuple([r.get(key, math.nan) for r in pick] for key in (mean, low, high))

        for name in dict.fromkeys((r["balancer"], r["policy"]) for r in self.rows):
            rows = [r for r in self.rows if (r["balancer"], r["policy"]) == name]
            label = name[1] if name[0] == "hetlb" else name[0]
            if name[0] == "hetlb":
                shift = [(r, r["live_mean_ms"] - r["live_minus_overhead_ms"]) for r in rows]
                adjusted = [{**r, "low": r["live_ci_low_ms"] - d, "high": r["live_ci_high_ms"] - d} for r, d in shift]
                series(live, label, adjusted, "live_minus_overhead_ms", "low", "high")
                if any("sim_run_mean_ms" in r for r in rows):
                    series(simulated, label, rows, "sim_run_mean_ms", "sim_run_low_ms", "sim_run_high_ms")
            series(peers, label, rows, "live_mean_ms", "live_ci_low_ms", "live_ci_high_ms")
        panels = []
        engine = self.scenario.engine is not None
        common = {"xlabel": "system.load", "ylabel": measure}
        if live:
            title = "hetlb serve, live (streams' end to end)" if engine else "hetlb serve, live minus path overhead"
            panels.append({"x": loads, "series": live, "title": title, **common})
        if simulated:
            title, band = "simulated runs of the live run's length", "shaded: 95% of the runs"
            panels.append({"x": loads, "series": simulated, "title": title, "band_label": band, **common})
        if any(r["balancer"] != "hetlb" for r in self.rows):
            panels.append({"x": loads, "series": peers, "title": "measured at the client, every balancer", **common})
        return plot_panels(panels, path, sharey=True) if panels else None


def run_label(row: dict) -> str:
    """A run's name in a figure: the hetlb policy (with its signals), or the balancer."""
    return row["policy"] if row["balancer"] == "hetlb" else row["balancer"]


def live_interval_minus_overhead(row: dict) -> tuple[float, float]:
    """The live mean's interval, shifted by the path's mean overhead as the mean is (none: unshifted)."""
    shift = row["live_mean_ms"] - row["live_minus_overhead_ms"]
    return row["live_ci_low_ms"] - shift, row["live_ci_high_ms"] - shift


def mean_delay_ms(statuses: list, name: str) -> float | None:
    """The dispatchers' mean ``forward_delay``, ``answer_lag`` or ``scrape_delay`` in ms (their
    /status), weighted by the answers measured; None if none measured it."""
    delays = [status[name] for status in statuses if status and status.get(name, {}).get("count")]
    count = sum(delay["count"] for delay in delays)
    return sum(delay["count"] * delay["mean_ms"] for delay in delays) / count if count else None


def unseen_delay_ms(statuses: list) -> float | None:
    """How long a completion stays unseen by the dispatcher, in ms: the forward delay (decision to
    the backend's arrival) plus the answer lag (departure to the dispatcher reading the answer).

    A constant forward delay F shifts every busy period of a backend by F, and so every departure;
    the dispatcher then learns each departure F + (answer lag) after the model's, and a model whose
    jobs join at once and whose answers are late by F + (answer lag) has the same sojourns and the
    same dispatcher view. None when the dispatchers measured neither."""
    parts = [mean_delay_ms(statuses, name) for name in ("forward_delay", "answer_lag")]
    return None if parts == [None, None] else sum(part or 0.0 for part in parts)


def messages_per_request(statuses: list) -> float | str:
    """Probe messages (push, poll and metrics: a request and its answer each) per request over the
    dispatchers' ``GET /status``; "" when they do not say."""
    probes = requests = 0
    for status in statuses:
        if not isinstance(status, dict) or not isinstance(status.get("messages"), dict):
            return ""
        probes += sum(status["messages"].get(key, 0) for key in ("push_probes", "poll_probes", "metrics_scrapes"))
        requests += status.get("requests", 0)
    return 2 * probes / requests if requests else ""


def row_line(row: dict) -> str:
    """One run's figures on one line."""
    text = (
        f"{row['balancer']:<18} {row['policy']:<22} load {row['load']:<4g} live {row['live_mean_ms']:8.2f} ms "
        f"[{row['live_ci_low_ms']:.2f}, {row['live_ci_high_ms']:.2f}]  minus overhead "
        f"{row['live_minus_overhead_ms']:8.2f}"
    )
    if row.get("live_ttft_mean_ms", math.nan) == row.get("live_ttft_mean_ms"):
        text += f"  TTFT {row['live_ttft_mean_ms']:.2f} ms (p99 {row['live_ttft_p99_ms']:.2f})"
        text += f"  {row['tokens_per_s']:.0f} tokens/s"
    if row.get("live_herd_fraction", math.nan) == row.get("live_herd_fraction"):
        text += f"  herd {row['live_herd_fraction']:.3f} live"
        if "sim_herd_fraction" in row:
            text += f", {row['sim_herd_fraction']:.3f} simulated"
    if "sim_mean_ms" in row:
        text += (
            f"  simulated {row['sim_policy']} {row['sim_mean_ms']:8.2f} [{row['sim_ci_low_ms']:.2f}, "
            f"{row['sim_ci_high_ms']:.2f}], a run this long {row['sim_run_low_ms']:.2f} to {row['sim_run_high_ms']:.2f}"
        )
    if row.get("messages_per_request") not in (None, ""):
        text += f"  {row['messages_per_request']:.2f} messages/request"
    for key, name in (("forward_delay_ms", "forward delay"), ("answer_lag_ms", "answer lag")):
        if row.get(key, math.nan) == row.get(key):  # measured (not nan)
            text += f"  {name} {row[key]:.2f} ms"
    if "agrees" in row:
        text += "  agrees" if row["agrees"] else "  DIFFERS"
    if row["errors"] or row["live_blocking"]:
        text += f"  errors {row['errors']} blocking {row['live_blocking']:.4f}"
    return text


def format_table(rows: list[dict], orders: dict, against_peers: dict | None = None) -> str:
    """The side-by-side table of a testbed's runs, the policies' order at each load, and the policies
    against the balancers' best rules (Testbed.against_peers)."""
    lines = [row_line(row) for row in rows]
    for load, comparison in (against_peers or {}).items():
        best = ", ".join(f"{program} {balancer}" for program, balancer in comparison["best"].items())
        for policy, ratios in comparison["ratio"].items():
            shares = ", ".join(f"{ratio:.3f} x {program}'s" for program, ratio in ratios.items())
            lines.append(f"at load {load}: {policy} mean {shares} (best rules: {best})")
    for load, order in orders.items():
        if order["live"]:
            verdict = "same" if order["same"] else "DIFFERENT"
            if not order["same"]:
                verdict += (
                    ", the same where determined" if order["same_where_determined"] else ", also where determined"
                )
            if order["overlapping"]:
                pairs = "; ".join(" and ".join(pair) for pair in order["overlapping"])
                verdict += f"; either order in runs of this length: {pairs}"
            lines.append(
                f"order at load {load}: live {' < '.join(order['live'])}; simulated "
                f"{' < '.join(order['simulated'])} ({verdict})"
            )
    return "\n".join(lines)


def run_testbed(path, out, compare: list[str] | None = None, progress: bool = False, say=None) -> Testbed:
    """Run the testbed scenario file ``path``, writing testbed.csv, testbed.json and testbed.png in
    ``out``; ``compare`` (e.g. ["haproxy", "nginx"]) replaces the file's testbed.compare."""
    return run_testbed_mapping(read_toml(path, "scenario"), out, compare, progress, say)


def run_testbed_mapping(data: dict, out, compare: list[str] | None = None, progress: bool = False, say=None) -> Testbed:
    """:func:`run_testbed` on the tables of a scenario file."""
    if compare is not None:
        for program in compare:
            validation.choice("--compare", program, PROGRAMS)
        data = {**data, "testbed": {**validation.table("testbed", data.get("testbed", {})), "compare": compare}}
    scenario = TestbedScenario.from_mapping(data)
    testbed = Testbed(scenario, Path(out), say=say or (lambda line: print(line, file=sys.stderr)), progress=progress)
    testbed.run()
    return testbed
