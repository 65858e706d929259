"""The fixed point of a sampling policy: its levels, its stability, and the queue-blind rules in closed form."""

from __future__ import annotations

import math

import numpy as np

from hetlb.errors import InputError
from hetlb.theory.meanfield.classes import ServerClasses
from hetlb.theory.meanfield.fixed_point_solver import solve_sampling
from hetlb.theory.meanfield.policies import INDEPENDENT_RULES
from hetlb.theory.meanfield.sampling import (
    FIRST_LEVELS,
    MAX_CLOSED_FORM_LEVELS,
    MAX_LEVELS,
    PILE_UP,
    TAIL_TOLERANCE,
    SamplingModel,
    birth_death_tails,
    sampling_model,
)


def sampling_fixed_point(policy, parameters, classes: ServerClasses, arrival_rate, buffer) -> tuple[np.ndarray, bool]:
    """(s_{m,i}, stable) at the fixed point of a sampling policy. An infinite buffer is truncated
    at L levels, L doubling until the tail is negligible (TAIL_TOLERANCE); the limit is declared
    unstable when a truncated fixed point piles mass at its top level: a birth rate at level L-1
    at least the capacity mu_m phi_m(c_m) of some class, or (pod, and jsq-df-ds with d_F, d_S >= 2)
    a fraction of a class at the top level that doubling L does not halve (their birth rates vanish
    with the tails, so a stable tail falls faster than geometrically once the servers serve at
    capacity: the test waits until L is twice the saturation level). With one sample, or
    jiq-df-ds's random busy choice, the birth rate above level 1 is constant and the first test is
    exact. Beyond MAX_LEVELS the load is refused (the queues are too long to be resolved)."""
    model = sampling_model(policy, parameters, classes, arrival_rate)
    rule = model.rule
    if rule in INDEPENDENT_RULES or (rule == "power-of-d" and parameters["d"] == 1):
        return independent_queues(model, buffer)
    if (
        buffer is None
        and rule == "power-of-d"
        and pod_overloads_slowest(classes.capacity, classes.fraction, arrival_rate, parameters["d"])
    ):
        return np.ones((classes.size, 1)), False
    if buffer is None and rule.startswith("fast-slow") and fast_slow_overloads_fast(model, parameters, arrival_rate):
        return np.ones((classes.size, 1)), False
    first = FIRST_LEVELS
    saturation = 2 * classes.saturation_level()
    while first < saturation:
        first *= 2
    if first > MAX_LEVELS:
        raise InputError(
            "concurrency",
            f"{policy}'s mean-field solver resolves up to {MAX_LEVELS // 2} jobs in service per server, "
            f"got {saturation // 2}",
        )
    if buffer is not None:  # continuation: the fixed point with fewer levels starts the next
        solution = solve_sampling(model, min(first, buffer), None)
        if buffer > first:
            solution = solve_sampling(model, buffer, extend_levels(solution, buffer))
        return solution, True
    levels = first
    guess = None
    previous_top = None
    while True:
        occupancy = solve_sampling(model, levels, guess)
        if occupancy[:, -1].max() < TAIL_TOLERANCE:
            return trim_levels(occupancy), True
        top_birth = model.class_birth(model.group_tails(occupancy))[:, -1]
        top = occupancy[:, -1]
        # with d >= 2 samples per group pod's and jsq-df-ds's birth rates vanish with the tails;
        # with one sample, or jiq-df-ds's random busy choice, they are constant: geometric tails
        vanishing = rule == "power-of-d" or (
            rule == "fast-slow-shortest" and min(parameters["d_fast"], parameters["d_slow"]) >= 2
        )
        piled = vanishing and previous_top is not None and np.any(top > 0.5 * previous_top)
        if np.any(top_birth >= model.capacity) or piled:
            return np.ones((classes.size, 1)), False
        previous_top = top if levels >= saturation else None
        if 2 * levels > MAX_LEVELS:
            raise InputError(
                "load",
                f"{policy}'s queues at load {arrival_rate / float(np.sum(classes.fraction * classes.capacity)):g} "
                f"reach beyond {MAX_LEVELS} jobs per server; give a buffer (--buffer) or a lower load",
            )
        levels *= 2
        guess = extend_levels(occupancy, levels)


def extend_levels(occupancy: np.ndarray, levels: int) -> np.ndarray:
    """A start for the fixed point with ``levels`` levels from one with fewer: a class with a
    decaying tail (below PILE_UP at the top level) is extended with empty levels; in a class whose
    jobs pile up at the top, the new levels repeat its busy fraction below the old profile, which
    keeps its boundary layer at the top level."""
    extra = levels - occupancy.shape[1]
    piled = occupancy[:, -1] >= PILE_UP
    return np.array(
        [
            np.concatenate([np.full(extra, row[0]), row]) if pile else np.concatenate([row, np.zeros(extra)])
            for row, pile in zip(occupancy, piled, strict=True)
        ]
    )


def independent_queues(model: SamplingModel, buffer) -> tuple[np.ndarray, bool]:
    """random and weighted-random: every server a birth-death queue (arrival rate a_m, death
    mu_m phi_m(min(n, c_m)); M/M/1/b with one job at a time), at every N; with b infinite, unstable
    when some a_m >= mu_m phi_m(c_m). An infinite buffer is truncated where the tail falls below
    TAIL_TOLERANCE: in closed form with one job at a time, by doubling the levels otherwise."""
    birth = model.class_birth(np.ones((1, 2)))[:, 0]
    classes = model.classes
    if buffer is not None:
        return birth_death_tails(np.repeat(birth[:, None], buffer, axis=1), classes.death_rate(buffer)), True
    ratio = float(np.max(birth / model.capacity))
    if ratio >= 1.0:
        return np.ones((classes.size, 1)), False
    levels = max(1, math.ceil(math.log(TAIL_TOLERANCE) / math.log(ratio)))
    if not classes.single_slot:
        levels += classes.saturation_level()
    while levels <= MAX_CLOSED_FORM_LEVELS:
        occupancy = birth_death_tails(np.repeat(birth[:, None], levels, axis=1), classes.death_rate(levels))
        if classes.single_slot:
            return occupancy, True
        if occupancy[:, -1].max() < TAIL_TOLERANCE:
            return trim_levels(occupancy), True
        levels *= 2
    raise InputError("load", f"the queues at this load reach beyond {MAX_CLOSED_FORM_LEVELS} jobs per server")


def pod_overloads_slowest(capacity, fraction, arrival_rate, d) -> bool:
    """True when, for some k, the k classes of least capacity mu_m phi_m(c_m) (a fraction beta of
    the servers) cannot serve lambda beta^d, the arrivals whose d samples all fall among them: their
    queues then grow without bound in the limit (speed-blind pod is unstable there although rho < 1)."""
    order = np.argsort(capacity, kind="stable")
    beta = np.cumsum(fraction[order])
    served = np.cumsum((fraction * capacity)[order])
    return bool(np.any(arrival_rate * beta**d >= served))


def fast_slow_overloads_fast(model, parameters, arrival_rate) -> bool:
    """True when the fast group of jsq-df-ds or jiq-df-ds gets at least its capacity whatever its
    state: it gets every job that samples an idle fast server and, when none is idle, a share of at
    least min(1 - p_S, p_F) of the others, so at least lambda min(1 - p_S, p_F) in all; a group
    whose arrivals reach sum_m f_m mu_m phi_m(c_m) over its classes has no stationary queues
    (critical at equality: its queues grow without bound, slowly)."""
    least_share = min(1.0 - parameters["p_slow"], parameters["p_fast"])
    fast = model.group_of_class == 0
    return bool(arrival_rate * least_share >= np.sum((model.fraction * model.capacity)[fast]))


def trim_levels(occupancy: np.ndarray) -> np.ndarray:
    keep = np.flatnonzero(occupancy.max(axis=0) >= TAIL_TOLERANCE)
    return occupancy[:, : max(1, int(keep[-1]) + 1 if keep.size else 1)].copy()
