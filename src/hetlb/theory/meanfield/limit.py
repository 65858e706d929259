"""The fixed point of the mean-field limit and the figures derived from it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

BLOCKING_RESOLUTION = 1e-9
"""Blocking probabilities below this are within the fixed point's tolerance and reported as 0."""


@dataclass(frozen=True, eq=False)
class MeanFieldLimit:
    """The fixed point of the mean-field limit and the figures derived from it.

    ``occupancy[m, i-1]`` is s_{m,i}, the fraction of class-m servers with at least i jobs;
    ``class_speed`` mu_m (decreasing) and ``class_fraction`` alpha_m; ``arrival_rate`` lambda per
    server; ``buffer`` b (None: infinite). Times are in the time unit of the speeds. ``stable`` is
    False when no fixed point with finite queues exists (then the means are infinite).
    ``finite_n_error`` is the order of the gap between the N-server system and the limit.
    """

    policy: str
    parameters: dict
    load: float
    arrival_rate: float
    class_speed: np.ndarray
    class_fraction: np.ndarray
    buffer: int | None
    occupancy: np.ndarray
    stable: bool
    description: str
    finite_n_error: str = "1/N"
    levels: int = field(default=0)

    @property
    def throughput(self) -> float:
        """Departures per server per unit time, sum_m alpha_m mu_m s_{m,1}."""
        return float(np.sum(self.class_fraction * self.class_speed * self.occupancy[:, 0]))

    @property
    def blocking_probability(self) -> float:
        """Fraction of arrivals lost at a full buffer, 1 - throughput / lambda (0 with infinite
        buffers; below BLOCKING_RESOLUTION it is within the fixed point's tolerance, and 0)."""
        if not self.stable:
            return math.nan
        lost = 1.0 - self.throughput / self.arrival_rate
        return lost if self.buffer is not None and lost > BLOCKING_RESOLUTION else 0.0

    @property
    def mean_number_in_system(self) -> float:
        """Mean jobs per server, sum_m alpha_m sum_i s_{m,i}."""
        return float(np.sum(self.class_fraction * self.occupancy.sum(axis=1))) if self.stable else math.inf

    @property
    def mean_response_time(self) -> float:
        """Mean response time of admitted jobs (Little's law: jobs per server / throughput)."""
        return self.mean_number_in_system / self.throughput if self.stable else math.inf

    @property
    def mean_service_time(self) -> float:
        """Mean service time of admitted jobs: busy servers per server / throughput."""
        return float(np.sum(self.class_fraction * self.occupancy[:, 0])) / self.throughput

    @property
    def mean_waiting_time(self) -> float:
        """Mean time an admitted job waits before service."""
        return self.mean_response_time - self.mean_service_time if self.stable else math.inf

    @property
    def p_wait(self) -> float:
        """Probability that an admitted job waits: arrivals joining a busy server equal the
        departures leaving one or more jobs behind, sum_m alpha_m mu_m s_{m,2} / throughput."""
        if not self.stable:
            return math.nan
        second = self.occupancy[:, 1] if self.occupancy.shape[1] > 1 else np.zeros(len(self.class_speed))
        return float(np.sum(self.class_fraction * self.class_speed * second)) / self.throughput

    @property
    def utilisation(self) -> np.ndarray:
        """Busy fraction s_{m,1} of each class."""
        return self.occupancy[:, 0].copy()

    @property
    def job_share(self) -> np.ndarray:
        """Share of the admitted jobs served by each class, alpha_m mu_m s_{m,1} / throughput."""
        return self.class_fraction * self.class_speed * self.occupancy[:, 0] / self.throughput

    def to_dict(self) -> dict:
        """The figures as plain numbers (JSON-ready; infinities as None)."""

        def plain(value):
            return float(value) if math.isfinite(value) else None

        return {
            "policy": self.policy,
            "parameters": dict(self.parameters),
            "load": self.load,
            "arrival_rate_per_server": self.arrival_rate,
            "buffer": self.buffer,
            "stable": self.stable,
            "description": self.description,
            "finite_n_error": self.finite_n_error,
            "mean_response_time": plain(self.mean_response_time),
            "mean_waiting_time": plain(self.mean_waiting_time),
            "p_wait": plain(self.p_wait),
            "blocking_probability": plain(self.blocking_probability),
            "mean_number_in_system_per_server": plain(self.mean_number_in_system),
            "classes": [
                {
                    "speed": float(self.class_speed[m]),
                    "fraction": float(self.class_fraction[m]),
                    "utilisation": float(self.occupancy[m, 0]),
                    "job_share": float(self.job_share[m]) if self.stable else None,
                    "s_m": [float(x) for x in trim_tail(self.occupancy[m])],
                }
                for m in range(len(self.class_speed))
            ],
        }


def trim_tail(row: np.ndarray, below: float = 1e-12) -> np.ndarray:
    """``row`` without its trailing entries below ``below`` (at least one entry kept)."""
    keep = np.flatnonzero(row >= below)
    return row[: max(1, int(keep[-1]) + 1 if keep.size else 1)]
