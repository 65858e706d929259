"""The decision rules of the cache-reading policies (hetlb.policies.cache_rules) on cases worked out
by hand from their definitions (docs/background/prefix-caches.md), and chash's ring against a
plain-Python splitmix64."""

import numpy as np
import pytest

from hetlb.policies import cache_rules
from hetlb.policies.registry import BALANCED_PANDAS, CACHE_AWARE, EFT, POLICIES, PREFIX_SCORE
from hetlb.policies.rules import least_key_server

MASK = (1 << 64) - 1


def splitmix_finaliser(x: int) -> int:
    z = (x + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def keys(
    code,
    params,
    *,
    queue_len,
    match,
    chain_len,
    index_size=None,
    held=None,
    capacity=None,
    work=None,
    rate=None,
    prefill_work=0.0,
):
    n = len(queue_len)
    arrays = [
        np.asarray(a, dtype=float if name in ("work", "rate") else np.int64)
        for name, a in (
            ("queue_len", queue_len),
            ("match", match),
            ("index_size", index_size if index_size is not None else [0] * n),
            ("held", held if held is not None else [0] * n),
            ("capacity", capacity if capacity is not None else [0] * n),
            ("work", work if work is not None else queue_len),
            ("rate", rate if rate is not None else [1.0] * n),
        )
    ]
    queue_len, match, index_size, held, capacity, work, rate = arrays
    key = np.full(n, np.nan)
    candidates = np.arange(n, dtype=np.int64)
    cache_rules.cache_keys(
        code,
        np.asarray(params, dtype=float),
        candidates,
        0,
        n,
        queue_len,
        match,
        chain_len,
        index_size,
        held,
        capacity,
        work,
        rate,
        prefill_work,
        key,
    )
    return key


def chosen(key, seed=0, draws=200):
    """The servers the least key picks over many draws (ties at random)."""
    rng = np.random.default_rng(seed)
    candidates = np.arange(len(key), dtype=np.int64)
    ties = np.empty(len(key), np.int64)
    return {int(least_key_server(candidates, 0, len(key), key, ties, rng)[0]) for _ in range(draws)}


def test_cache_aware_follows_the_longest_match_when_balanced():
    key = keys(CACHE_AWARE, [64, 1.5, 0.3], queue_len=[3, 0, 1], match=[4, 2, 4], chain_len=8)
    assert chosen(key) == {0, 2}  # ratio 4/8 >= 0.3: the two longest matches, at random


def test_cache_aware_goes_to_the_emptiest_index_below_the_match_threshold():
    key = keys(CACHE_AWARE, [64, 1.5, 0.6], queue_len=[3, 0, 1], match=[4, 2, 4], chain_len=8, index_size=[9, 7, 2])
    assert chosen(key) == {2}


@pytest.mark.parametrize(
    "queue_len,imbalanced",
    [
        ([5, 0, 2], True),
        ([5, 1, 2], True),
        ([4, 2, 3], False),
        ([3, 1, 1], False),
        ([4, 1, 1], True),
        ([7, 5, 6], False),
    ],
)
def test_cache_aware_balances_only_beyond_both_thresholds(queue_len, imbalanced):
    # abs = 2, rel = 1.5: imbalanced iff max - min > 2 and max > 1.5 min
    key = keys(CACHE_AWARE, [2, 1.5, 0.1], queue_len=queue_len, match=[8, 0, 0], chain_len=8)
    shortest = {s for s, n in enumerate(queue_len) if n == min(queue_len)}
    assert chosen(key) == (shortest if imbalanced else {0})


def test_prefix_score_weighs_match_queue_and_usage():
    # server 0: ratio 1, queue score 0, usage 1/2 -> 3 + 0 + 2 * 0.5 = 4
    # server 1: ratio 0, queue score 1, usage 0 -> 0 + 2 + 2 = 4
    # server 2: ratio 1/2, queue score 1/2, usage 1/4 -> 1.5 + 1 + 1.5 = 4
    key = keys(
        PREFIX_SCORE, [3, 2, 2], queue_len=[4, 0, 2], match=[4, 0, 2], chain_len=4, held=[4, 0, 2], capacity=[8, 8, 8]
    )
    assert np.allclose(-key, [4.0, 4.0, 4.0])
    key = keys(
        PREFIX_SCORE, [3, 2, 2], queue_len=[1, 1, 1], match=[0, 0, 0], chain_len=4, held=[0, 0, 0], capacity=[0, 0, 0]
    )
    assert np.allclose(-key, [4.0, 4.0, 4.0])  # equal queues score 1; no cache: usage 0


def test_eft_is_sed_without_prefill_and_prices_a_hit_against_speed():
    # W = 0: (U_s + 1) / mu_s with U_s = n_s, sed's key
    key = keys(EFT, [], queue_len=[2, 0], match=[0, 4], chain_len=4, work=[2.0, 0.0], rate=[2.0, 0.5])
    assert np.allclose(key, [3 / 2.0, 1 / 0.5])
    # W = 0.5, L = 4: fast miss (0 + 1 + 2) / 2 = 1.5 against slow hit (0 + 1 + 0) / 0.5 = 2: the fast server
    key = keys(EFT, [], queue_len=[0, 0], match=[0, 4], chain_len=4, work=[0.0, 0.0], rate=[2.0, 0.5], prefill_work=0.5)
    assert np.allclose(key, [1.5, 2.0])
    # W = 2: fast miss (1 + 8) / 2 = 4.5 against slow hit 2: the slow server's cache wins
    key = keys(EFT, [], queue_len=[0, 0], match=[0, 4], chain_len=4, work=[0.0, 0.0], rate=[2.0, 0.5], prefill_work=2.0)
    assert np.allclose(key, [4.5, 2.0])


def test_balanced_pandas_is_workload_over_the_jobs_rate():
    key = keys(
        BALANCED_PANDAS,
        [],
        queue_len=[1, 2],
        match=[0, 4],
        chain_len=4,
        work=[3.0, 2.0],
        rate=[2.0, 1.0],
        prefill_work=0.5,
    )
    assert np.allclose(key, [3.0 / 2.0 * (1 + 2.0) / 2.0, 2.0 / 1.0 * 1.0 / 1.0])


def test_the_ring_is_splitmix64_of_each_servers_points_sorted():
    positions, servers = cache_rules.chash_ring(3)
    points = sorted(
        (splitmix_finaliser(s * cache_rules.SERVER_STRIDE + j), s)
        for s in range(3)
        for j in range(cache_rules.RING_POINTS)
    )
    assert [int(p) for p in positions] == [p for p, _ in points] and servers.tolist() == [s for _, s in points]
    assert int(cache_rules.ring_key(41)) == splitmix_finaliser(41 + cache_rules.KEY_OFFSET)


def test_chash_keeps_a_prefix_on_its_server_under_the_bound_and_moves_on_past_it():
    positions, servers = cache_rules.chash_ring(4)
    candidates = np.arange(4, dtype=np.int64)
    eligible = np.zeros(4, np.int64)
    key = cache_rules.ring_key(7)
    start = int(np.searchsorted(positions, key)) % len(positions)
    home = int(servers[start])
    idle = np.zeros(4, np.int64)
    assert cache_rules.chash_server(candidates, 0, 4, idle, 1.25, key, positions, servers, eligible) == home
    full = idle.copy()
    full[home] = 2  # n = 2: bound ceil(1.25 * 3 / 4) = 1, so the home server is full
    nxt = next(int(s) for s in np.roll(servers, -start) if s != home)
    assert cache_rules.chash_server(candidates, 0, 4, full, 1.25, key, positions, servers, eligible) == nxt
    assert eligible.tolist() == [0, 0, 0, 0]


def test_every_cache_policy_says_it_reads_the_cache():
    assert {spec.id for spec in POLICIES.values() if spec.reads_cache} >= {
        "cache-aware",
        "prefix-score",
        "chash",
        "balanced-pandas",
        "eft",
    }
