"""The fixed point of the mean-field limit and the figures derived from it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from hetlb.model.servers import SINGLE_SLOT
from hetlb.theory.meanfield.classes import ServerClasses

BLOCKING_RESOLUTION = 1e-9
"""Blocking probabilities below this are within the fixed point's tolerance and reported as 0."""


@dataclass(frozen=True, eq=False)
class MeanFieldLimit:
    """The fixed point of the mean-field limit and the figures derived from it.

    ``occupancy[m, i-1]`` is s_{m,i}, the fraction of class-m servers with at least i jobs;
    ``class_speed`` mu_m (decreasing) and ``class_fraction`` alpha_m; ``class_concurrency`` c_m and
    ``class_rate_curve`` phi_m (default: 1, the papers' servers); ``arrival_rate`` lambda per
    server; ``buffer`` b (None: infinite). Times are in the time unit of the speeds. ``stable`` is
    False when no fixed point with finite queues exists (then the means are infinite).
    ``finite_n_error`` is the order of the gap between the N-server system and the limit.

    Parameters
    ----------
    policy
        The policy's id.
    parameters
        Its parameters.
    load
        rho.
    arrival_rate
        lambda per server (jobs per unit time).
    class_speed
        mu_m (decreasing).
    class_fraction
        alpha_m.
    buffer
        b (None: infinite).
    occupancy
        s_{m,i} at [m, i-1].
    stable
        See above.
    description
        The limit's rule in words.
    finite_n_error
        See above.
    levels
        The levels i of ``occupancy``.
    class_concurrency
        c_m (int64; None: 1 each).
    class_rate_curve
        phi_m (None: one slot each).
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
    class_concurrency: np.ndarray = None  # type: ignore[assignment]  # c_m, int64; None: 1 each
    class_rate_curve: tuple = None  # type: ignore[assignment]  # phi_m; None: SINGLE_SLOT each

    def __repr__(self) -> str:
        buffer = "infinite" if self.buffer is None else str(self.buffer)
        return (
            f"<MeanFieldLimit {self.policy}, {len(self.class_speed)} classes, load {self.load:.4g}, buffer {buffer}: "
            f"mean response time {self.mean_response_time:.5g}>"
        )

    def __post_init__(self):
        n_classes = len(self.class_speed)
        if self.class_concurrency is None:
            object.__setattr__(self, "class_concurrency", np.ones(n_classes, dtype=np.int64))
        if self.class_rate_curve is None:
            object.__setattr__(self, "class_rate_curve", (SINGLE_SLOT,) * n_classes)

    def plot(self, path=None):
        """The matplotlib Figure of the fixed point's occupancy s_{m,i} per class against i (the
        figure of SimulationResult.plot, without intervals); written to ``path`` when given.

        Parameters
        ----------
        path
            A file to write the figure to (its format by the extension); None: none written.

        Returns
        -------
        matplotlib.figure.Figure
            The figure.
        """
        from hetlb.plots.figures import plot_occupancy

        labels = [
            f"speed {speed:g} ({fraction:.3g} of servers)"
            for speed, fraction in zip(self.class_speed, self.class_fraction)
        ]
        return plot_occupancy(
            labels, self.occupancy[None], path, title=f"mean-field limit of {self.policy}, load {self.load:.4g}"
        )

    @property
    def classes(self) -> ServerClasses:
        """The server classes of the limit: speeds mu_m, fractions alpha_m, concurrencies c_m and rate curves phi_m."""
        return ServerClasses(self.class_speed, self.class_fraction, self.class_concurrency, self.class_rate_curve)

    @property
    def rate_in_use(self) -> np.ndarray:
        """E[phi_m(min(N, c_m))] per class, the mean service rate of a class-m server in units of
        its speed: sum_i (phi_m(min(i, c_m)) - phi_m(min(i - 1, c_m))) s_{m,i} (s_{m,1} when c_m = 1)."""
        factor = self.classes.rate_factor(self.occupancy.shape[1])
        gain = np.diff(factor, axis=1, prepend=0.0)
        return (gain * self.occupancy).sum(axis=1)

    @property
    def throughput(self) -> float:
        """Departures per server per unit time, sum_m alpha_m mu_m E[phi_m(min(N, c_m))]
        (sum_m alpha_m mu_m s_{m,1} with one job at a time)."""
        return float(np.sum(self.class_fraction * self.class_speed * self.rate_in_use))

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
    def mean_in_service(self) -> np.ndarray:
        """E[min(N, c_m)] per class, the mean jobs in service at a class-m server: sum_{i <= c_m} s_{m,i}."""
        levels = np.arange(1, self.occupancy.shape[1] + 1)
        return np.where(levels[None, :] <= self.class_concurrency[:, None], self.occupancy, 0.0).sum(axis=1)

    @property
    def mean_service_time(self) -> float:
        """Mean service time of admitted jobs: jobs in service per server / throughput."""
        return float(np.sum(self.class_fraction * self.mean_in_service)) / self.throughput

    @property
    def mean_waiting_time(self) -> float:
        """Mean time an admitted job waits before service."""
        return self.mean_response_time - self.mean_service_time if self.stable else math.inf

    @property
    def p_wait(self) -> float:
        """Probability that an admitted job waits: arrivals that find all c_m slots taken equal the
        departures that leave c_m or more jobs behind, sum_m alpha_m mu_m phi_m(c_m) s_{m,c_m+1}
        / throughput (0 for unlimited concurrency)."""
        if not self.stable:
            return math.nan
        padded = np.concatenate([self.occupancy, np.zeros((len(self.class_speed), 1))], axis=1)
        beyond = np.minimum(self.class_concurrency, self.occupancy.shape[1])
        waiting = padded[np.arange(len(self.class_speed)), beyond]
        capacity = self.class_speed * self.classes.capacity_factor
        return float(np.sum(self.class_fraction * capacity * waiting)) / self.throughput

    @property
    def utilisation(self) -> np.ndarray:
        """The fraction of each class's capacity in use, E[phi_m(min(N, c_m))] / phi_m(c_m): the busy
        fraction s_{m,1} when c_m = 1."""
        return self.rate_in_use / self.classes.capacity_factor

    @property
    def job_share(self) -> np.ndarray:
        """Share of the admitted jobs served by each class, alpha_m mu_m E[phi_m(min(N, c_m))] / throughput."""
        return self.class_fraction * self.class_speed * self.rate_in_use / self.throughput

    def to_dict(self) -> dict:
        """The figures as plain numbers (JSON-ready; infinities as None). With servers that serve
        several jobs at once, each class also gives its concurrency, rate curve, capacity
        mu_m phi_m(c_m) and busy fraction s_{m,1}."""

        def plain(value):
            return float(value) if math.isfinite(value) else None

        classes = self.classes
        utilisation = self.utilisation
        job_share = self.job_share if self.stable else None
        rows = []
        for m in range(len(self.class_speed)):
            row = {
                "speed": float(self.class_speed[m]),
                "fraction": float(self.class_fraction[m]),
                "utilisation": float(utilisation[m]),
                "job_share": float(job_share[m]) if job_share is not None else None,
                "s_m": [float(x) for x in trim_tail(self.occupancy[m])],
            }
            if not classes.single_slot:
                row.update(classes.describe(m))
                row["capacity"] = float(classes.capacity[m])
                row["busy_fraction"] = float(self.occupancy[m, 0])
            rows.append(row)
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
            "classes": rows,
        }


def trim_tail(row: np.ndarray, below: float = 1e-12) -> np.ndarray:
    """``row`` without its trailing entries below ``below`` (at least one entry kept)."""
    keep = np.flatnonzero(row >= below)
    return row[: max(1, int(keep[-1]) + 1 if keep.size else 1)]
