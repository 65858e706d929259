"""The samplers of hetlb.kernels.sampling draw from the laws they stand for.

The alias table draws the type of every arrival of the continuous kernel; a chi-square test of
many draws against the rates checks its law (and the table's probabilities are checked exactly,
to rounding, by summing each index's share of the buckets). The inversion draws the slotted
model's Poisson counts of mean below 10; chi-square tests check it against the Poisson law.
"""

import math

import numpy as np
import pytest
from scipy import stats

import hetlb
from hetlb.kernels.sampling import alias_draw, alias_table, poisson_by_inversion

DRAWS = 200_000


def alias_probabilities(keep, alias):
    """The law the table (keep, alias) draws from: bucket i gives i with keep[i], alias[i] otherwise."""
    n = len(keep)
    probability = np.zeros(n)
    np.add.at(probability, np.arange(n), keep / n)
    np.add.at(probability, alias, (1.0 - keep) / n)
    return probability


@pytest.mark.parametrize(
    "weight",
    [
        [1.0],
        [1.0, 1.0, 1.0],
        [0.5, 0.25, 0.125, 0.125],
        [3.0, 0.0, 1.0, 0.0, 6.0],
        list(np.random.default_rng(3).exponential(size=50)),
        [1e-9, 1.0, 1e9],
    ],
)
def test_alias_table_probabilities_are_the_weights(weight):
    weight = np.asarray(weight)
    keep, alias = alias_table(weight)
    assert np.all((keep >= 0) & (keep <= 1)) and np.all((alias >= 0) & (alias < len(weight)))
    np.testing.assert_allclose(alias_probabilities(keep, alias), weight / weight.sum(), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("seed", [1, 2])
def test_alias_draws_pass_a_chi_square_test(seed):
    rng = np.random.default_rng(seed)
    weight = rng.uniform(0.1, 2.0, size=40)
    keep, alias = alias_table(weight)
    draws = np.array([alias_draw(keep, alias, u) for u in rng.random(DRAWS)])
    observed = np.bincount(draws, minlength=len(weight))
    expected = DRAWS * weight / weight.sum()
    assert stats.chisquare(observed, expected).pvalue > 1e-3


def test_job_types_of_a_run_follow_the_rates():
    """The continuous kernel's job types, from its trace, against the types' rates."""
    rate = np.array([0.5, 0.1, 0.3, 0.05, 0.35])
    system = hetlb.System.from_speeds([1.0, 1.0, 1.0], arrival_rate=rate, graph=[[0, 1], [1], [2], [0, 2], [1, 2]])
    trace = hetlb.simulate(system, "jsq", jobs=20_000, seed=4, trace=20_000).runs[0].trace
    observed = np.bincount(trace["job_type"], minlength=len(rate))
    assert stats.chisquare(observed, len(trace["job_type"]) * rate / rate.sum()).pvalue > 1e-3


@pytest.mark.parametrize("mean", [0.05, 0.5, 1.0, 3.7, 9.9])
def test_poisson_inversion_passes_a_chi_square_test(mean):
    rng = np.random.default_rng(int(mean * 100))
    zero = math.exp(-mean)
    draws = np.array([poisson_by_inversion(mean, zero, u) for u in rng.random(DRAWS)])
    top = int(stats.poisson.ppf(1 - 1e-4, mean))  # pool the tail into one cell
    observed = np.bincount(np.minimum(draws, top), minlength=top + 1)
    expected = DRAWS * np.append(stats.poisson.pmf(np.arange(top), mean), stats.poisson.sf(top - 1, mean))
    assert stats.chisquare(observed, expected).pvalue > 1e-3
    assert abs(draws.mean() - mean) < 5 * math.sqrt(mean / DRAWS)


def test_poisson_inversion_ends_at_the_top_of_the_unit_interval():
    """u as close to 1 as a double gets: the count is finite and far in the tail."""
    u = np.nextafter(1.0, 0.0)
    for mean in (0.5, 9.9):
        count = poisson_by_inversion(mean, math.exp(-mean), u)
        assert mean < count < 1000


def test_slotted_counts_have_the_poisson_means():
    """The slotted kernel's arrivals and services (served jobs cannot exceed the offers) over a run."""
    system = hetlb.SlottedSystem.from_speeds([0.9, 0.6, 0.3], dispatchers=2, load=0.6)
    run = hetlb.simulate_slotted(system, "jsq", slots=100_000, seed=5).runs[0]
    expected = system.total_arrival_rate * run.slots
    assert abs(run.arrivals - expected) < 5 * math.sqrt(expected)
