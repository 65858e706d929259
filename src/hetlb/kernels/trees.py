"""Complete 4-ary trees over servers that make every routing and next-departure decision O(log N).

A tree with ``width`` leaves (a power of four >= N) is one structured array of ``2 * width``
nodes: node 1 is the root, node i has children 4i .. 4i + 3 (exactly one cache line of 16-byte
nodes) and parent i >> 2, and leaf s is node ``width + s``. Padding leaves hold +inf; nodes 2 and 3,
and the index ranges between levels, are unused. Four children per node halve the depth of a
binary tree, and with it the chain of dependent memory reads of a walk from the root.

What a tree answers does not depend on its shape: the least key and how many leaves attain
it, the r-th of those leaves in leaf order, the least time and the first leaf holding it.

The updates pick among children with conditional moves or index arithmetic rather than
branches, which would be mispredicted half the time. The @njit functions take plain arrays (and
a generator) and use each on every path: numba then needs no reference counting in them and
LLVM inlines them into the event loop. In a large system the walks start loading the nodes
they will read next (``prefetch``), so that cache misses overlap. The helpers read nodes by
attribute (``tree[node].key``): run as plain Python they take the record views of
hetlb.jit.records, as the event loop passes them.
"""

import numpy as np

from hetlb.jit import CACHE_LINE, njit, prefetch

KEY_NODE_DTYPE = np.dtype([("key", "f8"), ("count", "i8")])
"""Least-key tree node: the least key in the subtree and how many leaves attain it."""

TIME_NODE_DTYPE = np.dtype([("time", "f8"), ("leaf", "i8")])
"""Tournament tree node: the earliest time in the subtree and the first leaf holding it."""


def cache_aligned_zeros(n: int, dtype: np.dtype) -> np.ndarray:
    """A zeroed array of ``n`` records whose data starts on a cache-line boundary."""
    buffer = np.zeros(n * dtype.itemsize + CACHE_LINE, dtype=np.uint8)
    start = -buffer.ctypes.data % CACHE_LINE
    return buffer[start : start + n * dtype.itemsize].view(dtype)


def tree_width(n_leaves: int) -> int:
    """The smallest power of four >= n_leaves."""
    width = 1
    while width < n_leaves:
        width *= 4
    return width


def levels_bottom_up(width: int):
    """(first node of a level, its children as a (nodes, 4) index array), from the level above
    the leaves up to the root."""
    first = width // 4
    while first >= 1:
        yield first, np.arange(4 * first, 8 * first).reshape(first, 4)
        first //= 4


# --- the least-key tree ---------------------------------------------------------------------


def new_key_tree(keys: np.ndarray) -> np.ndarray:
    """A least-key tree over ``keys``; ``tree[1]`` holds the least key and its multiplicity."""
    width = tree_width(len(keys))
    tree = cache_aligned_zeros(2 * width, KEY_NODE_DTYPE)
    tree["key"][width:] = np.inf
    tree["key"][width : width + len(keys)] = keys
    tree["count"][width : width + len(keys)] = 1
    for first, children in levels_bottom_up(width):
        key, count = tree["key"][children], tree["count"][children]
        least = key.min(axis=1)
        tree["key"][first : 2 * first] = least
        tree["count"][first : 2 * first] = np.where(key == least[:, None], count, 0).sum(axis=1)
    return tree


@njit
def set_key(tree, leaf, value):
    """Set one leaf's key and repair the (least key, count) of its ancestors, stopping at the
    first ancestor that comes out unchanged (nothing above it can change then)."""
    node = len(tree) // 2 + leaf
    changed = tree[node].key != value
    tree[node].key = value
    while changed and node > 1:
        node >>= 2
        first = 4 * node
        k0, k1, k2, k3 = tree[first].key, tree[first + 1].key, tree[first + 2].key, tree[first + 3].key
        c0, c1, c2, c3 = tree[first].count, tree[first + 1].count, tree[first + 2].count, tree[first + 3].count
        least = min(min(k0, k1), min(k2, k3))
        count = (k0 == least) * c0 + (k1 == least) * c1 + (k2 == least) * c2 + (k3 == least) * c3
        changed = (tree[node].key != least) | (tree[node].count != count)
        tree[node].key = least
        tree[node].count = count


@njit
def random_least_leaf(tree, rng, leaf_records):
    """A leaf uniformly at random among those with the least key: the r-th of them in leaf
    order, r = int(u * count) for one uniform u. Two steps above the leaves, it starts loading
    the entries of ``leaf_records`` (per-leaf data the caller reads next) of the 16 leaves left."""
    width = len(tree) // 2
    least = tree[1].key
    count = tree[1].count
    rank = min(int(rng.random() * count), count - 1)
    node = 1
    while node < width:
        first = 4 * node
        if 4 * first < len(tree):  # start loading the next level's candidates (the grandchildren)
            for group in range(4 * first, 4 * first + 16, 4):
                prefetch(tree, group)
            if 4 * first >= width:
                for leaf in range(4 * first - width, min(4 * first - width + 16, len(leaf_records))):
                    prefetch(leaf_records, leaf)
        # how many least-key leaves lie under each of the first three children
        in0 = (tree[first].key == least) * tree[first].count
        in1 = (tree[first + 1].key == least) * tree[first + 1].count
        in2 = (tree[first + 2].key == least) * tree[first + 2].count
        past0 = rank >= in0
        past1 = rank >= in0 + in1
        past2 = rank >= in0 + in1 + in2
        rank -= past0 * in0 + past1 * in1 + past2 * in2
        node = first + past0 + past1 + past2
    return node - width


# --- the tournament tree --------------------------------------------------------------------


def new_tournament(times: np.ndarray) -> np.ndarray:
    """A tournament tree over ``times``; ``tree[1]`` holds the least time and the first leaf
    holding it."""
    width = tree_width(len(times))
    tree = cache_aligned_zeros(2 * width, TIME_NODE_DTYPE)
    tree["time"][width:] = np.inf
    tree["time"][width : width + len(times)] = times
    tree["leaf"][width:] = np.arange(width)
    for first, children in levels_bottom_up(width):
        winner = children[np.arange(first), tree["time"][children].argmin(axis=1)]  # the first least
        tree[first : 2 * first] = tree[winner]
    return tree


@njit
def set_time(tree, leaf, value):
    """Set one leaf's time and replay every match on its path to the root (ties go left)."""
    node = len(tree) // 2 + leaf
    tree[node].time = value
    while node > 1:
        first = node & -4
        t0, t1, t2, t3 = tree[first].time, tree[first + 1].time, tree[first + 2].time, tree[first + 3].time
        # the first of the least: the right pair only if strictly earlier, then likewise within the pair
        left_time, right_time = min(t0, t1), min(t2, t3)
        right_pair = right_time < left_time
        winner = first + 2 * right_pair + (right_pair & (t3 < t2)) + ((not right_pair) & (t1 < t0))
        node >>= 2
        tree[node].time = min(left_time, right_time)
        tree[node].leaf = tree[winner].leaf


@njit
def lower_time(tree, leaf, value):
    """Lower one leaf's time to ``value``: it wins the matches up its path until it meets an
    earlier time, or an equal one held by a leaf further left."""
    node = len(tree) // 2 + leaf
    tree[node].time = value
    node >>= 2
    while node >= 1 and (value < tree[node].time or (value == tree[node].time and leaf < tree[node].leaf)):
        tree[node].time = value
        tree[node].leaf = leaf
        node >>= 2


@njit(inline="always")
def set_time_by_scan(tree, leaf, value, n_leaves):
    """Set one leaf's time and find the root's (least time, first leaf holding it) by a scan of the
    first ``n_leaves`` leaves, leaving the nodes between stale; returns the root's time. For a small system, whose event
    loop reads only the root: a scan of up to 16 leaves costs less than replaying the matches of
    two levels, which it measured faster at N = 10 and level at 16. Inlined by numba (a loop that
    LLVM leaves a call otherwise)."""
    width = len(tree) // 2
    tree[width + leaf].time = value
    best = tree[width].time
    first = 0
    for i in range(1, n_leaves):
        t = tree[width + i].time
        if t < best:
            best = t
            first = i
    tree[1].time = best
    tree[1].leaf = first
    return best


@njit
def lower_time_at_root(tree, leaf, value):
    """Lower one leaf's time to ``value`` and update the root alone (see set_time_by_scan): the leaf
    wins if its time is earlier than the root's, or equal and the leaf further left."""
    width = len(tree) // 2
    tree[width + leaf].time = value
    if value < tree[1].time or (value == tree[1].time and leaf < tree[1].leaf):
        tree[1].time = value
        tree[1].leaf = leaf


@njit
def prefetch_path(tree, leaf, levels):
    """Start loading the nodes that an update of ``leaf`` reads at the ``levels`` lowest levels."""
    node = len(tree) // 2 + leaf
    for _ in range(levels):
        prefetch(tree, node & -4)
        node >>= 2


@njit
def move_time(tree, leaf, value):
    """Set one leaf's time to ``value``, earlier or later: :func:`lower_time` when it is not later;
    else replay the matches up its path only while the leaf is the winner there (where it is not,
    its later time changes nothing above)."""
    node = len(tree) // 2 + leaf
    if value <= tree[node].time:
        lower_time(tree, leaf, value)
        return
    tree[node].time = value
    while node > 1 and tree[node >> 2].leaf == leaf:
        first = node & -4
        t0, t1, t2, t3 = tree[first].time, tree[first + 1].time, tree[first + 2].time, tree[first + 3].time
        left_time, right_time = min(t0, t1), min(t2, t3)
        right_pair = right_time < left_time
        winner = first + 2 * right_pair + (right_pair & (t3 < t2)) + ((not right_pair) & (t1 < t0))
        node >>= 2
        tree[node].time = min(left_time, right_time)
        tree[node].leaf = tree[winner].leaf
