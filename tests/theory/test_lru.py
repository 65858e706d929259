"""LRU hit ratios (hetlb.theory.lru) against independent checks: the Markov chain of the cache
contents built from the LRU rule, closed forms, a second exact formula (Fagin's integral), a
Monte-Carlo LRU, and the known accuracy of Che's approximation.
"""

import math
from collections import OrderedDict

import numpy as np
import pytest

from hetlb import theory
from hetlb.errors import InputError
from hetlb.theory.lru import LruHitRatio, lru_hit_ratio, zipf_popularity

from support.statistics import bonferroni_t_halfwidth

ALPHA = 0.001
"""Family error rate of the Monte-Carlo comparisons (Bonferroni over the comparisons of a test)."""

CHE_ALLOWANCE = 0.03
"""Che's approximation is not exact: the literature reports it accurate to a few percent (absolute)
for Zipf catalogues even with small caches (Che, Tung and Wang 2002; Fricker, Robert and Roberts
2012) and asymptotically exact as cache and catalogue grow (Fagin 1977; Jiang, Nain and Towsley
2018, checked below). Three points of hit probability is the "few percent" it is held to."""


# --- the oracle: the Markov chain of the cache contents, from the LRU rule -----------------------


def item_lru_step(state: tuple, item: int, sizes, capacity: int) -> tuple:
    """The cache after a request for ``item``: ``state`` lists the cached items, most recent first;
    the item goes to the front, then least recently used items leave until the rest fits."""
    order = [item] + [other for other in state if other != item]
    while sum(sizes[other] for other in order) > capacity:
        order.pop()
    return tuple(order)


def block_lru_step(state: tuple, item: int, sizes, capacity: int) -> tuple:
    """A block cache: ``state`` lists (item, block) pairs, most recent first. A request touches
    the item's blocks together, head to tail at the front; eviction takes blocks from the back,
    so an item's tail before its head."""
    blocks = [(item, block) for block in range(sizes[item])]
    order = blocks + [pair for pair in state if pair[0] != item]
    return tuple(order[:capacity])


def chain_item_hit(popularity, step, holds, n_items: int) -> np.ndarray:
    """Stationary P(item i is cached), solving pi P = pi on the states reachable from the empty
    cache, for requests drawn i.i.d. from ``popularity``."""
    index = {(): 0}
    frontier = [()]
    transitions = []
    while frontier:
        state = frontier.pop()
        for item in range(n_items):
            if popularity[item] == 0:
                continue
            nxt = step(state, item)
            if nxt not in index:
                index[nxt] = len(index)
                frontier.append(nxt)
            transitions.append((index[state], index[nxt], popularity[item]))
    size = len(index)
    matrix = np.zeros((size, size))
    for source, target, probability in transitions:
        matrix[source, target] += probability
    equations = matrix.T - np.eye(size)
    equations[0, :] = 1.0  # the rows sum to zero: one is redundant; normalise instead
    rhs = np.zeros(size)
    rhs[0] = 1.0
    stationary = np.linalg.solve(equations, rhs)
    states = list(index)
    return np.array([sum(stationary[k] for k, state in enumerate(states) if holds(state, i)) for i in range(n_items)])


def item_chain(popularity, sizes, capacity):
    return chain_item_hit(
        popularity, lambda state, item: item_lru_step(state, item, sizes, capacity), lambda s, i: i in s, len(sizes)
    )


def random_popularity(n_items: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).dirichlet(np.ones(n_items))


# --- exact against the chain -----------------------------------------------------------------------


@pytest.mark.parametrize("n_items,capacity", [(3, 1), (3, 2), (4, 2), (4, 3), (5, 1), (5, 2), (5, 3)])
def test_exact_unit_sizes_equals_the_markov_chain(n_items, capacity):
    popularity = random_popularity(n_items, seed=10 * n_items + capacity)
    sizes = np.ones(n_items, dtype=int)
    expected = item_chain(popularity, sizes, capacity)
    result = lru_hit_ratio(popularity, capacity, method="exact")
    assert result.method == "exact" and result.t_c is None
    np.testing.assert_allclose(result.item_hit, expected, rtol=0, atol=1e-12)
    assert result.hit_ratio == pytest.approx(popularity @ expected, abs=1e-12)


@pytest.mark.parametrize(
    "sizes,capacity",
    [([1, 2, 1, 3], 3), ([2, 1, 3, 1, 2], 4), ([1, 1, 2, 2, 3], 5), ([3, 3, 1, 2, 1], 6), ([2, 2, 2, 1, 4], 4)],
)
def test_exact_with_sizes_equals_the_markov_chain(sizes, capacity):
    popularity = random_popularity(len(sizes), seed=sum(sizes) + capacity)
    expected = item_chain(popularity, sizes, capacity)
    result = lru_hit_ratio(popularity, capacity, sizes=sizes, method="exact")
    np.testing.assert_allclose(result.item_hit, expected, rtol=0, atol=1e-12)
    weight = popularity * np.asarray(sizes)
    assert result.block_hit_ratio == pytest.approx(weight @ expected / weight.sum(), abs=1e-12)


def test_exact_with_an_item_never_requested():
    popularity = np.array([0.5, 0.0, 0.3, 0.2])
    sizes = [1, 1, 2, 1]
    expected = item_chain(popularity, sizes, 3)
    result = lru_hit_ratio(popularity, 3, sizes=sizes, method="exact")
    np.testing.assert_allclose(result.item_hit, expected, rtol=0, atol=1e-12)
    assert result.item_hit[1] == 0.0


@pytest.mark.parametrize("block,items_held", [(2, 2), (3, 2), (2, 3)])
def test_a_block_cache_of_equal_prompts_evicts_whole_prompts(block, items_held):
    """With every prompt B blocks and C a multiple of B, the block cache (a prompt's blocks touched
    together, its tail evicted first) is the item cache of C / B prompts."""
    n_items = 4
    popularity = random_popularity(n_items, seed=block * 7 + items_held)
    sizes = [block] * n_items
    capacity = block * items_held
    expected = chain_item_hit(
        popularity,
        lambda state, item: block_lru_step(state, item, sizes, capacity),
        lambda state, i: all((i, b) in state for b in range(block)),
        n_items,
    )
    by_blocks = lru_hit_ratio(popularity, capacity, sizes=sizes, method="exact")
    by_items = lru_hit_ratio(popularity, items_held, method="exact")
    np.testing.assert_allclose(by_blocks.item_hit, expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(by_items.item_hit, expected, rtol=0, atol=1e-12)


# --- closed forms ----------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["exact", "che"])
def test_everything_fits_everything_hits(method):
    result = lru_hit_ratio([3, 2, 1], 6, sizes=[1, 2, 3], method=method)
    assert result.item_hit.tolist() == [1.0, 1.0, 1.0]
    assert result.hit_ratio == result.block_hit_ratio == 1.0
    assert result.t_c == (math.inf if method == "che" else None)
    assert lru_hit_ratio([1, 2, 3, 4], 4, method=method).item_hit.tolist() == [1.0] * 4


def test_one_slot_holds_the_last_item_requested():
    popularity = random_popularity(6, seed=1)
    np.testing.assert_allclose(lru_hit_ratio(popularity, 1, method="exact").item_hit, popularity, rtol=0, atol=1e-15)


@pytest.mark.parametrize("method", ["exact", "che"])
@pytest.mark.parametrize("n_items,capacity", [(5, 2), (8, 3), (12, 5)])
def test_uniform_popularity_hits_with_probability_c_over_n(method, n_items, capacity):
    """Che's equation is then n (1 - exp(-t/n)) = C, so it is exact too (up to its root search)."""
    result = lru_hit_ratio(np.ones(n_items), capacity, method=method)
    np.testing.assert_allclose(result.item_hit, capacity / n_items, rtol=1e-12, atol=0)


@pytest.mark.parametrize("n_items,capacity", [(6, 2), (10, 4), (20, 3)])
def test_a_full_cache_of_unit_items_holds_c_of_them(n_items, capacity):
    result = lru_hit_ratio(zipf_popularity(n_items, 0.8), capacity, method="exact")
    assert result.item_hit.sum() == pytest.approx(capacity, rel=1e-12)


def test_sizes_near_the_integer_limit():
    """Three items of 2^61 blocks in 2^62: any two fit, as unit items in a cache of two."""
    popularity = random_popularity(3, seed=4)
    huge = lru_hit_ratio(popularity, 2**62, sizes=[2**61] * 3, method="exact")
    unit = lru_hit_ratio(popularity, 2, method="exact")
    np.testing.assert_allclose(huge.item_hit, unit.item_hit, rtol=0, atol=1e-15)
    che = lru_hit_ratio(popularity, 2**62, sizes=[2**61] * 3, method="che")
    np.testing.assert_allclose(che.item_hit, lru_hit_ratio(popularity, 2, method="che").item_hit, rtol=1e-12)


def test_popularity_is_normalised():
    weights = lru_hit_ratio([2, 1, 1], 2, method="exact")
    probabilities = lru_hit_ratio([0.5, 0.25, 0.25], 2, method="exact")
    np.testing.assert_allclose(weights.item_hit, probabilities.item_hit, rtol=1e-15)


def test_zipf_popularity():
    p = zipf_popularity(4, 1.5)
    weights = np.arange(1, 5) ** -1.5
    np.testing.assert_allclose(p, weights / weights.sum(), rtol=1e-14)
    assert zipf_popularity(1, 0.8).tolist() == [1.0]


# --- a second exact formula: Fagin's integral ---------------------------------------------------------


def fagin_item_hit(popularity, capacity: int, items, nodes: int) -> np.ndarray:
    """h_i for unit sizes by the continuous-time form of the IRM: items are requested as
    independent Poisson processes of rates p_j; looking back from time 0, the last request for j
    was tau_j ~ Exp(p_j) ago, and i is cached when fewer than C other items were requested since
    its own: h_i = int_0^inf p_i e^(-p_i t) P(#{j != i: tau_j <= t} < C) dt. The count is
    Poisson-binomial; the integral is the trapezoidal rule in log t over 10^-8..10^4 times the
    catalogue's scale n / C (the integrand is negligible outside)."""
    popularity = np.asarray(popularity, dtype=float)
    scale = len(popularity) / capacity
    log_t = np.linspace(math.log(1e-8 * scale), math.log(1e4 * scale), nodes)
    t = np.exp(log_t)
    hits = []
    for i in items:
        below = np.zeros((nodes, capacity))  # P(count = k) for k < C, built item by item
        below[:, 0] = 1.0
        for j, p_j in enumerate(popularity):
            if j == i:
                continue
            seen = -np.expm1(-p_j * t)[:, None]
            below[:, 1:] = below[:, 1:] * (1 - seen) + below[:, :-1] * seen
            below[:, :1] *= 1 - seen
        density = popularity[i] * t * np.exp(-popularity[i] * t) * below.sum(axis=1)  # per unit of log t
        head = -math.expm1(-popularity[i] * t[0])  # t < t[0]: the count is 0 there to within 1e-8
        hits.append(head + np.trapezoid(density, log_t))
    return np.array(hits)


def test_exact_equals_fagins_integral_beyond_the_chains_reach():
    """n = 30 and C = 5: 17 million ordered cache states, too many for the chain."""
    popularity = zipf_popularity(30, 0.8)
    items = list(range(30))
    coarse = fagin_item_hit(popularity, 5, items, 600)
    fine = fagin_item_hit(popularity, 5, items, 1200)
    quadrature_error = np.abs(fine - coarse).max()  # the finer rule is far more accurate than this
    exact = lru_hit_ratio(popularity, 5, method="exact")
    np.testing.assert_allclose(exact.item_hit, fine, rtol=0, atol=quadrature_error + 1e-12)
    assert quadrature_error < 1e-9


# --- exact against a Monte-Carlo LRU ---------------------------------------------------------------


def simulate_lru(popularity, sizes, capacity, batches=20, batch_size=10_000, warmup=2_000, seed=0):
    """An item LRU driven by i.i.d. requests: per batch, each item's hit share, the hit ratio and
    the block hit ratio."""
    rng = np.random.default_rng(seed)
    n_items = len(popularity)
    stream = rng.choice(n_items, size=warmup + batches * batch_size, p=popularity)
    cache: OrderedDict = OrderedDict()  # least recently used first
    used = 0
    hit = np.zeros(len(stream), dtype=bool)
    for t, item in enumerate(stream.tolist()):
        if item in cache:
            hit[t] = True
            cache.move_to_end(item)
            continue
        cache[item] = sizes[item]
        used += sizes[item]
        while used > capacity:
            used -= cache.popitem(last=False)[1]
    stream, hit = stream[warmup:], hit[warmup:]
    sizes = np.asarray(sizes)
    item_hit, hit_ratio, block_hit_ratio = [], [], []
    for batch in range(batches):
        items = stream[batch * batch_size : (batch + 1) * batch_size]
        hits = hit[batch * batch_size : (batch + 1) * batch_size]
        item_hit.append(np.bincount(items, hits, n_items) / np.bincount(items, minlength=n_items))
        hit_ratio.append(hits.mean())
        block_hit_ratio.append(sizes[items][hits].sum() / sizes[items].sum())
    return np.array(item_hit), np.array(hit_ratio), np.array(block_hit_ratio)


def test_exact_with_sizes_equals_a_monte_carlo_lru():
    popularity = zipf_popularity(10, 0.9)
    sizes = [3, 1, 4, 2, 1, 3, 2, 4, 1, 2]
    capacity = 8
    exact = lru_hit_ratio(popularity, capacity, sizes=sizes, method="exact")
    item_hit, hit_ratio, block_hit_ratio = simulate_lru(popularity, sizes, capacity, seed=11)
    comparisons = len(sizes) + 2
    for i in range(len(sizes)):
        half_width = bonferroni_t_halfwidth(item_hit[:, i], ALPHA, comparisons)
        assert abs(item_hit[:, i].mean() - exact.item_hit[i]) <= half_width, i
    assert abs(hit_ratio.mean() - exact.hit_ratio) <= bonferroni_t_halfwidth(hit_ratio, ALPHA, comparisons)
    assert abs(block_hit_ratio.mean() - exact.block_hit_ratio) <= bonferroni_t_halfwidth(
        block_hit_ratio, ALPHA, comparisons
    )


# --- Che's approximation ---------------------------------------------------------------------------


@pytest.mark.parametrize("n_items,capacity", [(20, 3), (30, 5), (50, 3)])
def test_che_is_within_a_few_percent_of_exact(n_items, capacity):
    popularity = zipf_popularity(n_items, 0.8)
    exact = lru_hit_ratio(popularity, capacity, method="exact")
    che = lru_hit_ratio(popularity, capacity, method="che")
    assert che.method == "che" and 0 < che.t_c < math.inf
    assert np.abs(che.item_hit - exact.item_hit).max() <= CHE_ALLOWANCE
    assert abs(che.hit_ratio - exact.hit_ratio) <= CHE_ALLOWANCE


def test_che_error_shrinks_as_cache_and_catalogue_grow():
    """Che's approximation is asymptotically exact as C and n grow together (Fagin 1977; Jiang,
    Nain and Towsley 2018): its error against Fagin's exact integral falls from C = 4 to 64."""
    errors = []
    for n_items, capacity in [(20, 4), (80, 16), (320, 64)]:
        popularity = zipf_popularity(n_items, 0.8)
        items = [0, n_items // 8, n_items // 4, n_items // 2, n_items - 1]
        exact = fagin_item_hit(popularity, capacity, items, 800)
        che = lru_hit_ratio(popularity, capacity, method="che").item_hit[items]
        errors.append(np.abs(che - exact).max())
    assert errors[0] > errors[1] > errors[2]


def test_che_with_sizes_against_a_monte_carlo_lru():
    """Whole items leave free blocks that no waiting item fits, which Che's equation (the cache
    exactly full on average) does not see; the error stays within the few percent allowed."""
    rng = np.random.default_rng(5)
    popularity = zipf_popularity(200, 0.8)
    sizes = rng.integers(1, 9, size=200)
    capacity = 100
    che = lru_hit_ratio(popularity, capacity, sizes=sizes, method="che")
    _, hit_ratio, block_hit_ratio = simulate_lru(popularity, sizes.tolist(), capacity, seed=12)
    for estimate, samples in [(che.hit_ratio, hit_ratio), (che.block_hit_ratio, block_hit_ratio)]:
        assert abs(samples.mean() - estimate) <= bonferroni_t_halfwidth(samples, ALPHA, 2) + CHE_ALLOWANCE


def test_che_on_a_million_items():
    n_items = 10**6
    popularity = zipf_popularity(n_items, 0.8)
    result = lru_hit_ratio(popularity, 400_000, sizes=np.full(n_items, 4))
    assert result.method == "che" and result.t_c > 0
    assert np.all(np.diff(result.item_hit) <= 0)  # the more popular, the more often cached
    assert np.all((result.item_hit > 0) & (result.item_hit <= 1))
    assert 4 * result.item_hit.sum() == pytest.approx(400_000, rel=1e-9)  # Che's equation holds
    assert result.block_hit_ratio == pytest.approx(result.hit_ratio, rel=1e-12)  # equal sizes


def test_auto_is_exact_when_small_and_che_when_large():
    assert lru_hit_ratio(zipf_popularity(10, 0.8), 3).method == "exact"
    assert lru_hit_ratio(zipf_popularity(2000, 0.8), 10).method == "che"
    assert lru_hit_ratio(zipf_popularity(10, 0.8), 3, max_steps=100).method == "che"
    # up to 3 of 20 items by their count, but only 58 sets fit by their sizes: 1,160 steps
    sizes = [1, 1] + [4] * 18
    assert lru_hit_ratio(zipf_popularity(20, 0.8), 5, sizes=sizes, max_steps=2_000).method == "exact"
    assert lru_hit_ratio(zipf_popularity(20, 0.8), 5, sizes=sizes, max_steps=1_000).method == "che"


# --- errors ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "arguments,field,rule",
    [
        (([0.5, 0.5], 0), "capacity", "integer >= 1"),
        (([0.5, 0.5], 2.0), "capacity", "integer >= 1"),
        (([0.5, -0.1, 0.6], 1), "popularity", ">= 0"),
        (([0.5, math.nan], 1), "popularity", "finite"),
        (([0, 0], 1), "popularity", "weight > 0"),
        (([], 1), "popularity", "non-empty"),
        (([[0.5, 0.5]], 1), "popularity", "non-empty list"),
        (("abc", 1), "popularity", "numbers"),
        (([True, False], 1), "popularity", "numbers"),
        (([0.5, 0.5], 2, [1, 1, 1]), "sizes", "one size per item"),
        (([0.5, 0.5], 2, [1, 0]), "sizes", "[1, capacity = 2]"),
        (([0.5, 0.5], 2, [1, 3]), "sizes", "larger than the cache"),
        (([0.5, 0.5], 2, [1.0, 2.0]), "sizes", "integer"),
        (([0.5, 0.5], 2, [1, 2**70]), "sizes", "[1, capacity = 2]"),
        (([0.5, 0.5], 1, None, "lfu"), "method", "auto, exact, che"),
    ],
)
def test_bad_input_names_the_field_and_the_rule(arguments, field, rule):
    with pytest.raises(InputError) as error:
        lru_hit_ratio(*arguments)
    assert error.value.field == field and rule in error.value.rule


def test_exact_refuses_a_catalogue_too_large_to_enumerate():
    with pytest.raises(InputError, match="max_steps") as error:
        lru_hit_ratio(zipf_popularity(1000, 0.8), 10, method="exact")
    assert error.value.field == "method"


@pytest.mark.parametrize(
    "count,exponent,field,rule",
    [
        (10, 0, "exponent", "> 0"),
        (10, -1.0, "exponent", "> 0"),
        (10, math.inf, "exponent", "finite"),
        (0, 1.0, "count", ">= 1"),
    ],
)
def test_zipf_popularity_bad_input(count, exponent, field, rule):
    with pytest.raises(InputError) as error:
        zipf_popularity(count, exponent)
    assert error.value.field == field and rule in error.value.rule


def test_exported_from_hetlb_theory():
    assert theory.lru_hit_ratio is lru_hit_ratio
    assert theory.LruHitRatio is LruHitRatio
    assert theory.zipf_popularity is zipf_popularity
