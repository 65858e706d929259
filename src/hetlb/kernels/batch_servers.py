"""Servers that serve many jobs at once (a concurrency c_s and a rate curve phi_s): the event loop
of one dispatcher, and the server's side of an arrival and a departure, which the many-dispatcher
loop (hetlb.kernels.dispatchers) calls too.

The model (hetlb.model.servers): with n jobs at server s, b = min(n, c) of them are in service
(the earliest arrived), each receiving work at rate mu phi(b) / b; the others wait in FIFO order.
A job of size x leaves when it has received x units of work.

The data. Each server keeps its SERVER_DTYPE record of hetlb.kernels.continuous (jobs held, peak,
the ring of its waiting jobs in the job slots, the areas of its jobs and of its busy time), which
the helpers of that module keep as for c = 1, and beside it a SLOT_SERVER_DTYPE record: b, c, its
curve, and an *attained-work clock*, the work each job in service has received since the clock's
origin (every job in service receives work at the same rate, so one clock serves them all). A job
entering service gets the finishing threshold clock + size; the server's jobs in service are a
binary min-heap of their thresholds (SERVICE_DTYPE entries, O(log b) per change) in the server's
own region of one array, ``service``. The server's next departure is at
now + (least threshold - clock) / (mu phi(b) / b), recomputed whenever b changes; that time is
its leaf of the departures' tournament tree, as for c = 1. A region holds min(c, buffer,
INITIAL_SERVICE_ROOM) entries at first and doubles when it fills (the loop returns
NEEDS_SERVICE_ROOM; hetlb.simulation.batch_servers lays the regions out again), so that an
unlimited concurrency takes memory only for the jobs actually in service.

The curves reach the kernel as tables (a :class:`SlotModel`): phi(b) and phi(b) / b per curve for
b up to the largest finite min(c, buffer) (at most MAX_TABLE_JOBS), and beyond the table the
curve's formula (b / (1 + alpha (b - 1)), or a table's last value).

Cost per event: the O(log N) trees of the c = 1 loop (or the O(degree) scan of a sparse graph),
plus O(log b) for the heap; a waiting job that enters service at a departure takes the departing
job's place at the root (one sift down).

A job enters service in :func:`start_slot_service` (an arrival at a free slot) or
:func:`end_slot_service` (the first waiting job, at a departure) alone, in this loop and the
many-dispatcher loop, and its work is fixed there by hetlb.kernels.server_state.work_at_start: the
server-side state beyond the queue joins there, as for c = 1 (hetlb.kernels.server_state).

Statistics: those of the c = 1 loop (a server is busy while it holds a job), and per server the
time integral of b (``service_area``, in the form of hetlb.kernels.continuous.area_at), from which
the results report the mean number of jobs in service and the utilisation E[b] / c. A job's
waiting time is the time from its arrival until it enters service.
"""

from collections import namedtuple

import numpy as np

from hetlb.constants import ARRIVALS_POISSON
from hetlb.jit import at, njit, prefetch, records
from hetlb.kernels.buckets import move_drawn_key, move_key, random_least_drawn
from hetlb.kernels.continuous import (
    CACHE_CODES,
    FINISHED,
    NEEDS_JOB_SLOTS,
    RUNNING,
    SCAN_MAX_SERVERS,
    SIZE_EMPIRICAL,
    add_to_batch,
    admit_job,
    area_at,
    arrival_batch,
    close_window,
    draw_size,
    empirical_size,
    finish,
    has_finite_buffer,
    leave_server,
    move_level,
    next_mark,
    pass_marks,
    queue_job,
    record_response,
    record_state_time,
    record_trace,
    snapshot_batch,
    take_first_waiting,
)
from hetlb.kernels.sampling import alias_draw
from hetlb.kernels.server_state import (
    job_arrives,
    job_measured,
    job_waits,
    next_epoch,
    reads_cache,
    route_by_cache,
    service_moved,
    service_placed,
    work_at_start,
)
from hetlb.kernels.trees import move_time, prefetch_path, random_least_leaf, set_key, set_time_by_scan
from hetlb.policies import registry, rules

CODES = (
    registry.RANDOM,
    registry.WEIGHTED_RANDOM,
    registry.POD,
    *rules.KEYED_CODES,
    registry.JLU,
    registry.LEW,
    *CACHE_CODES,
)
"""The policy codes the multi-slot loop has a rule for: random, weighted-random (weights: the
capacities mu phi(c)), pod (by the number of jobs n), every key of
hetlb.policies.rules.slot_selection_key and the policies that read the prefix caches."""

BUCKETED_CODES = (registry.JSQ, registry.JIQ)
"""The codes whose slot keys are small integers (jsq: n; jiq: 0 with a free slot, else 1), which
the key buckets of hetlb.kernels.buckets serve on the complete graph, O(1) per decision."""

NEEDS_SERVICE_ROOM = 4
"""advance() status: a server's region of jobs in service is full and may need to grow."""

INITIAL_SERVICE_ROOM = 16
"""Entries of a server's region of jobs in service at the start (at most c and the buffer)."""

PREFETCH_MIN_SERVERS = 2048
"""From this many servers on the kernel prefetches (a multi-slot server's records, region of jobs in
service and tree leaves take about eight times the bytes of a server of concurrency 1, whose loop
starts at hetlb.kernels.continuous.PREFETCH_MIN_SERVERS)."""

MAX_TABLE_JOBS = 4096
"""The curves' tables go up to b = min(largest finite min(c, buffer), this); the formula beyond."""

SLOT_SERVER_DTYPE = np.dtype(
    [
        ("in_service", "i4"),
        ("concurrency", "i4"),
        ("heap_offset", "i4"),
        ("heap_capacity", "i4"),
        ("curve", "i4"),
        ("room", "i4"),
        ("clock", "f8"),
        ("clock_time", "f8"),
        ("inv_rate", "f8"),
        ("service_area", "f8"),
        ("free_since", "f8"),
    ]
)
"""One multi-slot server, 64 bytes: b, c (2^31 - 1 for unlimited), where its region of jobs in
service starts and how many it holds, its curve, the most jobs it can have in service
(min(c, buffer)); the attained-work clock and when it was last
brought up to date, the time a job in service now takes per unit of work (b / (mu phi(b)), a
multiplication where a division would wait on every departure), the area of b, and when
the server last went from no free slot to a free one (jsq-lisf's order; 0 at first)."""

SERVICE_DTYPE = np.dtype([("threshold", "f8"), ("arrival", "f8"), ("waiting", "f8"), ("dispatcher", "i8")])
"""A job in service: the clock reading at which it finishes, its arrival time, its waiting time and
the dispatcher that sent it (the many-dispatcher loop's piggyback goes to it; 0 otherwise)."""

SLOT_COUNTER_DTYPE = np.dtype([("full_server", "i8")])
"""The server whose region of jobs in service is full while it may serve more, or -1."""

SlotModel = namedtuple(
    "SlotModel", ["curve_phi", "curve_rate", "curve_alpha", "curve_tail", "curve_job_time", "capacity"]
)
SlotModel.__doc__ = """Read-only data of the multi-slot servers (hetlb.simulation.batch_servers.pack_slots):
per curve, ``curve_phi[curve, b]`` = phi(b), ``curve_rate[curve, b]`` = phi(b) / b and
``curve_job_time[curve, b]`` = b / phi(b) for b below the tables' width (column 0 unused), and beyond
it ``curve_tail[curve]`` (a table curve's last value v_k, else 0) or the formula
b / (1 + ``curve_alpha[curve]`` (b - 1)); ``capacity[s]`` = mu_s phi_s(c_s)."""

SlotState = namedtuple("SlotState", ["counters", "slot_servers", "service", "window_service_area"])
SlotState.__doc__ = """Mutable state of the multi-slot servers: one SLOT_COUNTER_DTYPE record, one
SLOT_SERVER_DTYPE record per server, the jobs in service (SERVICE_DTYPE, each server's heap in its
region), and the area of each server's b over the measured window (kept when the window closes)."""


@njit(error_model="numpy", inline="always")
def curve_phi(curve_phi_table, curve_alpha, curve_tail, curve, b):
    """phi(b) of ``curve`` for b >= 1 jobs in service: its table, or beyond it its formula."""
    if b < curve_phi_table.shape[1]:
        return curve_phi_table[curve, b]
    if curve_tail[curve] > 0.0:
        return curve_tail[curve]
    return b / (1.0 + curve_alpha[curve] * (b - 1.0))


@njit(error_model="numpy", inline="always")
def per_job_rate(curve_phi_table, curve_rate_table, curve_alpha, curve_tail, curve, b):
    """phi(b) / b of ``curve`` for b >= 1 jobs in service (in units of the speed)."""
    if b < curve_rate_table.shape[1]:
        return curve_rate_table[curve, b]
    return curve_phi(curve_phi_table, curve_alpha, curve_tail, curve, b) / b


@njit(error_model="numpy", inline="always")
def slot_key(
    policy_code, n, slot, s, speed, capacity, curve_phi_table, curve_rate_table, curve_alpha, curve_tail, since
):
    """The selection key (hetlb.policies.rules.slot_selection_key) of server s, with record ``slot``,
    speed mu = ``speed[s]`` and capacity mu phi(c) = ``capacity[s]``, holding n jobs (or believed to):
    the rate mu phi(b') / b' a new job would receive and sed's delay (n + 1) / (mu phi(b')),
    b' = min(n + 1, c); ``since``: when it last went from no free slot to a free one. Reads only what
    the policy's key needs (none of it for jsq)."""
    if policy_code == registry.JSQ:  # the key of most runs, first: n
        return float(n)
    slots = slot.concurrency
    rate_new, delay, server_capacity = 0.0, 0.0, 1.0
    if needs_rates(policy_code):
        mu = speed[s]
        entering = min(n + 1, slots)
        rate_new = mu * per_job_rate(curve_phi_table, curve_rate_table, curve_alpha, curve_tail, slot.curve, entering)
        delay = (n + 1.0) / (mu * curve_phi(curve_phi_table, curve_alpha, curve_tail, slot.curve, entering))
    if policy_code == registry.LEW:
        server_capacity = capacity[s]
    return rules.slot_selection_key(policy_code, n, slots, rate_new, delay, server_capacity, since)


@njit(inline="always")
def needs_rates(policy_code):
    """Whether the policy's slot key reads the new job's rate or sed's delay."""
    return (
        policy_code == registry.JFSQ
        or policy_code == registry.JSSQ
        or policy_code == registry.JFIQ
        or policy_code == registry.JSQ_FIQ
        or policy_code == registry.SED
    )


@njit(inline="always")
def push_service(service, slot, s, threshold, arrival, waiting, dispatcher, extension):
    """Add a job in service to server s's heap (``slot``: its record; the region has room); the
    ``extension`` (hetlb.kernels.server_state) follows every entry that moves and the one placed."""
    base = slot.heap_offset
    i = slot.in_service
    while i > 0:
        parent = (i - 1) >> 1
        above = service[at(base + parent)]
        if above.threshold <= threshold:
            break
        below = service[at(base + i)]
        below.threshold = above.threshold
        below.arrival = above.arrival
        below.waiting = above.waiting
        below.dispatcher = above.dispatcher
        service_moved(extension, base + parent, base + i)
        i = parent
    entry = service[at(base + i)]
    entry.threshold = threshold
    entry.arrival = arrival
    entry.waiting = waiting
    entry.dispatcher = dispatcher
    service_placed(extension, s, base + i)
    slot.in_service += 1


@njit(inline="always")
def replace_least_service(service, slot, s, threshold, arrival, waiting, dispatcher, extension):
    """Put a job in service in the place of the one with the least threshold (the heap's root) of
    server s, and sift it down to where it belongs; the ``extension`` follows the entries that move.
    Returns the entry where the job is put (the caller tells the extension what it is)."""
    base = slot.heap_offset
    n = slot.in_service
    i = 0
    while True:
        child = 2 * i + 1
        if child >= n:
            break
        right = child + 1
        if right < n and service[at(base + right)].threshold < service[at(base + child)].threshold:
            child = right
        below = service[at(base + child)]
        if below.threshold >= threshold:
            break
        above = service[at(base + i)]
        above.threshold = below.threshold
        above.arrival = below.arrival
        above.waiting = below.waiting
        above.dispatcher = below.dispatcher
        service_moved(extension, base + child, base + i)
        i = child
    entry = service[at(base + i)]
    entry.threshold = threshold
    entry.arrival = arrival
    entry.waiting = waiting
    entry.dispatcher = dispatcher
    return base + i


@njit(inline="always")
def pop_least_service(service, slot, s, extension):
    """Remove the job with the least threshold from server s's heap (the ``extension`` follows)."""
    n = slot.in_service - 1
    slot.in_service = n
    if n > 0:
        last = service[at(slot.heap_offset + n)]
        placed = replace_least_service(
            service, slot, s, last.threshold, last.arrival, last.waiting, last.dispatcher, extension
        )
        service_moved(extension, slot.heap_offset + n, placed)


@njit(inline="always")
def next_departure_time(service, slot, now):
    """When the server's job with the least threshold finishes, at the present rate; +inf if none."""
    if slot.in_service == 0:
        return np.inf
    return now + (service[at(slot.heap_offset)].threshold - slot.clock) * slot.inv_rate


@njit(inline="always")
def set_slot_rate(slot, inv_speed, curve_phi_table, curve_alpha, curve_tail, curve_job_time):
    """The time per unit of work of each job in service after b changed: b / (mu phi(b))."""
    b = slot.in_service
    if b >= curve_job_time.shape[1]:
        slot.inv_rate = inv_speed * b / curve_phi(curve_phi_table, curve_alpha, curve_tail, slot.curve, b)
    elif b > 0:
        slot.inv_rate = inv_speed * curve_job_time[slot.curve, b]


@njit(inline="always")
def start_slot_service(c, server, slot, s, now, size, dispatcher, service, slot_counters, speed, curves, extension):
    """A job of ``size`` arriving at ``now`` at server s (``server``, ``slot``: its records; ``speed``:
    mu_s), which has a free slot, enters service, with the work hetlb.kernels.server_state.work_at_start
    fixes; returns the server's next departure time. ``curves``: the SlotModel's (curve_phi,
    curve_rate, curve_alpha, curve_tail, curve_job_time); ``extension``: the server's state beyond
    the queue (hetlb.kernels.server_state)."""
    curve_phi_table, curve_rate_table, curve_alpha, curve_tail, curve_job_time = curves
    b = slot.in_service
    if b == 0:
        server.busy_area -= now
        slot.clock = 0.0  # a new origin for each busy period keeps the clock's readings small
    else:
        rate = speed * per_job_rate(curve_phi_table, curve_rate_table, curve_alpha, curve_tail, slot.curve, b)
        slot.clock += (now - slot.clock_time) * rate
    slot.clock_time = now
    c.busy += 1
    slot.service_area -= now
    threshold = slot.clock + work_at_start(extension, s, now, size, -1, slot.clock)
    push_service(service, slot, s, threshold, now, 0.0, dispatcher, extension)
    if slot.in_service == slot.heap_capacity and slot.in_service < slot.room:
        slot_counters.full_server = s
    set_slot_rate(slot, server.inv_speed, curve_phi_table, curve_alpha, curve_tail, curve_job_time)
    return next_departure_time(service, slot, now)


@njit(inline="always")
def end_slot_service(
    c, server, slot, s, q, now, service, job_arrival, job_size, job_next, job_dispatcher, curves, extension
):
    """The job with the least threshold has left server s at ``now`` (``server``, ``slot``: its
    records; ``leave_server`` has run; it still holds ``q`` jobs): the first waiting job, if any,
    enters service in its place, with the work hetlb.kernels.server_state.work_at_start fixes, else b
    falls by one; returns the server's next departure time. ``job_dispatcher``: the dispatcher of
    each waiting job by job slot (empty: 0 for all); ``curves`` and ``extension`` as in
    :func:`start_slot_service`."""
    curve_phi_table, _, curve_alpha, curve_tail, curve_job_time = curves
    slot.clock = service[at(slot.heap_offset)].threshold  # what the clock reads now, without rounding
    slot.clock_time = now
    if q >= slot.concurrency:
        waiting = take_first_waiting(c, server, job_next)
        arrival = job_arrival[waiting]
        dispatcher = job_dispatcher[waiting] if len(job_dispatcher) > 0 else 0
        threshold = slot.clock + work_at_start(extension, s, now, job_size[waiting], waiting, slot.clock)
        placed = replace_least_service(service, slot, s, threshold, arrival, now - arrival, dispatcher, extension)
        service_placed(extension, s, placed)
        return next_departure_time(service, slot, now)
    pop_least_service(service, slot, s, extension)
    c.busy -= 1
    slot.service_area += now
    if q == slot.concurrency - 1:
        slot.free_since = now
    if q == 0:
        server.busy_area += now
    set_slot_rate(slot, server.inv_speed, curve_phi_table, curve_alpha, curve_tail, curve_job_time)
    return next_departure_time(service, slot, now)


@njit(inline="always")
def move_departure(departures, s, next_time, scanning, n_servers):
    """Set server s's next departure time, which may move either way (b changed), in the
    departures' tournament tree; returns the earliest of all (see set_departure of c = 1)."""
    if scanning:
        return set_time_by_scan(departures, s, next_time, n_servers)
    move_time(departures, s, next_time)
    return departures[1].time


@njit
def begin_service_measurement(slot_servers, at_time):
    """The area of each server's b from ``at_time`` on (the end of the warm-up)."""
    for s in range(len(slot_servers)):
        slot_servers[s].service_area = -slot_servers[s].in_service * at_time


@njit
def close_service_window(slot_servers, at_time, window_service_area):
    """Keep the area of each server's b over the window, which closes at ``at_time``."""
    for s in range(len(slot_servers)):
        window_service_area[s] = area_at(slot_servers[s].service_area, slot_servers[s].in_service, at_time)


@njit
def follow_marks(c, was_measuring, window_was_open, warmup, slot_servers, window_service_area):
    """After the measurement's marks have passed (pass_marks, close_window): start or keep the
    area of b as they started or closed the window."""
    if was_measuring == 0 and c.measuring == 1:
        begin_service_measurement(slot_servers, warmup)
    if window_was_open and c.window_end < np.inf:
        close_service_window(slot_servers, c.window_end, window_service_area)


@njit(_nrt=False)
def advance(model, state, slot_model, slot_state, arrival_rng, policy_rng, max_events):
    """Run up to ``max_events`` events on multi-slot servers; return RUNNING, FINISHED,
    NEEDS_JOB_SLOTS or NEEDS_SERVICE_ROOM (hetlb.kernels.continuous.advance for c = 1)."""
    c = records(state.counters)[0]
    slot_counters = records(slot_state.counters)[0]
    buffer = model.buffer
    finite_buffers = has_finite_buffer(buffer)
    policy_code = model.policy_code
    sample_sizes = model.sample_sizes
    compat_indptr, compat_indices = model.compat_indptr, model.compat_indices
    compat_cumulative_capacity, type_uses_tree = model.compat_cumulative_speed, model.type_uses_tree
    type_keep, type_alias, total_arrival_rate = model.type_keep, model.type_alias, model.total_arrival_rate
    mean_interarrival = 1.0 / total_arrival_rate
    n_types = len(type_keep)
    size_code = model.size_code
    size_table = model.size_params
    size_first, size_second, size_third = size_table[0], size_table[1], size_table[2]
    empirical_sizes = size_code == SIZE_EMPIRICAL
    arrival_code, arrival_params = model.arrival_code, model.arrival_params
    poisson = arrival_code == ARRIVALS_POISSON
    warmup, horizon, target_jobs = model.warmup, model.horizon, model.target_jobs
    batch_ends, batch_by_jobs = model.batch_ends, model.batch_by_jobs
    n_batches = len(batch_ends)
    speed = model.speed
    servers, server_key = records(state.servers), state.server_key
    slot_servers, service = records(slot_state.slot_servers), records(slot_state.service)
    window_service_area = slot_state.window_service_area
    curves = (
        slot_model.curve_phi,
        slot_model.curve_rate,
        slot_model.curve_alpha,
        slot_model.curve_tail,
        slot_model.curve_job_time,
    )
    curve_phi_table, curve_rate_table, curve_alpha, curve_tail, _ = curves
    capacity = slot_model.capacity
    queue_len = servers.queue_len  # a column, for power-of-d
    n_servers = len(servers)
    scanning = n_servers <= SCAN_MAX_SERVERS
    prefetching = n_servers >= PREFETCH_MIN_SERVERS
    job_arrival, job_size, job_next = state.job_arrival, state.job_size, state.job_next
    no_dispatchers = job_next[:0]
    departures, key_tree = records(state.departures), records(state.key_tree)
    bucket_order, bucket_position, bucket_key, bucket_start = (
        state.bucket_order,
        state.bucket_position,
        state.bucket_key,
        state.bucket_start,
    )
    scanned, keyed, bucketed = len(server_key) > 0, len(key_tree) > 0, len(bucket_order) > 0
    level_count, level_area = state.level_count, state.level_area
    level_width = level_count.shape[1]
    flat_level_count, flat_level_area = level_count.reshape(-1), level_area.reshape(-1)
    n_levels = level_count.shape[1] - 1
    histogram, batches, batch_close, sample, ties = (
        state.histogram,
        state.batches,
        state.batch_close,
        state.sample,
        state.ties,
    )
    trace_time, trace_type, trace_server, trace_queue = (
        state.trace_time,
        state.trace_type,
        state.trace_server,
        state.trace_queue,
    )
    jobs_time, waiting_time = state.jobs_time, state.waiting_time
    distributions = len(jobs_time) > 0
    levels, state_times = (level_count, level_area, batches, batch_close), (jobs_time, waiting_time)
    window_areas = (state.window_job_area, state.window_busy_area, state.window_level_area)
    extension = state.extension  # per-server state beyond the queue (hetlb.kernels.server_state)
    next_arrival = c.next_arrival
    next_departure = departures[1].time
    mark = next_mark(c, warmup, horizon, batch_ends, batch_by_jobs)

    for _ in range(max_events):
        if c.free_slot < 0:
            return NEEDS_JOB_SLOTS
        if slot_counters.full_server >= 0:
            return NEEDS_SERVICE_ROOM
        now = min(next_arrival, next_departure)
        if now >= mark:
            was_measuring, window_was_open = c.measuring, c.window_end == np.inf
            finished = pass_marks(
                c, now, warmup, horizon, batch_ends, batch_by_jobs, servers, levels, window_areas, state_times
            )
            follow_marks(c, was_measuring, window_was_open, warmup, slot_servers, window_service_area)
            if finished:
                return FINISHED
            mark = next_mark(c, warmup, horizon, batch_ends, batch_by_jobs)
        c.now = now
        c.events += 1
        if distributions and c.tagging == 1:
            record_state_time(c, now, jobs_time, waiting_time)
        if prefetching:  # the next departure's server: start loading what its departure reads
            leader = departures[1].leaf
            prefetch(servers, leader)
            prefetch(slot_servers, leader)
            prefetch(service, slot_servers[leader].heap_offset)
            prefetch_path(departures, leader, 3)
            if bucketed:
                prefetch(bucket_position, leader)
                prefetch(bucket_key, leader)

        if next_arrival <= next_departure:
            # an arrival: its type, size and the next epoch from the arrival stream (every arrival
            # process of hetlb.kernels.arrivals), as for c = 1
            job_type = 0 if n_types == 1 else alias_draw(type_keep, type_alias, arrival_rng.random())
            job_arrives(extension, c.arrivals_total, arrival_rng)  # what else it brings (its prompt)
            drawn_at, least_bucket, least_count = -1, 0, 0  # where a draw from the key buckets found s
            lo = compat_indptr[job_type]
            hi = compat_indptr[job_type + 1]
            if reads_cache(extension, policy_code):
                s = route_by_cache(extension, policy_code, compat_indices, lo, hi, queue_len, now, policy_rng)
            elif policy_code == registry.RANDOM:
                s = compat_indices[lo + rules.uniform_index(policy_rng, hi - lo)]
            elif policy_code == registry.WEIGHTED_RANDOM:
                s = rules.speed_weighted_server(compat_indices, lo, hi, compat_cumulative_capacity, policy_rng)
            elif policy_code == registry.POD:
                s = rules.power_of_d_server(compat_indices, lo, hi, sample_sizes[0], queue_len, sample, policy_rng)
            else:
                if type_uses_tree[job_type] and bucketed:
                    s, least_bucket, drawn_at, least_count = random_least_drawn(
                        bucket_order, bucket_key, bucket_start, policy_rng
                    )
                    least = float(least_bucket)
                elif type_uses_tree[job_type]:
                    s = random_least_leaf(key_tree, policy_rng, servers)
                    least = key_tree[1].key
                else:
                    s, least = rules.least_key_server(compat_indices, lo, hi, server_key, ties, policy_rng)
                if rules.slot_falls_back_to_uniform(policy_code, least):
                    s = compat_indices[lo + rules.uniform_index(policy_rng, hi - lo)]
                    drawn_at = -1
            if prefetching:  # the records this arrival changes, while the draws below run
                prefetch(servers, s)
                prefetch(slot_servers, s)
                prefetch_path(departures, s, 2)
            if empirical_sizes:
                size = empirical_size(size_table, arrival_rng)
            else:
                size = draw_size(size_code, size_first, size_second, size_third, arrival_rng)
            if poisson:
                next_arrival = now + arrival_rng.exponential() * mean_interarrival
            else:
                next_arrival = next_epoch(extension, c, now, arrival_code, arrival_params, arrival_rng)
            c.next_arrival = next_arrival
            server = servers[s]
            slot = slot_servers[s]
            q = server.queue_len
            if c.trace_n < len(trace_time):
                record_trace(c, now, job_type, s, q, trace_time, trace_type, trace_server, trace_queue)
            c.arrivals_total += 1
            c.arrivals += c.tagging
            if finite_buffers and q >= buffer[s]:
                c.blocked_total += 1
                c.blocked += c.tagging
                continue
            admit_job(c, server, s, q, now, q >= slot.concurrency, extension)
            if q + 1 <= n_levels:
                move_level(at(server.speed_class * level_width + q + 1), 1, now, flat_level_count, flat_level_area)
            if q < slot.concurrency:
                next_time = start_slot_service(
                    c, server, slot, s, now, size, 0, service, slot_counters, speed[s], curves, extension
                )
                next_departure = move_departure(departures, s, next_time, scanning, n_servers)
            else:
                job_waits(
                    extension, queue_job(c, server, q - slot.concurrency, now, size, job_arrival, job_size, job_next)
                )
            if scanned or keyed or bucketed:
                key = slot_key(
                    policy_code,
                    q + 1,
                    slot,
                    s,
                    speed,
                    capacity,
                    curve_phi_table,
                    curve_rate_table,
                    curve_alpha,
                    curve_tail,
                    slot.free_since,
                )
                if scanned:
                    server_key[s] = key
                if keyed:
                    set_key(key_tree, s, key)
                if bucketed and drawn_at >= 0:
                    move_drawn_key(
                        bucket_order,
                        bucket_position,
                        bucket_key,
                        bucket_start,
                        s,
                        drawn_at,
                        least_bucket,
                        least_count,
                        int(key),
                    )
                elif bucketed:
                    move_key(bucket_order, bucket_position, bucket_key, bucket_start, s, int(key))
            if batch_by_jobs == 1 and c.tagging == 1 and c.admitted >= batch_ends[c.batch_index]:
                snapshot_batch(c, batches, batch_close, now)
            if c.tagging == 1 and c.admitted >= target_jobs:
                close_window(c, now, servers, level_count, level_area, window_areas, jobs_time, waiting_time)
                close_service_window(slot_servers, now, window_service_area)
        else:
            # a departure: the job with the least threshold at the server with the earliest one
            s = departures[1].leaf
            server = servers[s]
            slot = slot_servers[s]
            leaving = service[at(slot.heap_offset)]
            arrival = leaving.arrival
            if warmup <= arrival <= c.window_end and c.measuring == 1:
                response = now - arrival
                record_response(c, response, leaving.waiting, histogram)
                add_to_batch(batches, arrival_batch(c, arrival, batch_close, n_batches), response, leaving.waiting)
                job_measured(extension, s, now, arrival, c, batch_close, n_batches)
            q = leave_server(c, server, s, now, extension)
            if q + 1 <= n_levels:
                move_level(at(server.speed_class * level_width + q + 1), -1, now, flat_level_count, flat_level_area)
            next_time = end_slot_service(
                c, server, slot, s, q, now, service, job_arrival, job_size, job_next, no_dispatchers, curves, extension
            )
            next_departure = move_departure(departures, s, next_time, scanning, n_servers)
            if scanned or keyed or bucketed:
                key = slot_key(
                    policy_code,
                    q,
                    slot,
                    s,
                    speed,
                    capacity,
                    curve_phi_table,
                    curve_rate_table,
                    curve_alpha,
                    curve_tail,
                    slot.free_since,
                )
                if scanned:
                    server_key[s] = key
                if keyed:
                    set_key(key_tree, s, key)
                if bucketed:
                    move_key(bucket_order, bucket_position, bucket_key, bucket_start, s, int(key))
            if c.tagged_in_system == 0 and c.window_end < np.inf:
                finish(c, now, batches, batch_close)
                return FINISHED
    return RUNNING


@njit
def slot_keys(
    policy_code, queue_len, slot_servers, speed, capacity, curve_phi_table, curve_rate_table, curve_alpha, curve_tail
):
    """The selection key (:func:`slot_key`) of every server holding ``queue_len`` jobs (arrays; each
    server's time of its last free slot as its record holds it)."""
    slots = records(slot_servers)
    keys = np.empty(len(queue_len))
    for s in range(len(queue_len)):
        keys[s] = slot_key(
            policy_code,
            queue_len[s],
            slots[s],
            s,
            speed,
            capacity,
            curve_phi_table,
            curve_rate_table,
            curve_alpha,
            curve_tail,
            slots[s].free_since,
        )
    return keys
