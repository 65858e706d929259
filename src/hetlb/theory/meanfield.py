"""The many-server (mean-field) limit N -> infinity of the complete-graph system with speed classes.

Classes m = 0, 1, ... (fastest first) hold fractions alpha_m of the N servers, with service rates
mu_m; jobs arrive at rate lambda per server (load rho = lambda / sum_m alpha_m mu_m < 1); every
server has buffer b (jobs, counting the one in service; None is infinite). The state of the limit
is the occupancy s_{m,i}: the fraction of class-m servers with at least i jobs. (Paper 000 writes
s_{m,i} for the fraction of *all* servers that are of class m with at least i jobs: alpha_m times
ours.) docs/background/mean-field.md derives every fixed point used here.

Two kinds of limit:

- *Sampling* policies (``random``, ``weighted-random``, ``pod``, ``jsq-df-ds``, ``jiq-df-ds``): the
  drift is smooth and each server of class m is, in the limit, a birth-death chain with birth rate
  a_{m,j}(s) at level j and death rate mu_m. The fixed point is found by Newton's method on the
  occupancy of the sampling groups; :func:`mean_field_trajectory` integrates the ODE.
- *Ranking* policies (``jsq``, ``jiq``, ``jsq-lisf``, ``jfsq``, ``jfiq``, ``jsq-fiq``, ``jssq``,
  ``sed``): at rho < 1 a positive fraction of the servers stays idle (or, for ``sed``, below the
  threshold key), so an arrival always finds a least-key server and the fixed point is explicit:
  no queueing except for ``sed``. Their fluid limit is a differential inclusion (the drift jumps
  where a level empties); only the fixed point is provided.

Plain NumPy (SciPy for the ranking policies' root and the ODE, imported where used); nothing here
depends on the simulation kernels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from hetlb import validation
from hetlb.errors import InputError
from hetlb.policies.registry import BY_CODE, COUNT, JSQ_DF_DS, POLICIES, MeanFieldRule

__all__ = [
    "MEANFIELD_POLICIES",
    "MeanFieldLimit",
    "MeanFieldTrajectory",
    "mean_field",
    "mean_field_trajectory",
    "pod_equal_servers_response_time",
    "mean_field_settling_time",
    "server_speeds",
]

THEORY_ONLY = {
    "jiq-df-ds": (
        MeanFieldRule(
            "fast-slow-idle",
            "JIQ(d_F, d_S) of Gardner et al.: as jsq-df-ds, but a busy sampled server chosen at random",
        ),
        BY_CODE[JSQ_DF_DS].id,
    )
}
"""Policies that exist only in the theory: id -> (its mean-field rule, the registered policy whose
parameters it takes)."""


def _rules() -> dict[str, MeanFieldRule]:
    """Every policy with a mean-field limit here, the ranking ones first: id -> its rule
    (PolicySpec.mean_field, and THEORY_ONLY's)."""
    rules = {spec.id: spec.mean_field for spec in POLICIES.values() if spec.mean_field is not None}
    rules.update((name, rule) for name, (rule, _) in THEORY_ONLY.items())
    return dict(sorted(rules.items(), key=lambda item: not item[1].ranking))


MEANFIELD_POLICIES = tuple(_rules())
"""Policies with a mean-field limit here, the ranking ones first: the registry's (PolicySpec.mean_field)
and ``jiq-df-ds``, which exists only in the theory."""


def _sampling() -> tuple[str, ...]:
    """The sampling policies, whose ODE :func:`mean_field_trajectory` integrates (read anew)."""
    return tuple(name for name, rule in _rules().items() if not rule.ranking)


SAMPLING = _sampling()
"""The sampling policies among them at import (:func:`_sampling`)."""
INDEPENDENT_RULES = ("uniform", "speed-weighted")
"""The rules blind to the queues: each server an M/M/1 (M/M/1/b) queue, in closed form."""

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
RESIDUAL_TOLERANCE = 1e-10
"""Largest |Phi(T) - T| accepted at a fixed point of the sampling policies."""
BLOCKING_RESOLUTION = 1e-9
"""Blocking probabilities below this are within the fixed point's tolerance and reported as 0."""
KEY_TOLERANCE = 1e-12
"""Relative tolerance under which two sed keys i / mu_m are equal (a tie)."""
MAX_SPEED_RATIO = 1e6
"""Largest mu_max / mu_min for sed (its fastest servers hold about that many jobs)."""


@dataclass(frozen=True, eq=False)
class MeanFieldLimit:
    """The fixed point of the mean-field limit and the figures derived from it.

    ``occupancy[m, i-1]`` is s_{m,i}, the fraction of class-m servers with at least i jobs;
    ``class_speed`` mu_m (decreasing) and ``class_fraction`` alpha_m; ``arrival_rate`` lambda per
    server; ``buffer`` b (None: infinite). Times are in the time unit of the speeds. ``stable`` is
    False when no fixed point with finite queues exists (then the means are infinite).
    ``finite_n_error`` is the order of the gap between the N-server system and the limit.
    """

    policy: str
    parameters: dict
    load: float
    arrival_rate: float
    class_speed: np.ndarray
    class_fraction: np.ndarray
    buffer: int | None
    occupancy: np.ndarray
    stable: bool
    description: str
    finite_n_error: str = "1/N"
    levels: int = field(default=0)

    @property
    def throughput(self) -> float:
        """Departures per server per unit time, sum_m alpha_m mu_m s_{m,1}."""
        return float(np.sum(self.class_fraction * self.class_speed * self.occupancy[:, 0]))

    @property
    def blocking_probability(self) -> float:
        """Fraction of arrivals lost at a full buffer, 1 - throughput / lambda (0 with infinite
        buffers; below BLOCKING_RESOLUTION it is within the fixed point's tolerance, and 0)."""
        if not self.stable:
            return math.nan
        lost = 1.0 - self.throughput / self.arrival_rate
        return lost if self.buffer is not None and lost > BLOCKING_RESOLUTION else 0.0

    @property
    def mean_number_in_system(self) -> float:
        """Mean jobs per server, sum_m alpha_m sum_i s_{m,i}."""
        return float(np.sum(self.class_fraction * self.occupancy.sum(axis=1))) if self.stable else math.inf

    @property
    def mean_response_time(self) -> float:
        """Mean response time of admitted jobs (Little's law: jobs per server / throughput)."""
        return self.mean_number_in_system / self.throughput if self.stable else math.inf

    @property
    def mean_service_time(self) -> float:
        """Mean service time of admitted jobs: busy servers per server / throughput."""
        return float(np.sum(self.class_fraction * self.occupancy[:, 0])) / self.throughput

    @property
    def mean_waiting_time(self) -> float:
        """Mean time an admitted job waits before service."""
        return self.mean_response_time - self.mean_service_time if self.stable else math.inf

    @property
    def p_wait(self) -> float:
        """Probability that an admitted job waits: arrivals joining a busy server equal the
        departures leaving one or more jobs behind, sum_m alpha_m mu_m s_{m,2} / throughput."""
        if not self.stable:
            return math.nan
        second = self.occupancy[:, 1] if self.occupancy.shape[1] > 1 else np.zeros(len(self.class_speed))
        return float(np.sum(self.class_fraction * self.class_speed * second)) / self.throughput

    @property
    def utilisation(self) -> np.ndarray:
        """Busy fraction s_{m,1} of each class."""
        return self.occupancy[:, 0].copy()

    @property
    def job_share(self) -> np.ndarray:
        """Share of the admitted jobs served by each class, alpha_m mu_m s_{m,1} / throughput."""
        return self.class_fraction * self.class_speed * self.occupancy[:, 0] / self.throughput

    def to_dict(self) -> dict:
        """The figures as plain numbers (JSON-ready; infinities as None)."""

        def plain(value):
            return float(value) if math.isfinite(value) else None

        return {
            "policy": self.policy,
            "parameters": dict(self.parameters),
            "load": self.load,
            "arrival_rate_per_server": self.arrival_rate,
            "buffer": self.buffer,
            "stable": self.stable,
            "description": self.description,
            "finite_n_error": self.finite_n_error,
            "mean_response_time": plain(self.mean_response_time),
            "mean_waiting_time": plain(self.mean_waiting_time),
            "p_wait": plain(self.p_wait),
            "blocking_probability": plain(self.blocking_probability),
            "mean_number_in_system_per_server": plain(self.mean_number_in_system),
            "classes": [
                {
                    "speed": float(self.class_speed[m]),
                    "fraction": float(self.class_fraction[m]),
                    "utilisation": float(self.occupancy[m, 0]),
                    "job_share": float(self.job_share[m]) if self.stable else None,
                    "s_m": [float(x) for x in trim_tail(self.occupancy[m])],
                }
                for m in range(len(self.class_speed))
            ],
        }


def trim_tail(row: np.ndarray, below: float = 1e-12) -> np.ndarray:
    """``row`` without its trailing entries below ``below`` (at least one entry kept)."""
    keep = np.flatnonzero(row >= below)
    return row[: max(1, int(keep[-1]) + 1 if keep.size else 1)]


def speed_class_arrays(speeds, fractions) -> tuple[np.ndarray, np.ndarray]:
    """(mu_m decreasing, alpha_m) from per-class ``speeds`` and ``fractions`` (or counts), or from
    per-server ``speeds`` when ``fractions`` is None (equal speeds form one class)."""
    speed = validation.positive_finite_array("speeds", speeds, validation.RATE_RANGE, "a service rate")
    if fractions is None:
        values, counts = np.unique(speed, return_counts=True)
        return values[::-1].copy(), (counts[::-1] / counts.sum()).astype(float)
    weight = validation.positive_finite_array("fractions", fractions)
    if weight.size != speed.size:
        raise InputError("fractions", f"must give one fraction per speed class ({speed.size}), got {weight.size}")
    if np.unique(speed).size != speed.size:
        raise InputError("speeds", "the speed classes must have distinct speeds")
    order = np.argsort(-speed, kind="stable")
    return speed[order], weight[order] / weight.sum()


def check_buffer(buffer) -> int | None:
    if buffer is None:
        return None
    if isinstance(buffer, float) and math.isinf(buffer):
        return None
    return validation.integer("buffer", buffer, low=1, high=10**6)


def policy_parameters(policy: str, params: dict) -> dict:
    """The policy's parameters (its registry entry's, at their defaults unless given): a count is
    an integer in 1..64 here (the solver enumerates samples), a probability one in [0, 1]."""
    registered = THEORY_ONLY[policy][1] if policy in THEORY_ONLY else policy
    kinds = {name: kind for name, (_, _, kind) in POLICIES[registered].parameters.items()}
    unknown = sorted(set(params) - set(kinds))
    if unknown:
        rule = f"takes {', '.join(sorted(kinds))}" if kinds else "takes no parameters"
        raise InputError(unknown[0], f"is not a parameter of {policy}, which {rule}")
    out: dict = POLICIES[registered].defaults()
    for name, value in params.items():
        if value is None:
            continue
        if kinds[name] == COUNT:
            out[name] = validation.integer(name, value, low=1, high=64)
        else:
            out[name] = validation.probability(name, value)
    return out


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
    rules = _rules()
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


# ---------------------------------------------------------------------------------------------
# Ranking policies: explicit fixed points


def fill_in_order(speed, fraction, arrival_rate, order) -> np.ndarray:
    """Busy fractions when idle servers are filled class by class in ``order``: each class takes
    what the previous ones leave, up to its capacity alpha_m mu_m."""
    busy = np.zeros(speed.size)
    left = arrival_rate
    for m in order:
        capacity = fraction[m] * speed[m]
        busy[m] = min(1.0, left / capacity)
        left -= busy[m] * capacity
    return busy


def idle_rate(speed, fraction, target: float, fixed: float, sink: float) -> float:
    """R >= 0 solving fixed + sum_m alpha_m mu_m R / (R + mu_m) + sink R = target (R is the arrival
    rate per free least-key slot; the sum runs over the classes given)."""

    from scipy import optimize  # here: the sampling policies need no SciPy

    def excess(rate):
        return fixed + float(np.sum(fraction * speed * rate / (rate + speed))) + sink * rate - target

    if excess(0.0) >= 0.0:
        return 0.0
    high = float(np.max(speed, initial=1.0))
    while excess(high) < 0.0:
        high *= 2.0
    return float(optimize.brentq(excess, 0.0, high, xtol=1e-15, rtol=4 * np.finfo(float).eps))


def ranking_occupancy(rule: str, speed, fraction, arrival_rate, buffer) -> np.ndarray:
    """s_{m,i} at the fixed point of a ranking policy's ``rule`` (MeanFieldRule.rule;
    docs/background/mean-field.md)."""
    if rule == "idle-uniform":
        rate = idle_rate(speed, fraction, arrival_rate, 0.0, 0.0)
        return (rate / (rate + speed))[:, None]
    if rule == "idle-fastest-first":
        return fill_in_order(speed, fraction, arrival_rate, range(speed.size))[:, None]
    if rule == "idle-slowest-first":
        return fill_in_order(speed, fraction, arrival_rate, reversed(range(speed.size)))[:, None]
    return sed_occupancy(speed, fraction, arrival_rate, buffer)


def sed_occupancy(speed, fraction, arrival_rate, buffer) -> np.ndarray:
    """Shortest expected delay: the slot (class m, level i) has key i / mu_m. Slots below the
    threshold key theta are full, those above empty; at theta the free slots are taken uniformly.
    theta is 1 / mu_K of the class K left partly idle by filling in speed order, or, when a buffer
    is reached first, (b + 1) / mu_0, the key of a full fastest server (arrivals sent there are lost)."""
    if speed[0] / speed[-1] > MAX_SPEED_RATIO:
        raise InputError("speeds", f"sed needs mu_max / mu_min <= {MAX_SPEED_RATIO:g}")
    busy = fill_in_order(speed, fraction, arrival_rate, range(speed.size))
    partly_idle = int(np.flatnonzero(busy < 1.0)[0])
    theta = 1.0 / speed[partly_idle]
    if buffer is not None:
        theta = min(theta, (buffer + 1) / speed[0])
    # levels i with i / mu_m < theta (strictly, up to KEY_TOLERANCE) are full; i = full + 1 may tie.
    ratio = theta * speed
    nearest = np.rint(ratio)
    tied = np.abs(ratio - nearest) <= KEY_TOLERANCE * ratio
    full = np.where(tied, nearest - 1, np.floor(ratio)).astype(np.int64)
    if buffer is not None:
        full = np.minimum(full, buffer)
    sink = tied & (buffer is not None) & (full == (buffer if buffer is not None else -1))
    tied_free = tied & ~sink & (full + 1 <= (buffer if buffer is not None else np.iinfo(np.int64).max))
    served = full >= 1
    level_one = tied_free & (full == 0)
    rate = idle_rate(
        speed[level_one],
        fraction[level_one],
        arrival_rate,
        float(np.sum(fraction[served] * speed[served])),
        float(np.sum(fraction[sink])),
    )
    levels = int(max(1, np.max(full + tied_free)))
    occupancy = np.zeros((speed.size, levels))
    for m in range(speed.size):
        occupancy[m, : full[m]] = 1.0
        if tied_free[m]:
            occupancy[m, full[m]] = rate / (rate + speed[m])
    return occupancy


# ---------------------------------------------------------------------------------------------
# Sampling policies: birth-death classes coupled through the sampled minima


@dataclass(frozen=True)
class SamplingModel:
    """Classes partitioned into speed-blind groups (one for pod and the random policies; fast and
    slow for the JSQ/JIQ(d_F, d_S) family). Arrays carry a leading batch axis: ``tails[..., g, j]``
    is T_{g,j}, the fraction of group-g servers with at least j jobs, j = 0..L. ``rule`` is the
    policy's MeanFieldRule.rule."""

    policy: str
    rule: str
    parameters: dict
    speed: np.ndarray
    fraction: np.ndarray
    arrival_rate: float
    group_of_class: np.ndarray
    group_fraction: np.ndarray

    @property
    def n_groups(self) -> int:
        return self.group_fraction.size

    def class_birth(self, tails: np.ndarray) -> np.ndarray:
        """a_{m,j}: the arrival rate per class-m server at level j = 0..L-1, shape (..., M, L)."""
        lam = self.arrival_rate
        shape = tails.shape[:-2] + (self.speed.size, tails.shape[-1] - 1)
        if self.rule == "uniform":
            return np.full(shape, lam)
        if self.rule == "speed-weighted":
            rho = lam / float(np.sum(self.fraction * self.speed))
            return np.broadcast_to((rho * self.speed)[:, None], shape).copy()
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
        occupancy = birth_death_tails(self.class_birth(tails), self.speed)
        return occupancy, self.group_tails(occupancy)[..., 1:].reshape(batch, -1)


def min_at_level(tail: np.ndarray, d: int) -> np.ndarray:
    """(T_j^d - T_{j+1}^d) / (T_j - T_{j+1}) for j = 0..L-1 (last axis): the chance that the least
    of d sampled servers (with replacement, as N -> infinity) is at level j, per server at level j."""
    high, low = tail[..., :-1], tail[..., 1:]
    return np.sum([high**k * low ** (d - 1 - k) for k in range(d)], axis=0)


def birth_death_tails(birth: np.ndarray, speed: np.ndarray) -> np.ndarray:
    """s_{m,i}, i = 1..L, of birth-death chains on 0..L with birth[..., m, j] (j -> j+1) and death mu_m."""
    with np.errstate(divide="ignore"):
        log_ratio = np.log(birth) - np.log(speed)[:, None]
    log_p = np.concatenate([np.zeros(birth.shape[:-1] + (1,)), np.cumsum(log_ratio, axis=-1)], axis=-1)
    p = np.exp(log_p - log_p.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return np.cumsum(p[..., ::-1], axis=-1)[..., ::-1][..., 1:]


def sampling_model(policy, parameters, speed, fraction, arrival_rate) -> SamplingModel:
    rule = _rules()[policy].rule
    if rule.startswith("fast-slow"):
        group_of_class = np.ones(speed.size, dtype=np.int64)
        group_of_class[0] = 0
    else:
        group_of_class = np.zeros(speed.size, dtype=np.int64)
    group_fraction = np.bincount(group_of_class, weights=fraction)
    return SamplingModel(policy, rule, parameters, speed, fraction, arrival_rate, group_of_class, group_fraction)


def sampling_fixed_point(policy, parameters, speed, fraction, arrival_rate, buffer) -> tuple[np.ndarray, bool]:
    """(s_{m,i}, stable) at the fixed point of a sampling policy. An infinite buffer is truncated
    at L levels, L doubling until the tail is negligible (TAIL_TOLERANCE); the limit is declared
    unstable when a truncated fixed point piles mass at its top level: a birth rate at level L-1
    at least the death rate of some class, or (pod, and jsq-df-ds with d_F, d_S >= 2) a fraction of
    a class at the top level that doubling L does not halve (their birth rates vanish with the
    tails, so a stable tail falls faster than geometrically). With one sample, or jiq-df-ds's random
    busy choice, the birth rate above level 1 is constant and the first test is exact.
    Beyond MAX_LEVELS the load is refused (the queues are too long to be resolved)."""
    model = sampling_model(policy, parameters, speed, fraction, arrival_rate)
    rule = model.rule
    if rule in INDEPENDENT_RULES or (rule == "power-of-d" and parameters["d"] == 1):
        return independent_queues(model, buffer)
    if (
        buffer is None
        and rule == "power-of-d"
        and pod_overloads_slowest(speed, fraction, arrival_rate, parameters["d"])
    ):
        return np.ones((speed.size, 1)), False
    if buffer is not None:  # continuation: the fixed point with fewer levels starts the next
        solution = solve_sampling(model, min(FIRST_LEVELS, buffer), None)
        if buffer > FIRST_LEVELS:
            solution = solve_sampling(model, buffer, extend_levels(solution, buffer))
        return solution, True
    levels = FIRST_LEVELS
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
        if np.any(top_birth >= speed) or (vanishing and previous_top is not None and np.any(top > 0.5 * previous_top)):
            return np.ones((speed.size, 1)), False
        previous_top = top
        if 2 * levels > MAX_LEVELS:
            raise InputError(
                "load",
                f"{policy}'s queues at load {arrival_rate / float(np.sum(fraction * speed)):g} reach beyond "
                f"{MAX_LEVELS} jobs per server; give a buffer (--buffer) or a lower load",
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
    """random and weighted-random: every server an M/M/1/b queue (arrival rate a_m, service mu_m),
    at every N; with b infinite, unstable when some a_m >= mu_m."""
    birth = model.class_birth(np.ones((1, 2)))[:, 0]
    if buffer is None:
        ratio = float(np.max(birth / model.speed))
        if ratio >= 1.0:
            return np.ones((model.speed.size, 1)), False
        levels = max(1, math.ceil(math.log(TAIL_TOLERANCE) / math.log(ratio)))
        if levels > MAX_CLOSED_FORM_LEVELS:
            raise InputError("load", f"the queues at this load reach beyond {MAX_CLOSED_FORM_LEVELS} jobs per server")
    else:
        levels = buffer
    return birth_death_tails(np.repeat(birth[:, None], levels, axis=1), model.speed), True


def pod_overloads_slowest(speed, fraction, arrival_rate, d) -> bool:
    """True when, for some k, the k slowest classes (a fraction beta of the servers) cannot serve
    lambda beta^d, the arrivals whose d samples all fall among them: their queues then grow
    without bound in the limit (speed-blind pod is unstable there although rho < 1)."""
    beta = np.cumsum(fraction[::-1])
    capacity = np.cumsum((fraction * speed)[::-1])
    return bool(np.any(arrival_rate * beta**d >= capacity))


def trim_levels(occupancy: np.ndarray) -> np.ndarray:
    keep = np.flatnonzero(occupancy.max(axis=0) >= TAIL_TOLERANCE)
    return occupancy[:, : max(1, int(keep[-1]) + 1 if keep.size else 1)].copy()


NEWTON_STEPS = 50
START_STEPS = 40
START_TOLERANCE = 1e-2
DAMPED_STEPS = 20000
FD_STEP = 1e-7
HALVINGS = 6
PSEUDO_STEPS = 4 * MAX_LEVELS
MAX_PSEUDO_STEP = 1e12
PSEUDO_GROWTH = 2.0


def residual_of(model: SamplingModel, current: np.ndarray) -> np.ndarray:
    return model.step(current[None, :])[1][0] - current


def damped(model: SamplingModel, current: np.ndarray, steps: int, tolerance: float) -> np.ndarray:
    """Iterate T <- (T + Phi(T)) / 2 until |Phi(T) - T| < tolerance or ``steps`` iterations."""
    for _ in range(steps):
        residual = residual_of(model, current)
        if np.max(np.abs(residual)) < tolerance:
            break
        current = current + 0.5 * residual
    return current


def solve_sampling(model: SamplingModel, levels: int, guess) -> np.ndarray:
    """The fixed point T = Phi(T) of the groups' tails T_{g,1..L}: damped iterates of Phi from the
    empty system (or from ``guess``), then Newton's method with the Jacobian of phi_jacobian and a
    backtracking line search; pseudo-transient continuation when the line search stalls, and a
    long damped iteration followed by Newton's method when that fails too. All stop at
    |Phi(T) - T| < RESIDUAL_TOLERANCE."""
    size = model.n_groups * levels
    current = np.zeros(size) if guess is None else model.group_tails(guess)[:, 1:].ravel()
    current = damped(model, current, START_STEPS, START_TOLERANCE)
    solution = newton(model, current)
    if solution is None:
        solution = pseudo_transient(model, current)
    if solution is None:
        current = damped(model, current, DAMPED_STEPS, RESIDUAL_TOLERANCE)
        solution = newton(model, current)
        if solution is None:
            raise RuntimeError(f"{model.policy}: the mean-field fixed point did not converge")
    return model.step(solution[None, :])[0][0]


def newton(model: SamplingModel, current: np.ndarray) -> np.ndarray | None:
    """Newton's method on T - Phi(T) = 0 from ``current``; None when it does not converge."""
    size = current.size
    identity = np.eye(size)
    residual = residual_of(model, current)
    for _ in range(NEWTON_STEPS):
        if np.max(np.abs(residual)) < RESIDUAL_TOLERANCE:
            return current
        jacobian = phi_jacobian(model, current) - identity
        try:
            change = np.linalg.solve(jacobian, -residual)
        except np.linalg.LinAlgError:
            return None
        norm = np.max(np.abs(residual))
        for _ in range(HALVINGS):
            trial = np.clip(current + change, 0.0, 1.0)
            trial_residual = residual_of(model, trial)
            if np.max(np.abs(trial_residual)) < norm:
                break
            change = change / 2.0
        else:
            return None
        current, residual = trial, trial_residual
    return current if np.max(np.abs(residual)) < RESIDUAL_TOLERANCE else None


def pseudo_transient(model: SamplingModel, current: np.ndarray) -> np.ndarray | None:
    """Pseudo-transient continuation on dT/dtau = Phi(T) - T from ``current``: implicit Euler steps
    (I / delta - (dPhi/dT - I)) change = Phi(T) - T, the pseudo time step delta growing as the
    residual falls (PSEUDO_GROWTH times the ratio of successive residuals, up to Newton's method as
    delta grows without bound) and cut by 4 when a step more than doubles the residual. Small steps follow
    the flow towards the fixed point where Newton's line search stalls (jobs filling the queues of
    the slowest servers one level per step); None when it does not converge in PSEUDO_STEPS."""
    identity = np.eye(current.size)
    residual = residual_of(model, current)
    norm = float(np.max(np.abs(residual)))
    delta = 1.0
    for _ in range(PSEUDO_STEPS):
        if norm < RESIDUAL_TOLERANCE:
            return current
        try:
            change = np.linalg.solve(identity / delta - (phi_jacobian(model, current) - identity), residual)
        except np.linalg.LinAlgError:
            return None
        trial = np.clip(current + change, 0.0, 1.0)
        trial_residual = residual_of(model, trial)
        trial_norm = float(np.max(np.abs(trial_residual)))
        if trial_norm > 2.0 * norm:
            delta /= 4.0
            continue
        delta = min(PSEUDO_GROWTH * delta * norm / max(trial_norm, RESIDUAL_TOLERANCE), MAX_PSEUDO_STEP)
        current, residual, norm = trial, trial_residual, trial_norm
    return None


def phi_jacobian(model: SamplingModel, current: np.ndarray) -> np.ndarray:
    """dPhi/dT at the tails T_{g,1..L} = ``current`` (flattened), by the chain rule through the
    chains: a birth-death chain's tails s_i (i = 1..L) move with its log birth rate at level j as
    ds_i / d(log a_j) = s_{max(i, j+1)} - s_i s_{j+1}, and a class's birth rate a_{m,j} depends on
    its group's T_{g,j} and T_{g,j+1} and on the T_{g',1} of every group (true of pod, jsq-df-ds and
    jiq-df-ds). Those derivatives come from forward differences of the birth rates alone, with the
    levels j >= 2 perturbed three at a time (levels three apart touch disjoint birth rates): a few
    batched evaluations, and O(M L^2) work, instead of one evaluation of Phi per column."""
    n_groups, n_classes = model.n_groups, model.speed.size
    levels = current.size // n_groups
    inner = np.clip(current.reshape(n_groups, levels), 0.0, 1.0)
    step = np.where(inner + FD_STEP > 1.0, -FD_STEP, FD_STEP)  # stay inside [0, 1]
    level = np.arange(1, levels + 1)
    perturbations = [
        np.where((level == 1)[None, :] & (np.arange(n_groups) == g)[:, None], step, 0.0) for g in range(n_groups)
    ]
    perturbations += [np.where(((level >= 2) & (level % 3 == r))[None, :], step, 0.0) for r in range(3)]
    tails = np.ones((1 + len(perturbations), n_groups, levels + 1))
    tails[0, :, 1:] = inner
    tails[1:, :, 1:] = inner[None] + np.array(perturbations)
    birth = model.class_birth(tails)  # (batch, M, L): a_{m,j}, j = 0..L-1
    change = birth[1:] - birth[0]
    occupancy = birth_death_tails(birth[0], model.speed)  # s_{m,i}, i = 1..L
    index = np.arange(levels)
    sensitivity = (
        occupancy[:, np.maximum(index[:, None], index[None, :])] - occupancy[:, :, None] * occupancy[:, None, :]
    )
    with np.errstate(divide="ignore", invalid="ignore"):  # ds_{m,i} / da_{m,j}; 0 where a_{m,j} = 0
        sensitivity = np.where(birth[0][:, None, :] > 0, sensitivity / birth[0][:, None, :], 0.0)
    own_step = step[model.group_of_class]  # (M, L): the step of T_{g(m),k}, k = 1..L
    colour = change[n_groups:]  # the three level-strided perturbations
    by_next = np.zeros((n_classes, levels))  # da_{m,j} / dT_{g(m),j+1}, j = 1..L-1
    by_same = np.zeros((n_classes, levels))  # da_{m,j} / dT_{g(m),j}, j = 2..L-1
    above_one, above_two = np.arange(1, levels), np.arange(2, levels)
    by_next[:, above_one] = colour[(above_one + 1) % 3, :, above_one].T / own_step[:, above_one]
    by_same[:, above_two] = colour[above_two % 3, :, above_two].T / own_step[:, above_two - 1]
    column = np.zeros((n_classes, levels, levels))  # ds_{m,i} / dT_{g(m),k}, k = 2..L
    column[:, :, 1:] = sensitivity[:, :, 1:] * by_next[:, None, 1:]
    column[:, :, 1:-1] += sensitivity[:, :, 2:] * by_same[:, None, 2:]
    weight = np.zeros((n_groups, n_classes))
    weight[model.group_of_class, np.arange(n_classes)] = model.fraction / model.group_fraction[model.group_of_class]
    jacobian = np.zeros((n_groups, levels, n_groups, levels))
    for g in range(n_groups):
        jacobian[g, :, g, :] = np.einsum("m,mik->ik", weight[g], column)
        for other in range(n_groups):  # the columns of T_{other,1}
            by_first = change[other] / step[other, 0]
            jacobian[g, :, other, 0] = np.einsum("m,mij,mj->i", weight[g], sensitivity, by_first)
    return jacobian.reshape(n_groups * levels, n_groups * levels)


def pod_equal_servers_response_time(load: float, d: int, terms: int = 200) -> float:
    """Mean response time of pod(d) on equal servers of speed 1 as N -> infinity (Mitzenmacher;
    Vvedenskaya et al.): s_i = rho^((d^i - 1)/(d - 1)), so E[T] = sum_i s_i / rho
    = sum_{i >= 1} rho^((d^i - d)/(d - 1)) (and rho^(i-1) summed, 1 / (1 - rho), for d = 1)."""
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


# ---------------------------------------------------------------------------------------------
# Transients


@dataclass(frozen=True, eq=False)
class MeanFieldTrajectory:
    """The ODE solution: ``occupancy[t, m, i-1]`` = s_{m,i}(times[t]); ``mean_number_in_system[t]``
    jobs per server."""

    times: np.ndarray
    occupancy: np.ndarray
    class_speed: np.ndarray
    class_fraction: np.ndarray

    @property
    def mean_number_in_system(self) -> np.ndarray:
        return np.einsum("m,tmi->t", self.class_fraction, self.occupancy)


def mean_field_trajectory(
    speeds, fractions=None, *, load, policy: str = "pod", times, buffer=None, initial=None, levels=None, **params
) -> MeanFieldTrajectory:
    """Integrate the mean-field ODE ds_{m,i}/dt = a_{m,i-1}(s) (s_{m,i-1} - s_{m,i})
    - mu_m (s_{m,i} - s_{m,i+1}) of a sampling policy from ``initial`` (s_{m,i}; default empty).

    times: increasing output times (time units, from 0). levels: truncation of an infinite
    buffer (default: twice the fixed point's, at least 32). The ranking policies have a
    discontinuous drift (a differential inclusion) and are refused.
    """
    from scipy.integrate import solve_ivp  # here: the fixed points need no ODE solver

    policy = validation.choice("policy", policy, _sampling())
    limit = mean_field(speeds, fractions, load=load, policy=policy, buffer=buffer, **params)
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
    model = sampling_model(limit.policy, limit.parameters, speed, fraction, limit.arrival_rate)

    def drift(_, flat):
        s = flat.reshape(speed.size, n_levels)
        padded = np.concatenate([np.ones((speed.size, 1)), s, np.zeros((speed.size, 1))], axis=1)
        birth = model.class_birth(model.group_tails(s))
        exactly = padded[:, :-1] - padded[:, 1:]  # fraction at level j = 0..L
        return (birth * exactly[:, :-1] - speed[:, None] * exactly[:, 1:]).ravel()

    solution = solve_ivp(
        drift, (0.0, float(times[-1])), start.ravel(), t_eval=times, method="LSODA", rtol=1e-8, atol=1e-11
    )
    if not solution.success:
        raise RuntimeError(f"the mean-field ODE failed: {solution.message}")
    occupancy = solution.y.T.reshape(times.size, speed.size, n_levels)
    return MeanFieldTrajectory(times=times, occupancy=occupancy, class_speed=speed, class_fraction=fraction)


def mean_field_settling_time(limit: MeanFieldLimit, tolerance: float = 1e-3, horizon: float = 1e5) -> float:
    """A warm-up for simulating ``limit``'s system from empty (time units): for a sampling
    policy, the time its ODE takes from the empty system to come within ``tolerance`` (relative)
    of the fixed point's jobs per server (``horizon`` when it does not; for random and
    weighted-random, ln(1/tolerance) over the least spectral gap mu_m (1 - sqrt(rho_m))^2 of their
    M/M/1 queues); for a ranking policy
    (no queueing in the limit, relaxation on the scale of a service time), 20 response times or
    2 ln(1/tolerance) mean service times of the slowest busy class, whichever is longer; for
    sed, whose fast servers hold queues that fill from empty only with the arrivals beyond the
    capacity of the classes faster than K, twice the waiting jobs over that surplus, in addition."""
    rule = _rules()[limit.policy]
    if rule.rule == "least-expected-delay":  # from empty, the queues of the faster classes fill with the surplus
        busy = fill_in_order(limit.class_speed, limit.class_fraction, limit.arrival_rate, range(limit.class_speed.size))
        faster = busy >= 1.0
        surplus = limit.arrival_rate - float(np.sum(limit.class_fraction[faster] * limit.class_speed[faster]))
        waiting = limit.mean_number_in_system - float(np.sum(limit.class_fraction * limit.occupancy[:, 0]))
        return 20.0 * limit.mean_response_time + (2.0 * waiting / surplus if waiting > 0 and surplus > 0 else 0.0)
    if rule.ranking:  # the busy fractions relax at the service rates of the busy classes
        slowest = float(np.min(limit.class_speed[limit.occupancy[:, 0] > 0]))
        return max(20.0 * limit.mean_response_time, 2.0 * math.log(1.0 / tolerance) / slowest)
    if not limit.stable:
        raise InputError(
            "policy", f"{limit.policy} has no stable limit at load {limit.load:g}: its queues grow without bound"
        )
    if rule.rule in INDEPENDENT_RULES:  # M/M/1: spectral gap mu (1 - sqrt(rho_m))^2
        model = sampling_model(
            limit.policy, limit.parameters, limit.class_speed, limit.class_fraction, limit.arrival_rate
        )
        load = model.class_birth(np.ones((1, 2)))[:, 0] / limit.class_speed
        gap = limit.class_speed * (1.0 - np.sqrt(np.minimum(load, 1.0))) ** 2
        return float(min(horizon, math.log(1.0 / tolerance) / max(float(np.min(gap)), 1.0 / horizon)))
    times = np.geomspace(0.01, horizon, 400)
    path = mean_field_trajectory(
        limit.class_speed,
        limit.class_fraction,
        load=limit.load,
        policy=limit.policy,
        times=times,
        buffer=limit.buffer,
        **limit.parameters,
    )
    gap = np.abs(path.mean_number_in_system / limit.mean_number_in_system - 1.0)
    settled = np.flatnonzero(gap < tolerance)
    return float(times[settled[0]]) if settled.size else float(times[-1])


def server_speeds(class_speed, class_fraction, n_servers: int) -> np.ndarray:
    """Per-server speeds of an N-server fleet with the classes' fractions (largest remainders:
    each class gets floor(N alpha_m) servers, the leftover ones go to the largest remainders)."""
    n_servers = validation.integer("n_servers", n_servers, low=1, high=validation.MAX_COUNT)
    speed = np.asarray(class_speed, dtype=float)
    fraction = np.asarray(class_fraction, dtype=float)
    exact = n_servers * fraction / fraction.sum()
    counts = np.floor(exact).astype(np.int64)
    leftover = n_servers - int(counts.sum())
    counts[np.argsort(-(exact - counts), kind="stable")[:leftover]] += 1
    if np.any(counts == 0):
        raise InputError("n_servers", f"{n_servers} servers leave a speed class empty; give at least {speed.size}")
    return np.repeat(speed, counts)
