"""Hit ratios of an LRU cache under independent requests: exact for small catalogues, Che's
approximation for any size. The independent check that a simulated prefix (KV) cache is held to.

Model (the independent reference model, IRM). A catalogue holds items i = 1..n (prompt
prefixes). Each request is for item i with probability p_i (``popularity``, normalised to sum 1),
independently of every other request. Item i occupies s_i >= 1 blocks (``sizes``, integers); the
cache holds at most C blocks (``capacity``), and every s_i <= C. The cache keeps its items in
order of their last request. On a request for item i, i moves to the front (a hit if it was
cached, a miss otherwise, when it is inserted whole); then, while the cached items occupy more
than C blocks, the least recently used item is evicted whole. So with unit sizes the cache holds
the C most recently requested distinct items. ``item_hit[i]`` is h_i, the stationary probability
that item i is cached, which is the probability that a request for i hits (a request is
independent of the past); items of popularity 0 are never requested, never enter the cache and
have h_i = 0. The hit ratio is sum_i p_i h_i, the share of requests that hit; the block hit
ratio sum_i p_i s_i h_i / sum_i p_i s_i is the share of requested blocks that hit, the share of
prefill work a cache saves. Time is counted in requests (a unit total request rate, so item i is
requested at rate lambda_i = p_i).

Blocks. An engine's prefix cache evicts blocks, not items: a prompt's blocks are touched together
and a chain's tail is evicted before its head. When every item has the same size B and C is a
multiple of B, the blocks of a chain are always evicted together and the block cache is this
model with C / B unit items. Otherwise block eviction can leave the head of a chain cached
without its tail (a partial hit, which saves part of a prompt's prefill); this model has no
partial items, and neither method below is exact for that variant.

Exact (``method="exact"``). Look back in time from a request: the distinct items met, in the
order met, X_1, X_2, ..., are drawn without replacement with probabilities proportional to p (the
requests are i.i.d.; items of popularity 0 are never drawn). The cache holds X_1..X_k, the longest
prefix of this order that fits in C blocks (X_{k+1} does not fit, or no item is left; a smaller
item further back does not enter). By induction on requests from an empty cache: a hit moves a
cached item to the front and keeps the set, its blocks and the first item that does not fit; a
miss puts the item in front and evicts from the back exactly until the rest fits, which leaves the
longest fitting prefix of the new order. With unit sizes this is the product form (King 1971;
Flajolet, Gardy and Thimonier 1992): the cache, in recency order (i_1, ..., i_C), has stationary
probability

    prod_{j=1..C} p_{i_j} / (1 - sum_{l<j} p_{i_l}).

With sizes the cache is the set S, in any order, when the first |S| items drawn form S and the
next one does not fit:

    P(cache = S) = P(S) * sum_{j not in S, s_j > C - s(S)} p_j / (1 - p(S)),
    P(S) = sum_{j in S} P(S - j) p_j / (1 - p(S - j)),   P(empty set) = 1,

where s(S) and p(S) are the blocks and popularity of S and the recursion sums the product form
over the orders of S (the next draw depends on S, not on its order). Then
h_i = sum_{S containing i} P(cache = S). The computation visits each set of items that fits in the
cache once, with each item as a candidate to add: about (number of fitting sets) x n steps, which
is counted before it starts and refused beyond ``max_steps``. Its sums are of positive terms
(1 - p(S) is summed over the items outside S), without cancellation.

Che's approximation (``method="che"``; Che, Tung and Wang 2002). Item i stays cached for a time
t_c after its last request, the same for every item: h_i = 1 - exp(-p_i t_c), where the
characteristic time t_c (in requests) fills the cache on average: sum_i s_i (1 - exp(-p_i t_c)) = C
(with sizes, each item counts its blocks). When the requested items fit together
(sum_{p_i > 0} s_i <= C) every one of them stays cached: t_c is infinite and h_i = 1. It is an
approximation, asymptotically exact as cache and catalogue grow (Fagin 1977; Jiang, Nain and
Towsley 2018) and accurate to a few percent for Zipf catalogues and small caches (Fricker, Robert
and Roberts 2012 explain why); with sizes it does not see the blocks that whole-item eviction
leaves free (up to max s_i - 1), so it tends to overestimate hits when items are large against C.
It costs O(n) per step of a bracketed root search (Brent's method), for catalogues of millions of
items.
"""

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq

from hetlb import validation
from hetlb.errors import InputError

__all__ = [
    "LRU_METHODS",
    "MAX_LRU_EXACT_STEPS",
    "LruHitRatio",
    "lru_hit_ratio",
    "zipf_popularity",
]

LRU_METHODS = ("auto", "exact", "che")
"""The methods of :func:`lru_hit_ratio`: ``auto`` is ``exact`` when it is within ``max_steps``, else ``che``."""

MAX_LRU_EXACT_STEPS = 50_000_000
"""Default limit on the steps of the exact method: the sets of items that fit in the cache times
the items (a few seconds)."""

_CHUNK_ELEMENTS = 1 << 21
"""Set-item pairs handled at once by the exact method (bounds its temporary arrays)."""

_KNAPSACK_CELLS = 50_000_000
"""Items x (capacity + 1) beyond which the fitting sets are bounded by their counts of items alone."""


@dataclass(frozen=True, eq=False)
class LruHitRatio:
    """Stationary hit probabilities of an LRU cache under independent requests (module docstring).

    Parameters
    ----------
    item_hit
        ``item_hit[i]`` = h_i, the probability that a request for item i finds it cached (0 for an
        item of popularity 0).
    hit_ratio
        sum_i p_i h_i, the share of requests that hit.
    block_hit_ratio
        sum_i p_i s_i h_i / sum_i p_i s_i, the share of requested blocks that hit.
    method
        ``exact`` or ``che``, the method used.
    t_c
        Che's characteristic time, in requests (infinite when every requested item fits in the
        cache); None for the exact method.
    """

    item_hit: np.ndarray
    hit_ratio: float
    block_hit_ratio: float
    method: str
    t_c: float | None


def zipf_popularity(count, exponent) -> np.ndarray:
    """Zipf popularity of ``count`` items: p_i = i^(-S) / sum_{j=1..count} j^(-S), i = 1..count.

    The law of the ``shared:count=K,blocks=B,zipf=S`` workload (K = ``count``, S = ``exponent``):
    item 1 is the most popular.

    Parameters
    ----------
    count
        K, the number of items (an integer >= 1).
    exponent
        S > 0, the Zipf exponent (0 would be uniform popularity, which is not a Zipf law here).

    Returns
    -------
    numpy.ndarray
        p, of length ``count``, summing to 1.

    Examples
    --------
    >>> zipf_popularity(3, 1.0).round(4)   # (1, 1/2, 1/3) / (11/6)
    array([0.5455, 0.2727, 0.1818])
    """
    count = validation.count("count", count)
    exponent = validation.number("exponent", exponent, 0.0, strict=True)
    validation.check_memory("count", 24 * count, f"a popularity of {count:,} items", "use fewer items")
    weight = np.exp(-exponent * np.log(np.arange(1, count + 1, dtype=np.float64)))
    return weight / weight.sum()


def lru_hit_ratio(popularity, capacity, sizes=None, method="auto", *, max_steps=MAX_LRU_EXACT_STEPS) -> LruHitRatio:
    """Stationary hit probabilities of an LRU cache of ``capacity`` blocks under independent
    requests with probabilities ``popularity`` for items of ``sizes`` blocks (module docstring).

    Parameters
    ----------
    popularity
        Weights w_i >= 0 of the items, finite and not all 0; p_i = w_i / sum_j w_j (they need not
        sum to 1).
    capacity
        C, the blocks the cache holds (an integer >= 1).
    sizes
        s_i, the blocks of item i (integers in [1, C]); None: every item is one block.
    method
        ``exact`` (the product form, for small catalogues), ``che`` (Che's approximation, any
        catalogue) or ``auto`` (``exact`` when it takes at most ``max_steps`` steps, else ``che``).
    max_steps
        The most steps the exact method may take: the sets of items that fit in the cache times
        the items of popularity > 0.

    Returns
    -------
    LruHitRatio
        h_i per item, the hit ratio, the block hit ratio, the method used and Che's t_c.

    Raises
    ------
    InputError
        On invalid input, and for ``method="exact"`` beyond ``max_steps``.

    Examples
    --------
    Uniform popularity: each item is cached with probability C / n.

    >>> lru_hit_ratio([1, 1, 1, 1], capacity=2).item_hit
    array([0.5, 0.5, 0.5, 0.5])

    Two items, one slot: the cached item is the last one requested, so h_i = p_i.

    >>> result = lru_hit_ratio([0.75, 0.25], capacity=1)
    >>> result.hit_ratio, result.method   # 0.75^2 + 0.25^2
    (0.625, 'exact')

    A million Zipf(0.8) prompts of 4 blocks in 400,000 blocks, by Che's approximation:

    >>> result = lru_hit_ratio(zipf_popularity(10**6, 0.8), 400_000, sizes=np.full(10**6, 4))
    >>> result.method, round(result.hit_ratio, 2)
    ('che', 0.49)
    """
    p = _popularity(popularity)
    capacity = validation.count("capacity", capacity)
    s = _sizes(sizes, len(p), capacity)
    method = validation.choice("method", method, LRU_METHODS)
    max_steps = validation.count("max_steps", max_steps)

    requested = p > 0
    n_requested = int(requested.sum())
    if _total(s[requested]) <= capacity:  # every requested item stays cached
        item_hit = requested.astype(np.float64)
        return _result(p, s, item_hit, "che" if method == "che" else "exact", math.inf if method == "che" else None)
    if method != "che":
        steps = _exact_steps(s[requested], capacity, max_steps)
        if steps <= max_steps:
            sets = steps / n_requested
            validation.check_memory(
                "max_steps",
                sets * 8 * (n_requested // 64 + 2) * 4,  # two layers of sets: bit masks and probabilities
                f"the exact method on {validation.quantity(sets)} sets of items",
                "use method 'che', or lower max_steps",
            )
            item_hit = np.zeros(len(p))
            item_hit[requested] = _exact_item_hit(p[requested], s[requested], capacity)
            return _result(p, s, item_hit, "exact", None)
        if method == "exact":
            raise InputError(
                "method",
                f"'exact' takes more than {validation.quantity(max_steps)} steps (max_steps) here: it visits each "
                f"set of items that fits in {capacity:,} blocks once per item, for {n_requested:,} "
                "requested items; use method 'che' or 'auto', fewer items or a smaller capacity, or raise max_steps",
            )
    t_c = _che_characteristic_time(p[requested], s[requested], capacity)
    item_hit = np.zeros(len(p))
    item_hit[requested] = -np.expm1(-p[requested] * t_c)
    return _result(p, s, item_hit, "che", t_c)


def _popularity(popularity) -> np.ndarray:
    """The weights as probabilities p (float64, summing to 1), or InputError("popularity")."""
    try:
        raw = np.asarray(popularity)
        if raw.dtype.kind in "bUSVM":  # true/false, texts, records, dates: not weights
            raise TypeError
        weight = raw.astype(np.float64)
    except (TypeError, ValueError, OverflowError):
        raise InputError("popularity", "must be a list of numbers (weights >= 0)") from None
    if weight.ndim != 1 or len(weight) == 0:
        raise InputError("popularity", "must be a non-empty list of numbers (weights >= 0)")
    bad = weight[~(np.isfinite(weight) & (weight >= 0))]
    if len(bad):
        raise InputError("popularity", f"every weight must be finite and >= 0, got {bad[0]}")
    largest = weight.max()
    if largest == 0:
        raise InputError("popularity", "must have a weight > 0 (every weight is 0: no item is ever requested)")
    p = weight / largest  # no overflow in the sum
    return p / p.sum()


def _sizes(sizes, n_items: int, capacity: int) -> np.ndarray:
    """The sizes as int64 blocks in [1, capacity], one per item, or InputError("sizes")."""
    if sizes is None:
        return np.ones(n_items, dtype=np.int64)
    try:
        array = np.asarray(sizes)
    except (TypeError, ValueError, OverflowError):
        array = None
    if array is None or array.ndim != 1:
        raise InputError("sizes", f"must be a list of integers (blocks per item), got {validation.shown(sizes)}")
    if len(array) != n_items:
        raise InputError("sizes", f"must give one size per item of popularity ({n_items:,}), got {len(array):,}")
    integers = array.dtype.kind in "iu" or (array.dtype == object and all(map(validation.is_integer, array)))
    if not integers:
        raise InputError("sizes", f"every size must be an integer (blocks), got {validation.shown(sizes)}")
    bad = [size for size in array[(array < 1) | (array > capacity)][:1]]
    if bad:
        why = " (an item larger than the cache is never cached)" if bad[0] > capacity else ""
        raise InputError("sizes", f"every size must be an integer in [1, capacity = {capacity}]{why}, got {bad[0]}")
    return array.astype(np.int64)


def _total(sizes: np.ndarray) -> int:
    """The sum of ``sizes``, exactly (int64 when it cannot overflow, else Python integers)."""
    if len(sizes) == 0 or int(sizes.max()) <= (2**63 - 1) // len(sizes):
        return int(sizes.sum())
    return sum(int(size) for size in sizes)


def _result(p, sizes, item_hit, method, t_c) -> LruHitRatio:
    block_weight = p * sizes.astype(np.float64)
    return LruHitRatio(
        item_hit=item_hit,
        hit_ratio=float(np.sum(p * item_hit) / np.sum(p)),  # 1 exactly when every item hits
        block_hit_ratio=float(np.sum(block_weight * item_hit) / np.sum(block_weight)),
        method=method,
        t_c=t_c,
    )


# --- exact ---------------------------------------------------------------------------------------


def _exact_steps(sizes: np.ndarray, capacity: int, limit: int) -> float:
    """The steps of the exact method, (sets of items that fit in ``capacity``) x items: bounded by
    the sets of at most K items (K the most items that fit, the smallest ones), and when that bound
    is beyond ``limit`` and a knapsack count is cheap, counted exactly (to float precision)."""
    n_items = len(sizes)
    most_items = _most_items_that_fit(sizes, capacity)
    bound = 0
    for k in range(most_items + 1):
        bound += math.comb(n_items, k)
        if bound * n_items > limit:
            break
    if bound * n_items <= limit or n_items * (capacity + 1) > _KNAPSACK_CELLS:
        return float(bound * n_items)
    fitting = np.zeros(capacity + 1)  # fitting[b]: the sets of exactly b blocks, as a float count
    fitting[0] = 1.0
    for size in sizes:
        fitting[size:] = fitting[size:] + fitting[:-size]
    return float(fitting.sum()) * n_items  # inf when beyond float range


def _most_items_that_fit(sizes: np.ndarray, capacity: int) -> int:
    """K, the most items whose sizes add up to at most ``capacity`` (the smallest ones)."""
    ascending = np.sort(sizes)
    if int(ascending[-1]) <= (2**63 - 1) // len(ascending):  # the running sums fit in int64
        return int(np.searchsorted(np.cumsum(ascending), capacity, side="right"))
    used = 0
    for k, size in enumerate(ascending.tolist()):
        used += size
        if used > capacity:
            return k
    return len(ascending)


def _exact_item_hit(p: np.ndarray, sizes: np.ndarray, capacity: int) -> np.ndarray:
    """h_i by the recursion of the module docstring, over the sets that fit, by their number of
    items (all p > 0, and the items do not all fit). A set is a bit mask in 64-bit words."""
    n_items = len(p)
    n_words = -(-n_items // 64)
    word_of = np.arange(n_items) // 64
    bit_of = (np.uint64(1) << (np.arange(n_items) % 64).astype(np.uint64)).astype(np.uint64)
    item_hit = np.zeros(n_items)
    sets = np.zeros((1, n_words), dtype=np.uint64)  # the sets of k items that fit
    probability = np.ones(1)  # P(the first k items drawn form the set)
    while len(sets):
        grown_sets: list[np.ndarray] = []
        grown_probability: list[np.ndarray] = []
        rows_per_chunk = max(1, _CHUNK_ELEMENTS // n_items)
        for start in range(0, len(sets), rows_per_chunk):
            chunk = sets[start : start + rows_per_chunk]
            weight = probability[start : start + rows_per_chunk]
            inside = (chunk[:, word_of] & bit_of) != 0
            outside_p = np.where(inside, 0.0, p)
            rest = outside_p.sum(axis=1)  # 1 - p(S), summed without cancellation
            room = capacity - inside @ sizes
            fits = ~inside & (sizes[None, :] <= room[:, None])
            stop = np.where(fits, 0.0, outside_p).sum(axis=1) / rest
            item_hit += (weight * stop) @ inside
            row, item = np.nonzero(fits)
            grown = chunk[row]
            grown[np.arange(len(row)), word_of[item]] |= bit_of[item]
            grown_sets.append(grown)
            grown_probability.append(weight[row] * p[item] / rest[row])
            if sum(map(len, grown_sets)) > max(_CHUNK_ELEMENTS, 2 * len(grown_sets[0])):  # bound the memory
                merged_sets, merged_probability = _merge(grown_sets, grown_probability, n_words)
                grown_sets, grown_probability = [merged_sets], [merged_probability]
        sets, probability = _merge(grown_sets, grown_probability, n_words)
    return item_hit


def _merge(sets: list, probability: list, n_words: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct sets among ``sets`` (rows of n_words bit-mask words), each with the sum of
    its probabilities."""
    rows = np.concatenate(sets) if sets else np.zeros((0, n_words), dtype=np.uint64)
    if rows.shape[1] == 1:
        unique, inverse = np.unique(rows[:, 0], return_inverse=True)
        unique = unique[:, None]
    else:
        unique, inverse = np.unique(rows, axis=0, return_inverse=True)
    weights = np.concatenate(probability) if probability else np.zeros(0)
    return unique, np.bincount(inverse.ravel(), weights=weights, minlength=len(unique))


# --- Che -----------------------------------------------------------------------------------------


def _che_characteristic_time(p: np.ndarray, sizes: np.ndarray, capacity: int) -> float:
    """t_c with sum_i s_i (1 - exp(-p_i t_c)) = C (all p > 0, and the items do not all fit).

    The left side rises from 0 to sum_i s_i > C. It is at most t sum_i s_i p_i, so it is <= C at
    t_lo = C / sum_i s_i p_i; it is at least sum_i s_i (1 - exp(-p_min t)), so it is >= C at
    t_hi = -log(1 - C / sum_i s_i) / p_min <= log(sum_i s_i) / p_min. Brent's method finds the root
    in [t_lo, t_hi]."""
    blocks = sizes.astype(np.float64)

    def excess(t: float) -> float:
        return float(np.dot(blocks, -np.expm1(-p * t))) - capacity

    low = capacity / float(np.dot(blocks, p))
    total = float(_total(sizes))
    # -log(1 - C / total) <= log(total) for C <= total - 1; the second stays finite when C / total rounds to 1
    high = max(min(-math.log1p(-min(capacity / total, 1.0)), math.log(total)) / float(p.min()), low)
    if excess(low) >= 0:  # rounding at the bound
        return low
    for _ in range(64):  # rounding at the bound: widen it until the sign changes
        if excess(high) >= 0:
            return float(brentq(excess, low, high, xtol=low * 1e-15, rtol=1e-14, maxiter=500))
        high *= 2.0
    return high  # the sum stays below C to float precision: every h_i is 1 to float precision
