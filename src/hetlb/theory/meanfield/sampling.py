"""Sampling policies: birth-death classes coupled through the sampled minima."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from hetlb import validation
from hetlb.errors import InputError
from hetlb.theory.meanfield.classes import ServerClasses
from hetlb.theory.meanfield.policies import mean_field_rules

FIRST_LEVELS = 32
MAX_LEVELS = 1024
MAX_CLOSED_FORM_LEVELS = 100_000
"""Largest buffer (or truncation) of the independent M/M/1/b queues of random and weighted-random."""
TAIL_TOLERANCE = 1e-13
"""An infinite buffer is truncated at L levels, L doubling from FIRST_LEVELS until the fraction of
every class with L or more jobs is below TAIL_TOLERANCE (sampling_fixed_point)."""
PILE_UP = 1e-3
"""A fraction of a class at the top level of a truncated solution above which the start for more
levels fills that class's new levels (nearly full servers) rather than leaving them empty."""


@dataclass(frozen=True)
class SamplingModel:
    """Classes partitioned into speed-blind groups (one for pod and the random policies; fast and
    slow for the JSQ/JIQ(d_F, d_S) family). Arrays carry a leading batch axis: ``tails[..., g, j]``
    is T_{g,j}, the fraction of group-g servers with at least j jobs, j = 0..L. ``rule`` is the
    policy's MeanFieldRule.rule; ``classes`` the server classes, whose ``speed`` and ``fraction``
    are the model's."""

    policy: str
    rule: str
    parameters: dict
    speed: np.ndarray
    fraction: np.ndarray
    arrival_rate: float
    group_of_class: np.ndarray
    group_fraction: np.ndarray
    classes: ServerClasses

    @cached_property
    def death(self) -> np.ndarray:
        """death[m, n-1] = mu_m phi_m(min(n, c_m)), the completion rate of a class-m server with
        n = 1..MAX_LEVELS jobs (mu_m with one job at a time)."""
        return self.classes.death_rate(MAX_LEVELS)

    @property
    def capacity(self) -> np.ndarray:
        """mu_m phi_m(c_m), the completion rate of a class-m server with c_m jobs or more."""
        return self.classes.capacity

    @property
    def n_groups(self) -> int:
        return self.group_fraction.size

    def class_birth(self, tails: np.ndarray) -> np.ndarray:
        """a_{m,j}: the arrival rate per class-m server at level j = 0..L-1, shape (..., M, L)."""
        lam = self.arrival_rate
        shape = tails.shape[:-2] + (self.speed.size, tails.shape[-1] - 1)
        if self.rule == "uniform":
            return np.full(shape, lam)
        if self.rule == "speed-weighted":  # weights mu_m phi_m(c_m): the speeds with one job at a time
            rho = lam / float(np.sum(self.fraction * self.capacity))
            return np.broadcast_to((rho * self.capacity)[:, None], shape).copy()
        if self.rule == "power-of-d":
            return np.broadcast_to(lam * min_at_level(tails[..., 0:1, :], self.parameters["d"]), shape).copy()
        d = (self.parameters["d_fast"], self.parameters["d_slow"])
        p_fast, p_slow = self.parameters["p_fast"], self.parameters["p_slow"]
        fast_all_busy = tails[..., 0, 1:2] ** d[0]
        slow_all_busy = tails[..., 1, 1:2] ** d[1]
        # the chance that the group gets the job, when its sampled choice is idle or busy
        when_idle = (np.ones_like(fast_all_busy), fast_all_busy * p_slow)
        when_busy = ((1.0 - slow_all_busy) * (1.0 - p_slow) + slow_all_busy * p_fast, fast_all_busy * (1.0 - p_fast))
        groups = []
        for g in range(2):
            if self.rule == "fast-slow-shortest":
                chosen = min_at_level(tails[..., g, :], d[g])
            else:  # a uniformly random one of d busy sampled servers: T_1^(d-1) per server at j >= 1
                chosen = np.repeat(tails[..., g, 1:2] ** (d[g] - 1), tails.shape[-1] - 1, axis=-1)
                chosen[..., 0] = min_at_level(tails[..., g, :2], d[g])[..., 0]
            weight = np.repeat(when_busy[g], chosen.shape[-1], axis=-1)
            weight[..., 0] = when_idle[g][..., 0]
            groups.append(lam / self.group_fraction[g] * weight * chosen)
        return np.stack(groups, axis=-2)[..., self.group_of_class, :]

    def group_tails(self, occupancy: np.ndarray) -> np.ndarray:
        """T_{g,j}, j = 0..L, from the class occupancy s_{m,i}, i = 1..L (shape (..., M, L))."""
        weight = np.zeros((self.n_groups, self.speed.size))
        weight[self.group_of_class, np.arange(self.speed.size)] = (
            self.fraction / self.group_fraction[self.group_of_class]
        )
        tails = np.einsum("gm,...mi->...gi", weight, occupancy)
        return np.concatenate([np.ones(tails.shape[:-1] + (1,)), tails], axis=-1)

    def step(self, tails_inner: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Phi: the class occupancy of the chains driven by the tails T_{g,1..L} (flattened,
        with a leading batch axis), and the groups' tails of that occupancy (flattened)."""
        batch = tails_inner.shape[0]
        tails = np.ones((batch, self.n_groups, tails_inner.shape[1] // self.n_groups + 1))
        tails[..., 1:] = np.clip(tails_inner.reshape(batch, self.n_groups, -1), 0.0, 1.0)
        occupancy = birth_death_tails(self.class_birth(tails), self.death[:, : tails.shape[-1] - 1])
        return occupancy, self.group_tails(occupancy)[..., 1:].reshape(batch, -1)


def min_at_level(tail: np.ndarray, d: int) -> np.ndarray:
    """(T_j^d - T_{j+1}^d) / (T_j - T_{j+1}) for j = 0..L-1 (last axis): the chance that the least
    of d sampled servers (with replacement, as N -> infinity) is at level j, per server at level j."""
    high, low = tail[..., :-1], tail[..., 1:]
    return np.sum([high**k * low ** (d - 1 - k) for k in range(d)], axis=0)


def birth_death_tails(birth: np.ndarray, death: np.ndarray) -> np.ndarray:
    """s_{m,i}, i = 1..L, of birth-death chains on 0..L with birth[..., m, j] (j -> j+1) and
    death[m, j] (j+1 -> j)."""
    with np.errstate(divide="ignore"):
        log_ratio = np.log(birth) - np.log(death)
    log_p = np.concatenate([np.zeros(birth.shape[:-1] + (1,)), np.cumsum(log_ratio, axis=-1)], axis=-1)
    p = np.exp(log_p - log_p.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return np.cumsum(p[..., ::-1], axis=-1)[..., ::-1][..., 1:]


def sampling_model(policy, parameters, classes: ServerClasses, arrival_rate) -> SamplingModel:
    rule = mean_field_rules()[policy].rule
    speed, fraction = classes.speed, classes.fraction
    if rule.startswith("fast-slow"):
        group_of_class = np.ones(speed.size, dtype=np.int64)
        group_of_class[0] = 0
    else:
        group_of_class = np.zeros(speed.size, dtype=np.int64)
    group_fraction = np.bincount(group_of_class, weights=fraction)
    return SamplingModel(
        policy,
        rule,
        parameters,
        speed,
        fraction,
        arrival_rate,
        group_of_class,
        group_fraction,
        classes,
    )


def pod_equal_servers_response_time(load: float, d: int, terms: int = 200) -> float:
    """Mean response time of pod(d) on equal servers of speed 1 as N -> infinity (Mitzenmacher;
    Vvedenskaya et al.): s_i = rho^((d^i - 1)/(d - 1)), so E[T] = sum_i s_i / rho
    = sum_{i >= 1} rho^((d^i - d)/(d - 1)) (and rho^(i-1) summed, 1 / (1 - rho), for d = 1).

    Parameters
    ----------
    load
        rho in (0, 1).
    d
        The servers sampled per arrival.
    terms
        The terms of the sum kept.
    """
    rho = validation.number("load", load, 0.0, strict=True, high=1.0)
    d = validation.integer("d", d, low=1, high=64)
    if rho >= 1.0:
        raise InputError("load", "must be below 1")
    if d == 1:
        return 1.0 / (1.0 - rho)
    total = 0.0
    for i in range(1, terms + 1):
        exponent = (d**i - d) / (d - 1)
        term = rho**exponent
        total += term
        if term < 1e-300:
            break
    return total
