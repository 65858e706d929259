"""The key buckets (hetlb.kernels.buckets) against a brute-force least key, and their tie-breaking
against the uniform distribution."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from hetlb.kernels.buckets import grow_buckets, move_key, new_buckets, random_least_server

SIGNIFICANCE = 0.001
"""Level of the chi-square test of uniform tie-breaking (false alarm once in a thousand runs)."""


def assert_consistent(order, position, key, start):
    """order is a permutation sorted by key, position its inverse, start the blocks' boundaries."""
    n = len(order)
    assert sorted(order.tolist()) == list(range(n))
    np.testing.assert_array_equal(position[order], np.arange(n))
    np.testing.assert_array_equal(start, np.searchsorted(key[order], np.arange(len(start)), side="left"))
    assert np.all(np.diff(key[order]) >= 0)


@settings(max_examples=100, deadline=None)
@given(keys=st.lists(st.integers(0, 6), min_size=1, max_size=12), data=st.data())
def test_moves_keep_the_buckets_sorted_and_the_choice_least(keys, data):
    n_keys = 12
    order, position, key, start = new_buckets(np.array(keys), n_keys)
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    for _ in range(data.draw(st.integers(1, 30))):
        server = data.draw(st.integers(0, len(keys) - 1))
        move_key(order, position, key, start, server, data.draw(st.integers(0, n_keys - 2)))
        assert_consistent(order, position, key, start)
        chosen, least = random_least_server(order, key, start, rng)
        assert key[chosen] == least == key.min()


def test_grown_buckets_keep_their_blocks():
    order, position, key, start = new_buckets(np.array([0, 2, 1, 2]), 4)
    start = grow_buckets(start, 9)
    move_key(order, position, key, start, 0, 7)
    assert_consistent(order, position, key, start)
    assert random_least_server(order, key, start, np.random.default_rng(0))[1] == 1


def test_ties_are_broken_uniformly():
    """Five of twelve servers share the least key after a history of moves; 50,000 choices are
    compared with the uniform distribution on those five by a chi-square test."""
    order, position, key, start = new_buckets(np.array([3, 1, 4, 1, 5, 2, 6, 2, 5, 3, 5, 8]), 12)
    for server, new_key in [(0, 1), (4, 1), (3, 2), (3, 1), (11, 1), (1, 6), (1, 1), (6, 2), (2, 1), (11, 4)]:
        move_key(order, position, key, start, server, new_key)
    tied = np.flatnonzero(key == key.min())
    assert len(tied) == 5
    rng = np.random.default_rng(2024)
    draws = 50_000
    chosen = np.array([random_least_server(order, key, start, rng)[0] for _ in range(draws)])
    assert set(np.unique(chosen)) <= set(tied.tolist())
    counts = np.array([np.count_nonzero(chosen == s) for s in tied])
    assert stats.chisquare(counts).pvalue > SIGNIFICANCE
