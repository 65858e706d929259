"""Transients of the mean-field limit: the ODE of the sampling policies and a warm-up for simulating
from empty."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hetlb import validation
from hetlb.errors import InputError
from hetlb.theory.meanfield.fixed_points import mean_field_arrays, system_classes
from hetlb.theory.meanfield.limit import MeanFieldLimit
from hetlb.theory.meanfield.policies import INDEPENDENT_RULES, mean_field_rules, sampling_policies
from hetlb.theory.meanfield.ranking import fill_in_order
from hetlb.theory.meanfield.sampling import FIRST_LEVELS, MAX_LEVELS, sampling_model


@dataclass(frozen=True, eq=False)
class MeanFieldTrajectory:
    """The ODE solution; ``mean_number_in_system[t]`` is the jobs per server at ``times[t]``.

    Parameters
    ----------
    times
        The output times (time units).
    occupancy
        ``occupancy[t, m, i-1]`` = s_{m,i}(times[t]), the fraction of class-m servers with at
        least i jobs.
    class_speed
        mu_m of each class (jobs per unit time).
    class_fraction
        alpha_m, the share of servers in each class.
    """

    times: np.ndarray
    occupancy: np.ndarray
    class_speed: np.ndarray
    class_fraction: np.ndarray

    @property
    def mean_number_in_system(self) -> np.ndarray:
        """The mean jobs per server at each time of the trajectory, sum_m alpha_m sum_i x_{m,i}(t)."""
        return np.einsum("m,tmi->t", self.class_fraction, self.occupancy)

    def plot(self, path=None):
        """The matplotlib Figure of the mean number of jobs per server against time (time units),
        and of each class's busy fraction s_{m,1}; written to ``path`` when given.

        Parameters
        ----------
        path
            A file to write the figure to (its format by the extension); None: none written.

        Returns
        -------
        matplotlib.figure.Figure
            The figure.
        """
        from hetlb.plots.figures import plot_panels

        none = np.full(self.times.size, np.nan)
        busy = {f"speed {speed:g}": (self.occupancy[:, m, 0], none, none) for m, speed in enumerate(self.class_speed)}
        common = {"x": self.times, "xlabel": r"time $t$ (time units)"}
        return plot_panels(
            [
                {
                    "series": {"jobs per server": (self.mean_number_in_system, none, none)},
                    "ylabel": "mean jobs per server",
                    **common,
                },
                {"series": busy, "ylabel": r"$s_{m,1}(t)$: busy fraction of class $m$", **common},
            ],
            path,
            title="mean-field ODE",
        )


def mean_field_trajectory(
    system, policy: str = "pod", *, times, initial=None, levels=None, **params
) -> MeanFieldTrajectory:
    """The mean-field ODE of a sampling ``policy`` on ``system``'s server classes, load and buffer
    (as :func:`hetlb.theory.meanfield.mean_field`), at ``times``; the rest as
    :func:`mean_field_trajectory_arrays`.

    Parameters
    ----------
    system
        A hetlb.System: its server classes (speeds mu_m, concurrency c_m, rate curves phi_m, counts
        as the fractions alpha_m), load rho in (0, 1) and buffer B, as in ``mean_field``.
    policy
        A sampling policy of MEANFIELD_POLICIES.
    times
        Increasing output times (time units, from 0).
    initial
        s_{m,i}(0), the fraction of class-m servers with at least i jobs (default: empty).
    levels
        The truncation of an infinite buffer (default: twice the fixed point's, at least 32).
    **params
        The policy's parameters, as in ``mean_field``.

    Returns
    -------
    MeanFieldTrajectory
        s_{m,i}(t) at each of ``times``.
    """
    classes = system_classes(system, "the mean-field limit")
    return mean_field_trajectory_arrays(**classes, policy=policy, times=times, initial=initial, levels=levels, **params)


def mean_field_trajectory_arrays(
    speeds,
    fractions=None,
    *,
    load,
    policy: str = "pod",
    times,
    buffer=None,
    initial=None,
    levels=None,
    concurrency=None,
    rate_curve=None,
    **params,
) -> MeanFieldTrajectory:
    """Integrate the mean-field ODE ds_{m,i}/dt = a_{m,i-1}(s) (s_{m,i-1} - s_{m,i})
    - mu_m phi_m(min(i, c_m)) (s_{m,i} - s_{m,i+1}) of a sampling policy from ``initial``
    (s_{m,i}; default empty); speeds, fractions, concurrency and rate_curve as
    :func:`hetlb.theory.meanfield.mean_field_arrays` (the lower-level form of :func:`mean_field_trajectory`).

    The ODE is ds_{m,i}/dt = a_{m,i-1}(s) (s_{m,i-1} - s_{m,i}) - mu_m phi_m(min(i, c_m))
    (s_{m,i} - s_{m,i+1}). The ranking policies have a discontinuous drift (a differential
    inclusion) and are refused.

    Parameters
    ----------
    speeds, fractions
        As in ``mean_field``.
    load
        rho in (0, 1), as in ``mean_field``.
    policy
        A sampling policy of MEANFIELD_POLICIES.
    times
        Increasing output times (time units, from 0).
    buffer
        B, jobs per server counting those in service (None: infinite).
    initial
        s_{m,i}(0), the fraction of class-m servers with at least i jobs (default: empty).
    levels
        The truncation of an infinite buffer (default: twice the fixed point's, at least 32).
    concurrency, rate_curve
        As in ``mean_field``.
    **params
        The policy's parameters, as in ``mean_field``.
    """
    from scipy.integrate import solve_ivp  # here: the fixed points need no ODE solver

    policy = validation.choice("policy", policy, sampling_policies())
    limit = mean_field_arrays(
        speeds,
        fractions,
        load=load,
        policy=policy,
        buffer=buffer,
        concurrency=concurrency,
        rate_curve=rate_curve,
        **params,
    )
    speed, fraction = limit.class_speed, limit.class_fraction
    if limit.buffer is not None:
        n_levels = limit.buffer
    elif levels is not None:
        n_levels = validation.integer("levels", levels, low=1, high=MAX_LEVELS)
    else:
        n_levels = max(FIRST_LEVELS, 2 * limit.levels)
    times = np.asarray(times, dtype=float)
    if (
        times.ndim != 1
        or times.size == 0
        or not np.all(np.isfinite(times))
        or times[0] < 0
        or np.any(np.diff(times) <= 0)
    ):
        raise InputError("times", "must be finite, increasing and >= 0")
    start = np.zeros((speed.size, n_levels))
    if initial is not None:
        given = np.asarray(initial, dtype=float)
        if given.ndim != 2 or given.shape[0] != speed.size or given.shape[1] > n_levels:
            raise InputError("initial", f"must be s_{{m,i}} with {speed.size} rows and at most {n_levels} levels")
        if np.any(given < 0) or np.any(given > 1) or np.any(np.diff(given, axis=1) > 0):
            raise InputError("initial", "each row must be non-increasing in [0, 1]")
        start[:, : given.shape[1]] = given
    model = sampling_model(limit.policy, limit.parameters, limit.classes, limit.arrival_rate)
    death = limit.classes.death_rate(n_levels)  # mu_m phi_m(min(i, c_m)), i = 1..L

    def drift(_, flat):
        s = flat.reshape(speed.size, n_levels)
        padded = np.concatenate([np.ones((speed.size, 1)), s, np.zeros((speed.size, 1))], axis=1)
        birth = model.class_birth(model.group_tails(s))
        exactly = padded[:, :-1] - padded[:, 1:]  # fraction at level j = 0..L
        return (birth * exactly[:, :-1] - death * exactly[:, 1:]).ravel()

    solution = solve_ivp(
        drift, (0.0, float(times[-1])), start.ravel(), t_eval=times, method="LSODA", rtol=1e-8, atol=1e-11
    )
    if not solution.success:
        raise RuntimeError(f"the mean-field ODE failed: {solution.message}")
    occupancy = solution.y.T.reshape(times.size, speed.size, n_levels)
    return MeanFieldTrajectory(times=times, occupancy=occupancy, class_speed=speed, class_fraction=fraction)


def mean_field_settling_time(limit: MeanFieldLimit, tolerance: float = 1e-3, horizon: float = 1e5) -> float:
    """A warm-up for simulating ``limit``'s system from empty (time units).

    For a sampling policy, the time its ODE takes from the empty system to come within
    ``tolerance`` (relative) of the fixed point's jobs per server (``horizon`` when it does not;
    for random and weighted-random, ln(1/tolerance) over the least spectral gap
    mu_m (1 - sqrt(rho_m))^2 of their M/M/1 queues, with the capacity mu_m phi_m(c_m) for mu_m on
    servers of several slots); for a ranking policy (relaxation on the scale of a service time),
    20 response times or 2 ln(1/tolerance) mean service times of the slowest busy class, whichever
    is longer; for sed on servers of one slot, whose fast servers hold queues that fill from empty
    only with the arrivals beyond the capacity of the classes faster than K, twice the waiting jobs
    over that surplus, in addition.

    Parameters
    ----------
    limit
        The fixed point (mean_field).
    tolerance
        The relative distance to the fixed point's jobs per server that counts as settled.
    horizon
        The longest time the ODE is integrated (time units).
    """
    rule = mean_field_rules()[limit.policy]
    classes = limit.classes
    if (
        rule.rule == "least-expected-delay" and classes.single_slot
    ):  # from empty, the queues of the faster classes fill with the surplus
        busy = fill_in_order(limit.class_speed, limit.class_fraction, limit.arrival_rate, range(limit.class_speed.size))
        faster = busy >= 1.0
        surplus = limit.arrival_rate - float(np.sum(limit.class_fraction[faster] * limit.class_speed[faster]))
        waiting = limit.mean_number_in_system - float(np.sum(limit.class_fraction * limit.occupancy[:, 0]))
        return 20.0 * limit.mean_response_time + (2.0 * waiting / surplus if waiting > 0 and surplus > 0 else 0.0)
    if rule.ranking:  # the busy fractions relax at the service rates of the busy classes
        per_job = classes.capacity / np.minimum(classes.concurrency, limit.levels)  # mu_m with one slot
        slowest = float(np.min(per_job[limit.occupancy[:, 0] > 0]))
        return max(20.0 * limit.mean_response_time, 2.0 * math.log(1.0 / tolerance) / slowest)
    if not limit.stable:
        raise InputError(
            "policy", f"{limit.policy} has no stable limit at load {limit.load:g}: its queues grow without bound"
        )
    if rule.rule in INDEPENDENT_RULES:  # M/M/1: spectral gap mu (1 - sqrt(rho_m))^2
        model = sampling_model(limit.policy, limit.parameters, classes, limit.arrival_rate)
        load = model.class_birth(np.ones((1, 2)))[:, 0] / model.capacity
        gap = model.capacity * (1.0 - np.sqrt(np.minimum(load, 1.0))) ** 2
        return float(min(horizon, math.log(1.0 / tolerance) / max(float(np.min(gap)), 1.0 / horizon)))
    times = np.geomspace(0.01, horizon, 400)
    path = mean_field_trajectory_arrays(
        limit.class_speed,
        limit.class_fraction,
        load=limit.load,
        policy=limit.policy,
        times=times,
        buffer=limit.buffer,
        **({} if classes.single_slot else {"concurrency": classes.concurrency, "rate_curve": classes.rate_curve}),
        **limit.parameters,
    )
    gap = np.abs(path.mean_number_in_system / limit.mean_number_in_system - 1.0)
    settled = np.flatnonzero(gap < tolerance)
    return float(times[settled[0]]) if settled.size else float(times[-1])
