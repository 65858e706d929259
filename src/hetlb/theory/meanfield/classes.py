"""The server classes of the mean-field limit: their speeds and fractions, and a finite fleet of them."""

from __future__ import annotations

import numpy as np

from hetlb import validation
from hetlb.errors import InputError


def speed_class_arrays(speeds, fractions) -> tuple[np.ndarray, np.ndarray]:
    """(mu_m decreasing, alpha_m) from per-class ``speeds`` and ``fractions`` (or counts), or from
    per-server ``speeds`` when ``fractions`` is None (equal speeds form one class)."""
    speed = validation.positive_finite_array("speeds", speeds, validation.RATE_RANGE, "a service rate")
    if fractions is None:
        values, counts = np.unique(speed, return_counts=True)
        return values[::-1].copy(), (counts[::-1] / counts.sum()).astype(float)
    weight = validation.positive_finite_array("fractions", fractions)
    if weight.size != speed.size:
        raise InputError("fractions", f"must give one fraction per speed class ({speed.size}), got {weight.size}")
    if np.unique(speed).size != speed.size:
        raise InputError("speeds", "the speed classes must have distinct speeds")
    order = np.argsort(-speed, kind="stable")
    return speed[order], weight[order] / weight.sum()


def server_speeds(class_speed, class_fraction, n_servers: int) -> np.ndarray:
    """Per-server speeds of an N-server fleet with the classes' fractions (largest remainders:
    each class gets floor(N alpha_m) servers, the leftover ones go to the largest remainders)."""
    n_servers = validation.integer("n_servers", n_servers, low=1, high=validation.MAX_COUNT)
    speed = np.asarray(class_speed, dtype=float)
    fraction = np.asarray(class_fraction, dtype=float)
    exact = n_servers * fraction / fraction.sum()
    counts = np.floor(exact).astype(np.int64)
    leftover = n_servers - int(counts.sum())
    counts[np.argsort(-(exact - counts), kind="stable")[:leftover]] += 1
    if np.any(counts == 0):
        raise InputError("n_servers", f"{n_servers} servers leave a speed class empty; give at least {speed.size}")
    return np.repeat(speed, counts)
