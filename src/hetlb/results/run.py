"""Results: one replication (:class:`RunResult`) and a set of replications (:class:`SimulationResult`).

Times are in the model's time unit (a job of size 1 at speed 1 takes one unit); confidence
intervals are 95% Student-t intervals, over batch means within one run and over replications
when there are several.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from hetlb.kernels.continuous import HISTOGRAM_BINS_PER_OCTAVE, HISTOGRAM_MIN_EXPONENT
from hetlb.results.base import ReplicationResult, Result, replications_text, with_intervals
from hetlb.stats import interval
from hetlb.stats.halfin_whitt import scaled_measures

PERCENTILES = (50, 95, 99)
PERCENTILE_NAMES = tuple(f"response_time_p{p}" for p in PERCENTILES)
"""The response-time percentiles a result gives, as attributes and as keys of its JSON."""
HEADLINE = ("mean_response_time", "mean_waiting_time", "p_wait", "blocking_probability", "mean_number_in_system")
"""Figures of a SimulationResult given with their 95% interval (``name + "_ci"``), as are the
percentiles when there are several replications."""
TTFT_PERCENTILES = (50, 90, 99)
CACHE_FIGURES = (
    "mean_ttft",
    *(f"ttft_p{p}" for p in TTFT_PERCENTILES),
    "cache_hit_ratio",
    "mean_prefill_saved",
)
"""The figures of a run with prefix caches (docs/background/prefix-caches.md), in its summary after
the response time's, each with its interval where there is one; absent without caches."""


def mean_over_runs(runs, name: str):
    """Mean of a figure over replications and its interval: over the replications when there are
    several, else the run's own batch-means interval (its ``name + "_ci"``)."""
    values = np.array([getattr(run, name) for run in runs], dtype=float)
    if len(runs) == 1:
        return float(values[0]), getattr(runs[0], name + "_ci", None)
    return float(values.mean()), interval(values)


def mean_property(name: str, doc: str) -> property:
    """An attribute: ``name`` of the runs, averaged over the replications."""
    return property(lambda self: mean_over_runs(self.runs, name)[0], doc=doc)


def cache_property(name: str, doc: str) -> property:
    """An attribute of runs with prefix caches: ``name`` of the runs averaged over the replications,
    or None without caches."""
    return property(lambda self: mean_over_runs(self.runs, name)[0] if self.has_caches else None, doc=doc)


def cache_interval_property(name: str) -> property:
    """The 95% interval of a figure of the caches (:func:`interval_property`), or None without them."""
    return property(
        lambda self: mean_over_runs(self.runs, name)[1] if self.has_caches else None,
        doc=f"95% interval of {name} (runs with caches): over the replications, or the batch means of a single "
        "run (None if the run keeps none)",
    )


def interval_property(name: str) -> property:
    """An attribute: the 95% interval of ``name`` (mean_over_runs), or None when not measured."""
    return property(
        lambda self: mean_over_runs(self.runs, name)[1],
        doc=f"95% interval of {name}: over the replications, or the batch means of a single run (None if "
        "the run keeps none)",
    )


@dataclass(repr=False)
class RunResult(ReplicationResult):
    """Statistics of one replication. Response times are those of the jobs that arrived in the
    measurement window [warmup, warmup + measured_time], each followed to its departure (the run
    ends at ``end_time``, when the last of them has left); time averages cover the window.

    Parameters
    ----------
    seed_entropy
        The root seed's entropy.
    seed_key
        The replication's spawn key (its index r).
    mean_response_time
        E[T], the mean response time of the measured jobs (time units).
    mean_response_time_ci
        Its 95% interval [low, high] (batch means of this run).
    response_time_std
        The standard deviation of their response times (time units).
    mean_waiting_time
        The mean time before service (time units).
    mean_waiting_time_ci
        Its 95% interval [low, high] (batch means of this run).
    p_wait
        The fraction of admitted jobs that wait.
    blocking_probability
        The fraction of arrivals lost at a full buffer.
    blocking_probability_ci
        Its 95% interval [low, high] (batch means of this run).
    mean_number_in_system
        L, the time-average jobs in the system.
    mean_number_in_system_ci
        Its 95% interval [low, high] (batch means of this run).
    number_in_system_growth
        The mean number in system over the second half of the batches over that over the first half,
        minus 1 (about 0 when stable).
    utilisation
        Per server, the fraction of time busy.
    mean_queue_length
        Per server, the time-average jobs, those in service included.
    peak_queue_length
        Per server, the most jobs it ever held (whole run).
    class_speed
        mu_m of each speed class, decreasing.
    class_count
        N_m, the servers of each class.
    occupancy
        s_{m,i} of 000: [m, i-1] is the time-average fraction of all N servers that are of class m
        with >= i jobs.
    class_jobs
        C_m of 000: the time-average jobs at class-m servers over N.
    histogram
        Response-time counts (response_time_quantile reads them).
    measured_time
        The length of the measurement window (time units).
    end_time
        When the last measured job left (time units).
    arrivals
        Jobs that arrived in the window.
    completed_jobs
        Measured jobs that completed.
    counters
        Whole-run counts from time 0: arrivals, admitted, blocked, departed, in_system.
    events
        Simulated events.
    wall_seconds
        The run's wall-clock time (seconds).
    batch_response_means
        The mean response time of each batch (time units).
    trace
        The first routing decisions, when asked for.
    jobs_distribution
        The time fraction with j jobs in the system (state_distribution).
    waiting_distribution
        The time fraction with j waiting jobs (state_distribution).
    speed_profile
        eta and xi_2 of 002 by speed bin (speed_bins).
    mean_in_service
        Per server, the time-average jobs in service E[b] (servers of several slots).
    slot_utilisation
        Per server, E[b] / c_s (nan for unlimited c; servers of several slots).
    mean_ttft
        The mean time to first token of the measured jobs, from arrival to the end of the prefill
        (time units; runs with prefix caches, as are the fields below).
    mean_ttft_ci
        Its 95% interval [low, high] (batch means of this run).
    ttft_std
        The standard deviation of their times to first token.
    ttft_histogram
        Time-to-first-token counts in the bins of ``histogram`` (ttft_p50, ttft_p90, ttft_p99).
    cache_hit_ratio
        Blocks hit over blocks requested by the measured jobs (the share of prefill saved).
    blocks_hit
        Blocks the measured jobs hit at the start of their service.
    blocks_requested
        Blocks of their prompts.
    mean_prefill_saved
        The prefill work a measured job saves, W times its blocks hit, on average.
    server_blocks_hit
        Per server, the blocks hit by the measured jobs it served.
    server_blocks_requested
        Per server, the blocks of their prompts.
    rank_jobs
        Shared prompts: per prefix of popularity rank k = 1, 2, ... (the first 64), its measured
        jobs.
    rank_blocks_hit
        Their blocks hit.
    rank_blocks_requested
        The blocks of their prompts.
    """

    seed_entropy: int | list[int]
    seed_key: tuple
    mean_response_time: float
    mean_response_time_ci: list
    response_time_std: float  # standard deviation of the response times of counted jobs
    mean_waiting_time: float
    mean_waiting_time_ci: list
    p_wait: float
    blocking_probability: float
    blocking_probability_ci: list
    mean_number_in_system: float
    mean_number_in_system_ci: list
    number_in_system_growth: float  # mean number in system over the second half of the batches / first half - 1
    utilisation: np.ndarray  # per server, fraction of time busy
    mean_queue_length: np.ndarray  # per server, time-average jobs (incl. in service)
    peak_queue_length: np.ndarray  # per server, most jobs ever held (whole run)
    class_speed: np.ndarray  # mu_m, decreasing
    class_count: np.ndarray  # N_m
    occupancy: np.ndarray  # s_{m,i} of 000: [m, i-1] = time-average fraction of all N servers of class m with >= i jobs
    class_jobs: np.ndarray  # C_m of 000: time-average jobs at class-m servers / N
    histogram: np.ndarray  # response-time counts (see response_time_quantile)
    measured_time: float
    end_time: float
    arrivals: int
    completed_jobs: int
    counters: dict  # whole-run counts from time 0: arrivals, admitted, blocked, departed, in_system
    events: int
    wall_seconds: float
    batch_response_means: list = field(default_factory=list)  # mean response time of each batch
    trace: dict | None = None  # the first routing decisions, when asked for
    jobs_distribution: np.ndarray | None = None  # time fraction with j jobs in system (state_distribution)
    waiting_distribution: np.ndarray | None = None  # time fraction with j waiting jobs (state_distribution)
    speed_profile: dict | None = None  # eta and xi_2 of 002 by speed bin (speed_bins)
    mean_in_service: np.ndarray | None = None  # per server, time-average jobs in service E[b] (multi-slot servers)
    slot_utilisation: np.ndarray | None = None  # per server, E[b] / c_s (nan for unlimited c; multi-slot servers)
    mean_ttft: float | None = None  # time to first token (runs with prefix caches, as are the fields below)
    mean_ttft_ci: list | None = None
    ttft_std: float | None = None
    ttft_histogram: np.ndarray | None = None
    cache_hit_ratio: float | None = None  # blocks hit / blocks requested by the measured jobs
    blocks_hit: int | None = None
    blocks_requested: int | None = None
    mean_prefill_saved: float | None = None  # W x blocks hit, per measured job
    server_blocks_hit: np.ndarray | None = None
    server_blocks_requested: np.ndarray | None = None
    rank_jobs: np.ndarray | None = None  # shared prompts, per popularity rank (the first 64)
    rank_blocks_hit: np.ndarray | None = None
    rank_blocks_requested: np.ndarray | None = None

    @property
    def has_caches(self) -> bool:
        """Whether the run carried prefix caches (and has their figures)."""
        return self.mean_ttft is not None

    def ttft_quantile(self, q: float) -> float | None:
        """The q-quantile of the time to first token (from its histogram, relative error < 0.4%);
        None without caches.

        Parameters
        ----------
        q
            The probability, in [0, 1].
        """
        return None if self.ttft_histogram is None else response_time_quantile(self.ttft_histogram, q)

    @property
    def ttft_p50(self) -> float | None:
        """Median time to first token (None without caches)."""
        return self.ttft_quantile(0.50)

    @property
    def ttft_p90(self) -> float | None:
        """90th percentile of the time to first token (None without caches)."""
        return self.ttft_quantile(0.90)

    @property
    def ttft_p99(self) -> float | None:
        """99th percentile of the time to first token (None without caches)."""
        return self.ttft_quantile(0.99)

    @property
    def server_cache_hit_ratio(self) -> np.ndarray | None:
        """Per server, blocks hit over blocks requested by the measured jobs it served (nan where
        none was requested; None without caches)."""
        if self.server_blocks_hit is None or self.server_blocks_requested is None:
            return None
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.server_blocks_hit / self.server_blocks_requested

    def cache_details(self) -> dict:
        """The caches' figures beyond the summary: blocks hit and requested in all, per server and,
        for shared prompts, per popularity rank."""
        out: dict = {"blocks_hit": self.blocks_hit, "blocks_requested": self.blocks_requested}
        out["ttft_std"] = self.ttft_std
        out["server_blocks_hit"] = self.server_blocks_hit
        out["server_blocks_requested"] = self.server_blocks_requested
        if self.rank_jobs is not None:
            out["rank_jobs"] = self.rank_jobs
            out["rank_blocks_hit"] = self.rank_blocks_hit
            out["rank_blocks_requested"] = self.rank_blocks_requested
        return out

    @property
    def events_per_second(self) -> float:
        """Simulated events per second of wall-clock time (infinite for a run too short to time)."""
        return self.events / self.wall_seconds if self.wall_seconds > 0 else math.inf

    @property
    def summary(self) -> dict:
        """The run's headline figures (the first entries of ``to_dict`` after its seed); each key is
        also an attribute."""
        out = self.figures(HEADLINE + PERCENTILE_NAMES + (CACHE_FIGURES if self.has_caches else ()))
        for name in ("littles_law_gap", "number_in_system_growth", "completed_jobs", "events", "wall_seconds"):
            out[name] = getattr(self, name)
        out["events_per_second"] = self.events_per_second
        return out

    def headline(self) -> tuple:
        return "mean response time", self.mean_response_time, self.mean_response_time_ci

    def extent(self) -> str:
        return f"{self.completed_jobs} jobs"

    @property
    def response_time_p50(self) -> float:
        """Median response time (from the histogram, relative error < 0.4%)."""
        return response_time_quantile(self.histogram, 0.50)

    @property
    def response_time_p95(self) -> float:
        """95th percentile of the response time (from the histogram, relative error < 0.4%)."""
        return response_time_quantile(self.histogram, 0.95)

    @property
    def response_time_p99(self) -> float:
        """99th percentile of the response time (from the histogram, relative error < 0.4%)."""
        return response_time_quantile(self.histogram, 0.99)

    @property
    def littles_law_gap(self) -> float:
        """(L - lambda_admitted W) / L: zero up to edge effects of the finite run (nan when no job
        was measured or the system stayed empty)."""
        if not (self.completed_jobs and self.measured_time > 0 and self.mean_number_in_system > 0):
            return math.nan
        admitted_rate = (self.arrivals * (1.0 - self.blocking_probability)) / self.measured_time
        little = admitted_rate * self.mean_response_time
        return (self.mean_number_in_system - little) / self.mean_number_in_system

    def to_dict(self, per_server: bool = True) -> dict:
        """Parameters
        ----------
        per_server
            Include the per-server arrays.
        """
        out = {
            "seed": {"entropy": self.seed_entropy, "spawn_key": list(self.seed_key)},
            "mean_response_time": self.mean_response_time,
            "mean_response_time_ci": self.mean_response_time_ci,
            "response_time_std": self.response_time_std,
            "mean_waiting_time": self.mean_waiting_time,
            "mean_waiting_time_ci": self.mean_waiting_time_ci,
            "p_wait": self.p_wait,
            "blocking_probability": self.blocking_probability,
            "blocking_probability_ci": self.blocking_probability_ci,
            "mean_number_in_system": self.mean_number_in_system,
            "mean_number_in_system_ci": self.mean_number_in_system_ci,
            "number_in_system_growth": self.number_in_system_growth,
            **{name: getattr(self, name) for name in PERCENTILE_NAMES},
            **(self.figures(CACHE_FIGURES) if self.has_caches else {}),
            "littles_law_gap": self.littles_law_gap,
            "occupancy_by_class": occupancy_table(self.class_speed, self.class_count, self.occupancy, self.class_jobs),
            "measured_time": self.measured_time,
            "end_time": self.end_time,
            "completed_jobs": self.completed_jobs,
            "batch_response_means": self.batch_response_means,
            "counters": self.counters,
            "events": self.events,
            "wall_seconds": self.wall_seconds,
            "events_per_second": self.events_per_second,
        }
        out["halfin_whitt"] = scaled_measures(self, len(self.utilisation))
        if self.has_caches:
            details = self.cache_details()
            if not per_server:
                details = {name: value for name, value in details.items() if not name.startswith("server_")}
            out["caches"] = {
                name: value.tolist() if isinstance(value, np.ndarray) else value for name, value in details.items()
            }
        if self.speed_profile is not None:
            out["speed_profile"] = self.speed_profile
        if per_server:
            out["utilisation"] = self.utilisation.tolist()
            out["mean_queue_length"] = self.mean_queue_length.tolist()
            for name in ("mean_in_service", "slot_utilisation"):
                if getattr(self, name) is not None:
                    out[name] = getattr(self, name).tolist()
            for name in ("jobs_distribution", "waiting_distribution"):
                if getattr(self, name) is not None:
                    out[name] = np.trim_zeros(getattr(self, name), "b").tolist()
        return out


@dataclass(repr=False)
class ReplicatedResult(Result):
    """What the replicated results of every model share (a :class:`~hetlb.results.base.Result`): the
    replications (``runs``), the metadata, and their JSON form, ``summary`` then ``details()`` then
    the metadata and each replication.

    Every key of ``summary`` is also an attribute of the same name and value
    (``result.summary["p_wait_ci"] == result.p_wait_ci``); ``to_frame()`` gives the one-row table of
    a sweep's point."""

    runs: list
    metadata: dict = field(default_factory=dict)

    @property
    def replications(self) -> int:
        return len(self.runs)

    @property
    def events(self) -> int:
        return int(sum(run.events for run in self.runs))

    @property
    def wall_seconds(self) -> float:
        return float(sum(run.wall_seconds for run in self.runs))

    @property
    def events_per_second(self) -> float:
        return self.events / self.wall_seconds if self.wall_seconds > 0 else math.inf

    @property
    def n_servers(self) -> int:
        raise NotImplementedError

    def figures(self, names) -> dict:
        """Each of ``names`` averaged over the replications, with its interval where there is one
        (:func:`mean_over_runs`)."""
        return with_intervals(names, lambda name: mean_over_runs(self.runs, name))

    def details(self) -> dict:
        """Entries of ``to_dict`` between the summary and the metadata."""
        return {}

    def to_dict(self, per_server: bool | None = None) -> dict:
        """Everything, JSON-ready: the summary, the details, the metadata and each replication
        (per-server arrays by default only up to 1000 servers)."""
        per_server = self.n_servers <= 1000 if per_server is None else per_server
        return {
            **self.summary,
            **self.details(),
            "metadata": self.metadata,
            "runs": [run.to_dict(per_server=per_server) for run in self.runs],
        }

    def to_frame(self):
        """A one-row pandas DataFrame with the columns of a sweep's summary table for one point
        (``policy.id``, ``system.load``, ..., ``replications``, each figure with its
        ``_ci_low`` / ``_ci_high``), computed the way a sweep computes them."""
        from hetlb.results.table import result_frame

        return result_frame(self)

    def describe(self) -> str:
        """The policy, the servers, the dispatchers (when the metadata name them) and the load."""
        system = self.metadata.get("system", {})
        policy = self.metadata.get("policy", {})
        parts = [str(policy.get("id", "?")), f"{self.n_servers} servers"]
        if "dispatchers" in system:
            parts.append(f"{system['dispatchers']} dispatcher{'s' if system['dispatchers'] != 1 else ''}")
        if "load" in system:
            parts.append(f"load {system['load']:.4g}")
        return ", ".join(parts)

    def extent(self) -> str:
        return replications_text(self.replications)


@dataclass(repr=False)
class SimulationResult(ReplicatedResult):
    """Replications of one scenario under one policy, with their aggregate and metadata.

    Every figure is the mean of the replications' figures (the response-time percentiles too, as
    in a sweep's table; ``histogram`` pools the replications' histograms). With one replication
    the intervals are batch-means intervals of that run; with several they are Student-t
    intervals over the replications. An interval a single run does not measure (``p_wait_ci``,
    ``response_time_p99_ci``) is None.

    Parameters
    ----------
    runs
        The replications' results (RunResult), in order.
    metadata
        The system, policy, seed, stopping rule and versions.
    """

    @property
    def n_servers(self) -> int:
        """The number of servers N."""
        return len(self.runs[0].utilisation)

    def extent(self) -> str:
        """The replications, and how many warnings the result has (so that a notebook shows them)."""
        count = len(self.warnings)
        return replications_text(self.replications) + (
            f"; {count} warning{'s' * (count > 1)}: see .warnings" if count else ""
        )

    mean_response_time = mean_property("mean_response_time", "mean response time (time units)")
    mean_response_time_ci = interval_property("mean_response_time")
    mean_waiting_time = mean_property("mean_waiting_time", "mean waiting time before service (time units)")
    mean_waiting_time_ci = interval_property("mean_waiting_time")
    p_wait = mean_property("p_wait", "fraction of admitted jobs that wait")
    p_wait_ci = interval_property("p_wait")
    blocking_probability = mean_property("blocking_probability", "fraction of arrivals lost at a full buffer")
    blocking_probability_ci = interval_property("blocking_probability")
    mean_number_in_system = mean_property("mean_number_in_system", "time-average jobs in the system")
    mean_number_in_system_ci = interval_property("mean_number_in_system")
    littles_law_gap = mean_property("littles_law_gap", "(L - lambda W) / L, zero up to edge effects")
    number_in_system_growth = mean_property(
        "number_in_system_growth", "mean number in system over the second half of the batches / first half - 1"
    )

    @property
    def histogram(self) -> np.ndarray:
        """The response-time counts summed over the replications (hetlb.results.response_time_quantile reads them)."""
        return np.sum([run.histogram for run in self.runs], axis=0)

    @property
    def warnings(self) -> list:
        """Why the figures may not be trusted, each with what to change (empty when nothing is
        seen): no job measured; a Little's-law gap beyond LITTLE_GAP_LIMIT and the confidence
        intervals (or beyond LITTLE_GAP_LIMIT alone with no warm-up, from an empty system: a bias
        however wide the intervals); a mean number in system that grew or shrank between the halves of the window by
        more than GROWTH_LIMIT and GROWTH_SIGMAS times its interval. (The gap of L and lambda W over
        one window is little touched by the noise that widens the intervals, the growth is not: only
        the gap is held to its limit alone.)"""
        return simulation_warnings(self)

    response_time_p50 = mean_property(
        "response_time_p50", "median response time (time units), averaged over the replications"
    )
    response_time_p50_ci = interval_property("response_time_p50")
    response_time_p95 = mean_property(
        "response_time_p95", "95th percentile of the response time, averaged over the replications"
    )
    response_time_p95_ci = interval_property("response_time_p95")
    response_time_p99 = mean_property(
        "response_time_p99", "99th percentile of the response time, averaged over the replications"
    )
    response_time_p99_ci = interval_property("response_time_p99")

    @property
    def has_caches(self) -> bool:
        """Whether the runs carried prefix caches (and have their figures)."""
        return self.runs[0].has_caches

    mean_ttft = cache_property("mean_ttft", "mean time to first token (time units; runs with caches)")
    mean_ttft_ci = cache_interval_property("mean_ttft")
    ttft_p50 = cache_property("ttft_p50", "median time to first token, averaged over the replications")
    ttft_p50_ci = cache_interval_property("ttft_p50")
    ttft_p90 = cache_property("ttft_p90", "90th percentile of the time to first token, averaged over the replications")
    ttft_p90_ci = cache_interval_property("ttft_p90")
    ttft_p99 = cache_property("ttft_p99", "99th percentile of the time to first token, averaged over the replications")
    ttft_p99_ci = cache_interval_property("ttft_p99")
    cache_hit_ratio = cache_property(
        "cache_hit_ratio", "blocks hit over blocks requested, averaged over the replications"
    )
    cache_hit_ratio_ci = cache_interval_property("cache_hit_ratio")
    mean_prefill_saved = cache_property("mean_prefill_saved", "prefill work saved per job (W x blocks hit)")
    mean_prefill_saved_ci = cache_interval_property("mean_prefill_saved")

    @property
    def ttft_histogram(self) -> np.ndarray | None:
        """The time-to-first-token counts summed over the replications (None without caches)."""
        if not self.has_caches:
            return None
        return np.sum([run.ttft_histogram for run in self.runs], axis=0)

    def details(self) -> dict:
        """With caches, their figures pooled over the replications (``caches``): blocks hit and
        requested, the hit ratio per server and, for shared prompts, per popularity rank."""
        if not self.has_caches:
            return {}
        return {"caches": pooled_cache_details(self.runs, self.metadata)}

    @property
    def halfin_whitt(self) -> dict:
        """The scaled measures of 002 (hetlb.stats.halfin_whitt), averaged over the replications."""
        scaled = [scaled_measures(run, len(run.utilisation)) for run in self.runs]
        return {name: float(np.mean([values[name] for values in scaled])) for name in scaled[0]}

    def plot(self, path=None):
        """The matplotlib Figure of the occupancy of 000: per speed class m, the fraction of its
        servers with at least i jobs against i, with the 95% t interval over the replications (no
        band with one); written to ``path`` too when one is given.

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

        first = self.runs[0]
        share = np.sum(first.class_count) / first.class_count[:, None]  # occupancy is of all N servers
        label, value, _ = self.headline()
        return plot_occupancy(
            [f"speed {speed:g} ({count} servers)" for speed, count in zip(first.class_speed, first.class_count)],
            [run.occupancy * share for run in self.runs],
            path,
            title=f"{self.describe()}: {label} {value:.4g}",
            band_label="shaded: 95% interval over the replications",
        )

    @property
    def occupancy_by_class(self) -> list:
        """Per speed class, the occupancy table of 000 (occupancy_table), averaged over the replications."""
        first = self.runs[0]
        occupancy = np.mean([run.occupancy for run in self.runs], axis=0)
        return occupancy_table(
            first.class_speed, first.class_count, occupancy, np.mean([run.class_jobs for run in self.runs], axis=0)
        )

    @property
    def summary(self) -> dict:
        """The flat dictionary of headline figures (the keys of ``hetlb simulate --json``); each key
        is also an attribute of the result."""
        out = self.figures(HEADLINE + PERCENTILE_NAMES + (CACHE_FIGURES if self.has_caches else ()))
        out["littles_law_gap"] = self.littles_law_gap
        out["number_in_system_growth"] = self.number_in_system_growth
        out["warnings"] = self.warnings
        out["halfin_whitt"] = self.halfin_whitt
        out["occupancy_by_class"] = self.occupancy_by_class
        out["replications"] = self.replications
        out["events"] = self.events
        out["events_per_second"] = self.events_per_second
        out["wall_seconds"] = self.wall_seconds
        return out

    def headline(self) -> tuple:
        return "mean response time", self.mean_response_time, self.mean_response_time_ci


LITTLE_GAP_LIMIT = 0.05
"""A Little's-law gap |L - lambda W| / L above 5%, and above the relative half-widths of the
intervals of L and W, says the measurement window is too short against the time the system takes
to reach steady state (from the empty start or the end of the warm-up): the jobs in system at its
ends weigh on the figures more than the intervals say."""
GROWTH_LIMIT = 0.10
GROWTH_SIGMAS = 3.0
"""A mean number in system that differs between the two halves of the window by more than 10% and
more than 3 times the relative half-width of its interval says the system had not settled (the
difference of the halves has a spread about that half-width)."""


def relative_half_width(value, ci) -> float:
    """Half the width of ``ci`` over ``value`` (0 when either is missing or not finite)."""
    if ci is None or not np.all(np.isfinite(ci)) or not math.isfinite(value) or value == 0:
        return 0.0
    return abs(float(ci[1]) - float(ci[0])) / 2.0 / abs(value)


def simulation_warnings(result) -> list:
    """The warnings of a SimulationResult (:attr:`SimulationResult.warnings`)."""
    stopping = result.metadata.get("stopping", {})
    more = "measure more jobs" if stopping.get("jobs") else "lengthen the horizon"
    warm_up = "give a warm-up (--warmup)" if not stopping.get("warmup") else "lengthen the warm-up"
    window = float(np.mean([run.measured_time for run in result.runs]))
    if sum(run.completed_jobs for run in result.runs) == 0:
        return [f"no job was measured in the window ({window:.3g} time units); {more}"]
    warnings = []
    spread_l = relative_half_width(result.mean_number_in_system, result.mean_number_in_system_ci)
    spread = max(spread_l, relative_half_width(result.mean_response_time, result.mean_response_time_ci))
    gap = result.littles_law_gap
    from_empty = not stopping.get("warmup")  # the default: measured from an empty system at time 0
    if from_empty and math.isfinite(gap) and LITTLE_GAP_LIMIT < abs(gap) <= spread:
        warnings.append(
            f"Little's law gap {gap:+.1%} with no warm-up: measured from an empty system, the run is "
            f"biased however wide its intervals ({spread:.1%}); give a warm-up (--warmup, warmup=) "
            f"of a few mean response times or more, or {more}"
        )
    if math.isfinite(gap) and abs(gap) > max(LITTLE_GAP_LIMIT, spread):
        warnings.append(
            f"Little's law gap {gap:+.1%} is beyond the {spread:.1%} of the confidence intervals: the "
            f"measurement window ({window:.3g} time units) is short against the time the system takes to "
            f"reach steady state; {more} or {warm_up}"
        )
    growth = result.number_in_system_growth
    if math.isfinite(growth) and abs(growth) > max(GROWTH_LIMIT, GROWTH_SIGMAS * spread_l):
        warnings.append(
            f"the mean number in system {'grew' if growth > 0 else 'fell'} by {abs(growth):.1%} from the "
            f"first half of the window to the second, beyond {GROWTH_SIGMAS:g} times the {spread_l:.1%} of "
            f"its interval: the system had not settled; {more} or {warm_up}"
        )
    return warnings


def pooled_cache_details(runs, metadata: dict) -> dict:
    """The caches' counts summed over ``runs``: blocks hit and requested, their ratio per server,
    per popularity rank for shared prompts, and the offered load with every prefill a miss."""
    hit = int(sum(run.blocks_hit for run in runs))
    requested = int(sum(run.blocks_requested for run in runs))
    server_hit = np.sum([run.server_blocks_hit for run in runs], axis=0)
    server_requested = np.sum([run.server_blocks_requested for run in runs], axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        out: dict = {
            "blocks_hit": hit,
            "blocks_requested": requested,
            "load_all_misses": metadata.get("load_all_misses"),
        }
        if len(server_hit) <= 1000:  # per-server lists up to 1000 servers, as to_dict's default
            out["server_hit_ratio"] = (server_hit / server_requested).tolist()
        if runs[0].rank_jobs is not None:
            jobs = np.sum([run.rank_jobs for run in runs], axis=0)
            rank_hit = np.sum([run.rank_blocks_hit for run in runs], axis=0)
            rank_requested = np.sum([run.rank_blocks_requested for run in runs], axis=0)
            out["by_rank"] = [
                {"rank": k + 1, "jobs": int(jobs[k]), "hit_ratio": float(rank_hit[k] / rank_requested[k])}
                for k in range(len(jobs))
            ]
    return out


def occupancy_table(class_speed, class_count, occupancy, class_jobs) -> list:
    """Per speed class: mu_m, N_m, busy fraction, s_{m,i} for i = 1.., and C_m (000)."""
    n_servers = int(np.sum(class_count))
    return [
        {
            "speed": float(speed),
            "servers": int(count),
            "utilisation": float(occupancy[m][0] * n_servers / count),
            "s_m": [float(x) for x in occupancy[m]],
            "C_m": float(class_jobs[m]),
        }
        for m, (speed, count) in enumerate(zip(class_speed, class_count))
    ]


def response_time_quantile(histogram: np.ndarray, q: float) -> float:
    """The q-quantile of the response-time histogram, linear within a bin (relative error < 0.4%).

    Parameters
    ----------
    histogram
        Response-time counts, in the bins of the kernels.
    q
        The probability, in [0, 1].
    """
    total = histogram.sum()
    if total == 0:
        return math.nan
    cumulative = np.cumsum(histogram)
    index = int(np.searchsorted(cumulative, q * total, side="left"))
    below = cumulative[index - 1] if index > 0 else 0
    fraction = (q * total - below) / histogram[index]
    octave, sub = divmod(index, HISTOGRAM_BINS_PER_OCTAVE)
    scale = 2.0 ** (octave + HISTOGRAM_MIN_EXPONENT)
    low = (0.5 + sub / (2.0 * HISTOGRAM_BINS_PER_OCTAVE)) * scale
    width = scale / (2.0 * HISTOGRAM_BINS_PER_OCTAVE)
    return float(low + fraction * width)
