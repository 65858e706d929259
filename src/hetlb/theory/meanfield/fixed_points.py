"""hetlb.theory.meanfield.mean_field: the fixed point of a policy's limit, by its kind of rule."""

from __future__ import annotations

import math

import numpy as np

from hetlb import validation
from hetlb.errors import InputError
from hetlb.theory.meanfield.classes import speed_class_arrays
from hetlb.theory.meanfield.limit import MeanFieldLimit
from hetlb.theory.meanfield.policies import INDEPENDENT_RULES, mean_field_rules, policy_parameters
from hetlb.theory.meanfield.ranking import ranking_occupancy
from hetlb.theory.meanfield.sampling import MAX_CLOSED_FORM_LEVELS, MAX_LEVELS
from hetlb.theory.meanfield.truncation import sampling_fixed_point


def check_buffer(buffer) -> int | None:
    if buffer is None:
        return None
    if isinstance(buffer, float) and math.isinf(buffer):
        return None
    return validation.integer("buffer", buffer, low=1, high=10**6)


def mean_field(speeds, fractions=None, *, load, policy: str = "jsq", buffer=None, **params) -> MeanFieldLimit:
    """The fixed point of the N -> infinity limit of ``policy`` on the complete graph.

    speeds: the class speeds mu_m with ``fractions`` alpha_m (or class counts), or per-server speeds
        when ``fractions`` is None. load: rho in (0, 1), the arrival rate over the capacity.
    buffer: b, jobs per server counting the one in service (None: infinite).
    params: ``d`` for pod; ``d_fast``, ``d_slow``, ``p_fast``, ``p_slow`` for jsq-df-ds and jiq-df-ds.

    >>> limit = mean_field([1.0, 0.25], [0.5, 0.5], load=0.9, policy="jfsq")
    >>> round(limit.mean_response_time, 4)   # C*/lambda = (0.5 + 0.25) / 0.5625
    1.3333
    """
    rules = mean_field_rules()
    policy = validation.choice("policy", policy, tuple(rules))
    rule = rules[policy]
    speed, fraction = speed_class_arrays(speeds, fractions)
    rho = validation.number("load", load, 0.0, strict=True, high=1.0)
    if rho >= 1.0:
        raise InputError("load", f"must be below 1 (the mean-field limit here is for rho < 1), got {rho:g}")
    buffer = check_buffer(buffer)
    closed_form = rule.rule in INDEPENDENT_RULES
    largest = MAX_CLOSED_FORM_LEVELS if closed_form else MAX_LEVELS
    if buffer is not None and not rule.ranking and buffer > largest:
        raise InputError("buffer", f"{policy}'s mean-field solver takes buffers up to {largest} jobs, got {buffer}")
    parameters = policy_parameters(policy, params)
    arrival_rate = rho * float(np.sum(fraction * speed))
    if rule.ranking:
        occupancy = ranking_occupancy(rule.rule, speed, fraction, arrival_rate, buffer)
        stable = True
    else:
        if rule.rule.startswith("fast-slow") and speed.size < 2:
            raise InputError("speeds", f"{policy} needs at least two speed classes (fast and slow)")
        occupancy, stable = sampling_fixed_point(policy, parameters, speed, fraction, arrival_rate, buffer)
    for array in (speed, fraction, occupancy):
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
        description=rule.description,
        levels=occupancy.shape[1],
    )
