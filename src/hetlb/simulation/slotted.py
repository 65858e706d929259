"""The public entry point of the slotted model (paper 001): validate -> pack arrays -> kernel -> results.

>>> import hetlb
>>> system = hetlb.SlottedSystem.from_speeds([1.0] * 10, dispatchers=2, load=0.8)
>>> result = hetlb.simulate_slotted(system, "l-jsq", slots=20_000, seed=1, p_hat=0.5)
>>> result.mean_delay > 0
True
"""

from __future__ import annotations

import math
import time

import numpy as np

from hetlb import validation
from hetlb.errors import InputError
from hetlb.kernels import slotted as kernel
from hetlb.model.slotted import SlottedSystem
from hetlb.policies import registry
from hetlb.policies.choice import JBA_FALLBACK_LEAST, jba_options
from hetlb.policies.registry import POLICIES, Policy, resolve_policy
from hetlb.results.base import versions
from hetlb.results.slotted import SlottedResult, SlottedRunResult
from hetlb.signals import LED_UPDATE_PARAMETERS, slotted_update
from hetlb.simulation.fast_start import kernels_for
from hetlb.simulation.options import SlottedRunOptions, options_of
from hetlb.simulation.replications import (
    check_events,
    entropy_of,
    run_replications,
    safe_ratio,
    seed_description,
)
from hetlb.simulation.simulate import announce_compiling
from hetlb.stats import growth_between_halves, interval, preference_report, ratio_per_batch

WORK_PER_CALL = 4_000_000
"""Work per kernel call between progress updates, in the units of check_slotted_run (per slot:
the servers, the dispatchers and the arrivals); a call runs at least one slot. Does not change
results."""


def slots_per_call(system: SlottedSystem) -> int:
    """Slots per kernel call: WORK_PER_CALL over the work of a slot (200,000 slots of 10 servers,
    4,000 of 1,000), so that a large system's progress moves every few tenths of a second."""
    return max(1, int(WORK_PER_CALL / (system.n_servers + system.dispatchers + system.total_arrival_rate)))


def simulate_slotted(
    system: SlottedSystem,
    policy: str | Policy = "l-jsq",
    options: SlottedRunOptions | None = None,
    *,
    slots: int = 100_000,
    warmup: int = 0,
    replications: int = 1,
    seed: int | np.random.SeedSequence = 0,
    batches: int = 20,
    preference: bool = False,
    trace: int = 0,
    progress: bool = False,
    **policy_params,
) -> SlottedResult:
    """Simulate the slotted ``system`` under ``policy``; return the replications and their aggregate.

    Parameters
    ----------
    system
        The slotted system of 001 (``hetlb.model.SlottedSystem``).
    policy
        A policy id of the registry that runs in the slotted model (e.g. l-jsq, l-jba, l-pod, jsq)
        or a ``hetlb.policies.Policy``.
    options
        The run options as one hetlb.simulation.options.SlottedRunOptions, instead of the keywords
        below (which it holds under the same names).
    slots
        Measured slots, after the warm-up.
    warmup
        Slots discarded before statistics start.
    replications
        Independent runs.
    seed
        An integer >= 0 or a SeedSequence; replication r draws from ``SeedSequence(seed,
        spawn_key=(r,))``, spawned into the environment, dispatch, update and measurement streams of
        hetlb.kernels.slotted, so every policy sees the same arrivals and services (common random
        numbers).
    batches
        Batches of slots for the batch-means intervals of each run.
    preference
        Measure the dispatching preference Delta_r (costs a sort per decision).
    trace
        Record the first ``trace`` decisions (slot, dispatcher, jobs, server, the value it saw, true
        queue).
    progress
        Draw a progress bar on standard error (no effect on results).
    **policy_params
        E.g. ``p_hat=0.1, push_d=1`` for the LED policies, ``d=2`` for pod and l-pod; ``update`` an
        update specification of one strategy (hetlb.signals.slotted_update), e.g.
        ``update="push:p_hat=0.1:d=1"``, or just its name with the other parameters beside it.

    Returns
    -------
    SlottedResult
        The replications and their aggregate, with intervals.
    """
    keywords = dict(
        slots=slots,
        warmup=warmup,
        replications=replications,
        seed=seed,
        batches=batches,
        preference=preference,
        trace=trace,
        progress=progress,
    )
    options = options_of(SlottedRunOptions, options, keywords)
    announce_compiling(("slotted",))
    policy = resolve_policy(policy, slotted_update(policy_params), "simulate_slotted")
    if "slotted" not in policy.spec.models:
        slotted_ids = [spec.id for spec in POLICIES.values() if "slotted" in spec.models]
        raise InputError(
            "policy", f"{policy.id} has no rule in the slotted model; choose one of: {', '.join(slotted_ids)}"
        )
    check_kernel_branch(policy.spec)
    if not isinstance(system, SlottedSystem):
        raise InputError("system", "must be a hetlb.SlottedSystem (build one with SlottedSystem.from_speeds)")
    slots, warmup, replications = options.slots, options.warmup, options.replications
    batches, preference, trace = options.batches, options.preference, options.trace
    root_seed = options.root_seed
    check_static_stability(system, policy)
    events = check_slotted_run(system, policy, slots, warmup, replications, batches, preference, trace)

    with kernels_for(events):
        model = pack_model(system, policy, slots, warmup, batches, preference)
        runs = run_replications(
            root_seed,
            replications,
            f"{policy.id} ",
            options.progress,
            lambda seed_sequence, report: run_replication(system, model, seed_sequence, trace, report),
        )
    metadata = {
        "model": "slotted",
        "system": system.describe(),
        "policy": policy.describe(),
        "policy_definition": policy.spec.definition,
        "information": policy.spec.slotted_information,
        "seed": seed_description(options.seed, root_seed),
        "replications": replications,
        "stopping": options.stopping(),
        "batches": batches,
        "confidence": 0.95,
        "preference_ranks": "by the dispatcher's information, equal values in a random order the choice agrees with"
        if preference
        else None,
        "versions": versions(),
    }
    return SlottedResult(runs, metadata)


def check_kernel_branch(spec) -> None:
    """Refuse, before anything runs, a policy the slotted kernel has no branch for
    (hetlb.kernels.slotted.CODES)."""
    if spec.code not in kernel.CODES:
        raise InputError(
            "policy", f"{spec.id} (code {spec.code}) has no branch in the slotted kernel (hetlb.kernels.slotted)"
        )


def check_slotted_run(
    system: SlottedSystem, policy: Policy, slots, warmup, replications, batches, preference, trace
) -> float:
    """Refuse, before it starts, a run whose work (per slot: every server's service, every
    dispatcher's decision, every job when routed one by one, a sort of the servers per decision when
    measuring the preference) passes MAX_EVENTS, or whose arrays (per server, per dispatcher and
    server pair of the local estimates, tokens and preference counts, per batch, per trace entry,
    with what each replication keeps) pass the machine's memory. Gives that work, in events."""
    n, m = system.n_servers, system.dispatchers
    decisions = system.total_arrival_rate if system.routing == "job" else m
    per_slot = n + m + system.total_arrival_rate + decisions * (n if preference else 1)
    events = (slots + warmup) * per_slot * replications
    check_events("slots" if slots >= warmup else "warmup", events, replications)
    pairs = m * n
    local, tokens = policy.spec.on_local_estimates, policy.code == registry.JIQ
    per_run = (
        2**18  # the results' Python objects and numpy's small arrays
        + 96 * n
        + 24 * m
        + 8 * pairs * (local + tokens)
        + (16 * pairs + 16 * batches * n if preference else 0)
        + 48 * trace
        + 96 * batches
    )
    kept = 48 * n + 48 * trace + 96 * batches + (48 * pairs + 96 * n + 16 * batches * n if preference else 0)
    parts = {"system": per_run + kept, "replications": (replications - 1) * kept}
    field = max(parts, key=lambda name: parts[name])
    validation.check_memory(
        field,
        sum(parts.values()),
        f"a slotted simulation of {n:,} servers and {m:,} dispatchers"
        + (f", {replications:,} replications" if replications > 1 else ""),
        "use fewer servers or dispatchers" if field == "system" else "use fewer replications",
    )
    return events


def check_static_stability(system: SlottedSystem, policy: Policy) -> None:
    """random overloads a server whose share lambda_Sigma / N of the arrivals reaches its speed."""
    if policy.code != registry.RANDOM:
        return
    overloaded = np.flatnonzero(system.total_arrival_rate / system.n_servers >= system.speed)
    if len(overloaded):
        n = int(overloaded[0])
        raise InputError(
            "policy",
            f"random is unstable here: server {n} receives "
            f"{system.total_arrival_rate / system.n_servers:.6g} jobs per slot >= its "
            f"speed {system.speed[n]:.6g}",
        )


def led_parameters(policy: Policy) -> dict:
    """The kernel's values of the update and l-jba parameters of an LED policy (checked by the
    registry)."""
    params = policy.params
    choice = {
        name: LED_UPDATE_PARAMETERS[name][2].index(params[name]) for name in ("update", "push_trigger", "pull_trigger")
    }
    rate_weighted, inclusive, fallback = jba_options(params)
    return {
        "update_code": (kernel.UPDATE_PUSH, kernel.UPDATE_PULL)[choice["update"]],
        "p_hat": float(params["p_hat"]),
        "push_d": params["push_d"],
        "push_every_slot": choice["push_trigger"],
        "pull_trigger": (kernel.PULL_DEPARTURE_SLOT, kernel.PULL_DEPARTURE, kernel.PULL_EVERY_SLOT)[
            choice["pull_trigger"]
        ],
        "increment_on_dispatch": int(params["increment_on_dispatch"]),
        "jba_rate_weighted": int(rate_weighted),
        "jba_inclusive": int(inclusive),
        "jba_fallback_jsq": int(fallback == JBA_FALLBACK_LEAST),
    }


def pack_model(
    system: SlottedSystem, policy: Policy, slots: int, warmup: int, batches: int, preference: bool
) -> kernel.SlottedModel:
    """The kernel's read-only arrays for ``system`` under ``policy``."""
    local = policy.spec.on_local_estimates
    led = (
        led_parameters(policy)
        if local
        else {
            "update_code": kernel.UPDATE_NONE,
            "p_hat": 0.0,
            "push_d": 1,
            "push_every_slot": 0,
            "pull_trigger": 0,
            "increment_on_dispatch": 0,
            "jba_rate_weighted": 0,
            "jba_inclusive": 0,
            "jba_fallback_jsq": 0,
        }
    )
    return kernel.SlottedModel(
        speed=system.speed,
        total_speed=system.capacity,
        cumulative_speed=np.cumsum(system.speed),
        all_servers=np.arange(system.n_servers, dtype=np.int64),
        dispatcher_rate=system.dispatcher_rate,
        arrival_code=system.arrivals.code,
        arrival_trials=system.arrivals.trials,
        service_code=system.service.code,
        service_trials=system.service.trials,
        per_job=int(system.routing == "job"),
        policy_code=policy.code,
        local=int(local),
        pod_d=min(int(policy.params.get("d", 1)), system.n_servers),  # min(d, N) are drawn: d beyond N is N
        measure_preference=int(preference),
        warmup=warmup,
        end_slot=warmup + slots,
        batch_ends=(warmup + np.floor(slots * np.arange(1, batches + 1) / batches)).astype(np.int64),
        shared_ties=int(system.ties == "shared"),
        **{**led, "push_d": min(led["push_d"], system.n_servers)},
    )


def new_state(model: kernel.SlottedModel, trace: int) -> kernel.SlottedState:
    """An empty system at slot 0: every queue and estimate 0, no tokens out."""
    n_servers, n_dispatchers, n_batches = len(model.speed), len(model.dispatcher_rate), len(model.batch_ends)
    estimate_rows = n_dispatchers if model.local else 0
    token_rows = n_dispatchers if model.policy_code == registry.JIQ else 0
    preference_rows = n_dispatchers if model.measure_preference else 0
    preference_ranks = n_servers if model.measure_preference else 0
    return kernel.SlottedState(
        counters=np.zeros(1, dtype=kernel.COUNTER_DTYPE),
        queue_len=np.zeros(n_servers, np.int64),
        arrivals_to=np.zeros(n_servers, np.int64),
        dispatcher_arrivals=np.zeros(n_dispatchers, np.int64),
        estimate=np.zeros((estimate_rows, n_servers), np.int64),
        token_server=np.zeros((token_rows, n_servers), np.int64),
        token_count=np.zeros(n_dispatchers, np.int64),
        token_held=np.zeros(n_servers, np.uint8),
        queue_area=np.zeros(n_servers, np.int64),
        preference_count=np.zeros((preference_rows, n_servers), np.int64),
        preference_share=np.zeros((preference_rows, n_servers)),
        batches=np.zeros((n_batches, len(kernel.BATCH_FIELDS))),
        batch_preference_count=np.zeros((n_batches, preference_ranks)),
        batch_preference_share=np.zeros((n_batches, preference_ranks)),
        sample=np.zeros(min(max(model.pod_d, model.push_d, 1), n_servers), np.int64),  # min(d, N) are drawn
        trace_slot=np.zeros(trace, np.int64),
        trace_dispatcher=np.zeros(trace, np.int64),
        trace_jobs=np.zeros(trace, np.int64),
        trace_server=np.zeros(trace, np.int64),
        trace_seen=np.zeros(trace, np.int64),
        trace_queue=np.zeros(trace, np.int64),
    )


def run_replication(system: SlottedSystem, model, seed_sequence, trace: int, report) -> SlottedRunResult:
    """One replication from an empty system; ``report(fraction_done, events)`` sees progress."""
    environment, dispatch, update, measurement = (
        np.random.Generator(np.random.PCG64(stream)) for stream in seed_sequence.spawn(4)
    )
    state = new_state(model, trace)
    counters = state.counters[0]
    started = time.perf_counter()
    chunk = slots_per_call(system)
    while kernel.advance(model, state, environment, dispatch, update, measurement, chunk) != kernel.FINISHED:
        report(counters["slot"] / model.end_slot, int(counters["arrivals_total"] + counters["departures_total"]))
    wall = time.perf_counter() - started
    return run_result(system, model, state, seed_sequence, wall)


def run_result(system: SlottedSystem, model, state, seed_sequence, wall_seconds: float) -> SlottedRunResult:
    c = state.counters[0]
    slots = int(c["slot"] - model.warmup)
    batches = state.batches
    columns = {name: batches[:, i] for i, name in enumerate(kernel.BATCH_FIELDS)}
    batch_slots = columns["slot"] - model.warmup
    messages = {kind: int(c[kind]) for kind in ("probes", "replies", "reports", "tokens")}
    batch_messages = columns["probes"] + columns["replies"] + columns["reports"] + columns["tokens"]
    pairs = len(model.dispatcher_rate) * system.n_servers if model.local else 0
    delay_batches = ratio_per_batch(columns["queue_area"], columns["arrivals"])
    preference = samples = None
    if model.measure_preference:
        decisions = state.preference_count.sum(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            by_dispatcher = (state.preference_count - state.preference_share) / decisions
        selection = state.preference_count.sum(axis=0) / max(c["decisions"], 1)
        share = state.preference_share.sum(axis=0) / max(c["decisions"], 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            samples = (
                np.diff(state.batch_preference_count - state.batch_preference_share, axis=0, prepend=0.0)
                / np.diff(columns["decisions"], prepend=0.0)[:, None]
            )
        preference = {
            **preference_report(selection - share, samples),
            "selection": selection.tolist(),
            "share": share.tolist(),
            "by_dispatcher": by_dispatcher.tolist(),
        }
    return SlottedRunResult(
        seed_entropy=entropy_of(seed_sequence),
        seed_key=tuple(int(k) for k in seed_sequence.spawn_key),
        slots=slots,
        arrivals=int(c["arrivals"]),
        departures=int(c["departures"]),
        decisions=int(c["decisions"]),
        mean_number_in_system=safe_ratio(c["queue_area"], slots),
        mean_number_in_system_ci=interval(ratio_per_batch(columns["queue_area"], batch_slots)),
        number_in_system_growth=growth_between_halves(columns["queue_area"], batch_slots),
        mean_delay=safe_ratio(c["queue_area"], c["arrivals"]),
        mean_delay_ci=interval(delay_batches),
        mean_estimate_error=safe_ratio(c["error_area"], slots * pairs),
        mean_estimate_error_ci=interval(ratio_per_batch(columns["error_area"], batch_slots * pairs))
        if pairs
        else [math.nan, math.nan],
        messages=messages,
        messages_per_arrival=safe_ratio(sum(messages.values()), c["arrivals"]),
        messages_per_arrival_ci=interval(ratio_per_batch(batch_messages, columns["arrivals"])),
        messages_per_decision=safe_ratio(sum(messages.values()), c["decisions"]),
        mean_queue_length=state.queue_area / slots,
        preference=preference,
        preference_samples=samples,
        counters={
            "arrivals": int(c["arrivals_total"]),
            "departures": int(c["departures_total"]),
            "in_system": int(state.queue_len.sum()),
            "idle_servers": int(np.sum(state.queue_len == 0)),
            "tokens_held": int(state.token_count.sum()),
        },
        slots_run=int(c["slot"]),
        wall_seconds=wall_seconds,
        batch_delay_means=delay_batches.tolist(),
        trace={
            name: getattr(state, "trace_" + name)[: c["trace_n"]].copy()
            for name in ("slot", "dispatcher", "jobs", "server", "seen", "queue")
        }
        if len(state.trace_slot)
        else None,
    )
