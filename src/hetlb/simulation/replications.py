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

MAX_EVENTS = 10**14
"""The most events a simulation may be expected to take, all its replications together: about
two months at 20 million events a second. A run asked for more is refused as a mistake."""

RESOLUTION = 2.0**52 / 1000
"""A run may last at most this many times its shortest mean time (one over the arrival rate or the
fastest speed): float64 times then stay a thousandth of that time apart or closer."""


def check_events(field: str, events: float, runs: int = 1) -> None:
    """Refuse ``runs`` runs expected to take ``events`` events in all, beyond MAX_EVENTS."""
    if not events <= MAX_EVENTS:
        raise InputError(
            field,
            f"the run{'s' if runs > 1 else ''} would take about {validation.quantity(events)} events, more than "
            f"the {validation.quantity(MAX_EVENTS)} allowed (about two months at 20 million events a second); "
            "ask for less",
        )


def check_resolution(field: str, end_time: float, shortest: float, advice: str) -> None:
    """Refuse a run that reaches time ``end_time`` when its shortest mean time is ``shortest``
    (one over the fastest rate), if float64 times there are more than a thousandth of it apart."""
    if not end_time / shortest <= RESOLUTION:
        raise InputError(
            field,
            f"the run would reach time about {end_time:.3g}, where float64 times are "
            f"{end_time * 2.0**-52:.3g} apart: more than a thousandth of the shortest mean time, "
            f"{shortest:.3g} (one over the fastest rate); {advice}",
        )


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
        else {"entropy": entropy_of(root_seed), "spawn_key": [int(k) for k in root_seed.spawn_key]}
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


def entropy_of(seed_sequence: np.random.SeedSequence) -> int | list[int]:
    """A SeedSequence's entropy as plain Python: an int, or a list of ints when it was made from a
    sequence of them (``SeedSequence([1, 2])``)."""
    words = np.asarray(seed_sequence.entropy)
    return int(words) if words.ndim == 0 else [int(word) for word in words]


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
