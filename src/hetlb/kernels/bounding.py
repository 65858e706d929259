"""Event loops of the bounding systems JSQ-FSL and JSQ-SSL (paper 002, section 5), alone and
coupled with JSQ under several tie-breaks.

Level state. A system of n buffers (or queues) is summarised by ``level_count[i]`` = Q_i, the
number of buffers holding at least i jobs (``level_count[0]`` = n), with ``shortest`` = the least
buffer length (the number of levels i >= 1 with Q_i = n) and ``longest`` = the greatest. Under
join-the-shortest-queue an admitted arrival raises level shortest + 1, and a departure from a
buffer of length l lowers level l, whatever the tie-break; so the same two helpers update the
bounding systems and the JSQ systems.

Bounding systems. Only the multiset of buffer lengths matters, and servers are matched to buffers
in sorted order: the buffer of rank r (1 = a longest one) is served by the r-th server of
``assigned_speed`` (ascending speeds for SSL, descending for FSL). With the prefix sums
``served_rate[r]`` = assigned_speed[0] + ... + assigned_speed[r - 1], the buffers holding >= i jobs
are served at rate served_rate[Q_i], and a departure at the speed position u (0 <= u < sum of
speeds) comes from the buffer of rank r = the least r with served_rate[r] > u, whose length is the
greatest i with Q_i >= r, that is with served_rate[Q_i] > u: a scan down from the longest length
(departing_level), no sorting.

Coupled systems (the coupling of the proof of Prop 5.1 of 002). One Poisson clock of rate
n lambda + sum_k mu_k drives every system. A tick is an arrival for all of them with probability
n lambda / (n lambda + sum mu), else a potential departure with a common u uniform on
[0, sum mu): each system orders its busy servers by the length of the buffer they serve, longest
first (ties by server index in a JSQ system), lays their speeds end to end from 0, and loses a job
from the server whose interval holds u (none if u lies beyond them). So every system loses a job
from a buffer holding >= i jobs exactly when u < (the total speed serving such buffers), for all
i at once, and the sandwich Q^FSL_{+i} <= Q^pi_{+i} <= Q^SSL_{+i} holds on every path (see
docs/reference/bounding-systems.md).
"""

from collections import namedtuple

import numpy as np

from hetlb.jit import at, njit, records
from hetlb.policies.rules import KEYED_CODES, least_key_server, selection_key

CODES = KEYED_CODES
"""The tie-breaking rules run_coupled can run: the policies it ranks by a key of
hetlb.policies.rules.selection_key; hetlb.check_sandwich refuses any other before it runs."""

FSL_ROW = 0
SSL_ROW = 1
FIRST_POLICY_ROW = 2
"""Rows of the coupled level counts: JSQ-FSL, JSQ-SSL, then one JSQ system per tie-break."""

INITIAL_LEVELS = 8
"""Levels allocated at the start; the arrays double when an arrival reaches a new level."""

BoundingModel = namedtuple("BoundingModel", ["served_rate", "mean_step", "arrival_rate", "buffer", "horizon", "warmup"])
BoundingModel.__doc__ = """Read-only parameters of a path of JSQ-FSL or JSQ-SSL (:func:`simulate_bounding`):
``served_rate`` as in the module doc, ``mean_step[r]`` = 1 / (arrival_rate + served_rate[r]) (a
division per event turned into a read), the buffer b (INFINITE_BUFFER for none), the horizon and
the warm-up (time units)."""

BoundingState = namedtuple(
    "BoundingState", ["counters", "level_count", "level_area", "time_at_jobs", "time_at_waiting"]
)
BoundingState.__doc__ = """Mutable state of a path: ``counters`` is a one-record array of
BOUNDING_COUNTER_DTYPE; ``level_count[i]`` = Q_i, ``level_area[i]`` its area
(:func:`move_level_area`), and the time spent with Q_{+1} = j and with Q_{+2} = j for each j."""

BOUNDING_COUNTER_DTYPE = np.dtype(
    [
        ("now", "f8"),
        ("shortest", "i8"),
        ("longest", "i8"),
        ("jobs", "i8"),
        ("arrivals", "i8"),
        ("lost", "i8"),
        ("events", "i8"),
        ("pending", "i8"),
    ]
)
"""Scalars of a path: the time, the least and greatest buffer lengths, the jobs in system, the
arrivals, lost arrivals and events after the warm-up, and 1 while an arrival waits for longer
arrays (drawn and counted, not yet admitted). The event loop holds them in locals and writes
them back when it returns."""


@njit
def with_more_levels(array, needed):
    """A copy of ``array`` (1-D or 2-D, levels on the last axis) padded with zeros to at least
    ``needed`` levels, doubling."""
    size = array.shape[-1]
    while size < needed:
        size *= 2
    larger = np.zeros(array.shape[:-1] + (size,), dtype=array.dtype)
    larger[..., : array.shape[-1]] = array
    return larger


@njit
def join_shortest(level_count, shortest, longest):
    """Admit an arrival to a shortest buffer (level ``shortest`` + 1 gains a buffer); return the
    new (shortest, longest). The caller checks that shortest < the buffer size b."""
    level = shortest + 1
    level_count[at(level)] += 1
    if level_count[at(level)] == level_count[0]:
        shortest = level
    return shortest, max(longest, level)


@njit
def leave_level(level_count, level, shortest, longest):
    """A departure from a buffer holding ``level`` jobs; return the new (shortest, longest)."""
    remaining = level_count[at(level)] - 1
    level_count[at(level)] = remaining
    if level <= shortest:
        shortest = level - 1
    if level == longest and remaining == 0:  # read on every path: no reference counting
        longest -= 1
    return shortest, longest


@njit
def serving_rank(served_rate, position, busy):
    """The rank r in 1..busy + 1 of the buffer whose server's speed interval holds ``position``:
    the least r with served_rate[r] > position, busy + 1 if none (no departure)."""
    low, high = 1, busy + 1
    while low < high:
        middle = (low + high) // 2
        if served_rate[middle] > position:
            high = middle
        else:
            low = middle + 1
    return low


@njit
def length_of_rank(level_count, longest, rank):
    """Length of the buffer of rank ``rank`` (1 = longest): the greatest level i with Q_i >= rank."""
    low, high = 1, longest
    while low < high:
        middle = (low + high + 1) // 2
        if level_count[middle] >= rank:
            low = middle
        else:
            high = middle - 1
    return low


@njit
def departing_level(served_rate, level_count, longest, position):
    """The length of the buffer whose server's speed interval holds ``position`` (0 <= position <
    served_rate[Q_1]): the buffer of rank r, the least r with served_rate[r] > position, has the
    greatest length i with Q_i >= r, that is with served_rate[Q_i] > position. A scan down from the
    longest length, which takes few steps where a binary search over the ranks takes log2 n
    unpredictable ones; the same length as length_of_rank(serving_rank(...)). Should rounding put
    ``position`` at or past served_rate[Q_1], it takes the rank Q_1 as they do."""
    busy = level_count[1]
    level = longest
    while served_rate[at(level_count[at(level)])] <= position and level_count[at(level)] < busy:
        level -= 1
    return level


@njit
def move_level_area(level_area, level, change, now, warmup):
    """Q_level changes by ``change`` at time ``now``: subtract change * max(now, warmup) from its
    area. With every Q_i = 0 at time 0, int_warmup^T Q_i dt = Q_i(T) T + level_area[i] (the sum of
    the changes before the warm-up is Q_i(warmup), each taken at the warm-up time), so a change
    costs one multiply-add and the time of the last change is not kept."""
    level_area[at(level)] -= change * max(now, warmup)


@njit
def credit_jobs(time_at_jobs, time_at_waiting, jobs, waiting, start, end, warmup):
    """Add the time in [start, end] after ``warmup`` to the bins Q_{+1} = ``jobs`` and
    Q_{+2} = ``waiting``."""
    span = max(end - max(start, warmup), 0.0)
    time_at_jobs[jobs] += span
    time_at_waiting[waiting] += span


@njit
def simulate_bounding(served_rate, arrival_rate, buffer, horizon, warmup, rng):
    """One path of JSQ-FSL or JSQ-SSL from empty buffers (``served_rate`` as in the module doc;
    ``buffer`` = b, INFINITE_BUFFER for none; times in time units).

    Returns (level_area, time_at_jobs, time_at_waiting, counts): the integral over [warmup, horizon]
    of Q_i for each level i, the time spent with Q_{+1} = j and with Q_{+2} = j for each j, and
    (arrivals, lost arrivals, events) after the warm-up.

    The events run in :func:`bounding_events`, which never replaces an array (a replaced array
    would be reference-counted on every event); it stops before an arrival that needs more room,
    and the arrays grow here.
    """
    n_buffers = len(served_rate) - 1
    level_count = np.zeros(INITIAL_LEVELS, dtype=np.int64)
    level_count[0] = n_buffers
    mean_step = 1.0 / (arrival_rate + served_rate)  # the mean time to the next event, by Q_1
    model = BoundingModel(served_rate, mean_step, arrival_rate, buffer, horizon, warmup)
    counters = np.zeros(1, dtype=BOUNDING_COUNTER_DTYPE)
    c = records(counters)[0]
    state = BoundingState(
        counters, level_count, np.zeros(INITIAL_LEVELS), np.zeros(2 * n_buffers + 1), np.zeros(n_buffers + 1)
    )
    while bounding_events(model, state, rng):
        # the room the pending arrival needs, grown as each array fills (doubling)
        level_count, level_area = state.level_count, state.level_area
        time_at_jobs, time_at_waiting = state.time_at_jobs, state.time_at_waiting
        level = c.shortest + 1
        if level + 1 >= len(level_count):
            level_count = with_more_levels(level_count, level + 2)
            level_area = with_more_levels(level_area, level + 2)
        if c.jobs + 1 >= len(time_at_jobs):
            time_at_jobs = with_more_levels(time_at_jobs, c.jobs + 2)
        waiting = c.jobs + 1 - level_count[1] - int(c.shortest == 0)
        if waiting >= len(time_at_waiting):
            time_at_waiting = with_more_levels(time_at_waiting, waiting + 1)
        state = BoundingState(counters, level_count, level_area, time_at_jobs, time_at_waiting)
    level_count, level_area = state.level_count, state.level_area
    for level in range(1, len(level_count)):
        level_area[level] += level_count[level] * horizon
    return level_area, state.time_at_jobs, state.time_at_waiting, np.array([c.arrivals, c.lost, c.events])


@njit(inline="always")
def admit(level_count, level_area, shortest, longest, now, warmup):
    """:func:`join_shortest` with the area of the level it raises (:func:`move_level_area`)."""
    move_level_area(level_area, shortest + 1, 1, now, warmup)
    return join_shortest(level_count, shortest, longest)


@njit(inline="always")
def depart(served_rate, level_count, level_area, shortest, longest, position, now, warmup):
    """A departure at the speed position ``position``: the level it leaves (:func:`departing_level`),
    with that level's area; returns (level, shortest, longest)."""
    level = departing_level(served_rate, level_count, longest, position)
    move_level_area(level_area, level, -1, now, warmup)
    shortest, longest = leave_level(level_count, level, shortest, longest)
    return level, shortest, longest


@njit
def keep_counters(c, now, shortest, longest, jobs, arrivals, lost, events, pending):
    """Write the event loop's locals back to the counters record ``c``; return ``pending``."""
    c.now = now
    c.shortest = shortest
    c.longest = longest
    c.jobs = jobs
    c.arrivals = arrivals
    c.lost = lost
    c.events = events
    c.pending = pending
    return pending


@njit
def bounding_events(model, state, rng):
    """The events of :func:`simulate_bounding` (a :class:`BoundingModel` and a
    :class:`BoundingState`) from its counters on, up to the horizon, or up to an arrival that needs
    longer arrays: it returns True then, with the counters' ``pending`` set, the arrival drawn and
    counted, to be finished by the next call once they have grown.

    Two loops: the events that start before the warm-up's end, which clip their time to it and
    count only from it, then the measured ones, which need neither (max(now, warmup) = now)."""
    served_rate, mean_step, arrival_rate = model.served_rate, model.mean_step, model.arrival_rate
    buffer, horizon, warmup = model.buffer, model.horizon, model.warmup
    level_count, level_area = state.level_count, state.level_area
    time_at_jobs, time_at_waiting = state.time_at_jobs, state.time_at_waiting
    c = records(state.counters)[0]
    now, shortest, longest, jobs = c.now, c.shortest, c.longest, c.jobs
    arrivals, lost, events = c.arrivals, c.lost, c.events
    if c.pending:
        shortest, longest = admit(level_count, level_area, shortest, longest, now, warmup)
        jobs += 1
    while now < warmup:
        busy = level_count[1]
        total_rate = arrival_rate + served_rate[busy]
        next_time = now + rng.exponential() * mean_step[busy]
        if next_time >= horizon:
            credit_jobs(time_at_jobs, time_at_waiting, jobs, jobs - busy, now, horizon, warmup)
            return keep_counters(c, now, shortest, longest, jobs, arrivals, lost, events, False)
        credit_jobs(time_at_jobs, time_at_waiting, jobs, jobs - busy, now, next_time, warmup)
        now = next_time
        measuring = now >= warmup
        events += measuring
        draw = rng.random() * total_rate
        if draw >= arrival_rate:
            _, shortest, longest = depart(
                served_rate, level_count, level_area, shortest, longest, draw - arrival_rate, now, warmup
            )
            jobs -= 1
            continue
        arrivals += measuring
        if shortest == buffer:
            lost += measuring
            continue
        if needs_room(level_count, time_at_jobs, time_at_waiting, shortest, jobs):
            return keep_counters(c, now, shortest, longest, jobs, arrivals, lost, events, True)
        shortest, longest = admit(level_count, level_area, shortest, longest, now, warmup)
        jobs += 1
    # the number of waiting jobs changes on some events only (a departure from a buffer holding two
    # or more, an arrival when no buffer is empty): its bin is held here in between, and written
    # back when it changes, with the same additions in the same order
    waiting = jobs - level_count[1]
    waiting_time = time_at_waiting[waiting]
    while True:  # now >= warmup: every event counts, and its time is credited whole
        busy = level_count[1]
        total_rate = arrival_rate + served_rate[at(busy)]
        next_time = now + rng.exponential() * mean_step[at(busy)]
        if next_time >= horizon:
            time_at_waiting[at(waiting)] = waiting_time
            credit_jobs(time_at_jobs, time_at_waiting, jobs, jobs - busy, now, horizon, warmup)
            return keep_counters(c, now, shortest, longest, jobs, arrivals, lost, events, False)
        span = next_time - now
        time_at_jobs[at(jobs)] += span
        waiting_time += span
        now = next_time
        events += 1
        draw = rng.random() * total_rate
        if draw >= arrival_rate:
            level, shortest, longest = depart(
                served_rate, level_count, level_area, shortest, longest, draw - arrival_rate, now, now
            )
            jobs -= 1
            if level > 1:  # a job leaves the waiting line
                time_at_waiting[at(waiting)] = waiting_time
                waiting -= 1
                waiting_time = time_at_waiting[at(waiting)]
            continue
        arrivals += 1
        if shortest == buffer:
            lost += 1
            continue
        if needs_room(level_count, time_at_jobs, time_at_waiting, shortest, jobs):
            time_at_waiting[at(waiting)] = waiting_time
            return keep_counters(c, now, shortest, longest, jobs, arrivals, lost, events, True)
        if shortest > 0:  # no empty buffer: the job waits
            time_at_waiting[at(waiting)] = waiting_time
            waiting += 1
            waiting_time = time_at_waiting[at(waiting)]
        shortest, longest = admit(level_count, level_area, shortest, longest, now, now)
        jobs += 1


@njit
def needs_room(level_count, time_at_jobs, time_at_waiting, shortest, jobs):
    """Whether an arrival joining a shortest buffer needs longer arrays: the level it raises, and the
    bins of the jobs and waiting jobs it leads to, must exist."""
    level = shortest + 2 >= len(level_count)
    job_bin = jobs + 1 >= len(time_at_jobs)
    waiting_bin = jobs + 1 - level_count[1] - int(shortest == 0) >= len(time_at_waiting)
    return level | job_bin | waiting_bin  # not "or": every array is read on every path


# --- the coupled run -------------------------------------------------------------------------------


@njit
def departing_server(queue_len, speed, longest, position, rate_at_length):
    """The server of a JSQ system whose speed interval holds ``position`` when the busy servers are
    laid end to end longest queue first, ties by index; -1 if ``position`` lies beyond them.
    ``rate_at_length`` is scratch space of at least ``longest`` + 1 entries."""
    rate_at_length[: longest + 1] = 0.0
    for s in range(len(queue_len)):
        rate_at_length[queue_len[s]] += speed[s]
    below = 0.0
    for length in range(longest, 0, -1):
        if position < below + rate_at_length[length]:
            last = -1
            for s in range(len(queue_len)):
                if queue_len[s] == length:
                    below += speed[s]
                    last = s
                    if position < below:
                        return s
            return last
        below += rate_at_length[length]
    return -1


@njit
def sandwich_violations(level_count, longest_level, policy_row, violations, first_violation, now):
    """Compare Q_{+i} of the JSQ system in ``policy_row`` with JSQ-FSL and JSQ-SSL at every level;
    count the events with a violation of the lower bound (column 0) and of the upper bound
    (column 1), and keep the time of the first."""
    fsl, ssl, jsq = 0, 0, 0
    lower_broken, upper_broken = False, False
    for level in range(longest_level, 0, -1):
        fsl += level_count[FSL_ROW, level]
        ssl += level_count[SSL_ROW, level]
        jsq += level_count[policy_row, level]
        lower_broken |= fsl > jsq
        upper_broken |= jsq > ssl
    policy = policy_row - FIRST_POLICY_ROW
    if lower_broken:
        count_violation(violations, first_violation, policy, 0, now)
    if upper_broken:
        count_violation(violations, first_violation, policy, 1, now)


@njit
def count_violation(violations, first_violation, policy, bound, now):
    """One more tick with ``bound`` (0 lower, 1 upper) broken for ``policy``; keep the first time."""
    violations[policy, bound] += 1
    if violations[policy, bound] == 1:
        first_violation[policy, bound] = now


@njit
def run_coupled(
    speed,
    speed_class,
    n_classes,
    fsl_served_rate,
    ssl_served_rate,
    arrival_rate,
    buffer,
    tie_breaks,
    horizon,
    warmup,
    clock_rng,
    tie_rng,
):
    """JSQ-FSL, JSQ-SSL and one JSQ system per entry of ``tie_breaks`` (policy codes, whose
    hetlb.policies.rules.selection_key ranks the servers), from empty, on one uniformised clock
    (module doc); times in time units.

    Returns (violations, first_violation, job_area, waiting_area, counts): per tie-break the number
    of clock ticks after which the lower / upper bound fails at some level and the first such time
    (inf if none); per system (rows FSL, SSL, tie-breaks) the integrals of Q_{+1} and Q_{+2} over
    [warmup, horizon]; and (ticks, arrivals) after the warm-up. ``clock_rng`` draws the clock,
    ``tie_rng`` the random tie-breaks.
    """
    n_servers = len(speed)
    n_policies = len(tie_breaks)
    n_systems = FIRST_POLICY_ROW + n_policies
    total_speed = fsl_served_rate[n_servers]
    clock_rate = arrival_rate + total_speed
    level_count = np.zeros((n_systems, INITIAL_LEVELS), dtype=np.int64)
    level_count[:, 0] = n_servers
    shortest = np.zeros(n_systems, dtype=np.int64)
    longest = np.zeros(n_systems, dtype=np.int64)
    queue_len = np.zeros((n_policies, n_servers), dtype=np.int64)
    key = np.zeros((n_policies, n_servers))
    for p in range(n_policies):
        for s in range(n_servers):
            key[p, s] = selection_key(tie_breaks[p], 0, speed_class[s], n_classes, speed[s], 0.0)
    candidates = np.arange(n_servers)
    ties = np.empty(n_servers, dtype=np.int64)
    rate_at_length = np.zeros(INITIAL_LEVELS)
    violations = np.zeros((n_policies, 2), dtype=np.int64)
    first_violation = np.full((n_policies, 2), np.inf)
    job_area = np.zeros(n_systems)
    waiting_area = np.zeros(n_systems)
    jobs = np.zeros(n_systems, dtype=np.int64)
    ticks, arrivals = 0, 0
    now = 0.0
    while True:
        next_time = now + clock_rng.exponential() / clock_rate
        span = min(next_time, horizon) - max(now, warmup)
        if span > 0:
            for row in range(n_systems):
                job_area[row] += jobs[row] * span
                waiting_area[row] += (jobs[row] - level_count[row, 1]) * span
        if next_time >= horizon:
            break
        now = next_time
        measuring = now >= warmup
        ticks += measuring
        draw = clock_rng.random() * clock_rate
        if draw < arrival_rate:
            arrivals += measuring
            if shortest.max() + 2 >= level_count.shape[1]:
                level_count = with_more_levels(level_count, shortest.max() + 3)
                rate_at_length = with_more_levels(rate_at_length, shortest.max() + 3)
            for row in range(n_systems):
                if shortest[row] == buffer:
                    continue
                if row >= FIRST_POLICY_ROW:
                    p = row - FIRST_POLICY_ROW
                    s, _ = least_key_server(candidates, 0, n_servers, key[p], ties, tie_rng)
                    queue_len[p, s] += 1
                    key[p, s] = selection_key(tie_breaks[p], queue_len[p, s], speed_class[s], n_classes, speed[s], now)
                shortest[row], longest[row] = join_shortest(level_count[row], shortest[row], longest[row])
                jobs[row] += 1
        else:
            position = draw - arrival_rate
            for row in range(n_systems):
                if row >= FIRST_POLICY_ROW:
                    p = row - FIRST_POLICY_ROW
                    s = departing_server(queue_len[p], speed, longest[row], position, rate_at_length)
                    if s < 0:
                        continue
                    level = queue_len[p, s]
                    queue_len[p, s] -= 1
                    key[p, s] = selection_key(tie_breaks[p], queue_len[p, s], speed_class[s], n_classes, speed[s], now)
                else:
                    served_rate = fsl_served_rate if row == FSL_ROW else ssl_served_rate
                    rank = serving_rank(served_rate, position, level_count[row, 1])
                    if rank > level_count[row, 1]:
                        continue
                    level = length_of_rank(level_count[row], longest[row], rank)
                shortest[row], longest[row] = leave_level(level_count[row], level, shortest[row], longest[row])
                jobs[row] -= 1
        deepest = longest.max()
        for row in range(FIRST_POLICY_ROW, n_systems):
            sandwich_violations(level_count, deepest, row, violations, first_violation, now)
    return violations, first_violation, job_area, waiting_area, np.array([ticks, arrivals])
