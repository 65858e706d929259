"""A minimal hand-written numba kernel of the canonical benchmark system: the speed floor.

N single-server FCFS queues with speeds ``speed[s]``, one Poisson stream of rate
``arrival_rate``, exponential job sizes of mean 1 (service time = size / speed), infinite
buffers, JSQ (queue length counts the job in service, ties uniformly at random). The kernel
runs until ``jobs`` jobs have completed and returns only the mean response time of those jobs
and the number of events (arrivals + departures). Nothing else is measured, so it is the
lower bound on the time per event that a general simulator of the same model can reach.

Data structures (all O(1) or O(log N) per event; memory does not grow with ``jobs``):

* JSQ: ``order`` is a permutation of the servers sorted by queue length, and
  ``start[q]`` is the first position holding a server with ``q`` jobs (a bucketed counting
  sort). A shortest queue is drawn uniformly from the block ``start[min_len]:start[min_len+1]``
  with one uniform number; moving a server to the next or previous block is one swap.
  This is O(1) and measured as fast as a linear scan already at N = 10.
* Next departure: for N <= ``SCAN_MAX_SERVERS`` a linear scan for the minimum (done only
  after departures; an arrival can only lower one departure time), otherwise a tournament
  tree over servers storing (min time, argmin) per node.
* FCFS queues: a ring buffer of arrival times per server (``arrival_ring[s, :]``), whose
  capacity doubles for all servers when the shortest queue fills it (rare: JSQ joins the shortest).
  The compiled loop never replaces an array (numba would count references to a variable that may
  be replaced, on every event); it returns to its driver, which grows the rings.

Job sizes are drawn when service starts (sizes are i.i.d. and the policy never looks at
them, so this is the same model).
"""

import time

import numpy as np
from numba import njit

from hetlb.progress import working

# Up to this many servers a linear scan for the next departure beats the tournament tree.
SCAN_MAX_SERVERS = 32


GROW_RINGS = 1
"""_advance() status: every queue holds the ring's capacity, the next arrival needs more."""


def _grow_rings(arrival_ring, ring_head, queue_len):
    """Double the ring capacity of every server, unrolling each ring to start at 0."""
    n_servers, cap = arrival_ring.shape
    grown = np.empty((n_servers, 2 * cap))
    for s in range(n_servers):
        for i in range(queue_len[s]):
            grown[s, i] = arrival_ring[s, (ring_head[s] + i) & (cap - 1)]
        ring_head[s] = 0
    return grown


def _simulate_jsq(speed, arrival_rate, jobs, rng, scan_departures):
    """(mean response time, events) of ``jobs`` completed jobs from empty. The loop (_advance)
    never replaces an array, so that numba counts no references in it; it returns when the rings
    must grow, which this driver does before calling it again (rare)."""
    n_servers = speed.shape[0]
    # Tournament tree: leaves n_leaves + s hold the next departure time of server s.
    n_leaves = 1
    while n_leaves < n_servers:
        n_leaves *= 2
    tree_time = np.full(2 * n_leaves, np.inf)
    tree_server = np.zeros(2 * n_leaves, np.int64)
    tree_server[n_leaves : n_leaves + n_leaves] = np.arange(n_leaves)
    for i in range(n_leaves - 1, 0, -1):
        tree_server[i] = tree_server[2 * i]
    departure = np.full(n_servers, np.inf)  # used by the linear scan
    queue_len = np.zeros(n_servers, np.int64)
    ring_head = np.zeros(n_servers, np.int64)
    cap = 4
    arrival_ring = np.empty((n_servers, cap))
    # JSQ buckets.
    order = np.arange(n_servers)
    position = np.arange(n_servers)
    start = np.full(cap + 2, n_servers)
    start[0] = 0
    counters = np.zeros(4, np.int64)  # completed, arrivals, min_len, next_server
    clock = np.array([rng.standard_exponential() / arrival_rate, 0.0])  # next arrival, total response
    inv_speed = 1.0 / speed
    while _advance(
        inv_speed, 1.0 / arrival_rate, jobs, rng, scan_departures, tree_time, tree_server, departure,
        queue_len, ring_head, arrival_ring, order, position, start, counters, clock,
    ) == GROW_RINGS:  # fmt: skip
        arrival_ring = _grow_rings(arrival_ring, ring_head, queue_len)
        cap *= 2
        grown = np.full(cap + 2, n_servers)
        grown[: start.shape[0]] = start
        start = grown
    return clock[1] / counters[0], counters[0] + counters[1]


@njit(cache=True)
def _advance(
    inv_speed, inv_rate, jobs, rng, scan_departures, tree_time, tree_server, departure, queue_len,
    ring_head, arrival_ring, order, position, start, counters, clock,
):  # fmt: skip
    n_servers = inv_speed.shape[0]
    n_leaves = tree_time.shape[0] // 2
    cap = arrival_ring.shape[1]
    completed, arrivals, min_len, next_server = counters[0], counters[1], counters[2], counters[3]
    next_arrival, total_response = clock[0], clock[1]
    status = 0
    while completed < jobs:
        t_dep = departure[next_server] if scan_departures else tree_time[1]
        if next_arrival < t_dep:
            if min_len == cap:  # the shortest queue fills its ring: grow first
                status = GROW_RINGS
                break
            t = next_arrival
            arrivals += 1
            # JSQ: a uniformly random server among those with min_len jobs.
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
            q = queue_len[s]
            arrival_ring[s, (ring_head[s] + q) & (cap - 1)] = t
            queue_len[s] = q + 1
            if q == 0:
                x = t + rng.standard_exponential() * inv_speed[s]
                if scan_departures:
                    departure[s] = x
                    if x < t_dep:
                        next_server = s
                else:
                    i = n_leaves + s
                    while i >= 1 and x < tree_time[i]:
                        tree_time[i] = x
                        tree_server[i] = s
                        i >>= 1
            next_arrival = t + rng.standard_exponential() * inv_rate
        else:
            t = t_dep
            s = next_server if scan_departures else tree_server[1]
            h = ring_head[s]
            total_response += t - arrival_ring[s, h]
            ring_head[s] = (h + 1) & (cap - 1)
            completed += 1
            q = queue_len[s] - 1
            queue_len[s] = q
            # Move s from block q + 1 to the end of block q.
            first = start[q + 1]
            p = position[s]
            other = order[first]
            order[first] = s
            order[p] = other
            position[other] = p
            position[s] = first
            start[q + 1] = first + 1
            if q < min_len:
                min_len = q
            x = t + rng.standard_exponential() * inv_speed[s] if q > 0 else np.inf
            if scan_departures:
                departure[s] = x
                best = departure[0]
                next_server = 0
                for r in range(1, n_servers):
                    if departure[r] < best:
                        best = departure[r]
                        next_server = r
            else:
                i = n_leaves + s
                tree_time[i] = x
                while i > 1:
                    left = i & -2
                    a = tree_time[left]
                    b = tree_time[left + 1]
                    i >>= 1
                    if a <= b:
                        tree_time[i] = a
                        tree_server[i] = tree_server[left]
                    else:
                        tree_time[i] = b
                        tree_server[i] = tree_server[left + 1]
    counters[0], counters[1], counters[2], counters[3] = completed, arrivals, min_len, next_server
    clock[0], clock[1] = next_arrival, total_response
    return status


def run_minimal(speeds, arrival_rate, jobs, seed):
    """Run the minimal JSQ kernel until ``jobs`` jobs have completed.

    Returns ``(mean_response_time, events, seconds)``; ``seconds`` is the wall time of the
    kernel alone (it is compiled, or loaded from the cache, by a short warm-up run first).
    """
    speed = np.ascontiguousarray(speeds, dtype=np.float64)
    scan = speed.shape[0] <= SCAN_MAX_SERVERS
    _simulate_jsq(speed, float(arrival_rate), 10, np.random.default_rng(0), scan)
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    mean_response, events = _simulate_jsq(speed, float(arrival_rate), int(jobs), rng, scan)
    seconds = time.perf_counter() - t0
    return float(mean_response), int(events), seconds


if __name__ == "__main__":
    with working("benchmarks/minimal_kernel.py ", live=False):
        for n in (10, 1000):
            speeds = np.repeat([1.0, 0.5], n // 2)
            m, ev, sec = run_minimal(speeds, 0.9 * speeds.sum(), 1_000_000, seed=1)
            print(f"N={n}: mean response {m:.4f}, {ev} events in {sec:.3f} s, {ev / sec:,.0f} events/s")
