"""Single-server and many-server cases against closed forms (hetlb.theory.queues)."""

import math

import numpy as np
import pytest

import hetlb
from hetlb import theory

from support.statistics import bonferroni_t_halfwidth

ALPHA = 0.001


def replicated(system, policy="jsq", jobs=60_000, replications=10, seed=3, **kw):
    return hetlb.simulate(system, policy, jobs=jobs, warmup=200.0, replications=replications, seed=seed, **kw)


def assert_close(result, metric, exact, comparisons=1):
    samples = [getattr(run, metric) for run in result.runs]
    half_width = bonferroni_t_halfwidth(samples, ALPHA, comparisons)
    assert abs(np.mean(samples) - exact) <= half_width, f"{metric}: {np.mean(samples)} +- {half_width} vs {exact}"


@pytest.mark.parametrize("speed,rate", [(1.0, 0.5), (2.0, 1.4)])
def test_mm1(speed, rate):
    result = replicated(hetlb.System.from_speeds([speed], arrival_rate=rate))
    assert_close(result, "mean_response_time", theory.mm1_mean_response_time(rate, speed), 4)
    assert_close(result, "mean_waiting_time", theory.mm1_mean_waiting_time(rate, speed), 4)
    assert_close(result, "p_wait", theory.mm1_p_wait(rate, speed), 4)
    assert_close(result, "mean_number_in_system", theory.mm1_mean_number_in_system(rate, speed), 4)


def test_mm1_response_time_percentiles():
    """Response time of M/M/1 is Exp(mu - lambda); the histogram quantiles resolve it to < 1%."""
    result = hetlb.simulate(
        hetlb.System.from_speeds([1.0], arrival_rate=0.5), "jsq", jobs=400_000, warmup=100.0, seed=9
    )
    # the response time is exponential: its standard deviation equals its mean, 1/(mu - lambda) = 2
    run = result.runs[0]
    # standard error of a sample standard deviation of an exponential ~ sigma / sqrt(n) (kurtosis 9:
    # sqrt((9 - 1) / 4 / n) sigma); jobs are correlated, so allow a factor 5 as for the quantiles
    assert abs(run.response_time_std - 2.0) <= 5 * 3 * math.sqrt(2.0 / 400_000) * 2.0
    for p in (50, 95, 99):
        exact = theory.mm1_response_time_quantile(0.5, 1.0, p / 100)
        # sampling error of a quantile: sqrt(p(1-p)/n) / density at the quantile, density = (mu-lambda)(1-p)
        standard_error = math.sqrt(p / 100 * (1 - p / 100) / 400_000) / (0.5 * (1 - p / 100))
        # jobs are correlated in a busy system: allow a factor 5 over the i.i.d. error, plus the 0.4% bin width
        assert abs(getattr(result, f"response_time_p{p}") - exact) <= 5 * 3 * standard_error + 0.004 * exact


@pytest.mark.parametrize("buffer,rate", [(1, 0.8), (3, 0.9), (5, 1.3)])
def test_mm1k(buffer, rate):
    result = replicated(hetlb.System.from_speeds([1.0], arrival_rate=rate, buffer=buffer))
    assert_close(result, "blocking_probability", theory.mm1k_blocking_probability(rate, 1.0, buffer), 9)
    assert_close(result, "mean_response_time", theory.mm1k_mean_response_time(rate, 1.0, buffer), 9)
    assert_close(result, "mean_number_in_system", theory.mm1k_mean_number_in_system(rate, 1.0, buffer), 9)


@pytest.mark.parametrize("kind,scv", [("deterministic", 0.0), ("hyperexponential", 4.0)])
def test_pollaczek_khinchine(kind, scv):
    """M/G/1 mean waiting time lambda E[S^2] / (2 (1 - rho)) checks the job-size distributions."""
    rate, speed = 0.6, 1.0
    system = hetlb.System.from_speeds([speed], arrival_rate=rate, job_sizes=hetlb.JobSizes(kind, scv))
    result = replicated(system, jobs=100_000, replications=12)
    rho = rate / speed
    waiting = rate * (1.0 + scv) / speed**2 / (2.0 * (1.0 - rho))
    assert_close(result, "mean_waiting_time", waiting, 4)
    assert_close(result, "mean_response_time", waiting + 1.0 / speed, 4)


def test_random_on_identical_servers_is_independent_mm1():
    system = hetlb.System.from_speeds([1.0] * 8, load=0.7)
    result = replicated(system, "random")
    assert_close(result, "mean_response_time", theory.mm1_mean_response_time(0.7, 1.0))


def test_weighted_random_on_heterogeneous_servers():
    """Speed-proportional splitting gives independent M/M/1 queues, each at the same load rho."""
    speed = np.array([4.0, 2.0, 1.0, 1.0, 0.5])
    system = hetlb.System.from_speeds(speed, load=0.6)
    result = replicated(system, "weighted-random", jobs=100_000)
    share = speed / speed.sum()
    exact = float(np.sum(share * [theory.mm1_mean_response_time(0.6 * s, s) for s in speed]))
    assert_close(result, "mean_response_time", exact, 2)
    utilisation = np.array([run.utilisation for run in result.runs])
    for s in range(len(speed)):
        half_width = bonferroni_t_halfwidth(utilisation[:, s], ALPHA, 2 * len(speed))
        assert abs(utilisation[:, s].mean() - 0.6) <= half_width


def test_jsq_on_many_servers_sits_between_mmc_and_random():
    """JSQ on c identical servers is no better than the pooled M/M/c and much better than random."""
    c, rho = 50, 0.9
    system = hetlb.System.from_speeds([1.0] * c, load=rho)
    result = replicated(system, "jsq", jobs=100_000, replications=8)
    samples = [run.mean_response_time for run in result.runs]
    half_width = bonferroni_t_halfwidth(samples, ALPHA, 2)
    mmc = theory.mmc_mean_response_time(c * rho, 1.0, c)
    assert np.mean(samples) + half_width >= mmc
    assert np.mean(samples) - half_width <= theory.mm1_mean_response_time(rho, 1.0)


def test_light_traffic_jfsq_uses_the_fastest_server():
    """At vanishing load every job finds the fastest server idle: mean response ~ 1/mu_max."""
    system = hetlb.System.from_speeds([4.0, 1.0, 1.0, 0.5], arrival_rate=0.01)
    result = hetlb.simulate(system, "jfsq", jobs=20_000, seed=1)
    low, high = result.mean_response_time_ci
    # the chance of finding the fast server busy is about rho_fast = 0.01/4; M/M/1 at the fast server
    exact = theory.mm1_mean_response_time(0.01, 4.0)
    assert low - 0.01 <= exact <= high + 0.01
