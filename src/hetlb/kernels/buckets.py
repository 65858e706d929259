"""Key buckets: an O(1) least-key structure for selection keys that are small integers.

The servers are kept in ``order``, a permutation sorted by key: the servers with key k fill the
block ``order[start[k] : start[k + 1]]``, ``position[s]`` is where server s stands in it and
``key[s]`` its key. Every key below the least is an empty block at the front, so the servers
with the least key are ``order[0 : start[least + 1]]`` with ``least = key[order[0]]``: one
uniform number picks one of them uniformly at random. Moving a server to the next key up or
down is one swap with the last (or first) server of its block and a shift of the block
boundary, so a key change by ``delta`` costs ``|delta|`` swaps; the keys of jsq (the queue
length) move by one per event, those of jfsq with C speed classes by C.

``start`` has an entry for every key up to the largest possible one, plus one: the blocks of
keys above the largest in use are empty at the end (start = N). As in
hetlb.kernels.trees, the @njit functions take plain arrays and use each on every path, so that
numba needs no reference counting in them and LLVM inlines them into the event loop.
"""

import numpy as np

from hetlb.jit import at, njit


def new_buckets(keys: np.ndarray, n_keys: int):
    """(order, position, key, start) over the integer ``keys`` (each < n_keys - 1)."""
    key = np.asarray(keys, dtype=np.int64)
    order = np.argsort(key, kind="stable").astype(np.int64)
    position = np.empty_like(order)
    position[order] = np.arange(len(order))
    start = np.searchsorted(key[order], np.arange(n_keys), side="left").astype(np.int64)
    return order, position, key.copy(), start


def grow_buckets(start: np.ndarray, n_keys: int) -> np.ndarray:
    """``start`` extended to ``n_keys`` keys (the new blocks are empty)."""
    grown = np.full(n_keys, start[-1], dtype=np.int64)
    grown[: len(start)] = start
    return grown


@njit(inline="always")
def random_least_server(order, key, start, rng):
    """A server uniformly at random among those with the least key (one uniform number), and
    that key: (server, least key)."""
    server, least, _, _ = random_least_drawn(order, key, start, rng)
    return server, least


@njit(inline="always")
def random_least_drawn(order, key, start, rng):
    """:func:`random_least_server` with where it stands: (server, least key, its position in
    ``order``, the number of servers with the least key), for :func:`move_drawn_key`."""
    least = key[at(order[at(0)])]
    count = start[at(least + 1)]
    position = min(int(rng.random() * count), count - 1)
    return order[at(position)], least, position, count


@njit(inline="always")
def move_key(order, position, key, start, server, new_key):
    """Give ``server`` the key ``new_key``: one swap per step between its old key and the new."""
    p = position[at(server)]
    k = key[at(server)]
    while k < new_key:  # to the end of its block, which then becomes the front of the next
        last = start[at(k + 1)] - 1
        other = order[at(last)]
        order[at(p)] = other
        position[at(other)] = p
        order[at(last)] = server
        start[at(k + 1)] = last
        p = last
        k += 1
    while k > new_key:  # to the front of its block, which then becomes the end of the previous
        first = start[at(k)]
        other = order[at(first)]
        order[at(p)] = other
        position[at(other)] = p
        order[at(first)] = server
        start[at(k)] = first + 1
        p = first
        k -= 1
    position[at(server)] = p
    key[at(server)] = new_key


@njit(inline="always")
def move_drawn_key(order, position, key, start, server, drawn_at, least, count, new_key):
    """:func:`move_key` for a server that :func:`random_least_drawn` returned (at position
    ``drawn_at``, with the least key ``least`` held by ``count`` servers), with nothing moved since:
    its first step up uses what the draw read, instead of reading the server's position and key
    and the block's end again (a chain of dependent reads on the path of every arrival)."""
    if new_key > least:
        last = count - 1
        other = order[at(last)]
        order[at(drawn_at)] = other
        position[at(other)] = drawn_at
        order[at(last)] = server
        start[at(least + 1)] = last
        position[at(server)] = last
        key[at(server)] = least + 1
    move_key(order, position, key, start, server, new_key)
