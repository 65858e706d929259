"""The bounding systems JSQ-FSL and JSQ-SSL of paper 002 (section 5, Prop 5.1) and a coupled
check of the sandwich Q^FSL_{+i} <= Q^pi_{+i} <= Q^SSL_{+i}.

n servers with speeds mu_k (jobs per time unit) and n buffers of capacity b (1 <= b <= infinity,
jobs counted with the one in service), decoupled: Poisson arrivals of rate n lambda join a
shortest buffer (lost if every buffer is full), and after every event the servers move
preemptively so that faster servers serve longer buffers (FSL) or slower servers serve longer
buffers (SSL). Q_i is the number of buffers holding >= i jobs, Q_{+i} = sum_{j >= i} Q_j, and in
the scaling of 002 X_1 = n^{-1/2} (Q_1 - n), X_i = n^{-1/2} Q_i (i >= 2), X_{+i} = sum_{j >= i} X_j.

>>> import numpy as np
>>> import hetlb
>>> system = hetlb.System.from_speeds(np.linspace(0.7, 1.3, 50), excess_capacity=1.0, buffer=2)
>>> result = hetlb.simulate_bounding_system(system, kind="fsl", horizon=200.0, warmup=20.0, replications=3, seed=1)
>>> result.estimates["X_1"].mean < 0
True

Each function takes a :class:`hetlb.System` (its speeds, total arrival rate and one buffer size);
``simulate_bounding_system_arrays`` and ``check_sandwich_arrays`` are the lower-level forms on
arrays (speeds and the total rate n lambda^n).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from hetlb import validation
from hetlb.constants import INFINITE_BUFFER
from hetlb.errors import InputError
from hetlb.kernels import bounding as kernel
from hetlb.model.system import RATE_RULE, checked_system, speed_classes
from hetlb.policies.registry import POLICIES, policies_where
from hetlb.results.base import versions
from hetlb.results.bounding import MEASURES, BoundingResult, Estimate, TimeWeightedLaw
from hetlb.simulation.replications import (
    check_events,
    check_horizon,
    check_resolution,
    check_warmup,
    root_seed_sequence,
    seed_description,
)
from hetlb.stats import t_interval

__all__ = [
    "BOUNDING_KINDS",
    "MEASURES",
    "TIE_BREAKS",
    "BoundingResult",
    "Estimate",
    "SandwichCheck",
    "TimeWeightedLaw",
    "check_sandwich",
    "check_sandwich_arrays",
    "served_rate",
    "simulate_bounding_system",
    "simulate_bounding_system_arrays",
]

BOUNDING_KINDS = {
    "fsl": "JSQ-FSL: faster servers serve longer buffers (mu_k < mu_k' => buffer(k) <= buffer(k')); "
    "the lower bound of Prop 5.1 (002)",
    "ssl": "JSQ-SSL: slower servers serve longer buffers (mu_k < mu_k' => buffer(k) >= buffer(k')); "
    "the upper bound of Prop 5.1 (002)",
}

TIE_BREAKS = policies_where(tie_break=True)
"""The JSQ tie-breaking rules of the coupled check: the policies with a PolicySpec.tie_break, whose
hetlb.policies.rules.selection_key ranks the servers."""


@dataclass(frozen=True, eq=False)
class SandwichCheck:
    """A coupled run of JSQ-FSL, JSQ-SSL and JSQ under each tie-break in ``tie_breaks``.

    ``lower_violations[p]`` / ``upper_violations[p]``: clock ticks after which
    Q^FSL_{+i} > Q^pi_{+i} / Q^pi_{+i} > Q^SSL_{+i} at some level i (0 when the sandwich holds on the
    whole path), with the time of the first (inf if none). ``mean_jobs`` and ``mean_waiting`` give the
    time averages of Q_{+1} and Q_{+2} over [warmup, horizon] for "fsl", "ssl" and each tie-break.
    """

    tie_breaks: tuple
    buffer: int | None
    ticks: int
    arrivals: int
    lower_violations: np.ndarray
    upper_violations: np.ndarray
    first_lower_violation: np.ndarray
    first_upper_violation: np.ndarray
    mean_jobs: dict
    mean_waiting: dict

    @property
    def holds(self) -> bool:
        """True when the sandwich held at every level after every tick, for every tie-break."""
        return not (self.lower_violations.any() or self.upper_violations.any())


# --- validation ------------------------------------------------------------------------------------


def _buffer(buffer, speed: np.ndarray, arrival_rate: float) -> int:
    """b as the kernel takes it: INFINITE_BUFFER for None or math.inf, which needs a stable load."""
    if buffer is None or (isinstance(buffer, float) and math.isinf(buffer) and buffer > 0):
        if arrival_rate >= speed.sum():
            raise InputError(
                "arrival_rate",
                f"must be below the total speed {speed.sum():.6g} with infinite "
                f"buffers (excess capacity c = varsigma + nu > 0), got {arrival_rate}",
            )
        return INFINITE_BUFFER
    return validation.count("buffer", buffer)


def _rates(speeds, arrival_rate) -> tuple[np.ndarray, float]:
    """The speeds and the arrival rate, each in validation.RATE_RANGE."""
    speed = validation.positive_finite_array("speeds", speeds, validation.RATE_RANGE, RATE_RULE)
    validation.check_memory("speeds", 64 * speed.size, f"{speed.size:,} buffers")
    if not validation.is_real(arrival_rate):
        raise InputError("arrival_rate", f"must be a positive finite rate, got {validation.shown(arrival_rate)}")
    rate = validation.positive_finite_array("arrival_rate", arrival_rate, validation.RATE_RANGE, RATE_RULE)[0]
    return speed, float(rate)


def _check_run(speed: np.ndarray, arrival_rate: float, horizon: float, runs: int, work_per_event: int = 1) -> None:
    """Refuse ``runs`` runs to ``horizon`` whose events (arrivals and services, at most
    arrival_rate + sum(speeds) per time unit, times ``work_per_event``) pass MAX_EVENTS, or whose
    times lose float64's resolution."""
    rate = arrival_rate + float(speed.sum())
    check_events("horizon", rate * horizon * runs * work_per_event, runs)
    check_resolution("horizon", horizon, 1.0 / max(arrival_rate, float(speed.max())), "shorten the horizon")


def served_rate(speeds, kind: str) -> np.ndarray:
    """Prefix sums of the speeds in the order they serve buffers, longest buffer first:
    ``served_rate[r]`` is the total speed serving the r longest buffers (ascending speeds for SSL,
    descending for FSL), so the buffers holding >= i jobs are served at rate served_rate[Q_i]."""
    if kind not in BOUNDING_KINDS:
        raise InputError("kind", f"unknown bounding system {kind!r}; choose one of: {', '.join(BOUNDING_KINDS)}")
    ordered = np.sort(validation.positive_finite_array("speeds", speeds))
    if kind == "fsl":
        ordered = ordered[::-1]
    return np.concatenate([[0.0], np.cumsum(ordered)])


# --- JSQ-FSL and JSQ-SSL alone ---------------------------------------------------------------------


def bounding_arrays(system) -> tuple[np.ndarray, float, int | None]:
    """The speeds mu_k, the total arrival rate n lambda^n and the buffer b (None: infinite) of
    ``system``, refusing in one line what the bounding systems do not have (002: the complete
    graph, one buffer size, Poisson arrivals, exponential sizes, servers of one slot)."""
    checked_system("system", system)
    model = "the bounding systems"
    system.check_supported(model, job_sizes=("exponential",))
    if not system.graph.is_complete():
        raise InputError("graph", f"{model} are for the complete graph")
    if not system.has_single_slots:
        raise InputError("concurrency", f"{model} are for servers that serve one job at a time")
    buffers = np.unique(system.buffer)
    if buffers.size > 1:
        raise InputError("buffer", f"{model} take one buffer size for all servers")
    return system.speed, system.total_arrival_rate, None if system.has_infinite_buffers else int(buffers[0])


def simulate_bounding_system(
    system, kind: str = "fsl", *, horizon: float = 3000.0, warmup: float = 300.0, replications: int = 10, seed=0
) -> BoundingResult:
    """Simulate JSQ-FSL (``kind="fsl"``) or JSQ-SSL (``"ssl"``) of ``system`` from empty buffers;
    the rest as :func:`simulate_bounding_system_arrays`.

    Parameters
    ----------
    system
        A hetlb.System: its speeds mu_k (jobs per time unit), total arrival rate n lambda^n and
        buffer b (one for all servers); the complete graph, one job at a time per server.
    kind
        "fsl" (faster servers serve longer buffers) or "ssl" (slower servers serve longer buffers).
    horizon
        The end of each path (time units); averages are exact time integrals over [warmup, horizon].
    warmup
        The start of the time averages (time units).
    replications
        Independent paths; replication r draws from SeedSequence(seed, spawn_key=(r,)).
    seed
        An integer >= 0 or a SeedSequence.

    Returns
    -------
    BoundingResult
        The time averages of Q_{+1} and Q_{+2} with their intervals.
    """
    speeds, rate, buffer = bounding_arrays(system)
    return simulate_bounding_system_arrays(
        speeds, rate, kind, buffer, horizon=horizon, warmup=warmup, replications=replications, seed=seed
    )


def simulate_bounding_system_arrays(
    speeds,
    arrival_rate,
    kind: str = "fsl",
    buffer=None,
    *,
    horizon: float = 3000.0,
    warmup: float = 300.0,
    replications: int = 10,
    seed=0,
) -> BoundingResult:
    """Simulate JSQ-FSL (``kind="fsl"``) or JSQ-SSL (``"ssl"``) from empty buffers.

    Cost per event O(log n + log of the longest buffer).

    Parameters
    ----------
    speeds
        mu_k of the n servers (jobs per time unit).
    arrival_rate
        n lambda^n, the total Poisson rate (for the Halfin-Whitt scaling of 002 take
        sum(speeds) - c sqrt(n)).
    kind
        "fsl" (faster servers serve longer buffers) or "ssl" (slower servers serve longer buffers).
    buffer
        b, the jobs a buffer holds; None (or math.inf) for infinite buffers, which need
        arrival_rate < sum(speeds).
    horizon
        The end of each path (time units); averages are exact time integrals over [warmup, horizon].
    warmup
        The start of the time averages (time units).
    replications
        Independent paths; replication r draws from SeedSequence(seed, spawn_key=(r,)).
    seed
        An integer >= 0 or a SeedSequence.

    Returns
    -------
    BoundingResult
        The time averages of Q_{+1} and Q_{+2} with their intervals.
    """
    speed, arrival_rate = _rates(speeds, arrival_rate)
    rates = served_rate(speed, kind)
    capacity = _buffer(buffer, speed, arrival_rate)
    warmup = check_warmup(warmup)
    horizon = check_horizon(horizon, warmup)
    replications = validation.count("replications", replications)
    _check_run(speed, arrival_rate, horizon, replications)
    root = root_seed_sequence(seed)
    n = speed.size
    measured_time = horizon - warmup

    measure_rows, level_means, job_laws, waiting_laws = [], [], [], []
    events = 0
    started = time.perf_counter()
    for replication in range(replications):
        rng = np.random.default_rng(np.random.SeedSequence(root.entropy, spawn_key=(*root.spawn_key, replication)))
        level_area, time_at_jobs, time_at_waiting, counts = kernel.simulate_bounding(
            rates, arrival_rate, capacity, horizon, warmup, rng
        )
        arrivals, lost, replication_events = (int(c) for c in counts)
        events += replication_events
        level_mean = level_area[1:] / measured_time
        level_means.append(level_mean)
        job_laws.append(time_at_jobs / measured_time)
        waiting_laws.append(time_at_waiting / measured_time)
        measure_rows.append(_measures(level_mean, n, lost / arrivals if arrivals else math.nan))
    elapsed = time.perf_counter() - started

    values = np.array(measure_rows)
    estimates = {name: Estimate(*t_interval(values[:, m])) for m, name in enumerate(MEASURES)}
    return BoundingResult(
        kind=kind,
        buffer=None if capacity == INFINITE_BUFFER else capacity,
        n_servers=n,
        arrival_rate=arrival_rate,
        excess_capacity=float((speed.sum() - arrival_rate) / math.sqrt(n)),
        horizon=horizon,
        warmup=warmup,
        replications=replications,
        estimates=estimates,
        replication_values=values,
        level_means=_padded(level_means).mean(axis=0),
        x_plus1_law=_time_weighted_law(job_laws, offset=n, scale=math.sqrt(n)),
        x_plus2_law=_time_weighted_law(waiting_laws, offset=0, scale=math.sqrt(n)),
        events=events,
        events_per_second=events / elapsed if elapsed > 0 else math.nan,
        metadata={"seed": seed_description(seed, root), "versions": versions()},
    )


def _measures(level_mean: np.ndarray, n: int, loss_fraction: float) -> list:
    """The values of MEASURES from the mean of Q_i per level i = 1, 2, ..."""
    level = np.concatenate([level_mean, np.zeros(3)])
    q_plus1, q_plus2 = float(level.sum()), float(level[1:].sum())
    root_n = math.sqrt(n)
    return [
        level[0],
        level[1],
        level[2],
        q_plus1,
        q_plus2,
        (level[0] - n) / root_n,
        level[1] / root_n,
        level[2] / root_n,
        (q_plus1 - n) / root_n,
        q_plus2 / root_n,
        loss_fraction,
    ]


def _padded(arrays: list) -> np.ndarray:
    """Rows of one length, padded with zeros."""
    width = max(len(a) for a in arrays)
    return np.array([np.concatenate([a, np.zeros(width - len(a))]) for a in arrays])


def _time_weighted_law(probabilities: list, offset: int, scale: float) -> TimeWeightedLaw:
    """The law of (j - offset) / scale from each replication's time fractions at j = 0, 1, ..."""
    probability = _padded(probabilities)
    last = int(np.flatnonzero(probability.sum(axis=0) > 0).max()) + 1
    tails = 1.0 - np.cumsum(probability[:, :last], axis=1)
    tails = np.clip(tails, 0.0, 1.0)
    mean_and_half = np.array([t_interval(tails[:, j]) for j in range(last)]).reshape(last, 2)
    return TimeWeightedLaw(
        support=(np.arange(last) - offset) / scale, ccdf=mean_and_half[:, 0], ccdf_half_width=mean_and_half[:, 1]
    )


# --- the coupled check -----------------------------------------------------------------------------


def check_sandwich(
    system, tie_breaks=tuple(TIE_BREAKS), *, horizon: float = 1000.0, warmup: float = 0.0, seed=0
) -> SandwichCheck:
    """:func:`check_sandwich_arrays` of ``system``: JSQ-FSL, JSQ-SSL and JSQ under each of
    ``tie_breaks`` on common random numbers, checking Q^FSL_{+i}(t) <= Q^pi_{+i}(t) <= Q^SSL_{+i}(t).

    Parameters
    ----------
    system
        A hetlb.System: its speeds mu_k (jobs per time unit), total arrival rate n lambda^n and
        buffer b (one for all servers); the complete graph, one job at a time per server.
    tie_breaks
        The JSQ tie-breaking policies held between the two bounds.
    horizon
        The end of each path (time units), as in simulate_bounding_system.
    warmup
        The start of the time averages mean_jobs and mean_waiting (time units), as in
        simulate_bounding_system; the order is checked at every tick.
    seed
        An integer >= 0 or a SeedSequence.

    Returns
    -------
    SandwichCheck
        The levels and ticks checked and the first violation, if any.
    """
    speeds, rate, buffer = bounding_arrays(system)
    return check_sandwich_arrays(speeds, rate, buffer, tie_breaks, horizon=horizon, warmup=warmup, seed=seed)


def check_sandwich_arrays(
    speeds,
    arrival_rate,
    buffer=None,
    tie_breaks=tuple(TIE_BREAKS),
    *,
    horizon: float = 1000.0,
    warmup: float = 0.0,
    seed=0,
) -> SandwichCheck:
    """Run JSQ-FSL, JSQ-SSL and JSQ under each of ``tie_breaks`` on common random numbers (the
    coupling of the proof of Prop 5.1 of 002, described in hetlb.kernels.bounding) from empty
    buffers, and check Q^FSL_{+i}(t) <= Q^pi_{+i}(t) <= Q^SSL_{+i}(t) for every level i after every
    clock tick. Arguments as in simulate_bounding_system_arrays; the clock and the random tie-breaks draw
    from two streams spawned from ``seed``. Cost per tick O(n) per tie-break: for moderate n.

    Parameters
    ----------
    speeds
        mu_k of the n servers (jobs per time unit).
    arrival_rate
        The total Poisson rate n lambda^n (jobs per time unit).
    buffer
        b, the jobs a buffer holds (None: infinite).
    tie_breaks
        The JSQ tie-breaking policies held between the two bounds.
    horizon
        The end of each path (time units), as in simulate_bounding_system.
    warmup
        The start of the time averages mean_jobs and mean_waiting (time units), as in
        simulate_bounding_system; the order is checked at every tick.
    seed
        An integer >= 0 or a SeedSequence.

    Returns
    -------
    SandwichCheck
        The levels and ticks checked and the first violation, if any.
    """
    speed, arrival_rate = _rates(speeds, arrival_rate)
    capacity = _buffer(buffer, speed, arrival_rate)
    warmup = check_warmup(warmup)
    horizon = check_horizon(horizon, warmup)
    if isinstance(tie_breaks, str):
        tie_breaks = (tie_breaks,)
    tie_breaks = tuple(tie_breaks)
    if not tie_breaks:
        raise InputError("tie_breaks", f"must name at least one of: {', '.join(TIE_BREAKS)}")
    for tie_break in tie_breaks:
        if tie_break not in TIE_BREAKS:
            raise InputError("tie_breaks", f"unknown tie-break {tie_break!r}; choose from: {', '.join(TIE_BREAKS)}")
        if POLICIES[tie_break].code not in kernel.CODES:
            raise InputError("tie_breaks", f"{tie_break} has no selection key in the bounding kernel")
    _check_run(speed, arrival_rate, horizon, 1, speed.size * (2 + len(tie_breaks)))
    distinct_speeds, speed_class = speed_classes(speed)
    clock_seed, tie_seed = root_seed_sequence(seed).spawn(2)

    violations, first_violation, job_area, waiting_area, counts = kernel.run_coupled(
        speed,
        speed_class,
        len(distinct_speeds),
        served_rate(speed, "fsl"),
        served_rate(speed, "ssl"),
        arrival_rate,
        capacity,
        np.array([POLICIES[t].code for t in tie_breaks], dtype=np.int64),
        horizon,
        warmup,
        np.random.default_rng(clock_seed),
        np.random.default_rng(tie_seed),
    )
    names = ("fsl", "ssl", *tie_breaks)
    measured_time = horizon - warmup
    return SandwichCheck(
        tie_breaks=tie_breaks,
        buffer=None if capacity == INFINITE_BUFFER else capacity,
        ticks=int(counts[0]),
        arrivals=int(counts[1]),
        lower_violations=violations[:, 0],
        upper_violations=violations[:, 1],
        first_lower_violation=first_violation[:, 0],
        first_upper_violation=first_violation[:, 1],
        mean_jobs=dict(zip(names, (job_area / measured_time).tolist())),
        mean_waiting=dict(zip(names, (waiting_area / measured_time).tolist())),
    )
