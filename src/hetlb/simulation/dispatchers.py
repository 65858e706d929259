"""M dispatchers in continuous time: validate -> pack arrays -> run the kernel -> results.

``hetlb.simulate(system, policy, dispatchers=M, update=...)`` comes here (docs/reference/dispatchers.md).

>>> import hetlb
>>> system = hetlb.System.from_speeds([1.0] * 8, load=0.8)
>>> result = hetlb.simulate(system, "l-jsq", dispatchers=4, update="pull:p_hat=0.5", jobs=20_000, seed=1)
>>> round(result.messages_per_job["pull"], 1)
0.5
"""

from __future__ import annotations

import math
import time

import numpy as np

from hetlb import validation
from hetlb.errors import InputError
from hetlb.kernels import batch_servers as slot_kernel
from hetlb.kernels import continuous as single_kernel
from hetlb.kernels import dispatchers as kernel
from hetlb.kernels import updates as update_kernel
from hetlb.kernels.flights import DELAY_CONSTANT, DELAY_EXPONENTIAL, DELAY_NONE, DELAYED_KINDS, FLIGHT_DTYPE
from hetlb.kernels.sampling import alias_table
from hetlb.kernels.trees import KEY_NODE_DTYPE, new_key_tree, tree_width
from hetlb.model.dispatchers import Updates
from hetlb.model.system import System
from hetlb.policies import registry, rules
from hetlb.policies.choice import BRANCHES, KEY_CODE, ON_ESTIMATES, decides, jba_options
from hetlb.policies.registry import LED_UPDATE_PARAMETERS, Policy, resolve_policy
from hetlb.results.dispatchers import DispatcherRunResult, DispatchersResult
from hetlb.simulation import batch_servers, caches, continuous
from hetlb.simulation.fast_start import kernels_for
from hetlb.simulation.options import RunOptions
from hetlb.simulation.replications import DEFAULT_JOBS, run_replications, safe_ratio

HERD_WINDOW_FRACTION = 0.1
"""The default herd window: this fraction of N / lambda_Sigma, the mean time between two decisions
for one server under uniform routing."""

DISPATCHER_BYTES_PER_PAIR = 24 + 2 * 16 * 4 + 2 * 24
"""Bytes per (dispatcher, server) pair at most: estimate, observation time and idle time; the
least-key tree's two nodes per leaf, its width up to 4N; two entries of 24 bytes of the segment of
messages in flight (room for twice a snapshot of every dispatcher)."""

SOURCE_BYTES = 64 + 2 * 32
"""Bytes per (dispatcher, job type) pair at most: its rate, its alias-table entries and their
temporaries, and the dispatcher's counts; and its rate in the metadata and the result as Python
floats in lists (32 bytes each)."""
RESULT_BYTES_PER_DISPATCHER = 4 * 32
"""Bytes per dispatcher of a result's Python lists: its decisions, herded decisions (two kinds)
and herd fraction, 32 bytes each."""

MIN_FLIGHT_CAPACITY = 64
"""Entries of a delayed kind's segment of messages in flight at the start of a run (at least)."""

MAX_PAIRS = 2**31
"""At most this many (dispatcher, server) pairs: the messages address a pair by one index."""


def simulate_dispatchers(
    system: System, policy: str | Policy, options: RunOptions, **policy_params
) -> DispatchersResult:
    """Simulate ``system`` with ``options.dispatchers`` = M dispatchers (default 1), each deciding
    by ``policy`` on its own estimates, refreshed by the ``options.update`` signals
    (hetlb.model.dispatchers; default: ``push`` for the LED policies, ``probe`` for the others);
    the options are those of hetlb.simulate (hetlb.simulation.options.RunOptions).

    options.dispatcher_share: how the arrivals of each job type divide among the dispatchers:
        None (equally), M shares summing to 1, or an M x K array of rates lambda_{m,k} whose
        columns sum to the job types' arrival rates.
    options.herd_window: a decision herds when its server was chosen by another dispatcher less
        than this long before (time units; default HERD_WINDOW_FRACTION N / lambda_Sigma).
    """
    policy = resolve_policy(policy, policy_params)
    if not isinstance(system, System):
        raise InputError("system", "must be a hetlb.System (build one with System.from_speeds)")
    if system.caches is not None and policy.spec.reads_cache:
        raise InputError(
            "cache_blocks",
            f"{policy.id} reads the caches, which several dispatchers do not see yet (each would keep an approximate "
            "index of its own); with several dispatchers the caches run under the policies on estimates",
        )
    check_policy(policy)
    if system.has_multi_slot_servers:
        batch_servers.check_multi_slot_policy(system, policy, ON_ESTIMATES)
    n_dispatchers = options.dispatchers or 1
    updates = Updates.parse(default_update(policy)) if options.update is None else options.update
    check_dispatcher_memory(system.n_servers, system.n_types, n_dispatchers, updates)
    check_poll_time(system, n_dispatchers, updates, options)
    rates = source_rates(system, n_dispatchers, options.dispatcher_share)
    window = default_herd_window(system) if options.herd_window is None else options.herd_window
    events = continuous.check_run(system, policy, options)
    caches.check_caches(system, policy, events / (2 * options.replications), options)
    cache_policy = policy if caches.has_caches(system, policy) else None

    with kernels_for(events):
        model = continuous.pack_model(system, policy, options)
        dispatcher_model = pack_dispatchers(system, policy, model, updates, rates, window)
        slot_model = batch_servers.pack_slots(system) if system.has_multi_slot_servers else None
        runs = run_replications(
            options.root_seed,
            options.replications,
            f"{policy.id} x{n_dispatchers} ",
            options.progress,
            lambda seed_sequence, report: run_replication(
                system, model, dispatcher_model, seed_sequence, options, report, slot_model, cache_policy
            ),
        )
    dispatchers = {
        "dispatchers": n_dispatchers,
        "update": updates.describe(),
        "update_text": updates.text(),
        "rates": rates.tolist(),
        "herd_window": window,
    }
    policy_description = {name: value for name, value in policy.describe().items() if name not in LED_UPDATE_PARAMETERS}
    metadata = continuous.run_metadata(
        system, policy_description, policy, options, dispatchers=dispatchers, **caches.cache_metadata(system)
    )
    metadata["system"]["dispatchers"] = n_dispatchers
    return DispatchersResult(runs, metadata)


def check_policy(policy: Policy) -> None:
    """The policy must decide on estimates (hetlb.policies.choice); an LED policy's slotted update
    parameters have no meaning here (``update=`` gives the updates)."""
    if policy.code not in ON_ESTIMATES:
        deciders = registry.policies_where(decides_on_estimates=True)
        raise InputError(
            "policy", f"{policy.id} does not decide on estimates; with dispatchers use one of {', '.join(deciders)}"
        )
    if not decides(policy.code):
        raise InputError(
            "policy", f"{policy.id} (code {policy.code}) has no branch in hetlb.policies.choice.choose_server"
        )
    for name, (default, _, _) in LED_UPDATE_PARAMETERS.items():
        if name in policy.params and policy.params[name] != default:
            raise InputError(
                f"policy {policy.id}.{name}",
                "is a parameter of the slotted model; with dispatchers in continuous time give the updates as "
                "update= (e.g. update='push:p_hat=1:d=2')",
            )


def default_update(policy: Policy) -> str:
    """001's push (p_hat = 1, d = 2) for an LED policy, true probes for the others."""
    return "push" if policy.spec.on_local_estimates else "probe"


def default_herd_window(system: System) -> float:
    return HERD_WINDOW_FRACTION * system.n_servers / system.total_arrival_rate


def source_rates(system: System, n_dispatchers: int, dispatcher_share) -> np.ndarray:
    """lambda_{m,k}: the M x K arrival rates of dispatcher m's jobs of type k, from the
    ``dispatcher_share`` of the run options."""
    rate = np.asarray(system.arrival_rate, dtype=np.float64)
    if dispatcher_share is None or (isinstance(dispatcher_share, str) and dispatcher_share == "equal"):
        return np.outer(np.full(n_dispatchers, 1.0 / n_dispatchers) if n_dispatchers > 1 else [1.0], rate)
    try:
        values = np.asarray(dispatcher_share, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(
            "dispatcher_share", f"must be 'equal', M shares or an M x K array of rates, got {dispatcher_share!r}"
        ) from None
    if values.ndim == 1:
        if len(values) != n_dispatchers or np.any(values <= 0) or not np.all(np.isfinite(values)):
            raise InputError("dispatcher_share", f"must be {n_dispatchers} shares > 0 (one per dispatcher)")
        if abs(values.sum() - 1.0) > 1e-9:
            raise InputError("dispatcher_share", f"the shares must sum to 1, got {values.sum():.12g}")
        return np.outer(values, rate)
    if values.shape != (n_dispatchers, len(rate)) or np.any(values < 0) or not np.all(np.isfinite(values)):
        raise InputError(
            "dispatcher_share", f"must be a {n_dispatchers} x {len(rate)} array of rates >= 0 (dispatcher x job type)"
        )
    if not np.allclose(values.sum(axis=0), rate, rtol=1e-9, atol=0.0):
        raise InputError("dispatcher_share", "each job type's rates must sum to its arrival rate")
    return values


def check_dispatcher_memory(n_servers: int, n_types: int, n_dispatchers: int, updates: Updates) -> None:
    """Refuse more than MAX_PAIRS (dispatcher, server) or (dispatcher, job type) pairs, or more than
    the machine's memory, before anything of that size is allocated."""
    pairs = max(n_servers, n_types) * n_dispatchers
    if pairs > MAX_PAIRS:
        raise InputError(
            "dispatchers",
            f"M x max(N, job types) = {pairs:,} is more than the {MAX_PAIRS:,} pairs a run holds; use fewer dispatchers",
        )
    views = 1 if updates.truth else n_dispatchers
    validation.check_memory(
        "dispatchers",
        DISPATCHER_BYTES_PER_PAIR * n_servers * views
        + SOURCE_BYTES * n_types * n_dispatchers
        + RESULT_BYTES_PER_DISPATCHER * n_dispatchers,
        f"the estimates of {n_dispatchers:,} dispatchers of {n_servers:,} servers",
        "use fewer dispatchers or servers",
    )


def check_poll_time(system: System, n_dispatchers: int, updates: Updates, options) -> None:
    """Refuse snapshots whose messages alone would take more than a day: every tau each of the M
    dispatchers learns the N servers' numbers (aligned or not), N M / tau messages per time unit
    over the simulated time (the horizon, or the jobs' arrival time n / lambda), plus the warm-up,
    in each replication; at most EVENTS_PER_S_AT_MOST messages a second."""
    snapshot = updates.signals.get("snapshot")
    if snapshot is None:
        return
    jobs = DEFAULT_JOBS if options.jobs is None else options.jobs
    measured = options.horizon if options.horizon is not None else jobs / system.total_arrival_rate
    messages = options.replications * (measured + options.warmup) * system.n_servers * n_dispatchers / snapshot["tau"]
    validation.check_cost(
        "update",
        f"snapshots of {system.n_servers:,} servers to {n_dispatchers:,} dispatchers every tau = "
        f"{snapshot['tau']:g} ({validation.quantity(messages)} messages)",
        seconds=messages / continuous.EVENTS_PER_S_AT_MOST,
        advice="use a longer tau, fewer dispatchers or fewer jobs",
    )


def pack_dispatchers(system: System, policy: Policy, model, updates: Updates, rates: np.ndarray, window: float):
    """The kernel's read-only parameters of the dispatchers (hetlb.kernels.dispatchers.DispatcherModel)."""
    n_dispatchers, n_servers = rates.shape[0], system.n_servers
    graph = system.graph
    degree = graph.degree()
    signals = updates.signals
    code = policy.code
    ranking = policy.spec.ranks_whole_set or policy.spec.led_alias is not None
    uses_tree = ranking and n_servers >= continuous.TREE_MIN_SERVERS
    d = min(policy.params.get("d", 1), n_servers)
    if "probe" not in signals or not policy.spec.decides_on_load:
        probe_messages = np.zeros(system.n_types, np.int64)
    elif code in (registry.POD, registry.L_POD):
        probe_messages = 2 * np.minimum(d, degree).astype(np.int64)
    else:
        probe_messages = 2 * degree.astype(np.int64)
    keep, alias = alias_table(rates.reshape(-1))
    delay_law = np.zeros(4, np.int64)
    delay_mean = np.zeros(4)
    laws = {"none": DELAY_NONE, "constant": DELAY_CONSTANT, "exponential": DELAY_EXPONENTIAL}
    for kind, name in enumerate(update_kernel.MESSAGE_KINDS[:4]):
        if name in updates.delays:
            delay_law[kind] = laws[updates.delays[name].law]
            delay_mean[kind] = updates.delays[name].mean
    push = signals.get("push", {})
    snapshot = signals.get("snapshot", {})
    push_size = min(push.get("d", 1), n_servers)
    jba_rate_weighted, jba_inclusive, jba_fallback = jba_options(policy.params)
    return kernel.DispatcherModel(
        n_dispatchers=n_dispatchers,
        truth_view=int(updates.truth),
        source_keep=keep,
        source_alias=alias,
        decision_code=code,
        key_code=int(KEY_CODE[code]),
        type_uses_tree=(graph.complete_types() & uses_tree).astype(np.uint8),
        sample_size=d,
        jba_rate_weighted=jba_rate_weighted,
        jba_inclusive=jba_inclusive,
        jba_fallback=jba_fallback,
        probe_messages=probe_messages,
        increment=int("increment" in signals),
        piggyback=int("piggyback" in signals),
        push_probability=float(push.get("p_hat", 0.0)),
        push_size=push_size,
        pull_probability=float(signals.get("pull", {}).get("p_hat", 0.0)),
        snapshot=int("snapshot" in signals),
        snapshot_interval=float(snapshot.get("tau", math.inf)),
        snapshot_aligned=snapshot.get("phases", "aligned") == "aligned",
        snapshot_poisson=snapshot.get("timing") == "poisson",
        snapshot_phase=np.zeros(n_dispatchers),
        snapshot_order=np.arange(n_dispatchers, dtype=np.int64),
        delay_law=delay_law,
        delay_mean=delay_mean,
        herd_window=window,
        slot_ranking=int(system.has_multi_slot_servers and code not in BRANCHES),
    )


def new_dispatcher_state(model, dispatcher_model, n_servers: int, job_slots: int, slots=None) -> kernel.DispatcherState:
    """Every dispatcher at time 0: it knows the system empty (estimates 0, observed at time 0).
    ``slots``: the (SlotModel, SlotState) of multi-slot servers, whose keys are
    hetlb.policies.rules.slot_selection_key's."""
    views = 1 if dispatcher_model.truth_view else dispatcher_model.n_dispatchers
    zeros = np.zeros(n_servers, np.int64)
    if slots is None:
        keys = rules.selection_keys(
            dispatcher_model.key_code, zeros, model.server_class, model.n_classes, model.speed, np.zeros(n_servers)
        )
    else:
        keys = batch_servers.slot_keys(dispatcher_model.key_code, zeros, model.speed, slots)
    if dispatcher_model.type_uses_tree.any():
        tree = new_key_tree(keys)
        key_trees = np.repeat(tree[None, :], views, axis=0)
    else:
        key_trees = np.zeros((0, 2 * tree_width(1)), KEY_NODE_DTYPE)
    counters = np.zeros(1, dtype=kernel.DISPATCHER_COUNTER_DTYPE)
    counters[0]["next_snapshot"] = np.inf
    counters[0]["next_message"] = np.inf
    counters[0]["snapshot_dispatcher"] = -1
    max_degree = int(np.diff(model.compat_indptr).max())
    return kernel.DispatcherState(
        counters=counters,
        estimate=np.zeros((views, n_servers), np.int64),
        estimate_time=np.zeros((views, n_servers)),
        dispatched=np.zeros((views, n_servers), np.int64),
        idle_since=np.zeros((views, n_servers)),
        key_trees=key_trees,
        keys=np.zeros(n_servers),
        ties=np.zeros(max_degree, np.int64),
        sample=np.zeros(max(1, min(dispatcher_model.sample_size, max_degree)), np.int64),
        probe_sample=np.zeros(max(1, dispatcher_model.push_size), np.int64),
        service_dispatcher=np.zeros(n_servers, np.int64),
        job_dispatcher=np.zeros(job_slots, np.int64),
        **messages_in_flight(dispatcher_model, n_servers),
        messages=np.zeros(len(update_kernel.MESSAGE_KINDS), np.int64),
        decisions=np.zeros(dispatcher_model.n_dispatchers, np.int64),
        herd_other=np.zeros(dispatcher_model.n_dispatchers, np.int64),
        herd_same=np.zeros(dispatcher_model.n_dispatchers, np.int64),
        last_decision_time=np.full(n_servers, -np.inf),
        last_decision_dispatcher=np.full(n_servers, -1, np.int64),
    )


def first_snapshot(dispatcher_model, counters, update_rng):
    """The model with this replication's poll phases, and the first poll in ``counters``."""
    if not dispatcher_model.snapshot:
        return dispatcher_model
    tau, n_dispatchers = dispatcher_model.snapshot_interval, dispatcher_model.n_dispatchers
    if not dispatcher_model.snapshot_aligned and not dispatcher_model.snapshot_poisson:
        phase = update_rng.random(n_dispatchers) * tau
        order = np.argsort(phase, kind="stable").astype(np.int64)
        dispatcher_model = dispatcher_model._replace(snapshot_phase=phase, snapshot_order=order)
        counters[0]["next_snapshot"] = phase[order[0]]
        counters[0]["snapshot_dispatcher"] = order[0]
        return dispatcher_model
    counters["next_snapshot"] = 0.0
    update_kernel.schedule_snapshot(dispatcher_model, counters, update_rng)
    return dispatcher_model


def messages_in_flight(dispatcher_model, n_servers: int) -> dict:
    """The fields ``flights`` and ``flight_*`` of a dispatcher state with no message in flight: each
    delayed kind a segment of MIN_FLIGHT_CAPACITY entries, or twice what one event may send of it."""
    per_event = np.zeros(DELAYED_KINDS, np.int64)
    per_event[[update_kernel.PIGGYBACK, update_kernel.PULL]] = 1
    per_event[update_kernel.PUSH] = dispatcher_model.push_size
    per_event[update_kernel.SNAPSHOT] = n_servers * (
        dispatcher_model.n_dispatchers if dispatcher_model.snapshot_aligned else 1
    )
    flights = np.zeros(DELAYED_KINDS, FLIGHT_DTYPE)
    flights["next"] = np.inf
    delayed = dispatcher_model.delay_law[:DELAYED_KINDS] != DELAY_NONE
    flights["reserve"] = np.where(delayed, per_event, 0)
    capacity = np.where(delayed, np.maximum(MIN_FLIGHT_CAPACITY, 2 * per_event), 0)
    return lay_out_flights(flights, capacity, np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int64))


def lay_out_flights(flights, capacity, observed, target, value) -> dict:
    """``flights`` with each kind's segment grown to ``capacity``, the segments placed one after
    another, each holding its messages in flight from its start (the ring unrolled: the order of
    delivery, or of the pool, kept)."""
    new = flights.copy()
    new["capacity"] = capacity
    new["offset"] = np.concatenate(([0], np.cumsum(capacity)[:-1]))
    new["start"] = 0
    total = int(capacity.sum())
    arrays = {"flight_observed": (observed, np.zeros(total)), "flight_target": (target, np.zeros(total, np.int64))}
    arrays["flight_value"] = (value, np.zeros(total, np.int64))
    for old, grown in arrays.values():
        for flight, placed in zip(flights, new):
            if flight["count"] > 0:
                ring = (flight["start"] + np.arange(flight["count"])) % flight["capacity"]
                grown[placed["offset"] : placed["offset"] + flight["count"]] = old[flight["offset"] + ring]
    return {"flights": new, **{name: grown for name, (_, grown) in arrays.items()}}


def grow_messages(dispatcher_state: kernel.DispatcherState) -> kernel.DispatcherState:
    """Double the segment of every kind whose messages in flight may outgrow it at the next event."""
    flights = dispatcher_state.flights
    capacity = flights["capacity"].copy()
    full = flights["count"] + flights["reserve"] > capacity
    capacity[full] *= 2
    validation.check_memory(
        "update",
        24 * int(capacity.sum()),
        f"more than {int(flights['capacity'].sum()):,} messages in flight",
        "shorten the delays or send fewer messages",
    )
    dispatcher_state.counters[0]["flight_full"] = 0
    return dispatcher_state._replace(
        **lay_out_flights(
            flights,
            capacity,
            dispatcher_state.flight_observed,
            dispatcher_state.flight_target,
            dispatcher_state.flight_value,
        )
    )


def run_replication(
    system: System,
    model,
    dispatcher_model,
    seed_sequence,
    options: RunOptions,
    report,
    slot_model=None,
    cache_policy=None,
) -> DispatcherRunResult:
    """One replication from an empty system; ``report(fraction_done, events)`` sees progress.
    ``slot_model``: the multi-slot servers' data (hetlb.simulation.batch_servers.pack_slots), None
    for concurrency 1; ``cache_policy``: the policy, when the servers have prefix caches
    (hetlb.simulation.caches)."""
    arrival_stream, policy_stream, update_stream = seed_sequence.spawn(3)
    arrival_rng = np.random.Generator(np.random.PCG64(arrival_stream))
    policy_rng = np.random.Generator(np.random.PCG64(policy_stream))
    update_rng = np.random.Generator(np.random.PCG64(update_stream))
    slots = None if slot_model is None else (slot_model, batch_servers.new_slot_state(system))
    kernel_slots = batch_servers.no_slots() if slots is None else slots
    extension = None
    if cache_policy is not None:
        extension = lambda job_slots: caches.new_cache_extension(  # noqa: E731
            system, cache_policy, job_slots, len(model.batch_ends), *(slots or (None, None))
        )
    state = continuous.new_state(model, system.n_servers, options.trace, options.state_distribution, slots, extension)
    dispatcher_state = new_dispatcher_state(model, dispatcher_model, system.n_servers, len(state.job_next), slots)
    dispatcher_model = first_snapshot(dispatcher_model, dispatcher_state.counters, update_rng)
    counters = state.counters[0]
    counters["window_end"] = np.inf
    continuous.start_arrival_process(model, state.counters, arrival_rng)
    started = time.perf_counter()
    while True:
        status = kernel.advance(
            model,
            state,
            dispatcher_model,
            dispatcher_state,
            *kernel_slots,
            arrival_rng,
            policy_rng,
            update_rng,
            continuous.EVENTS_PER_CALL,
        )
        if status == single_kernel.FINISHED:
            break
        if status == single_kernel.NEEDS_JOB_SLOTS:
            state = continuous.grow_job_pool(model, state)
            counters = state.counters[0]
            grown = np.zeros(len(state.job_next), np.int64)
            grown[: len(dispatcher_state.job_dispatcher)] = dispatcher_state.job_dispatcher
            dispatcher_state = dispatcher_state._replace(job_dispatcher=grown)
        if status == kernel.NEEDS_MESSAGE_SLOTS:
            dispatcher_state = grow_messages(dispatcher_state)
        if status == slot_kernel.NEEDS_SERVICE_ROOM:
            old_slot_state = kernel_slots[1]
            kernel_slots = (kernel_slots[0], batch_servers.grow_service_room(old_slot_state))
            state = state._replace(
                extension=caches.follow_service_room(state.extension, old_slot_state, kernel_slots[1])
            )
        done = (
            counters["now"] / model.horizon if model.batch_by_jobs == 0 else counters["completed"] / model.target_jobs
        )
        report(done, int(counters["events"]))
    wall = time.perf_counter() - started
    run = continuous.run_result(
        system, model, state, seed_sequence, wall, options.speed_bins, None if slots is None else kernel_slots[1]
    )
    return dispatcher_run_result(run, dispatcher_model, dispatcher_state)


def dispatcher_run_result(run, dispatcher_model, dispatcher_state) -> DispatcherRunResult:
    """The single-dispatcher figures of ``run`` with those of the dispatchers."""
    c = dispatcher_state.counters[0]
    arrivals = run.arrivals
    messages = {name: int(count) for name, count in zip(update_kernel.MESSAGE_KINDS, dispatcher_state.messages)}
    per_job = {name: safe_ratio(count, arrivals) for name, count in messages.items()}
    per_job["total"] = safe_ratio(sum(count for name, count in messages.items() if name != "increment"), arrivals)
    decisions = dispatcher_state.decisions.astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        herd_by_dispatcher = dispatcher_state.herd_other / decisions
    truth = bool(dispatcher_model.truth_view)
    samples = int(c["error_samples"])
    return DispatcherRunResult(
        **vars(run),
        messages=messages,
        messages_per_job=per_job,
        mean_estimate_error=0.0 if truth else safe_ratio(c["absolute_error_sum"], samples),
        mean_estimate_bias=0.0 if truth else safe_ratio(c["error_sum"], samples),
        mean_estimate_age=0.0 if truth else safe_ratio(c["age_sum"], samples),
        herd_fraction=safe_ratio(dispatcher_state.herd_other.sum(), decisions.sum()),
        herd_same_fraction=safe_ratio(dispatcher_state.herd_same.sum(), decisions.sum()),
        herd_by_dispatcher=herd_by_dispatcher.tolist(),
        decisions_by_dispatcher=dispatcher_state.decisions.tolist(),
        stale_messages=int(c["stale"]),
        delivered_messages=int(c["delivered"]),
        message_events=int(c["message_events"]),
        snapshot_events=int(c["snapshot_events"]),
    )
