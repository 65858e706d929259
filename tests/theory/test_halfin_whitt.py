"""The measures of paper 002 (hetlb.stats.halfin_whitt) against the exact stationary law of small
systems, and the approach of large simulated systems to the diffusion limits.

Tolerances are Student-t intervals over independent replications, Bonferroni-corrected over the
comparisons of each test at a family level of 1%.
"""

import math

import numpy as np
import pytest

import hetlb
from hetlb.stats.halfin_whitt import scaled_ccdf, scaled_measures
from hetlb.theory import solve_exact_arrays
from hetlb.theory.diffusion import continuous_speeds, policy_diffusion, stationary_diffusion

from support.statistics import bonferroni_t_halfwidth

FAMILY_ALPHA = 0.01


@pytest.mark.parametrize("policy", ["jfsq", "jsq-lisf"])
def test_measures_match_the_exact_stationary_law(policy):
    speed = np.array([2.0, 1.5, 1.0, 0.5])
    system = hetlb.System.from_speeds(speed, arrival_rate=3.6, buffer=4)
    exact = solve_exact_arrays(speed, system.arrival_rate, system.graph.to_lists(), system.buffer, policy=policy)
    states, probability = exact.states, exact.stationary
    n, root = len(speed), math.sqrt(len(speed))
    level = lambda i: float(probability @ (states >= i).sum(axis=1))  # noqa: E731  (E Q_i)
    jobs = states.sum(axis=1)
    waiting = jobs - (states >= 1).sum(axis=1)
    expected = {
        "x1": (level(1) - n) / root,
        "x2": level(2) / root,
        "x3": level(3) / root,
        "x_plus1": (probability @ jobs - n) / root,
        "x_plus2": probability @ waiting / root,
    }
    ccdf_points = {"x_plus1": [-1.0, 0.0, 1.0], "x_plus2": [0.0, 0.5, 1.0]}
    for measure, points in ccdf_points.items():
        values = (jobs - n) / root if measure == "x_plus1" else waiting / root
        for y in points:
            expected[f"{measure} > {y}"] = float(probability[values > y].sum())
    idle = 1.0 - exact.utilisation
    expected["eta slow bin"] = float(idle[speed < 1.25].sum() / idle.sum())

    result = hetlb.simulate(
        system, policy, jobs=40_000, warmup=20.0, replications=10, seed=4, state_distribution=True, speed_bins=2
    )
    measured = {key: [] for key in expected}
    for run in result.runs:
        values = scaled_measures(run, n)
        for measure, points in ccdf_points.items():
            values.update({f"{measure} > {y}": p for y, p in zip(points, scaled_ccdf(run, n, measure, points))})
        values["eta slow bin"] = run.speed_profile["eta"][0]
        for key in expected:
            measured[key].append(values[key])
    for key, value in expected.items():
        half_width = bonferroni_t_halfwidth(measured[key], FAMILY_ALPHA, len(expected))
        assert abs(np.mean(measured[key]) - value) <= max(half_width, 1e-12), (key, np.mean(measured[key]), value)


def test_time_distributions_sum_to_one_and_match_the_mean():
    system = hetlb.System.from_speeds("20x1.2,20x0.8", excess_capacity=1.0)
    run = hetlb.simulate(system, "jsq", horizon=300.0, warmup=30.0, seed=2, state_distribution=True).runs[0]
    for distribution in (run.jobs_distribution, run.waiting_distribution):
        assert distribution.sum() == pytest.approx(1.0, abs=1e-9)
    counts = np.arange(len(run.jobs_distribution))
    assert counts @ run.jobs_distribution == pytest.approx(run.mean_number_in_system, rel=1e-9)


@pytest.mark.slow
def test_large_systems_approach_the_diffusion_limit():
    # 002 Cor. 4.4 and 4.5: scaled by n^-1/2, E|X_1| of jfsq and E X_2 of jsq (random ties) tend to
    # their diffusion limits for speeds U[0.7, 1.3] at c = 1; the gap at n = 1600 must be smaller
    # than at n = 100 by more than the combined sampling error (two standard errors of each mean,
    # and of the limit)
    speeds_law = continuous_speeds(0.7, 1.3)
    checks = {("jfsq", "x1"): -1.0, ("jsq", "x2"): 1.0}  # sign: E|X_1| = -E X_1
    for (policy, measure), sign in checks.items():
        limit = stationary_diffusion(policy_diffusion(policy, speeds_law, 1.0), seed=5)
        target, target_error = sign * limit.mean[measure], limit.standard_error[measure]
        gaps = []
        for n, horizon, replications in ((100, 4000.0, 12), (1600, 1500.0, 4)):
            speed = np.random.default_rng(n).uniform(0.7, 1.3, n)
            system = hetlb.System.from_speeds(speed, excess_capacity=1.0)
            result = hetlb.simulate(system, policy, horizon=horizon, warmup=150.0, replications=replications, seed=n)
            values = [sign * scaled_measures(run, n)[measure] for run in result.runs]
            gaps.append((abs(np.mean(values) - target), np.std(values, ddof=1) / math.sqrt(len(values))))
        (gap_small, error_small), (gap_large, error_large) = gaps
        assert gap_large + 2 * math.hypot(error_small, error_large, target_error) < gap_small, (policy, measure, gaps)
