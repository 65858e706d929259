"""The continuous-time event loop with M dispatchers that decide on their own estimates.

The queues, the job slots, the departures' tournament tree and every statistic of the single
dispatcher are those of :mod:`hetlb.kernels.continuous` (its KernelModel and KernelState, and its
helpers, the server's side of every event among them); on servers of concurrency c_s > 1 the
server's side is that of :mod:`hetlb.kernels.batch_servers`. A server changes in those helpers
alone, so per-server state beyond the queue (hetlb.kernels.server_state, passed down as
``extension``) joins this loop where it joins the other two. This loop adds the dispatchers
(docs/reference/dispatchers.md), in three modules:

* :mod:`hetlb.kernels.decisions`: each arrival belongs to a source (dispatcher m, job type k),
  drawn by the alias table of the rates lambda_{m,k}; dispatcher m decides on its *view*, its
  estimates of the numbers in system or, for exact knowledge and true probes, the one view of
  the truth; and the herd its decisions make.
* :mod:`hetlb.kernels.updates`: the estimates and the messages that update them (piggyback,
  push, pull, snapshots, increments), applied at once or after a delay
  (:mod:`hetlb.kernels.flights` holds the messages in flight).
* here: the data of the dispatchers (:class:`DispatcherModel`, :class:`DispatcherState`) and the
  loop, ``advance``, which runs arrivals, departures, deliveries and polls in time order.

Statistics beyond the single kernel's, over the measured window: messages by kind, the
estimates' error and age seen at the arrivals (a rotating server per arrival: by PASTA a
time-average), and the herd: how often a decision goes to the server that another dispatcher
chose less than ``herd_window`` earlier.
"""

from collections import namedtuple

import numpy as np

from hetlb.constants import ARRIVALS_POISSON
from hetlb.jit import at, njit, records
from hetlb.kernels.batch_servers import (
    NEEDS_SERVICE_ROOM,
    close_service_window,
    end_slot_service,
    follow_marks,
    start_slot_service,
)
from hetlb.kernels.continuous import (
    FINISHED,
    NEEDS_JOB_SLOTS,
    RUNNING,
    SIZE_EMPIRICAL,
    add_to_batch,
    admit_job,
    arrival_batch,
    close_window,
    draw_size,
    empirical_size,
    finish,
    has_finite_buffer,
    idle,
    leave_server,
    measure_response,
    move_level,
    next_mark,
    pass_marks,
    queue_job,
    record_response,
    record_state_time,
    record_trace,
    serve_next,
    snapshot_batch,
    start_service,
)
from hetlb.kernels.decisions import decide, record_herd
from hetlb.kernels.flights import take_from_flight
from hetlb.kernels.sampling import alias_draw
from hetlb.kernels.server_state import job_arrives, job_measured, job_waits, next_epoch
from hetlb.kernels.trees import lower_time, set_time
from hetlb.kernels.updates import (
    INCREMENT,
    PIGGYBACK,
    PROBE,
    PULL,
    PUSH,
    SNAPSHOT,
    apply_message,
    measure_estimate,
    schedule_snapshot,
    send,
    set_estimate,
)
from hetlb.policies import rules

NEEDS_MESSAGE_SLOTS = 3
"""advance() status: a kind's segment of messages in flight may not hold what the next event sends."""


DispatcherModel = namedtuple(
    "DispatcherModel",
    [
        "n_dispatchers",
        "truth_view",
        "source_keep",
        "source_alias",
        "decision_code",
        "key_code",
        "type_uses_tree",
        "sample_size",
        "jba_rate_weighted",
        "jba_inclusive",
        "jba_fallback",
        "probe_messages",
        "increment",
        "piggyback",
        "push_probability",
        "push_size",
        "pull_probability",
        "snapshot",
        "snapshot_interval",
        "snapshot_aligned",
        "snapshot_poisson",
        "snapshot_phase",
        "snapshot_order",
        "delay_law",
        "delay_mean",
        "herd_window",
        "slot_ranking",
    ],
)
DispatcherModel.__doc__ = """Read-only parameters of the dispatchers (see hetlb.simulation.dispatchers.pack_dispatchers).

``truth_view``: 1 when every dispatcher decides on the truth (exact knowledge, true probes);
``source_keep``/``source_alias``: alias table of lambda_{m,k} over the sources i = m * K + k;
``decision_code``: the code choose_server decides; ``key_code``: the selection key of the tree
path; ``probe_messages[k]``: messages of a true probe of job type k's decision;
``delay_law``/``delay_mean``: per kind (PIGGYBACK .. SNAPSHOT); ``snapshot_phase``/``snapshot_order``:
the periodic independent polls' phases and the dispatchers in phase order; ``slot_ranking``: 1 when
the servers serve many jobs at once and the policy ranks them by key (hetlb.kernels.batch_servers)."""

DispatcherState = namedtuple(
    "DispatcherState",
    [
        "counters",
        "estimate",
        "estimate_time",
        "dispatched",
        "idle_since",
        "key_trees",
        "keys",
        "ties",
        "sample",
        "probe_sample",
        "service_dispatcher",
        "job_dispatcher",
        "flights",
        "flight_observed",
        "flight_target",
        "flight_value",
        "messages",
        "decisions",
        "herd_other",
        "herd_same",
        "last_decision_time",
        "last_decision_dispatcher",
    ],
)
DispatcherState.__doc__ = """Mutable state of the dispatchers: per view v and server s the estimate, the time
of the observation it holds, the jobs v has sent to s (counted with ``increment`` only, else 0)
and when the estimate last became 0 (jsq-lisf); the views' least-key trees
(empty when no job type routes by a tree); the dispatcher of each job in service and waiting (by
job slot); the messages in flight, per kind (``flights``, FLIGHT_DTYPE) and each one's observed
time, target and value in its kind's segment of ``flight_*``; counts of messages by kind over the measured window;
and per dispatcher its measured decisions and those that herded (onto a server another, or the
same, dispatcher chose less than herd_window earlier)."""

DISPATCHER_COUNTER_DTYPE = np.dtype(
    [
        ("next_message", "f8"),
        ("next_kind", "i8"),
        ("flight_full", "i8"),
        ("next_snapshot", "f8"),
        ("snapshot_index", "i8"),
        ("snapshot_cycle", "i8"),
        ("snapshot_dispatcher", "i8"),
        ("message_events", "i8"),
        ("snapshot_events", "i8"),
        ("stale", "i8"),
        ("delivered", "i8"),
        ("error_samples", "i8"),
        ("error_sum", "f8"),
        ("absolute_error_sum", "f8"),
        ("age_sum", "f8"),
    ]
)
"""Scalars of the dispatchers: the next delivery (its time, +inf when none, and its kind), 1 when
a kind's segment may not hold what the next event sends, the next poll (its time, the position in the
polling order and the cycle of periodic independent polls, the dispatcher polled or -1 for all),
events beyond arrivals and departures, messages dropped as stale and applied, and the sums of the
sampled estimate errors (signed, absolute) and ages."""


@njit(_nrt=False)
def advance(
    model,
    state,
    dispatcher_model,
    dispatcher_state,
    slot_model,
    slot_state,
    arrival_rng,
    policy_rng,
    update_rng,
    max_events,
):
    """Run up to ``max_events`` events (arrivals, departures, deliveries, polls); return RUNNING,
    FINISHED, NEEDS_JOB_SLOTS, NEEDS_MESSAGE_SLOTS or NEEDS_SERVICE_ROOM. ``slot_model`` and
    ``slot_state``: the multi-slot servers (hetlb.kernels.batch_servers), whose jobs in service
    carry the dispatcher that sent them; empty records for concurrency 1.

    Compiled without numba's runtime (``_nrt=False``): it allocates nothing, and every array it
    reads is held by its caller for the whole call, so the references it would count (an atomic
    add and subtract each time an inlined helper takes an array, on the paths numba's pruning
    leaves them; 5.9 -> 9.6 M events/s on the push run of benchmarks/floor_ratio.py) are not
    needed; numba refuses to compile anything that would allocate."""
    c = records(state.counters)[0]
    dispatcher_counters = records(dispatcher_state.counters)[0]
    buffer, class_speed, n_classes = model.buffer, model.class_speed, model.n_classes
    finite_buffers = has_finite_buffer(buffer)
    n_sources = len(dispatcher_model.source_keep)
    n_types = len(model.type_keep)
    mean_interarrival = 1.0 / model.total_arrival_rate
    size_code = model.size_code
    size_table = model.size_params
    size_first, size_second, size_third = size_table[0], size_table[1], size_table[2]
    empirical_sizes = size_code == SIZE_EMPIRICAL
    arrival_code, arrival_params = model.arrival_code, model.arrival_params
    poisson = arrival_code == ARRIVALS_POISSON
    warmup, horizon, target_jobs = model.warmup, model.horizon, model.target_jobs
    batch_ends, batch_by_jobs = model.batch_ends, model.batch_by_jobs
    n_batches = len(batch_ends)
    servers = records(state.servers)
    n_servers = len(servers)
    job_arrival, job_size, job_next = state.job_arrival, state.job_size, state.job_next
    departures = records(state.departures)
    level_count, level_area = state.level_count, state.level_area
    level_width = level_count.shape[1]
    flat_level_count, flat_level_area = level_count.reshape(-1), level_area.reshape(-1)
    n_levels = level_count.shape[1] - 1
    histogram, batches, batch_close = state.histogram, state.batches, state.batch_close
    trace_time, trace_type, trace_server, trace_queue = (
        state.trace_time,
        state.trace_type,
        state.trace_server,
        state.trace_queue,
    )
    jobs_time, waiting_time = state.jobs_time, state.waiting_time
    distributions = len(jobs_time) > 0
    # what the measurement's rare events read, grouped (pass_marks, close_window)
    levels, state_times = (level_count, level_area, batches, batch_close), (jobs_time, waiting_time)
    window_areas = (state.window_job_area, state.window_busy_area, state.window_level_area)
    extension = state.extension  # per-server state beyond the queue (hetlb.kernels.server_state)
    truth_view = dispatcher_model.truth_view == 1
    herd_window = dispatcher_model.herd_window
    # the dispatchers' arrays, taken out of their namedtuple once (no reference counting in the loop)
    estimate, estimate_time, idle_since, key_trees = (
        dispatcher_state.estimate,
        dispatcher_state.estimate_time,
        dispatcher_state.idle_since,
        dispatcher_state.key_trees,
    )
    dispatched, dispatched_flat = dispatcher_state.dispatched, dispatcher_state.dispatched.reshape(-1)
    keys, ties, sample, probe_sample = (
        dispatcher_state.keys,
        dispatcher_state.ties,
        dispatcher_state.sample,
        dispatcher_state.probe_sample,
    )
    service_dispatcher, job_dispatcher = dispatcher_state.service_dispatcher, dispatcher_state.job_dispatcher
    flights, flight_observed, flight_target, flight_value = (
        records(dispatcher_state.flights),
        dispatcher_state.flight_observed,
        dispatcher_state.flight_target,
        dispatcher_state.flight_value,
    )
    messages, decisions, herd_other, herd_same = (
        dispatcher_state.messages,
        dispatcher_state.decisions,
        dispatcher_state.herd_other,
        dispatcher_state.herd_same,
    )
    last_decision_time, last_decision_dispatcher = (
        dispatcher_state.last_decision_time,
        dispatcher_state.last_decision_dispatcher,
    )
    probe_messages, source_keep, source_alias = (
        dispatcher_model.probe_messages,
        dispatcher_model.source_keep,
        dispatcher_model.source_alias,
    )
    delay_law, delay_mean, type_uses_tree = (
        dispatcher_model.delay_law,
        dispatcher_model.delay_mean,
        dispatcher_model.type_uses_tree,
    )
    # the scalars the helpers read (a namedtuple passed to them would have its arrays counted)
    decision_code, key_code, sample_size = (
        dispatcher_model.decision_code,
        dispatcher_model.key_code,
        dispatcher_model.sample_size,
    )
    jba_rate_weighted, jba_inclusive, jba_fallback = (
        dispatcher_model.jba_rate_weighted,
        dispatcher_model.jba_inclusive,
        dispatcher_model.jba_fallback,
    )
    compat_indptr, compat_indices, server_class = model.compat_indptr, model.compat_indices, model.server_class
    speed, cumulative_speed = model.speed, model.compat_cumulative_speed
    slot_counters = records(slot_state.counters)[0]
    slot_servers, service = records(slot_state.slot_servers), records(slot_state.service)
    window_service_area = slot_state.window_service_area
    multi_slot = len(slot_servers) > 0
    curves = (
        slot_model.curve_phi,
        slot_model.curve_rate,
        slot_model.curve_alpha,
        slot_model.curve_tail,
        slot_model.curve_job_time,
    )
    slots = (
        slot_servers,
        speed,
        slot_model.capacity,
        slot_model.curve_phi,
        slot_model.curve_rate,
        slot_model.curve_alpha,
        slot_model.curve_tail,
    )
    slot_ranking = dispatcher_model.slot_ranking == 1
    weights = slot_model.capacity if multi_slot else speed  # l-jba's, as weighted-random's

    mark = next_mark(c, warmup, horizon, batch_ends, batch_by_jobs)
    for _ in range(max_events):
        if c.free_slot < 0:
            return NEEDS_JOB_SLOTS
        if dispatcher_counters.flight_full == 1:
            return NEEDS_MESSAGE_SLOTS
        if slot_counters.full_server >= 0:
            return NEEDS_SERVICE_ROOM
        next_departure = departures[1].time
        next_message = dispatcher_counters.next_message
        now = min(min(c.next_arrival, next_departure), min(next_message, dispatcher_counters.next_snapshot))
        if now >= mark:
            was_measuring, window_was_open = c.measuring, c.window_end == np.inf
            finished = pass_marks(
                c, now, warmup, horizon, batch_ends, batch_by_jobs, servers, levels, window_areas, state_times
            )
            if multi_slot:
                follow_marks(c, was_measuring, window_was_open, warmup, slot_servers, window_service_area)
            if finished:
                return FINISHED
            mark = next_mark(c, warmup, horizon, batch_ends, batch_by_jobs)
        c.now = now
        if distributions and c.tagging == 1:
            record_state_time(c, now, jobs_time, waiting_time)
        tagging = c.tagging

        if next_message == now:
            dispatcher_counters.message_events += 1
            kind = dispatcher_counters.next_kind
            target, value, observed = take_from_flight(
                flights,
                flight_observed,
                flight_target,
                flight_value,
                dispatcher_counters,
                delay_law[kind],
                delay_mean[kind],
                now,
                update_rng,
            )
            value = min(value + dispatched_flat[target], buffer[target % n_servers])  # sends since (increment)
            apply_message(
                key_code,
                estimate,
                estimate_time,
                idle_since,
                key_trees,
                dispatcher_counters,
                servers,
                n_classes,
                class_speed,
                slots,
                target,
                value,
                observed,
            )
            continue
        if dispatcher_counters.next_snapshot == now:
            dispatcher_counters.snapshot_events += 1
            polled = dispatcher_counters.snapshot_dispatcher  # -1: every dispatcher (aligned polls)
            first_polled, end_polled = (0, dispatcher_model.n_dispatchers) if polled < 0 else (polled, polled + 1)
            for m in range(first_polled, end_polled):  # one poll costs O(N), not O(M N)
                for s in range(n_servers):
                    send(
                        key_code,
                        delay_law,
                        delay_mean,
                        estimate,
                        estimate_time,
                        idle_since,
                        key_trees,
                        flights,
                        flight_observed,
                        flight_target,
                        flight_value,
                        dispatched_flat,
                        messages,
                        dispatcher_counters,
                        servers,
                        n_classes,
                        class_speed,
                        slots,
                        SNAPSHOT,
                        m,
                        s,
                        now,
                        tagging,
                        update_rng,
                    )
            schedule_snapshot(dispatcher_model, dispatcher_state.counters, update_rng)
            continue

        c.events += 1
        if c.next_arrival <= next_departure:
            # an arrival: its source (dispatcher, job type), size and the next arrival epoch come from
            # the arrival stream, in that order, its server from the policy stream
            source = 0 if n_sources == 1 else alias_draw(source_keep, source_alias, arrival_rng.random())
            m = source // n_types
            job_type = source - m * n_types
            job_arrives(extension, c.arrivals_total, arrival_rng)  # what else it brings (its prompt)
            v = 0 if truth_view else m
            if tagging == 1 and not truth_view:
                measure_estimate(
                    estimate, estimate_time, dispatcher_counters, servers, m, now, c.arrivals_total % n_servers
                )
            s = decide(
                decision_code,
                key_code,
                sample_size,
                jba_rate_weighted,
                jba_inclusive,
                jba_fallback,
                compat_indptr,
                compat_indices,
                server_class,
                weights,
                cumulative_speed,
                type_uses_tree,
                n_classes,
                estimate,
                idle_since,
                key_trees,
                keys,
                ties,
                sample,
                servers,
                slots,
                slot_ranking,
                job_type,
                v,
                policy_rng,
            )
            messages[PROBE] += tagging * probe_messages[job_type]
            if tagging == 1:
                record_herd(
                    decisions,
                    herd_same,
                    herd_other,
                    last_decision_time,
                    last_decision_dispatcher,
                    m,
                    s,
                    now,
                    herd_window,
                )
            last_decision_time[s] = now
            last_decision_dispatcher[s] = m

            if empirical_sizes:
                size = empirical_size(size_table, arrival_rng)
            else:
                size = draw_size(size_code, size_first, size_second, size_third, arrival_rng)
            if poisson:
                c.next_arrival = now + arrival_rng.exponential() * mean_interarrival
            else:
                c.next_arrival = next_epoch(extension, c, now, arrival_code, arrival_params, arrival_rng)
            server = servers[s]
            q = server.queue_len
            if c.trace_n < len(trace_time):
                record_trace(c, now, job_type, s, q, trace_time, trace_type, trace_server, trace_queue)
            c.arrivals_total += 1
            c.arrivals += tagging
            if dispatcher_model.increment == 1 and not truth_view:
                messages[INCREMENT] += tagging
                dispatched[m, s] += 1
                set_estimate(
                    key_code,
                    estimate,
                    idle_since,
                    key_trees,
                    servers,
                    n_classes,
                    class_speed,
                    slots,
                    m,
                    s,
                    min(estimate[m, s] + 1, buffer[s]),
                    now,
                )
            if finite_buffers and q >= buffer[s]:
                c.blocked_total += 1
                c.blocked += tagging
                if dispatcher_model.piggyback == 1:  # the rejection is the job's response
                    send(
                        key_code,
                        delay_law,
                        delay_mean,
                        estimate,
                        estimate_time,
                        idle_since,
                        key_trees,
                        flights,
                        flight_observed,
                        flight_target,
                        flight_value,
                        dispatched_flat,
                        messages,
                        dispatcher_counters,
                        servers,
                        n_classes,
                        class_speed,
                        slots,
                        PIGGYBACK,
                        m,
                        s,
                        now,
                        tagging,
                        update_rng,
                    )
            else:
                slot_count = slot_servers[s].concurrency if multi_slot else 1
                admit_job(c, server, s, q, now, q >= slot_count, extension)
                if q + 1 <= n_levels:
                    move_level(at(server.speed_class * level_width + q + 1), 1, now, flat_level_count, flat_level_area)
                if truth_view:
                    set_estimate(
                        key_code,
                        estimate,
                        idle_since,
                        key_trees,
                        servers,
                        n_classes,
                        class_speed,
                        slots,
                        0,
                        s,
                        q + 1,
                        now,
                    )
                if multi_slot and q < slot_count:
                    next_time = start_slot_service(
                        c, server, slot_servers[s], s, now, size, m, service, slot_counters, speed[s], curves, extension
                    )
                    set_time(departures, s, next_time)
                elif q == 0:
                    service_dispatcher[s] = m
                    lower_time(departures, s, start_service(c, server, s, now, size, extension))
                else:
                    slot = queue_job(c, server, q - slot_count, now, size, job_arrival, job_size, job_next)
                    job_dispatcher[slot] = m
                    job_waits(extension, slot)
            if dispatcher_model.push_probability > 0.0 and update_rng.random() < dispatcher_model.push_probability:
                taken = rules.sample_without_replacement(
                    n_servers, dispatcher_model.push_size, probe_sample, update_rng
                )
                for i in range(taken):
                    send(
                        key_code,
                        delay_law,
                        delay_mean,
                        estimate,
                        estimate_time,
                        idle_since,
                        key_trees,
                        flights,
                        flight_observed,
                        flight_target,
                        flight_value,
                        dispatched_flat,
                        messages,
                        dispatcher_counters,
                        servers,
                        n_classes,
                        class_speed,
                        slots,
                        PUSH,
                        m,
                        probe_sample[i],
                        now,
                        tagging,
                        update_rng,
                    )
                messages[PUSH] += tagging * taken  # the probes; send counted the replies
            if batch_by_jobs == 1 and tagging == 1 and c.admitted >= batch_ends[c.batch_index]:
                snapshot_batch(c, batches, batch_close, now)
            if tagging == 1 and c.admitted >= target_jobs:
                close_window(c, now, servers, level_count, level_area, window_areas, jobs_time, waiting_time)
                if multi_slot:
                    close_service_window(slot_servers, now, window_service_area)
        else:
            s = departures[1].leaf
            server = servers[s]
            if multi_slot:
                leaving = service[at(slot_servers[s].heap_offset)]
                arrival, sender, slot_waiting = leaving.arrival, leaving.dispatcher, leaving.waiting
            else:
                arrival, sender, slot_waiting = server.service_arrival, service_dispatcher[s], 0.0
            if warmup <= arrival <= c.window_end and c.measuring == 1:
                if multi_slot:
                    response, waiting = now - arrival, slot_waiting
                    record_response(c, response, waiting, histogram)
                else:
                    response, waiting = measure_response(c, server, now, histogram)
                add_to_batch(batches, arrival_batch(c, arrival, batch_close, n_batches), response, waiting)
                job_measured(extension, s, now, arrival, c, batch_close, n_batches)
            q = leave_server(c, server, s, now, extension)
            if q + 1 <= n_levels:
                move_level(at(server.speed_class * level_width + q + 1), -1, now, flat_level_count, flat_level_area)
            if truth_view:
                set_estimate(
                    key_code, estimate, idle_since, key_trees, servers, n_classes, class_speed, slots, 0, s, q, now
                )
            if multi_slot:
                next_time = end_slot_service(
                    c,
                    server,
                    slot_servers[s],
                    s,
                    q,
                    now,
                    service,
                    job_arrival,
                    job_size,
                    job_next,
                    job_dispatcher,
                    curves,
                    extension,
                )
            elif q > 0:
                service_dispatcher[s] = job_dispatcher[
                    serve_next(c, server, s, now, job_arrival, job_size, job_next, extension)
                ]
                next_time = now + server.service_size * server.inv_speed
            else:
                idle(c, server, now)
                next_time = np.inf
            set_time(departures, s, next_time)
            if dispatcher_model.piggyback == 1:
                send(
                    key_code,
                    delay_law,
                    delay_mean,
                    estimate,
                    estimate_time,
                    idle_since,
                    key_trees,
                    flights,
                    flight_observed,
                    flight_target,
                    flight_value,
                    dispatched_flat,
                    messages,
                    dispatcher_counters,
                    servers,
                    n_classes,
                    class_speed,
                    slots,
                    PIGGYBACK,
                    sender,
                    s,
                    now,
                    tagging,
                    update_rng,
                )
            if dispatcher_model.pull_probability > 0.0 and update_rng.random() < dispatcher_model.pull_probability:
                reported = rules.uniform_index(update_rng, dispatcher_model.n_dispatchers)
                send(
                    key_code,
                    delay_law,
                    delay_mean,
                    estimate,
                    estimate_time,
                    idle_since,
                    key_trees,
                    flights,
                    flight_observed,
                    flight_target,
                    flight_value,
                    dispatched_flat,
                    messages,
                    dispatcher_counters,
                    servers,
                    n_classes,
                    class_speed,
                    slots,
                    PULL,
                    reported,
                    s,
                    now,
                    tagging,
                    update_rng,
                )
            if c.tagged_in_system == 0 and c.window_end < np.inf:
                finish(c, now, batches, batch_close)
                return FINISHED
    return RUNNING
