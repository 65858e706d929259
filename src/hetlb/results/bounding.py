"""Results of the bounding systems JSQ-FSL and JSQ-SSL of paper 002 (section 5, Prop 5.1): the
time averages of hetlb.simulation.bounding.simulate_bounding_system.

Q_i is the number of buffers holding >= i jobs, Q_{+i} = sum_{j >= i} Q_j, and in the scaling of
002 X_1 = n^{-1/2} (Q_1 - n), X_i = n^{-1/2} Q_i (i >= 2), X_{+i} = sum_{j >= i} X_j. Times are in
the model's time unit; intervals are 95% Student-t intervals over the replications.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hetlb.results.base import Result, replications_text, with_intervals

MEASURES = ("Q_1", "Q_2", "Q_3", "Q_+1", "Q_+2", "X_1", "X_2", "X_3", "X_+1", "X_+2", "loss_fraction")
"""The time averages of a bounding system, in the order of ``replication_values``' columns."""


@dataclass(frozen=True)
class Estimate:
    """Mean over replications and the half-width of its 95% Student-t interval (nan for one)."""

    mean: float
    half_width: float

    @property
    def interval(self) -> list:
        """[mean - half_width, mean + half_width]."""
        return [self.mean - self.half_width, self.mean + self.half_width]


@dataclass(frozen=True, eq=False)
class TimeWeightedLaw:
    """Time-weighted law of a scaled count after the warm-up: the count j takes the value
    ``support[j]`` (X_{+1}: (j - n) / sqrt(n); X_{+2}: j / sqrt(n)); ``ccdf[j]`` = P(X > support[j]),
    the mean over replications, with the half-width of its 95% t interval."""

    support: np.ndarray
    ccdf: np.ndarray
    ccdf_half_width: np.ndarray

    def tail(self, x: float) -> float:
        """P(X > x), a right-continuous step function of x."""
        j = int(np.searchsorted(self.support, x, side="right")) - 1
        return 1.0 if j < 0 else float(self.ccdf[min(j, len(self.ccdf) - 1)])

    def to_dict(self) -> dict:
        return {
            "support": self.support.tolist(),
            "ccdf": self.ccdf.tolist(),
            "ccdf_half_width": self.ccdf_half_width.tolist(),
        }


@dataclass(frozen=True, eq=False, repr=False)
class BoundingResult(Result):
    """Time averages over [warmup, horizon] of JSQ-FSL or JSQ-SSL, each replication from empty buffers.

    ``estimates`` maps each of MEASURES to an Estimate; ``replication_values[r, m]`` is measure m of
    replication r (columns in MEASURES order, for paired comparisons). ``level_means[i - 1]`` is the
    mean of Q_i for every level reached. ``loss_fraction`` is the fraction of arrivals that found
    every buffer full. ``excess_capacity`` is c = n^{-1/2} (sum_k mu_k - n lambda) = varsigma + nu.
    ``summary`` gives each measure's mean and its interval (``name + "_ci"``).

    Parameters
    ----------
    kind
        "fsl" or "ssl".
    buffer
        b (None: infinite).
    n_servers
        n.
    arrival_rate
        n lambda^n, the total Poisson rate (jobs per time unit).
    excess_capacity
        c.
    horizon, warmup
        The averaging window (time units).
    replications
        Independent paths.
    estimates
        Measure -> Estimate.
    replication_values
        [r, m]: measure m of replication r.
    level_means
        [i - 1]: the mean of Q_i.
    x_plus1_law, x_plus2_law
        The time-weighted laws of X_{+1} and X_{+2}.
    events
        Simulated events.
    events_per_second
        Events per second of wall-clock time.
    metadata
        The seed and the versions (simulate_bounding_system).
    """

    kind: str
    buffer: int | None
    n_servers: int
    arrival_rate: float
    excess_capacity: float
    horizon: float
    warmup: float
    replications: int
    estimates: dict
    replication_values: np.ndarray
    level_means: np.ndarray
    x_plus1_law: TimeWeightedLaw
    x_plus2_law: TimeWeightedLaw
    events: int
    events_per_second: float
    metadata: dict = field(default_factory=dict)  # the seed and the versions (simulate_bounding_system)

    def plot(self, path=None):
        """The matplotlib Figure of the mean of Q_i, the servers with at least i jobs, against the
        level i (the replications' mean); written to ``path`` when given.

        Parameters
        ----------
        path
            A file to write the figure to (its format by the extension); None: none written.

        Returns
        -------
        matplotlib.figure.Figure
            The figure.
        """
        from hetlb.plots.figures import plot_metric

        levels = np.arange(1, len(self.level_means) + 1)
        none = np.full(levels.size, np.nan)
        return plot_metric(
            levels,
            {self.kind: (self.level_means, none, none)},
            path,
            xlabel=r"level $i$",
            ylabel=r"mean of $Q_i$: servers with $\geq i$ jobs",
            title=f"{self.kind}, n = {self.n_servers}, c = {self.excess_capacity:.4g}",
            log_y=bool(np.all(self.level_means > 0)),
        )

    @property
    def system(self) -> dict:
        """What was simulated: the bounding system, its buffers, n, n lambda, c, the horizon and warm-up."""
        names = ("kind", "buffer", "n_servers", "arrival_rate", "excess_capacity", "horizon", "warmup")
        return {name: getattr(self, name) for name in names}

    @property
    def summary(self) -> dict:
        """The headline figures: each measure's mean and 95% interval, the replications, the events and the events
        per second."""
        out = with_intervals(MEASURES, lambda name: (self.estimates[name].mean, self.estimates[name].interval))
        out.update(replications=self.replications, events=self.events, events_per_second=self.events_per_second)
        return out

    def to_dict(self) -> dict:
        """The summary, the mean of Q_i per level, the laws of X_{+1} and X_{+2}, the replications'
        values (rows in MEASURES order), and the metadata with the system."""
        return {
            **self.summary,
            "level_means": self.level_means.tolist(),
            "x_plus1_law": self.x_plus1_law.to_dict(),
            "x_plus2_law": self.x_plus2_law.to_dict(),
            "replication_values": self.replication_values.tolist(),
            "metadata": {"system": self.system, **self.metadata},
        }

    def headline(self) -> tuple:
        return "X_+1", self.estimates["X_+1"].mean, self.estimates["X_+1"].interval

    def describe(self) -> str:
        buffers = "infinite buffers" if self.buffer is None else f"buffers of {self.buffer}"
        return f"{self.kind}, {self.n_servers} servers, {buffers}, c {self.excess_capacity:.4g}"

    def extent(self) -> str:
        return replications_text(self.replications)
