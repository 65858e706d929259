"""The continuous-time event loop: Poisson arrivals, routing, FCFS queues, departures.

``advance`` is pure: it reads a :class:`KernelModel`, mutates a :class:`KernelState` and draws
from two generators, one for the arrival process (epochs, job types, sizes) and one for the
policy's own randomness, so two policies run with the same seed see the same arrivals and
job sizes (common random numbers). Cost per event: O(log N) through the trees of
:mod:`hetlb.kernels.trees` on the complete graph, O(degree) on a sparse graph. Statistics
stream; memory does not grow with the number of jobs.
"""

import math
from collections import namedtuple

import numpy as np
from numba import njit

from hetlb.kernels.trees import random_least_leaf, set_key, set_time
from hetlb.policies import rules

# advance() return status
RUNNING = 0
FINISHED = 1
NEEDS_JOB_SLOTS = 2

SIZE_EXPONENTIAL = 0
SIZE_HYPEREXPONENTIAL = 1
SIZE_DETERMINISTIC = 2

# response-time histogram: bins of relative width <= 1/128 between 2^-30 and 2^40 time units
HISTOGRAM_MIN_EXPONENT = -30
HISTOGRAM_OCTAVES = 70
HISTOGRAM_BINS_PER_OCTAVE = 128

# columns of the cumulative snapshot taken at the end of each batch
BATCH_FIELDS = ("time", "arrivals", "admitted", "blocked", "waited", "completed",
                "response_sum", "waiting_sum", "job_area")

KernelModel = namedtuple("KernelModel", [
    "speed", "inv_speed", "buffer", "server_class", "n_classes",
    "cumulative_type_rate", "total_arrival_rate",
    "compat_indptr", "compat_indices", "compat_cumulative_speed", "type_uses_tree",
    "size_code", "size_params", "policy_code", "pod_d",
    "n_levels", "warmup", "horizon", "target_jobs", "batch_ends", "batch_by_jobs",
])
KernelModel.__doc__ = """Read-only arrays and parameters of one run (see hetlb.simulate.pack_model)."""

KernelState = namedtuple("KernelState", [
    "counters", "queue_len", "queue_head", "queue_tail",
    "job_arrival", "job_size", "job_next",
    "departure_time", "departure_winner", "key", "key_count",
    "job_area", "busy_area", "last_change", "peak_queue",
    "level_count", "level_area", "level_last",
    "histogram", "batches", "trace_time", "trace_type", "trace_server", "trace_queue", "pod_sample",
])
KernelState.__doc__ = """Mutable state of one run; ``counters`` is a one-record array of COUNTER_DTYPE."""

COUNTER_DTYPE = np.dtype([
    ("now", "f8"), ("next_arrival", "f8"), ("end_time", "f8"), ("last_total_change", "f8"),
    ("measuring", "i8"), ("free_slot", "i8"), ("in_system", "i8"), ("events", "i8"),
    ("arrivals_total", "i8"), ("admitted_total", "i8"), ("blocked_total", "i8"), ("departures_total", "i8"),
    ("arrivals", "i8"), ("admitted", "i8"), ("blocked", "i8"), ("waited", "i8"), ("completed", "i8"),
    ("response_sum", "f8"), ("response_sq_sum", "f8"), ("waiting_sum", "f8"), ("job_area", "f8"),
    ("batch_index", "i8"), ("trace_n", "i8"),
])


@njit(cache=True, inline="always")
def draw_size(size_code, size_params, rng):
    """A job size with mean 1 (see hetlb.model.JobSizes)."""
    if size_code == SIZE_EXPONENTIAL:
        return rng.exponential()
    if size_code == SIZE_HYPEREXPONENTIAL:
        if rng.random() < size_params[0]:
            return rng.exponential() / size_params[1]
        return rng.exponential() / size_params[2]
    return 1.0


@njit(cache=True, inline="always")
def histogram_bin(x):
    mantissa, exponent = math.frexp(x)
    octave = exponent - HISTOGRAM_MIN_EXPONENT
    if octave < 0:
        return 0
    if octave >= HISTOGRAM_OCTAVES:
        return HISTOGRAM_OCTAVES * HISTOGRAM_BINS_PER_OCTAVE - 1
    return octave * HISTOGRAM_BINS_PER_OCTAVE + int((mantissa - 0.5) * 2.0 * HISTOGRAM_BINS_PER_OCTAVE)



@njit(cache=True, inline="always")
def route(job_type, policy_code, pod_d, n_classes, compat_indptr, compat_indices, compat_cumulative_speed,
          type_uses_tree, queue_len, server_class, speed, key, key_count, pod_sample, rng):
    """The server a type-``job_type`` job is sent to (whether or not its buffer has room)."""
    lo = compat_indptr[job_type]
    hi = compat_indptr[job_type + 1]
    if policy_code == rules.RANDOM:
        return compat_indices[lo + rules.uniform_index(rng, hi - lo)]
    if policy_code == rules.WEIGHTED_RANDOM:
        return rules.speed_weighted_server(compat_indices, lo, hi, compat_cumulative_speed, rng)
    if policy_code == rules.POD:
        return rules.power_of_d_server(compat_indices, lo, hi, pod_d, queue_len, pod_sample, rng)
    if type_uses_tree[job_type]:
        server = random_least_leaf(key, key_count, rng)
        least = key[1]
    else:
        server, least = rules.least_key_server(compat_indices, lo, hi, policy_code, queue_len, server_class,
                                               n_classes, speed, rng)
    if rules.falls_back_to_uniform(policy_code, least, n_classes):
        return compat_indices[lo + rules.uniform_index(rng, hi - lo)]
    return server


@njit(cache=True, inline="always")
def change_queue(server, now, new_len, queue_len, job_area, busy_area, last_change,
                 server_class, level_count, level_area, level_last):
    """Integrate server ``server``'s occupancy (and its level of s_{m,i}) up to ``now``, then set its
    queue length."""
    old_len = queue_len[server]
    elapsed = now - last_change[server]
    job_area[server] += old_len * elapsed
    if old_len > 0:
        busy_area[server] += elapsed
    last_change[server] = now
    level = max(old_len, new_len)  # the level i of s_{m,i} that gains or loses this server
    if level < level_count.shape[1]:
        m = server_class[server]
        level_area[m, level] += level_count[m, level] * (now - level_last[m, level])
        level_last[m, level] = now
        level_count[m, level] += 1 if new_len > old_len else -1
    queue_len[server] = new_len


@njit(cache=True, inline="always")
def integrate_total(c, now):
    """Add the area under the number in system up to ``now``."""
    c.job_area += c.in_system * (now - c.last_total_change)
    c.last_total_change = now


@njit(cache=True)
def begin_measurement(c, at, job_area, busy_area, last_change, level_area, level_last):
    """Start the statistics at the end of the warm-up: integrals from ``at`` on, counts from zero."""
    c.measuring = 1
    c.last_total_change = at
    c.job_area = 0.0
    job_area[:] = 0.0
    busy_area[:] = 0.0
    last_change[:] = at
    level_area[:, :] = 0.0
    level_last[:, :] = at


@njit(cache=True)
def snapshot_batch(c, batches, at):
    """Record the cumulative counts at the end of a batch (columns of BATCH_FIELDS)."""
    row = batches[c.batch_index]
    row[0] = at
    row[1] = c.arrivals
    row[2] = c.admitted
    row[3] = c.blocked
    row[4] = c.waited
    row[5] = c.completed
    row[6] = c.response_sum
    row[7] = c.waiting_sum
    row[8] = c.job_area
    c.batch_index += 1


@njit(cache=True)
def advance(model, state, arrival_rng, policy_rng, max_events):
    """Run up to ``max_events`` events; return RUNNING, FINISHED or NEEDS_JOB_SLOTS.

    The arrays are taken out of the two namedtuples once, here: numba reference-counts every
    member of a tuple argument at each call that is not inlined, which would cost far more than
    the event itself, so the helpers take plain arrays.
    """
    c = state.counters[0]
    speed, inv_speed, buffer, server_class = model.speed, model.inv_speed, model.buffer, model.server_class
    n_classes, policy_code, pod_d = model.n_classes, model.policy_code, model.pod_d
    compat_indptr, compat_indices = model.compat_indptr, model.compat_indices
    compat_cumulative_speed, type_uses_tree = model.compat_cumulative_speed, model.type_uses_tree
    cumulative_type_rate, total_arrival_rate = model.cumulative_type_rate, model.total_arrival_rate
    n_types = len(cumulative_type_rate)
    size_code, size_params = model.size_code, model.size_params
    warmup, horizon, target_jobs = model.warmup, model.horizon, model.target_jobs
    batch_ends, batch_by_jobs = model.batch_ends, model.batch_by_jobs
    n_batches = len(batch_ends)
    queue_len, queue_head, queue_tail = state.queue_len, state.queue_head, state.queue_tail
    job_arrival, job_size, job_next = state.job_arrival, state.job_size, state.job_next
    departure_time, departure_winner = state.departure_time, state.departure_winner
    key, key_count, keyed = state.key, state.key_count, len(state.key) > 2
    job_area, busy_area, last_change, peak_queue = state.job_area, state.busy_area, state.last_change, state.peak_queue
    level_count, level_area, level_last = state.level_count, state.level_area, state.level_last
    histogram, batches, pod_sample = state.histogram, state.batches, state.pod_sample
    trace_time, trace_type, trace_server, trace_queue = (state.trace_time, state.trace_type, state.trace_server,
                                                         state.trace_queue)

    for _ in range(max_events):
        if c.free_slot < 0:
            return NEEDS_JOB_SLOTS
        leader = departure_winner[1]
        next_departure = departure_time[leader]
        now = min(c.next_arrival, next_departure)
        if now > horizon:
            if c.measuring == 0:
                begin_measurement(c, warmup, job_area, busy_area, last_change, level_area, level_last)
            finish(c, horizon, queue_len, job_area, busy_area, last_change, level_count, level_area, level_last,
                   batches)
            return FINISHED
        if c.measuring == 0 and now >= warmup:
            begin_measurement(c, warmup, job_area, busy_area, last_change, level_area, level_last)
        if batch_by_jobs == 0:
            while c.batch_index < n_batches and now >= batch_ends[c.batch_index]:
                integrate_total(c, batch_ends[c.batch_index])
                snapshot_batch(c, batches, batch_ends[c.batch_index])
        c.now = now
        c.events += 1
        integrate_total(c, now)

        if c.next_arrival <= next_departure:
            # an arrival: its type and size come from the arrival stream, its server from the policy
            if n_types == 1:
                job_type = 0
            else:
                job_type = min(np.searchsorted(cumulative_type_rate, arrival_rng.random() * total_arrival_rate,
                                               side="right"), n_types - 1)
            size = draw_size(size_code, size_params, arrival_rng)
            c.next_arrival = now + arrival_rng.exponential() / total_arrival_rate
            server = route(job_type, policy_code, pod_d, n_classes, compat_indptr, compat_indices,
                           compat_cumulative_speed, type_uses_tree, queue_len, server_class, speed, key, key_count,
                           pod_sample, policy_rng)
            q = queue_len[server]
            if c.trace_n < len(trace_time):
                trace_time[c.trace_n] = now
                trace_type[c.trace_n] = job_type
                trace_server[c.trace_n] = server
                trace_queue[c.trace_n] = q
                c.trace_n += 1
            c.arrivals_total += 1
            c.arrivals += c.measuring
            if q >= buffer[server]:
                c.blocked_total += 1
                c.blocked += c.measuring
                continue
            c.admitted_total += 1
            c.admitted += c.measuring
            if q > 0:
                c.waited += c.measuring
            c.in_system += 1
            change_queue(server, now, q + 1, queue_len, job_area, busy_area, last_change, server_class,
                         level_count, level_area, level_last)
            if keyed:
                set_key(key, key_count, server, rules.selection_key(policy_code, q + 1, server_class[server],
                                                                    n_classes, speed[server]))
            if q + 1 > peak_queue[server]:
                peak_queue[server] = q + 1
            slot = c.free_slot
            c.free_slot = job_next[slot]
            job_arrival[slot] = now
            job_size[slot] = size
            job_next[slot] = -1
            if q == 0:
                queue_head[server] = slot
                set_time(departure_time, departure_winner, server, now + size * inv_speed[server])
            else:
                job_next[queue_tail[server]] = slot
            queue_tail[server] = slot
        else:
            # a departure from the server with the earliest completion
            server = leader
            slot = queue_head[server]
            arrived = job_arrival[slot]
            if c.measuring == 1 and arrived >= warmup:
                response = now - arrived
                c.completed += 1
                c.response_sum += response
                c.response_sq_sum += response * response
                c.waiting_sum += max(response - job_size[slot] * inv_speed[server], 0.0)
                histogram[histogram_bin(response)] += 1
            next_slot = job_next[slot]
            job_next[slot] = c.free_slot
            c.free_slot = slot
            c.in_system -= 1
            c.departures_total += 1
            q = queue_len[server] - 1
            change_queue(server, now, q, queue_len, job_area, busy_area, last_change, server_class,
                         level_count, level_area, level_last)
            if keyed:
                set_key(key, key_count, server, rules.selection_key(policy_code, q, server_class[server],
                                                                    n_classes, speed[server]))
            if q > 0:
                queue_head[server] = next_slot
                set_time(departure_time, departure_winner, server, now + job_size[next_slot] * inv_speed[server])
            else:
                queue_head[server] = -1
                set_time(departure_time, departure_winner, server, np.inf)
            if batch_by_jobs == 1 and c.batch_index < n_batches and c.completed >= batch_ends[c.batch_index]:
                snapshot_batch(c, batches, now)
            if c.completed >= target_jobs:
                finish(c, now, queue_len, job_area, busy_area, last_change, level_count, level_area, level_last,
                       batches)
                return FINISHED
    return RUNNING


@njit(cache=True)
def finish(c, at, queue_len, job_area, busy_area, last_change, level_count, level_area, level_last, batches):
    """Bring every integral up to the end time ``at`` and close the remaining batches."""
    integrate_total(c, at)
    for server in range(len(queue_len)):
        q = queue_len[server]
        elapsed = at - last_change[server]
        job_area[server] += q * elapsed
        if q > 0:
            busy_area[server] += elapsed
        last_change[server] = at
    for m in range(level_count.shape[0]):
        for level in range(1, level_count.shape[1]):
            level_area[m, level] += level_count[m, level] * (at - level_last[m, level])
            level_last[m, level] = at
    while c.batch_index < len(batches):
        snapshot_batch(c, batches, at)
    c.end_time = at
