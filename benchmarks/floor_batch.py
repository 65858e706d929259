"""A minimal hand-written numba kernel of limited processor sharing: the speed floor of the batch path.

The scenario: the canonical speeds (run_benchmarks.py, ``canonical_speeds``: half of the N servers
at speed 1, half at 0.5) at N = 100 and N = 10,000, every server with concurrency c = 8 and the
saturating rate curve of alpha = 0.2, phi(b) = b / (1 + alpha (b - 1)); Poisson arrivals at load
0.9 of the capacity sum(mu_s phi(c)), exponential job sizes of mean 1, infinite buffers, jsq (the
least number n_s of jobs at the server, ties uniformly at random), from empty, until ``jobs`` jobs
have completed. With n_s jobs at s, the b = min(n_s, c) earliest arrived are in service, each
receiving work at rate mu_s phi(b) / b; the others wait FIFO; a job of size x leaves when it has
received x units of work. The kernel counts events (arrivals + departures) and sums the response
times; nothing else is measured.

Data structures:

* per server, a virtual clock ``virtual[s]``: the work attained by each job in service since the
  server last emptied, advanced at the events of s by mu_s phi(b) / b per unit time (all jobs in
  service advance alike);
* per server, a binary heap of at most c entries (finishing threshold = the virtual clock at the
  job's entry into service + its size, arrival time), least threshold at the root; a departure
  with jobs waiting replaces the root by the entering job and sifts it down (one pass, not two);
* per server, a ring of the arrival times of its waiting jobs (FIFO); the driver doubles every
  ring when the shortest queue fills its own (rare under jsq);
* the next departure of s, t + (least threshold - virtual[s]) / (mu_s phi(b) / b), moves whenever
  b or the least threshold changes; the earliest over servers is kept in a 4-ary tournament tree
  of (time, server): a later time climbs only while s is the node's winner, an earlier one only
  while it beats the node;
* jsq: the servers in a permutation sorted by n_s, with the start of each value's block; the
  shortest queue is a uniform draw in the first block and a change of n_s by one is one swap.

Job sizes are drawn when service starts (i.i.d. sizes, and jsq does not look at them).

    python benchmarks/floor_batch.py       # events per CPU second at N = 100 and N = 10,000
"""

import time

import numpy as np
from numba import njit
from run_benchmarks import LOAD, SEED, canonical_speeds

from hetlb.progress import working

CONCURRENCY = 8
ALPHA = 0.2
GROW_RINGS = 1
"""_advance() status: the shortest queue's ring of waiting jobs is full and the next arrival joins it."""


def saturating_phi(b, alpha):
    """phi(b) = b / (1 + alpha (b - 1)) of the saturating curve (alpha 0: independent, 1: shared)."""
    return b / (1.0 + alpha * (b - 1.0))


def _grow_rings(ring, ring_head, waiting):
    """Double the ring capacity of every server, unrolling each ring to start at 0."""
    n_servers, cap = ring.shape
    grown = np.empty((n_servers, 2 * cap))
    for s in range(n_servers):
        for i in range(waiting[s]):
            grown[s, i] = ring[s, (ring_head[s] + i) & (cap - 1)]
        ring_head[s] = 0
    return grown


def _tournament_tree(n_servers):
    """A 4-ary tournament tree over the servers, every leaf at +inf: node i has the children
    4 i + 1 .. 4 i + 4, the leaves (one per server, padded to a power of 4) start at first_leaf;
    a node holds the least time of its subtree and the server of that time."""
    n_leaves = 4
    while n_leaves < n_servers:
        n_leaves *= 4
    first_leaf = (n_leaves - 1) // 3
    tree_time = np.full(first_leaf + n_leaves, np.inf)
    tree_server = np.zeros(first_leaf + n_leaves, np.int64)
    tree_server[first_leaf:] = np.arange(n_leaves)
    for i in range(first_leaf - 1, -1, -1):
        tree_server[i] = tree_server[4 * i + 1]
    return tree_time, tree_server


def simulate_batch(speed, arrival_rate, concurrency, alpha, jobs, rng):
    """(events, sum of response times, completed jobs) of ``jobs`` completed jobs from empty on
    servers of speeds ``speed`` with concurrency ``concurrency`` and the saturating curve of
    ``alpha``. The loop (_advance) never replaces an array; it returns when the rings must grow,
    which this driver does before calling it again."""
    speed = np.ascontiguousarray(speed, dtype=np.float64)
    n_servers = speed.shape[0]
    c = int(concurrency)
    b = np.arange(1, c + 1, dtype=np.float64)
    share = np.zeros(c + 1)  # phi(b) / b, the work rate of each job in service per unit speed
    share[1:] = saturating_phi(b, alpha) / b
    inv_share = np.zeros(c + 1)
    inv_share[1:] = 1.0 / share[1:]
    tree_time, tree_server = _tournament_tree(n_servers)
    cap = 4
    ring = np.empty((n_servers, cap))
    ring_head = np.zeros(n_servers, np.int64)
    queue_len = np.zeros(n_servers, np.int64)
    start = np.full(c + cap + 2, n_servers)
    start[0] = 0
    state = (
        speed,
        1.0 / speed,
        share,
        inv_share,
        np.zeros(n_servers),  # virtual clock
        np.zeros(n_servers),  # time of the virtual clock's last update
        np.empty(n_servers * c),  # heap thresholds, c per server
        np.empty(n_servers * c),  # heap arrival times
        queue_len,
        ring_head,
        np.arange(n_servers),  # jsq order
        np.arange(n_servers),  # position in the order
        tree_time,
        tree_server,
    )
    counters = np.zeros(3, np.int64)  # completed, arrivals, min_len
    clock = np.array([rng.standard_exponential() / arrival_rate, 0.0])  # next arrival, sum of responses
    while _advance(*state, ring, start, 1.0 / arrival_rate, jobs, rng, counters, clock) == GROW_RINGS:
        ring = _grow_rings(ring, ring_head, np.maximum(queue_len - c, 0))
        grown = np.full(c + ring.shape[1] + 2, n_servers)
        grown[: start.shape[0]] = start
        start = grown
    return int(counters[0] + counters[1]), float(clock[1]), int(counters[0])


@njit
def _heap_push(threshold, arrival, base, size, x, a):
    """Insert (x, a) into the heap of ``size`` entries at threshold[base:], arrival[base:]."""
    i = size
    while i > 0:
        up = (i - 1) >> 1
        y = threshold[base + up]
        if y <= x:
            break
        threshold[base + i] = y
        arrival[base + i] = arrival[base + up]
        i = up
    threshold[base + i] = x
    arrival[base + i] = a


@njit
def _heap_replace_root(threshold, arrival, base, size, x, a):
    """Put (x, a) in the root's place of the heap of ``size`` entries and sift it down."""
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        y = threshold[base + child]
        if child + 1 < size:
            z = threshold[base + child + 1]
            child += z < y
            y = min(y, z)
        if x <= y:
            break
        threshold[base + i] = y
        arrival[base + i] = arrival[base + child]
        i = child
    threshold[base + i] = x
    arrival[base + i] = a


@njit
def _move_departure(tree_time, tree_server, first_leaf, s, due):
    """Set the next departure of server s to ``due``: an earlier time climbs while it beats the
    node, a later one while s is the node's winner (then the node takes the least of its children)."""
    i = first_leaf + s
    if due < tree_time[i]:
        while True:
            tree_time[i] = due
            tree_server[i] = s
            if i == 0:
                return
            i = (i - 1) >> 2
            if not due < tree_time[i]:
                return
    tree_time[i] = due
    while i > 0:
        i = (i - 1) >> 2
        if tree_server[i] != s:
            return
        k = 4 * i + 1
        u0 = tree_time[k]
        u1 = tree_time[k + 1]
        u2 = tree_time[k + 2]
        u3 = tree_time[k + 3]
        k01 = k + (u1 < u0)
        m01 = min(u0, u1)
        k23 = k + 2 + (u3 < u2)
        m23 = min(u2, u3)
        tree_time[i] = min(m01, m23)
        tree_server[i] = tree_server[k23 if m23 < m01 else k01]


@njit(cache=True)
def _advance(
    speed, inv_speed, share, inv_share, virtual, updated, heap_threshold, heap_arrival, queue_len,
    ring_head, order, position, tree_time, tree_server, ring, start, inv_rate, jobs, rng, counters,
    clock,
):  # fmt: skip
    c = share.shape[0] - 1
    first_leaf = (tree_time.shape[0] - 1) // 4
    cap = ring.shape[1]
    completed, arrivals, min_len = counters[0], counters[1], counters[2]
    next_arrival, total_response = clock[0], clock[1]
    status = 0
    while completed < jobs:
        t_dep = tree_time[0]
        if next_arrival < t_dep:
            if min_len - c == cap:  # the shortest queue's ring is full: grow first
                status = GROW_RINGS
                break
            t = next_arrival
            arrivals += 1
            next_arrival = t + rng.standard_exponential() * inv_rate
            # jsq: a uniformly random server among those with min_len jobs, moved to block min_len + 1.
            lo = start[min_len]
            last = start[min_len + 1] - 1
            p = lo + int(rng.random() * (last - lo + 1)) if last > lo else lo
            s = order[p]
            other = order[last]
            order[last] = s
            order[p] = other
            position[other] = p
            position[s] = last
            start[min_len + 1] = last
            if last == lo:
                min_len += 1
            n = queue_len[s]
            queue_len[s] = n + 1
            if n >= c:
                ring[s, (ring_head[s] + n - c) & (cap - 1)] = t
                continue
            # Service starts: the virtual clock advances at the old b = n, the threshold is pushed.
            v = virtual[s] + (t - updated[s]) * speed[s] * share[n]
            virtual[s] = v
            updated[s] = t
            base = s * c
            _heap_push(heap_threshold, heap_arrival, base, n, v + rng.standard_exponential(), t)
            due = t + (heap_threshold[base] - v) * inv_speed[s] * inv_share[n + 1]
        else:
            t = t_dep
            s = tree_server[0]
            base = s * c
            total_response += t - heap_arrival[base]
            completed += 1
            v = heap_threshold[base]  # the virtual clock reached the least threshold
            updated[s] = t
            n = queue_len[s] - 1
            queue_len[s] = n
            # jsq: move s from block n + 1 to the end of block n.
            first = start[n + 1]
            p = position[s]
            other = order[first]
            order[first] = s
            order[p] = other
            position[other] = p
            position[s] = first
            start[n + 1] = first + 1
            if n < min_len:
                min_len = n
            if n == 0:
                virtual[s] = 0.0
                due = np.inf
            else:
                virtual[s] = v
                if n >= c:  # the first waiting job enters service in the root's place
                    h = ring_head[s]
                    ring_head[s] = (h + 1) & (cap - 1)
                    _heap_replace_root(
                        heap_threshold, heap_arrival, base, c, v + rng.standard_exponential(), ring[s, h]
                    )
                    b = c
                else:  # the last entry takes the root's place
                    _heap_replace_root(
                        heap_threshold, heap_arrival, base, n, heap_threshold[base + n], heap_arrival[base + n]
                    )
                    b = n
                due = t + (heap_threshold[base] - v) * inv_speed[s] * inv_share[b]
        _move_departure(tree_time, tree_server, first_leaf, s, due)
    counters[0], counters[1], counters[2] = completed, arrivals, min_len
    clock[0], clock[1] = next_arrival, total_response
    return status


def scenario(n_servers):
    """(speeds, arrival rate) of the scenario at N = ``n_servers``: load 0.9 of sum(mu_s phi(c))."""
    speed = canonical_speeds(n_servers)
    return speed, LOAD * speed.sum() * saturating_phi(CONCURRENCY, ALPHA)


def run_floor_batch(n_servers, jobs, seed=SEED, clock=time.thread_time):
    """Run the scenario at N = ``n_servers`` until ``jobs`` jobs have completed. Returns
    ``(events, seconds)``, ``seconds`` by ``clock`` around the compiled kernel alone (compiled, or
    loaded from the cache, by a short run first)."""
    speed, rate = scenario(n_servers)
    simulate_batch(speed, rate, CONCURRENCY, ALPHA, 10, np.random.default_rng(0))
    rng = np.random.default_rng(seed)
    t0 = clock()
    events, _, _ = simulate_batch(speed, rate, CONCURRENCY, ALPHA, int(jobs), rng)
    return events, clock() - t0


if __name__ == "__main__":
    with working("benchmarks/floor_batch.py ", live=False):
        for n in (100, 10_000):
            events, seconds = run_floor_batch(n, 1_000_000)
            print(f"N={n}: {events} events in {seconds:.3f} s of CPU, {events / seconds / 1e6:.2f} M events/s")
