"""An exact solver for small systems with exponential job sizes, written from scratch as a test oracle.

It shares no code with ``hetlb``: it enumerates the states, builds the generator as a
``scipy.sparse`` matrix and solves pi Q = 0. The model is that of reference_sim.py with
exponential sizes of mean 1 (reference_model.py holds the servers' and arrivals' definitions):

- state = (n_1, ..., n_N) (and the phase of an mmpp, 0 = on, 1 = off); server ``s`` holds at most
  ``K_s`` jobs, its buffer, or for an infinite buffer the explicit ``truncation`` level (jobs sent
  to a truncated server holding ``K_s`` are lost; the lost share and the stationary mass at the
  truncation level are reported, so that a caller can check they are negligible);
- server ``s`` completes a job at rate mu_s phi_s(min(n_s, c_s));
- a type-``k`` job is routed by the policy's exact routing law (``routing_probabilities``), ties
  uniformly at random, and is lost if the chosen server is full;
- ``poisson``: type ``k`` at rate ``arrival_rate[k]``; ``mmpp``: the same rates scaled by
  rate_phase / lambda, the phase flipping at rate 1/T1 (on) and 1/T2 (off); ``batch``: batches at
  rate lambda / B of geometric size (mean B), the jobs routed in turn, each of its own type
  (probability lambda_k / lambda). The law of the state after a whole batch is exact: with R the
  one-job routing kernel (a full server keeps the state), the batch moves x to y with probability
  T(x, y), T = p R (I - (1 - p) R)^{-1}, p = 1 / B; since R never lowers the number of jobs,
  (I - (1 - p) R)^{-1} is a finite sum over the levels.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from scipy import sparse
from scipy.sparse import linalg

from support.reference_model import Arrivals, make_servers

POLICIES = ("random", "weighted-random", "jsq", "jfsq", "jssq", "jiq", "jfiq", "jsq-fiq", "pod", "sed", "jlu", "lew")

TIE_TOLERANCE = 1e-12  # relative: keys this close are tied (round-off of mu phi(b) / b)


# --------------------------------------------------------------------------------------------
# Routing laws
# --------------------------------------------------------------------------------------------


def _tied(candidates, key, largest=False):
    """The servers of ``candidates`` whose key is least (or largest), to within TIE_TOLERANCE."""
    values = {s: key(s) for s in candidates}
    best = max(values.values()) if largest else min(values.values())
    return [s for s in candidates if math.isclose(values[s], best, rel_tol=TIE_TOLERANCE, abs_tol=0.0)]


def _uniform(servers):
    return {s: 1.0 / len(servers) for s in servers}


def routing_probabilities(policy, candidates, n, servers, d=2):
    """The law of the server a job joins: ``{server: probability}``.

    ``n[s]`` is the number of jobs at ``s``; ``servers`` a list of ``reference_model.Server``.
    Free slot: n < c; the new job's rate r(n) = mu phi(b') / b', b' = min(n + 1, c); sed's delay
    (n + 1) / (mu phi(min(n + 1, c))); jlu's key n / c; lew's key n / (mu phi(c)). ``jfsq`` and
    ``jssq`` break the ties of jsq by the largest / least r(n); ``jiq`` takes a free slot uniformly,
    ``jfiq`` and ``jsq-fiq`` the free slot with the largest r(n), falling back to any candidate
    (jiq, jfiq) or to a shortest queue (jsq-fiq) when none is free; ``pod`` samples d distinct
    candidates uniformly. Remaining ties are uniform.
    """
    candidates = list(candidates)
    server = servers.__getitem__

    def new_job_rate(s):
        return server(s).new_job_rate(n[s])

    def shortest(among):
        return _tied(among, lambda s: n[s])

    def free_slots():
        return [s for s in candidates if server(s).has_free_slot(n[s])]

    if policy == "random":
        return _uniform(candidates)
    if policy == "weighted-random":  # weights: the capacities mu phi(c), the speeds when c = 1
        total = sum(server(s).full_capacity() for s in candidates)
        return {s: server(s).full_capacity() / total for s in candidates}
    if policy == "jsq":
        return _uniform(shortest(candidates))
    if policy == "jfsq":
        return _uniform(_tied(shortest(candidates), new_job_rate, largest=True))
    if policy == "jssq":
        return _uniform(_tied(shortest(candidates), new_job_rate))
    if policy == "jiq":
        return _uniform(free_slots() or candidates)
    if policy in ("jfiq", "jsq-fiq"):
        free = free_slots()
        if free:
            return _uniform(_tied(free, new_job_rate, largest=True))
        return _uniform(candidates if policy == "jfiq" else shortest(candidates))
    if policy == "pod":
        subsets = list(itertools.combinations(candidates, min(d, len(candidates))))
        law = dict.fromkeys(candidates, 0.0)
        for subset in subsets:
            for s, probability in _uniform(shortest(list(subset))).items():
                law[s] += probability / len(subsets)
        return {s: p for s, p in law.items() if p > 0}
    if policy == "sed":
        return _uniform(_tied(candidates, lambda s: server(s).expected_delay(n[s])))
    if policy == "jlu":
        return _uniform(_tied(candidates, lambda s: server(s).utilisation_key(n[s])))
    if policy == "lew":
        return _uniform(_tied(candidates, lambda s: server(s).expected_work_key(n[s])))
    raise ValueError(f"unknown policy {policy!r}; valid choices: {', '.join(POLICIES)}")


# --------------------------------------------------------------------------------------------
# The chain
# --------------------------------------------------------------------------------------------


def _capacities(buffer, truncation, n_servers):
    """Per-server most jobs K_s, and which servers are truncated (infinite buffer)."""
    buffers = list(buffer) if isinstance(buffer, (list, tuple, np.ndarray)) else [buffer] * n_servers
    truncations = list(truncation) if isinstance(truncation, (list, tuple, np.ndarray)) else [truncation] * n_servers
    if len(buffers) != n_servers or len(truncations) != n_servers:
        raise ValueError(f"buffer and truncation need one entry per server ({n_servers})")
    caps, truncated = [], []
    for b, t in zip(buffers, truncations):
        if b is None or b == math.inf:
            if t is None or not (float(t).is_integer() and t >= 1):
                raise ValueError("an infinite buffer needs an integer truncation level >= 1")
            caps.append(int(t))
            truncated.append(True)
        else:
            if not (float(b).is_integer() and b >= 1):
                raise ValueError(f"buffer sizes must be integers >= 1 or None/inf, got {b!r}")
            caps.append(int(b))
            truncated.append(False)
    return caps, truncated


def _one_job_kernel(states, index, caps, truncated, rates, compat, policy, servers, d):
    """Routing one job drawn from the type law ``rates``: (admission kernel U, blocking beta, truncation loss).

    ``U[x, x + e_s]`` is the probability that the job joins ``s`` from ``x``; ``beta[x]`` that it is
    lost; ``lost_to_truncation[x]`` that it is lost at a truncated server.
    """
    total = sum(rates)
    rows, cols, values = [], [], []
    beta = np.zeros(len(states))
    lost_to_truncation = np.zeros(len(states))
    for i, x in enumerate(states):
        for k, rate in enumerate(rates):
            if rate == 0:
                continue
            for s, probability in routing_probabilities(policy, compat[k], x, servers, d).items():
                weight = rate / total * probability
                if x[s] >= caps[s]:
                    beta[i] += weight
                    if truncated[s]:
                        lost_to_truncation[i] += weight
                else:
                    y = list(x)
                    y[s] += 1
                    rows.append(i)
                    cols.append(index[tuple(y)])
                    values.append(weight)
    admission = sparse.csr_matrix((values, (rows, cols)), shape=(len(states), len(states)))
    return admission, beta, lost_to_truncation


def _batch_visits(admission, beta, stop):
    """M = (I - (1 - p) R)^{-1}, R = U + diag(beta): expected routings at each state in one batch.

    ``stop`` = p = 1 / B. With E = diag(1 / (1 - (1 - p) beta)) and N = (1 - p) E U (nilpotent: U
    raises the number of jobs), M = sum_i N^i E, a finite sum.
    """
    go_on = 1.0 - stop
    scale = sparse.diags(1.0 / (1.0 - go_on * beta)).tocsr()
    step = (go_on * scale @ admission).tocsr()
    term = scale
    visits = scale.copy()
    while term.nnz:
        term = (step @ term).tocsr()
        term.eliminate_zeros()
        visits = visits + term
    return visits.tocsr()


def _stationary(generator):
    """pi with pi Q = 0, sum pi = 1: fix pi of the first state (the empty system) to 1, solve for the
    others, normalise."""
    generator = generator.tocsc()
    inner = generator[1:, 1:].T.tocsc()
    first_row = generator[0, 1:].toarray().ravel()
    pi = np.append(1.0, linalg.spsolve(inner, -first_row)) if generator.shape[0] > 1 else np.ones(1)
    pi /= pi.sum()
    residual = np.abs(pi @ generator).max()
    if not (residual < 1e-9 and pi.min() > -1e-9):
        raise ArithmeticError(f"stationary solve failed: residual {residual:.2e}, min {pi.min():.2e}")
    pi = np.clip(pi, 0.0, None)
    return pi / pi.sum()


def solve_reference_ctmc(
    speed,
    arrival_rate,
    compat=None,
    buffer=None,
    policy="random",
    *,
    d=2,
    concurrency=None,
    rate_curve=None,
    arrivals="poisson",
    truncation=None,
):
    """The stationary measures of the system with exponential sizes (mean 1), solved exactly.

    Parameters are those of ``reference_sim.simulate_reference`` (``compat=None``: every type may
    use every server), plus ``truncation``: the most jobs kept at a server with an infinite buffer
    (scalar or per server; required when a buffer is infinite).

    Returns a dict: ``mean_number_in_system`` (L), ``throughput`` (departure rate X),
    ``blocking_probability`` (share of arriving jobs lost, counted on the arrival side, truncation
    losses included), ``mean_response_time`` (L / X, Little's law over admitted jobs),
    ``mean_number_waiting`` (sum of (n_s - c_s)^+), ``mean_waiting_time`` (its L / X),
    ``mean_number_per_server`` and ``utilisation`` (P(n_s >= 1)) as arrays,
    ``truncation_mass`` (stationary probability that a truncated server is at its level),
    ``truncation_loss_probability`` (share of arriving jobs lost at a truncated server),
    ``capacity`` (the K_s used), ``states`` (array, one row per state: n_1..n_N[, phase]) and
    ``distribution`` (pi over ``states``).
    """
    speed = [float(x) for x in speed]
    n_servers = len(speed)
    arrival_rate = [float(x) for x in arrival_rate]
    compat = [list(range(n_servers))] * len(arrival_rate) if compat is None else [list(c) for c in compat]
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; valid choices: {', '.join(POLICIES)}")
    if len(compat) != len(arrival_rate):
        raise ValueError(f"compat has {len(compat)} entries, expected {len(arrival_rate)} (one per type)")
    servers = make_servers(speed, concurrency, rate_curve)
    process = Arrivals.parse(arrivals)
    caps, truncated = _capacities(buffer, truncation, n_servers)
    total_rate = sum(arrival_rate)
    if not total_rate > 0:
        raise ValueError("the total arrival rate must be positive")

    states = list(itertools.product(*(range(cap + 1) for cap in caps)))
    index = {x: i for i, x in enumerate(states)}
    size = len(states)
    jobs = np.array([sum(x) for x in states], dtype=float)
    work_rates = np.array([[servers[s].work_rate(x[s]) for s in range(n_servers)] for x in states])

    # departures: x -> x - e_s at rate mu_s phi_s(min(x_s, c_s))
    rows, cols, values = [], [], []
    for i, x in enumerate(states):
        for s in range(n_servers):
            if x[s] > 0:
                y = list(x)
                y[s] -= 1
                rows.append(i)
                cols.append(index[tuple(y)])
                values.append(work_rates[i, s])
    departures = sparse.csr_matrix((values, (rows, cols)), shape=(size, size))
    admission, beta, lost_to_truncation = _one_job_kernel(
        states, index, caps, truncated, arrival_rate, compat, policy, servers, d
    )
    identity = sparse.identity(size, format="csr")

    if process.kind == "batch":
        stop = 1.0 / process.mean_batch
        visits = _batch_visits(admission, beta, stop)
        outcome = (stop * (admission + sparse.diags(beta)) @ visits).tocsr()  # T(x, y)
        batch_rate = total_rate / process.mean_batch
        generator = departures + batch_rate * (outcome - identity)
        admitted_per_batch = outcome @ jobs - jobs
        truncation_lost_per_batch = visits @ lost_to_truncation
    elif process.kind == "mmpp":
        rate_on, rate_off = process.phase_rates(total_rate)
        flip = sparse.csr_matrix(np.array([[0.0, 1.0 / process.on], [1.0 / process.off, 0.0]]))
        phase_rates = sparse.diags([rate_on, rate_off])
        # state (x, phase) has index 2 i + phase
        generator = (
            sparse.kron(departures, sparse.identity(2))
            + sparse.kron(admission, phase_rates)
            + sparse.kron(identity, flip)
        )
    else:
        generator = departures + total_rate * admission
    generator = generator.tocsr()
    generator = generator - sparse.diags(np.asarray(generator.sum(axis=1)).ravel())
    pi = _stationary(generator.tocsr())

    occupancy = np.array(states).reshape(size, n_servers)
    pi_jobs, state_rows = pi, occupancy
    if process.kind == "mmpp":
        phase_rate = np.tile([rate_on, rate_off], size)
        admitted_rate = float(pi @ (phase_rate * np.repeat(1.0 - beta, 2)))
        truncation_rate = float(pi @ (phase_rate * np.repeat(lost_to_truncation, 2)))
        phases = np.tile([0, 1], size)
        pi_jobs = pi.reshape(size, 2).sum(axis=1)
        state_rows = np.column_stack([np.repeat(occupancy, 2, axis=0), phases])
    elif process.kind == "batch":
        admitted_rate = batch_rate * float(pi @ admitted_per_batch)
        truncation_rate = batch_rate * float(pi @ truncation_lost_per_batch)
    else:
        admitted_rate = total_rate * float(pi @ (1.0 - beta))
        truncation_rate = total_rate * float(pi @ lost_to_truncation)

    concurrency_caps = np.array([min(server.concurrency, cap) for server, cap in zip(servers, caps)])
    at_truncation = np.array([any(truncated[s] and x[s] == caps[s] for s in range(n_servers)) for x in states])
    mean_number = float(pi_jobs @ jobs)
    throughput = float(pi_jobs @ work_rates.sum(axis=1))
    waiting = float(pi_jobs @ np.maximum(occupancy - concurrency_caps, 0).sum(axis=1))
    return {
        "mean_number_in_system": mean_number,
        "throughput": throughput,
        "blocking_probability": 1.0 - admitted_rate / total_rate,
        "mean_response_time": mean_number / throughput,
        "mean_number_waiting": waiting,
        "mean_waiting_time": waiting / throughput,
        "mean_number_per_server": pi_jobs @ occupancy,
        "utilisation": pi_jobs @ (occupancy > 0),
        "truncation_mass": float(pi_jobs @ at_truncation),
        "truncation_loss_probability": truncation_rate / total_rate,
        "capacity": caps,
        "states": state_rows,
        "distribution": pi,
    }
