"""The floor of a simulation with prefix caches: the simplest numba loop of the model of
docs/background/prefix-caches.md on servers of concurrency 1 with one dispatcher, for the speed of
hetlb's loop with caches (floor_ratio.py, paths ``cache-10`` and ``cache-1000``).

The model, as the loop runs it: N single-server FCFS queues of speeds ``speed[s]``, one Poisson
stream, JSQ (the job in service counts, ties uniformly at random); each job's prompt is a shared
prefix k of B blocks (ids k B .. k B + B - 1), k drawn with Zipf popularity by an alias table, then
U blocks of its own (ids K B + r U + u for the r-th arrival); each server keeps an LRU of its last
C blocks. At the start of a job's service its hit h is the leading part of its chain in the cache,
touched (its head most recent); its work is W (L - h) of prefill then an exponential size of mean
1; at the end of its prefill its L blocks are touched together, the missing ones inserted in the
place of the least recently used ones. Nothing else touches a server's cache while it serves a
job, so this loop inserts them at the job's departure, which leaves the same cache.

It is the floor for C >= B + U only: then the blocks of the job in service (those a job holds in
the model, never evicted) are the most recent ones whenever an insertion evicts, so the loop keeps
no count of held blocks; and it inserts the missing blocks from the tail to the head, each at the
front, which evicts the same blocks as head first. Only the mean response time and the hit ratio
are kept.

The data: per server, a hash table of 2^k >= 2 C entries (block id -> node, linear probing,
deletion by backward shift) and C nodes in a doubly linked recency list; JSQ by the bucketed
counting sort of minimal_kernel.py (O(1)); the next departure by a scan (N <= 32) or a tournament
tree; the waiting jobs' arrival times, prefixes and numbers in a ring per server.
"""

import time

import numpy as np
from numba import njit

SCAN_MAX_SERVERS = 32
GROW_RINGS = 1


def alias(weight):
    """Walker's alias table (keep, alias) of ``weight`` (Vose's construction)."""
    n = len(weight)
    scaled = np.asarray(weight, dtype=np.float64) * n / np.sum(weight)
    keep, other = np.ones(n), np.arange(n)
    small = [k for k in range(n) if scaled[k] < 1.0]
    large = [k for k in range(n) if scaled[k] >= 1.0]
    while small and large:
        s, g = small.pop(), large.pop()
        keep[s], other[s] = scaled[s], g
        scaled[g] -= 1.0 - scaled[s]
        (small if scaled[g] < 1.0 else large).append(g)
    return keep, other


@njit(cache=True, inline="always")
def slot_hash(block, mask):
    z = np.uint64(block) * np.uint64(0x9E3779B97F4A7C15)
    return np.int64((z ^ (z >> np.uint64(29))) & np.uint64(mask))


@njit(cache=True, inline="always")
def lookup(table_key, table_node, base, mask, block):
    j = slot_hash(block, mask)
    while True:
        key = table_key[base + j]
        if key == block:
            return table_node[base + j]
        if key < 0:
            return -1
        j = (j + 1) & mask


@njit(cache=True, inline="always")
def table_put(table_key, table_node, base, mask, block, node):
    j = slot_hash(block, mask)
    while table_key[base + j] >= 0:
        j = (j + 1) & mask
    table_key[base + j] = block
    table_node[base + j] = node


@njit(cache=True, inline="always")
def table_delete(table_key, table_node, base, mask, block):
    i = slot_hash(block, mask)
    while table_key[base + i] != block:
        i = (i + 1) & mask
    j = i
    while True:
        j = (j + 1) & mask
        key = table_key[base + j]
        if key < 0:
            break
        k = slot_hash(key, mask)
        if (i <= j and (k <= i or k > j)) or (i > j and k <= i and k > j):
            table_key[base + i] = key
            table_node[base + i] = table_node[base + j]
            i = j
    table_key[base + i] = -1


@njit(cache=True, inline="always")
def to_front(node_prev, node_next, head, tail, s, node):
    if head[s] == node:
        return
    before, after = node_prev[node], node_next[node]
    node_next[before] = after
    if after >= 0:
        node_prev[after] = before
    else:
        tail[s] = before
    node_prev[node] = -1
    node_next[node] = head[s]
    node_prev[head[s]] = node
    head[s] = node


@njit(cache=True, inline="always")
def block_of(j, k, r, blocks, unique, first_unique):
    return k * blocks + j if j < blocks else first_unique + r * unique + (j - blocks)


@njit(cache=True)
def _advance(
    inv_speed, inv_rate, jobs, rng, scan, keep, other, blocks, unique, capacity, work,
    tree_time, tree_server, departure, queue_len, ring_head, arrival_ring, prefix_ring, number_ring,
    order, position, start, table_key, table_node, node_block, node_prev, node_next, used, head, tail,
    serving_prefix, serving_number, counters, clock,
):  # fmt: skip
    n_servers = inv_speed.shape[0]
    n_leaves = tree_time.shape[0] // 2
    cap = arrival_ring.shape[1]
    n_prefixes = keep.shape[0]
    length = blocks + unique
    first_unique = n_prefixes * blocks
    table_width = table_key.shape[0] // n_servers
    mask = table_width - 1
    completed, arrivals, min_len, next_server, hits = counters[0], counters[1], counters[2], counters[3], counters[4]
    next_arrival, total_response = clock[0], clock[1]
    status = 0
    while completed < jobs:
        t_dep = departure[next_server] if scan else tree_time[1]
        if next_arrival < t_dep:
            if min_len == cap:
                status = GROW_RINGS
                break
            t = next_arrival
            u = rng.random() * n_prefixes
            i = min(int(u), n_prefixes - 1)
            k = i if u - i < keep[i] else other[i]
            r = arrivals
            arrivals += 1
            lo = start[min_len]
            last = start[min_len + 1] - 1
            p = lo + int(rng.random() * (last - lo + 1)) if last > lo else lo
            s = order[p]
            o = order[last]
            order[last] = s
            order[p] = o
            position[o] = p
            position[s] = last
            start[min_len + 1] = last
            if last == lo:
                min_len += 1
            q = queue_len[s]
            at = (ring_head[s] + q) & (cap - 1)
            arrival_ring[s, at] = t
            prefix_ring[s, at] = k
            number_ring[s, at] = r
            queue_len[s] = q + 1
            if q == 0:
                start_now = True
            else:
                start_now = False
            next_arrival = t + rng.standard_exponential() * inv_rate
        else:
            t = t_dep
            s = next_server if scan else tree_server[1]
            h = ring_head[s]
            total_response += t - arrival_ring[s, h]
            ring_head[s] = (h + 1) & (cap - 1)
            completed += 1
            # the prefill's insertion: the chain from its tail to its head, each block to the front
            k, r = serving_prefix[s], serving_number[s]
            base = s * table_width
            for j in range(length - 1, -1, -1):
                block = block_of(j, k, r, blocks, unique, first_unique)
                node = lookup(table_key, table_node, base, mask, block)
                if node >= 0:
                    to_front(node_prev, node_next, head, tail, s, node)
                    continue
                if used[s] < capacity:
                    node = s * capacity + used[s]
                    used[s] += 1
                    node_prev[node] = -1
                    node_next[node] = head[s]
                    if head[s] >= 0:
                        node_prev[head[s]] = node
                    else:
                        tail[s] = node
                    head[s] = node
                else:
                    node = tail[s]
                    table_delete(table_key, table_node, base, mask, node_block[node])
                    to_front(node_prev, node_next, head, tail, s, node)
                node_block[node] = block
                table_put(table_key, table_node, base, mask, block, node)
            q = queue_len[s] - 1
            queue_len[s] = q
            first = start[q + 1]
            p = position[s]
            o = order[first]
            order[first] = s
            order[p] = o
            position[o] = p
            position[s] = first
            start[q + 1] = first + 1
            if q < min_len:
                min_len = q
            start_now = q > 0
            if not start_now:
                x = np.inf
                if scan:
                    departure[s] = x
                    best = departure[0]
                    next_server = 0
                    for v in range(1, n_servers):
                        if departure[v] < best:
                            best = departure[v]
                            next_server = v
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
        if start_now:
            # the first waiting job of s starts: its hit, touched head most recent; its work
            at = ring_head[s]
            k, r = prefix_ring[s, at], number_ring[s, at]
            serving_prefix[s], serving_number[s] = k, r
            base = s * table_width
            hit = 0
            while hit < length and lookup(table_key, table_node, base, mask, block_of(hit, k, r, blocks, unique, first_unique)) >= 0:  # fmt: skip
                hit += 1
            for j in range(hit - 1, -1, -1):
                node = lookup(table_key, table_node, base, mask, block_of(j, k, r, blocks, unique, first_unique))
                to_front(node_prev, node_next, head, tail, s, node)
            hits += hit
            x = t + (work * (length - hit) + rng.standard_exponential()) * inv_speed[s]
            if scan:
                departure[s] = x
                if next_server != s:  # an arrival at an idle server: the earliest may now be s
                    if x < departure[next_server]:
                        next_server = s
                else:  # a departure from s, the earliest, which serves the next job: scan
                    best = departure[0]
                    next_server = 0
                    for v in range(1, n_servers):
                        if departure[v] < best:
                            best = departure[v]
                            next_server = v
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
    counters[0], counters[1], counters[2], counters[3], counters[4] = completed, arrivals, min_len, next_server, hits
    clock[0], clock[1] = next_arrival, total_response
    return status


def _grow(ring, ring_head, queue_len):
    n_servers, cap = ring.shape
    grown = np.empty((n_servers, 2 * cap), ring.dtype)
    for s in range(n_servers):
        for i in range(queue_len[s]):
            grown[s, i] = ring[s, (ring_head[s] + i) & (cap - 1)]
    return grown


def simulate_cache_floor(speed, arrival_rate, jobs, rng, count, blocks, unique, zipf, capacity, work):
    """(mean response time, hit ratio, events) of ``jobs`` completed jobs from empty (see the module
    docstring; C = ``capacity`` >= B + U)."""
    assert capacity >= blocks + unique, "the floor is for caches of at least one whole chain"
    speed = np.ascontiguousarray(speed, dtype=np.float64)
    n_servers = len(speed)
    scan = n_servers <= SCAN_MAX_SERVERS
    n_leaves = 1
    while n_leaves < n_servers:
        n_leaves *= 2
    tree_time = np.full(2 * n_leaves, np.inf)
    tree_server = np.zeros(2 * n_leaves, np.int64)
    tree_server[n_leaves:] = np.arange(n_leaves)
    for i in range(n_leaves - 1, 0, -1):
        tree_server[i] = tree_server[2 * i]
    departure = np.full(n_servers, np.inf)
    queue_len = np.zeros(n_servers, np.int64)
    ring_head = np.zeros(n_servers, np.int64)
    cap = 4
    arrival_ring = np.empty((n_servers, cap))
    prefix_ring = np.zeros((n_servers, cap), np.int64)
    number_ring = np.zeros((n_servers, cap), np.int64)
    order, position = np.arange(n_servers), np.arange(n_servers)
    start = np.full(cap + 2, n_servers)
    start[0] = 0
    width = 2
    while width < 2 * capacity:
        width *= 2
    table_key = np.full(n_servers * width, -1, np.int64)
    table_node = np.zeros(n_servers * width, np.int64)
    node_block = np.zeros(n_servers * capacity, np.int64)
    node_prev = np.full(n_servers * capacity, -1, np.int64)
    node_next = np.full(n_servers * capacity, -1, np.int64)
    used = np.zeros(n_servers, np.int64)
    head = np.full(n_servers, -1, np.int64)
    tail = np.full(n_servers, -1, np.int64)
    serving_prefix = np.zeros(n_servers, np.int64)
    serving_number = np.zeros(n_servers, np.int64)
    weight = np.arange(1, count + 1, dtype=np.float64) ** -zipf
    keep, other = alias(weight)
    counters = np.zeros(5, np.int64)
    clock = np.array([rng.standard_exponential() / arrival_rate, 0.0])
    while (
        _advance(
            1.0 / speed,
            1.0 / arrival_rate,
            jobs,
            rng,
            scan,
            keep,
            other,
            blocks,
            unique,
            capacity,
            work,
            tree_time,
            tree_server,
            departure,
            queue_len,
            ring_head,
            arrival_ring,
            prefix_ring,
            number_ring,
            order,
            position,
            start,
            table_key,
            table_node,
            node_block,
            node_prev,
            node_next,
            used,
            head,
            tail,
            serving_prefix,
            serving_number,
            counters,
            clock,
        )  # fmt: skip
        == GROW_RINGS
    ):
        arrival_ring = _grow(arrival_ring, ring_head, queue_len)
        prefix_ring = _grow(prefix_ring, ring_head, queue_len)
        number_ring = _grow(number_ring, ring_head, queue_len)
        ring_head[:] = 0
        cap *= 2
        grown = np.full(cap + 2, n_servers)
        grown[: start.shape[0]] = start
        start = grown
    completed = counters[0]
    return clock[1] / completed, counters[4] / (completed * (blocks + unique)), counters[0] + counters[1]


def run_floor_cache(speeds, arrival_rate, jobs, seed, clock=time.thread_time, **prompts):
    """(mean response, hit ratio, events, CPU seconds of the kernel) of ``jobs`` jobs from empty,
    after a short run that compiles (or loads) the kernel; ``prompts``: count, blocks, unique, zipf,
    capacity, work."""
    simulate_cache_floor(speeds, arrival_rate, 10, np.random.default_rng(0), **prompts)
    rng = np.random.default_rng(seed)
    t0 = clock()
    response, hit_ratio, events = simulate_cache_floor(speeds, arrival_rate, jobs, rng, **prompts)
    return response, hit_ratio, events, clock() - t0
