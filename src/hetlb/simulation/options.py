"""How a simulation runs: one checked :class:`RunOptions` (continuous time) or
:class:`SlottedRunOptions` (the slotted model), built once.

``hetlb.simulate`` and ``hetlb.simulate_slotted`` build it from their keywords (or take one), a
scenario from its [run] table (and, in continuous time, the dispatcher keys of [system] and
[policy]; hetlb.scenario), and the command line through the scenario; every entry point
(hetlb.simulation.continuous, hetlb.simulation.dispatchers, hetlb.simulation.slotted) then reads
the same object and checks nothing of it again. What depends on the system (the expected cost of
a run, its memory, each job type's share of the dispatchers' arrivals) is checked where the system
is known.

>>> from hetlb.simulation.options import RunOptions
>>> options = RunOptions(jobs=5000, warmup=10.0, seed=2)
>>> options.end_time, options.many_dispatchers
(inf, False)
>>> RunOptions.from_mapping({"jobs": 0}, {"jobs": "run.jobs"})
Traceback (most recent call last):
...
hetlb.errors.InputError: run.jobs: must be an integer >= 1, got 0
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from hetlb import validation
from hetlb.errors import InputError
from hetlb.model.dispatchers import Updates
from hetlb.simulation.replications import root_seed_sequence, stopping_rule


class Options:
    """What the run options of both models share: made from a mapping, the root seed, a checked
    copy, and how a check stores a value in the frozen object."""

    seed: int | np.random.SeedSequence

    @classmethod
    def from_mapping(cls, values: Mapping, fields: Mapping[str, str] | None = None):
        """The options of ``values`` (:func:`options_from_mapping`)."""
        return options_from_mapping(cls, values, fields)

    def replace(self, **changes):
        """A copy with ``changes`` (checked as the constructor checks them)."""
        return dataclasses.replace(self, **changes)

    @property
    def root_seed(self) -> np.random.SeedSequence:
        """The SeedSequence the replications spawn from (hetlb.simulation.replications)."""
        return root_seed_sequence(self.seed)

    def settle(self, name: str, value) -> None:
        """Store a checked ``value`` of field ``name`` (the dataclass is frozen)."""
        object.__setattr__(self, name, value)


@dataclass(frozen=True)
class RunOptions(Options):
    """The run options of hetlb.simulate, checked when the object is made.

    Parameters
    ----------
    jobs
        Measure the jobs arriving after the warm-up until this many have been admitted (DEFAULT_JOBS
        of hetlb.simulation.replications when ``horizon`` is not given; None with a horizon).
    horizon
        Measure instead the jobs arriving up to this simulated time (time units).
    warmup
        Simulated time discarded before statistics start (time units).
    replications
        Independent runs.
    seed
        An integer >= 0 or a SeedSequence (``root_seed``); replication r draws from
        ``SeedSequence(seed, spawn_key=(r,))``.
    batches
        Batches for the batch-means intervals of each run.
    occupancy_levels
        How many levels i of s_{m,i} (000) to record.
    state_distribution
        Record the time-distribution of jobs and of waiting jobs (X_{+1}, X_{+2} of 002).
    speed_bins
        Report eta and xi_2 of 002 in this many equal-width speed bins.
    trace
        Keep the first ``trace`` routing decisions.
    progress
        Draw a progress bar on standard error (no effect on results).
    dispatchers
        M, the number of dispatchers deciding on their own estimates (hetlb.simulation.dispatchers);
        None: one dispatcher that knows every queue.
    update
        The update signals of the M dispatchers (a text, a table or hetlb.model.dispatchers.Updates;
        kept parsed).
    dispatcher_share
        The arrivals' split among the dispatchers (None: equal; checked against the system's job
        types when the run starts).
    herd_window
        The herd window (time units; None: its default for the system).
    """

    jobs: int | None = None
    horizon: float | None = None
    warmup: float = 0.0
    replications: int = 1
    seed: int | np.random.SeedSequence = 0
    batches: int = 20
    occupancy_levels: int = 10
    state_distribution: bool = False
    speed_bins: int | None = None
    trace: int = 0
    progress: bool = False
    dispatchers: int | None = None
    update: Updates | None = None
    dispatcher_share: Any = None
    herd_window: float | None = None

    def __post_init__(self) -> None:
        jobs, horizon, warmup = stopping_rule(self.jobs, self.horizon, self.warmup)
        settle = self.settle
        settle("jobs", jobs)
        settle("horizon", None if math.isinf(horizon) else horizon)
        settle("warmup", warmup)
        settle("replications", validation.count("replications", self.replications))
        settle("batches", validation.count("batches", self.batches, low=2))
        settle("occupancy_levels", validation.count("occupancy_levels", self.occupancy_levels))
        settle("trace", validation.count("trace", self.trace, low=0))
        settle("state_distribution", validation.flag("state_distribution", self.state_distribution))
        root_seed_sequence(self.seed)
        if self.speed_bins is not None:
            settle("speed_bins", validation.count("speed_bins", self.speed_bins))
        if jobs is not None and jobs < self.batches:
            raise InputError("jobs", f"must be at least the number of batches ({self.batches})")
        settle("progress", bool(self.progress))
        if self.dispatchers is not None:
            settle("dispatchers", validation.count("dispatchers", self.dispatchers))
        if self.update is not None and not isinstance(self.update, Updates):
            settle("update", Updates.parse(self.update))
        if self.herd_window is not None:
            settle("herd_window", validation.of_kind("herd_window", validation.POSITIVE_TIME, self.herd_window))

    def replace(self, **changes) -> RunOptions:
        """A copy with ``changes`` (checked as the constructor checks them); a new ``jobs`` drops
        the horizon, a new ``horizon`` the jobs.

        Parameters
        ----------
        **changes
            New values of the options, by name.
        """
        if "jobs" in changes and "horizon" not in changes:
            changes["horizon"] = None
        elif "horizon" in changes and "jobs" not in changes:
            changes["jobs"] = None
        return dataclasses.replace(self, **changes)

    @property
    def end_time(self) -> float:
        """The end of the measurement window: the horizon, or +inf when measuring ``jobs``."""
        return math.inf if self.horizon is None else self.horizon

    @property
    def many_dispatchers(self) -> bool:
        """Whether the run has M dispatchers on their own estimates (any dispatcher option given)."""
        return any(
            value is not None for value in (self.dispatchers, self.update, self.dispatcher_share, self.herd_window)
        )

    def stopping(self) -> dict:
        """The stopping rule as result metadata."""
        return {"jobs": self.jobs, "horizon": self.horizon, "warmup": self.warmup}


@dataclass(frozen=True)
class SlottedRunOptions(Options):
    """The run options of hetlb.simulate_slotted (the slotted model of 001), checked when the
    object is made.

    Parameters
    ----------
    slots
        Measured slots, after the warm-up.
    warmup
        Slots discarded before statistics start.
    replications
        Independent runs.
    seed
        An integer >= 0 or a SeedSequence (``root_seed``), as in RunOptions.
    batches
        Batches of slots for the batch-means intervals.
    preference
        Measure the dispatching preference Delta_r (a sort per decision).
    trace
        Keep the first ``trace`` decisions.
    progress
        Draw a progress bar on standard error (no effect on results).
    """

    slots: int = 100_000
    warmup: int = 0
    replications: int = 1
    seed: int | np.random.SeedSequence = 0
    batches: int = 20
    preference: bool = False
    trace: int = 0
    progress: bool = False

    def __post_init__(self) -> None:
        settle = self.settle
        settle("slots", validation.count("slots", self.slots))
        settle("warmup", validation.count("warmup", self.warmup, low=0))
        settle("replications", validation.count("replications", self.replications))
        settle("batches", validation.count("batches", self.batches, low=2))
        settle("trace", validation.count("trace", self.trace, low=0))
        if self.slots < self.batches:
            raise InputError("slots", f"must be at least the number of batches ({self.batches})")
        settle("preference", validation.flag("preference", self.preference))
        root_seed_sequence(self.seed)
        settle("progress", bool(self.progress))

    def stopping(self) -> dict:
        """The stopping rule as result metadata."""
        return {"slots": self.slots, "warmup": self.warmup}


def options_from_mapping(cls, values: Mapping, fields: Mapping[str, str] | None = None):
    """The ``cls`` options of ``values`` (keys as the keywords; a None value is the default).
    ``fields`` names where each key came from, for the errors (a scenario's ``jobs`` is
    ``run.jobs``)."""
    names = {option.name for option in dataclasses.fields(cls)}
    given = {name: value for name, value in values.items() if value is not None}
    fields = fields or {}
    unknown = sorted(set(given) - names)
    if unknown:
        name = validation.shorten(str(unknown[0]))
        raise InputError(fields.get(name, name), f"unknown run option; allowed: {', '.join(sorted(names))}")
    try:
        return cls(**given)
    except InputError as error:
        head, dot, rest = error.field.partition(".")
        if head not in fields:
            raise
        raise InputError(fields[head] + dot + rest, error.rule) from None


def options_of(cls, options, keywords: dict):
    """The ``cls`` options an entry point runs with: ``options`` as given, or made of its
    ``keywords`` (each a field of ``cls``); both together are refused unless every keyword is at
    its default."""
    if options is None:
        return cls(**keywords)
    if not isinstance(options, cls):
        raise InputError("options", f"must be a hetlb.{cls.__name__}, got {type(options).__name__}")
    defaults = {option.name: option.default for option in dataclasses.fields(cls)}
    for name, value in keywords.items():
        default = defaults[name]
        if value is not None if default is None else bool(value != default):
            raise InputError("options", f"give the run options as a {cls.__name__} or as keywords, not both")
    return options
