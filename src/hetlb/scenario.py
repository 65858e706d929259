"""Scenarios: a system, a policy and a stopping rule, from a TOML file, a mapping or flags.

A scenario file has three tables::

    [system]
    speeds = "50x1.0,50x0.5"      # or a list of speeds; or n_servers = 100 with
                                  # speed_mix = [[1.0, 0.5], [0.5, 0.5]] (speed, fraction), or with
                                  # speed_distribution = {kind = "uniform", low = 0.7, high = 1.3}
    load = 0.9                    # or arrival_rate = 2.5 (or one rate per job type), or
                                  # excess_capacity = 1.0 (sum(speeds) - c sqrt(N), 002)
    buffer = 5                    # omit for infinite buffers
    job_sizes = "hyperexponential" # or lognormal, pareto, weibull (with scv), empirical:FILE
    scv = 4.0
    concurrency = "50x8,50x32"    # jobs a server serves at once (default 1; "inf": unlimited)
    rate_curve = "saturating:alpha=0.2"  # phi(b); or [[50, "shared"], [50, "table:1,1.9"]]
    arrivals = "mmpp:ratio=4,on=10,off=30"  # or "batch:mean=3"; default "poisson"
    graph = [[0, 1], [1, 2]]      # servers of each job type; omit for the complete graph;
                                  # or a construction (hetlb.graphs.constructions.GRAPH_KINDS):
                                  # graph = {kind = "fig3", ports_exponent = 1.2, seed = 0}

    [policy]
    id = "pod"
    d = 2

    [run]
    jobs = 100000                 # or horizon = 5000.0
    warmup = 100.0
    replications = 5
    seed = 1

``model = "slotted"`` in [system] gives the slotted multi-dispatcher model of paper 001 instead
(keys ``dispatchers``, ``dispatcher_share``, ``arrivals``, ``service``, ``routing``, ``ties``; [run] takes
``slots``); SYSTEM_KEYS and RUN_KEYS list each model's keys, and docs/reference/scenario.md describes
every key with its default and unit. ``update`` in [policy] is the update signals of hetlb.signals
in both models (a text such as "piggyback,push:p_hat=0.1:d=2" or a table of signals; the slotted
model takes one of push or pull). In the continuous model, ``dispatchers`` and ``dispatcher_share``
in [system] and ``herd_window`` in [run] give M dispatchers that decide on their own estimates
(hetlb.simulation.dispatchers; docs/reference/dispatchers.md). They join the [run] keys in the
scenario's one hetlb.simulation.options.RunOptions, under the same names.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hetlb import validation
from hetlb.errors import InputError
from hetlb.graphs.constructions import construct_graph, graph_ports
from hetlb.model import JobSizes, System, parse_speeds
from hetlb.model.slotted import SlottedSystem
from hetlb.model.speed_distributions import draw_speeds
from hetlb.model.system import port_arrival_rates, server_count, speed_groups, speeds_from_mix
from hetlb.policies import Policy, make_policy
from hetlb.signals import slotted_update
from hetlb.simulation.options import RunOptions, SlottedRunOptions

SPEED_KEYS = {"speeds", "n_servers", "speed_mix", "speed_distribution"}
SYSTEM_KEYS = {
    "continuous": SPEED_KEYS
    | {
        "model",
        "load",
        "arrival_rate",
        "excess_capacity",
        "buffer",
        "job_sizes",
        "scv",
        "concurrency",
        "rate_curve",
        "arrivals",
        "graph",
        "n_types",
        "dispatchers",
        "dispatcher_share",
        "cache_blocks",
        "prompts",
        "prefill_work",
        "prefill_law",
    },
    "slotted": SPEED_KEYS
    | {"model", "load", "arrival_rate", "dispatchers", "dispatcher_share", "arrivals", "service", "routing", "ties"},
}
SLOTTED_SINGLE_SLOT_KEYS = {"concurrency", "rate_curve"}
"""Keys of the continuous model's servers that the slotted model has no meaning for: its servers
serve one job at a time (concurrency 1)."""
RUN_KEYS = {
    "continuous": {
        "jobs",
        "horizon",
        "warmup",
        "replications",
        "seed",
        "batches",
        "occupancy_levels",
        "state_distribution",
        "speed_bins",
        "herd_window",
    },
    "slotted": {"slots", "warmup", "replications", "seed", "batches", "preference"},
}
"""The keys of the [system] and [run] tables of each model (``system.model``, default continuous):
the run keys are those of hetlb.simulate and hetlb.simulate_slotted."""


@dataclass
class Scenario:
    """What to simulate (``system``, ``policy``) and how (``run``: the checked RunOptions of
    hetlb.simulate, built once from the [run] table and the dispatcher keys; or, for a slotted
    system, the SlottedRunOptions of hetlb.simulate_slotted, from the [run] table)."""

    system: System | SlottedSystem
    policy: Policy
    run: RunOptions | SlottedRunOptions = field(default_factory=RunOptions)

    @property
    def model(self) -> str:
        return "slotted" if isinstance(self.system, SlottedSystem) else "continuous"

    def simulate(self, **overrides):
        """Run the scenario (``overrides`` replace run keys, e.g. ``seed``)."""
        from hetlb.simulation.simulate import simulate
        from hetlb.simulation.slotted import simulate_slotted

        run = simulate if isinstance(self.run, RunOptions) else simulate_slotted
        return run(self.system, self.policy, self.run.replace(**overrides) if overrides else self.run)

    @classmethod
    def from_mapping(cls, data: dict) -> Scenario:
        validation.table("scenario", data)
        unknown = sorted(set(data) - set(TABLES))
        if unknown:
            name = validation.shorten(unknown[0])
            raise InputError(f"scenario.{name}", "unknown table; use [system], [policy] and [run]")
        system_data, policy_data, run = (dict(validation.table(name, data.get(name, {}))) for name in TABLES)
        model = validation.choice("system.model", system_data.get("model", "continuous"), tuple(SYSTEM_KEYS))
        if model == "slotted":
            for key in sorted(SLOTTED_SINGLE_SLOT_KEYS & set(system_data)):
                raise InputError(f"system.{key}", "the slotted model has servers that serve one job at a time")
        check_keys("system", system_data, SYSTEM_KEYS[model])
        check_keys("run", run, RUN_KEYS[model])
        fields = {key: f"run.{key}" for key in run}  # the dispatcher keys keep their names
        if model == "slotted":
            slotted = SlottedRunOptions.from_mapping(run, fields)
            return cls(build_slotted_system(system_data), build_policy(slotted_update(policy_data)), slotted)
        for key, table in (("dispatchers", system_data), ("dispatcher_share", system_data), ("update", policy_data)):
            if key in table:
                run[key] = table.pop(key)
        options = RunOptions.from_mapping(run, fields)
        return cls(build_system(system_data), build_policy(policy_data), options)

    @classmethod
    def from_toml(cls, path) -> Scenario:
        return cls.from_mapping(read_toml(path))


TABLES = ("system", "policy", "run")
"""The tables of a scenario."""

MAX_TOML_BYTES = 32 * 2**20
"""The largest scenario or spec file read (a larger one is refused rather than read into memory)."""


def read_toml(path, field: str = "config") -> dict:
    """The tables of the TOML file at ``path``; ``field`` names the path in error messages."""
    found = validation.input_file(field, path)
    name = validation.shorten(str(found))
    try:
        if not found.is_file():  # a FIFO would block, a device (/dev/zero) never end
            raise InputError(field, f"{name} is not a regular file")
        with found.open("rb") as handle:
            raw = handle.read(MAX_TOML_BYTES + 1)
    except OSError as error:
        raise InputError(field, f"cannot read {name}: {error.strerror or error}") from None
    if len(raw) > MAX_TOML_BYTES:
        raise InputError(field, f"{name} is larger than {MAX_TOML_BYTES // 2**20} MiB: not a scenario or spec file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InputError(field, f"{name} is not UTF-8 text (byte {error.start}): TOML files are UTF-8") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise InputError(field, f"{name} is not valid TOML: {validation.shorten(str(error))}") from None
    except RecursionError:
        raise InputError(field, f"{name} is not valid TOML: nested too deeply") from None


def check_keys(table: str, data: dict, allowed: set) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        name = validation.shorten(unknown[0])
        raise InputError(f"{table}.{name}", f"unknown key; allowed: {', '.join(sorted(allowed))}")


def build_slotted_system(data: dict) -> SlottedSystem:
    options = {key: data[key] for key in ("dispatcher_share", "arrivals", "service", "routing", "ties") if key in data}
    return SlottedSystem.from_speeds(
        speeds_of(data),
        dispatchers=data.get("dispatchers", 1),
        arrival_rate=data.get("arrival_rate"),
        load=data.get("load"),
        **options,
    )


def build_system(data: dict) -> System:
    speeds = speeds_of(data)
    kind = validation.text("system.job_sizes", data.get("job_sizes", "exponential"))
    job_sizes = JobSizes.parse(kind, validation.number("system.scv", data["scv"]) if "scv" in data else None)
    graph, report = check_graph(data.get("graph")), None
    rates: dict[str, Any] = {
        "arrival_rate": data.get("arrival_rate"),
        "load": data.get("load"),
        "excess_capacity": data.get("excess_capacity"),
    }
    n_types = data.get("n_types", 1)
    if isinstance(graph, dict):
        # a construction needs the ports' rates (and the buffer, for the theorems) first
        ports = graph_ports(graph, len(speeds))
        if ports is None:
            ports = len(rates["arrival_rate"]) if np.ndim(rates["arrival_rate"]) == 1 else n_types
        port_rates = port_arrival_rates(speeds, validation.integer("system.n_types", ports), **rates)
        buffer = data.get("buffer")
        graph, report = construct_graph(graph, speeds, port_rates, buffer if isinstance(buffer, int) else None)
        rates = {"arrival_rate": port_rates}
    return System.from_speeds(
        speeds,
        **rates,
        buffer=data.get("buffer"),
        graph=graph,
        n_types=n_types,
        job_sizes=job_sizes,
        graph_construction=report,
        concurrency=per_group(data.get("concurrency"), data, len(speeds)),
        rate_curve=per_group(data.get("rate_curve"), data, len(speeds)),
        arrivals=data.get("arrivals"),
        cache_blocks=per_group(data.get("cache_blocks"), data, len(speeds)),
        prompts=data.get("prompts"),
        prefill_work=data.get("prefill_work"),
        prefill_law=data.get("prefill_law"),
    )


def per_group(value, data: dict, n_servers: int):
    """A list of ``concurrency``, ``rate_curve`` or ``cache_blocks`` values with one per group of servers (an item
    COUNTxSPEED of a ``speeds`` text, a row of ``speed_mix``), as [count, value] pairs per server
    group; any other value as it is (one for all, one per server, or pairs already)."""
    counts = group_counts(data)
    if not isinstance(value, list) or counts is None or len(value) != len(counts) or len(counts) == n_servers:
        return value
    if any(isinstance(item, (list, tuple)) for item in value):
        return value
    pairs = [[count, item] for count, item in zip(counts, value)]
    if isinstance(value[0], str):
        return pairs
    return [item for count, item in pairs for _ in range(count)]


def group_counts(data: dict) -> list | None:
    """The server count of each group of ``speeds`` (a text "50x1.0,50x0.5") or ``speed_mix``."""
    speeds = data.get("speeds")
    if isinstance(speeds, str):
        return speed_groups(speeds)[0]
    if "speed_mix" in data and "n_servers" in data:
        mix = np.asarray(data["speed_mix"], dtype=float).reshape(-1, 2)
        return [int(round(fraction * data["n_servers"])) for fraction in mix[:, 1]]
    return None


def speeds_of(data: dict) -> np.ndarray:
    """The server speeds from ``speeds``, or from ``n_servers`` with ``speed_mix`` (exact pool
    sizes) or ``speed_distribution`` (i.i.d. draws, :mod:`hetlb.model.speed_distributions`)."""
    if ("speeds" in data) == ("n_servers" in data or "speed_mix" in data or "speed_distribution" in data):
        raise InputError("system.speeds", "give either speeds, or n_servers with speed_mix or speed_distribution")
    if "speed_distribution" in data:
        if "speed_mix" in data:
            raise InputError("system.speed_mix", "give speed_mix or speed_distribution, not both")
        spec = data["speed_distribution"]
        if not isinstance(spec, dict):
            raise InputError("system.speed_distribution", "must be a table with a kind")
        return draw_speeds(server_count("system.n_servers", data.get("n_servers")), spec)
    if "speeds" in data:
        speeds = data["speeds"]
        if isinstance(speeds, str):
            return parse_speeds(speeds)
        if not isinstance(speeds, (list, tuple, np.ndarray)) or not all(map(validation.is_real, speeds)):
            rule = f'must be a text such as "2x1.0,2x0.5" or a list of numbers, got {validation.shown(speeds)}'
            raise InputError("system.speeds", rule)
        return np.asarray(speeds, dtype=float)
    if "speed_mix" not in data:
        raise InputError("system.n_servers", "needs speed_distribution (--speed-distribution) or speed_mix with it")
    try:
        return speeds_from_mix(data.get("n_servers"), data["speed_mix"])
    except InputError as error:
        raise InputError(f"system.{error.field}", error.rule) from None


def check_graph(graph):
    """A graph as the [system] table gives it: a construction table, one list of server indices
    per job type, or (from Python) a graph object, all checked further by hetlb.model."""
    if isinstance(graph, (str, bool, int, float)) or (
        isinstance(graph, list)
        and not all(isinstance(servers, list) and all(map(validation.is_integer, servers)) for servers in graph)
    ):
        rule = "must be one list of server indices per job type, or a construction table {kind = ...}"
        raise InputError("system.graph", f"{rule}, got {validation.shown(graph)}")
    return graph


def build_policy(data: dict) -> Policy:
    params = dict(data)
    if "plugins" in params:
        from hetlb.policies.plugins import load_plugins

        load_plugins(params.pop("plugins"), "policy.plugins")
    policy_id = validation.text("policy.id", params.pop("id", "jsq"))
    return make_policy(policy_id, **params)
