"""The speed lower bound of Proposition 1 in paper 000 (Weng, Zhou, Srikant), and its extension to
servers that serve many jobs at once.

With infinite buffers, under any stable policy, the mean response time is at least C*/lambda:
the mean service time obtained by filling the fastest servers first (000 section 4;
docs/reference/model.md). On multi-slot servers (hetlb.model.servers) the same argument fills the
cheapest *slots* first: the b-th job in service at server s adds mu_s (phi_s(b) - phi_s(b - 1)) to
the work rate, and the least mean number of jobs in service that carries the work rate lambda is
a fractional knapsack over the concave hull of the points (b, mu_s phi_s(b)) (:func:`slot_increments`).
"""

from dataclasses import dataclass

import numpy as np

from hetlb import validation
from hetlb.errors import InputError
from hetlb.model.servers import RateCurve, capacity_factor, concurrency_array, rate_curve_tuple
from hetlb.model.system import RATE_RULE, System, checked_system

__all__ = ["CacheCapacity", "SpeedLowerBound", "cache_capacity", "speed_lower_bound", "speed_lower_bound_arrays"]

MAX_SLOT_STEPS = 1 << 22
"""The most slots of one server the bound walks (an unlimited saturating curve near its capacity
needs about (1 - alpha) / (alpha^2 (1 / alpha - phi)) of them); beyond, it refuses."""


@dataclass(frozen=True, eq=False)
class SpeedLowerBound:
    """K, C* and the lower bound C*/lambda of Proposition 1 (000).

    Parameters
    ----------
    K
        The number of server types needed to carry the load (1-based, as in 000).
    c_star
        C* = sum_m C*_m.
    c_star_by_type
        C*_m, the fraction of all servers that are busy servers of type m.
    type_speeds
        The distinct rates mu_1 > mu_2 > ... > mu_M (jobs per unit time).
    type_fractions
        alpha_m = N_m / N.
    arrival_rate_per_server
        lambda = lambda_Sigma / N.
    lower_bound
        C*/lambda, a lower bound on the mean response time (time units).
    load
        lambda_Sigma / sum_r mu_r.
    """

    K: int
    c_star: float
    c_star_by_type: np.ndarray
    type_speeds: np.ndarray
    type_fractions: np.ndarray
    arrival_rate_per_server: float
    lower_bound: float
    load: float


def speed_lower_bound(system: System) -> SpeedLowerBound:
    """Proposition 1 of 000 for ``system``'s servers (speeds mu, concurrency c_s and rate curves
    phi_s) and total arrival rate lambda_Sigma; the graph and the buffers do not enter.

    Parameters
    ----------
    system
        A hetlb.System: its speeds mu (jobs per time unit), concurrency c_s, rate curves phi_s and
        total arrival rate lambda_Sigma (jobs per time unit).

    Returns
    -------
    SpeedLowerBound
        K, C* and the lower bound C*/lambda on the mean response time (lambda = lambda_Sigma / N; time units).

    Examples
    --------
    >>> import hetlb
    >>> system = hetlb.System.from_speeds("50x1.0,50x0.25", load=0.9)
    >>> round(speed_lower_bound(system).lower_bound, 4)   # (0.5 + 0.25) / 0.5625
    1.3333
    """
    checked_system("system", system)
    return speed_lower_bound_arrays(
        system.speed, system.total_arrival_rate, concurrency=system.concurrency, rate_curve=system.rate_curve
    )


def speed_lower_bound_arrays(speed, total_arrival_rate, *, concurrency=None, rate_curve=None) -> SpeedLowerBound:
    """Proposition 1 of 000 for servers with rates ``speed`` and total arrival rate lambda_Sigma:
    the lower-level form of :func:`speed_lower_bound`, for a fleet and a rate as arrays (as a search
    over placements or loads holds them, without building a System each time).

    Servers of equal speed form one type. With any c_s > 1 the bound is ``slot_lower_bound``'s
    (types are then the distinct (speed, concurrency, curve), fastest first, and K is the last type
    with a job in service).

    Parameters
    ----------
    speed
        ``speed[s]``, the service rate of server s (mu_{t_s} in 000, jobs per unit time).
    total_arrival_rate
        lambda_Sigma (jobs per unit time), below the total capacity (sum_s speed[s] with one job at
        a time).
    concurrency, rate_curve
        c_s and phi_s as in ``hetlb.System.from_speeds``.

    Returns
    -------
    SpeedLowerBound
        K, C* and the lower bound C*/lambda on the mean response time (lambda = lambda_Sigma / N; time units).
    """
    if concurrency is not None and np.any(concurrency_array(concurrency, np.size(speed)) > 1):
        return slot_lower_bound(speed, total_arrival_rate, concurrency, rate_curve)
    speed = validation.positive_finite_array("speed", speed, validation.RATE_RANGE, RATE_RULE)
    if not validation.is_real(total_arrival_rate):
        raise InputError("total_arrival_rate", "must be a positive finite rate (jobs per unit time)")
    total_arrival_rate = float(
        validation.positive_finite_array("total_arrival_rate", total_arrival_rate, validation.RATE_RANGE, RATE_RULE)[0]
    )
    capacity = float(speed.sum())
    if total_arrival_rate >= capacity:
        raise InputError(
            "total_arrival_rate",
            f"must be below the total capacity sum(speed) = {capacity:.6g}, "
            f"got {total_arrival_rate:.6g} (load {total_arrival_rate / capacity:.6g})",
        )

    n_servers = speed.size
    ascending_speeds, counts = np.unique(speed, return_counts=True)
    type_speeds = ascending_speeds[::-1]
    type_fractions = counts[::-1] / n_servers
    arrival_rate_per_server = total_arrival_rate / n_servers

    # capacity_up_to[k] = sum_{m <= k} mu_m alpha_m; K is the first k where it exceeds lambda.
    capacity_up_to = np.cumsum(type_speeds * type_fractions)
    last = min(int(np.searchsorted(capacity_up_to, arrival_rate_per_server, side="right")), type_speeds.size - 1)
    c_star_by_type = np.zeros(type_speeds.size)
    c_star_by_type[:last] = type_fractions[:last]
    carried_by_faster = capacity_up_to[last - 1] if last > 0 else 0.0
    c_star_by_type[last] = (arrival_rate_per_server - carried_by_faster) / type_speeds[last]
    c_star = float(c_star_by_type.sum())

    for array in (c_star_by_type, type_speeds, type_fractions):
        array.setflags(write=False)
    return SpeedLowerBound(
        K=last + 1,
        c_star=c_star,
        c_star_by_type=c_star_by_type,
        type_speeds=type_speeds,
        type_fractions=type_fractions,
        arrival_rate_per_server=arrival_rate_per_server,
        lower_bound=c_star / arrival_rate_per_server,
        load=total_arrival_rate / capacity,
    )


def slot_increments(speed: float, concurrency: int, curve: RateCurve, needed: float) -> tuple[np.ndarray, np.ndarray]:
    """The steps of the upper concave hull of the points (b, speed phi(b)), b = 0 .. c: each step's
    width in jobs and its work rate per job (decreasing), as far as they carry ``needed`` (or up
    to c). No allocation of jobs in service carries more rate per job than the hull's steps.
    Every curve but a table is concave, so each of its slots is a step of width 1; a table's hull
    is found corner by corner (beyond its last value phi is flat and adds nothing)."""
    last = min(int(concurrency), MAX_SLOT_STEPS + 1)
    if curve.kind != "table":
        count = min(last, 64)
        while True:
            rates = speed * np.concatenate([[0.0], curve.phi(np.arange(1, count + 1))])  # phi(0) = 0
            slopes = np.diff(rates)
            slopes = slopes[slopes > 0.0]
            if len(slopes) < count or count >= last or slopes.sum() >= needed:
                break
            count = min(2 * count, last)
        if count > MAX_SLOT_STEPS:
            raise InputError(
                "concurrency", f"the bound walks at most {MAX_SLOT_STEPS:,} slots of a server: limit the concurrency"
            )
        return np.ones(len(slopes)), slopes
    points = np.arange(min(last, len(curve.values)) + 1)
    rates = speed * np.concatenate([[0.0], curve.phi(points[1:])])
    steps: list[tuple[float, float]] = []  # (width, rate per job)
    corner = 0
    while corner < points[-1]:
        chords = (rates[corner + 1 :] - rates[corner]) / (points[corner + 1 :] - corner)
        best = int(np.argmax(chords))
        if chords[best] <= 0.0:
            break
        steps.append((best + 1.0, float(chords[best])))
        corner += best + 1
    table = np.array(steps).reshape(-1, 2)
    return table[:, 0], table[:, 1]


def slot_lower_bound(speed, total_arrival_rate, concurrency, rate_curve) -> SpeedLowerBound:
    """C*/lambda on multi-slot servers: with N jobs in service s holds b_s of them, which give the
    work rate sum_s mu_s phi_s(b_s); work conservation (sizes of mean 1) makes its mean
    lambda_Sigma, and the mean number of jobs is at least the mean number in service, at least
    min E[sum_s b_s] under that constraint: the least mean number of jobs in service that carries
    lambda_Sigma, the steps of every server's hull (:func:`slot_increments`) taken by decreasing
    rate per job. C* is that minimum over N, the bound C*/lambda as in 000 (equal to it when
    every c_s = 1). It holds for every policy, arrival process and size law with infinite
    buffers and a stable system."""
    speed = validation.positive_finite_array("speed", speed, validation.RATE_RANGE, RATE_RULE)
    n_servers = speed.size
    slots = concurrency_array(concurrency, n_servers)
    curves = rate_curve_tuple(rate_curve, n_servers)
    capacity = float((speed * capacity_factor(slots, curves)).sum())
    total_arrival_rate = validation.positive_number("total_arrival_rate", total_arrival_rate)
    if total_arrival_rate >= capacity:
        raise InputError(
            "total_arrival_rate",
            f"must be below the total capacity sum(mu_s phi_s(c_s)) = {capacity:.6g}, got {total_arrival_rate:.6g}",
        )
    groups: dict = {}
    for s in np.argsort(-speed, kind="stable"):
        key = (float(speed[s]), int(slots[s]), curves[s])
        groups[key] = groups.get(key, 0) + 1
    keys = list(groups)
    steps = [slot_increments(mu, c, curve, total_arrival_rate / groups[key]) for key in keys for mu, c, curve in [key]]
    # every step of every server, by decreasing rate per job; each group's servers alike
    group_of = np.concatenate([np.full(len(widths), g) for g, (widths, _) in enumerate(steps)])
    widths = np.concatenate([widths * groups[key] for key, (widths, _) in zip(keys, steps)])
    slopes = np.concatenate([slopes for _, slopes in steps])
    order = np.argsort(-slopes, kind="stable")
    jobs_by_group = np.zeros(len(keys))
    left = total_arrival_rate
    for i in order:
        take = min(widths[i], left / slopes[i])
        jobs_by_group[group_of[i]] += take
        left -= take * slopes[i]
        if left <= 0.0:
            break
    if left > total_arrival_rate * 1e-9:
        raise InputError(
            "concurrency",
            f"the first {MAX_SLOT_STEPS:,} slots of each server do not carry the load: limit the concurrency",
        )
    c_star_by_type = jobs_by_group / n_servers
    c_star = float(c_star_by_type.sum())
    per_server = total_arrival_rate / n_servers
    c_star_by_type.setflags(write=False)
    return SpeedLowerBound(
        K=int(np.flatnonzero(c_star_by_type)[-1]) + 1,
        c_star=c_star,
        c_star_by_type=c_star_by_type,
        type_speeds=np.array([key[0] for key in keys]),
        type_fractions=np.array([groups[key] / n_servers for key in keys]),
        arrival_rate_per_server=per_server,
        lower_bound=c_star / per_server,
        load=total_arrival_rate / capacity,
    )


@dataclass(frozen=True)
class CacheCapacity:
    """The most a fleet with prefix caches can carry (docs/background/prefix-caches.md).

    A job of a prompt of L blocks that hits h of them brings 1 + W (L - h) of work; no policy can
    make a job hit more than the blocks an earlier prompt can have left in a cache (its reusable
    blocks), so no policy carries more than ``rate_all_hits``, the routable capacity over the least
    mean work 1 + W (E[L] - E[reusable]); with every prefill a miss it carries ``rate_no_hits``.

    Parameters
    ----------
    least_work
        1 + W (E[L] - E[reusable]), a job's least mean work (units of the mean job size).
    most_work
        1 + W E[L], its mean work when every prefill is a miss.
    rate_all_hits
        The highest arrival rate any policy can carry (jobs per time unit).
    rate_no_hits
        The arrival rate it carries with no hit.
    load_all_hits
        ``rate_all_hits`` over the decode capacity (the scale of ``--load``).
    load_no_hits
        ``rate_no_hits`` over the decode capacity.
    """

    least_work: float
    most_work: float
    rate_all_hits: float
    rate_no_hits: float
    load_all_hits: float
    load_no_hits: float


def cache_capacity(system: System) -> CacheCapacity:
    """The capacity bound of a system with prefix caches (:class:`CacheCapacity`).

    Parameters
    ----------
    system
        A hetlb.System with ``caches`` (System.from_speeds(..., cache_blocks=...)).

    Returns
    -------
    CacheCapacity
        The highest arrival rates with every reusable block a hit and with no hit.
    """
    system = checked_system("system", system)
    if system.caches is None:
        raise InputError("cache_blocks", "the capacity with caches needs the servers' caches (cache_blocks)")
    routable = system.max_routable_scale() * system.total_arrival_rate  # jobs of unit work per time unit
    least, most = system.least_work_per_job, system.caches.work_per_job(0.0)
    capacity = system.capacity
    return CacheCapacity(
        least, most, routable / least, routable / most, routable / least / capacity, routable / most / capacity
    )
