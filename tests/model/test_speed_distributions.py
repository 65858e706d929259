"""Speeds drawn at random (hetlb.model.speed_distributions) and the Halfin-Whitt arrival rate.

Laws are checked by goodness-of-fit tests at significance 0.001 (Kolmogorov-Smirnov, chi-square)
and moments by intervals of 5 standard errors."""

import math

import numpy as np
import pytest
from scipy import stats

import hetlb
from hetlb.errors import InputError
from hetlb.model.speed_distributions import draw_speeds
from hetlb.model.system import arrival_rate_for_excess_capacity
from hetlb.scenario import Scenario

N = 20_000


def test_uniform_speeds_follow_their_law_and_the_seed():
    speeds = draw_speeds(N, {"kind": "uniform", "low": 0.7, "high": 1.3, "seed": 3})
    assert stats.kstest(speeds, stats.uniform(0.7, 0.6).cdf).pvalue > 0.001
    assert np.array_equal(speeds, draw_speeds(N, {"kind": "uniform", "low": 0.7, "high": 1.3, "seed": 3}))
    assert not np.array_equal(speeds, draw_speeds(N, {"kind": "uniform", "low": 0.7, "high": 1.3, "seed": 4}))


def test_discrete_speeds_follow_their_probabilities():
    speeds = draw_speeds(N, {"kind": "discrete", "speeds": [2.0, 1.0, 0.5], "probabilities": [0.2, 0.3, 0.5]})
    counts = np.array([np.sum(speeds == v) for v in (2.0, 1.0, 0.5)])
    assert counts.sum() == N
    assert stats.chisquare(counts, N * np.array([0.2, 0.3, 0.5])).pvalue > 0.001


def test_lognormal_speeds_have_the_mean_and_coefficient_of_variation():
    speeds = draw_speeds(N, {"kind": "lognormal", "mean": 1.5, "cv": 0.4, "seed": 1})
    assert abs(speeds.mean() - 1.5) <= 5 * 1.5 * 0.4 / math.sqrt(N)
    sigma2 = math.log1p(0.4**2)
    assert stats.kstest(np.log(speeds), stats.norm(math.log(1.5) - sigma2 / 2, math.sqrt(sigma2)).cdf).pvalue > 0.001


def test_empirical_speeds_resample_the_values_of_a_file(tmp_path):
    path = tmp_path / "speeds.txt"
    path.write_text("1.0, 2.0\n4.0\n")
    speeds = draw_speeds(N, {"kind": "empirical", "file": str(path), "seed": 2})
    counts = np.array([np.sum(speeds == v) for v in (1.0, 2.0, 4.0)])
    assert counts.sum() == N and stats.chisquare(counts).pvalue > 0.001


def test_excess_capacity_sets_the_halfin_whitt_arrival_rate():
    system = Scenario.from_mapping(
        {
            "system": {
                "n_servers": 400,
                "excess_capacity": 1.5,
                "speed_distribution": {"kind": "uniform", "low": 0.7, "high": 1.3},
            }
        }
    ).system
    assert system.total_arrival_rate == pytest.approx(system.speed.sum() - 1.5 * 20.0, rel=1e-12)
    assert arrival_rate_for_excess_capacity([1.0] * 4, -0.5) == pytest.approx(5.0)
    with pytest.raises(InputError) as error:
        hetlb.System.from_speeds([1.0] * 4, excess_capacity=-0.5)  # unstable with infinite buffers
    assert error.value.field == "arrival_rate"
    hetlb.System.from_speeds([1.0] * 4, excess_capacity=-0.5, buffer=3)  # a finite buffer makes it stable


@pytest.mark.parametrize(
    "spec,field",
    [
        ({"kind": "gamma"}, "system.speed_distribution.kind"),
        ({"kind": "uniform", "low": 1.0, "high": 0.5}, "system.speed_distribution.high"),
        ({"kind": "uniform", "low": -1.0, "high": 0.5}, "system.speed_distribution.low"),
        ({"kind": "uniform", "low": 0.5, "high": 1.0, "mean": 2}, "system.speed_distribution.mean"),
        ({"kind": "discrete", "speeds": [1.0, 2.0], "probabilities": [0.5]}, "system.speed_distribution.probabilities"),
        ({"kind": "lognormal", "mean": 1.0, "cv": 0.0}, "system.speed_distribution.cv"),
        ({"kind": "empirical", "file": "/nonexistent/speeds.txt"}, "system.speed_distribution.file"),
        ({"kind": "empirical", "values": [1.0], "file": "x"}, "system.speed_distribution.values"),
        ({"kind": "uniform", "low": 0.5, "high": 1.0, "seed": -1}, "system.speed_distribution.seed"),
    ],
)
def test_bad_speed_distributions_name_the_field(spec, field):
    with pytest.raises(InputError) as error:
        Scenario.from_mapping({"system": {"n_servers": 10, "load": 0.5, "speed_distribution": spec}})
    assert error.value.field == field and "\n" not in str(error.value)
