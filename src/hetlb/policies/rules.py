"""The decision rules, as small @njit functions the kernels call and tests can call alone.

A ranking policy gives each compatible server a *selection key* computed from its queue length
(counting the job in service), its speed class (0 = fastest) and its speed; the job goes to a
server with the least key, ties uniformly at random. The keys encode the tie-breaking rules of
docs/reference/policies.md, so the same definition serves the O(log N) tree of the complete graph and the
O(degree) scan of a sparse graph.

The functions take scalars and plain arrays and use every array argument on every path, so numba
needs no reference counting in them and LLVM inlines them into the event loop (hence the one
loop of sample_without_replacement for both of its cases); selection_key divides under numpy's
error model, which has no exception path.
"""

import numpy as np

from hetlb.jit import njit
from hetlb.policies.registry import JFIQ, JFSQ, JIQ, JLU, JSQ, JSQ_FIQ, JSQ_LISF, JSSQ, LEW, SED

KEYED_CODES = (JSQ, JFSQ, JSSQ, JIQ, JFIQ, SED, JSQ_FIQ, JSQ_LISF, JLU, LEW)
"""The codes :func:`selection_key` has a key for (jsq's, the queue length, is its last line): the
ranking policies every kernel that ranks by key can run."""


@njit(error_model="numpy")
def selection_key(policy_code, queue_len, speed_class, n_classes, speed, idle_since):
    """Key of one server; the policy joins a least-key compatible server, ties at random.

    jsq, pod, jlu: q.  jfsq: (q, class).  jssq: (q, -class).  sed: (q + 1) / speed.  lew: q / speed.
    jiq: idle first.  jfiq: idle servers by class, every busy server equal.
    jsq-fiq: idle servers by class, then busy ones by q.  jsq-lisf: idle servers by the time they
    became idle (``idle_since``, mapped into [-1, 0) by -1 / (1 + t), which keeps its order), then
    busy ones by q.
    """
    if policy_code == JSQ_FIQ:
        return float(speed_class) if queue_len == 0 else float(n_classes + queue_len - 1)
    if policy_code == JSQ_LISF:
        return -1.0 / (1.0 + idle_since) if queue_len == 0 else float(queue_len)
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
    if policy_code == LEW:
        return queue_len / speed
    return float(queue_len)


@njit(error_model="numpy")
def slot_selection_key(policy_code, queue_len, concurrency, rate_new, delay, capacity, idle_since):
    """Key of one server that serves up to ``concurrency`` = c jobs at once (hetlb.model.servers);
    the policy joins a least-key compatible server, ties at random. The server holds n =
    ``queue_len`` jobs; it has a *free slot* when n < c (the "idle" of jiq, jfiq, jsq-fiq and
    jsq-lisf); ``rate_new`` = mu phi(b') / b' with b' = min(n + 1, c) is the rate a job sent
    there would receive (the "fastest" of jfsq, jfiq and jsq-fiq, the "slowest" of jssq);
    ``delay`` = (n + 1) / (mu phi(min(n + 1, c))) is sed's expected delay; ``capacity`` =
    mu phi(c). With c = 1 these order servers as :func:`selection_key` does.

    jsq, pod: n.  jfsq: n, then the fastest rate_new.  jssq: n, then the slowest.  sed: delay.
    jiq: a free slot first.  jfiq: free slots by the fastest rate_new, every full server equal.
    jsq-fiq: free slots by the fastest rate_new, then full servers by n.  jsq-lisf: free slots by
    the time they last had none (``idle_since``), then full servers by n.  jlu: n / c.  lew: n /
    capacity. The secondary order rides in [0, 1/2) beside an integer n: 1 / (2 + rate_new)
    falls as the rate rises, and equal rates give equal keys.
    """
    free = queue_len < concurrency
    faster_first = 1.0 / (2.0 + rate_new)
    if policy_code == JSQ_FIQ:
        return faster_first - 1.0 if free else float(queue_len)
    if policy_code == JSQ_LISF:
        return -1.0 / (1.0 + idle_since) if free else float(queue_len)
    if policy_code == JFSQ:
        return queue_len + faster_first
    if policy_code == JSSQ:
        return queue_len + 0.5 - faster_first
    if policy_code == SED:
        return delay
    if policy_code == JIQ:
        return 0.0 if free else 1.0
    if policy_code == JFIQ:
        return faster_first if free else 1.0
    if policy_code == JLU:
        return queue_len / concurrency
    if policy_code == LEW:
        return queue_len / capacity
    return float(queue_len)


@njit
def slot_falls_back_to_uniform(policy_code, least_key):
    """jiq and jfiq on multi-slot servers with no free slot among the compatible servers send the
    job uniformly at random instead (the keys of :func:`slot_selection_key`)."""
    return (policy_code == JIQ or policy_code == JFIQ) and least_key >= 1.0


@njit
def selection_keys(policy_code, queue_len, speed_class, n_classes, speed, idle_since):
    """The selection key of every server, from its queue length, speed class, speed and the time
    it became idle (arrays)."""
    keys = np.empty(len(queue_len))
    for s in range(len(queue_len)):
        keys[s] = selection_key(policy_code, queue_len[s], speed_class[s], n_classes, speed[s], idle_since[s])
    return keys


@njit
def falls_back_to_uniform(policy_code, least_key, n_classes):
    """jiq and jfiq with no idle compatible server send the job uniformly at random instead."""
    if policy_code == JIQ:
        return least_key >= 1.0
    if policy_code == JFIQ:
        return least_key >= n_classes
    return False


@njit
def uniform_index(rng, n):
    """An index uniform on 0..n-1."""
    i = int(rng.random() * n)
    return i if i < n else n - 1


@njit
def least_key_server(candidates, lo, hi, key, ties, rng):
    """Scan the servers ``candidates[lo:hi]`` for one with the least ``key[s]`` (its selection key),
    ties uniformly at random. Returns (server, least key).

    One scan writes each server to ``ties`` (at least hi - lo entries) at the end of those with the
    least key so far, or at its start when its key is a new least, without a branch; then one
    uniform number picks the one of rank floor(u k) of the k tied servers, in scan order (none is
    drawn when k = 1). Reservoir sampling would draw one number per tie."""
    least = key[candidates[lo]]
    count = 0
    for i in range(lo, hi):
        s = candidates[i]
        k = key[s]
        at = 0 if k < least else count
        ties[at] = s
        count = at + (k <= least)
        least = min(least, k)
    if count == 1:
        return ties[0], least
    return ties[uniform_index(rng, count)], least


@njit
def sample_without_replacement(n, d, sample, rng):
    """Write min(d, n) distinct indices uniform on 0..n-1 into ``sample``: all of them in order when
    d >= n, else by Floyd's algorithm; return how many."""
    taken = min(d, n)
    for i in range(taken):
        if d >= n:
            sample[i] = i
            continue
        j = n - d + i  # Floyd: a uniform index of 0..j, or j itself if that one is taken already
        t = uniform_index(rng, j + 1)
        for k in range(i):
            if sample[k] == t:
                t = j
                break
        sample[i] = t
    return taken


@njit
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


@njit
def speed_weighted_server(candidates, lo, hi, cumulative_speed, rng):
    """weighted-random: one of ``candidates[lo:hi]`` with probability proportional to its speed;
    ``cumulative_speed[lo:hi]`` is the running sum of their speeds (binary search, O(log degree))."""
    u = rng.random() * cumulative_speed[hi - 1]
    left = lo
    right = hi - 1
    while left < right:
        middle = (left + right) // 2
        above = cumulative_speed[middle] > u
        right = middle if above else right
        left = left if above else middle + 1
    return candidates[left]


@njit
def fast_slow_server(candidates, lo, first_slow, hi, sample_sizes, route_probabilities, queue_len, sample, rng):
    """jsq-df-ds (JSQ(d_F, d_S) of Gardner et al., "JSQ-(2,2)" in 000 App. D.1) on the fast servers
    ``candidates[lo:first_slow]`` and the slow ones ``candidates[first_slow:hi]``.

    Sample d_F fast and d_S slow servers (``sample_sizes``) and take the shortest of each sample,
    ties at random. An idle sampled fast server gets the job; else an idle sampled slow server gets
    it with probability p_S, the fast one with 1 - p_S; else the fast one with probability p_F, the
    slow one with 1 - p_F (``route_probabilities`` = (p_F, p_S)). A side with no compatible server
    is never chosen.
    """
    if first_slow == hi:
        return power_of_d_server(candidates, lo, hi, sample_sizes[0], queue_len, sample, rng)
    slow = power_of_d_server(candidates, first_slow, hi, sample_sizes[1], queue_len, sample, rng)
    if first_slow == lo:
        return slow
    fast = power_of_d_server(candidates, lo, first_slow, sample_sizes[0], queue_len, sample, rng)
    if queue_len[fast] == 0:
        return fast
    probability_slow = route_probabilities[1] if queue_len[slow] == 0 else 1.0 - route_probabilities[0]
    return slow if rng.random() < probability_slow else fast
