"""Exact stationary solution of tiny systems with M dispatchers that decide on estimates, as a CTMC.

Written from the model's definitions (docs/reference/dispatchers.md), sharing no code with the
event kernel. One job type may use every server; server s serves FCFS at exponential rate
``speed[s]`` and holds at most ``buffer[s]`` jobs. Jobs reach dispatcher m as a Poisson stream of
rate lambda / M. Dispatcher m sends a job to a server with the least estimate Q~^m_s among all
(ties uniformly at random; this is l-jsq, and jsq on estimates); a job sent to a full server is
lost. Updates (each a message that carries the server's number when it is sent):

- ``push``: after each decision, with probability p_hat, the dispatcher probes d servers drawn
  uniformly without replacement;
- ``pull``: after each departure, with probability p_hat, the server reports to a uniform dispatcher;
- ``snapshot``: at the epochs of a Poisson process of rate 1 / tau, every dispatcher learns every
  server's number;
- ``increment``: a dispatcher adds each job it sends to its estimate (at most the buffer).

A message arrives after an exponential delay of mean ``mean_delay`` (or at once when it is 0), and
is applied unless a message the server sent later has been applied first: the state holds, for
each (dispatcher, server), the values of the messages in flight in the order they were sent, and
the delivery of one removes it and every older one. The chain holds at most ``max_in_flight``
messages in flight; a message sent beyond that is lost, and the solution reports the rate of such
losses (``lost_message_rate``): the chain is the model exactly when it is 0, and close to it when
it is small against ``message_rate``.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass

import numpy as np

from hetlb.errors import InputError
from hetlb.theory.exact import _stationary_distribution, generator_from_transitions

MAX_DISPATCHER_STATES = 400_000
"""The largest chain built (its states are Python tuples)."""


@dataclass(frozen=True)
class DispatcherSolution:
    """Stationary figures of the chain; response times by Little's law over the admitted jobs.

    Parameters
    ----------
    n_states
        The states of the chain.
    mean_number_in_system
        The mean jobs in the system.
    blocking_probability
        The fraction of jobs lost at a full server.
    mean_response_time
        The mean response time of admitted jobs (time units).
    mean_estimate_error
        The time-average |Q~^m_s - Q_s| over dispatchers and servers.
    message_rate
        Messages sent per unit time.
    lost_message_rate
        Messages per unit time beyond ``max_in_flight``, which the chain drops (0: the chain is
        the model exactly).
    """

    n_states: int
    mean_number_in_system: float
    blocking_probability: float
    mean_response_time: float
    mean_estimate_error: float
    message_rate: float
    lost_message_rate: float


def solve_dispatchers_exact(
    speed,
    arrival_rate: float,
    buffer,
    *,
    dispatchers: int = 2,
    push: tuple[float, int] | None = None,
    pull: float | None = None,
    snapshot_rate: float | None = None,
    increment: bool = False,
    mean_delay: float = 0.0,
    max_in_flight: int = 2,
) -> DispatcherSolution:
    """Solve the chain above: ``push`` = (p_hat, d), ``pull`` = p_hat, ``snapshot_rate`` = 1 / tau
    (aligned polls), every message delayed by an exponential of mean ``mean_delay``.

    Parameters
    ----------
    speed
        mu_s of each server (jobs per unit time).
    arrival_rate
        lambda, the total Poisson rate (jobs per unit time), split equally over the dispatchers.
    buffer
        b_s, the jobs each server holds (one for all or one per server), the one in service
        included.
    dispatchers
        M, the number of dispatchers.
    push
        (p_hat, d): after each decision, with probability p_hat, probe d servers.
    pull
        p_hat: after each departure, with probability p_hat, the server reports to a uniform
        dispatcher.
    snapshot_rate
        1 / tau: the rate of the snapshots that tell every dispatcher every server's number.
    increment
        Each dispatcher adds the jobs it sends to its estimates.
    mean_delay
        The mean exponential delay of every message (time units; 0: at once).
    max_in_flight
        The most messages in flight per (dispatcher, server) that the chain holds.
    """
    speed = np.asarray(speed, dtype=float)
    buffer = [int(b) for b in np.broadcast_to(buffer, speed.shape)]
    n, m_count = len(speed), dispatchers
    delayed = mean_delay > 0
    delivery_rate = 1.0 / mean_delay if delayed else 0.0
    channels = m_count * n

    def send(est, pending, m, s, value, transfers):
        """The (est, pending) after dispatcher m is sent server s's ``value``; counts a loss in
        ``transfers`` (a one-element list) when the chain holds max_in_flight already."""
        c = m * n + s
        if not delayed:
            est = est[:c] + (value,) + est[c + 1 :]
            return est, pending
        if sum(len(p) for p in pending) >= max_in_flight:
            transfers[0] += 1
            return est, pending
        return est, pending[:c] + (pending[c] + (value,),) + pending[c + 1 :]

    def moves(state):
        """(next state, rate, messages sent, messages lost, blocked) of every transition out of ``state``."""
        q, est, pending = state
        out = []
        for m in range(m_count):
            row = est[m * n : (m + 1) * n]
            least = min(row)
            ties = [s for s in range(n) if row[s] == least]
            for s in ties:
                rate = arrival_rate / m_count / len(ties)
                blocked = q[s] >= buffer[s]
                q2 = q if blocked else q[:s] + (q[s] + 1,) + q[s + 1 :]
                est2 = est
                if increment:
                    c = m * n + s
                    est2 = est[:c] + (min(est[c] + 1, buffer[s]),) + est[c + 1 :]
                branches = [(1.0, est2, pending, 0, 0)]
                if push is not None:
                    p_hat, d = push
                    subsets = list(itertools.combinations(range(n), min(d, n)))
                    branches = [(1.0 - p_hat, est2, pending, 0, 0)] if p_hat < 1 else []
                    for subset in subsets:
                        e, p, lost = est2, pending, [0]
                        for probed in subset:
                            e, p = send(e, p, m, probed, q2[probed], lost)
                        branches.append((p_hat / len(subsets), e, p, 2 * len(subset), lost[0]))
                for weight, e, p, sent, lost in branches:
                    if weight > 0:
                        out.append(((q2, e, p), rate * weight, sent, lost, blocked))
        for s in range(n):
            if q[s] == 0:
                continue
            q2 = q[:s] + (q[s] - 1,) + q[s + 1 :]
            if pull is None:
                out.append(((q2, est, pending), speed[s], 0, 0, False))
                continue
            out.append(((q2, est, pending), speed[s] * (1.0 - pull), 0, 0, False))
            for m in range(m_count):
                lost = [0]
                e, p = send(est, pending, m, s, q2[s], lost)
                out.append(((q2, e, p), speed[s] * pull / m_count, 1, lost[0], False))
        if snapshot_rate is not None:
            e, p, lost = est, pending, [0]
            for m in range(m_count):
                for s in range(n):
                    e, p = send(e, p, m, s, q[s], lost)
            out.append(((q, e, p), snapshot_rate, channels, lost[0], False))
        for c in range(channels):
            for i, value in enumerate(pending[c]):
                e = est[:c] + (value,) + est[c + 1 :]
                p = pending[:c] + (pending[c][i + 1 :],) + pending[c + 1 :]
                out.append(((q, e, p), delivery_rate, 0, 0, False))
        return out

    empty = (tuple([0] * n), tuple([0] * channels), tuple([()] * channels))
    index = {empty: 0}
    states = [empty]
    rows, cols, rates = [], [], []
    sent_rate, lost_rate, blocked_rate = [], [], []
    queue = deque([empty])
    while queue:
        state = queue.popleft()
        i = index[state]
        sent_out = lost_out = blocked_out = 0.0
        for target, rate, sent, lost, blocked in moves(state):
            sent_out += rate * sent
            lost_out += rate * lost
            blocked_out += rate * blocked
            if target not in index:
                if len(states) >= MAX_DISPATCHER_STATES:
                    raise InputError("buffer", f"the chain has more than {MAX_DISPATCHER_STATES:,} states")
                index[target] = len(states)
                states.append(target)
                queue.append(target)
            if target != state:
                rows.append(i)
                cols.append(index[target])
                rates.append(rate)
        sent_rate.append(sent_out)
        lost_rate.append(lost_out)
        blocked_rate.append(blocked_out)
    generator = generator_from_transitions(np.array(rows), np.array(cols), np.array(rates), len(states))
    pi, _ = _stationary_distribution(generator)
    in_system = np.array([sum(q) for q, _, _ in states], dtype=float)
    error = np.array(
        [np.mean([abs(est[m * n + s] - q[s]) for m in range(m_count) for s in range(n)]) for q, est, _ in states]
    )
    number = float(pi @ in_system)
    blocking = float(pi @ np.array(blocked_rate)) / arrival_rate
    return DispatcherSolution(
        n_states=len(states),
        mean_number_in_system=number,
        blocking_probability=blocking,
        mean_response_time=number / (arrival_rate * (1.0 - blocking)),
        mean_estimate_error=float(pi @ error),
        message_rate=float(pi @ np.array(sent_rate)),
        lost_message_rate=float(pi @ np.array(lost_rate)),
    )
