"""The kernels' prefix caches (hetlb.kernels.prefix_cache) against a plain-Python LRU written here
from the model (docs/background/prefix-caches.md), on random sequences of operations: jobs of
random chains that share leading blocks start (their hit), end their prefill (the insertion) and
leave (the release) at servers of several sizes, many jobs in service at once."""

from collections import OrderedDict

import numpy as np
import pytest

from hetlb.kernels import prefix_cache as pc


class ReferenceLru:
    """One server's cache as the model defines it: an OrderedDict from block id to the number of
    jobs holding it, least recently used first."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.blocks: OrderedDict = OrderedDict()

    def match(self, chain) -> int:
        h = 0
        while h < len(chain) and chain[h] in self.blocks:
            h += 1
        return h

    def touch(self, chain, n) -> None:
        """The first n blocks touched together, the head most recent."""
        for j in reversed(range(n)):
            self.blocks.move_to_end(chain[j])

    def hold_hit(self, chain) -> int:
        h = self.match(chain)
        for j in range(h):
            self.blocks[chain[j]] += 1
        self.touch(chain, h)
        return h

    def insert(self, chain, held) -> int:
        j = 0
        while j < len(chain) and chain[j] in self.blocks:
            if j >= held:
                self.blocks[chain[j]] += 1
            j += 1
        while j < len(chain):
            if len(self.blocks) >= self.capacity:
                victim = next((block for block, holders in self.blocks.items() if holders == 0), None)
                if victim is None:
                    break
                del self.blocks[victim]
            self.blocks[chain[j]] = 1
            j += 1
        self.touch(chain, j)
        return j

    def release(self, chain, held) -> None:
        for j in range(held):
            self.blocks[chain[j]] -= 1

    def recency(self) -> list:
        return list(reversed(self.blocks))


def random_chains(rng, n_chains, max_length=7, branching=3):
    """Chains whose block ids name their leading runs (equal ids <=> equal leading chains): paths
    from the root of a random trie of ``branching`` children a node."""
    ids: dict = {}
    chains = []
    for _ in range(n_chains):
        length = int(rng.integers(0, max_length + 1))
        path = tuple(int(rng.integers(0, branching)) for _ in range(length))
        chains.append([ids.setdefault(path[: j + 1], len(ids)) for j in range(length)])
    return chains


def as_listed(chains):
    """The chains as a trace's CSR: (listed blocks, start of each chain)."""
    starts = np.cumsum([0] + [len(c) for c in chains])
    listed = np.array([b for c in chains for b in c], dtype=np.int64)
    return listed, starts


@pytest.mark.parametrize("seed", range(12))
def test_random_operations_match_the_reference_lru(seed):
    rng = np.random.default_rng(seed)
    capacity = np.array([0, 1, 3, 6, 12])
    n_servers = len(capacity)
    lists, nodes, table = pc.new_caches(capacity)
    reference = [ReferenceLru(int(k)) for k in capacity]
    chains = random_chains(rng, 40)
    listed, starts = as_listed(chains)
    out = np.zeros(64, np.int64)
    jobs = []  # [server, chain, stage (0 waiting, 1 started, 2 prefilled), held]
    for _ in range(600):
        action = rng.random()
        if action < 0.3 or not jobs:
            jobs.append([int(rng.integers(n_servers)), int(rng.integers(len(chains))), 0, 0])
            continue
        job = jobs[int(rng.integers(len(jobs)))]
        s, c, stage, held = job
        chain = chains[c]
        where = (listed, starts[c], len(chain), 0, len(chain))
        assert pc.leading_match(table, s, *where) == reference[s].match(chain)
        if stage == 0:
            h = pc.hold_hit(lists, nodes, table, s, *where)
            assert h == reference[s].hold_hit(chain)
            job[2], job[3] = 1, h
        elif stage == 1:
            now_held = pc.insert_chain(lists, nodes, table, s, *where, held)
            assert now_held == reference[s].insert(chain, held)
            job[2], job[3] = 2, now_held
        else:
            pc.release_chain(lists, nodes, table, s, listed, starts[c], len(chain), 0, held)
            reference[s].release(chain, held)
            jobs.remove(job)
        for server in range(n_servers):
            n = pc.recency_order(lists, nodes, server, out)
            assert out[:n].tolist() == reference[server].recency()
            assert lists["cached"][server] == n <= capacity[server]
            holders = reference[server].blocks
            assert lists["held"][server] == sum(1 for h in holders.values() if h > 0)
            for block in holders:
                node = pc.cached_node(table, server, block)
                assert node >= 0 and nodes["held"][node] == holders[block]
    assert np.sum(table["node"] >= 0) == lists["cached"].sum()


def test_a_full_cache_of_held_blocks_leaves_the_tail_out():
    lists, nodes, table = pc.new_caches(np.array([3]))
    listed = np.arange(5, dtype=np.int64)
    held = pc.insert_chain(lists, nodes, table, 0, listed, 0, 5, 0, 5, 0)
    assert held == 3  # blocks 0, 1, 2 enter, head first; 3 and 4 are left out
    out = np.zeros(8, np.int64)
    assert out[: pc.recency_order(lists, nodes, 0, out)].tolist() == [0, 1, 2]
    # another chain finds every block held: nothing enters
    other = np.array([7, 8], dtype=np.int64)
    assert pc.insert_chain(lists, nodes, table, 0, other, 0, 2, 0, 2, 0) == 0
    pc.release_chain(lists, nodes, table, 0, listed, 0, 5, 0, held)
    assert pc.insert_chain(lists, nodes, table, 0, other, 0, 2, 0, 2, 0) == 2
    # the released chain's tail went first: 2 and 1 evicted, 0 left
    assert out[: pc.recency_order(lists, nodes, 0, out)].tolist() == [7, 8, 0]


def test_computed_chains_have_their_prefix_then_their_own_blocks():
    empty = np.zeros(0, np.int64)
    # a shared prefix k = 2 of B = 3 blocks (ids 6, 7, 8), then U = 2 blocks of its own from 100
    assert [pc.chain_block(empty, 6, 3, 100, j) for j in range(5)] == [6, 7, 8, 100, 101]
    listed = np.array([40, 41, 42], dtype=np.int64)
    assert [pc.chain_block(listed, 1, 2, 0, j) for j in range(2)] == [41, 42]


@pytest.mark.parametrize("seed", range(5))
def test_the_hash_table_against_a_dict(seed):
    """Many keys in a small table, so that runs wrap around and deletions shift entries back."""
    rng = np.random.default_rng(seed)
    table = np.zeros(32, pc.ENTRY_DTYPE)
    table["node"] = -1
    present: dict = {}
    for step in range(3000):
        key = (int(rng.integers(3)), int(rng.integers(40)))
        if key in present and rng.random() < 0.6:
            pc.remove_entry(table, key[0], key[1])
            del present[key]
        elif key not in present and len(present) < 16:
            pc.add_entry(table, key[0], key[1], step)
            present[key] = step
        for s, block in [key, (int(rng.integers(3)), int(rng.integers(40)))]:
            assert pc.cached_node(table, s, block) == present.get((s, block), -1)
    assert np.sum(table["node"] >= 0) == len(present)


def test_table_sizes_are_powers_of_two_at_least_twice_the_pool():
    for n in (0, 1, 2, 3, 8, 9, 1000):
        size = pc.table_size(n)
        assert size & (size - 1) == 0 and size >= 2 * n and size >= 2


def test_both_cache_extensions_hold_the_common_fields_first():
    from hetlb.kernels.server_state import CACHE_FIELDS, CacheExtension, SlotCacheExtension

    assert CacheExtension._fields == (*CACHE_FIELDS, "serving")
    assert SlotCacheExtension._fields[: len(CACHE_FIELDS)] == CACHE_FIELDS
