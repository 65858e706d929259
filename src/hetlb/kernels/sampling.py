"""Walker's alias table: a draw from a discrete law on 0..n-1 with one uniform number, O(1).

The table has n buckets of equal probability 1/n; bucket i holds its own index with probability
``keep[i]`` and ``alias[i]`` otherwise. A uniform u on [0, 1) gives the bucket i = floor(u n), and
the rest u n - i, uniform on [0, 1) and independent of i, decides between i and its alias. Vose's
construction fills the buckets so that index k comes out with probability weight[k] / sum(weight)
(to rounding). The continuous kernel draws the type of every arrival so (one uniform number, where
a binary search over the cumulative rates reads log2 n cache lines).
"""

import numpy as np

from hetlb.jit import njit


@njit
def alias_table(weight):
    """(keep, alias) of Walker's alias table for the nonnegative ``weight`` (Vose's construction)."""
    n = len(weight)
    scaled = weight * (n / weight.sum())
    keep = np.ones(n)
    alias = np.arange(n)
    small = np.empty(n, np.int64)  # a stack of the buckets below 1 and, from the top, those at or above
    n_small, top = 0, n
    for k in range(n):
        if scaled[k] < 1.0:
            small[n_small] = k
            n_small += 1
        else:
            top -= 1
            small[top] = k
    while n_small > 0 and top < n:
        n_small -= 1
        s = small[n_small]
        g = small[top]
        keep[s] = scaled[s]
        alias[s] = g
        scaled[g] -= 1.0 - scaled[s]
        if scaled[g] < 1.0:  # g joins the small ones
            top += 1
            small[n_small] = g
            n_small += 1
    # the buckets left over hold exactly 1 up to rounding: they keep their own index
    return keep, alias


@njit
def alias_draw(keep, alias, u):
    """The index that the uniform ``u`` on [0, 1) draws from the table (keep, alias)."""
    n = len(keep)
    x = u * n
    i = min(int(x), n - 1)
    return i if x - i < keep[i] else alias[i]


POISSON_INVERSION_MAX_MEAN = 10.0
"""Below this mean a Poisson count is drawn by inversion (:func:`poisson_by_inversion`), at or above
it by numpy's Generator.poisson (its PTRS method, O(1) per draw)."""


@njit
def poisson_by_inversion(mean, zero_probability, u):
    """The Poisson(``mean``) count that the uniform ``u`` on [0, 1) draws by inversion: the least k
    with u < P(X <= k), the probabilities built up from ``zero_probability`` = exp(-mean) by
    P(X = k) = P(X = k - 1) mean / k. One uniform number and about mean + 1 steps, where
    numpy's multiplication method (its choice below a mean of 10) takes mean + 1 uniform numbers and
    an exponential. Should rounding leave P(X <= k) below u for every k, the search ends where
    P(X = k) underflows to 0 (a count of probability far below 1e-300)."""
    k = 0
    probability = zero_probability
    cumulative = zero_probability
    while u >= cumulative and probability > 0.0:
        k += 1
        probability *= mean / k
        cumulative += probability
    return k
