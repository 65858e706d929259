"""The arrival processes in the event loops: the next arrival epoch, and the first.

Poisson arrivals stay in the loops themselves (one exponential per arrival, as they always were);
these helpers serve the other processes of hetlb.model.arrivals, with their state in the run's
counters (``batch_left``, ``phase``, ``phase_end``) and their parameters in one array
(:func:`hetlb.simulation.continuous.arrival_parameters`):

* batch: (B / lambda, ln(1 - 1/B)): batch epochs at rate lambda / B, the geometric size K of mean
  B drawn by inversion, K = 1 + floor(ln U / ln(1 - 1/B)); the K - 1 jobs after the first arrive
  at the same instant (the next epoch is now while ``batch_left`` > 0);
* mmpp: (1 / lambda_on, 1 / lambda_off, T1, T2, T1 / (T1 + T2)): ``phase`` 1 is on; within a
  phase, exponential gaps at its rate until ``phase_end``, where the phase flips (the gaps are
  memoryless, so a gap that would cross the end is drawn afresh from it).

Every draw comes from the arrival stream. A trace's requests (the prompts ``trace:FILE``) arrive at
its epochs, rescaled to the system's arrival rate (code ARRIVALS_TRACE, :func:`next_or_trace_epoch`,
which the loops with prefix caches call in the place of :func:`next_arrival_epoch`): they draw
nothing.
"""

import math

from hetlb.constants import ARRIVALS_BATCH, ARRIVALS_TRACE
from hetlb.jit import njit, records


@njit
def geometric_batch(log_keep, rng):
    """A batch size K >= 1 with P(K = k) = (1 - p)^(k-1) p, ``log_keep`` = ln(1 - p)."""
    return 1 + int(math.floor(math.log(1.0 - rng.random()) / log_keep))


@njit
def next_arrival_epoch(c, now, arrival_code, arrival_params, rng):
    """The epoch of the arrival after the one at ``now`` (``c``: the run's counters record)."""
    first, second, third, fourth = arrival_params[0], arrival_params[1], arrival_params[2], arrival_params[3]
    if arrival_code == ARRIVALS_BATCH:
        if c.batch_left > 0:
            c.batch_left -= 1
            return now
        c.batch_left = geometric_batch(second, rng) - 1
        return now + rng.exponential() * first
    t = now
    while True:
        gap = rng.exponential() * (first if c.phase == 1 else second)
        if t + gap < c.phase_end:
            return t + gap
        t = c.phase_end
        c.phase = 1 - c.phase
        c.phase_end = t + rng.exponential() * (third if c.phase == 1 else fourth)


@njit
def start_arrivals(counters, arrival_code, arrival_params, rng):
    """Set the first arrival epoch of a non-Poisson process from time 0 (a batch starts with its
    first epoch; an MMPP in its stationary phase, on with probability T1 / (T1 + T2))."""
    c = records(counters)[0]
    c.batch_left = 0
    if arrival_code != ARRIVALS_BATCH:
        c.phase = 1 if rng.random() < arrival_params[4] else 0
        c.phase_end = rng.exponential() * (arrival_params[2] if c.phase == 1 else arrival_params[3])
    c.next_arrival = next_arrival_epoch(c, 0.0, arrival_code, arrival_params, rng)


@njit
def next_or_trace_epoch(c, now, arrival_code, arrival_params, rng):
    """:func:`next_arrival_epoch`, or for a trace (``arrival_params``: its n epochs, then +inf) the
    epoch of arrival r + 1 after arrival r (``c.arrivals_total`` = r when it is drawn)."""
    if arrival_code == ARRIVALS_TRACE:
        return arrival_params[min(c.arrivals_total + 1, len(arrival_params) - 1)]
    return next_arrival_epoch(c, now, arrival_code, arrival_params, rng)
