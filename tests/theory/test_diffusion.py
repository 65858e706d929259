"""The diffusion limits of paper 002 (hetlb.theory.diffusion) against closed forms, an independent
formulation of the same SDE, step halving and the domain of the reflected process.

Tolerances are z standard errors of independent paths, z from a two-sided normal interval at
family level 0.001 split over the comparisons of a test (Bonferroni).
"""

import math

import numpy as np
import pytest
from scipy import integrate, stats

from hetlb.errors import InputError
from hetlb.theory import (
    DiffusionLimit,
    continuous_speeds,
    diffusion_paths,
    erlang_b,
    policy_diffusion,
    reflected_ou_stationary,
    speed_pools,
    stationary_diffusion,
    stationary_mean_x1,
)

FAMILY_ALPHA = 1e-3
UNIFORM_SPEEDS = continuous_speeds(0.7, 1.3)  # the speeds of Fig. 4.1 of 002


def z_bound(comparisons: int) -> float:
    return float(stats.norm.ppf(1.0 - FAMILY_ALPHA / (2.0 * comparisons)))


def assert_within(estimate, standard_error, expected, comparisons, allowance=0.0):
    tolerance = z_bound(comparisons) * standard_error + allowance
    assert abs(estimate - expected) <= tolerance, (estimate, expected, tolerance)


# --- closed forms without simulation -------------------------------------------------------------


def test_random_ties_idle_rate_is_one_plus_speed_variance():
    # Corollary 4.5 prints (1 + sigma_F^2) / mu_bar; for U[0.7, 1.3], mu_bar = 1, sigma_F^2 = 0.6^2 / 12.
    limit = policy_diffusion("jsq", UNIFORM_SPEEDS, 1.0)
    assert limit.idle_rate == pytest.approx(1.0 + 0.6**2 / 12.0, rel=1e-12)
    assert limit.noise_variance == pytest.approx(2.0, rel=1e-12)
    assert policy_diffusion("jfsq", UNIFORM_SPEEDS, 1.0).idle_rate == 0.7


def test_quadrature_integrates_the_level_decay_kernel():
    for elapsed in (0.5, 3.0, 20.0):
        exact, _ = integrate.quad(
            lambda mu, elapsed=elapsed: mu * math.exp(-mu * elapsed) / 0.6, 0.7, 1.3, epsabs=1e-14
        )
        rule = UNIFORM_SPEEDS.weight @ (UNIFORM_SPEEDS.rate * np.exp(-UNIFORM_SPEEDS.rate * elapsed))
        assert rule == pytest.approx(exact, rel=1e-9, abs=1e-14)


@pytest.mark.parametrize(
    "excess_capacity, idle_rate, noise_variance", [(1.0, 1.0, 2.0), (-0.5, 0.7, 2.0), (2.0, 1.3, 1.4)]
)
def test_reflected_ou_loss_rate_balances_the_drift(excess_capacity, idle_rate, noise_variance):
    # Ito on X: 0 = E[-c - kappa X] - E[dU/dt]; the closed form computes E[dU/dt] as (sigma^2 / 2) p(0).
    law = reflected_ou_stationary(excess_capacity, idle_rate, noise_variance)
    assert law.loss_rate == pytest.approx(-excess_capacity - idle_rate * law.mean_x1, rel=1e-9)


def test_reflected_ou_is_the_halfin_whitt_limit_of_erlang_b():
    # Jagerman: n^{1/2} B(n, n - beta n^{1/2}) -> phi(beta) / Phi(beta), with error O(n^{-1/2}).
    beta = 1.0
    limit_rate = reflected_ou_stationary(beta, 1.0, 2.0).loss_rate
    errors = [abs(math.sqrt(n) * erlang_b(n, n - beta * math.sqrt(n)) - limit_rate) for n in (400, 1600, 6400)]
    assert errors[1] < 0.6 * errors[0] and errors[2] < 0.6 * errors[1]


# --- the loss system: a reflected OU process -----------------------------------------------------


@pytest.fixture(scope="module")
def loss_system():
    # Half the default step, so that the scheme's O(step) bias is well inside the sampling error.
    limit = policy_diffusion("jsq", speed_pools([1.0], [1.0]), 1.0, buffer=1)
    return limit, stationary_diffusion(limit, n_paths=512, step=0.005, burn_in=10.0, horizon=100.0, seed=11)


def test_loss_system_matches_the_reflected_ou_stationary_law(loss_system):
    limit, result = loss_system
    law = reflected_ou_stationary(1.0, 1.0, 2.0)
    assert stationary_mean_x1(limit) == law.mean_x1
    assert_within(result.mean["x1"], result.standard_error["x1"], law.mean_x1, comparisons=7)
    assert_within(
        result.mean["busy_routing_rate"], result.standard_error["busy_routing_rate"], law.loss_rate, comparisons=7
    )
    grid = np.array([-2.5, -1.5, -1.0, -0.5, -0.1])
    probability, standard_error = result.ccdf("x1", grid)
    for estimate, error, expected in zip(probability, standard_error, law.law.sf(grid)):
        assert_within(estimate, error, expected, comparisons=7)
    assert result.mean["x2"] == 0.0


# --- the policies' limits ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def uniform_speed_policies():
    return {
        policy: stationary_diffusion(
            policy_diffusion(policy, UNIFORM_SPEEDS, 1.0), n_paths=256, burn_in=20.0, horizon=100.0, seed=20 + index
        )
        for index, policy in enumerate(("jfsq", "jsq", "jsq-fiq", "jssq"))
    }


def test_idle_capacity_equals_excess_capacity(uniform_speed_policies):
    # Stationarity of X_1 + X_2 gives <iota, eta> E[-X_1] = c for every tie-breaking rule.
    for result in uniform_speed_policies.values():
        assert_within(
            result.mean["x1"],
            result.standard_error["x1"],
            stationary_mean_x1(result.limit),
            comparisons=len(uniform_speed_policies),
        )


def test_jfsq_holds_fewest_jobs_and_most_idle_servers(uniform_speed_policies):
    # Theorem 4.10 (JFSQ stochastically smallest X_{+1}, X_{+2}) and the signs of Fig. 4.2 against RR.
    jfsq = uniform_speed_policies["jfsq"]
    others = [result for policy, result in uniform_speed_policies.items() if policy != "jfsq"]
    z = z_bound(3 * len(others))
    for other in others:
        for measure in ("x_plus1", "x_plus2"):
            gap = other.mean[measure] - jfsq.mean[measure]
            assert gap > -z * math.hypot(other.standard_error[measure], jfsq.standard_error[measure])
    rr = uniform_speed_policies["jsq"]
    assert jfsq.mean["x2"] + z * jfsq.standard_error["x2"] < rr.mean["x2"]
    assert jfsq.mean["x1"] + z * jfsq.standard_error["x1"] < rr.mean["x1"]


def test_halving_the_default_step_moves_the_means_by_less_than_their_error_plus_the_step():
    limit = policy_diffusion("jfsq", UNIFORM_SPEEDS, 0.5)
    coarse = stationary_diffusion(limit, n_paths=256, burn_in=20.0, horizon=80.0, seed=31)
    fine = stationary_diffusion(limit, n_paths=256, step=coarse.step / 2, burn_in=20.0, horizon=80.0, seed=32)
    for measure in ("x1", "x2", "busy_routing_rate"):
        # The scheme's bias is O(step): allow the coarse step on top of the sampling error.
        assert_within(
            coarse.mean[measure],
            math.hypot(coarse.standard_error[measure], fine.standard_error[measure]),
            fine.mean[measure],
            comparisons=3,
            allowance=coarse.step,
        )


# --- two pools: the pool form of Corollary 4.6 against the weak form in the basis {1, iota} ------


POOL_RATES, POOL_FRACTIONS = np.array([0.5, 1.5]), np.array([0.4, 0.6])


def weak_form_in_moments(excess_capacity):
    """Corollary 4.5's weak form with test functions f = 1 and f = iota: Y = (<1, xi_2>, <iota, xi_2>).

    On the support {mu_1, mu_2}, iota^2 = (mu_1 + mu_2) iota - mu_1 mu_2, so
    d<1, xi_2> = dU - <iota, xi_2> dt and d<iota, xi_2> = mu_bar dU - ((mu_1 + mu_2) <iota, xi_2> - mu_1 mu_2 <1, xi_2>) dt.
    """
    mu_1, mu_2 = POOL_RATES
    mean = POOL_FRACTIONS @ POOL_RATES
    return DiffusionLimit(
        excess_capacity=excess_capacity,
        idle_rate=(POOL_FRACTIONS @ POOL_RATES**2) / mean,
        noise_variance=2.0 * mean,
        routing=np.array([1.0, mean]),
        level_matrix=np.array([[0.0, -1.0], [mu_1 * mu_2, -(mu_1 + mu_2)]]),
        departure_weight=np.array([0.0, 1.0]),
        count_weight=np.array([1.0, 0.0]),
    )


def test_pool_form_and_moment_form_give_the_same_paths():
    pool_form = policy_diffusion("jsq", speed_pools(POOL_RATES, POOL_FRACTIONS), 0.8)
    moment_form = weak_form_in_moments(0.8)
    start = np.array([0.3, 0.5])
    options = dict(x1_start=-0.4, n_paths=8, step=0.01, seed=5)
    pools = diffusion_paths(pool_form, 20.0, level_start=start, **options)
    moments = diffusion_paths(moment_form, 20.0, level_start=[start.sum(), POOL_RATES @ start], **options)
    np.testing.assert_allclose(moments.x1, pools.x1, atol=1e-9)
    np.testing.assert_allclose(moments.x2, pools.x2, atol=1e-9)


def test_pool_form_and_moment_form_have_the_same_stationary_means():
    pool_form = stationary_diffusion(
        policy_diffusion("jsq", speed_pools(POOL_RATES, POOL_FRACTIONS), 0.8),
        n_paths=256,
        burn_in=20.0,
        horizon=80.0,
        seed=41,
    )
    moment_form = stationary_diffusion(weak_form_in_moments(0.8), n_paths=256, burn_in=20.0, horizon=80.0, seed=42)
    for measure in ("x1", "x2", "busy_routing_rate"):
        assert_within(
            pool_form.mean[measure],
            math.hypot(pool_form.standard_error[measure], moment_form.standard_error[measure]),
            moment_form.mean[measure],
            comparisons=5,
        )
    # Each pool's xi_2 mass balances its routed share: gamma_j E[dU/dt] = mu_j E[X_{j,2}].
    routed = pool_form.mean["busy_routing_rate"]
    for rate, fraction, mean, error in zip(
        POOL_RATES, POOL_FRACTIONS, pool_form.mean_level, pool_form.standard_error_level
    ):
        assert_within(
            rate * mean,
            rate * error + fraction * pool_form.standard_error["busy_routing_rate"],
            fraction * routed,
            comparisons=5,
        )


def test_pools_of_equal_speed_reduce_to_the_homogeneous_limit():
    # Corollary 4.6 with mu_1 = mu_2 = 1 is the Eschenfeldt-Gamarnik diffusion of homogeneous JSQ,
    # whose xi_2 splits in the pool fractions.
    options = dict(x1_start=-1.0, n_paths=8, step=0.01, seed=9)
    homogeneous = diffusion_paths(policy_diffusion("jfsq", speed_pools([1.0], [1.0]), 1.0), 15.0, **options)
    pools = diffusion_paths(policy_diffusion("jsq", speed_pools([1.0, 1.0], [0.3, 0.7]), 1.0), 15.0, **options)
    np.testing.assert_allclose(pools.x1, homogeneous.x1, atol=1e-12)
    np.testing.assert_allclose(pools.x2, homogeneous.x2, atol=1e-12)


# --- the domain of the reflected process ---------------------------------------------------------


@pytest.mark.parametrize("excess_capacity", [-1.0, 0.2, 3.0])
def test_reflection_keeps_the_process_in_its_domain(excess_capacity):
    limit = policy_diffusion("jsq-fiq", UNIFORM_SPEEDS, excess_capacity)
    paths = diffusion_paths(
        limit, 10.0, x1_start=0.0, level_start=np.full(8, 0.1), n_paths=32, record_interval=0.05, seed=3
    )
    assert np.all(paths.x1 <= 0.0)
    assert np.all(paths.x2 >= 0.0)
    assert np.all(np.diff(paths.u1, axis=1) >= 0.0) and np.all(paths.u1[:, 0] == 0.0)
    assert np.any(paths.u1[:, -1] > 0.0)


def test_same_seed_same_result():
    limit = policy_diffusion("jfsq", UNIFORM_SPEEDS, 1.0)
    first = stationary_diffusion(limit, n_paths=4, burn_in=1.0, horizon=2.0, seed=7)
    second = stationary_diffusion(limit, n_paths=4, burn_in=1.0, horizon=2.0, seed=7)
    assert first.mean == second.mean


# --- input errors --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, field",
    [
        (lambda: policy_diffusion("rr", UNIFORM_SPEEDS, 1.0), "policy"),
        (lambda: policy_diffusion("jfsq", [1.0, 0.5], 1.0), "speeds"),
        (lambda: policy_diffusion("jfsq", UNIFORM_SPEEDS, float("nan")), "excess_capacity"),
        (lambda: policy_diffusion("jfsq", UNIFORM_SPEEDS, 1.0, buffer=0), "buffer"),
        (lambda: stationary_diffusion(policy_diffusion("jsq", UNIFORM_SPEEDS, 0.0)), "excess_capacity"),
        (lambda: stationary_mean_x1(policy_diffusion("jsq", UNIFORM_SPEEDS, -1.0)), "excess_capacity"),
        (lambda: stationary_diffusion(policy_diffusion("jsq", UNIFORM_SPEEDS, 1.0), n_paths=1), "n_paths"),
        (lambda: stationary_diffusion(policy_diffusion("jsq", UNIFORM_SPEEDS, 1.0), step=1.0), "step"),
        (lambda: stationary_diffusion(policy_diffusion("jsq", UNIFORM_SPEEDS, 1.0), horizon=0.0), "horizon"),
        (lambda: speed_pools([1.0, 0.5], [0.5, 0.6]), "fraction"),
        (lambda: speed_pools([1.0, -0.5], [0.5, 0.5]), "rate"),
        (lambda: speed_pools([1.0, 0.5], [1.0]), "fraction"),
        (lambda: continuous_speeds(0.0, 1.0), "low"),
        (lambda: continuous_speeds(1.3, 0.7), "high"),
        (lambda: continuous_speeds(0.7, 1.3, n_nodes=0), "n_nodes"),
        (lambda: continuous_speeds(0.7, 1.3, density=lambda mu: -1.0), "density"),
        (lambda: diffusion_paths(policy_diffusion("jsq", UNIFORM_SPEEDS, 1.0), 5.0, x1_start=0.5), "x1_start"),
        (lambda: diffusion_paths(policy_diffusion("jsq", UNIFORM_SPEEDS, 1.0), 5.0, level_start=[1.0]), "level_start"),
        (lambda: reflected_ou_stationary(1.0, 0.0, 2.0), "idle_rate"),
        (lambda: DiffusionLimit(1.0, 1.0, 2.0, [1.0], [[0.0, 1.0]], [1.0], [1.0]), "level_matrix"),
    ],
)
def test_input_errors_name_the_field(call, field):
    with pytest.raises(InputError) as error:
        call()
    assert error.value.field == field
    assert "\n" not in str(error.value)


def test_unknown_measure_is_an_input_error(loss_system):
    _, result = loss_system
    with pytest.raises(InputError, match="measure"):
        result.ccdf("x4", [0.0])
