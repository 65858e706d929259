"""A minimal hand-written numba kernel of the slotted model of paper 001: the speed floor of that path.

M dispatchers, N servers. In slot t dispatcher m receives A_m(t) ~ Poisson(lambda_m) jobs and
server n offers S_n(t) ~ Poisson(mu_n) services; every dispatcher with A_m(t) >= 1 sends all its
jobs of the slot to one server, chosen on the information at the start of the slot; then
Q_n(t+1) = max(Q_n(t) + A_n(t) - S_n(t), 0). Two rules:

* jsq: the least true queue Q_n(t), ties uniformly at random (one uniform number per decision);
* l-jsq with push updates: the least of the dispatcher's own estimates Q~^m_n(t), ties uniformly at
  random; after the queues are updated, each dispatcher that received jobs in the slot, with
  probability p_hat, samples push_d distinct servers and sets its estimates of them to Q_n(t+1).

The kernel runs ``slots`` slots from empty queues and returns the mean delay
sum_t sum_n Q_n(t+1) / sum_t sum_m A_m(t) (Little's law) and the number of arrivals; nothing else
is measured. Counts come from ``Generator.poisson`` as a numpy user writes it. The least value
is found by one scan that writes the servers attaining it into a small buffer, and one uniform
number picks among them; under jsq every dispatcher decides on the same queues, so that scan is
done once per slot.
"""

import time

import numpy as np
from numba import njit

JSQ = 0
L_JSQ_PUSH = 1


@njit(cache=True)
def _least(values, ties):
    """How many servers attain the least of ``values``; they are written to ``ties``."""
    least = values[0]
    count = 0
    for n in range(len(values)):
        v = values[n]
        at = 0 if v < least else count
        ties[at] = n
        count = at + (v <= least)
        least = min(least, v)
    return count


@njit(cache=True)
def _simulate(rule, speed, dispatcher_rate, p_hat, push_d, slots, rng):
    n_servers = len(speed)
    n_dispatchers = len(dispatcher_rate)
    queue_len = np.zeros(n_servers, np.int64)
    arrivals_to = np.zeros(n_servers, np.int64)
    arrived = np.zeros(n_dispatchers, np.int64)
    estimate = np.zeros((n_dispatchers, n_servers), np.int64)
    ties = np.empty(n_servers, np.int64)
    pushed = np.empty(push_d, np.int64)
    queue_area = 0
    arrivals = 0
    for _ in range(slots):
        for m in range(n_dispatchers):
            arrived[m] = rng.poisson(dispatcher_rate[m])
        arrivals_to[:] = 0
        n_ties = _least(queue_len, ties) if rule == JSQ else 0
        for m in range(n_dispatchers):
            a = arrived[m]
            if a == 0:
                continue
            arrivals += a
            if rule != JSQ:
                n_ties = _least(estimate[m], ties)
            arrivals_to[ties[min(int(rng.random() * n_ties), n_ties - 1)]] += a
        for n in range(n_servers):
            q = queue_len[n] + arrivals_to[n] - rng.poisson(speed[n])
            q = max(q, 0)
            queue_len[n] = q
            queue_area += q
        if rule != JSQ:
            for m in range(n_dispatchers):
                if arrived[m] > 0 and rng.random() < p_hat:
                    # push_d distinct servers by Floyd's algorithm
                    for i in range(push_d):
                        j = n_servers - push_d + i
                        x = min(int(rng.random() * (j + 1)), j)
                        for k in range(i):
                            if pushed[k] == x:
                                x = j
                                break
                        pushed[i] = x
                        estimate[m, x] = queue_len[x]
    return queue_area / arrivals, arrivals


def run_floor_slotted(rule, speed, dispatcher_rate, slots, seed, p_hat=1.0, push_d=2, clock=time.process_time):
    """Run the slotted floor (``rule`` "jsq" or "l-jsq-push") for ``slots`` slots. Returns
    ``(mean_delay, arrivals, seconds)``, ``seconds`` by ``clock`` around the compiled kernel alone."""
    code = {"jsq": JSQ, "l-jsq-push": L_JSQ_PUSH}[rule]
    speed = np.ascontiguousarray(speed, dtype=np.float64)
    rate = np.ascontiguousarray(dispatcher_rate, dtype=np.float64)
    _simulate(code, speed, rate, float(p_hat), int(push_d), 10, np.random.default_rng(0))
    rng = np.random.default_rng(seed)
    t0 = clock()
    delay, arrivals = _simulate(code, speed, rate, float(p_hat), int(push_d), int(slots), rng)
    return float(delay), int(arrivals), clock() - t0
