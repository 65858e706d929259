"""A histogram of positive durations on a logarithmic grid: percentiles to a known relative
precision in memory that does not grow with the number of values (the load generator's times
between tokens).

Bin 0 holds the values below ``LOW`` (1 microsecond: events that arrived in one read); bin i >= 1
holds [LOW r^(i-1), LOW r^i) with r = ``RATIO`` (1.01), up to ``HIGH`` (1000 s; larger values go
to the last bin). The q-th percentile is the nearest rank's bin, ceil(q/100 n) of the n values in
increasing order, reported as the bin's geometric midpoint LOW r^(i - 1/2) (0 for bin 0): within
a factor sqrt(r) (0.5%) of the value of that rank, for values in [LOW, HIGH].
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping

import numpy as np

LOW = 1e-6
"""Seconds: the lower edge of bin 1."""
HIGH = 1e3
"""Seconds: values beyond it count in the last bin."""
RATIO = 1.01
"""The ratio of a bin's upper edge to its lower edge."""
LOG_RATIO = math.log(RATIO)
BINS = 2 + math.ceil(math.log(HIGH / LOW) / LOG_RATIO)


def bin_of(value: float) -> int:
    """The bin of a duration in seconds (>= 0)."""
    if value < LOW:
        return 0
    return min(1 + int(math.log(value / LOW) / LOG_RATIO), BINS - 1)


class LogHistogram:
    """Counts of durations (seconds) in the bins of this module's grid."""

    def __init__(self):
        self.counts = np.zeros(BINS, dtype=np.int64)

    @property
    def total(self) -> int:
        return int(self.counts.sum())

    def add_bins(self, bins: Mapping[int, int] | Counter) -> None:
        """Add counts by bin (``bins[i]`` values in bin i, as :func:`bin_of` gives them)."""
        if bins:
            np.add.at(self.counts, np.fromiter(bins.keys(), np.int64), np.fromiter(bins.values(), np.int64))

    def percentile(self, q: float) -> float:
        """The ``q``-th percentile (0 < q <= 100) by the nearest-rank rule, as the geometric midpoint of
        its bin; nan when empty."""
        total = self.total
        if total == 0:
            return math.nan
        rank = max(1, math.ceil(q / 100.0 * total))
        index = int(np.searchsorted(np.cumsum(self.counts), rank))
        return 0.0 if index == 0 else LOW * RATIO ** (index - 0.5)
