"""Ranking policies: explicit fixed points (docs/background/mean-field.md)."""

from __future__ import annotations

import numpy as np

from hetlb.errors import InputError

KEY_TOLERANCE = 1e-12
"""Relative tolerance under which two sed keys i / mu_m are equal (a tie)."""
MAX_SPEED_RATIO = 1e6
"""Largest mu_max / mu_min for sed (its fastest servers hold about that many jobs)."""


def fill_in_order(speed, fraction, arrival_rate, order) -> np.ndarray:
    """Busy fractions when idle servers are filled class by class in ``order``: each class takes
    what the previous ones leave, up to its capacity alpha_m mu_m."""
    busy = np.zeros(speed.size)
    left = arrival_rate
    for m in order:
        capacity = fraction[m] * speed[m]
        busy[m] = min(1.0, left / capacity)
        left -= busy[m] * capacity
    return busy


def idle_rate(speed, fraction, target: float, fixed: float, sink: float) -> float:
    """R >= 0 solving fixed + sum_m alpha_m mu_m R / (R + mu_m) + sink R = target (R is the arrival
    rate per free least-key slot; the sum runs over the classes given)."""

    from scipy import optimize  # here: the sampling policies need no SciPy

    def excess(rate):
        return fixed + float(np.sum(fraction * speed * rate / (rate + speed))) + sink * rate - target

    if excess(0.0) >= 0.0:
        return 0.0
    high = float(np.max(speed, initial=1.0))
    while excess(high) < 0.0:
        high *= 2.0
    return float(optimize.brentq(excess, 0.0, high, xtol=1e-15, rtol=4 * np.finfo(float).eps))


def ranking_occupancy(rule: str, speed, fraction, arrival_rate, buffer) -> np.ndarray:
    """s_{m,i} at the fixed point of a ranking policy's ``rule`` (MeanFieldRule.rule;
    docs/background/mean-field.md)."""
    if rule == "idle-uniform":
        rate = idle_rate(speed, fraction, arrival_rate, 0.0, 0.0)
        return (rate / (rate + speed))[:, None]
    if rule == "idle-fastest-first":
        return fill_in_order(speed, fraction, arrival_rate, range(speed.size))[:, None]
    if rule == "idle-slowest-first":
        return fill_in_order(speed, fraction, arrival_rate, reversed(range(speed.size)))[:, None]
    return sed_occupancy(speed, fraction, arrival_rate, buffer)


def sed_occupancy(speed, fraction, arrival_rate, buffer) -> np.ndarray:
    """Shortest expected delay: the slot (class m, level i) has key i / mu_m. Slots below the
    threshold key theta are full, those above empty; at theta the free slots are taken uniformly.
    theta is 1 / mu_K of the class K left partly idle by filling in speed order, or, when a buffer
    is reached first, (b + 1) / mu_0, the key of a full fastest server (arrivals sent there are lost)."""
    if speed[0] / speed[-1] > MAX_SPEED_RATIO:
        raise InputError("speeds", f"sed needs mu_max / mu_min <= {MAX_SPEED_RATIO:g}")
    busy = fill_in_order(speed, fraction, arrival_rate, range(speed.size))
    partly_idle = int(np.flatnonzero(busy < 1.0)[0])
    theta = 1.0 / speed[partly_idle]
    if buffer is not None:
        theta = min(theta, (buffer + 1) / speed[0])
    # levels i with i / mu_m < theta (strictly, up to KEY_TOLERANCE) are full; i = full + 1 may tie.
    ratio = theta * speed
    nearest = np.rint(ratio)
    tied = np.abs(ratio - nearest) <= KEY_TOLERANCE * ratio
    full = np.where(tied, nearest - 1, np.floor(ratio)).astype(np.int64)
    if buffer is not None:
        full = np.minimum(full, buffer)
    sink = tied & (buffer is not None) & (full == (buffer if buffer is not None else -1))
    tied_free = tied & ~sink & (full + 1 <= (buffer if buffer is not None else np.iinfo(np.int64).max))
    served = full >= 1
    level_one = tied_free & (full == 0)
    rate = idle_rate(
        speed[level_one],
        fraction[level_one],
        arrival_rate,
        float(np.sum(fraction[served] * speed[served])),
        float(np.sum(fraction[sink])),
    )
    levels = int(max(1, np.max(full + tied_free)))
    occupancy = np.zeros((speed.size, levels))
    for m in range(speed.size):
        occupancy[m, : full[m]] = 1.0
        if tied_free[m]:
            occupancy[m, full[m]] = rate / (rate + speed[m])
    return occupancy
