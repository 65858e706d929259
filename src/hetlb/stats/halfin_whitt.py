"""The measures of paper 002 (its section 3), from one run's time averages.

With Q_i the number of servers holding at least i jobs (queue length counts the job in service):
X_1 = n^{-1/2} (Q_1 - n) <= 0 (minus the scaled number of idle servers), X_i = n^{-1/2} Q_i for
i >= 2, X_{+1} = n^{-1/2} (jobs in system - n) and X_{+2} = n^{-1/2} (waiting jobs). Their means
are exact time averages over the run's measurement window. The share of idleness eta(A) (the
fraction of all idle server-time spent by servers with speed in A) and the occupancy
xi_2(A) = n^{-1/2} E #{k : mu_k in A, Q_k >= 2} are reported by speed bin, beside the benchmark of
the totally blind (TB) policies, eta(A) proportional to the speed mass in A.
"""

from __future__ import annotations

import math

import numpy as np

from hetlb.errors import InputError

MEASURES = ("x1", "x2", "x3", "x_plus1", "x_plus2")


def scaled_measures(run, n_servers: int) -> dict:
    """Time-average X_1, X_2, X_3, X_{+1} and X_{+2} of a run (nan for a level not recorded)."""
    root = math.sqrt(n_servers)
    levels = run.occupancy.sum(axis=0) * n_servers  # E Q_i, i = 1, 2, ...
    level = lambda i: float(levels[i - 1]) if len(levels) >= i else math.nan  # noqa: E731
    busy = level(1)
    return {
        "x1": (busy - n_servers) / root,
        "x2": level(2) / root,
        "x3": level(3) / root,
        "x_plus1": (run.mean_number_in_system - n_servers) / root,
        "x_plus2": (run.mean_number_in_system - busy) / root,
    }


def scaled_ccdf(run, n_servers: int, measure: str, y) -> np.ndarray:
    """P(X > y) for X = X_{+1} or X_{+2} (``measure`` "x_plus1" or "x_plus2"), the time fraction
    of the measurement window; needs a run with ``state_distribution=True``."""
    if measure not in ("x_plus1", "x_plus2"):
        raise InputError("measure", f"must be x_plus1 or x_plus2, got {measure!r}")
    distribution = run.jobs_distribution if measure == "x_plus1" else run.waiting_distribution
    if distribution is None:
        raise InputError("state_distribution", "simulate with state_distribution=True to get the distributions")
    counts = np.arange(len(distribution))
    values = (counts - n_servers) / math.sqrt(n_servers) if measure == "x_plus1" else counts / math.sqrt(n_servers)
    y = np.atleast_1d(np.asarray(y, dtype=float))
    return np.array([distribution[values > point].sum() for point in y])


def speed_profile(run, speed, bins: int) -> dict:
    """eta and xi_2 of 002 in ``bins`` equal-width bins of speed over [min, max], with the TB
    benchmark eta (each bin's share of the total speed)."""
    speed = np.asarray(speed, dtype=float)
    n_servers = len(speed)
    edges = np.linspace(speed.min(), speed.max(), bins + 1)
    server_bin = np.clip(np.searchsorted(edges, speed, side="right") - 1, 0, bins - 1)
    idle = np.clip(1.0 - run.utilisation, 0.0, None)
    class_bin = np.clip(np.searchsorted(edges, run.class_speed, side="right") - 1, 0, bins - 1)
    waiting_servers = (
        run.occupancy[:, 1] * n_servers if run.occupancy.shape[1] >= 2 else np.full(len(class_bin), np.nan)
    )
    return {
        "edges": edges.tolist(),
        "eta": (np.bincount(server_bin, weights=idle, minlength=bins) / idle.sum()).tolist(),
        "xi2": (np.bincount(class_bin, weights=waiting_servers, minlength=bins) / math.sqrt(n_servers)).tolist(),
        "tb_eta": (np.bincount(server_bin, weights=speed, minlength=bins) / speed.sum()).tolist(),
        "servers": np.bincount(server_bin, minlength=bins).tolist(),
    }
