"""A minimal hand-written numba kernel of the bounding systems JSQ-FSL and JSQ-SSL of paper 002
(section 5): the speed floor of that path.

n servers of speeds mu_k and n buffers of ``buffer`` places (INFINITE for none), Poisson arrivals
of total rate ``arrival_rate`` that join a shortest buffer (lost if every buffer is full); after
every event the servers are matched to the buffers by length, the faster servers to the longer
buffers (FSL) or the slower ones (SSL). Only the multiset of buffer lengths matters: it is kept as
the level counts Q_i (buffers holding >= i jobs). With the speeds sorted in the order they are
matched (longest buffer first) and their prefix sums ``rate[r]``, the departure rate is
rate[Q_1], and a departure at the position u of [0, rate[Q_1]) comes from a buffer of the greatest
length i with rate[Q_i] > u: a scan of the levels from the longest down, which are few.

One exponential number per event for the time and one uniform number for what happens (an
arrival, or the departure position). The kernel runs up to ``horizon`` from empty buffers and
returns the time average of the number of jobs and the number of events; nothing else.
"""

import time

import numpy as np
from numba import njit

INFINITE = np.iinfo(np.int64).max


@njit(cache=True)
def _simulate(rate, arrival_rate, buffer, horizon, rng):
    n = len(rate) - 1
    levels = np.zeros(4096, np.int64)  # Q_i; the benchmark systems stay far below
    levels[0] = n
    shortest = 0
    longest = 0
    jobs = 0
    area = 0.0
    events = 0
    now = 0.0
    while now < horizon:
        total = arrival_rate + rate[levels[1]]
        step = rng.standard_exponential() / total
        area += jobs * (min(now + step, horizon) - now)
        now += step
        if now >= horizon:
            break
        events += 1
        u = rng.random() * total
        if u < arrival_rate:
            if shortest == buffer:
                continue
            shortest += 1
            levels[shortest] += 1
            longest = max(longest, shortest)
            if levels[shortest] < n:
                shortest -= 1
            jobs += 1
        else:
            u -= arrival_rate
            i = longest
            while rate[levels[i]] <= u:
                i -= 1
            levels[i] -= 1
            if i <= shortest:
                shortest = i - 1
            if levels[longest] == 0:
                longest -= 1
            jobs -= 1
    return area / horizon, events


def run_floor_bounding(kind, speed, arrival_rate, horizon, seed, buffer=None, clock=time.process_time):
    """Run JSQ-FSL (``kind`` "fsl") or JSQ-SSL ("ssl") up to ``horizon``. Returns
    ``(mean_jobs, events, seconds)``, ``seconds`` by ``clock`` around the compiled kernel alone."""
    order = np.sort(np.asarray(speed, dtype=np.float64))
    matched = order[::-1] if kind == "fsl" else order
    rate = np.concatenate([[0.0], np.cumsum(matched)])
    b = INFINITE if buffer is None else int(buffer)
    _simulate(rate, float(arrival_rate), b, 1.0, np.random.default_rng(0))
    rng = np.random.default_rng(seed)
    t0 = clock()
    mean_jobs, events = _simulate(rate, float(arrival_rate), b, float(horizon), rng)
    return float(mean_jobs), int(events), clock() - t0
