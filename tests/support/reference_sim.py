"""A slow, obvious discrete-event simulator used as a test oracle for hetlb.

It is written for clarity, not speed: plain Python, a ``heapq`` event list and one
``numpy.random.Generator`` for sampling. It shares no code with ``hetlb`` so that the two can be
compared against each other.

Model (continuous time: paper 000 section 3, docs/reference/policies.md and the batch servers'
model written out in reference_model.py):

- ``n`` servers; server ``s`` has speed ``speed[s] > 0``, concurrency ``c_s`` (``concurrency``,
  default 1) and a rate curve ``phi_s`` (``rate_curve``, default ``independent``). Its buffer
  ``buffer[s]`` counts every job at ``s``, in service or waiting (``None`` or ``math.inf`` means
  infinite).
- With ``n_s`` jobs at ``s``, the ``b = min(n_s, c_s)`` earliest arrived are in service, each
  receiving work at rate ``mu_s phi_s(b) / b``; the others wait in FIFO order. A job leaves when it
  has received its size in work; the finishing times are recomputed whenever ``b`` changes. With
  ``c_s = 1`` this is the FCFS server of the papers (service time ``size / speed[s]``).
- Job type ``k`` has rate ``arrival_rate[k]`` and may only be sent to a server in ``compat[k]``.
  ``arrivals="poisson"``: independent Poisson streams. ``"batch:mean=B"``: batches at Poisson
  epochs of rate lambda / B (lambda the total rate), geometric sizes of mean B, each job drawing its
  own type (probability ``arrival_rate[k] / lambda``) and routed in turn at the same instant.
  ``"mmpp:ratio=R,on=T1,off=T2"``: one stream modulated by a two-phase Markov chain (sojourn means
  T1 on, T2 off; rate on = R rate off; long-run rate lambda; stationary initial phase), each job
  drawing its type as for batches.
- A job's size (mean 1) is drawn at arrival.
- On arrival the policy picks one compatible server from the current numbers of jobs ``q`` and the
  servers (speed, concurrency, curve). If that server already holds ``buffer[s]`` jobs, the job is
  lost (blocked). Policies never look at free buffer space.

Statistics: jobs that arrive at or after ``warmup`` are counted; time averages are taken over
``[warmup, horizon]``; the run stops at ``horizon``.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import math
from collections import deque
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special

from support.reference_model import Arrivals, make_servers

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
    "jlu",
    "lew",
)

SIZE_DISTS = ("exponential", "deterministic", "hyperexponential", "lognormal", "pareto", "weibull", "empirical")

ARRIVAL = 0
DEPARTURE = 1
PHASE_CHANGE = 2


# --------------------------------------------------------------------------------------------
# Job sizes (every law has mean 1)
# --------------------------------------------------------------------------------------------


def h2_parameters(scv):
    """Balanced-means two-phase hyperexponential with mean 1 and squared coefficient ``scv``.

    Returns ``(p1, rate1, p2, rate2)``: with probability ``p1`` the size is Exp(rate1), otherwise
    Exp(rate2). Each phase carries half of the mean: p1 / rate1 = p2 / rate2 = 1/2.
    """
    p1 = (1.0 + math.sqrt((scv - 1.0) / (scv + 1.0))) / 2.0
    p2 = 1.0 - p1
    return p1, 2.0 * p1, p2, 2.0 * p2


def lognormal_parameters(scv):
    """``(m, sigma)`` of the lognormal exp(N(m, sigma^2)) with mean 1: sigma^2 = ln(1 + scv), m = -sigma^2 / 2."""
    sigma2 = math.log1p(scv)
    return -sigma2 / 2.0, math.sqrt(sigma2)


def pareto_parameters(scv):
    """``(shape a, scale x_m)`` of the type-I Pareto with mean 1: a = 1 + sqrt(1 + 1/scv), x_m = (a - 1)/a."""
    shape = 1.0 + math.sqrt(1.0 + 1.0 / scv)
    return shape, (shape - 1.0) / shape


@functools.cache
def weibull_parameters(scv):
    """``(shape k, scale)`` of the Weibull with mean 1: Gamma(1+2/k)/Gamma(1+1/k)^2 - 1 = scv, scale 1/Gamma(1+1/k)."""

    def excess(log_k):
        k = math.exp(log_k)
        return math.exp(special.gammaln(1 + 2 / k) - 2 * special.gammaln(1 + 1 / k)) - 1.0 - scv

    shape = math.exp(optimize.brentq(excess, math.log(0.05), math.log(200.0), xtol=1e-14))
    return shape, 1.0 / math.gamma(1.0 + 1.0 / shape)


def empirical_table(sizes):
    """The sizes of an empirical law, scaled to mean 1 (positive numbers)."""
    sizes = np.asarray(sizes, dtype=float)
    if sizes.size == 0 or not np.all(sizes > 0):
        raise ValueError("empirical sizes must be a non-empty list of positive numbers")
    return sizes / sizes.mean()


def draw_size(size_dist, scv, rng, empirical=None):
    """One job size with mean 1; ``empirical`` is the mean-1 table of ``empirical_table``."""
    if size_dist == "exponential":
        return rng.exponential(1.0)
    if size_dist == "deterministic":
        return 1.0
    if size_dist == "hyperexponential":
        p1, rate1, p2, rate2 = h2_parameters(scv)
        if rng.random() < p1:
            return rng.exponential(1.0 / rate1)
        return rng.exponential(1.0 / rate2)
    if size_dist == "lognormal":
        m, sigma = lognormal_parameters(scv)
        return rng.lognormal(m, sigma)
    if size_dist == "pareto":
        shape, scale = pareto_parameters(scv)
        return scale / (1.0 - rng.random()) ** (1.0 / shape)  # inverse of P(X > x) = (x_m / x)^a
    if size_dist == "weibull":
        shape, scale = weibull_parameters(scv)
        return scale * (-math.log(1.0 - rng.random())) ** (1.0 / shape)
    if size_dist == "empirical":
        return float(empirical[rng.integers(len(empirical))])
    raise ValueError(f"unknown size_dist {size_dist!r}; valid choices: {', '.join(SIZE_DISTS)}")


def size_second_moment(size_dist, scv, empirical=None):
    """E[X^2] of the mean-1 law: 1 + scv (1 for deterministic; the table's for empirical)."""
    if size_dist == "deterministic":
        return 1.0
    if size_dist == "exponential":
        return 2.0
    if size_dist == "empirical":
        return float(np.mean(empirical_table(empirical) ** 2))
    return 1.0 + scv


# --------------------------------------------------------------------------------------------
# Policies
# --------------------------------------------------------------------------------------------


def uniform_choice(candidates, rng):
    """One element of the list ``candidates``, uniformly at random."""
    return candidates[rng.integers(len(candidates))]


def least(candidates, key):
    """The servers of ``candidates`` with the smallest ``key[s]``."""
    best = min(key[s] for s in candidates)
    return [s for s in candidates if key[s] == best]


def shortest(candidates, q):
    """The servers of ``candidates`` with the smallest queue length."""
    return least(candidates, q)


def fastest(candidates, speed):
    """The servers of ``candidates`` with the largest ``speed[s]`` (a speed or the new job's rate)."""
    best = max(speed[s] for s in candidates)
    return [s for s in candidates if speed[s] == best]


def slowest(candidates, speed):
    """The servers of ``candidates`` with the smallest ``speed[s]`` (a speed or the new job's rate)."""
    return least(candidates, speed)


def idle(candidates, q, servers=None):
    """The servers of ``candidates`` with a free slot (q < c; an empty queue when c = 1)."""
    if servers is None:
        return [s for s in candidates if q[s] == 0]
    return [s for s in candidates if servers[s].has_free_slot(q[s])]


def choose_server(policy, candidates, q, speed, rng, d=2, servers=None):
    """The server chosen by ``policy`` for a job that may use the servers in ``candidates``.

    ``q[s]`` is the number of jobs at server ``s`` (in service and waiting) and ``speed[s]`` its
    speed; ``servers`` (a list of ``reference_model.Server``, default: one slot each) adds the
    concurrency and the rate curve. "Idle" is a free slot (q < c), "fastest" / "slowest" compare
    the rate the new job would receive, mu phi(b') / b' with b' = min(q + 1, c), and sed minimises
    (q + 1) / (mu phi(min(q + 1, c))); with c = 1 these are the papers' definitions. ``jlu``
    minimises q / c, ``lew`` q / (mu phi(c)). Ties broken "at random" are broken uniformly among
    the tied servers.
    """
    candidates = list(candidates)
    if servers is None:
        servers = make_servers(speed)
    new_job_rate = {s: servers[s].new_job_rate(q[s]) for s in candidates}

    if policy == "random":
        return uniform_choice(candidates, rng)

    if policy == "weighted-random":  # weights: the capacities mu phi(c), the speeds when c = 1
        weights = np.array([servers[s].full_capacity() for s in candidates], dtype=float)
        index = rng.choice(len(candidates), p=weights / weights.sum())
        return candidates[index]

    if policy == "jsq":
        return uniform_choice(shortest(candidates, q), rng)

    if policy == "jfsq":
        return uniform_choice(fastest(shortest(candidates, q), new_job_rate), rng)

    if policy == "jssq":
        return uniform_choice(slowest(shortest(candidates, q), new_job_rate), rng)

    if policy == "jiq":
        idle_servers = idle(candidates, q, servers)
        if idle_servers:
            return uniform_choice(idle_servers, rng)
        return uniform_choice(candidates, rng)

    if policy == "jfiq":
        idle_servers = idle(candidates, q, servers)
        if idle_servers:
            return uniform_choice(fastest(idle_servers, new_job_rate), rng)
        return uniform_choice(candidates, rng)

    if policy == "jsq-fiq":
        idle_servers = idle(candidates, q, servers)
        if idle_servers:
            return uniform_choice(fastest(idle_servers, new_job_rate), rng)
        return uniform_choice(shortest(candidates, q), rng)

    if policy == "pod":
        n_sampled = min(d, len(candidates))
        picks = rng.choice(len(candidates), size=n_sampled, replace=False)
        sampled = [candidates[i] for i in picks]
        return uniform_choice(shortest(sampled, q), rng)

    if policy == "sed":
        return uniform_choice(least(candidates, {s: servers[s].expected_delay(q[s]) for s in candidates}), rng)

    if policy == "jlu":
        return uniform_choice(least(candidates, {s: servers[s].utilisation_key(q[s]) for s in candidates}), rng)

    if policy == "lew":
        return uniform_choice(least(candidates, {s: servers[s].expected_work_key(q[s]) for s in candidates}), rng)

    raise ValueError(f"unknown policy {policy!r}; valid choices: {', '.join(POLICIES)}")


# --------------------------------------------------------------------------------------------
# Simulation
# --------------------------------------------------------------------------------------------


@dataclass(eq=False)
class Job:
    arrival_time: float
    size: float
    counted: bool
    batch: int
    remaining: float = math.nan  # work still to receive; kept exact only up to the server's last update
    service_start: float = math.nan


class ServerState:
    """The jobs at one server, oldest first; the first ``b = min(n, c)`` are in service."""

    def __init__(self, server):
        self.server = server
        self.jobs = deque()
        self.last_update = 0.0  # time up to which the in-service jobs' ``remaining`` is exact
        self.version = 0  # departure events of older versions are stale
        self.next_to_leave = None

    def in_service(self):
        return list(itertools.islice(self.jobs, self.server.in_service(len(self.jobs))))

    def per_job_rate(self):
        """mu phi(b) / b, the rate at which each job in service receives work."""
        b = self.server.in_service(len(self.jobs))
        return self.server.speed * self.server.curve.phi(b) / b

    def settle(self, now):
        """Credit the jobs in service with the work received on [last_update, now]."""
        if self.jobs and now > self.last_update:
            work = self.per_job_rate() * (now - self.last_update)
            for job in self.in_service():
                job.remaining -= work
        self.last_update = now


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
    concurrency=None,
    rate_curve=None,
    arrivals="poisson",
    empirical_sizes=None,
):
    """Simulate the system on ``[0, horizon]``, starting empty, and return its statistics.

    Parameters
    ----------
    speed : sequence of float
        ``speed[s] > 0``, the service speed of server ``s``.
    arrival_rate : sequence of float
        ``arrival_rate[k] >= 0``, the arrival rate of job type ``k``.
    compat : sequence of sequences of int
        ``compat[k]``, the servers a type-``k`` job may use (non-empty).
    buffer : None, number, or sequence
        Per-server buffer size counting the jobs in service; ``None`` or ``math.inf`` is infinite.
        A scalar applies to every server.
    policy : str
        One of ``POLICIES``.
    d : int
        Number of servers sampled by ``pod``.
    size_dist : str
        One of ``SIZE_DISTS``; every distribution has mean 1.
    scv : float
        Squared coefficient of variation (hyperexponential: >= 1; lognormal, pareto, weibull: > 0).
    horizon, warmup : float
        The run stops at ``horizon``; jobs arriving at or after ``warmup`` are counted and time
        averages are over ``[warmup, horizon]``.
    seed : int or numpy.random.SeedSequence
        Seed of the ``numpy.random.Generator``.
    batches : int
        Number of equal slices of ``[warmup, horizon]`` for ``batch_response_means``.
    concurrency : None, int, math.inf, or sequence
        Per-server concurrency c_s (scalar for all; default 1).
    rate_curve : None, str, Curve, callable, or sequence
        Per-server rate curve phi_s (``"independent"``, ``"shared"``, ``"saturating:alpha=A"``,
        ``"table:v1,..."``, a ``reference_model.Curve`` or a callable phi(b)); default independent.
    arrivals : str
        ``"poisson"``, ``"batch:mean=B"`` or ``"mmpp:ratio=R,on=T1,off=T2"``.
    empirical_sizes : sequence of float
        The sizes of ``size_dist="empirical"`` (scaled to mean 1, drawn uniformly).

    Returns
    -------
    dict with keys ``mean_response_time``, ``mean_waiting_time`` (time before entering service),
    ``p_wait`` (admitted counted jobs that found no free slot), ``blocking_probability``,
    ``mean_number_in_system``, ``throughput`` (departures in ``[warmup, horizon]`` per unit time),
    ``utilisation`` (array per server: the fraction of time with at least one job),
    ``mean_busy_slots`` (array per server: time-average of b), ``arrivals``, ``admitted``,
    ``blocked``, ``departures``, ``in_system_at_end`` (whole run), ``counted_arrivals``,
    ``counted_admitted``, ``counted_blocked``, ``counted_completed``, ``batch_response_means`` and
    ``batch_waiting_means`` (arrays of length ``batches``, NaN for an empty batch),
    ``batch_counts`` (completed counted jobs per batch), and ``events`` (number of events
    processed).
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
    if size_dist in ("lognormal", "pareto", "weibull") and not scv > 0.0:
        raise ValueError(f"scv must be > 0 for the {size_dist} law, got {scv}")
    empirical = empirical_table(empirical_sizes) if size_dist == "empirical" else None
    if not (0.0 <= warmup < horizon):
        raise ValueError("need 0 <= warmup < horizon")
    if int(batches) != batches or batches < 1:
        raise ValueError("batches must be an integer >= 1")
    if int(d) != d or d < 1:
        raise ValueError("d must be an integer >= 1")
    batches = int(batches)
    d = int(d)
    servers = make_servers(speed, concurrency, rate_curve)
    arrival_process = Arrivals.parse(arrivals)
    total_rate = sum(arrival_rate)
    type_probabilities = np.array(arrival_rate) / total_rate if total_rate > 0 else None

    rng = np.random.default_rng(seed)
    batch_length = (horizon - warmup) / batches

    # ---- state -----------------------------------------------------------------------------
    states = [ServerState(server) for server in servers]
    events = []  # heap of (time, tie_breaker, kind, who)
    tie_breaker = itertools.count()
    clock = 0.0
    phase_on = False  # the mmpp phase
    arrival_version = 0  # mmpp arrival events of older versions are stale

    # ---- statistics --------------------------------------------------------------------------
    arrivals_seen = admitted = blocked = departures = 0
    counted_arrivals = counted_admitted = counted_blocked = counted_completed = 0
    counted_found_busy = 0
    window_departures = 0
    sum_response = sum_waiting = 0.0
    batch_sum_response = [0.0] * batches
    batch_sum_waiting = [0.0] * batches
    batch_count = [0] * batches
    area_in_system = 0.0  # integral over [warmup, horizon] of the number of jobs
    area_busy = [0.0] * n_servers  # integral over [warmup, horizon] of 1{q_s >= 1}
    area_slots = [0.0] * n_servers  # integral over [warmup, horizon] of b_s
    n_events = 0

    def advance_clock(new_time):
        """Add the state held on [clock, new_time], clipped to [warmup, horizon], to the areas."""
        nonlocal clock, area_in_system
        start = max(clock, warmup)
        end = min(new_time, horizon)
        if end > start:
            length = end - start
            area_in_system += length * sum(len(state.jobs) for state in states)
            for s in range(n_servers):
                if len(states[s].jobs) >= 1:
                    area_busy[s] += length
                    area_slots[s] += length * servers[s].in_service(len(states[s].jobs))
        clock = new_time

    def schedule(time, kind, who):
        heapq.heappush(events, (time, next(tie_breaker), kind, who))

    def schedule_departure(s, now):
        """After a change of the jobs in service at ``s``, schedule the next one to finish."""
        state = states[s]
        state.version += 1
        in_service = state.in_service()
        for job in in_service:
            if math.isnan(job.service_start):
                job.service_start = now
                job.remaining = job.size
        if not in_service:
            state.next_to_leave = None
            return
        job = min(in_service, key=lambda j: j.remaining)
        state.next_to_leave = job
        schedule(now + max(job.remaining, 0.0) / state.per_job_rate(), DEPARTURE, (s, state.version))

    def route(k, now):
        """Draw a type-``k`` job's size, route it and admit or block it."""
        nonlocal arrivals_seen, admitted, blocked, counted_arrivals, counted_admitted
        nonlocal counted_blocked, counted_found_busy
        size = draw_size(size_dist, scv, rng, empirical)
        q = [len(state.jobs) for state in states]
        s = choose_server(policy, compat[k], q, speed, rng, d, servers)

        counted = now >= warmup
        batch = min(int((now - warmup) / batch_length), batches - 1) if counted else -1
        arrivals_seen += 1
        if counted:
            counted_arrivals += 1

        if q[s] >= buffer[s]:
            blocked += 1
            if counted:
                counted_blocked += 1
            return

        admitted += 1
        if counted:
            counted_admitted += 1
            if not servers[s].has_free_slot(q[s]):
                counted_found_busy += 1
        state = states[s]
        starts_service = servers[s].has_free_slot(q[s])
        if starts_service:
            state.settle(now)  # b grows: the rate of the jobs in service changes
        state.jobs.append(Job(arrival_time=now, size=size, counted=counted, batch=batch))
        if starts_service:
            schedule_departure(s, now)

    def draw_type():
        return 0 if n_types == 1 else int(rng.choice(n_types, p=type_probabilities))

    def schedule_modulated_arrival(now):
        """The next arrival of the single stream of batch epochs or of the mmpp's current phase."""
        nonlocal arrival_version
        arrival_version += 1
        if arrival_process.kind == "batch":
            rate = total_rate / arrival_process.mean_batch
        else:
            rate_on, rate_off = arrival_process.phase_rates(total_rate)
            rate = rate_on if phase_on else rate_off
        schedule(now + rng.exponential(1.0 / rate), ARRIVAL, arrival_version)

    def schedule_phase_change(now):
        schedule(now + rng.exponential(arrival_process.on if phase_on else arrival_process.off), PHASE_CHANGE, None)

    # ---- event loop --------------------------------------------------------------------------
    if arrival_process.kind == "poisson":
        for k in range(n_types):
            if arrival_rate[k] > 0:
                schedule(rng.exponential(1.0 / arrival_rate[k]), ARRIVAL, k)
    elif total_rate > 0:
        if arrival_process.kind == "mmpp":
            phase_on = bool(rng.random() < arrival_process.on_probability())
            schedule_phase_change(0.0)
        schedule_modulated_arrival(0.0)

    while events and events[0][0] <= horizon:
        now, _, kind, who = heapq.heappop(events)
        if kind == DEPARTURE and who[1] != states[who[0]].version:
            continue
        if kind == ARRIVAL and arrival_process.kind != "poisson" and who != arrival_version:
            continue
        advance_clock(now)
        n_events += 1

        if kind == ARRIVAL and arrival_process.kind == "poisson":
            k = who
            schedule(now + rng.exponential(1.0 / arrival_rate[k]), ARRIVAL, k)
            route(k, now)

        elif kind == ARRIVAL:
            schedule_modulated_arrival(now)
            size = int(rng.geometric(1.0 / arrival_process.mean_batch)) if arrival_process.kind == "batch" else 1
            for _ in range(size):
                route(draw_type(), now)

        elif kind == PHASE_CHANGE:
            phase_on = not phase_on
            schedule_phase_change(now)
            schedule_modulated_arrival(now)  # memoryless: redraw the next arrival at the new rate

        else:  # DEPARTURE
            s = who[0]
            state = states[s]
            state.settle(now)
            job = state.next_to_leave
            state.jobs.remove(job)
            departures += 1
            if now >= warmup:
                window_departures += 1
            if job.counted:
                response = now - job.arrival_time
                waiting = job.service_start - job.arrival_time
                counted_completed += 1
                sum_response += response
                sum_waiting += waiting
                batch_sum_response[job.batch] += response
                batch_sum_waiting[job.batch] += waiting
                batch_count[job.batch] += 1
            schedule_departure(s, now)

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
        "throughput": window_departures / duration,
        "utilisation": np.array(area_busy) / duration,
        "mean_busy_slots": np.array(area_slots) / duration,
        "arrivals": arrivals_seen,
        "admitted": admitted,
        "blocked": blocked,
        "departures": departures,
        "in_system_at_end": sum(len(state.jobs) for state in states),
        "counted_arrivals": counted_arrivals,
        "counted_admitted": counted_admitted,
        "counted_blocked": counted_blocked,
        "counted_completed": counted_completed,
        "batch_response_means": np.array([ratio(batch_sum_response[b], batch_count[b]) for b in range(batches)]),
        "batch_waiting_means": np.array([ratio(batch_sum_waiting[b], batch_count[b]) for b in range(batches)]),
        "batch_counts": np.array(batch_count),
        "events": n_events,
    }
