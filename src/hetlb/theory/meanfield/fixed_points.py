"""hetlb.theory.meanfield.mean_field and mean_field_arrays: the fixed point of a policy's limit, by its kind of rule."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from hetlb import validation
from hetlb.errors import InputError
from hetlb.theory.meanfield.classes import server_classes
from hetlb.theory.meanfield.limit import MeanFieldLimit
from hetlb.theory.meanfield.policies import INDEPENDENT_RULES, mean_field_rules, policy_parameters
from hetlb.theory.meanfield.ranking import ranking_occupancy
from hetlb.theory.meanfield.sampling import MAX_CLOSED_FORM_LEVELS, MAX_LEVELS
from hetlb.theory.meanfield.slot_filling import slot_filling_occupancy
from hetlb.theory.meanfield.truncation import sampling_fixed_point

if TYPE_CHECKING:
    from hetlb.model.system import System


def check_buffer(buffer) -> int | None:
    if buffer is None:
        return None
    if isinstance(buffer, float) and math.isinf(buffer):
        return None
    return validation.integer("buffer", buffer, low=1, high=10**6)


def mean_field_arrays(
    speeds, fractions=None, *, load, policy: str = "jsq", buffer=None, concurrency=None, rate_curve=None, **params
) -> MeanFieldLimit:
    """The fixed point of the N -> infinity limit of ``policy`` on the complete graph, for server
    classes given as arrays (the lower-level form of :func:`mean_field`: a limit is of class
    fractions, which need no finite fleet, and a study over many loads or fractions builds no System).

    >>> limit = mean_field_arrays([1.0, 0.25], [0.5, 0.5], load=0.9, policy="jfsq")
    >>> round(limit.mean_response_time, 4)   # C*/lambda = (0.5 + 0.25) / 0.5625
    1.3333
    >>> batch = mean_field_arrays([1.0], [1.0], load=0.5, policy="random", concurrency=2)  # M/M/2, mu = 1
    >>> round(batch.mean_response_time, 4)   # 1 + C(2, 1) / (2 - 1) = 1 + 1/3
    1.3333

    Parameters
    ----------
    speeds
        The class speeds mu_m (jobs per unit time), or per-server speeds when ``fractions`` is None.
    fractions
        alpha_m, the share of servers in each class (or class counts); None: one class per server.
    load
        rho in (0, 1), the arrival rate over the capacity sum_m alpha_m mu_m phi_m(c_m).
    policy
        A policy id of MEANFIELD_POLICIES.
    buffer
        B, jobs per server counting those in service (None: infinite).
    concurrency, rate_curve
        c_m and phi_m (hetlb.model.servers), one for all or one per class (per server when
        ``fractions`` is None); None: one job at a time. Exponential sizes.
    **params
        ``d`` for pod; ``d_fast``, ``d_slow``, ``p_fast``, ``p_slow`` for jsq-df-ds and jiq-df-ds.

    Returns
    -------
    MeanFieldLimit
        The fixed point and its measures (mean response time in time units).
    """
    rules = mean_field_rules()
    policy = validation.choice("policy", policy, tuple(rules))
    rule = rules[policy]
    classes = server_classes(speeds, fractions, concurrency, rate_curve)
    speed, fraction = classes.speed, classes.fraction
    rho = validation.number("load", load, 0.0, strict=True, high=1.0)
    if rho >= 1.0:
        raise InputError("load", f"must be below 1 (the mean-field limit here is for rho < 1), got {rho:g}")
    buffer = check_buffer(buffer)
    closed_form = rule.rule in INDEPENDENT_RULES
    largest = MAX_CLOSED_FORM_LEVELS if closed_form else MAX_LEVELS
    if buffer is not None and not rule.ranking and buffer > largest:
        raise InputError("buffer", f"{policy}'s mean-field solver takes buffers up to {largest} jobs, got {buffer}")
    parameters = policy_parameters(policy, params)
    arrival_rate = rho * float(np.sum(fraction * classes.capacity))
    if rule.ranking and classes.single_slot:
        occupancy = ranking_occupancy(rule.rule, speed, fraction, arrival_rate, buffer)
        stable = True
    elif rule.ranking:
        occupancy = slot_filling_occupancy(policy, classes, arrival_rate, buffer)
        stable = True
    else:
        if rule.rule.startswith("fast-slow") and speed.size < 2:
            raise InputError("speeds", f"{policy} needs at least two speed classes (fast and slow)")
        if rule.rule.startswith("fast-slow") and not classes.single_slot:
            raise InputError(
                "concurrency", f"{policy}'s fast and slow groups and idle servers are defined for concurrency 1"
            )
        occupancy, stable = sampling_fixed_point(policy, parameters, classes, arrival_rate, buffer)
    for array in (speed, fraction, occupancy, classes.concurrency):
        array.setflags(write=False)
    return MeanFieldLimit(
        policy=policy,
        parameters=parameters,
        load=rho,
        arrival_rate=arrival_rate,
        class_speed=speed,
        class_fraction=fraction,
        buffer=buffer,
        occupancy=occupancy,
        stable=stable,
        description=rule.description if classes.single_slot else multi_slot_description(rule),
        levels=occupancy.shape[1],
        class_concurrency=classes.concurrency,
        class_rate_curve=classes.rate_curve,
    )


def mean_field(system: System, policy: str = "jsq", **params) -> MeanFieldLimit:
    """The fixed point of the N -> infinity limit of ``policy`` on ``system``'s server classes
    (System.server_groups(): speed, concurrency, rate curve, their counts as fractions), load and
    buffer. The limit is for the complete graph, one buffer size, Poisson arrivals and exponential
    sizes on servers that serve several jobs at once.

    Parameters
    ----------
    system
        A hetlb.System: its server classes (speeds mu_m in jobs per time unit, concurrency c_m,
        rate curves phi_m, counts as the fractions alpha_m), load rho in (0, 1) and buffer B.
    policy
        A policy id of MEANFIELD_POLICIES.
    **params
        ``d`` for pod; ``d_fast``, ``d_slow``, ``p_fast``, ``p_slow`` for jsq-df-ds and jiq-df-ds
        (as :func:`mean_field_arrays`).

    Returns
    -------
    MeanFieldLimit
        The fixed point and its measures (mean response time in time units).

    Examples
    --------
    >>> import hetlb
    >>> system = hetlb.System.from_speeds("50x1.0,50x0.25", load=0.9)
    >>> round(mean_field(system, "jfsq").mean_response_time, 4)   # C*/lambda = (0.5 + 0.25) / 0.5625
    1.3333
    """
    return mean_field_arrays(**system_classes(system, "the mean-field limit"), policy=policy, **params)


def system_classes(system: System, model: str) -> dict:
    """The keywords of :func:`mean_field_arrays` (speeds, fractions, load, buffer, concurrency,
    rate_curve) that describe ``system``, refusing in one line what the limit ``model`` lacks."""
    from hetlb.model.system import checked_system

    checked_system("system", system)
    system.check_supported(model, job_sizes=None if system.has_single_slots else ("exponential",))
    if system.graph.n_edges != system.graph.n_types * system.n_servers:
        raise InputError("graph", f"{model} is for the complete graph; omit --graph")
    buffers = np.unique(system.buffer)
    if buffers.size > 1:
        raise InputError("buffer", f"{model} takes one buffer size for all servers")
    groups = system.server_groups()
    return dict(
        speeds=[group["speed"] for group in groups],
        fractions=[group["count"] for group in groups],
        load=system.load,
        buffer=None if system.has_infinite_buffers else int(buffers[0]),
        concurrency=None if system.has_single_slots else [group["concurrency"] for group in groups],
        rate_curve=None if system.has_single_slots else [group["rate_curve"] for group in groups],
    )


def multi_slot_description(rule) -> str:
    """The description of a limit on servers that serve several jobs at once."""
    if rule.ranking:
        return "levels k_m(n) of the policy's key filled in increasing key up to a threshold, ties at random"
    return f"{rule.description}, on birth-death servers of death rate mu_m phi_m(min(n, c_m))"
