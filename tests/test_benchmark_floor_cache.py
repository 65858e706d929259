"""benchmarks/floor_cache.py, the floor of the paths with prefix caches, against what the model
implies on one server: the hit ratio of an LRU under independent requests (prefixes of one block,
no prefill) and Pollaczek-Khinchine's mean response time when every job after the first hits its
prefix and misses its own blocks.

Tolerances: independent replications, Student t intervals at family level 1% split over the checks
(Bonferroni); the exact values come from theory, never from a previous run.
"""

import sys
from pathlib import Path

import numpy as np

from hetlb.theory.lru import lru_hit_ratio, zipf_popularity

from support.statistics import bonferroni_t_halfwidth

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from floor_cache import simulate_cache_floor  # noqa: E402

CHECKS = 2
FAMILY_ALPHA = 0.01
REPLICATIONS = 10
JOBS = 40_000


def replications(seed, **kwargs):
    out = []
    for stream in np.random.SeedSequence(seed).spawn(REPLICATIONS):
        out.append(simulate_cache_floor(rng=np.random.Generator(np.random.PCG64(stream)), jobs=JOBS, **kwargs))
    return np.array(out)


def test_one_server_of_one_block_prefixes_is_an_lru_under_independent_requests():
    count, zipf, capacity = 10, 0.8, 3
    runs = replications(
        1, speed=[1.0], arrival_rate=0.7, count=count, blocks=1, unique=0, zipf=zipf, capacity=capacity, work=0.0
    )
    expected = lru_hit_ratio(zipf_popularity(count, zipf), capacity).hit_ratio
    half = bonferroni_t_halfwidth(runs[:, 1], FAMILY_ALPHA, CHECKS)
    assert abs(runs[:, 1].mean() - expected) <= half


def test_one_prefix_and_blocks_of_its_own_give_pollaczek_khinchine():
    blocks, unique, work, speed, load = 2, 3, 0.3, 1.0, 0.7
    prefill = work * unique
    mean_s = prefill + 1.0
    second_s = prefill**2 + 2.0 * prefill + 2.0
    rate = load / mean_s
    runs = replications(
        2, speed=[speed], arrival_rate=rate, count=1, blocks=blocks, unique=unique, zipf=1.0, capacity=8, work=work
    )
    expected = rate * second_s / (2.0 * (1.0 - load)) + mean_s
    half = bonferroni_t_halfwidth(runs[:, 0], FAMILY_ALPHA, CHECKS)
    assert abs(runs[:, 0].mean() - expected) <= half
    # every job but the first hits its prefix (the floor counts the hits of the jobs started)
    assert np.allclose(runs[:, 1], blocks / (blocks + unique), rtol=1e-3)
