"""Tuning jsq-df-ds: the routing probabilities (p_F, p_S) that minimise the mean response time.

Gardner et al. took (p_F, p_S) from a mean-field optimisation (their Table 1, lost from paper
000's text); hetlb searches a grid of (p_F, p_S) by simulation instead. Every grid point is
simulated with the same seed, so with the same arrivals and job sizes (common random numbers):
the comparison between grid points is paired and much sharper than independent runs would give.
The winner is chosen on these tuning runs; report its performance from fresh runs with another
seed, or the minimum is biased low (the winner's curse).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hetlb import validation
from hetlb.errors import InputError
from hetlb.model import System
from hetlb.policies import make_policy
from hetlb.simulation.continuous import check_policy_stability, run_cost
from hetlb.simulation.replications import stopping_rule
from hetlb.simulation.simulate import simulate

DEFAULT_GRID = tuple(np.round(np.linspace(0.0, 1.0, 6), 10))
"""p_F and p_S each take these values (0, 0.2, ..., 1)."""


@dataclass
class Tuning:
    """The best (p_F, p_S) and the table of every grid point: rows (p_fast, p_slow, mean response
    time, blocking probability), and whether each point was admissible (blocking within bound)."""

    p_fast: float
    p_slow: float
    mean_response_time: float
    table: list


def tune_jsq_df_ds(
    system: System,
    *,
    grid=DEFAULT_GRID,
    d_fast: int = 2,
    d_slow: int = 2,
    jobs: int = 50_000,
    warmup: float = 0.0,
    replications: int = 1,
    seed: int = 0,
    max_blocking: float = 1e-3,
    report=None,
) -> Tuning:
    """Grid search of (p_F, p_S) for ``jsq-df-ds`` on ``system``, minimising the mean response
    time among the points whose blocking probability is at most ``max_blocking`` (a point that
    loses jobs would otherwise win by dropping its slowest ones). Points that are unstable with
    infinite buffers (p_F = 1 with p_S = 0 above the fast capacity) are skipped.
    ``report(done, total, label, result)`` is called after each grid point's simulation.

    Parameters
    ----------
    system
        A ``hetlb.System``.
    grid
        The values tried for each of p_F and p_S.
    d_fast, d_slow
        d_F and d_S, the fast and slow servers sampled.
    jobs
        Measured jobs per grid point.
    warmup
        Simulated time discarded at each point (time units).
    replications
        Replications per point.
    seed
        The root seed (common random numbers across the grid).
    max_blocking
        The largest blocking probability of a point that can win.
    report
        Called as ``report(done, total, label, result)`` after each grid point.
    """
    values = np.asarray(grid, dtype=float)
    if values.ndim != 1 or len(values) == 0 or np.any((values < 0) | (values > 1)):
        raise InputError("grid", "must be a non-empty list of probabilities in [0, 1]")
    max_blocking = validation.probability("max_blocking", max_blocking)
    validation.count("replications", replications)
    measured_jobs, horizon, warmup = stopping_rule(jobs, None, warmup)
    points = len(values) ** 2
    validation.check_memory("grid", 400 * points, f"the table of {points:,} grid points", "use a smaller grid")
    run_cost(system, measured_jobs, horizon, warmup).check(replications, runs=points)
    table = []
    for i, p_fast in enumerate(values):
        for j, p_slow in enumerate(values):
            policy = make_policy("jsq-df-ds", d_fast=d_fast, d_slow=d_slow, p_fast=float(p_fast), p_slow=float(p_slow))
            try:
                check_policy_stability(system, policy)
            except InputError:  # slow servers unused with infinite buffers above the fast capacity
                continue
            result = simulate(system, policy, jobs=jobs, warmup=warmup, replications=replications, seed=seed)
            summary = result.summary
            table.append((float(p_fast), float(p_slow), summary["mean_response_time"], summary["blocking_probability"]))
            if report is not None:
                report(i * len(values) + j + 1, len(values) ** 2, f"p_fast {p_fast:g}, p_slow {p_slow:g}", result)
    admissible = [row for row in table if row[3] <= max_blocking]
    if not admissible:
        raise InputError("max_blocking", f"no grid point blocks at most {max_blocking:g} of the jobs")
    best = min(admissible, key=lambda row: row[2])
    return Tuning(best[0], best[1], best[2], table)
