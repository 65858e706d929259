"""Statistical comparison with multiple-comparison control, for the tests."""

import math

import numpy as np
from scipy import stats


def bonferroni_t_halfwidth(samples, family_alpha: float, comparisons: int) -> float:
    """Half-width of a two-sided Student-t interval at level 1 - family_alpha / comparisons."""
    samples = np.asarray(samples, dtype=float)
    quantile = stats.t.ppf(1.0 - family_alpha / (2.0 * comparisons), len(samples) - 1)
    return float(quantile * samples.std(ddof=1) / math.sqrt(len(samples)))
