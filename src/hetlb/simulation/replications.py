"""What every simulation entry point shares: seeding, replications and the stopping rule.

Replication r of a run seeded with ``seed`` draws from ``SeedSequence(seed, spawn_key=(r,))``
(extended by the spawn key of a SeedSequence given as the seed), so the same seed gives the same
result, bit for bit, on any executor.
"""

from __future__ import annotations

import math

import numpy as np

from hetlb import validation
from hetlb.errors import InputError
from hetlb.progress import ProgressBar

DEFAULT_JOBS = 100_000
"""Jobs measured when neither ``jobs`` nor ``horizon`` is given."""


def root_seed_sequence(seed) -> np.random.SeedSequence:
    """The SeedSequence the replications spawn from: ``seed`` itself, or one made from an integer >= 0."""
    if isinstance(seed, np.random.SeedSequence):
        return seed
    if not validation.is_integer(seed) or seed < 0:
        raise InputError("seed", f"must be an integer >= 0 or a numpy SeedSequence, got {seed!r}")
    return np.random.SeedSequence(int(seed))


def replication_seeds(root_seed: np.random.SeedSequence, replications: int):
    """Replication r's SeedSequence(root entropy, spawn_key=(*root spawn_key, r)), r = 0, 1, ..."""
    for replication in range(replications):
        yield np.random.SeedSequence(root_seed.entropy, spawn_key=(*root_seed.spawn_key, replication))


def seed_description(seed, root_seed: np.random.SeedSequence):
    """The seed as result metadata: the integer given, or the SeedSequence's entropy and spawn key."""
    return (
        seed
        if isinstance(seed, int)
        else {"entropy": int(root_seed.entropy), "spawn_key": [int(k) for k in root_seed.spawn_key]}
    )


def run_replications(root_seed: np.random.SeedSequence, replications: int, label: str, progress: bool, run_one):
    """The results of ``run_one(seed_sequence, report)`` for each replication's SeedSequence, with one
    progress bar over all of them; ``run_one`` calls ``report(fraction_of_this_run_done, events)``."""
    bar = ProgressBar(label, enabled=progress)
    runs = []
    for replication, seed_sequence in enumerate(replication_seeds(root_seed, replications)):
        runs.append(
            run_one(
                seed_sequence,
                lambda done, events, replication=replication: bar.update((replication + done) / replications, events),
            )
        )
    bar.close()
    return runs


def check_warmup(warmup) -> float:
    """The warm-up: a finite time >= 0 (time units, or slots)."""
    if not validation.is_real(warmup) or not math.isfinite(warmup) or warmup < 0:
        raise InputError("warmup", f"must be a finite time >= 0, got {warmup!r}")
    return float(warmup)


def check_horizon(horizon, warmup: float) -> float:
    """The end of the measurement window: a finite time after the warm-up."""
    if not validation.is_real(horizon) or not math.isfinite(horizon) or horizon <= warmup:
        raise InputError("horizon", f"must be a finite time greater than the warm-up ({warmup}), got {horizon!r}")
    return float(horizon)


def stopping_rule(jobs, horizon, warmup) -> tuple[int | None, float, float]:
    """Check the stopping rule; return (jobs or None, horizon or inf, warmup)."""
    if jobs is not None and horizon is not None:
        raise InputError("jobs", "give either jobs or horizon, not both")
    warmup = check_warmup(warmup)
    if horizon is not None:
        return None, check_horizon(horizon, warmup), warmup
    return validation.count("jobs", DEFAULT_JOBS if jobs is None else jobs), math.inf, warmup


def safe_ratio(numerator, denominator) -> float:
    """numerator / denominator, or nan when nothing was counted."""
    return float(numerator) / float(denominator) if denominator else math.nan
