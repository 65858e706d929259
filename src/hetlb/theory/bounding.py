"""Exact stationary law of the bounding systems JSQ-FSL and JSQ-SSL (paper 002, section 5) of a
small system, as a continuous-time Markov chain on the sorted vector of buffer lengths.

The state is l_1 >= l_2 >= ... >= l_n, the buffer lengths longest first (jobs counted with the one
in service). The buffer of rank r is served by the r-th server in the order fastest first (FSL) or
slowest first (SSL), so a departure from it occurs at that server's rate mu. An arrival (rate
n lambda) joins a shortest buffer, and is lost when every buffer holds b jobs. Infinite buffers are
approximated by a large b: ``full_probability`` = P(some buffer holds b jobs) must then be negligible.

Plain NumPy/SciPy: nothing here uses the simulation kernels.
"""

import itertools
import math
from dataclasses import dataclass

import numpy as np

from hetlb import validation
from hetlb.errors import InputError
from hetlb.theory.exact import (
    MAX_STATES,
    _stationary_distribution,
    generator_from_transitions,
)

__all__ = ["BoundingStationary", "solve_bounding_system"]


@dataclass(frozen=True, eq=False)
class BoundingStationary:
    """Stationary law of JSQ-FSL or JSQ-SSL: ``states[j]`` (buffer lengths, longest first) has
    probability ``stationary[j]``. ``level_means[i - 1]`` = E Q_i (buffers holding >= i jobs);
    ``loss_probability`` = P(every buffer full), the fraction of arrivals lost (PASTA);
    ``jobs_law[j]`` = P(Q_{+1} = j), ``waiting_law[j]`` = P(Q_{+2} = j); ``full_probability`` =
    P(some buffer holds b jobs)."""

    kind: str
    states: np.ndarray
    stationary: np.ndarray
    level_means: np.ndarray
    mean_jobs: float
    mean_waiting: float
    loss_probability: float
    jobs_law: np.ndarray
    waiting_law: np.ndarray
    full_probability: float
    residual: float


def solve_bounding_system(speeds, arrival_rate, kind, buffer, max_states=MAX_STATES) -> BoundingStationary:
    """Exact stationary law of JSQ-FSL (``kind="fsl"``) or JSQ-SSL (``"ssl"``).

    speeds: mu_k of the n servers (jobs per time unit); arrival_rate: n lambda, the total rate;
    buffer: b, the jobs a buffer holds. The chain has C(b + n, n) states.
    """
    speed = validation.positive_finite_array("speeds", speeds)
    arrival_rate = float(arrival_rate)
    if not (math.isfinite(arrival_rate) and arrival_rate > 0):
        raise InputError("arrival_rate", f"must be a positive finite rate, got {arrival_rate}")
    if kind not in ("fsl", "ssl"):
        raise InputError("kind", f"unknown bounding system {kind!r}; choose one of: fsl, ssl")
    capacity = validation.integer("buffer", buffer, low=1)
    n = speed.size
    n_states = math.comb(capacity + n, n)
    if n_states > max_states:
        raise InputError("buffer", f"the chain has {n_states} states, above max_states = {max_states}")

    rank_speed = np.sort(speed)[::-1] if kind == "fsl" else np.sort(speed)
    states = np.array(
        sorted(
            itertools.combinations_with_replacement(range(capacity, -1, -1), n),
            key=lambda lengths: (sum(lengths), lengths[::-1]),
        ),
        dtype=np.int64,
    )
    index = {tuple(state): j for j, state in enumerate(states)}
    transitions = []  # (from, to, rate)
    for j, state in enumerate(states):
        if state[-1] < capacity:
            joined = state.copy()
            joined[np.flatnonzero(state == state[-1])[0]] += 1
            transitions.append((j, index[tuple(joined)], arrival_rate))
        for rank in np.flatnonzero(state > 0):
            left = state.copy()
            left[rank] -= 1
            transitions.append((j, index[tuple(sorted(left, reverse=True))], rank_speed[rank]))
    rows, cols, rates = (np.array(column) for column in zip(*transitions))
    rows, cols = rows.astype(np.int64), cols.astype(np.int64)
    pi, residual = _stationary_distribution(generator_from_transitions(rows, cols, rates, len(states)))

    levels = np.arange(1, capacity + 1)
    level_means = np.array([pi @ (states >= i).sum(axis=1) for i in levels])
    jobs = states.sum(axis=1)
    waiting = jobs - (states >= 1).sum(axis=1)
    return BoundingStationary(
        kind=kind,
        states=states,
        stationary=pi,
        level_means=level_means,
        mean_jobs=float(pi @ jobs),
        mean_waiting=float(pi @ waiting),
        loss_probability=float(pi[states[:, -1] == capacity].sum()),
        jobs_law=np.bincount(jobs, weights=pi),
        waiting_law=np.bincount(waiting, weights=pi),
        full_probability=float(pi[states[:, 0] == capacity].sum()),
        residual=residual,
    )
