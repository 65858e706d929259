"""Shared helpers of the test suite: statistical comparison with multiple-comparison control."""

import math

import numpy as np
import pytest
from scipy import stats


def bonferroni_t_halfwidth(samples, family_alpha: float, comparisons: int) -> float:
    """Half-width of a two-sided Student-t interval at level 1 - family_alpha / comparisons."""
    samples = np.asarray(samples, dtype=float)
    quantile = stats.t.ppf(1.0 - family_alpha / (2.0 * comparisons), len(samples) - 1)
    return float(quantile * samples.std(ddof=1) / math.sqrt(len(samples)))


@pytest.fixture
def restore_registry():
    """Leave the policy registry as it was, whatever a test or a page of the docs registers, and
    forget the plugins it imported (so that the next import registers them again)."""
    from hetlb.policies import plugins, registry

    policies, by_code, loaded = dict(registry.POLICIES), dict(registry.BY_CODE), dict(plugins._loaded)
    yield
    registry.POLICIES.clear()
    registry.POLICIES.update(policies)
    registry.BY_CODE.clear()
    registry.BY_CODE.update(by_code)
    plugins._loaded.clear()
    plugins._loaded.update(loaded)
