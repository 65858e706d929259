"""Halfin-Whitt diffusion limits of JSQ with individually heterogeneous servers (paper 002).

Paper 002 (Buke, Mukhopadhyay, Tekin) lets n servers with rates mu_k (jobs per time unit, limiting
distribution F on S = [mu_min, mu_max], mean mu_bar) receive Poisson arrivals at rate n lambda^n,
with sum_k mu_k = n lambda^n + n^{1/2} c: the excess capacity c = varsigma + nu (002 App. C.2).
In the n^{-1/2} scaling X_1 = n^{-1/2} (Q_1 - n) <= 0 (minus the scaled number of idle servers),
X_i = n^{-1/2} Q_i (servers with >= i jobs) and xi_2(A) = n^{-1/2} #{k : mu_k in A, Q_k >= 2},
Theorem 4.1 gives, for a tie-breaking rule pi with limiting fairness process eta^pi and routing
measure alpha_1^pi,

    dX_1 = (-c - <iota, eta^pi> X_1 + <iota, xi_2>) dt + sqrt(2 mu_bar) dW - dU_1,   X_1 <= 0,
    d<f, xi_2> = <f, alpha_1^pi> dU_1 - <f iota, xi_2> dt                          (xi_3 = 0),

with U_1 nondecreasing, increasing only when X_1 = 0. This module writes <., xi_2> in a finite
basis f_1..f_m closed under multiplication by iota on the support of F, which turns the weak form
into a linear system driven by U_1 (:class:`DiffusionLimit`), and simulates it with one
integrator for every policy (Corollaries 4.4 to 4.7). Levels i >= 3 receive no routing term in the
limit, so started at 0 they stay 0, and their stationary limit is 0 (Corollary 4.9): X_3 = 0.
"""

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from hetlb import validation
from hetlb.errors import InputError
from hetlb.model.system import RATE_RULE
from hetlb.policies.registry import POLICIES

__all__ = [
    "DIFFUSION_POLICIES",
    "DiffusionLimit",
    "DiffusionPaths",
    "DiffusionStationary",
    "ReflectedOUStationary",
    "SpeedLaw",
    "continuous_speeds",
    "default_step",
    "diffusion_paths",
    "policy_diffusion",
    "reflected_ou_stationary",
    "diffusion_relaxation_time",
    "speed_pools",
    "stationary_diffusion",
    "stationary_mean_x1",
]

DIFFUSION_POLICIES: dict[str, str] = {
    spec.id: spec.diffusion.result for spec in POLICIES.values() if spec.diffusion is not None
}
"""The policies with a diffusion limit in 002 (PolicySpec.diffusion): id -> the result giving it. The
limit's idle rate and routing measure are the DiffusionRule's (:func:`policy_diffusion`)."""

_RANDOM_BLOCK_STEPS = 512

MAX_COORDINATES = 2000
"""The most coordinates of xi_2 (distinct speeds of the pool basis) a DiffusionLimit built here
has: its level matrix is m x m (32 MB at m = 2000) and each step costs paths x m."""

MAX_STEPS = 5 * 10**6
MAX_STEP_WORK = 2 * 10**9
"""The most steps, and steps x paths x (coordinates + 1), a simulation of the SDE may take: a few
minutes (a step costs some 30 microseconds plus its arithmetic; the default stationary run of a
uniform F takes 2.2e4 steps and 1.1e7 of that work). More steps mean the SDE's time scales are too
far apart for an explicit scheme (a fine step over a long relaxation), and the run is refused."""


# --- validation ----------------------------------------------------------------------------------


# --- the speed distribution F --------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class SpeedLaw:
    """The limiting speed distribution F of Assumption 3.1 (002) as weighted nodes.

    Parameters
    ----------
    rate
        ``rate[j]``, the service rates mu_j (jobs per time unit).
    weight
        ``weight[j]`` >= 0, their masses (summing to 1): the pools gamma_j of Corollary 4.6, or a
        quadrature rule for a continuous F.
    rate_min, rate_max
        mu_min and mu_max, the ends of the support S.
    """

    rate: np.ndarray
    weight: np.ndarray
    rate_min: float
    rate_max: float

    @property
    def mean(self) -> float:
        """mu_bar = <iota, F>, jobs per time unit."""
        return float(self.weight @ self.rate)

    @property
    def second_moment(self) -> float:
        """<iota^2, F> = mu_bar^2 + sigma_F^2."""
        return float(self.weight @ self.rate**2)

    @property
    def variance(self) -> float:
        """sigma_F^2."""
        return self.second_moment - self.mean**2


def _frozen_speed_law(rate: np.ndarray, weight: np.ndarray, rate_min: float, rate_max: float) -> SpeedLaw:
    for array in (rate, weight):
        array.setflags(write=False)
    return SpeedLaw(rate=rate, weight=weight, rate_min=float(rate_min), rate_max=float(rate_max))


def speed_pools(rate, fraction=None) -> SpeedLaw:
    """A discrete F = sum_j gamma_j delta_{mu_j}: the pools of Corollary 4.6.

    Parameters
    ----------
    rate
        The pool rates mu_j (jobs per time unit); without ``fraction``, the speeds of individual
        servers, and F is their empirical distribution F_n (equal speeds pooled).
    fraction
        The pool fractions gamma_j (positive, summing to 1).
    """
    rate = validation.positive_finite_array("rate", rate, validation.RATE_RANGE, RATE_RULE)
    if fraction is None:
        rate, counts = np.unique(rate, return_counts=True)
        return _frozen_speed_law(rate, counts / counts.sum(), rate[0], rate[-1])
    fraction = validation.positive_finite_array("fraction", fraction)
    if fraction.size != rate.size:
        raise InputError("fraction", f"must have one entry per pool rate ({rate.size}), got {fraction.size}")
    if abs(fraction.sum() - 1.0) > 1e-9:
        raise InputError("fraction", f"pool fractions must sum to 1, got {fraction.sum():.12g}")
    return _frozen_speed_law(rate.copy(), fraction.copy(), rate.min(), rate.max())


def continuous_speeds(low, high, density=None, n_nodes=8) -> SpeedLaw:
    """F with a density on S = [low, high] (uniform by default), as an n_nodes Gauss-Legendre rule.

    The rule integrates polynomials of degree 2 n_nodes - 1 exactly against a uniform F, so
    <iota^2, F> and the smooth functionals mu -> mu e^{-mu t} that drive xi_2 are accurate to
    rounding for n_nodes = 8 on S = [0.7, 1.3].
    mu_min = low and mu_max = high are the support ends, not the outermost nodes.

    Parameters
    ----------
    low, high
        The support's ends mu_min < mu_max (jobs per time unit).
    density
        A function of the rate, known up to a constant factor (None: uniform).
    n_nodes
        The nodes of the rule.
    """
    low, high = validation.number("low", low), validation.number("high", high)
    validation.positive_finite_array("low", low, validation.RATE_RANGE, RATE_RULE)
    validation.positive_finite_array("high", high, validation.RATE_RANGE, RATE_RULE)
    if low <= 0:
        raise InputError("low", f"must be a positive finite rate (jobs per time unit), got {low}")
    if high <= low:
        raise InputError("high", f"must be finite and above low = {low}, got {high}")
    n_nodes = validation.integer("n_nodes", n_nodes, low=1, high=MAX_COORDINATES)
    unit_nodes, unit_weights = np.polynomial.legendre.leggauss(n_nodes)
    rate = low + (high - low) * (unit_nodes + 1.0) / 2.0
    weight = unit_weights.copy()
    if density is not None:
        weight = weight * np.asarray([float(density(mu)) for mu in rate])
        if not np.all(np.isfinite(weight) & (weight >= 0)) or weight.sum() <= 0:
            raise InputError("density", "must be finite, non-negative and not zero on [low, high]")
    return _frozen_speed_law(rate, weight / weight.sum(), low, high)


# --- the reflected SDE ---------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class DiffusionLimit:
    """The reflected SDE of Theorem 4.1 (002), with xi_2 in a finite basis of m coordinates Y:

        dX_1 = (-excess_capacity - idle_rate X_1 + departure_weight . Y) dt
               + sqrt(noise_variance) dW - dU_1,                        X_1 <= 0,
        dY   = routing dU_1 + level_matrix Y dt,                          X_2 = count_weight . Y.

    ``excess_capacity`` is c = varsigma + nu; ``idle_rate`` is <iota, eta^pi> (per time unit);
    ``noise_variance`` is 2 mu_bar (the printed 2 W(t) of 002, i.e. sqrt(2) W with mu_bar = 1).
    With the pool basis Y_j = xi_2({mu_j}): routing = alpha_1's masses, level_matrix = -diag(mu_j),
    departure_weight = mu_j, count_weight = 1. ``buffer`` = 1 is the loss system (Prop 5.2 with
    b = 1): m = 0 and U_1 counts lost jobs.

    Parameters
    ----------
    excess_capacity
        c = varsigma + nu.
    idle_rate
        <iota, eta^pi> (per time unit).
    noise_variance
        2 mu_bar.
    routing
        Where U_1 moves jobs among the coordinates Y.
    level_matrix
        The drift matrix of Y.
    departure_weight
        The weights of Y in the drift of X_1.
    count_weight
        The weights that give X_2 from Y.
    buffer
        b (None: infinite; 1: the loss system).
    policy
        The policy's id ("custom" for a limit built by hand).
    """

    excess_capacity: float
    idle_rate: float
    noise_variance: float
    routing: np.ndarray
    level_matrix: np.ndarray
    departure_weight: np.ndarray
    count_weight: np.ndarray
    buffer: int | None = None
    policy: str = "custom"

    def __post_init__(self):
        low, high = validation.RATE_RANGE
        excess_capacity = validation.number("excess_capacity", self.excess_capacity, -high, high=high)
        if excess_capacity != 0 and abs(excess_capacity) < low:
            raise InputError(
                "excess_capacity", f"must be 0 or of magnitude in [{low:g}, {high:g}], got {excess_capacity!r}"
            )
        object.__setattr__(self, "excess_capacity", excess_capacity)
        for name in ("idle_rate", "noise_variance"):
            object.__setattr__(self, name, validation.number(name, getattr(self, name)))
        if self.idle_rate <= 0:
            raise InputError("idle_rate", f"must be positive (per time unit), got {self.idle_rate}")
        if self.noise_variance <= 0:
            raise InputError("noise_variance", f"must be positive, got {self.noise_variance}")
        for name in ("idle_rate", "noise_variance"):
            validation.positive_finite_array(name, getattr(self, name), validation.RATE_RANGE, RATE_RULE)
        vectors = {
            name: np.array(getattr(self, name), dtype=float) for name in ("routing", "departure_weight", "count_weight")
        }
        matrix = np.array(self.level_matrix, dtype=float)
        m = vectors["routing"].size
        if matrix.shape != (m, m):
            raise InputError("level_matrix", f"must be {m} x {m} (one row per routing coordinate)")
        for name, vector in vectors.items():
            if vector.shape != (m,):
                raise InputError(name, f"must have {m} entries, one per routing coordinate")
        for name, array in (*vectors.items(), ("level_matrix", matrix)):
            if not np.all(np.isfinite(array)):
                raise InputError(name, "every entry must be finite")
            array.setflags(write=False)
            object.__setattr__(self, name, array)
        if self.buffer is not None and (m == 0) != (self.buffer == 1):
            raise InputError("buffer", "a loss system (buffer 1) has no level coordinates, any other buffer has some")

    @property
    def n_coordinates(self) -> int:
        """m, the number of coordinates of xi_2."""
        return self.routing.size


def policy_diffusion(policy: str, speeds: SpeedLaw, excess_capacity, buffer=None) -> DiffusionLimit:
    """The diffusion limit of JSQ with tie-breaking ``policy`` in the pool basis.

    Parameters
    ----------
    policy
        One of DIFFUSION_POLICIES.
    speeds
        F, the law of the speeds (``speed_pools`` or ``continuous_speeds``).
    excess_capacity
        c = varsigma + nu = n^{-1/2} (sum_k mu_k - n lambda^n) in the limit.
    buffer
        b of 002 section 5 (jobs a server holds, the one in service included): None (infinite, the
        corollaries) or any b >= 2 give the same limit, since levels >= 3 are never reached; b = 1
        is the loss system, whose X_1 is a reflected Ornstein-Uhlenbeck process.
    """
    rule = POLICIES[policy].diffusion if policy in POLICIES else None
    if rule is None:
        raise InputError("policy", f"unknown policy {policy!r}; choose one of: {', '.join(DIFFUSION_POLICIES)}")
    if not isinstance(speeds, SpeedLaw):
        raise InputError("speeds", "must be a SpeedLaw from speed_pools() or continuous_speeds()")
    buffer = None if buffer is None else validation.count("buffer", buffer)
    if speeds.rate.size > MAX_COORDINATES and rule.routing_measure == "law" and buffer != 1:
        raise InputError(
            "speeds",
            f"{policy} has one coordinate of xi_2 per distinct speed, at most {MAX_COORDINATES:,}, got "
            f"{speeds.rate.size:,}: pool the speeds (e.g. 500x0.8,500x1.2) or give their law",
        )
    idle_rate = {
        "slowest": speeds.rate_min,
        "fastest": speeds.rate_max,
        "size-biased": speeds.second_moment / speeds.mean,
    }[rule.idle_measure]
    if buffer == 1:
        basis_rate, routing = np.zeros(0), np.zeros(0)
    elif rule.routing_measure == "fastest":
        basis_rate, routing = np.array([speeds.rate_max]), np.ones(1)
    elif rule.routing_measure == "slowest":
        basis_rate, routing = np.array([speeds.rate_min]), np.ones(1)
    else:
        basis_rate, routing = speeds.rate.copy(), speeds.weight.copy()
    return DiffusionLimit(
        excess_capacity=excess_capacity,
        idle_rate=idle_rate,
        noise_variance=2.0 * speeds.mean,
        routing=routing,
        level_matrix=-np.diag(basis_rate),
        departure_weight=basis_rate,
        count_weight=np.ones(basis_rate.size),
        buffer=buffer,
        policy=policy,
    )


# --- closed forms --------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class ReflectedOUStationary:
    """Stationary law of dX = (-c - kappa X) dt + sigma dW - dU, X <= 0 (the loss system's X_1).

    X is N(-c / kappa, sigma^2 / (2 kappa)) conditioned on X <= 0.

    Parameters
    ----------
    mean_x1, std_x1
        The mean and standard deviation of X.
    loss_rate
        E[dU / dt] = (sigma^2 / 2) p(0), the scaled rate of lost jobs: n^{1/2} times the Erlang-B
        blocking probability in the limit (Jagerman).
    law
        The law of X, a frozen scipy distribution.
    """

    mean_x1: float
    std_x1: float
    loss_rate: float
    law: object


def reflected_ou_stationary(excess_capacity, idle_rate, noise_variance) -> ReflectedOUStationary:
    """The stationary law of the reflected OU process with drift -c - kappa x and variance sigma^2.

    Parameters
    ----------
    excess_capacity
        c, any real.
    idle_rate
        kappa > 0 (per time unit).
    noise_variance
        sigma^2 > 0.
    """
    limit = DiffusionLimit(
        excess_capacity, idle_rate, noise_variance, np.zeros(0), np.zeros((0, 0)), np.zeros(0), np.zeros(0), buffer=1
    )
    centre = -limit.excess_capacity / limit.idle_rate
    scale = np.sqrt(limit.noise_variance / (2.0 * limit.idle_rate))
    law = stats.truncnorm(-np.inf, (0.0 - centre) / scale, loc=centre, scale=scale)
    loss_rate = 0.5 * limit.noise_variance * float(law.pdf(0.0))
    return ReflectedOUStationary(mean_x1=float(law.mean()), std_x1=float(law.std()), loss_rate=loss_rate, law=law)


def stationary_mean_x1(limit: DiffusionLimit) -> float:
    """The exact stationary E[X_1]: -c / <iota, eta^pi> with infinite buffers, the truncated normal mean if b = 1.

    With infinite buffers, X_1 + X_2 has drift -c - idle_rate X_1 (U_1 moves jobs from level 1 to
    level 2 and <iota, xi_2> back), so stationarity forces idle_rate E[-X_1] = c: the idle
    servers' capacity equals the excess capacity. Requires a stationary regime (c > 0).

    Parameters
    ----------
    limit
        The diffusion limit (policy_diffusion).
    """
    _require_stationary(limit)
    if limit.n_coordinates == 0:
        return reflected_ou_stationary(limit.excess_capacity, limit.idle_rate, limit.noise_variance).mean_x1
    return -limit.excess_capacity / limit.idle_rate


def _require_stationary(limit: DiffusionLimit) -> None:
    if not isinstance(limit, DiffusionLimit):
        raise InputError("limit", "must be a DiffusionLimit, e.g. from policy_diffusion()")
    if limit.n_coordinates > 0 and limit.excess_capacity <= 0:
        raise InputError(
            "excess_capacity", f"must be > 0 for a stationary regime (Lemma 3.10 of 002), got {limit.excess_capacity}"
        )


# --- the integrator ------------------------------------------------------------------------------


def _level_rates(limit: DiffusionLimit) -> np.ndarray:
    """|eigenvalues| of the level matrix: its diagonal when it is diagonal (the pool basis), which
    skips an O(m^3) eigensolver."""
    matrix = limit.level_matrix
    if np.count_nonzero(matrix) == np.count_nonzero(np.diagonal(matrix)):
        return np.abs(np.diagonal(matrix))
    return np.abs(np.linalg.eigvals(matrix))


def _fastest_rate(limit: DiffusionLimit) -> float:
    level_rate = _level_rates(limit).max(initial=0.0)
    return max(limit.idle_rate, level_rate)


def default_step(limit: DiffusionLimit) -> float:
    """0.01 over the fastest rate of the SDE: idle_rate, the level decay rates and c^2 / sigma^2 (time units).

    The scheme's bias is first order in the step; at this step it is about 0.5 % of the loss rate
    of the reflected OU process with c = 1 (docs/reference/diffusion.md).

    Parameters
    ----------
    limit
        The diffusion limit (policy_diffusion).
    """
    drift_rate = limit.excess_capacity**2 / limit.noise_variance
    return 0.01 / max(_fastest_rate(limit), drift_rate)


def _checked_seed(seed):
    """A seed for numpy's default_rng: an integer >= 0, or a SeedSequence or Generator as is."""
    if validation.is_integer(seed):
        return validation.seed("seed", seed)
    if seed is None or isinstance(seed, (np.random.SeedSequence, np.random.Generator, np.random.BitGenerator)):
        return seed
    raise InputError("seed", f"must be an integer >= 0 or a numpy SeedSequence, got {validation.shown(seed)}")


def _checked_step(limit: DiffusionLimit, step) -> float:
    if step is None:
        return default_step(limit)
    step = validation.positive_number("step", step)
    if step * _fastest_rate(limit) >= 0.5:
        raise InputError(
            "step",
            f"must be below 0.5 / {_fastest_rate(limit):.6g} (half the fastest time scale "
            f"of the SDE) for a stable explicit step, got {step}",
        )
    return step


def diffusion_relaxation_time(limit: DiffusionLimit) -> float:
    """A time scale for the approach to stationarity (time units).

    The slowest of 1 / idle_rate, 1 / (slowest level decay rate) and sigma^2 / (2 c^2), the time the
    total X_1 + X_2, a Brownian motion with drift -c while X_1 is near 0, takes to drain an
    excursion of its typical size sigma^2 / (2 c).

    Parameters
    ----------
    limit
        The diffusion limit (policy_diffusion).
    """
    level_rate = _level_rates(limit).min(initial=np.inf)
    slowest_rate = min(limit.idle_rate, level_rate)
    if limit.n_coordinates == 0 or limit.excess_capacity <= 0:
        return 1.0 / slowest_rate
    squared = limit.excess_capacity**2
    drain_time = limit.noise_variance / (2.0 * squared) if squared > 0 else math.inf  # c^2 may underflow
    return max(1.0 / slowest_rate, drain_time)


def _check_work(limit: DiffusionLimit, n_paths: int, step: float, duration: float, n_snapshots: int) -> int:
    """The number of steps of ``step`` over ``duration`` time units, after refusing a simulation of
    ``n_paths`` paths whose work (steps x paths x (coordinates + 1)) passes MAX_STEP_WORK or whose
    arrays pass the machine's memory."""
    n_steps = duration / step
    if not n_steps <= MAX_STEPS:
        raise InputError(
            "excess_capacity",
            f"the SDE would take about {validation.quantity(n_steps)} steps of {step:.3g} over {duration:.3g} "
            f"time units, more than {validation.quantity(MAX_STEPS)}: its time scales are too far apart "
            f"(relaxation {diffusion_relaxation_time(limit):.3g} time units, fastest rate "
            f"{max(_fastest_rate(limit), limit.excess_capacity**2 / limit.noise_variance):.3g}); bring the "
            "excess capacity nearer the square root of the mean speed",
        )
    work = n_steps * n_paths * (limit.n_coordinates + 1)
    if not work <= MAX_STEP_WORK:
        raise InputError(
            "paths",
            f"{n_paths:,} paths of {validation.quantity(n_steps)} steps on {limit.n_coordinates + 1} "
            f"coordinates are {validation.quantity(work)} steps of work, more than "
            f"{validation.quantity(MAX_STEP_WORK)}; use fewer paths",
        )
    validation.check_memory(
        "paths",
        8 * n_paths * ((limit.n_coordinates + 1) * (_RANDOM_BLOCK_STEPS + 16) + 4 * n_snapshots)
        + 8 * 4 * limit.n_coordinates**2,
        f"{n_paths:,} paths of the SDE",
        "use fewer paths",
    )
    return int(round(n_steps))


def _advance(limit: DiffusionLimit, x1, level, step: float, n_steps: int, rng, sample_every: int = 0):
    """Advance X_1 (paths,) and Y (paths, m) in place by n_steps steps of length ``step``.

    Each step freezes the drift b of X_1 at the start of the step and moves X_1 by the exact
    reflected Brownian motion with drift b: the free end y = x + b h + sigma sqrt(h) Z, the
    Brownian-bridge maximum M = (x + y + sqrt((y - x)^2 + 2 sigma^2 h E)) / 2 with E ~ Exp(1),
    dU = max(M, 0), X_1 <- y - dU (Lepingle's scheme). Y takes an Euler step plus routing dU.
    Returns the left-point time integrals of X_1 and Y, the total dU per path, and every
    ``sample_every`` steps snapshots of (X_1, X_2, U_1) after the step.
    """
    n_paths = x1.size
    variance_step = limit.noise_variance * step
    departure_step = limit.departure_weight * step
    transition = np.eye(limit.n_coordinates) + step * limit.level_matrix.T
    diagonal = not np.any(transition - np.diag(np.diag(transition)))
    decay = np.diag(transition).copy()
    integral_x1 = np.zeros(n_paths)
    integral_level = np.zeros_like(level)
    routed = np.zeros(n_paths)
    free_increment = np.empty(n_paths)
    pushed = np.empty(n_paths)
    snapshots = []
    done = 0
    while done < n_steps:
        block = min(_RANDOM_BLOCK_STEPS, n_steps - done)
        noise = np.sqrt(variance_step) * rng.standard_normal((block, n_paths))
        noise -= limit.excess_capacity * step
        bridge_spread = 2.0 * variance_step * rng.standard_exponential((block, n_paths))
        for k in range(block):
            integral_x1 += x1
            integral_level += level
            # free_increment = y - x = b h + sigma sqrt(h) Z, with b = -c - idle_rate x + departure_weight . Y
            np.multiply(x1, -limit.idle_rate * step, out=free_increment)
            free_increment += noise[k]
            free_increment += level @ departure_step
            # pushed = max(M, 0) with M = x + (y - x + sqrt((y - x)^2 + 2 sigma^2 h E)) / 2
            np.multiply(free_increment, free_increment, out=pushed)
            pushed += bridge_spread[k]
            np.sqrt(pushed, out=pushed)
            pushed += free_increment
            pushed *= 0.5
            pushed += x1
            np.maximum(pushed, 0.0, out=pushed)
            x1 += free_increment
            x1 -= pushed
            np.minimum(x1, 0.0, out=x1)  # X_1 <= 0 in exact arithmetic; this removes rounding
            if diagonal:
                level *= decay
            else:
                level[:] = level @ transition
            level += pushed[:, None] * limit.routing
            routed += pushed
            if sample_every and (done + k + 1) % sample_every == 0:
                snapshots.append((x1.copy(), level @ limit.count_weight, routed.copy()))
        done += block
    return integral_x1 * step, integral_level * step, routed, snapshots


def _initial_state(limit: DiffusionLimit, n_paths: int, x1_start, level_start):
    x1_start = float(x1_start)
    if not (np.isfinite(x1_start) and x1_start <= 0):
        raise InputError("x1_start", f"X_1(0) must be finite and <= 0 (minus the scaled idle servers), got {x1_start}")
    level = np.zeros(limit.n_coordinates) if level_start is None else np.array(level_start, dtype=float)
    if level.shape != (limit.n_coordinates,) or not np.all(np.isfinite(level)):
        raise InputError("level_start", f"must be {limit.n_coordinates} finite numbers, one per coordinate of xi_2")
    if level @ limit.count_weight < 0:
        raise InputError("level_start", "must give X_2(0) = count_weight . Y(0) >= 0")
    return np.full(n_paths, x1_start), np.tile(level, (n_paths, 1))


# --- stationary means and distributions ----------------------------------------------------------


@dataclass(frozen=True, eq=False)
class DiffusionStationary:
    """Stationary summaries of a :class:`DiffusionLimit`, in the n^{-1/2} scaling of 002.

    ``mean[name]`` and ``standard_error[name]`` for name in: x1 (X_1 <= 0; E|X_1| is its
    negative), x2 (X_2), x3 (X_3 = 0 in the limit, Corollary 4.9), x_plus1 (X_1 + X_2, the scaled
    centred number of jobs), x_plus2 (X_2, the scaled number waiting) and busy_routing_rate
    (E[dU_1 / dt]: n^{-1/2} times the rate of arrivals that find no idle server; lost jobs if b = 1).
    Standard errors come from ``n_paths`` independent paths, each averaged over ``horizon`` time
    units after ``burn_in``. ``mean_level`` are the means of the coordinates Y of xi_2 (per pool
    with the pool basis). ``samples[name]`` (paths x snapshots) for x1, x2 and x_plus1 feed
    :meth:`ccdf` and :meth:`quantile`.

    Parameters
    ----------
    limit
        The diffusion limit.
    mean, standard_error
        See above.
    mean_level, standard_error_level
        The means of the coordinates Y, and their standard errors.
    samples
        See above.
    n_paths
        Independent paths.
    step
        The Euler step (time units).
    burn_in
        Time discarded at the start of each path (time units).
    horizon
        The time each path is averaged over (time units).
    """

    limit: DiffusionLimit
    mean: dict
    standard_error: dict
    mean_level: np.ndarray
    standard_error_level: np.ndarray
    samples: dict = field(repr=False)
    n_paths: int
    step: float
    burn_in: float
    horizon: float

    def ccdf(self, measure: str, grid):
        """P(measure > y) for y in ``grid``, with standard errors across paths: (probability, standard_error).

        Parameters
        ----------
        measure
            The stationary measure's name (e.g. ``x1``).
        grid
            The values y.
        """
        paths = self._samples(measure)
        grid = np.asarray(grid, dtype=float)
        per_path = (paths[:, :, None] > grid.reshape(1, 1, -1)).mean(axis=1)
        return per_path.mean(axis=0), per_path.std(axis=0, ddof=1) / np.sqrt(self.n_paths)

    def plot(self, measure: str = "x_plus1", grid=None, path=None):
        """The matplotlib Figure of P(measure > y) against y (``grid``; default 60 points across
        the samples' 0.1% to 99.9% quantiles), shaded +- 1.96 standard errors across paths; written
        to ``path`` when given.

        Parameters
        ----------
        measure
            The stationary measure's name, x1, x2 or x_plus1 (X_1 + X_2, scaled), as in ``ccdf``.
        grid
            The values y (scaled by n^-1/2); None: 60 points across the 0.1% to 99.9% quantiles.
        path
            A file to write the figure to (its format by the extension); None: none written.

        Returns
        -------
        matplotlib.figure.Figure
            The figure.
        """
        from hetlb.plots.figures import plot_metric

        if grid is None:
            low, high = self.quantile(measure, [0.001, 0.999])
            grid = np.linspace(float(low), float(high), 60)
        probability, error = self.ccdf(measure, grid)
        band = (probability - 1.96 * error, probability + 1.96 * error)
        return plot_metric(
            np.asarray(grid, dtype=float),
            {self.limit.policy: (probability, *band)},
            path,
            xlabel=f"$y$ ({measure}, scaled by $n^{{-1/2}}$)",
            ylabel=f"$P$({measure} $> y$)",
            title=f"stationary diffusion limit of {self.limit.policy}",
            band_label=r"shaded: $\pm 1.96$ standard errors across paths",
        )

    def quantile(self, measure: str, probability):
        """Quantiles of the stationary ``measure`` from the pooled snapshots.

        Parameters
        ----------
        measure
            The stationary measure's name (e.g. ``x1``).
        probability
            The probabilities, in (0, 1).
        """
        return np.quantile(self._samples(measure), probability)

    def _samples(self, measure: str) -> np.ndarray:
        if measure not in self.samples:
            raise InputError("measure", f"unknown measure {measure!r}; choose one of: {', '.join(self.samples)}")
        return self.samples[measure]


def stationary_diffusion(
    limit: DiffusionLimit, *, n_paths=256, step=None, burn_in=None, horizon=None, n_snapshots=200, seed=0
) -> DiffusionStationary:
    """Stationary means, standard errors and distributions of the diffusion ``limit`` by simulation.

    The paths start from X_1 = 0, xi_2 = 0. The per-path time averages are independent, so their
    sample standard deviation over sqrt(n_paths) is the standard error.

    Parameters
    ----------
    limit
        The diffusion limit (policy_diffusion).
    n_paths
        Independent paths.
    step
        The Euler step (time units; default ``default_step``).
    burn_in
        Time discarded at the start of each path (time units; default 20 relaxation times).
    horizon
        The time each path is averaged over after the burn-in (time units; default 100 relaxation
        times).
    n_snapshots
        Equally spaced states per path that estimate the stationary distributions.
    seed
        An int or a SeedSequence for the one numpy Generator used.
    """
    _require_stationary(limit)
    n_paths = validation.count("n_paths", n_paths, low=2)
    n_snapshots = validation.count("n_snapshots", n_snapshots)
    seed = _checked_seed(seed)
    step = _checked_step(limit, step)
    burn_in = 20.0 * diffusion_relaxation_time(limit) if burn_in is None else validation.number("burn_in", burn_in, 0.0)
    horizon = (
        100.0 * diffusion_relaxation_time(limit) if horizon is None else validation.positive_number("horizon", horizon)
    )
    _check_work(limit, n_paths, step, burn_in + max(horizon, n_snapshots * step), n_snapshots)
    n_steps = max(n_snapshots, int(round(horizon / step)))
    sample_every = max(1, n_steps // n_snapshots)
    rng = np.random.default_rng(seed)

    x1, level = _initial_state(limit, n_paths, 0.0, None)
    _advance(limit, x1, level, step, int(round(burn_in / step)), rng)
    integral_x1, integral_level, routed, snapshots = _advance(limit, x1, level, step, n_steps, rng, sample_every)
    duration = n_steps * step

    per_path_level = integral_level / duration
    per_path_x2 = per_path_level @ limit.count_weight
    per_path = {
        "x1": integral_x1 / duration,
        "x2": per_path_x2,
        "x3": np.zeros(n_paths),
        "x_plus1": integral_x1 / duration + per_path_x2,
        "x_plus2": per_path_x2,
        "busy_routing_rate": routed / duration,
    }
    x1_samples = np.column_stack([snapshot[0] for snapshot in snapshots])
    x2_samples = np.column_stack([snapshot[1] for snapshot in snapshots])
    return DiffusionStationary(
        limit=limit,
        mean={name: float(values.mean()) for name, values in per_path.items()},
        standard_error={name: float(values.std(ddof=1) / np.sqrt(n_paths)) for name, values in per_path.items()},
        mean_level=per_path_level.mean(axis=0),
        standard_error_level=per_path_level.std(axis=0, ddof=1) / np.sqrt(n_paths),
        samples={"x1": x1_samples, "x2": x2_samples, "x_plus1": x1_samples + x2_samples},
        n_paths=n_paths,
        step=step,
        burn_in=burn_in,
        horizon=duration,
    )


# --- transient paths -----------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class DiffusionPaths:
    """Sample paths of a ``DiffusionLimit``: arrays (n_paths, n_times).

    Parameters
    ----------
    time
        The recorded times (time units).
    x1
        X_1 <= 0.
    x2
        X_2 = <1, xi_2>.
    u1
        The regulator U_1 (nondecreasing).
    """

    time: np.ndarray
    x1: np.ndarray
    x2: np.ndarray
    u1: np.ndarray


def diffusion_paths(
    limit: DiffusionLimit,
    horizon,
    *,
    x1_start=0.0,
    level_start=None,
    n_paths=16,
    step=None,
    record_interval=None,
    seed=0,
) -> DiffusionPaths:
    """Simulate the process-level limit of Theorem 4.1 on [0, horizon] from X_1(0), Y(0).

    Any real excess capacity is allowed here: the transient limit needs no stability.

    Parameters
    ----------
    limit
        The diffusion limit (policy_diffusion).
    horizon
        The end of the paths (time units).
    x1_start
        X_1(0) <= 0.
    level_start
        The coordinates Y(0) of xi_2(0) (zero by default).
    n_paths
        Independent paths.
    step
        The Euler step (time units; default ``default_step``).
    record_interval
        The spacing of the recorded times (default horizon / 200).
    seed
        An int or a SeedSequence for the one numpy Generator used.
    """
    if not isinstance(limit, DiffusionLimit):
        raise InputError("limit", "must be a DiffusionLimit, e.g. from policy_diffusion()")
    horizon = validation.positive_number("horizon", horizon)
    n_paths = validation.count("n_paths", n_paths)
    seed = _checked_seed(seed)
    step = _checked_step(limit, step)
    record_interval = (
        horizon / 200 if record_interval is None else validation.positive_number("record_interval", record_interval)
    )
    _check_work(limit, n_paths, step, max(horizon, step), max(1.0, horizon / record_interval))
    sample_every = max(1, int(round(record_interval / step)))
    n_steps = sample_every * max(1, int(round(horizon / (sample_every * step))))
    x1, level = _initial_state(limit, n_paths, x1_start, level_start)
    start = (x1.copy(), level @ limit.count_weight, np.zeros(n_paths))
    snapshots = [start, *_advance(limit, x1, level, step, n_steps, np.random.default_rng(seed), sample_every)[3]]
    x1_path, x2_path, u1_path = (np.column_stack([snapshot[i] for snapshot in snapshots]) for i in range(3))
    time = step * sample_every * np.arange(len(snapshots))
    return DiffusionPaths(time=time, x1=x1_path, x2=x2_path, u1=u1_path)
