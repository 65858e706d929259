"""Results of the continuous model with M dispatchers: every figure of the single dispatcher, and
the messages, the estimates and the herd (docs/reference/dispatchers.md)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hetlb.results.run import RunResult, SimulationResult, mean_property

DISPATCHER_FIGURES = (
    "mean_estimate_error",
    "mean_estimate_bias",
    "mean_estimate_age",
    "herd_fraction",
    "herd_same_fraction",
)
"""Scalar figures of the dispatchers, each run's and their mean over the replications."""


@dataclass(repr=False)
class DispatcherRunResult(RunResult):
    """One replication with dispatchers. Over the measured window: ``messages`` by kind (their
    count; ``increment`` counts a dispatcher's own dispatches, which send nothing) and
    ``messages_per_job`` (per arrival, with their ``total`` over the kinds that are messages);
    the estimates' mean absolute error |Q~^m_s - Q_s|, their mean error (bias) and their mean age
    (now minus when the number an estimate holds was observed), time-averages over dispatchers
    (weighted by their arrival rates) and servers, seen at the arrivals (PASTA); the herd:
    ``herd_fraction`` of the decisions chose a server another dispatcher chose less than the herd
    window before (``herd_same_fraction``: the same dispatcher), per dispatcher in
    ``herd_by_dispatcher``. ``stale_messages`` arrived after a newer observation and were dropped.

    Parameters
    ----------
    messages
        The messages of the window by kind.
    messages_per_job
        Messages per arrival by kind, with their ``total``.
    mean_estimate_error
        The time-average |Q~^m_s - Q_s| seen at the arrivals.
    mean_estimate_bias
        The time-average Q~^m_s - Q_s seen at the arrivals.
    mean_estimate_age
        The mean age of an estimate (time units).
    herd_fraction
        The fraction of decisions onto a server another dispatcher chose within the herd window.
    herd_same_fraction
        The same for the dispatcher's own earlier choice.
    herd_by_dispatcher
        herd_fraction per dispatcher.
    decisions_by_dispatcher
        The decisions each dispatcher made.
    stale_messages
        Messages that arrived after a newer observation and were dropped.
    delivered_messages
        Messages delivered.
    message_events
        Message deliveries the event loop processed.
    snapshot_events
        Snapshots taken.
    """

    messages: dict = field(default_factory=dict)
    messages_per_job: dict = field(default_factory=dict)
    mean_estimate_error: float = 0.0
    mean_estimate_bias: float = 0.0
    mean_estimate_age: float = 0.0
    herd_fraction: float = 0.0
    herd_same_fraction: float = 0.0
    herd_by_dispatcher: list = field(default_factory=list)
    decisions_by_dispatcher: list = field(default_factory=list)
    stale_messages: int = 0
    delivered_messages: int = 0
    message_events: int = 0
    snapshot_events: int = 0

    @property
    def summary(self) -> dict:
        """A run's headline figures and those of its dispatchers (DISPATCHER_FIGURES, messages_per_job)."""
        return {**super().summary, **self.figures(DISPATCHER_FIGURES), "messages_per_job": self.messages_per_job}

    def to_dict(self, per_server: bool = True) -> dict:
        """Parameters
        ----------
        per_server
            Include the per-server arrays.
        """
        out = super().to_dict(per_server)
        out.update({name: getattr(self, name) for name in DISPATCHER_FIGURES})
        out.update(
            messages=self.messages,
            messages_per_job=self.messages_per_job,
            herd_by_dispatcher=self.herd_by_dispatcher,
            decisions_by_dispatcher=self.decisions_by_dispatcher,
            stale_messages=self.stale_messages,
            delivered_messages=self.delivered_messages,
            message_events=self.message_events,
            snapshot_events=self.snapshot_events,
        )
        return out


@dataclass(repr=False)
class DispatchersResult(SimulationResult):
    """Replications of a system with M dispatchers: a SimulationResult with the dispatchers'
    figures (DispatcherRunResult), averaged over the replications with 95% intervals when there
    are several.

    Parameters
    ----------
    runs
        The replications' results (DispatcherRunResult), in order.
    metadata
        The system, policy, seed, stopping rule and versions.
    """

    mean_estimate_error = mean_property("mean_estimate_error", "time-average |Q~^m_s - Q_s|")
    mean_estimate_bias = mean_property("mean_estimate_bias", "time-average Q~^m_s - Q_s")
    mean_estimate_age = mean_property("mean_estimate_age", "time-average age of an estimate (time units)")
    herd_fraction = mean_property("herd_fraction", "fraction of decisions onto another dispatcher's recent choice")
    herd_same_fraction = mean_property(
        "herd_same_fraction", "fraction of decisions onto the dispatcher's own recent choice"
    )

    @property
    def messages_per_job(self) -> dict:
        """Messages per arrival by kind (and their total), averaged over the replications."""
        return {
            name: float(np.mean([run.messages_per_job[name] for run in self.runs]))
            for name in self.runs[0].messages_per_job
        }

    @property
    def herd_by_dispatcher(self) -> list:
        """Per dispatcher, the fraction of its decisions onto another dispatcher's recent choice, averaged over the
        replications."""
        return np.mean([run.herd_by_dispatcher for run in self.runs], axis=0).tolist()

    @property
    def summary(self) -> dict:
        """The headline figures of the simulation with those of the dispatchers: estimate error, bias and age, the
        herd, messages per job."""
        out = {**super().summary, **self.figures(DISPATCHER_FIGURES)}
        out["messages_per_job"] = self.messages_per_job
        out["herd_by_dispatcher"] = self.herd_by_dispatcher
        return out
