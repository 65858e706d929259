"""A slow, obvious discrete-event simulator used as a test oracle for hetlb.

It is written for clarity, not speed: plain Python, a ``heapq`` event list and one
``numpy.random.Generator`` for sampling. It shares no code with ``hetlb`` so that the two can be
compared against each other.

Model (continuous time: paper 000 section 3 and docs/reference/policies.md):

- ``n`` servers; server ``s`` has speed ``speed[s] > 0`` and its own FCFS queue whose buffer
  ``buffer[s]`` counts the job in service (``None`` or ``math.inf`` means infinite).
- Job type ``k`` arrives as an independent Poisson stream of rate ``arrival_rate[k]`` and may only
  be sent to a server in ``compat[k]``.
- A job's size (mean 1) is drawn at arrival; its service time at server ``s`` is
  ``size / speed[s]``.
- On arrival the policy picks one compatible server from the current queue lengths ``q``
  (``q[s]`` counts the job in service) and the speeds. If that server already holds ``buffer[s]``
  jobs, the job is lost (blocked). Policies never look at free buffer space.

Statistics: jobs that arrive at or after ``warmup`` are counted; time averages are taken over
``[warmup, horizon]``; the run stops at ``horizon``.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import deque
from dataclasses import dataclass

import numpy as np

POLICIES = (
    "random",
    "weighted-random",
    "jsq",
    "jfsq",
    "jssq",
    "jiq",
    "jfiq",
    "jsq-fiq",
    "pod",
    "sed",
)

SIZE_DISTS = ("exponential", "deterministic", "hyperexponential")

ARRIVAL = 0
DEPARTURE = 1


# --------------------------------------------------------------------------------------------
# Job sizes
# --------------------------------------------------------------------------------------------


def h2_parameters(scv):
    """Balanced-means two-phase hyperexponential with mean 1 and squared coefficient ``scv``.

    Returns ``(p1, rate1, p2, rate2)``: with probability ``p1`` the size is Exp(rate1), otherwise
    Exp(rate2). Each phase carries half of the mean: p1 / rate1 = p2 / rate2 = 1/2.
    """
    p1 = (1.0 + math.sqrt((scv - 1.0) / (scv + 1.0))) / 2.0
    p2 = 1.0 - p1
    return p1, 2.0 * p1, p2, 2.0 * p2


def draw_size(size_dist, scv, rng):
    """One job size with mean 1."""
    if size_dist == "exponential":
        return rng.exponential(1.0)
    if size_dist == "deterministic":
        return 1.0
    if size_dist == "hyperexponential":
        p1, rate1, p2, rate2 = h2_parameters(scv)
        if rng.random() < p1:
            return rng.exponential(1.0 / rate1)
        return rng.exponential(1.0 / rate2)
    raise ValueError(f"unknown size_dist {size_dist!r}; valid choices: {', '.join(SIZE_DISTS)}")


# --------------------------------------------------------------------------------------------
# Policies
# --------------------------------------------------------------------------------------------


def uniform_choice(candidates, rng):
    """One element of the list ``candidates``, uniformly at random."""
    return candidates[rng.integers(len(candidates))]


def shortest(candidates, q):
    """The servers of ``candidates`` with the smallest queue length."""
    best = min(q[s] for s in candidates)
    return [s for s in candidates if q[s] == best]


def fastest(candidates, speed):
    """The servers of ``candidates`` with the largest speed."""
    best = max(speed[s] for s in candidates)
    return [s for s in candidates if speed[s] == best]


def slowest(candidates, speed):
    """The servers of ``candidates`` with the smallest speed."""
    best = min(speed[s] for s in candidates)
    return [s for s in candidates if speed[s] == best]


def idle(candidates, q):
    """The servers of ``candidates`` with an empty queue."""
    return [s for s in candidates if q[s] == 0]


def choose_server(policy, candidates, q, speed, rng, d=2):
    """The server chosen by ``policy`` for a job that may use the servers in ``candidates``.

    ``q[s]`` is the number of jobs at server ``s`` (including the one in service) and
    ``speed[s]`` its speed. Ties broken "at random" are broken uniformly among the tied servers.
    """
    candidates = list(candidates)

    if policy == "random":
        return uniform_choice(candidates, rng)

    if policy == "weighted-random":
        weights = np.array([speed[s] for s in candidates], dtype=float)
        index = rng.choice(len(candidates), p=weights / weights.sum())
        return candidates[index]

    if policy == "jsq":
        return uniform_choice(shortest(candidates, q), rng)

    if policy == "jfsq":
        return uniform_choice(fastest(shortest(candidates, q), speed), rng)

    if policy == "jssq":
        return uniform_choice(slowest(shortest(candidates, q), speed), rng)

    if policy == "jiq":
        idle_servers = idle(candidates, q)
        if idle_servers:
            return uniform_choice(idle_servers, rng)
        return uniform_choice(candidates, rng)

    if policy == "jfiq":
        idle_servers = idle(candidates, q)
        if idle_servers:
            return uniform_choice(fastest(idle_servers, speed), rng)
        return uniform_choice(candidates, rng)

    if policy == "jsq-fiq":
        idle_servers = idle(candidates, q)
        if idle_servers:
            return uniform_choice(fastest(idle_servers, speed), rng)
        return uniform_choice(shortest(candidates, q), rng)

    if policy == "pod":
        n_sampled = min(d, len(candidates))
        picks = rng.choice(len(candidates), size=n_sampled, replace=False)
        sampled = [candidates[i] for i in picks]
        return uniform_choice(shortest(sampled, q), rng)

    if policy == "sed":
        expected_delay = {s: (q[s] + 1) / speed[s] for s in candidates}
        best = min(expected_delay.values())
        return uniform_choice([s for s in candidates if expected_delay[s] == best], rng)

    raise ValueError(f"unknown policy {policy!r}; valid choices: {', '.join(POLICIES)}")


# --------------------------------------------------------------------------------------------
# Simulation
# --------------------------------------------------------------------------------------------


@dataclass
class Job:
    arrival_time: float
    size: float
    counted: bool
    batch: int
    service_start: float = math.nan


def _buffer_list(buffer, n_servers):
    """Per-server buffer sizes as a list of numbers, ``math.inf`` for an infinite buffer."""
    if buffer is None or np.isscalar(buffer):
        buffer = [buffer] * n_servers
    buffer = [math.inf if b is None else b for b in buffer]
    if len(buffer) != n_servers:
        raise ValueError(f"buffer has {len(buffer)} entries, expected {n_servers} (one per server)")
    for b in buffer:
        if not (b == math.inf or (float(b).is_integer() and b >= 1)):
            raise ValueError(f"buffer sizes must be integers >= 1 or None/inf, got {b!r}")
    return buffer


def simulate_reference(
    speed,
    arrival_rate,
    compat,
    buffer,
    policy,
    *,
    d=2,
    size_dist="exponential",
    scv=1.0,
    horizon,
    warmup=0.0,
    seed=0,
    batches=20,
):
    """Simulate the system on ``[0, horizon]``, starting empty, and return its statistics.

    Parameters
    ----------
    speed : sequence of float
        ``speed[s] > 0``, the service speed of server ``s``.
    arrival_rate : sequence of float
        ``arrival_rate[k] >= 0``, the Poisson arrival rate of job type ``k``.
    compat : sequence of sequences of int
        ``compat[k]``, the servers a type-``k`` job may use (non-empty).
    buffer : None, number, or sequence
        Per-server buffer size counting the job in service; ``None`` or ``math.inf`` is infinite.
        A scalar applies to every server.
    policy : str
        One of ``POLICIES``.
    d : int
        Number of servers sampled by ``pod``.
    size_dist : str
        One of ``SIZE_DISTS``; every distribution has mean 1.
    scv : float
        Squared coefficient of variation of the hyperexponential (>= 1).
    horizon, warmup : float
        The run stops at ``horizon``; jobs arriving at or after ``warmup`` are counted and time
        averages are over ``[warmup, horizon]``.
    seed : int or numpy.random.SeedSequence
        Seed of the ``numpy.random.Generator``.
    batches : int
        Number of equal slices of ``[warmup, horizon]`` for ``batch_response_means``.

    Returns
    -------
    dict with keys ``mean_response_time``, ``mean_waiting_time``, ``p_wait``,
    ``blocking_probability``, ``mean_number_in_system``, ``utilisation`` (array per server),
    ``arrivals``, ``admitted``, ``blocked``, ``departures``, ``in_system_at_end`` (whole run),
    ``counted_arrivals``, ``counted_admitted``, ``counted_blocked``, ``counted_completed``,
    ``batch_response_means`` and ``batch_waiting_means`` (arrays of length ``batches``, NaN for
    an empty batch), ``batch_counts`` (completed counted jobs per batch), and ``events`` (number
    of events processed).
    """
    # ---- validation ------------------------------------------------------------------------
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; valid choices: {', '.join(POLICIES)}")
    if size_dist not in SIZE_DISTS:
        raise ValueError(f"unknown size_dist {size_dist!r}; valid choices: {', '.join(SIZE_DISTS)}")
    speed = [float(x) for x in speed]
    arrival_rate = [float(x) for x in arrival_rate]
    compat = [[int(s) for s in servers] for servers in compat]
    n_servers = len(speed)
    n_types = len(arrival_rate)
    if n_servers == 0 or any(not x > 0 for x in speed):
        raise ValueError("speed must be a non-empty list of positive numbers")
    if any(not x >= 0 for x in arrival_rate):
        raise ValueError("arrival rates must be >= 0")
    if len(compat) != n_types:
        raise ValueError(f"compat has {len(compat)} entries, expected {n_types} (one per type)")
    for k, servers in enumerate(compat):
        if not servers or any(not 0 <= s < n_servers for s in servers):
            raise ValueError(f"compat[{k}] must be a non-empty list of server indices")
        if len(set(servers)) != len(servers):
            raise ValueError(f"compat[{k}] has repeated servers")
    buffer = _buffer_list(buffer, n_servers)
    if size_dist == "hyperexponential" and not scv >= 1.0:
        raise ValueError(f"scv must be >= 1 for the hyperexponential, got {scv}")
    if not (0.0 <= warmup < horizon):
        raise ValueError("need 0 <= warmup < horizon")
    if int(batches) != batches or batches < 1:
        raise ValueError("batches must be an integer >= 1")
    if int(d) != d or d < 1:
        raise ValueError("d must be an integer >= 1")
    batches = int(batches)
    d = int(d)

    rng = np.random.default_rng(seed)
    batch_length = (horizon - warmup) / batches

    # ---- state -----------------------------------------------------------------------------
    queues = [deque() for _ in range(n_servers)]  # queues[s][0] is the job in service
    events = []  # heap of (time, tie_breaker, kind, type or server)
    tie_breaker = itertools.count()
    clock = 0.0

    # ---- statistics --------------------------------------------------------------------------
    arrivals = admitted = blocked = departures = 0
    counted_arrivals = counted_admitted = counted_blocked = counted_completed = 0
    counted_found_busy = 0
    sum_response = sum_waiting = 0.0
    batch_sum_response = [0.0] * batches
    batch_sum_waiting = [0.0] * batches
    batch_count = [0] * batches
    area_in_system = 0.0  # integral over [warmup, horizon] of the number of jobs
    area_busy = [0.0] * n_servers  # integral over [warmup, horizon] of 1{q_s >= 1}
    n_events = 0

    def advance_clock(new_time):
        """Add the state held on [clock, new_time], clipped to [warmup, horizon], to the areas."""
        nonlocal clock, area_in_system
        start = max(clock, warmup)
        end = min(new_time, horizon)
        if end > start:
            length = end - start
            area_in_system += length * sum(len(queue) for queue in queues)
            for s in range(n_servers):
                if len(queues[s]) >= 1:
                    area_busy[s] += length
        clock = new_time

    def schedule(time, kind, who):
        heapq.heappush(events, (time, next(tie_breaker), kind, who))

    def start_service(s, now):
        job = queues[s][0]
        job.service_start = now
        schedule(now + job.size / speed[s], DEPARTURE, s)

    # ---- event loop --------------------------------------------------------------------------
    for k in range(n_types):
        if arrival_rate[k] > 0:
            schedule(rng.exponential(1.0 / arrival_rate[k]), ARRIVAL, k)

    while events and events[0][0] <= horizon:
        now, _, kind, who = heapq.heappop(events)
        advance_clock(now)
        n_events += 1

        if kind == ARRIVAL:
            k = who
            schedule(now + rng.exponential(1.0 / arrival_rate[k]), ARRIVAL, k)

            size = draw_size(size_dist, scv, rng)
            q = [len(queue) for queue in queues]
            s = choose_server(policy, compat[k], q, speed, rng, d)

            counted = now >= warmup
            batch = min(int((now - warmup) / batch_length), batches - 1) if counted else -1
            arrivals += 1
            if counted:
                counted_arrivals += 1

            if q[s] >= buffer[s]:
                blocked += 1
                if counted:
                    counted_blocked += 1
                continue

            admitted += 1
            if counted:
                counted_admitted += 1
                if q[s] >= 1:
                    counted_found_busy += 1
            queues[s].append(Job(arrival_time=now, size=size, counted=counted, batch=batch))
            if len(queues[s]) == 1:
                start_service(s, now)

        else:  # DEPARTURE
            s = who
            job = queues[s].popleft()
            departures += 1
            if job.counted:
                response = now - job.arrival_time
                waiting = job.service_start - job.arrival_time
                counted_completed += 1
                sum_response += response
                sum_waiting += waiting
                batch_sum_response[job.batch] += response
                batch_sum_waiting[job.batch] += waiting
                batch_count[job.batch] += 1
            if queues[s]:
                start_service(s, now)

    advance_clock(horizon)

    # ---- results -------------------------------------------------------------------------
    def ratio(numerator, denominator):
        return numerator / denominator if denominator > 0 else math.nan

    duration = horizon - warmup
    return {
        "mean_response_time": ratio(sum_response, counted_completed),
        "mean_waiting_time": ratio(sum_waiting, counted_completed),
        "p_wait": ratio(counted_found_busy, counted_admitted),
        "blocking_probability": ratio(counted_blocked, counted_arrivals),
        "mean_number_in_system": area_in_system / duration,
        "utilisation": np.array(area_busy) / duration,
        "arrivals": arrivals,
        "admitted": admitted,
        "blocked": blocked,
        "departures": departures,
        "in_system_at_end": sum(len(queue) for queue in queues),
        "counted_arrivals": counted_arrivals,
        "counted_admitted": counted_admitted,
        "counted_blocked": counted_blocked,
        "counted_completed": counted_completed,
        "batch_response_means": np.array([ratio(batch_sum_response[b], batch_count[b]) for b in range(batches)]),
        "batch_waiting_means": np.array([ratio(batch_sum_waiting[b], batch_count[b]) for b in range(batches)]),
        "batch_counts": np.array(batch_count),
        "events": n_events,
    }
