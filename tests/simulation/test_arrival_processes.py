"""Batch and MMPP arrivals and the heavy-tailed size laws in the event loops, against closed forms
(M^X/M/1, Pollaczek-Khinchine) and an MMPP/M/1 chain solved in the test from its definition."""

import math

import numpy as np
import pytest
import scipy.sparse as sparse
import scipy.sparse.linalg as sparse_linalg

import hetlb
from hetlb import theory

from support.statistics import bonferroni_t_halfwidth

ALPHA = 0.001


def assert_close(result, exact, comparisons, metric="mean_response_time"):
    samples = [getattr(run, metric) for run in result.runs]
    half_width = bonferroni_t_halfwidth(samples, ALPHA, comparisons)
    assert abs(np.mean(samples) - exact) <= half_width, f"{metric}: {np.mean(samples)} +- {half_width} vs {exact}"


def mmpp_m1_mean_response(rate, ratio, on, off, speed=1.0, levels=3000) -> float:
    """MMPP/M/1 from its chain (level q, phase on/off) truncated at ``levels``, far beyond any mass."""
    off_rate = rate * (on + off) / (ratio * on + off)
    rates = {1: ratio * off_rate, 0: off_rate}
    index = lambda q, phase: 2 * q + phase  # noqa: E731
    rows, cols, values = [], [], []
    for q in range(levels):
        for phase in (0, 1):
            here = index(q, phase)
            moves = [(index(q, 1 - phase), 1.0 / (on if phase == 1 else off))]
            if q + 1 < levels:
                moves.append((index(q + 1, phase), rates[phase]))
            if q > 0:
                moves.append((index(q - 1, phase), speed))
            for there, value in moves:
                rows += [here, here]
                cols += [there, here]
                values += [value, -value]
    generator = sparse.csr_matrix((values, (rows, cols)), shape=(2 * levels, 2 * levels))
    system = generator.T.tolil()
    system[0, :] = 1.0
    right = np.zeros(2 * levels)
    right[0] = 1.0
    probability = sparse_linalg.spsolve(system.tocsr(), right)
    assert probability[-2:].sum() < 1e-12  # the truncation holds no mass
    return float(probability @ np.repeat(np.arange(levels), 2)) / rate


@pytest.mark.parametrize("mean_batch,rate", [(3.0, 0.5), (1.5, 0.8)])
def test_batch_arrivals_are_mxm1(mean_batch, rate):
    system = hetlb.System.from_speeds([1.0], arrival_rate=rate, arrivals=f"batch:mean={mean_batch}")
    result = hetlb.simulate(system, "jsq", jobs=100_000, warmup=200.0, replications=10, seed=5)
    assert_close(result, theory.mxm1_mean_response_time(rate, 1.0, mean_batch), 2)


def test_mmpp_arrivals_are_mmpp_m1():
    system = hetlb.System.from_speeds([1.0], arrival_rate=0.5, arrivals="mmpp:ratio=4,on=10,off=30")
    result = hetlb.simulate(system, "jsq", jobs=100_000, warmup=200.0, replications=10, seed=6)
    assert_close(result, mmpp_m1_mean_response(0.5, 4.0, 10.0, 30.0), 1)


def test_many_dispatchers_see_the_same_arrivals():
    """One server: whatever the dispatchers know, every job joins it, so the model is M^X/M/1."""
    system = hetlb.System.from_speeds([1.0], arrival_rate=0.6, arrivals="batch:mean=2")
    result = hetlb.simulate(
        system, "l-jsq", jobs=60_000, warmup=200.0, replications=10, seed=7, dispatchers=3, update="push"
    )
    assert_close(result, theory.mxm1_mean_response_time(0.6, 1.0, 2.0), 1)


@pytest.mark.parametrize("kind,scv", [("lognormal", 2.0), ("pareto", 0.1), ("weibull", 0.5), ("weibull", 3.0)])
def test_pollaczek_khinchine_under_weighted_random(kind, scv):
    """weighted-random splits Poisson arrivals into independent M/G/1 queues at one load rho:
    T_s = 1/mu_s + rho (1 + scv) / (2 mu_s (1 - rho)) (pareto with scv 0.1 has a finite fourth
    moment, so its batch means have a variance)."""
    speed, rho = np.array([2.0, 1.0]), 0.6
    system = hetlb.System.from_speeds(speed, load=rho, job_sizes=hetlb.JobSizes(kind, scv))
    result = hetlb.simulate(system, "weighted-random", jobs=100_000, warmup=200.0, replications=12, seed=8)
    response = 1.0 / speed + rho * (1.0 + scv) / (2.0 * speed * (1.0 - rho))
    assert_close(result, float(speed @ response / speed.sum()), 4)


def test_empirical_sizes(tmp_path):
    sizes = tmp_path / "sizes.txt"
    sizes.write_text("\n".join(str(v) for v in (1, 2, 3, 10)))
    law = hetlb.JobSizes.parse(f"empirical:{sizes}")
    system = hetlb.System.from_speeds([1.0], arrival_rate=0.5, job_sizes=law)
    result = hetlb.simulate(system, "jsq", jobs=100_000, warmup=200.0, replications=12, seed=9)
    waiting = 0.5 * (1.0 + law.scv) / (2.0 * 0.5)
    assert math.isclose(law.scv, np.mean((np.array([1, 2, 3, 10]) / 4.0) ** 2) - 1.0)
    assert_close(result, 1.0 + waiting, 1)
