"""The server classes of the mean-field limit: speed mu_m, fraction alpha_m, concurrency c_m and rate
curve phi_m (hetlb.model.servers), and a finite fleet of them.

A class-m server with n jobs serves min(n, c_m) of them and completes jobs at rate
mu_m phi_m(min(n, c_m)) (exponential sizes of mean 1): in every limit here it is a birth-death chain
with that death rate. With c_m = 1 the rate is mu_m whatever the curve: the papers' server.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hetlb import validation
from hetlb.constants import UNLIMITED_CONCURRENCY
from hetlb.errors import InputError
from hetlb.model.servers import SINGLE_SLOT, RateCurve, concurrency_array, concurrency_text, rate_curve_tuple

SATURATION = 0.99
"""A curve with unlimited concurrency counts as saturated at the least b with phi(b) >= SATURATION
times its limit (:meth:`ServerClasses.saturation_level`)."""


@dataclass(frozen=True, eq=False)
class ServerClasses:
    """Classes m = 0, 1, ... in decreasing speed (ties in the order given): ``speed`` mu_m,
    ``fraction`` alpha_m (summing to 1), ``concurrency`` c_m (int64, UNLIMITED_CONCURRENCY for
    unlimited) and ``rate_curve`` phi_m (a RateCurve each)."""

    speed: np.ndarray
    fraction: np.ndarray
    concurrency: np.ndarray
    rate_curve: tuple

    @property
    def size(self) -> int:
        return int(self.speed.size)

    @property
    def single_slot(self) -> bool:
        """Every class serves one job at a time (c_m = 1): the papers' servers."""
        return bool(np.all(self.concurrency == 1))

    @property
    def unlimited(self) -> np.ndarray:
        """Which classes have unlimited concurrency."""
        return self.concurrency >= UNLIMITED_CONCURRENCY

    @property
    def capacity_factor(self) -> np.ndarray:
        """phi_m(c_m), the capacity in units of the speed (the curve's limit for unlimited c_m)."""
        return np.array([curve.at_concurrency(int(c)) for c, curve in zip(self.concurrency, self.rate_curve)])

    @property
    def capacity(self) -> np.ndarray:
        """mu_m phi_m(c_m), jobs per unit time per class-m server at full concurrency."""
        return self.speed * self.capacity_factor

    def rate_factor(self, levels: int) -> np.ndarray:
        """phi_m(min(n, c_m)) for n = 1..levels, shape (M, levels)."""
        n = np.arange(1, levels + 1)
        return np.array(
            [curve.phi(np.minimum(n, c)) for c, curve in zip(self.concurrency, self.rate_curve)], dtype=float
        ).reshape(self.size, levels)

    def death_rate(self, levels: int) -> np.ndarray:
        """mu_m phi_m(min(n, c_m)), the completion rate of a class-m server with n = 1..levels jobs
        (mu_m at every n when c_m = 1), shape (M, levels)."""
        return self.speed[:, None] * self.rate_factor(levels)

    def saturation_level(self) -> int:
        """The most jobs in service before every class serves at (nearly) its capacity: the largest
        finite c_m; for unlimited c_m the least b with phi_m(b) >= SATURATION phi_m's limit."""
        level = 1
        for slots, curve in zip(self.concurrency, self.rate_curve):
            if slots < UNLIMITED_CONCURRENCY:
                level = max(level, int(slots))
            elif curve.kind == "table":
                level = max(level, len(curve.values))
            elif curve.kind == "saturating":  # b / (1 + A (b - 1)) >= SATURATION / A
                level = max(level, math.ceil(SATURATION * (1.0 - curve.alpha) / (curve.alpha * (1.0 - SATURATION))))
        return level

    def describe(self, m: int) -> dict:
        """Class m's concurrency and curve for a result (the speed and fraction are given beside)."""
        return {"concurrency": concurrency_text(int(self.concurrency[m])), "rate_curve": self.rate_curve[m].text}


def server_classes(speeds, fractions, concurrency=None, rate_curve=None) -> ServerClasses:
    """The classes from per-class ``speeds`` and ``fractions`` (or counts), or from per-server
    ``speeds`` when ``fractions`` is None (servers of equal speed, concurrency and curve form one
    class). concurrency, rate_curve: None (1, and any curve), one for all, or one per class (per
    server when ``fractions`` is None), as System.from_speeds takes them."""
    speed = validation.positive_finite_array("speeds", speeds, validation.RATE_RANGE, "a service rate")
    if concurrency is None and rate_curve is None:
        class_speed, fraction = speed_class_arrays(speed, fractions)
        ones = np.ones(class_speed.size, dtype=np.int64)
        return ServerClasses(class_speed, fraction, ones, (SINGLE_SLOT,) * class_speed.size)
    slots = concurrency_array(concurrency, speed.size)
    curves = rate_curve_tuple(rate_curve, speed.size)
    for c, curve in zip(slots, curves):
        if c >= UNLIMITED_CONCURRENCY and math.isinf(curve.limit):
            raise InputError("rate_curve", f"{curve.text} with unlimited concurrency has infinite capacity")
    curves = tuple(SINGLE_SLOT if c == 1 else curve for c, curve in zip(slots, curves))
    keys = [(float(v), int(c), curve) for v, c, curve in zip(speed, slots, curves)]
    if fractions is None:
        counts: dict = {}
        for key in keys:
            counts[key] = counts.get(key, 0) + 1
        keys, weight = list(counts), np.array(list(counts.values()), dtype=float)
    else:
        weight = validation.positive_finite_array("fractions", fractions)
        if weight.size != speed.size:
            raise InputError("fractions", f"must give one fraction per class ({speed.size}), got {weight.size}")
        if len(set(keys)) != len(keys):
            raise InputError("speeds", "the classes must differ in speed, concurrency or rate curve")
    order = sorted(range(len(keys)), key=lambda m: -keys[m][0])
    return ServerClasses(
        np.array([keys[m][0] for m in order]),
        weight[order] / weight.sum(),
        np.array([keys[m][1] for m in order], dtype=np.int64),
        tuple(keys[m][2] for m in order),
    )


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


def class_counts(class_fraction, n_servers: int) -> np.ndarray:
    """Servers per class in an N-server fleet with the classes' fractions (largest remainders:
    each class gets floor(N alpha_m) servers, the leftover ones go to the largest remainders)."""
    n_servers = validation.integer("n_servers", n_servers, low=1, high=validation.MAX_COUNT)
    fraction = np.asarray(class_fraction, dtype=float)
    exact = n_servers * fraction / fraction.sum()
    counts = np.floor(exact).astype(np.int64)
    leftover = n_servers - int(counts.sum())
    counts[np.argsort(-(exact - counts), kind="stable")[:leftover]] += 1
    if np.any(counts == 0):
        raise InputError("n_servers", f"{n_servers} servers leave a speed class empty; give at least {fraction.size}")
    return counts


def server_speeds(class_speed, class_fraction, n_servers: int) -> np.ndarray:
    """Per-server speeds of an N-server fleet with the classes' fractions (``class_counts``).

    Parameters
    ----------
    class_speed
        mu_m, the speed of each class (jobs per unit time).
    class_fraction
        alpha_m, the share of servers in each class.
    n_servers
        N.
    """
    return np.repeat(np.asarray(class_speed, dtype=float), class_counts(class_fraction, n_servers))


def fleet(classes: ServerClasses, n_servers: int) -> dict:
    """The System.from_speeds arguments of an N-server fleet of ``classes`` (:func:`class_counts`):
    per-server ``speeds``, ``concurrency`` and ``rate_curve``."""
    counts = class_counts(classes.fraction, n_servers)
    curves: list[RateCurve] = []
    for curve, count in zip(classes.rate_curve, counts):
        curves.extend([curve] * int(count))
    return {
        "speeds": np.repeat(classes.speed, counts),
        "concurrency": np.repeat(classes.concurrency, counts),
        "rate_curve": tuple(curves),
    }
