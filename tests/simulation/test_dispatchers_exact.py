"""The many-dispatcher kernel against the exact CTMC of tiny systems (hetlb.theory.dispatchers_exact,
written from the model's definitions and sharing no code with the kernel): 2 dispatchers, 2 or 3
servers, buffers 2 or 3, l-jsq with push and with pull updates (exponential delays), jsq on
Poisson snapshots. Student-t intervals over replications, Bonferroni over every comparison here.

With delays, the chain holds at most two messages in flight and loses the ones sent beyond; each
case checks that it loses less than LOST_LIMIT of its messages, a shift of its figures far below
the intervals' half-widths.
"""

import numpy as np
import pytest

import hetlb
from hetlb.theory.dispatchers_exact import solve_dispatchers_exact

from support.statistics import bonferroni_t_halfwidth

FAMILY_ALPHA = 0.01
LOST_LIMIT = 2e-3
METRICS = ("mean_response_time", "blocking_probability", "mean_estimate_error")
CASES = {
    "l-jsq push, delayed": (
        "l-jsq",
        dict(speed=[1.5, 1.0], arrival_rate=2.0, buffer=2, push=(0.5, 1), mean_delay=0.05),
        "push:p_hat=0.5:d=1:mean_delay=0.05",
    ),
    "l-jsq push": ("l-jsq", dict(speed=[1.5, 1.0], arrival_rate=2.0, buffer=3, push=(0.5, 1)), "push:p_hat=0.5:d=1"),
    "l-jsq pull, delayed": (
        "l-jsq",
        dict(speed=[1.5, 1.0], arrival_rate=2.0, buffer=2, pull=0.5, mean_delay=0.1),
        "pull:p_hat=0.5:mean_delay=0.1",
    ),
    "l-jsq pull, increments": (
        "l-jsq",
        dict(speed=[1.0, 0.5], arrival_rate=1.2, buffer=3, pull=0.3, increment=True),
        "increment,pull:p_hat=0.3",
    ),
    "jsq on snapshots": (
        "jsq",
        dict(speed=[2.0, 1.0, 0.5], arrival_rate=2.8, buffer=3, snapshot_rate=1.0),
        "snapshot:tau=1:timing=poisson",
    ),
}
COMPARISONS = len(CASES) * len(METRICS)
REPLICATIONS = 10


@pytest.mark.parametrize("name", list(CASES))
def test_kernel_matches_the_exact_chain(name):
    policy, chain, update = CASES[name]
    exact = solve_dispatchers_exact(**chain, dispatchers=2)
    assert exact.lost_message_rate <= LOST_LIMIT * exact.message_rate
    system = hetlb.System.from_speeds(chain["speed"], arrival_rate=chain["arrival_rate"], buffer=chain["buffer"])
    result = hetlb.simulate(
        system, policy, dispatchers=2, update=update, jobs=30_000, warmup=50.0, replications=REPLICATIONS, seed=21
    )
    for metric in METRICS:
        samples = [getattr(run, metric) for run in result.runs]
        half_width = bonferroni_t_halfwidth(samples, FAMILY_ALPHA, COMPARISONS)
        assert abs(np.mean(samples) - getattr(exact, metric)) <= half_width, (
            f"{metric}: simulated {np.mean(samples):.5f} +- {half_width:.5f}, exact {getattr(exact, metric):.5f}"
        )
    messages = [run.messages_per_job["total"] * (run.arrivals / run.measured_time) for run in result.runs]
    half_width = bonferroni_t_halfwidth(messages, FAMILY_ALPHA, COMPARISONS)
    assert abs(np.mean(messages) - exact.message_rate) <= half_width + LOST_LIMIT * exact.message_rate
