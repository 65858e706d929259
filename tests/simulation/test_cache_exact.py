"""The simulator with prefix caches against the exact chain over queues and cache orders
(hetlb.theory.solve_exact_cache), written separately from the kernels: two servers of speeds 2
and 1, finite buffers, caches of 2 and 3 blocks, two shared prefixes of two blocks, an
exponential prefill law (the chain's), for the cache-reading policies and jsq.

Tolerance: independent replications, a Student-t interval at family level 0.1% split over every
comparison of this file (Bonferroni); the exact values come from the chain, never from a run."""

import pytest

import hetlb
from hetlb.theory import solve_exact_cache

from support.statistics import bonferroni_t_halfwidth

PROMPTS = "shared:count=2,blocks=2,zipf=1,unique=0"
POLICIES = [
    ("cache-aware", {"abs": 1.0, "rel": 1.5, "match": 0.5}),
    ("chash", {"load": 1.25}),
    ("eft", {}),
    ("prefix-score", {}),
    ("jsq", {}),
]
FIGURES = ("mean_response_time", "mean_ttft", "cache_hit_ratio")
COMPARISONS = len(POLICIES) * len(FIGURES)
FAMILY_ALPHA = 1e-3


@pytest.mark.slow
@pytest.mark.parametrize("policy,params", POLICIES, ids=[p for p, _ in POLICIES])
def test_the_simulator_agrees_with_the_exact_chain_with_caches(policy, params):
    system = hetlb.System.from_speeds(
        [2.0, 1.0],
        arrival_rate=2.0,
        buffer=3,
        cache_blocks=[2, 3],
        prompts=PROMPTS,
        prefill_work=1.0,
        prefill_law="exponential",
    )
    exact = solve_exact_cache(
        [2.0, 1.0],
        2.0,
        3,
        policy,
        cache_blocks=[2, 3],
        popularity=system.caches.prompts.popularity(),
        blocks=2,
        prefill_work=1.0,
        **params,
    )
    assert exact.n_closed_classes == 1
    result = hetlb.simulate(
        system, hetlb.make_policy(policy, **params), jobs=40_000, warmup=200.0, replications=12, seed=7
    )
    expected = {
        "mean_response_time": exact.mean_response_time,
        "mean_ttft": exact.mean_ttft,
        "cache_hit_ratio": exact.block_hit_ratio,
    }
    for figure in FIGURES:
        samples = [getattr(run, figure) for run in result.runs]
        halfwidth = bonferroni_t_halfwidth(samples, FAMILY_ALPHA, COMPARISONS)
        mean = sum(samples) / len(samples)
        assert abs(mean - expected[figure]) <= halfwidth, (figure, mean, expected[figure], halfwidth)


@pytest.mark.slow
def test_a_large_catalogue_agrees_with_ches_approximation():
    """One server, 2,000 one-block prefixes of Zipf(0.8) popularity and a cache of 200 blocks: the
    admitted prompts are independent requests in FIFO order, so the hit ratio is LRU's under the
    independent reference model, which Che's approximation gives within about 1% at this size
    (Fricker, Robert and Roberts 2012; tests/theory/test_lru.py measures its error shrinking with the
    cache): the simulated ratio lies within that error plus the replications' interval."""
    from hetlb.theory import lru_hit_ratio

    system = hetlb.System.from_speeds(
        [1.0], load=0.5, buffer=4, cache_blocks=200, prompts="shared:count=2000,blocks=1,zipf=0.8,unique=0"
    )
    che = lru_hit_ratio(system.caches.prompts.popularity(), 200, method="che").hit_ratio
    result = hetlb.simulate(system, "jsq", jobs=100_000, warmup=2_000.0, replications=8, seed=3)
    samples = [run.cache_hit_ratio for run in result.runs]
    halfwidth = bonferroni_t_halfwidth(samples, FAMILY_ALPHA, 1)
    assert abs(sum(samples) / len(samples) - che) <= halfwidth + 0.01 * che
