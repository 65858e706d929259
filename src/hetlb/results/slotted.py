"""Results of the slotted model: one replication (:class:`SlottedRunResult`) and a set of them
(:class:`SlottedResult`).

Times are in slots. Queue lengths are taken at the end of each measured slot; the mean delay is
Little's law, sum over slots of sum_n Q_n(t+1) divided by the arrivals, i.e. the number of slot
ends a job spends in the system (0 for a job served in the slot it arrives). Intervals are 95%
Student-t intervals over batch means within a run, or over replications when there are several.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from hetlb.results.base import ReplicationResult
from hetlb.results.run import ReplicatedResult, interval_property, mean_property
from hetlb.results.table import SLOTTED_METRICS
from hetlb.stats import interval, preference_report


@dataclass(repr=False)
class SlottedRunResult(ReplicationResult):
    """Statistics of one replication over the slots warmup .. warmup + slots - 1.

    Parameters
    ----------
    seed_entropy
        The root seed's entropy.
    seed_key
        The replication's spawn key (its index r).
    slots
        Measured slots.
    arrivals
        Jobs arrived in the measured slots.
    departures
        Jobs that departed in them.
    decisions
        Dispatching decisions (one per dispatcher and slot with arrivals; one per job with
        routing="job").
    mean_number_in_system
        The time-average sum_n Q_n.
    mean_number_in_system_ci
        Its 95% interval [low, high] (batch means of this run).
    number_in_system_growth
        The time-average sum_n Q_n over the second half of the measured slots over that over the
        first half, minus 1: about 0 when stable, > 0 when the queues grow (or the warm-up was too
        short).
    mean_delay
        The mean delay (slots, by Little's law).
    mean_delay_ci
        Its 95% interval [low, high] (batch means of this run).
    mean_estimate_error
        The time-average |Q_n - Q~^m_n| over dispatchers and servers (LED policies only).
    mean_estimate_error_ci
        Its 95% interval [low, high] (batch means of this run).
    messages
        Probes, replies, reports and tokens in the measured slots.
    messages_per_arrival
        Messages per arrival.
    messages_per_arrival_ci
        Its 95% interval [low, high] (batch means of this run).
    messages_per_decision
        Messages per dispatching decision.
    mean_queue_length
        Per server, the time-average Q_n.
    preference
        preference_report of Delta_r, with the per-rank "selection" frequency and "share"
        E[mu_sigma(r)] / mu_Sigma, and Delta^m_r "by_dispatcher" (None unless measured).
    preference_samples
        Per batch, Delta_r.
    counters
        The whole run from slot 0: arrivals, departures; at the end: in_system, idle_servers,
        tokens_held (jiq).
    slots_run
        Slots run, the warm-up included.
    wall_seconds
        The run's wall-clock time (seconds).
    batch_delay_means
        The mean delay of each batch (slots).
    trace
        The first decisions, when asked for.
    """

    seed_entropy: int | list[int]
    seed_key: tuple
    slots: int  # measured slots
    arrivals: int  # jobs arrived in the measured slots
    departures: int
    decisions: int  # dispatching decisions (one per dispatcher and slot with arrivals,
    # one per job with routing="job")
    mean_number_in_system: float  # time-average sum_n Q_n
    mean_number_in_system_ci: list
    number_in_system_growth: float  # time-average sum_n Q_n over the second half of the measured slots divided
    # by that over the first half, minus 1: about 0 when stable, > 0 when the
    # queues grow (or the warm-up was too short)
    mean_delay: float  # slots, by Little's law
    mean_delay_ci: list
    mean_estimate_error: float  # time-average of |Q_n - Q~^m_n| over dispatchers and servers (LED only)
    mean_estimate_error_ci: list
    messages: dict  # probes, replies, reports, tokens in the measured slots
    messages_per_arrival: float
    messages_per_arrival_ci: list
    messages_per_decision: float
    mean_queue_length: np.ndarray  # per server, time-average Q_n
    preference: dict | None  # preference_report of Delta_r, with the per-rank "selection" frequency and
    # "share" E[mu_sigma(r)] / mu_Sigma, and Delta^m_r "by_dispatcher"
    preference_samples: np.ndarray | None  # per batch, Delta_r
    counters: dict  # whole run from slot 0: arrivals, departures; at the end: in_system,
    # idle_servers, tokens_held (jiq)
    slots_run: int  # warm-up included
    wall_seconds: float
    batch_delay_means: list = field(default_factory=list)
    trace: dict | None = None

    @property
    def events(self) -> int:
        """Jobs arrived plus jobs departed, whole run."""
        return self.counters["arrivals"] + self.counters["departures"]

    @property
    def slots_per_second(self) -> float:
        """Simulated slots per second of wall-clock time (infinite for a run too short to time)."""
        return self.slots_run / self.wall_seconds if self.wall_seconds > 0 else math.inf

    @property
    def summary(self) -> dict:
        """The run's headline figures (the first entries of ``to_dict`` after its seed); each key is
        also an attribute."""
        out = self.figures(SLOTTED_METRICS)
        for name in ("slots", "arrivals", "departures", "decisions", "events", "wall_seconds", "slots_per_second"):
            out[name] = getattr(self, name)
        return out

    def headline(self) -> tuple:
        return "mean delay (slots)", self.mean_delay, self.mean_delay_ci

    def extent(self) -> str:
        return f"{self.slots} slots"

    @property
    def events_per_second(self) -> float:
        """Simulated events per second of wall-clock time (infinite for a run too short to time)."""
        return self.events / self.wall_seconds if self.wall_seconds > 0 else math.inf

    def to_dict(self, per_server: bool = True) -> dict:
        """Parameters
        ----------
        per_server
            Include the per-server arrays.
        """
        out = {
            "seed": {"entropy": self.seed_entropy, "spawn_key": list(self.seed_key)},
            **{name: getattr(self, name) for name in SLOTTED_METRICS},
            **{name + "_ci": getattr(self, name + "_ci") for name in SLOTTED_METRICS if hasattr(self, name + "_ci")},
            "messages": self.messages,
            "preference": self.preference,
            "slots": self.slots,
            "arrivals": self.arrivals,
            "departures": self.departures,
            "decisions": self.decisions,
            "counters": self.counters,
            "batch_delay_means": self.batch_delay_means,
            "slots_run": self.slots_run,
            "events": self.events,
            "wall_seconds": self.wall_seconds,
            "slots_per_second": self.slots_per_second,
            "events_per_second": self.events_per_second,
        }
        if per_server:
            out["mean_queue_length"] = self.mean_queue_length.tolist()
        return out


@dataclass(repr=False)
class SlottedResult(ReplicatedResult):
    """Replications of one slotted scenario under one policy, with their aggregate and metadata.

    Every key of ``summary`` is also an attribute; intervals are those of
    :class:`~hetlb.results.run.SimulationResult` (None when a single run does not measure one).

    Parameters
    ----------
    runs
        The replications' results (SlottedRunResult), in order.
    metadata
        The system, policy, seed, stopping rule and versions.
    """

    def plot(self, path=None):
        """The matplotlib Figure of each server's time-average queue length Q_n (jobs), with the 95%
        t interval over the replications (none with one); written to ``path`` when given.

        Parameters
        ----------
        path
            A file to write the figure to (its format by the extension); None: none written.

        Returns
        -------
        matplotlib.figure.Figure
            The figure.
        """
        from hetlb.plots.figures import plot_intervals

        queues = np.array([run.mean_queue_length for run in self.runs], dtype=float)
        rows = [(f"server {n}", *interval_row(queues[:, n])) for n in range(queues.shape[1])]
        label, value, _ = self.headline()
        title = f"{self.describe()}: {label} {value:.4g}"
        return plot_intervals([{"title": title, "ylabel": "mean queue length Q_n (jobs)", "rows": rows}], path)

    mean_number_in_system = mean_property("mean_number_in_system", "time-average sum_n Q_n")
    mean_number_in_system_ci = interval_property("mean_number_in_system")
    number_in_system_growth = mean_property(
        "number_in_system_growth", "second half's time-average sum_n Q_n over the first half's, minus 1"
    )
    number_in_system_growth_ci = interval_property("number_in_system_growth")
    mean_delay = mean_property("mean_delay", "mean delay in slots (Little's law)")
    mean_delay_ci = interval_property("mean_delay")
    mean_estimate_error = mean_property("mean_estimate_error", "time-average |Q_n - Q~^m_n| (LED policies)")
    mean_estimate_error_ci = interval_property("mean_estimate_error")
    messages_per_arrival = mean_property("messages_per_arrival", "probes + replies + reports + tokens per arrival")
    messages_per_arrival_ci = interval_property("messages_per_arrival")
    messages_per_decision = mean_property("messages_per_decision", "messages per dispatching decision")
    messages_per_decision_ci = interval_property("messages_per_decision")

    @property
    def mean_queue_length(self) -> np.ndarray:
        """Per server, time-average Q_n, averaged over the replications."""
        return np.mean([run.mean_queue_length for run in self.runs], axis=0)

    @property
    def messages(self) -> dict:
        """Message counts summed over the replications."""
        return {kind: int(sum(run.messages[kind] for run in self.runs)) for kind in self.runs[0].messages}

    @property
    def preference(self) -> dict | None:
        """The measured dispatching preference (hetlb.stats.preference_report), pooled over the
        dispatchers; with several replications its intervals are over the replications."""
        if self.runs[0].preference is None:
            return None
        if len(self.runs) == 1:
            return self.runs[0].preference
        deltas = np.array([run.preference["delta"] for run in self.runs])
        return {
            **preference_report(deltas.mean(axis=0), deltas),
            **{
                key: np.mean([run.preference[key] for run in self.runs], axis=0).tolist()
                for key in ("selection", "share")
            },
        }

    @property
    def slots_per_second(self) -> float:
        """Simulated slots per second of wall-clock time, over all replications."""
        return sum(run.slots_run for run in self.runs) / self.wall_seconds if self.wall_seconds > 0 else math.inf

    @property
    def preference_tilted(self) -> bool | None:
        """Whether the measured preference is tilted toward faster servers (None when not measured)."""
        return None if self.preference is None else self.preference["tilted"]

    @property
    def preference_delta_tilted(self) -> bool | None:
        """Whether the measured preference is delta-tilted (None when not measured)."""
        return None if self.preference is None else self.preference["delta_tilted"]

    @property
    def preference_delta_min(self) -> float | None:
        """The delta of the measured preference (None when not measured)."""
        return None if self.preference is None else self.preference["delta_min"]

    @property
    def summary(self) -> dict:
        """The flat dictionary of headline figures; each key is also an attribute of the result."""
        out = self.figures(SLOTTED_METRICS)
        out["messages"] = self.messages
        preference = self.preference
        if preference is not None:
            out.update({f"preference_{key}": preference[key] for key in ("tilted", "delta_tilted", "delta_min")})
        out.update(
            replications=self.replications,
            wall_seconds=self.wall_seconds,
            slots_per_second=self.slots_per_second,
            events_per_second=self.events_per_second,
        )
        return out

    def headline(self) -> tuple:
        return "mean delay (slots)", self.mean_delay, self.mean_delay_ci

    @property
    def n_servers(self) -> int:
        """The number of servers N."""
        return len(self.runs[0].mean_queue_length)

    def details(self) -> dict:
        return {"preference": self.preference}


def interval_row(samples) -> tuple:
    """(mean, low, high) of ``samples``: the 95% t interval (nan bounds with one sample)."""
    low, high = interval(samples)
    return float(np.mean(samples)), low, high
