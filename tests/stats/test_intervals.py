"""Cox's interval of a positive mean on the log scale (hetlb.stats.intervals.positive_interval)."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from hetlb.stats.intervals import interval, positive_interval


def test_cox_interval_covers_the_log_normal_mean_and_stays_above_zero():
    """2000 samples of 10 log-normal(0, 1) values, whose mean is exp(1/2): Cox's interval is a 95%
    interval to first order, so it covers the mean in at least 90% of the samples (a 95% binomial
    interval of 2000 trials at 0.95 reaches 0.94; the first-order method may lose a few points at
    n = 10, not five), and it is never below zero, where the t interval of some samples is."""
    rng = np.random.default_rng(7)
    samples = rng.lognormal(0.0, 1.0, size=(2000, 10))
    true_mean = math.exp(0.5)
    bounds = np.array([positive_interval(sample) for sample in samples])
    covered = np.mean((bounds[:, 0] <= true_mean) & (true_mean <= bounds[:, 1]))
    assert covered >= 0.90
    assert np.all(bounds[:, 0] > 0)
    t_lows = np.array([interval(sample)[0] for sample in samples])
    assert t_lows.min() < 0  # the case it exists for


def test_cox_interval_in_closed_form_and_its_edge_cases():
    """On two values e^-1 and e^1: ybar 0, s^2 2, s_e^2 = 2/2 + 4/2 = 3, t(1) 12.706."""
    low, high = positive_interval([math.exp(-1.0), math.exp(1.0)])
    half = stats.t.ppf(0.975, 1) * math.sqrt(3.0)
    assert math.isclose(low, math.exp(1.0 - half)) and math.isclose(high, math.exp(1.0 + half))
    assert all(math.isnan(x) for x in positive_interval([2.0]))
    assert positive_interval([0.0, 1.0, 2.0]) == interval([0.0, 1.0, 2.0])  # not a positive quantity: t
