"""One dispatcher that knows every queue, in continuous time: validate -> pack arrays -> run the
kernel -> results (what hetlb.simulate runs without dispatchers=)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from hetlb import validation
from hetlb.constants import ARRIVALS_POISSON, ARRIVALS_TRACE, INFINITE_BUFFER
from hetlb.errors import InputError
from hetlb.kernels import batch_servers as slot_kernel
from hetlb.kernels import continuous as kernel
from hetlb.kernels.arrivals import start_arrivals
from hetlb.kernels.buckets import grow_buckets, new_buckets
from hetlb.kernels.sampling import alias_table as jit_alias_table
from hetlb.kernels.server_state import ServerExtension
from hetlb.kernels.trees import KEY_NODE_DTYPE, cache_aligned_zeros, new_key_tree, new_tournament, tree_width
from hetlb.model.system import System
from hetlb.policies import registry, rules
from hetlb.policies.registry import BY_CODE, Policy, PolicySpec, resolve_policy
from hetlb.results.base import versions
from hetlb.results.run import RunResult, SimulationResult
from hetlb.simulation import batch_servers, caches
from hetlb.simulation.fast_start import kernels_for
from hetlb.simulation.options import RunOptions
from hetlb.simulation.replications import (
    MAX_EVENTS,
    check_events,
    check_resolution,
    entropy_of,
    run_replications,
    safe_ratio,
    seed_description,
)
from hetlb.stats import growth_between_halves, interval, ratio_per_batch
from hetlb.stats.halfin_whitt import speed_profile

TREE_MIN_SERVERS = 2
"""A complete job type with at least this many servers is routed through the O(log N) tree (or the
key buckets, BUCKET_MAX_CLASSES): at 2, every complete job type but a lone server's, so that the
O(degree) scan serves only sparse graphs. The tree draws one uniform number per decision where
the scan draws one per tied server; it was measured faster than the scan from N = 10 up, and the
smaller systems take it too. The tests move this threshold to run every path."""

STATE_DISTRIBUTION_SIZE_PER_SERVER = 2
"""The time-distributions of the number of jobs (and of waiting jobs) have 2N + 64 entries; the
last one collects the time spent at that number or more."""

BUCKET_MAX_CLASSES = 4
"""A policy whose keys are integers (PolicySpec.integer_keys) routes the job types that
may use every server through key buckets, O(1) per decision, instead of the tree when the
servers have at most this many speed classes (a jfsq key moves by the number of classes per
event, one bucket per step); the tests run both paths."""

advance = kernel.advance
advance_with_caches = kernel.advance_with_caches
advance_slots = slot_kernel.advance
alias_table = jit_alias_table
selection_keys = rules.selection_keys
"""The kernel functions called from here: numba's (from its cache), or as plain Python in a
short run (hetlb.simulation.fast_start)."""

EVENTS_PER_CALL = 4_000_000
"""Events per kernel call between progress updates (does not change results)."""
EVENTS_PER_S_AT_MOST = 1e8
"""More events than the kernels simulate in a second on any machine (about 1e7 at best, measured by
benchmarks/floor_ratio.py): a time estimate from it is a lower bound (hetlb.validation.check_cost)."""

SPEED_RANGE = (2.0**-30, 2.0**20)
"""Speeds the simulation takes. Its response-time histogram spans 2^-30 to 2^40 time units: mean
service times 1 / speed in [2^-20, 2^30] keep the response times, from a thousandth of a service
time to a thousand of them, inside it. (A model's rates scale freely with its time unit.)"""

OVERHEAD_RATIO = 1000
OVERHEAD_FLOOR = 10**9
"""A run whose expected events beyond what it was asked for (arrivals lost at full buffers,
waiting for a measured job at a very slow server) exceed OVERHEAD_RATIO times the events asked
for, and OVERHEAD_FLOOR (under a minute), is refused: it would hang with nothing to show for it."""


def simulate_one_dispatcher(
    system: System, policy: str | Policy, options: RunOptions, **policy_params
) -> SimulationResult:
    """hetlb.simulate with one dispatcher that knows every queue (see hetlb.simulation.simulate)."""
    policy = resolve_policy(policy, policy_params)
    if policy.spec.on_local_estimates:
        raise InputError(
            "policy",
            f"{policy.id} decides on local estimates: give dispatchers= (and update=) for continuous time, "
            "or run the slotted model (hetlb.simulate_slotted)",
        )
    if "continuous" not in policy.spec.models:
        raise InputError("policy", f"{policy.id} runs only in the slotted model (hetlb.simulate_slotted)")
    if system.has_multi_slot_servers:
        batch_servers.check_multi_slot_policy(system, policy)
    else:
        check_kernel_branch(policy.spec)
    events = check_run(system, policy, options)
    caches.check_caches(system, policy, events / (2 * options.replications), options)
    cache_policy = policy if caches.has_caches(system, policy) else None
    with kernels_for(events):
        model = pack_model(system, policy, options)
        slot_model = batch_servers.pack_slots(system) if system.has_multi_slot_servers else None
        runs = run_replications(
            options.root_seed,
            options.replications,
            f"{policy.id} ",
            options.progress,
            lambda seed_sequence, report: run_replication(
                system, model, seed_sequence, options, report, slot_model, cache_policy
            ),
        )
    metadata = run_metadata(system, policy.describe(), policy, options, **caches.cache_metadata(system))
    return SimulationResult(runs, metadata)


def check_run(system: System, policy: Policy, options: RunOptions) -> float:
    """What the run options cannot check alone: the system, the policy's stability on it, its
    speeds, and the expected cost and memory of the run; gives the expected events of every
    replication."""
    if not isinstance(system, System):
        raise InputError("system", "must be a hetlb.System (build one with System.from_speeds)")
    check_policy_stability(system, policy)
    check_speeds(system)
    cost = run_cost(system, options.jobs, options.end_time, options.warmup)
    cost.check(options.replications)
    check_run_memory(run_memory(system, policy, options), system.n_servers, options.replications)
    return cost.events * options.replications


def run_metadata(system: System, policy_description: dict, policy: Policy, options: RunOptions, **extra) -> dict:
    """The metadata of a continuous-time result (``extra`` goes after the policy's)."""
    return {
        "system": system.describe(),
        "policy": policy_description,
        "policy_definition": policy.spec.definition,
        **extra,
        "seed": seed_description(options.seed, options.root_seed),
        "replications": options.replications,
        "stopping": options.stopping(),
        "batches": options.batches,
        "confidence": 0.95,
        "versions": versions(),
    }


def check_speeds(system: System) -> None:
    """The speeds must lie in SPEED_RANGE, where the response times fit the histogram."""
    outside = system.speed[(system.speed < SPEED_RANGE[0]) | (system.speed > SPEED_RANGE[1])]
    if len(outside):
        raise InputError(
            "speed",
            f"the simulation takes speeds in [2^-30, 2^20] = [{SPEED_RANGE[0]:.3g}, {SPEED_RANGE[1]:.3g}], where "
            f"its response-time histogram (2^-30 to 2^40 time units) holds the response times, got "
            f"{outside[0]:.3g}; choose the time unit to bring them there",
        )


@dataclass(frozen=True)
class RunCost:
    """What one replication is expected to take, in events (arrivals and departures, as the
    kernel counts them) and simulated time, before it runs.

    ``asked``: the events of what the run was asked for: the warm-up's arrivals, then the
    measured jobs (or every arrival up to the horizon), each with its departure. ``lost``: the
    arrivals lost at full buffers beyond those: with finite buffers at most ``admitted_rate`` of the
    arrival rate is admitted (no more than the servers a job type may use can serve), so each
    measured job costs at least arrival_rate / admitted_rate arrivals. ``drain``: the events while
    the largest measured job (JobSizes.largest of the jobs measured) is served at the slowest
    server, at the arrival rate, which the run waits for. ``end_time``: about when the run ends."""

    arrival_rate: float
    admitted_rate: float
    slowest_speed: float
    fastest_speed: float
    jobs: int | None
    horizon: float
    warmup: float
    asked: float
    lost: float
    drain: float
    end_time: float

    @property
    def events(self) -> float:
        return self.asked + self.lost + self.drain

    def check(self, replications: int = 1, runs: int = 1) -> None:
        """Refuse a run whose cost is out of proportion to what it was asked for (more than
        OVERHEAD_RATIO times its asked events, and more than OVERHEAD_FLOOR), whose ``runs`` x
        ``replications`` runs exceed MAX_EVENTS, or whose times lose the precision of a service."""
        overhead = self.lost + self.drain
        if overhead > max(OVERHEAD_FLOOR, OVERHEAD_RATIO * self.asked):
            if self.lost >= self.drain:
                raise InputError(
                    "arrival_rate",
                    f"with finite buffers at most {self.admitted_rate:.3g} of the arrival rate "
                    f"{self.arrival_rate:.3g} can be admitted, so {self.jobs:,} measured jobs take about "
                    f"{validation.quantity(self.lost + (self.jobs or 0))} arrivals, all but those jobs lost (at most "
                    f"{self.admitted_rate / self.arrival_rate:.3g} of the arrivals admitted): more than "
                    f"{OVERHEAD_RATIO:,} times the work of the jobs asked for; lower the arrival rate or give a horizon",
                )
            raise InputError(
                "speed",
                f"the slowest server (speed {self.slowest_speed:.3g}) may take about "
                f"{self.drain / (2 * self.arrival_rate):.3g} time units on the largest measured job, while jobs "
                f"arrive at rate {self.arrival_rate:.3g}: seeing it through takes about "
                f"{validation.quantity(self.drain)} events, more than {OVERHEAD_RATIO:,} times the "
                f"{validation.quantity(self.asked)} asked for; raise the slowest speeds or leave those servers "
                "out (or lower the job sizes' scv)",
            )
        field = "replications" if self.events * runs <= MAX_EVENTS else ("jobs" if self.jobs else "horizon")
        if self.jobs and self.arrival_rate * self.warmup > self.jobs:
            field = "warmup"
        check_events(field, self.events * replications * runs, replications * runs)
        if self.jobs is None:
            field, advice = "horizon", "shorten the horizon"
        elif self.warmup >= self.jobs / self.admitted_rate:
            field, advice = "warmup", "shorten the warm-up"
        else:
            field, advice = "jobs", "measure fewer jobs, or raise the arrival rate"
        check_resolution(field, self.end_time, min(1.0 / self.arrival_rate, 1.0 / self.fastest_speed), advice)


def run_cost(system: System, jobs: int | None, horizon: float, warmup: float) -> RunCost:
    """The expected cost of one replication of a checked stopping rule (:class:`RunCost`)."""
    rate = system.total_arrival_rate
    admitted = rate
    if not system.has_infinite_buffers:
        graph = system.graph
        reachable = np.add.reduceat(system.speed[graph.indices], graph.indptr[:-1]) if graph.n_edges else 0.0
        admitted = min(float(np.minimum(system.arrival_rate, reachable).sum()), system.capacity, rate)
    slowest, fastest = float(system.speed.min()), float(system.speed.max())
    service = system.job_sizes.largest(rate * horizon if jobs is None else jobs) / slowest
    drain = 2.0 * rate * service
    if jobs is None:
        asked, lost, end_time = 2.0 * rate * horizon, 0.0, horizon + service
    else:
        asked = 2.0 * (rate * warmup + jobs)
        lost = jobs * (rate / admitted - 1.0)
        end_time = warmup + jobs / admitted + service
    return RunCost(rate, admitted, slowest, fastest, jobs, horizon, warmup, asked, lost, drain, end_time)


def run_memory(system: System, policy: Policy, options: RunOptions) -> dict:
    """Bytes a simulation allocates at most, by the argument that drives them (``system``: per
    server the kernel's records, trees and key buckets, per edge of the graph, per job slot of the
    pool it starts with, the results' per-server arrays; ``replications``: what the further
    replications keep; ``batches``, ``occupancy_levels``, ``trace``, ``state_distribution``,
    ``speed_bins``: their arrays in the run and the results), numpy temporaries included. The job
    pool doubles when more jobs wait than it holds; grow_job_pool refuses to grow it beyond the
    machine's memory. Their sum bounds a run's memory (tests measure it)."""
    batches, occupancy_levels, trace = options.batches, options.occupancy_levels, options.trace
    state_distribution, speed_bins, replications = options.state_distribution, options.speed_bins, options.replications
    n, edges, types = system.n_servers, system.graph.n_edges, system.n_types
    n_classes = len(np.unique(system.speed))
    slots = initial_job_slots(system.buffer, n)
    levels = n_classes * (occupancy_levels + 1)
    bucketed = policy.spec.ranks_whole_set and policy.spec.integer_keys and n_classes <= BUCKET_MAX_CLASSES
    histogram = kernel.HISTOGRAM_OCTAVES * kernel.HISTOGRAM_BINS_PER_OCTAVE * 8
    # multi-slot servers: their records, first regions of jobs in service, the window's area of b
    slot_bytes_per_server = (
        slot_kernel.SLOT_SERVER_DTYPE.itemsize
        + slot_kernel.INITIAL_SERVICE_ROOM * slot_kernel.SERVICE_DTYPE.itemsize
        + 3 * 8
    )
    kept = 48 * n + 600 * n_classes + histogram  # per replication: per-server arrays, class tables, histogram
    distribution = 2 * STATE_DISTRIBUTION_SIZE_PER_SERVER * n + 128 if state_distribution else 0
    return {
        "system": (
            160 * n  # server records, model arrays, keys, window integrals, speed classes
            + 2 * 48 * tree_width(n)  # the tournament tree and the key tree, with what building them takes
            + 64 * n  # key buckets
            + 64 * edges
            + 48 * types
            + 40 * slots
            + (32 * (slots + 2) * n_classes if bucketed else 0)  # the key buckets' boundaries
            + histogram
            + 600 * n_classes  # the metadata's speed classes (Python objects)
            + kept
            + (slot_bytes_per_server * n if system.has_multi_slot_servers else 0)
            + caches.cache_memory(system, policy)
            + (caches.server_caches.JOB_DTYPE.itemsize * slots if caches.has_caches(system, policy) else 0)
        ),
        "replications": (replications - 1) * kept,
        "batches": 128 * batches + 160 * batches * replications,
        "occupancy_levels": 40 * levels + 24 * levels * replications,
        "trace": 64 * trace * (1 + replications),
        "state_distribution": 8 * distribution * (1 + replications),
        "speed_bins": 400 * (speed_bins or 0) * replications,
    }


def check_run_memory(parts: dict, n_servers: int, replications: int) -> None:
    """Refuse a simulation whose memory (:func:`run_memory`) passes the machine's, naming the
    argument that weighs most."""
    field = max(parts, key=lambda name: parts[name])
    advice = {"system": "use fewer servers", "replications": "use fewer replications"}.get(field, f"lower {field}")
    if field == "state_distribution":
        advice = "leave out the state distribution, or use fewer servers"
    what = f"a simulation of {n_servers:,} server{'s' if n_servers != 1 else ''}" + (
        f" and {replications:,} replications" if replications > 1 else ""
    )
    validation.check_memory(field, sum(parts.values()), what, advice)


def check_kernel_branch(spec: PolicySpec) -> None:
    """Refuse, before anything runs, a policy the continuous kernel has no rule for: neither one of
    its own branches nor a selection key (hetlb.kernels.continuous.CODES), nor a key of its own."""
    if spec.code not in kernel.CODES and spec.selection_key is None:
        raise InputError(
            "policy", f"{spec.id} (code {spec.code}) has no branch in the continuous kernel (hetlb.kernels.continuous)"
        )


def policy_functions(code: int, with_caches: bool = False):
    """(advance, selection_keys) for the policy of kernel code ``code``: the cached kernel and keys
    (with ``with_caches``, the kernel's copy for a run with prefix caches), or, for a policy
    registered with its own selection key (hetlb.register_policy), copies compiled with that key
    once per process (hetlb.kernels.specialise)."""
    key = BY_CODE[code].selection_key
    if key is None:
        return (advance_with_caches if with_caches else advance), selection_keys
    from hetlb.kernels import specialise  # only for a policy of a plugin

    return specialise.with_key(kernel.advance, key), specialise.with_key(rules.selection_keys, key)


def check_policy_stability(system: System, policy: Policy) -> None:
    """Static-routing policies overload a server whose share of the traffic exceeds its speed;
    jsq-df-ds with p_F = 1 and p_S = 0 never uses its slow servers."""
    if not system.has_infinite_buffers:
        return
    if policy.code == registry.JSQ_DF_DS and policy.params["p_fast"] == 1 and policy.params["p_slow"] == 0:
        fast_capacity = system.speed[system.speed == system.speed.max()].sum()
        if system.total_arrival_rate >= fast_capacity:
            raise InputError(
                "policy",
                f"jsq-df-ds with p_fast = 1 and p_slow = 0 sends no job to a slow server, "
                f"so the fast servers' capacity {fast_capacity:.6g} must exceed the arrival rate "
                f"{system.total_arrival_rate:.6g} (infinite buffers)",
            )
    if policy.spec.decides_on_load:  # only a static split can overload a server for good
        return
    graph = system.graph
    capacity = system.server_capacity  # the speed, with concurrency 1
    edge_type = np.repeat(np.arange(system.n_types), graph.degree())
    weight = np.ones(graph.n_edges) if policy.code == registry.RANDOM else capacity[graph.indices]
    type_weight = np.bincount(edge_type, weights=weight, minlength=system.n_types)
    edge_rate = system.arrival_rate[edge_type] * weight / type_weight[edge_type]
    server_rate = np.bincount(graph.indices, weights=edge_rate, minlength=system.n_servers)
    overloaded = np.flatnonzero(server_rate >= capacity)
    if len(overloaded):
        s = int(overloaded[0])
        what = "speed" if system.has_single_slots else "capacity mu phi(c)"
        raise InputError(
            "policy",
            f"{policy.id} is unstable here: server {s} receives jobs at rate "
            f"{server_rate[s]:.6g} >= its {what} {capacity[s]:.6g} (infinite buffers)",
        )


def pack_model(system: System, policy: Policy, options: RunOptions):
    """The kernel's read-only arrays for ``system`` under ``policy``. With M dispatchers
    (``options.many_dispatchers``) no job type routes by the single dispatcher's tree: the
    dispatchers route by their own (hetlb.simulation.dispatchers.pack_dispatchers).
    ``compat_cumulative_speed`` sums the servers' capacities mu phi(c), their speeds with
    concurrency 1 (weighted-random's weights)."""
    jobs, horizon, warmup, batches = options.jobs, options.end_time, options.warmup, options.batches
    graph = system.graph
    class_speed, server_class = system.speed_classes()
    edge_speed = system.server_capacity[graph.indices]
    compat_cumulative_speed = np.cumsum(edge_speed) - np.repeat(
        np.concatenate([[0.0], np.cumsum(edge_speed)])[graph.indptr[:-1]], graph.degree()
    )
    compat_indices, compat_first_slow = graph.indices, np.zeros(0, np.int64)
    if policy.code == registry.JSQ_DF_DS:
        compat_indices, compat_first_slow = fast_servers_first(graph, server_class == 0)
    sample_sizes = [  # the kernel samples min(d, servers) of them: d beyond N is N (and fits in an int64)
        min(policy.params[name], system.n_servers) for name in ("d", "d_fast", "d_slow") if name in policy.params
    ]
    uses_tree = policy.spec.ranks_whole_set and system.n_servers >= TREE_MIN_SERVERS and not options.many_dispatchers
    finite_buffer = system.buffer[system.buffer != INFINITE_BUFFER]
    n_levels = (
        int(min(options.occupancy_levels, finite_buffer.max()))
        if len(finite_buffer) == system.n_servers
        else options.occupancy_levels
    )
    size_code, arrival_code, arrival_params = system.job_sizes.code, system.arrivals.code, arrival_parameters(system)
    epochs = caches.trace_epochs(system)
    if epochs is not None:  # a trace's requests: its arrival times and sizes (hetlb.simulation.caches)
        arrival_code, arrival_params = ARRIVALS_TRACE, np.append(epochs, np.inf)
        size_code = kernel.SIZE_DETERMINISTIC  # nothing drawn: the caches give each job its decode size
        horizon = min(horizon, float(epochs[-1]))  # the trace's end closes the window
        if jobs is not None:
            jobs = min(jobs, int(np.sum(epochs >= warmup)))
    if jobs is None:
        batch_ends = warmup + (horizon - warmup) * np.arange(1, batches + 1) / batches
        batch_ends[-1] = horizon
    else:
        batch_ends = np.floor(jobs * np.arange(1, batches + 1) / batches)
    type_keep, type_alias = alias_table(np.asarray(system.arrival_rate, dtype=np.float64))
    return kernel.KernelModel(
        speed=system.speed,
        inv_speed=1.0 / system.speed,
        buffer=system.buffer,
        server_class=server_class,
        n_classes=len(class_speed),
        class_speed=class_speed,
        type_keep=type_keep,
        type_alias=type_alias,
        total_arrival_rate=system.total_arrival_rate,
        compat_indptr=graph.indptr,
        compat_indices=compat_indices,
        compat_cumulative_speed=compat_cumulative_speed,
        compat_first_slow=compat_first_slow,
        type_uses_tree=(graph.complete_types() & uses_tree).astype(np.uint8),
        size_code=size_code,
        size_params=system.job_sizes.kernel_parameters(),
        arrival_code=arrival_code,
        arrival_params=arrival_params,
        policy_code=policy.code,
        sample_sizes=np.array(sample_sizes or [1], np.int64),
        route_probabilities=np.array([policy.params.get("p_fast", 0.0), policy.params.get("p_slow", 0.0)]),
        n_levels=n_levels,
        warmup=warmup,
        horizon=horizon,
        target_jobs=np.iinfo(np.int64).max if jobs is None else jobs,
        batch_ends=batch_ends.astype(np.float64),
        batch_by_jobs=0 if jobs is None else 1,
    )


def arrival_parameters(system: System) -> np.ndarray:
    """The parameters of a non-Poisson arrival process in the kernels (hetlb.kernels.arrivals):
    batch (B / lambda, ln(1 - 1/B)); mmpp (1 / lambda_on, 1 / lambda_off, T1, T2, T1 / (T1 + T2));
    zeros for Poisson arrivals, which the loops draw themselves."""
    process, rate = system.arrivals, system.total_arrival_rate
    if process.kind == "batch":
        return np.array([process.mean_batch / rate, math.log1p(-1.0 / process.mean_batch), 0.0, 0.0, 0.0])
    if process.kind == "mmpp":
        on_rate, off_rate = process.phase_rates(rate)
        return np.array([1.0 / on_rate, 1.0 / off_rate, process.on, process.off, process.on_probability()])
    return np.zeros(5)


def start_arrival_process(model, counters_array, arrival_rng) -> None:
    """The first arrival epoch from time 0: an exponential of rate lambda for Poisson arrivals (as
    always), a trace's first epoch (0) for its requests, the process's own start otherwise
    (hetlb.kernels.arrivals.start_arrivals)."""
    if model.arrival_code == ARRIVALS_POISSON:
        counters_array[0]["next_arrival"] = arrival_rng.exponential() * (1.0 / model.total_arrival_rate)
    elif model.arrival_code == ARRIVALS_TRACE:  # a trace's first request (its epochs start at 0)
        counters_array[0]["next_arrival"] = model.arrival_params[0]
    else:
        start_arrivals(counters_array, model.arrival_code, model.arrival_params, arrival_rng)


def fast_servers_first(graph, fast: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each job type's servers with the fast ones (``fast[s]``) first, and where its slow ones start."""
    edge_type = np.repeat(np.arange(graph.n_types), graph.degree())
    edge_is_slow = ~fast[graph.indices]
    order = np.lexsort((edge_is_slow, edge_type))
    fast_count = np.bincount(edge_type, weights=~edge_is_slow, minlength=graph.n_types).astype(np.int64)
    return graph.indices[order], graph.indptr[:-1] + fast_count


def new_state(
    model, n_servers: int, trace: int, state_distribution: bool = False, slots=None, extension=None
) -> kernel.KernelState:
    """An empty system at time 0; ``slots``: the (SlotModel, SlotState) of multi-slot servers,
    whose keys come from hetlb.policies.rules.slot_selection_key and take no key buckets;
    ``extension``: a function of the number of job slots giving the per-server state beyond the
    queue (hetlb.kernels.server_state; None: none)."""
    n_classes = model.n_classes
    servers = cache_aligned_zeros(n_servers, kernel.SERVER_DTYPE)
    servers["last_waiting"] = -1
    servers["speed_class"] = model.server_class
    servers["inv_speed"] = model.inv_speed
    empty = np.zeros(n_servers, np.int64)
    if slots is None:
        keys = policy_functions(model.policy_code)[1](
            model.policy_code, empty, model.server_class, n_classes, model.speed, np.zeros(n_servers)
        )
    else:
        keys = batch_servers.slot_keys(model.policy_code, empty, model.speed, slots)
    spec = BY_CODE[model.policy_code]
    job_arrival, job_size, job_next = job_pool(initial_job_slots(model.buffer, n_servers))
    distribution_size = STATE_DISTRIBUTION_SIZE_PER_SERVER * n_servers + 64 if state_distribution else 0
    complete = model.type_uses_tree.any()
    if slots is None:
        bucketed = complete and spec.integer_keys and n_classes <= BUCKET_MAX_CLASSES
        held = 0
    else:
        bucketed = complete and batch_servers.bucketed(model.policy_code, slots[1])
        held = batch_servers.held_beyond_one(slots[1])
    buckets = new_buckets(keys, bucket_keys(model, len(job_next) + held)) if bucketed else (np.zeros(0, np.int64),) * 4
    levels = (n_classes, model.n_levels + 1)
    server_keys = keys if spec.ranks_whole_set and not model.type_uses_tree.all() else np.zeros(0)
    return kernel.KernelState(
        counters=np.zeros(1, dtype=kernel.COUNTER_DTYPE),
        servers=servers,
        server_key=server_keys,
        job_arrival=job_arrival,
        job_size=job_size,
        job_next=job_next,
        departures=new_tournament(np.full(n_servers, np.inf)),
        key_tree=new_key_tree(keys) if complete and not bucketed else np.zeros(0, dtype=KEY_NODE_DTYPE),
        bucket_order=buckets[0],
        bucket_position=buckets[1],
        bucket_key=buckets[2],
        bucket_start=buckets[3],
        level_count=np.zeros(levels, np.int64),
        level_area=np.zeros(levels),
        histogram=np.zeros(kernel.HISTOGRAM_OCTAVES * kernel.HISTOGRAM_BINS_PER_OCTAVE, np.int64),
        batches=np.zeros((len(model.batch_ends), len(kernel.BATCH_FIELDS))),
        trace_time=np.zeros(trace),
        trace_type=np.zeros(trace, np.int64),
        trace_server=np.zeros(trace, np.int64),
        trace_queue=np.zeros(trace, np.int64),
        # pod and jsq-df-ds draw min(d, degree) servers
        sample=np.zeros(max(1, min(int(model.sample_sizes.max()), int(np.diff(model.compat_indptr).max()))), np.int64),
        ties=np.zeros(np.diff(model.compat_indptr).max() if len(server_keys) else 0, np.int64),
        window_job_area=np.zeros(n_servers),
        window_busy_area=np.zeros(n_servers),
        window_level_area=np.zeros(levels),
        batch_close=model.batch_ends.copy() if model.batch_by_jobs == 0 else np.full(len(model.batch_ends), np.inf),
        jobs_time=np.zeros(distribution_size),
        waiting_time=np.zeros(distribution_size),
        extension=ServerExtension() if extension is None else extension(len(job_next)),
    )


def initial_job_slots(buffer: np.ndarray, n_servers: int) -> int:
    """Job slots a run starts with: room for every waiting job when the buffers are finite and
    small, else 2N + 4096 (grow_job_pool doubles them when needed)."""
    finite = buffer[buffer != INFINITE_BUFFER]
    if len(finite) == n_servers and finite.sum(dtype=np.float64) < 4 * n_servers + 4096:  # no int64 overflow
        return int(finite.sum()) + 1
    return 2 * n_servers + 4096


def bucket_keys(model, slots: int) -> int:
    """Entries of the bucket boundaries: one past the largest key a server can reach when at most
    ``slots`` jobs wait (a server holds at most slots + 1 jobs), plus one."""
    n_classes = model.n_classes
    most = policy_functions(model.policy_code)[1](
        model.policy_code,
        np.full(n_classes, slots + 1, np.int64),
        np.arange(n_classes),
        n_classes,
        model.class_speed,
        np.zeros(n_classes),
    ).max()
    return int(most) + 2


def job_pool(slots: int):
    """Arrays of a pool of job slots, all on the free list (job_next links them)."""
    job_next = np.arange(1, slots + 1, dtype=np.int64)
    job_next[-1] = -1
    return np.zeros(slots), np.zeros(slots), job_next


def grow_job_pool(model, state: kernel.KernelState, held: int = 0) -> kernel.KernelState:
    """Double the job pool when every slot is in use (only waiting jobs occupy slots), and the
    key buckets' range of keys with it (``held``: the most jobs a server has in service beyond one,
    hetlb.simulation.batch_servers.held_beyond_one)."""
    used = len(state.job_next)
    if 2 * used > np.iinfo(np.int32).max:  # the server records keep slots and queue lengths as int32
        raise InputError(
            "arrival_rate",
            f"more than {used:,} jobs wait at once, the most a run holds: the system is (nearly) unstable; "
            "lower the load or set a buffer",
        )
    buckets = 8 * (2 * used + 2) * model.n_classes if len(state.bucket_start) else 0
    validation.check_memory(
        "arrival_rate",
        72 * used + buckets,
        f"more than {used:,} jobs waiting at once: doubling their job slots",
        "the system is (nearly) unstable; lower the load or set a buffer",
    )
    arrival, size, next_slot = job_pool(2 * used)
    arrival[:used] = state.job_arrival
    size[:used] = state.job_size
    next_slot[:used] = state.job_next
    state.counters[0]["free_slot"] = used
    extension = caches.grow_jobs(state.extension, 2 * used)
    bucket_start = (
        grow_buckets(state.bucket_start, bucket_keys(model, 2 * used + held))
        if len(state.bucket_start)
        else state.bucket_start
    )
    return state._replace(
        job_arrival=arrival, job_size=size, job_next=next_slot, bucket_start=bucket_start, extension=extension
    )


def run_replication(
    system: System, model, seed_sequence, options: RunOptions, report, slot_model=None, cache_policy=None
) -> RunResult:
    """One replication from an empty system; ``report(fraction_done, events)`` sees progress.
    ``slot_model``: the multi-slot servers' data (hetlb.simulation.batch_servers.pack_slots), which
    runs hetlb.kernels.batch_servers.advance; None for concurrency 1. ``cache_policy``: the policy,
    when the run carries prefix caches (hetlb.simulation.caches), which then run in
    hetlb.kernels.continuous.advance_with_caches."""
    arrival_stream, policy_stream = seed_sequence.spawn(2)
    arrival_rng = np.random.Generator(np.random.PCG64(arrival_stream))
    policy_rng = np.random.Generator(np.random.PCG64(policy_stream))
    slot_state = None if slot_model is None else batch_servers.new_slot_state(system)
    slots = None if slot_model is None else (slot_model, slot_state)
    extension = None
    if cache_policy is not None:
        extension = lambda job_slots: caches.new_cache_extension(  # noqa: E731
            system, cache_policy, job_slots, len(model.batch_ends), slot_model, slot_state
        )
    state = new_state(model, system.n_servers, options.trace, options.state_distribution, slots, extension)
    counters = state.counters[0]
    counters["window_end"] = np.inf
    start_arrival_process(model, state.counters, arrival_rng)
    run_kernel = policy_functions(model.policy_code, cache_policy is not None)[0]
    started = time.perf_counter()
    while True:
        if slot_state is None:
            status = run_kernel(model, state, arrival_rng, policy_rng, EVENTS_PER_CALL)
        else:
            status = advance_slots(model, state, slot_model, slot_state, arrival_rng, policy_rng, EVENTS_PER_CALL)
        if status == kernel.FINISHED:
            break
        if status == kernel.NEEDS_JOB_SLOTS:
            state = grow_job_pool(model, state, 0 if slot_state is None else batch_servers.held_beyond_one(slot_state))
            counters = state.counters[0]
        if status == slot_kernel.NEEDS_SERVICE_ROOM and slot_state is not None:
            old_slot_state, slot_state = slot_state, batch_servers.grow_service_room(slot_state)
            state = state._replace(extension=caches.follow_service_room(state.extension, old_slot_state, slot_state))
        done = (
            counters["now"] / model.horizon if model.batch_by_jobs == 0 else counters["completed"] / model.target_jobs
        )
        report(done, int(counters["events"]))
    wall = time.perf_counter() - started
    return run_result(system, model, state, seed_sequence, wall, options.speed_bins, slot_state)


def run_result(
    system: System, model, state, seed_sequence, wall_seconds: float, speed_bins: int | None, slot_state=None
) -> RunResult:
    """The figures of one finished replication (with the speed profile in ``speed_bins`` bins, and
    those of the multi-slot servers when ``slot_state`` is given)."""
    run = figures(system, model, state, seed_sequence, wall_seconds)
    for name, value in caches.cache_figures(system, state.extension, run.measured_time).items():
        setattr(run, name, value)
    if speed_bins is not None:
        run.speed_profile = speed_profile(run, system.speed, speed_bins)
    if slot_state is not None:
        for name, value in batch_servers.slot_figures(system, slot_state, run.measured_time).items():
            setattr(run, name, value)
    return run


def figures(system: System, model, state, seed_sequence, wall_seconds: float) -> RunResult:
    c = state.counters[0]
    measured = float(c["window_end"] - model.warmup)
    n = system.n_servers
    class_speed, server_class = system.speed_classes()
    class_count = np.bincount(server_class)
    batches = state.batches
    batch_time = batches[:, 0] - model.warmup
    with np.errstate(invalid="ignore", divide="ignore"):
        response_batches = batches[:, 6] / batches[:, 5]
        waiting_batches = batches[:, 7] / batches[:, 5]
    return RunResult(
        seed_entropy=entropy_of(seed_sequence),
        seed_key=tuple(int(k) for k in seed_sequence.spawn_key),
        mean_response_time=safe_ratio(c["response_sum"], c["completed"]),
        mean_response_time_ci=interval(response_batches),
        response_time_std=math.sqrt(
            max(
                safe_ratio(c["response_sq_sum"], c["completed"]) - safe_ratio(c["response_sum"], c["completed"]) ** 2,
                0.0,
            )
        )
        if c["completed"]
        else math.nan,
        mean_waiting_time=safe_ratio(c["waiting_sum"], c["completed"]),
        mean_waiting_time_ci=interval(waiting_batches),
        p_wait=safe_ratio(c["waited"], c["admitted"]),
        blocking_probability=safe_ratio(c["blocked"], c["arrivals"]),
        blocking_probability_ci=interval(ratio_per_batch(batches[:, 3], batches[:, 1])),
        mean_number_in_system=safe_ratio(c["window_job_area"], measured),
        mean_number_in_system_ci=interval(ratio_per_batch(batches[:, 8], batch_time)),
        number_in_system_growth=growth_between_halves(batches[:, 8], batch_time),
        utilisation=state.window_busy_area / measured,
        mean_queue_length=state.window_job_area / measured,
        peak_queue_length=state.peak_queue.copy(),
        class_speed=class_speed,
        class_count=class_count,
        occupancy=state.window_level_area[:, 1:] / (n * measured),
        class_jobs=np.bincount(server_class, weights=state.window_job_area) / (n * measured),
        histogram=state.histogram.copy(),
        measured_time=measured,
        end_time=float(c["end_time"]),
        arrivals=int(c["arrivals"]),
        completed_jobs=int(c["completed"]),
        counters={
            "arrivals": int(c["arrivals_total"]),
            "admitted": int(c["admitted_total"]),
            "blocked": int(c["blocked_total"]),
            "departed": int(c["departures_total"]),
            "in_system": int(c["in_system"]),
        },
        events=int(c["events"]),
        wall_seconds=wall_seconds,
        batch_response_means=response_batches.tolist(),
        jobs_distribution=state.jobs_time / measured if len(state.jobs_time) else None,
        waiting_distribution=state.waiting_time / measured if len(state.waiting_time) else None,
        trace={
            "time": state.trace_time[: c["trace_n"]],
            "job_type": state.trace_type[: c["trace_n"]],
            "server": state.trace_server[: c["trace_n"]],
            "queue_len": state.trace_queue[: c["trace_n"]],
        }
        if len(state.trace_time)
        else None,
    )
