"""The decision rules, as small @njit functions the kernels call and tests can call alone.

A ranking policy gives each compatible server a *selection key* computed from its queue length
(counting the job in service), its speed class (0 = fastest) and its speed; the job goes to a
server with the least key, ties uniformly at random. The keys encode the tie-breaking rules of
DESIGN.md, so the same definition serves the O(log N) tree of the complete graph and the
O(degree) scan of a sparse graph.
"""

import numpy as np
from numba import njit

RANDOM = 0
WEIGHTED_RANDOM = 1
JSQ = 2
JFSQ = 3
JSSQ = 4
JIQ = 5
JFIQ = 6
POD = 7
SED = 8


@njit(cache=True, inline="always")
def selection_key(policy_code, queue_len, speed_class, n_classes, speed):
    """Key of one server; the policy joins a least-key compatible server, ties at random.

    jsq, pod: q.  jfsq: (q, class).  jssq: (q, -class).  sed: (q + 1) / speed.
    jiq: idle first.  jfiq: idle servers by class, every busy server equal.
    """
    if policy_code == JFSQ:
        return float(queue_len * n_classes + speed_class)
    if policy_code == JSSQ:
        return float(queue_len * n_classes + (n_classes - 1 - speed_class))
    if policy_code == SED:
        return (queue_len + 1.0) / speed
    if policy_code == JIQ:
        return 0.0 if queue_len == 0 else 1.0
    if policy_code == JFIQ:
        return float(speed_class) if queue_len == 0 else float(n_classes)
    return float(queue_len)


@njit(cache=True, inline="always")
def falls_back_to_uniform(policy_code, least_key, n_classes):
    """jiq and jfiq with no idle compatible server send the job uniformly at random instead."""
    if policy_code == JIQ:
        return least_key >= 1.0
    if policy_code == JFIQ:
        return least_key >= n_classes
    return False


@njit(cache=True, inline="always")
def uniform_index(rng, n):
    """An index uniform on 0..n-1."""
    i = int(rng.random() * n)
    return i if i < n else n - 1


@njit(cache=True, inline="always")
def least_key_server(candidates, lo, hi, policy_code, queue_len, server_class, n_classes, speed, rng):
    """Scan the servers ``candidates[lo:hi]`` for a least-key server, ties uniformly at random
    (reservoir sampling). Returns (server, least key)."""
    chosen = candidates[lo]
    least = selection_key(policy_code, queue_len[chosen], server_class[chosen], n_classes, speed[chosen])
    ties = 1
    for i in range(lo + 1, hi):
        s = candidates[i]
        key = selection_key(policy_code, queue_len[s], server_class[s], n_classes, speed[s])
        if key < least:
            least = key
            chosen = s
            ties = 1
        elif key == least:
            ties += 1
            if rng.random() * ties < 1.0:
                chosen = s
    return chosen, least


@njit(cache=True, inline="always")
def sample_without_replacement(n, d, sample, rng):
    """Write min(d, n) distinct indices uniform on 0..n-1 into ``sample`` (Floyd's algorithm);
    return how many."""
    if d >= n:
        for i in range(n):
            sample[i] = i
        return n
    taken = 0
    for j in range(n - d, n):
        t = uniform_index(rng, j + 1)
        for i in range(taken):
            if sample[i] == t:
                t = j
                break
        sample[taken] = t
        taken += 1
    return taken


@njit(cache=True, inline="always")
def power_of_d_server(candidates, lo, hi, d, queue_len, sample, rng):
    """pod: the shortest of min(d, hi - lo) distinct servers of ``candidates[lo:hi]``, ties at random."""
    taken = sample_without_replacement(hi - lo, d, sample, rng)
    chosen = candidates[lo + sample[0]]
    ties = 1
    for i in range(1, taken):
        s = candidates[lo + sample[i]]
        if queue_len[s] < queue_len[chosen]:
            chosen = s
            ties = 1
        elif queue_len[s] == queue_len[chosen]:
            ties += 1
            if rng.random() * ties < 1.0:
                chosen = s
    return chosen


@njit(cache=True, inline="always")
def speed_weighted_server(candidates, lo, hi, cumulative_speed, rng):
    """weighted-random: one of ``candidates[lo:hi]`` with probability proportional to its speed;
    ``cumulative_speed[lo:hi]`` is the running sum of their speeds (binary search, O(log degree))."""
    u = rng.random() * cumulative_speed[hi - 1]
    left = lo
    right = hi - 1
    while left < right:
        middle = (left + right) // 2
        if cumulative_speed[middle] > u:
            right = middle
        else:
            left = middle + 1
    return candidates[left]
