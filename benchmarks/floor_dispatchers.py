"""A minimal hand-written numba kernel of M dispatchers in continuous time: the speed floor of that path.

N FCFS servers of speeds mu_n with exponential job sizes of mean 1, Poisson arrivals of rate
lambda split equally among M dispatchers (each arrival's dispatcher uniform). Dispatcher m sends
its job to the server of its least estimate Q~^m_n, ties uniformly at random (l-jsq); then, with
probability p_hat, it probes push_d distinct servers drawn uniformly and sets its estimates of them
to their numbers in system at once (push without delay, docs/reference/dispatchers.md). The
kernel runs from empty until ``jobs`` jobs have departed and returns the mean response time by
Little's law (time-average number in system over the arrival rate) and the number of events
(arrivals and departures); nothing else is measured. The next departure is found by a scan of
the servers' completion times, the least estimate by a scan of the dispatcher's estimates
(N = 100: a scan of a line or two of cache).
"""

import time

import numpy as np
from numba import njit


@njit(cache=True)
def _simulate(speed, arrival_rate, dispatchers, p_hat, push_d, jobs, rng):
    n = len(speed)
    queue_len = np.zeros(n, np.int64)
    completion = np.full(n, np.inf)
    estimate = np.zeros((dispatchers, n), np.int64)
    ties = np.empty(n, np.int64)
    probed = np.empty(push_d, np.int64)
    now = 0.0
    next_arrival = rng.exponential() / arrival_rate
    area = 0.0
    in_system = 0
    departed = 0
    events = 0
    while departed < jobs:
        s_next = 0
        for s in range(1, n):
            if completion[s] < completion[s_next]:
                s_next = s
        at = min(next_arrival, completion[s_next])
        area += in_system * (at - now)
        now = at
        events += 1
        if next_arrival <= completion[s_next]:
            m = int(rng.random() * dispatchers)
            row = estimate[m]
            least = row[0]
            count = 0
            for s in range(n):
                v = row[s]
                k = 0 if v < least else count
                ties[k] = s
                count = k + (v <= least)
                least = min(least, v)
            s = ties[min(int(rng.random() * count), count - 1)]
            queue_len[s] += 1
            in_system += 1
            if queue_len[s] == 1:
                completion[s] = now + rng.exponential() / speed[s]
            if rng.random() < p_hat:
                for i in range(push_d):  # Floyd's sampling of push_d distinct servers
                    j = n - push_d + i
                    t = min(int(rng.random() * (j + 1)), j)
                    for k in range(i):
                        if probed[k] == t:
                            t = j
                            break
                    probed[i] = t
                    row[t] = queue_len[t]
            next_arrival = now + rng.exponential() / arrival_rate
        else:
            s = s_next
            queue_len[s] -= 1
            in_system -= 1
            departed += 1
            completion[s] = now + rng.exponential() / speed[s] if queue_len[s] > 0 else np.inf
    return area / now / arrival_rate, events


def run_floor_dispatchers(speed, arrival_rate, dispatchers, p_hat, push_d, jobs, seed, clock=time.perf_counter):
    """(mean response time, events, seconds of the compiled loop)."""
    rng = np.random.default_rng(seed)
    t0 = clock()
    mean_response, events = _simulate(
        np.asarray(speed, float), float(arrival_rate), dispatchers, p_hat, push_d, jobs, rng
    )
    return mean_response, events, clock() - t0
