"""Complete binary trees over servers that make every routing decision O(log N).

Both trees have ``width`` leaves (a power of two >= N); node 1 is the root, node i has children
2i and 2i + 1, and leaf s is node ``width + s``. Padding leaves hold +inf.
"""

import numpy as np
from numba import njit


def tree_width(n_leaves: int) -> int:
    return 1 << max(0, int(n_leaves - 1).bit_length())


# --- the least-key tree: min key and the number of leaves attaining it, per node ----------------

def new_key_tree(keys: np.ndarray):
    """(key, count) arrays of a least-key tree over ``keys``."""
    width = tree_width(len(keys))
    key = np.full(2 * width, np.inf)
    count = np.zeros(2 * width, dtype=np.int64)
    key[width : width + len(keys)] = keys
    count[width : width + len(keys)] = 1
    for node in range(width - 1, 0, -1):
        pull_up(key, count, node)
    return key, count


@njit(cache=True, inline="always")
def pull_up(key, count, node):
    left = 2 * node
    right = left + 1
    if key[left] < key[right]:
        key[node] = key[left]
        count[node] = count[left]
    elif key[right] < key[left]:
        key[node] = key[right]
        count[node] = count[right]
    else:
        key[node] = key[left]
        count[node] = count[left] + count[right]


@njit(cache=True, inline="always")
def set_key(key, count, leaf, value):
    """Set one leaf's key and repair its ancestors, stopping once nothing changes."""
    width = len(key) // 2
    node = width + leaf
    if key[node] == value:
        return
    key[node] = value
    node >>= 1
    while node >= 1:
        old_key = key[node]
        old_count = count[node]
        pull_up(key, count, node)
        if key[node] == old_key and count[node] == old_count:
            return
        node >>= 1


@njit(cache=True, inline="always")
def random_least_leaf(key, count, rng):
    """A leaf uniformly at random among those with the least key."""
    width = len(key) // 2
    rank = int(rng.random() * count[1])
    if rank >= count[1]:
        rank = count[1] - 1
    node = 1
    least = key[1]
    while node < width:
        left = 2 * node
        if key[left] == least:
            if rank < count[left]:
                node = left
                continue
            rank -= count[left]
        node = left + 1
    return node - width


# --- the tournament tree: index of the earliest leaf in each subtree ---------------------------

def new_tournament(times: np.ndarray):
    """(time, winner) arrays of a tournament tree; ``winner[1]`` is the leaf with the least time."""
    width = tree_width(len(times))
    time = np.full(width, np.inf)
    time[: len(times)] = times
    winner = np.zeros(2 * width, dtype=np.int64)
    winner[width:] = np.arange(width)
    for node in range(width - 1, 0, -1):
        a, b = winner[2 * node], winner[2 * node + 1]
        winner[node] = a if time[a] <= time[b] else b
    return time, winner


@njit(cache=True, inline="always")
def set_time(time, winner, leaf, value):
    """Set one leaf's time and replay the matches on its path to the root."""
    width = len(time)
    time[leaf] = value
    node = (width + leaf) >> 1
    while node >= 1:
        a = winner[2 * node]
        b = winner[2 * node + 1]
        winner[node] = a if time[a] <= time[b] else b
        node >>= 1
