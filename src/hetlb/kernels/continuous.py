"""The continuous-time event loop: Poisson arrivals, routing, FCFS queues, departures.

``advance`` is pure: it reads a :class:`KernelModel`, mutates a :class:`KernelState` and draws
from two generators, one for the arrival process (epochs, job types, sizes) and one for the
policy's own randomness, so two policies run with the same seed see the same arrivals and
job sizes (common random numbers). Cost per event: O(log N) through the trees of
:mod:`hetlb.kernels.trees` on the complete graph (O(1) routing through the key buckets of
:mod:`hetlb.kernels.buckets` for small integer keys), O(degree) on a sparse graph. Statistics
stream; memory does not grow with the number of jobs.

Speed notes.

* Reference counting: the arrays are taken out of the two namedtuples once, in ``advance``,
  and stay live for the whole loop, so the loop does no reference counting. The helpers it
  calls take records, scalars and plain arrays; those that take arrays are plain ``@njit``
  functions that use every array argument on every path, which lets numba drop their reference
  counting too (an array used on one branch only is released at the join through a phi, which
  numba's pruning pass cannot remove) and LLVM inline them. Inlined by numba instead
  (``inline="always"``), a helper's arrays are copies that are counted: the departure's
  measurement so cost about a fifth of the event rate at N = 10 (the ahead-of-time compiler has
  numba's runtime on, so compiling the loop without it is no way out). Helpers of records and
  scalars alone are ``inline="always"``.
* One set of helpers for every event loop: the blocks of an arrival and a departure that the
  single dispatcher, the many dispatchers and the loop of multi-slot servers
  (hetlb.kernels.batch_servers) share (:func:`admit_job`, :func:`start_service`,
  :func:`queue_job`, :func:`measure_response`, :func:`record_response`, :func:`arrival_batch`,
  :func:`add_to_batch`, :func:`leave_server`, :func:`serve_next`, :func:`take_first_waiting`,
  :func:`idle`, :func:`set_departure`, :func:`record_trace`) and the
  measurement's rare events (:func:`pass_marks` at the times :func:`next_mark` gives,
  :func:`close_window`) live here; both loops take records, scalars and arrays in and call
  them the same way.
* Where per-server state joins: a job joins a server in :func:`admit_job`, starts service in
  :func:`start_service` or :func:`serve_next` (in hetlb.kernels.batch_servers'
  ``start_slot_service`` or ``end_slot_service`` at a server of concurrency c > 1), and leaves in
  :func:`leave_server`, in every loop; these call the three helpers of hetlb.kernels.server_state
  with the run's ``extension`` (KernelState.extension), where state beyond the queue joins every
  loop at once (none today: a job's work is its size).
* Memory: all an event changes at one server is one cache line, its SERVER_DTYPE record; the
  job in service lives there too, and only waiting jobs take a job slot. In a large system
  the kernel also starts loading what the next departure will read (``prefetch``), so that
  those cache misses overlap with the work in between.
"""

import math
from collections import namedtuple

import numpy as np

from hetlb import jit
from hetlb.constants import ARRIVALS_POISSON, INFINITE_BUFFER
from hetlb.jit import at, njit, prefetch, records
from hetlb.kernels.arrivals import next_arrival_epoch, next_or_trace_epoch
from hetlb.kernels.buckets import move_drawn_key, move_key, random_least_drawn
from hetlb.kernels.sampling import alias_draw
from hetlb.kernels.server_state import (
    job_arrives,
    job_joins,
    job_leaves,
    job_measured,
    job_waits,
    reads_cache,
    route_by_cache,
    work_at_start,
)
from hetlb.kernels.trees import (
    lower_time,
    lower_time_at_root,
    prefetch_path,
    random_least_leaf,
    set_key,
    set_time,
    set_time_by_scan,
)
from hetlb.policies import registry, rules

CACHE_CODES = (registry.CACHE_AWARE, registry.PREFIX_SCORE, registry.CHASH, registry.BALANCED_PANDAS, registry.EFT)
"""The codes of the policies that read the prefix caches, which advance runs with a CacheExtension
(hetlb.kernels.server_state.route_by_cache; caches of no block when the system has none)."""

CODES = (registry.RANDOM, registry.WEIGHTED_RANDOM, registry.POD, registry.JSQ_DF_DS, *rules.KEYED_CODES, *CACHE_CODES)
"""The policy codes advance() has a rule for: its own branches (``# the server it is sent to``),
every code of hetlb.policies.rules.selection_key and the policies that read the caches;
hetlb.simulate refuses any other before it runs (a policy registered with its own key runs in a
copy of advance, hetlb.kernels.specialise)."""

# advance() return status
RUNNING = 0
FINISHED = 1
NEEDS_JOB_SLOTS = 2

SIZE_EXPONENTIAL = 0
SIZE_HYPEREXPONENTIAL = 1
SIZE_DETERMINISTIC = 2
SIZE_LOGNORMAL = 3
SIZE_PARETO = 4
SIZE_WEIBULL = 5
SIZE_EMPIRICAL = 6

# response-time histogram: bins of relative width <= 1/128 between 2^-30 and 2^40 time units
HISTOGRAM_MIN_EXPONENT = -30
HISTOGRAM_OCTAVES = 70
HISTOGRAM_BINS_PER_OCTAVE = 128
HISTOGRAM_MANTISSA_SHIFT = 52 - 7  # keeps the top 7 = log2(HISTOGRAM_BINS_PER_OCTAVE) bits of a mantissa

# columns of a batch's row: the batch holds the jobs that arrive between the end of the previous
# batch and ``time``; "completed", "response_sum" and "waiting_sum" are those jobs' own sums (added
# as they leave), the other columns cumulative counts taken at ``time``
BATCH_FIELDS = (
    "time",
    "arrivals",
    "admitted",
    "blocked",
    "waited",
    "completed",
    "response_sum",
    "waiting_sum",
    "job_area",
)

PREFETCH_MIN_SERVERS = 16384
"""From this many servers on, the per-server data outgrows the caches and the kernel prefetches."""

SCAN_MAX_SERVERS = 16
"""Up to this many servers, the tournament tree of departures keeps its root alone up to date,
found by a scan of the leaves (hetlb.kernels.trees.set_time_by_scan)."""

KernelModel = namedtuple(
    "KernelModel",
    [
        "speed",
        "inv_speed",
        "buffer",
        "server_class",
        "n_classes",
        "class_speed",
        "type_keep",
        "type_alias",
        "total_arrival_rate",
        "compat_indptr",
        "compat_indices",
        "compat_cumulative_speed",
        "compat_first_slow",
        "type_uses_tree",
        "size_code",
        "size_params",
        "arrival_code",
        "arrival_params",
        "policy_code",
        "sample_sizes",
        "route_probabilities",
        "n_levels",
        "warmup",
        "horizon",
        "target_jobs",
        "batch_ends",
        "batch_by_jobs",
    ],
)
KernelModel.__doc__ = """Read-only arrays and parameters of one run (see hetlb.simulation.continuous.pack_model).

``type_keep`` and ``type_alias`` are the alias table of the job types' arrival rates
(hetlb.kernels.sampling); ``size_params`` are hetlb.model.JobSizes.kernel_parameters (for
empirical sizes the sizes themselves); ``arrival_code`` and ``arrival_params`` the arrival process
(hetlb.constants.ARRIVAL_KINDS, hetlb.kernels.arrivals); ``sample_sizes`` holds pod's d, or jsq-df-ds's (d_F, d_S), and ``route_probabilities`` jsq-df-ds's
(p_F, p_S); for jsq-df-ds each job type's servers are listed fastest class first and
``compat_first_slow[k]`` is the position of type k's first slow server (empty for other policies)."""


class KernelState(
    namedtuple(
        "KernelState",
        [
            "counters",
            "servers",
            "server_key",
            "job_arrival",
            "job_size",
            "job_next",
            "departures",
            "key_tree",
            "bucket_order",
            "bucket_position",
            "bucket_key",
            "bucket_start",
            "level_count",
            "level_area",
            "histogram",
            "batches",
            "trace_time",
            "trace_type",
            "trace_server",
            "trace_queue",
            "sample",
            "ties",
            "window_job_area",
            "window_busy_area",
            "window_level_area",
            "batch_close",
            "jobs_time",
            "waiting_time",
            "extension",
        ],
    )
):
    """Mutable state of one run: ``counters`` is a one-record array of COUNTER_DTYPE, ``servers``
    one SERVER_DTYPE record per server, ``server_key`` each server's selection key
    (hetlb.policies.rules.selection_key) for the job types that scan their servers (empty when
    none does), ``departures`` the tournament tree of next departure times, and ``key_tree`` the
    least-key tree of the job types that may use every server, or instead, when the policy's keys
    are small integers, the key buckets ``bucket_*`` (hetlb.kernels.buckets); the structure not in
    use is empty. The job slots
    (``job_*``) hold the waiting jobs; ``job_next`` links each server's waiting jobs into a ring
    and the free slots into a list. ``extension``: the per-server state beyond the queue
    (hetlb.kernels.server_state.ServerExtension, no field today)."""

    __slots__ = ()

    @property
    def peak_queue(self) -> np.ndarray:
        """Per server: the largest number of jobs it held (int64)."""
        return self.servers["peak_queue"].astype(np.int64)


SERVER_DTYPE = np.dtype(
    [
        ("queue_len", "i4"),
        ("speed_class", "i4"),
        ("peak_queue", "i4"),
        ("last_waiting", "i4"),
        ("inv_speed", "f8"),
        ("service_arrival", "f8"),
        ("service_size", "f8"),
        ("spare", "f8"),
        ("job_area", "f8"),
        ("busy_area", "f8"),
    ]
)
"""One server, 64 bytes (a cache line): jobs held (counting the one in service), speed class m,
peak number of jobs, the job slot of its last waiting job, 1/speed, arrival time and size of
the job in service, 8 spare bytes, and the integrals of its number of jobs and of its busy time
in the form of :func:`area_at` (a job's arrival subtracts now from ``job_area``, its departure
adds it; the start of a busy period subtracts now from ``busy_area``, its end adds it)."""

COUNTER_DTYPE = np.dtype(
    [
        ("now", "f8"),
        ("next_arrival", "f8"),
        ("end_time", "f8"),
        ("measuring", "i8"),
        ("free_slot", "i8"),
        ("in_system", "i8"),
        ("events", "i8"),
        ("arrivals_total", "i8"),
        ("admitted_total", "i8"),
        ("blocked_total", "i8"),
        ("departures_total", "i8"),
        ("arrivals", "i8"),
        ("admitted", "i8"),
        ("blocked", "i8"),
        ("waited", "i8"),
        ("completed", "i8"),
        ("response_sum", "f8"),
        ("response_sq_sum", "f8"),
        ("waiting_sum", "f8"),
        ("job_area", "f8"),
        ("batch_index", "i8"),
        ("trace_n", "i8"),
        ("tagging", "i8"),
        ("window_end", "f8"),
        ("tagged_in_system", "i8"),
        ("window_job_area", "f8"),
        ("busy", "i8"),
        ("last_state_time", "f8"),
        ("batch_left", "i8"),
        ("phase", "i8"),
        ("phase_end", "f8"),
    ]
)
"""Scalars of a run. The measured jobs are those that arrive in the window [warmup, window_end]
(``tagging`` while it is open); the window closes at the horizon, or at the arrival that brings the
admitted jobs to the target, and the run goes on until every measured job has left
(``tagged_in_system`` = 0), so that no measured response time is cut short. Time averages cover
the window only: ``close_window`` keeps their values at its end (``window_*``). ``batch_left``,
``phase`` and ``phase_end`` are the state of a non-Poisson arrival process
(hetlb.kernels.arrivals)."""


@njit(error_model="numpy", inline="always")
def draw_size(size_code, first, second, third, rng):
    """A job size with mean 1 (hetlb.model.JobSizes) from the first three of its kernel parameters:
    an exponential, divided by the rate of its phase if hyperexponential (p1, rate1, rate2);
    exp(m + sigma Z) if lognormal (m, sigma); x_m U^(-1/a) if pareto (a, x_m); scale E^(1/k) if
    weibull (1/k, scale). Empirical sizes are :func:`empirical_size`'s. Divides under numpy's
    error model (the rates are > 0), which has no exception path and so lets LLVM inline it."""
    if size_code == SIZE_DETERMINISTIC:
        return 1.0
    if size_code == SIZE_HYPEREXPONENTIAL:
        rate = second if rng.random() < first else third
        return rng.exponential() / rate
    if size_code == SIZE_LOGNORMAL:
        return math.exp(first + second * rng.standard_normal())
    if size_code == SIZE_PARETO:
        return second * (1.0 - rng.random()) ** (-1.0 / first)
    if size_code == SIZE_WEIBULL:
        return second * rng.exponential() ** first
    return rng.exponential()


@njit
def empirical_size(size_params, rng):
    """One of the empirical sizes (mean 1), uniformly at random: ``size_params`` holds them after
    three unused entries (hetlb.model.JobSizes.kernel_parameters)."""
    n = len(size_params) - 3
    i = int(rng.random() * n)
    return size_params[3 + min(i, n - 1)]


@njit
def histogram_bin(x):
    """Bin of a response time ``x`` >= 0: its octave (the exponent of math.frexp) and the top
    bits of its mantissa, read straight from the bits of x unless x is zero or subnormal."""
    bits = np.float64(x).view(np.int64)
    if bits >> 52 == 0:
        mantissa, exponent = math.frexp(x)
        fraction = int((mantissa - 0.5) * 2.0 * HISTOGRAM_BINS_PER_OCTAVE)
    else:
        exponent = (bits >> 52) - 1022
        fraction = (bits >> HISTOGRAM_MANTISSA_SHIFT) & (HISTOGRAM_BINS_PER_OCTAVE - 1)
    octave = exponent - HISTOGRAM_MIN_EXPONENT
    if octave < 0:
        return 0
    if octave >= HISTOGRAM_OCTAVES:
        return HISTOGRAM_OCTAVES * HISTOGRAM_BINS_PER_OCTAVE - 1
    return octave * HISTOGRAM_BINS_PER_OCTAVE + fraction


# The time integrals are kept by their changes: a count x(t) that changes by dx_i at the times t_i
# has the integral int_a^T x dt = x(T) T - (x(a) a + sum_{a < t_i <= T} dx_i t_i), so each change
# subtracts dx_i t_i from an "area" that starts at -x(a) a, and the integral up to any time T is
# area + x(T) T (:func:`area_at`). A change costs one multiply-add and reads no time of the last
# change.


@njit
def area_at(area, count, at):
    """The integral up to ``at`` of a count whose area (in the form above) is ``area``."""
    return area + count * at


@njit
def move_level(i, change, now, level_count, level_area):
    """Add ``change`` (+1 or -1) to s_{m,level} (the number of class-m servers with at least
    ``level`` jobs) at time ``now``, with its area; ``i`` = m * (levels + 1) + level indexes the
    flattened arrays (a one-dimensional index costs less in the loop than two). The continuous
    event loop passes it as an unsigned integer: numba then adds no wraparound of a negative index,
    and the loop needs neither array's length (about 3% of the event rate at N = 10)."""
    level_area[i] -= change * now
    level_count[i] += change


@njit
def record_state_time(c, now, jobs_time, waiting_time):
    """Add the time since the last event, up to ``now``, to the time spent at the current number
    of jobs in system (``jobs_time``) and of waiting jobs (``waiting_time``); the last entry of each
    collects every larger number."""
    elapsed = now - c.last_state_time
    jobs_time[min(c.in_system, len(jobs_time) - 1)] += elapsed
    waiting_time[min(c.in_system - c.busy, len(waiting_time) - 1)] += elapsed
    c.last_state_time = now


@njit
def begin_measurement(c, at, servers, level_count, level_area):
    """Start the statistics at the end of the warm-up: integrals from ``at`` on, counts from zero."""
    c.measuring = 1
    c.tagging = 1
    c.last_state_time = at
    c.job_area = -c.in_system * at
    for s in range(len(servers)):
        servers[s].job_area = -servers[s].queue_len * at
        servers[s].busy_area = -int(servers[s].queue_len > 0) * at
    for m in range(level_count.shape[0]):
        for level in range(level_count.shape[1]):
            level_area[m, level] = -level_count[m, level] * at


@njit
def close_window(c, at, servers, level_count, level_area, window_areas, jobs_time, waiting_time):
    """Stop measuring arrivals at time ``at`` and keep the time integrals over [warmup, at]
    (``window_areas``: the window's areas of each server's jobs and busy time, and of the levels)."""
    window_job_area, window_busy_area, window_level_area = window_areas
    if len(jobs_time) > 0:
        record_state_time(c, at, jobs_time, waiting_time)
    c.window_job_area = area_at(c.job_area, c.in_system, at)
    for s in range(len(servers)):
        window_job_area[s] = area_at(servers[s].job_area, servers[s].queue_len, at)
        window_busy_area[s] = area_at(servers[s].busy_area, int(servers[s].queue_len > 0), at)
    for m in range(level_count.shape[0]):
        for level in range(level_count.shape[1]):
            window_level_area[m, level] = area_at(level_area[m, level], level_count[m, level], at)
    c.tagging = 0
    c.window_end = at


@njit
def snapshot_batch(c, batches, batch_close, at):
    """Close the current batch at time ``at``: record the cumulative counts (BATCH_FIELDS)."""
    row = batches[c.batch_index]
    row[0] = at
    row[1] = c.arrivals
    row[2] = c.admitted
    row[3] = c.blocked
    row[4] = c.waited
    row[8] = area_at(c.job_area, c.in_system, at)
    batch_close[c.batch_index] = at
    c.batch_index += 1


@njit
def next_mark(c, warmup, horizon, batch_ends, batch_by_jobs):
    """The next time at which the measurement changes, +inf if none: the end of the warm-up before
    it, the end of the current batch when batches are of time, the horizon while the window is
    open. An event at or after it goes through :func:`pass_marks` first."""
    mark = np.inf
    if c.measuring == 0:
        mark = warmup
    if batch_by_jobs == 0 and c.batch_index < len(batch_ends):
        mark = min(mark, batch_ends[c.batch_index])
    if c.window_end == np.inf:
        mark = min(mark, horizon)
    return mark


@njit
def pass_marks(c, now, warmup, horizon, batch_ends, batch_by_jobs, servers, levels, window_areas, state_times):
    """Before the event at ``now``: close the window at the horizon (the run ends there if no
    measured job is left: returns True), start measuring at the end of the warm-up, close the
    batches of time that ended. ``levels``: (level_count, level_area, batches, batch_close);
    ``window_areas`` as in :func:`close_window`; ``state_times``: (jobs_time, waiting_time)."""
    level_count, level_area, batches, batch_close = levels
    jobs_time, waiting_time = state_times
    if now > horizon and c.window_end == np.inf:
        if c.measuring == 0:
            begin_measurement(c, warmup, servers, level_count, level_area)
        close_window(c, horizon, servers, level_count, level_area, window_areas, jobs_time, waiting_time)
        if c.tagged_in_system == 0:
            finish(c, horizon, batches, batch_close)
            return True
    if c.measuring == 0 and now >= warmup:
        begin_measurement(c, warmup, servers, level_count, level_area)
    if batch_by_jobs == 0:
        while c.batch_index < len(batch_ends) and now >= batch_ends[c.batch_index]:
            snapshot_batch(c, batches, batch_close, batch_ends[c.batch_index])
    return False


@njit
def record_trace(c, now, job_type, s, q, trace_time, trace_type, trace_server, trace_queue):
    """Keep the decision at ``now``: a job of ``job_type`` sent to server s holding q jobs (the
    caller checks that the trace has room)."""
    trace_time[c.trace_n] = now
    trace_type[c.trace_n] = job_type
    trace_server[c.trace_n] = s
    trace_queue[c.trace_n] = q
    c.trace_n += 1


@njit(inline="always")
def admit_job(c, server, s, q, now, waits, extension):
    """An arriving job joins ``server`` (server s), which holds ``q`` jobs, and ``waits`` (finds no
    free slot: q > 0 for c = 1): the counts, the areas of the number in system and of the server's
    jobs (a change of one is one subtraction of now; the busy area changes when a busy period
    starts, :func:`start_service`), its peak, and its ``extension``
    (hetlb.kernels.server_state.job_joins)."""
    job_joins(extension, s, now)
    c.admitted_total += 1
    c.admitted += c.tagging
    c.tagged_in_system += c.tagging
    if waits:
        c.waited += c.tagging
    c.in_system += 1
    c.job_area -= now
    server.job_area -= now
    server.queue_len = q + 1
    server.peak_queue = max(server.peak_queue, q + 1)


@njit(inline="always")
def start_service(c, server, s, now, size, extension):
    """The job of ``size`` that arrived at the idle ``server`` (server s) at ``now`` enters service,
    with the work hetlb.kernels.server_state.work_at_start fixes; returns its departure time."""
    c.busy += 1
    server.busy_area -= now
    server.service_arrival = now
    work = work_at_start(extension, s, now, size, -1, now)
    server.service_size = work
    return now + work * server.inv_speed


@njit
def queue_job(c, server, waiting, now, size, job_arrival, job_size, job_next):
    """The job of ``size`` that arrived at ``now`` waits at ``server``, behind ``waiting`` waiting
    jobs (q - 1 of the q it holds with concurrency 1): a slot of the server's ring of waiting jobs,
    after the last and before the first; returns the slot."""
    slot = c.free_slot
    c.free_slot = job_next[slot]
    job_arrival[slot] = now
    job_size[slot] = size
    if waiting == 0:
        job_next[slot] = slot
    else:
        job_next[slot] = job_next[server.last_waiting]
        job_next[server.last_waiting] = slot
    server.last_waiting = slot
    return slot


@njit
def measure_response(c, server, now, histogram):
    """A measured job leaves ``server`` at ``now``: its response and waiting times into the sums
    and the histogram; returns them."""
    response = now - server.service_arrival
    waiting = max(response - server.service_size * server.inv_speed, 0.0)
    record_response(c, response, waiting, histogram)
    return response, waiting


@njit
def record_response(c, response, waiting, histogram):
    """A measured job leaves with these response and waiting times: into the sums and the histogram."""
    c.tagged_in_system -= 1
    c.completed += 1
    c.response_sum += response
    c.response_sq_sum += response * response
    c.waiting_sum += waiting
    histogram[histogram_bin(response)] += 1


@njit
def arrival_batch(c, arrival, batch_close, n_batches):
    """The batch a job that arrived at ``arrival`` belongs to: the last one not closed before it.
    Reads ``batch_close`` on every path (no reference counting)."""
    b = min(c.batch_index, n_batches - 1)
    closed = batch_close[max(b - 1, 0)]
    while b > 0 and arrival <= closed:
        b -= 1
        closed = batch_close[max(b - 1, 0)]
    return b


@njit
def add_to_batch(batches, b, response, waiting):
    """One more measured job of batch b, with its response and waiting times."""
    batches[b, 5] += 1.0
    batches[b, 6] += response
    batches[b, 7] += waiting


@njit(inline="always")
def leave_server(c, server, s, now, extension):
    """A job leaves ``server`` (server s) at ``now``: the counts and the areas of the number in
    system and of the server's jobs (one addition of now; the busy area changes when the server
    idles, :func:`idle`), and the server's ``extension`` (hetlb.kernels.server_state.job_leaves);
    returns the jobs the server still holds."""
    job_leaves(extension, s, now)
    c.in_system -= 1
    c.job_area += now
    c.departures_total += 1
    q = server.queue_len - 1
    server.job_area += now
    server.queue_len = q
    return q


@njit
def serve_next(c, server, s, now, job_arrival, job_size, job_next, extension):
    """After a departure at ``now`` from ``server`` (server s), which still holds jobs: its first
    waiting job enters service, with the work hetlb.kernels.server_state.work_at_start fixes, and
    frees its slot; returns the slot."""
    slot = take_first_waiting(c, server, job_next)
    server.service_arrival = job_arrival[slot]
    server.service_size = work_at_start(extension, s, now, job_size[slot], slot, now)
    return slot


@njit
def take_first_waiting(c, server, job_next):
    """Take the first waiting job of ``server`` off its ring and free its slot (whose arrival and
    size stay readable until the next job takes it); returns the slot."""
    slot = job_next[server.last_waiting]
    job_next[server.last_waiting] = job_next[slot]
    job_next[slot] = c.free_slot
    c.free_slot = slot
    return slot


@njit(inline="always")
def idle(c, server, now):
    """After a departure at ``now``, ``server`` holds no job: its busy period ends."""
    c.busy -= 1
    server.busy_area += now


@njit(inline="always")
def set_departure(departures, s, next_time, scanning, n_servers):
    """Set server s's next departure time in the departures' tournament tree; returns the earliest
    of all. A small system (``scanning``) keeps the root alone up to date (set_time_by_scan)."""
    if scanning:
        return set_time_by_scan(departures, s, next_time, n_servers)
    set_time(departures, s, next_time)
    return departures[1].time


@njit
def has_finite_buffer(buffer):
    """Whether some server's buffer is finite (buffer.min() < INFINITE_BUFFER, which would allocate)."""
    finite = False
    for s in range(len(buffer)):
        finite |= buffer[s] < INFINITE_BUFFER
    return finite


@njit
def advance(model, state, arrival_rng, policy_rng, max_events):
    """Run up to ``max_events`` events; return RUNNING, FINISHED or NEEDS_JOB_SLOTS."""
    c = records(state.counters)[0]
    buffer, class_speed = model.buffer, model.class_speed
    finite_buffers = has_finite_buffer(buffer)
    n_classes, policy_code = model.n_classes, model.policy_code
    sample_sizes, route_probabilities, compat_first_slow = (
        model.sample_sizes,
        model.route_probabilities,
        model.compat_first_slow,
    )
    compat_indptr, compat_indices = model.compat_indptr, model.compat_indices
    compat_cumulative_speed, type_uses_tree = model.compat_cumulative_speed, model.type_uses_tree
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
    servers, server_key = records(state.servers), state.server_key
    queue_len = servers.queue_len  # a column, for power-of-d
    prefetching = len(servers) >= PREFETCH_MIN_SERVERS
    n_servers = len(servers)
    scanning = n_servers <= SCAN_MAX_SERVERS
    job_arrival, job_size, job_next = state.job_arrival, state.job_size, state.job_next
    departures, key_tree = records(state.departures), records(state.key_tree)
    bucket_order, bucket_position, bucket_key, bucket_start = (
        state.bucket_order,
        state.bucket_position,
        state.bucket_key,
        state.bucket_start,
    )
    # keep the keys for scans, for the tree, for the buckets
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
    # what the measurement's rare events read, grouped (pass_marks, close_window)
    levels, state_times = (level_count, level_area, batches, batch_close), (jobs_time, waiting_time)
    window_areas = (state.window_job_area, state.window_busy_area, state.window_level_area)
    extension = state.extension  # per-server state beyond the queue (hetlb.kernels.server_state)
    # the next arrival epoch in a register: the loop writes it to the counters too, but reads it
    # from here (a read of the record after its write would wait for the store on every event)
    next_arrival = c.next_arrival
    next_departure = departures[1].time  # likewise, the root of the departures' tree
    mark = next_mark(c, warmup, horizon, batch_ends, batch_by_jobs)

    for _ in range(max_events):
        if c.free_slot < 0:
            return NEEDS_JOB_SLOTS
        now = min(next_arrival, next_departure)
        if now >= mark:
            if pass_marks(
                c, now, warmup, horizon, batch_ends, batch_by_jobs, servers, levels, window_areas, state_times
            ):
                return FINISHED
            mark = next_mark(c, warmup, horizon, batch_ends, batch_by_jobs)
        c.now = now
        c.events += 1
        if distributions and c.tagging == 1:
            record_state_time(c, now, jobs_time, waiting_time)
        if prefetching:  # the next departure's server: start loading what its departure reads
            leader = departures[1].leaf
            prefetch(servers, leader)
            prefetch_path(departures, leader, 3)
            if keyed:
                prefetch_path(key_tree, leader, 3)
            if bucketed:
                prefetch(bucket_position, leader)
                prefetch(bucket_key, leader)

        if next_arrival <= next_departure:
            # an arrival: its type, size and the next arrival epoch come from the arrival stream, in
            # that order, its server from the policy stream
            job_type = 0 if n_types == 1 else alias_draw(type_keep, type_alias, arrival_rng.random())
            job_arrives(extension, c.arrivals_total, arrival_rng)  # what else it brings (its prompt)
            drawn_at, least_bucket, least_count = -1, 0, 0  # where a draw from the key buckets found s

            # the server it is sent to (whether or not its buffer has room)
            lo = compat_indptr[job_type]
            hi = compat_indptr[job_type + 1]
            if reads_cache(extension, policy_code):
                s = route_by_cache(extension, policy_code, compat_indices, lo, hi, queue_len, now, policy_rng)
            elif policy_code == registry.RANDOM:
                s = compat_indices[lo + rules.uniform_index(policy_rng, hi - lo)]
            elif policy_code == registry.WEIGHTED_RANDOM:
                s = rules.speed_weighted_server(compat_indices, lo, hi, compat_cumulative_speed, policy_rng)
            elif policy_code == registry.POD:
                s = rules.power_of_d_server(compat_indices, lo, hi, sample_sizes[0], queue_len, sample, policy_rng)
            elif policy_code == registry.JSQ_DF_DS:
                s = rules.fast_slow_server(
                    compat_indices,
                    lo,
                    compat_first_slow[job_type],
                    hi,
                    sample_sizes,
                    route_probabilities,
                    queue_len,
                    sample,
                    policy_rng,
                )
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
                if rules.falls_back_to_uniform(policy_code, least, n_classes):
                    s = compat_indices[lo + rules.uniform_index(policy_rng, hi - lo)]
                    drawn_at = -1

            if prefetching:  # the tree nodes this arrival may change, while its server's record loads
                prefetch_path(departures, s, 2)
            # drawn after the routing, so that they overlap with loading the server's record
            if empirical_sizes:
                size = empirical_size(size_table, arrival_rng)
            else:
                size = draw_size(size_code, size_first, size_second, size_third, arrival_rng)
            if poisson:
                next_arrival = now + arrival_rng.exponential() * mean_interarrival
            else:
                next_arrival = next_arrival_epoch(c, now, arrival_code, arrival_params, arrival_rng)
            c.next_arrival = next_arrival
            server = servers[s]
            q = server.queue_len
            if c.trace_n < len(trace_time):
                record_trace(c, now, job_type, s, q, trace_time, trace_type, trace_server, trace_queue)
            c.arrivals_total += 1
            c.arrivals += c.tagging
            if finite_buffers and q >= buffer[s]:
                c.blocked_total += 1
                c.blocked += c.tagging
                continue
            admit_job(c, server, s, q, now, q > 0, extension)
            if q + 1 <= n_levels:
                move_level(at(server.speed_class * level_width + q + 1), 1, now, flat_level_count, flat_level_area)
            if scanned or keyed or bucketed:
                key = rules.selection_key(
                    policy_code, q + 1, server.speed_class, n_classes, class_speed[server.speed_class], now
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
            if q == 0:
                next_time = start_service(c, server, s, now, size, extension)
                if scanning:
                    lower_time_at_root(departures, s, next_time)
                else:
                    lower_time(departures, s, next_time)
                next_departure = min(next_departure, next_time)  # the root's time, as the tree has it
            else:
                job_waits(extension, queue_job(c, server, q - 1, now, size, job_arrival, job_size, job_next))
            if batch_by_jobs == 1 and c.tagging == 1 and c.admitted >= batch_ends[c.batch_index]:
                snapshot_batch(c, batches, batch_close, now)
            if c.tagging == 1 and c.admitted >= target_jobs:
                close_window(c, now, servers, level_count, level_area, window_areas, jobs_time, waiting_time)
        else:
            # a departure from the server with the earliest completion
            s = departures[1].leaf
            server = servers[s]
            if warmup <= server.service_arrival <= c.window_end and c.measuring == 1:
                response, waiting = measure_response(c, server, now, histogram)
                add_to_batch(
                    batches, arrival_batch(c, server.service_arrival, batch_close, n_batches), response, waiting
                )
                job_measured(extension, s, now, server.service_arrival, c, batch_close, n_batches)
            q = leave_server(c, server, s, now, extension)
            if q + 1 <= n_levels:
                move_level(at(server.speed_class * level_width + q + 1), -1, now, flat_level_count, flat_level_area)
            if scanned or keyed or bucketed:
                key = rules.selection_key(
                    policy_code, q, server.speed_class, n_classes, class_speed[server.speed_class], now
                )
                if scanned:
                    server_key[s] = key
                if keyed:
                    set_key(key_tree, s, key)
                if bucketed:
                    move_key(bucket_order, bucket_position, bucket_key, bucket_start, s, int(key))
            if q > 0:
                serve_next(c, server, s, now, job_arrival, job_size, job_next, extension)
                next_time = now + server.service_size * server.inv_speed
            else:
                idle(c, server, now)
                next_time = np.inf
            next_departure = set_departure(departures, s, next_time, scanning, n_servers)
            if c.tagged_in_system == 0 and c.window_end < np.inf:
                finish(c, now, batches, batch_close)
                return FINISHED
    return RUNNING


@njit
def finish(c, at, batches, batch_close):
    """End the run at time ``at``: close the remaining batches (their job area is the integral up to
    ``at``). The results read the per-server and per-level integrals that close_window froze."""
    while c.batch_index < len(batches):
        snapshot_batch(c, batches, batch_close, at)
    c.end_time = at


_with_caches: dict = {}


def advance_with_caches(model, state, arrival_rng, policy_rng, max_events):
    """:func:`advance` for a run whose KernelState.extension is a CacheExtension (the servers'
    prefix caches, hetlb.kernels.server_state): the same loop, compiled without numba's runtime so
    that the caches' arrays, which the inlined helpers of hetlb.kernels.server_caches take out of
    the extension on every event, are not reference-counted (the loop allocates nothing, as
    hetlb.kernels.batch_servers.advance does not), and with a trace's arrival epochs
    (hetlb.kernels.arrivals.next_or_trace_epoch in the place of next_arrival_epoch). The copy is made
    when first called, from the module's functions as they are then (numba's, or the plain ones in
    a plain-Python run), and kept."""
    mode = "plain" if jit.running_plain() else "compiled"
    if mode not in _with_caches:
        if mode == "compiled":
            jit.compile_everything()  # the module's names are numba's functions from here on
        copy = jit.renamed(advance, "advance_with_caches", {"next_arrival_epoch": next_or_trace_epoch})
        if mode == "compiled":
            import numba

            copy = numba.njit(cache=True, _nrt=False)(copy)
        _with_caches[mode] = copy
    return _with_caches[mode](model, state, arrival_rng, policy_rng, max_events)
