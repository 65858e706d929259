"""The kernel against the slow, obvious reference simulator of tests/support/reference_sim.py.

The two share no code and no random stream; they are compared statistically: the difference
of their means must lie within a Bonferroni-corrected normal interval built from both
batch-means standard errors.
"""

import math

import numpy as np
import pytest
from scipy import stats

import hetlb

from support.reference_sim import simulate_reference

CASES = {
    "hyperexponential-jfsq": dict(
        speed=[2.0, 1.0, 0.5, 0.5], rates=[2.4], graph=None, buffer=None, policy="jfsq", sizes=("hyperexponential", 4.0)
    ),
    "deterministic-sed": dict(
        speed=[3.0, 1.0, 1.0], rates=[3.5], graph=None, buffer=None, policy="sed", sizes=("deterministic", 0.0)
    ),
    "two-types-jfiq-finite": dict(
        speed=[1.5, 1.0, 0.5],
        rates=[1.0, 1.2],
        graph=[[0, 1], [1, 2]],
        buffer=3,
        policy="jfiq",
        sizes=("exponential", 1.0),
    ),
    "pod3-mixed-buffers": dict(
        speed=[1.0, 1.0, 2.0, 0.5, 0.5],
        rates=[3.6],
        graph=None,
        buffer=[4, 4, 6, 2, 2],
        policy="pod",
        sizes=("hyperexponential", 2.0),
    ),
}
FAMILY_ALPHA = 0.01
HORIZON, WARMUP, BATCHES = 12_000.0, 200.0, 20


def standard_error_from_batches(values):
    values = np.asarray(values, dtype=float)
    return values.std(ddof=1) / math.sqrt(len(values))


@pytest.mark.parametrize("name", list(CASES))
def test_kernel_agrees_with_reference(name):
    case = CASES[name]
    kind, scv = case["sizes"]
    params = {"d": 3} if case["policy"] == "pod" else {}
    system = hetlb.System.from_speeds(
        case["speed"],
        arrival_rate=case["rates"],
        graph=case["graph"],
        buffer=case["buffer"],
        job_sizes=hetlb.JobSizes(kind, scv),
    )
    kernel = hetlb.simulate(
        system, case["policy"], horizon=HORIZON, warmup=WARMUP, batches=BATCHES, seed=21, **params
    ).runs[0]
    compat = case["graph"] or [list(range(len(case["speed"])))]
    reference = simulate_reference(
        case["speed"],
        case["rates"],
        compat,
        case["buffer"],
        case["policy"],
        d=params.get("d", 2),
        size_dist=kind,
        scv=max(scv, 1.0),
        horizon=HORIZON,
        warmup=WARMUP,
        seed=21,
        batches=BATCHES,
    )
    z = stats.norm.ppf(1 - FAMILY_ALPHA / (2 * len(CASES) * 2))
    # mean response time: both sides have batch means
    kernel_se = (
        (kernel.mean_response_time_ci[1] - kernel.mean_response_time_ci[0]) / 2 / stats.t.ppf(0.975, BATCHES - 1)
    )
    reference_se = standard_error_from_batches(reference["batch_response_means"])
    difference = kernel.mean_response_time - reference["mean_response_time"]
    assert abs(difference) <= z * math.hypot(kernel_se, reference_se), (
        f"response time: kernel {kernel.mean_response_time:.4f}, reference {reference['mean_response_time']:.4f}"
    )
    # blocking: binomial-like standard errors, inflated by the batch-means ratio of the kernel
    if case["buffer"] is not None:
        kernel_se_b = (
            (kernel.blocking_probability_ci[1] - kernel.blocking_probability_ci[0])
            / 2
            / stats.t.ppf(0.975, BATCHES - 1)
        )
        difference_b = kernel.blocking_probability - reference["blocking_probability"]
        assert abs(difference_b) <= z * math.sqrt(2) * kernel_se_b + 1e-12
