"""A testbed scenario (``hetlb testbed SCENARIO.toml``, docs/reference/testbed.md): the simulator's
scenario plus the [testbed] table, every key checked; the defaults; and when a policy decides live
as it does in the simulator."""

from __future__ import annotations

import hashlib
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hetlb import validation
from hetlb.errors import InputError
from hetlb.load.inference import TOKEN_LIMIT, parse_law, token_counts
from hetlb.model import System
from hetlb.model.job_sizes import JobSizes
from hetlb.policies import POLICIES
from hetlb.policies.registry import JFSQ, L_JBA, WEIGHTED_RANDOM, policies_where
from hetlb.scenario import Scenario, read_toml
from hetlb.signals import LiveRun, model_twin
from hetlb.signals import text as signal_text
from hetlb.testbed.peers import PROGRAMS, ROUTERS

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
    times the mean-1 laws of hetlb.load.inference (rounded, at least 1)."""

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
        load generator draws them (hetlb.load.inference.token_counts)."""
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
        from hetlb.load.inference import law_text

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
        from hetlb.gateway.config import parse_signals

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


def type_name(job_type: int) -> str:
    """The name of job type k in the testbed's runs (its backends' types): ``t{k}``."""
    return f"t{job_type}"


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
