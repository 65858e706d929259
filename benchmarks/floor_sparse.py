"""A minimal hand-written numba kernel of a sparse-graph system: the speed floor of that path.

The system of Fig. 3 of paper 000: N servers in C speed classes, L job types (ports) with
Poisson arrivals of rates ``port_rate``, a bipartite compatibility graph in CSR form (port k may
use the servers ``indices[indptr[k]:indptr[k + 1]]``), single-server FCFS queues with a buffer of
``buffer`` jobs (the one in service counted; an arrival routed to a full server is lost),
exponential job sizes of mean 1 (service time = size / speed). Policy JFSQ: the shortest
compatible queue, ties to the fastest class, then uniformly at random. The kernel runs until
``jobs`` jobs have completed and returns the mean response time of those jobs, the number lost
and the number of events (arrivals + departures); nothing else is measured.

Data structures:

* the port of an arrival: Walker's alias table over the port rates, one uniform number, O(1);
* JFSQ: one scan of the port's servers for the least key q * C + class, writing the servers that
  attain it into a small buffer as it goes, then one uniform number picks one of them;
* next departure: a binary tournament tree of (time, server);
* FCFS queues: a ring of ``RING`` arrival times per server (the buffer is at most ``RING``).

Job sizes are drawn when service starts (i.i.d. sizes, and JFSQ does not look at them).
"""

import time

import numpy as np
from numba import njit

RING = 8  # ring capacity per server, a power of two >= the buffer


def alias_table(rates):
    """Walker's alias table (Vose's construction): bucket i is kept with probability keep[i], else
    its alias; a uniform u gives bucket int(u n) and the fraction u n - i decides."""
    n = len(rates)
    scaled = np.asarray(rates, dtype=np.float64) * n / np.sum(rates)
    keep = np.ones(n)
    alias = np.arange(n, dtype=np.int64)
    small = [i for i in range(n) if scaled[i] < 1.0]
    large = [i for i in range(n) if scaled[i] >= 1.0]
    while small and large:
        s, g = small.pop(), large.pop()
        keep[s] = scaled[s]
        alias[s] = g
        scaled[g] -= 1.0 - scaled[s]
        (small if scaled[g] < 1.0 else large).append(g)
    return keep, alias


@njit(cache=True)
def _simulate_jfsq(indptr, indices, speed, speed_class, n_classes, keep, alias, arrival_rate, buffer, jobs, rng):
    n_servers = len(speed)
    n_ports = len(keep)
    inv_speed = 1.0 / speed
    inv_rate = 1.0 / arrival_rate
    n_leaves = 1
    while n_leaves < n_servers:
        n_leaves *= 2
    tree_time = np.full(2 * n_leaves, np.inf)
    tree_server = np.zeros(2 * n_leaves, np.int64)
    for i in range(n_leaves):
        tree_server[n_leaves + i] = i
    for i in range(n_leaves - 1, 0, -1):
        tree_server[i] = tree_server[2 * i]
    key = speed_class.astype(np.int64).copy()  # q * C + class, q = 0
    queue_len = np.zeros(n_servers, np.int64)
    head = np.zeros(n_servers, np.int64)
    ring = np.empty((n_servers, RING))
    ties = np.empty(n_servers + 1, np.int64)

    next_arrival = rng.standard_exponential() * inv_rate
    completed = 0
    arrivals = 0
    lost = 0
    total_response = 0.0
    while completed < jobs:
        t_dep = tree_time[1]
        if next_arrival < t_dep:
            t = next_arrival
            arrivals += 1
            x = rng.random() * n_ports
            k = int(x)
            if x - k >= keep[k]:
                k = alias[k]
            lo = indptr[k]
            hi = indptr[k + 1]
            least = key[indices[lo]]
            n_ties = 0
            for i in range(lo, hi):
                s = indices[i]
                v = key[s]
                at = 0 if v < least else n_ties
                ties[at] = s
                n_ties = at + (v <= least)
                least = min(least, v)
            s = ties[min(int(rng.random() * n_ties), n_ties - 1)]
            next_arrival = t + rng.standard_exponential() * inv_rate
            q = queue_len[s]
            if q >= buffer:
                lost += 1
                continue
            ring[s, (head[s] + q) & (RING - 1)] = t
            queue_len[s] = q + 1
            key[s] += n_classes
            if q == 0:
                x = t + rng.standard_exponential() * inv_speed[s]
                i = n_leaves + s
                while i >= 1 and x < tree_time[i]:
                    tree_time[i] = x
                    tree_server[i] = s
                    i >>= 1
        else:
            t = t_dep
            s = tree_server[1]
            h = head[s]
            total_response += t - ring[s, h]
            head[s] = (h + 1) & (RING - 1)
            completed += 1
            q = queue_len[s] - 1
            queue_len[s] = q
            key[s] -= n_classes
            x = t + rng.standard_exponential() * inv_speed[s] if q > 0 else np.inf
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
    return total_response / completed, lost, arrivals + completed


def run_floor_sparse(indptr, indices, speed, port_rate, buffer, jobs, seed, clock=time.process_time):
    """Run the sparse JFSQ floor until ``jobs`` jobs have completed (the speed classes are read from
    the speeds, class 0 the fastest). Returns ``(mean_response_time, lost, events, seconds)``,
    ``seconds`` by ``clock`` around the compiled kernel alone."""
    speed = np.ascontiguousarray(speed, dtype=np.float64)
    classes = np.unique(speed)[::-1]
    speed_class = np.searchsorted(-classes, -speed).astype(np.int64)
    keep, alias = alias_table(port_rate)
    if buffer > RING:
        raise ValueError(f"buffer at most {RING}")
    args = (
        np.ascontiguousarray(indptr, dtype=np.int64),
        np.ascontiguousarray(indices, dtype=np.int64),
        speed,
        speed_class,
        len(classes),
        keep,
        alias,
        float(np.sum(port_rate)),
        int(buffer),
    )
    _simulate_jfsq(*args, 10, np.random.default_rng(0))
    rng = np.random.default_rng(seed)
    t0 = clock()
    mean_response, lost, events = _simulate_jfsq(*args, int(jobs), rng)
    return float(mean_response), int(lost), int(events), clock() - t0
