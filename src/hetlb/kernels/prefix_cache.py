"""The servers' prefix (KV) caches in the kernels: an LRU of blocks per server, allocation-free.

The model (docs/background/prefix-caches.md): server s keeps at most K_s blocks; a job *holds*
the blocks of its chain from the start of its service to its departure, and a held block is never
evicted; at the start of a job's service its **hit** h is the longest leading part of its chain in
the cache, and those h blocks are touched; when its prefill ends its L blocks are in the cache: the
missing ones enter and all L are touched together, the chain's head most recent and its tail least;
room is made by evicting the least recently used blocks that no job holds, and when every block is
held the chain's tail is left out (its head enters first).

The data, for all servers at once (the run's arrays; nothing is allocated per operation):

* ``nodes`` (NODE_DTYPE), a pool of sum_s K_s nodes: server s owns the K_s nodes from its list's
  ``first``; a node is one cached block (its id), its links in the server's recency list and how
  many jobs hold it. A server's nodes are taken in order (``first + cached``) until it is full;
  from then on a new block takes the node of the block it evicts, so no node is ever freed.
* ``lists`` (LIST_DTYPE), one record a server: its doubly linked recency list (``head`` most
  recent, ``tail`` least), how many blocks it caches and how many of them are held, K_s and its
  first node.
* ``table`` (ENTRY_DTYPE), a hash table keyed by (server, block id) with open addressing (linear
  probing, deletion by backward shift, no tombstones), of a power-of-two size at least twice the
  pool's, so a lookup is O(1) on average.

A chain is given without an array of its own, as (``listed``, ``start``, ``n_prefix``, ``unique``,
``length``): block j < n_prefix is ``listed[start + j]`` (a trace's chains, canonical ids) or, when
``listed`` is empty, ``start + j`` (a shared prefix's or a session's consecutive ids); block
j >= n_prefix is ``unique + (j - n_prefix)`` (a shared prompt's blocks of its own). Block ids name
their leading chains (hetlb.model.prompts), and every touch puts a chain's head before its tail, so
the blocks a server caches of any chain are always a leading run of it: a hit is found by walking
the chain from its head to the first block not cached, and the blocks a job holds are the leading
``held`` blocks of its chain.

Costs: a hit, an insertion and a release are O(L) lookups and list moves; an eviction walks the
recency list from its tail past the held blocks (at most the blocks of the jobs in service).
"""

import numpy as np

from hetlb.jit import DISABLED, njit, records

NODE_DTYPE = np.dtype([("block", "i8"), ("prev", "i4"), ("next", "i4"), ("held", "i4"), ("spare", "i4")])
"""A cached block: its id, the previous (more recent) and next (less recent) node of its server's
recency list (-1 at the ends) and how many jobs hold it (24 bytes)."""

LIST_DTYPE = np.dtype(
    [
        ("head", "i4"),
        ("tail", "i4"),
        ("cached", "i4"),
        ("held", "i4"),
        ("capacity", "i4"),
        ("first", "i4"),
        ("spare", "i8"),
    ]
)
"""A server's cache: its most and least recently used nodes (-1 when empty), the blocks it caches,
how many of them some job holds, K_s and its first node in the pool (32 bytes)."""

ENTRY_DTYPE = np.dtype([("block", "i8"), ("server", "i4"), ("node", "i4")])
"""An entry of the hash table: the key (server, block id) and its node (-1: an empty entry)."""

MAX_NODES = 2**31 - 1
"""The most blocks all the caches together may hold (node indices are int32)."""

MASK64 = (1 << 64) - 1

if DISABLED:

    def home(block, server, mask):
        """The table position where the key (server, block) starts its probe: a multiplicative
        hash of the two mixed by splitmix64's finaliser (plain Python: no overflow warnings)."""
        z = (int(block) * 0x9E3779B97F4A7C15 + int(server) * 0xC2B2AE3D27D4EB4F) & MASK64
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return int((z ^ (z >> 31)) & int(mask))

else:

    def plain_home(block, server, mask):
        """:func:`home` on Python integers, for plain-Python runs of a compiling process."""
        z = (int(block) * 0x9E3779B97F4A7C15 + int(server) * 0xC2B2AE3D27D4EB4F) & MASK64
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return int((z ^ (z >> 31)) & int(mask))

    @njit(inline="always", plain=plain_home)
    def home(block, server, mask):
        """The table position where the key (server, block) starts its probe: a multiplicative
        hash of the two mixed by splitmix64's finaliser, arithmetic modulo 2^64."""
        z = np.uint64(block) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(server) * np.uint64(0xC2B2AE3D27D4EB4F)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return np.int64((z ^ (z >> np.uint64(31))) & np.uint64(mask))


def table_size(n_nodes: int) -> int:
    """Entries of the hash table for a pool of ``n_nodes``: the least power of two at least twice
    that (and at least 2), so that the table is at most half full."""
    return max(2, 1 << int(2 * max(n_nodes, 1) - 1).bit_length())


def new_caches(capacity: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Empty caches of K_s = ``capacity[s]`` blocks (int, >= 0; their sum at most MAX_NODES):
    (lists, nodes, table)."""
    capacity = np.asarray(capacity, dtype=np.int64)
    total = int(capacity.sum())
    if total > MAX_NODES:
        raise ValueError(f"the caches hold {total} blocks in all, more than {MAX_NODES}")
    lists = np.zeros(len(capacity), LIST_DTYPE)
    lists["head"] = -1
    lists["tail"] = -1
    lists["capacity"] = capacity
    lists["first"] = np.concatenate(([0], np.cumsum(capacity)[:-1])) if len(capacity) else []
    nodes = np.zeros(total, NODE_DTYPE)
    nodes["prev"] = -1
    nodes["next"] = -1
    table = np.zeros(table_size(total), ENTRY_DTYPE)
    table["node"] = -1
    return lists, nodes, table


@njit(inline="always")
def chain_block(listed, start, n_prefix, unique, j):
    """Block j of a chain (module docstring)."""
    if j < n_prefix:
        if len(listed) > 0:
            return listed[start + j]
        return start + j
    return unique + (j - n_prefix)


@njit
def find_entry(table, s, block):
    """The table position of the key (s, block), or -1 when that block is not cached at s."""
    entries = records(table)
    mask = len(table) - 1
    i = home(block, s, mask)
    while True:
        entry = entries[i]
        if entry.node < 0:
            return -1
        if entry.block == block and entry.server == s:
            return i
        i = (i + 1) & mask


@njit
def cached_node(table, s, block):
    """The node of block ``block`` at server s, or -1 when it is not cached there."""
    i = find_entry(table, s, block)
    if i < 0:
        return -1
    return records(table)[i].node


@njit
def add_entry(table, s, block, node):
    """Put the key (s, block), not in the table, with its node."""
    entries = records(table)
    mask = len(table) - 1
    i = home(block, s, mask)
    while entries[i].node >= 0:
        i = (i + 1) & mask
    entry = entries[i]
    entry.block = block
    entry.server = s
    entry.node = node


@njit
def remove_entry(table, s, block):
    """Take the key (s, block), which is in the table, out of it: the entries after it in its run
    move back into the hole when their probe started at or before it (backward shift)."""
    entries = records(table)
    mask = len(table) - 1
    i = find_entry(table, s, block)
    j = i
    while True:
        j = (j + 1) & mask
        moving = entries[j]
        if moving.node < 0:
            break
        k = home(moving.block, moving.server, mask)
        # the entry at j may fill the hole at i unless its home lies cyclically in (i, j]
        if (i <= j and (k <= i or k > j)) or (i > j and k <= i and k > j):
            hole = entries[i]
            hole.block = moving.block
            hole.server = moving.server
            hole.node = moving.node
            i = j
    entries[i].node = -1


@njit(inline="always")
def unlink(server_list, nodes, node):
    """Take ``node`` out of its server's recency list (``server_list``: the list's record)."""
    before = nodes[node].prev
    after = nodes[node].next
    if before >= 0:
        nodes[before].next = after
    else:
        server_list.head = after
    if after >= 0:
        nodes[after].prev = before
    else:
        server_list.tail = before


@njit(inline="always")
def link_after(server_list, nodes, node, previous):
    """Put ``node`` in its server's recency list right after ``previous`` (at the head when -1)."""
    if previous < 0:
        after = server_list.head
        server_list.head = node
    else:
        after = nodes[previous].next
        nodes[previous].next = node
    nodes[node].prev = previous
    nodes[node].next = after
    if after >= 0:
        nodes[after].prev = node
    else:
        server_list.tail = node


@njit(inline="always")
def move_after(server_list, nodes, node, previous):
    """Move ``node`` right after ``previous`` in its server's recency list (to the head when -1)."""
    if previous < 0:
        if server_list.head == node:
            return
    elif nodes[previous].next == node:
        return
    unlink(server_list, nodes, node)
    link_after(server_list, nodes, node, previous)


@njit(inline="always")
def hold(server_list, nodes, node):
    """One more job holds ``node``."""
    if nodes[node].held == 0:
        server_list.held += 1
    nodes[node].held += 1


@njit
def leading_match(table, s, listed, start, n_prefix, unique, length):
    """How many leading blocks of the chain server s caches (its match there; nothing changes)."""
    j = 0
    while j < length:
        if find_entry(table, s, chain_block(listed, start, n_prefix, unique, j)) < 0:
            break
        j += 1
    return j


@njit
def hold_hit(lists, nodes, table, s, listed, start, n_prefix, unique, length):
    """A job of this chain starts service at server s: its hit h, the leading blocks cached there,
    which it touches (its head most recent) and holds; returns h."""
    server_list = records(lists)[s]
    node_records = records(nodes)
    previous = -1
    j = 0
    while j < length:
        node = cached_node(table, s, chain_block(listed, start, n_prefix, unique, j))
        if node < 0:
            break
        move_after(server_list, node_records, node, previous)
        hold(server_list, node_records, node)
        previous = node
        j += 1
    return j


@njit
def insert_chain(lists, nodes, table, s, listed, start, n_prefix, unique, length, held):
    """The prefill of a job of this chain ends at server s, where it holds its ``held`` leading
    blocks: its blocks are touched together, its head most recent, the missing ones entering in
    the place of the least recently used blocks no job holds, head first, until none is left;
    returns how many leading blocks it holds now (every block of its chain in the cache)."""
    server_list = records(lists)[s]
    node_records = records(nodes)
    previous = -1
    j = 0
    while j < length:  # the leading blocks already cached: touched, held
        node = cached_node(table, s, chain_block(listed, start, n_prefix, unique, j))
        if node < 0:
            break
        move_after(server_list, node_records, node, previous)
        if j >= held:
            hold(server_list, node_records, node)
        previous = node
        j += 1
    while j < length:  # the missing ones
        block = chain_block(listed, start, n_prefix, unique, j)
        if server_list.cached < server_list.capacity:
            node = server_list.first + server_list.cached
            server_list.cached += 1
        else:
            node = server_list.tail
            while node >= 0 and node_records[node].held > 0:
                node = node_records[node].prev
            if node < 0:
                break  # every block is held: the chain's tail is left out
            unlink(server_list, node_records, node)
            remove_entry(table, s, node_records[node].block)
        node_records[node].block = block
        node_records[node].held = 0
        hold(server_list, node_records, node)
        link_after(server_list, node_records, node, previous)
        add_entry(table, s, block, node)
        previous = node
        j += 1
    return j


@njit
def release_chain(lists, nodes, table, s, listed, start, n_prefix, unique, held):
    """A job of this chain that holds its ``held`` leading blocks leaves server s: it holds them no
    more (they stay cached, where they are in the recency order)."""
    server_list = records(lists)[s]
    node_records = records(nodes)
    for j in range(held):
        node = cached_node(table, s, chain_block(listed, start, n_prefix, unique, j))
        node_records[node].held -= 1
        if node_records[node].held == 0:
            server_list.held -= 1


@njit
def recency_order(lists, nodes, s, out):
    """Write server s's cached block ids into ``out``, most recent first; returns how many (tests)."""
    node = records(lists)[s].head
    n = 0
    while node >= 0:
        out[n] = records(nodes)[node].block
        n += 1
        node = records(nodes)[node].next
    return n
