"""The simulator with prefix caches against the exact chain of small systems
(hetlb.theory.exact_cache, written from the docs alone): mean response time, time to first token,
block hit ratio and blocking probability of every policy that reads the caches and two that do not,
on two small systems, within Student-t intervals over independent replications (Bonferroni over
the measures of each case, family level FAMILY_ALPHA). Policies whose chain has several closed
classes (cache-aware, prefix-score on equal servers) settle in one per replication; the exact
figures average the classes by their chances from the empty start, as the replications do.

Skipped where hetlb.theory.exact_cache is not there."""

import numpy as np
import pytest

import hetlb
from hetlb.theory.lru import zipf_popularity

from support.statistics import bonferroni_t_halfwidth

exact_cache = pytest.importorskip("hetlb.theory.exact_cache")

FAMILY_ALPHA = 0.01
REPLICATIONS = 10
MEASURES = (
    ("mean_response_time", "mean_response_time"),
    ("mean_ttft", "mean_ttft"),
    ("cache_hit_ratio", "block_hit_ratio"),
    ("blocking_probability", "blocking_probability"),
)
SYSTEMS = {
    # two speeds, prefixes of two blocks, caches of two and three blocks
    "two blocks": dict(speed=[1.5, 0.7], arrival_rate=1.3, buffer=3, cache_blocks=[2, 3], count=3, zipf=1.0, blocks=2, W=0.4),
    # equal speeds, unequal buffers and caches, heavy prefill
    "heavy prefill": dict(speed=[1.0, 1.0], arrival_rate=1.4, buffer=[3, 2], cache_blocks=[1, 3], count=3, zipf=1.2, blocks=1, W=1.5),
}  # fmt: skip
POLICIES = ["jsq", "sed", "eft", "balanced-pandas", "prefix-score", "cache-aware", "chash"]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("name", list(SYSTEMS))
def test_the_simulator_agrees_with_the_exact_chain(name, policy):
    spec = SYSTEMS[name]
    exact = exact_cache.solve_exact_cache(
        spec["speed"],
        spec["arrival_rate"],
        spec["buffer"],
        policy,
        cache_blocks=spec["cache_blocks"],
        popularity=zipf_popularity(spec["count"], spec["zipf"]),
        blocks=spec["blocks"],
        prefill_work=spec["W"],
    )
    system = hetlb.System.from_speeds(
        spec["speed"],
        arrival_rate=spec["arrival_rate"],
        buffer=spec["buffer"],
        cache_blocks=spec["cache_blocks"],
        prompts=f"shared:count={spec['count']},blocks={spec['blocks']},zipf={spec['zipf']},unique=0",
        prefill_work=spec["W"],
        prefill_law="exponential",  # the chain's prefill is an exponential phase
    )
    result = hetlb.simulate(system, policy, jobs=40_000, warmup=50.0, replications=REPLICATIONS, seed=21)
    for simulated, solved in MEASURES:
        samples = np.array([getattr(run, simulated) for run in result.runs])
        half = bonferroni_t_halfwidth(samples, FAMILY_ALPHA, len(MEASURES))
        expected = getattr(exact, solved)
        assert abs(samples.mean() - expected) <= half + 1e-9, (
            f"{simulated}: {samples.mean():.5g} +- {half:.3g}, exact {expected:.5g}"
        )
