"""The mean-field limits (hetlb.theory.meanfield) against closed forms, hand-derived fixed points,
the speed lower bound, their own ODE, and simulation where the limit holds at every N."""

import json
import math

import numpy as np
import pytest
from scipy import stats

import hetlb
from hetlb.cli import main
from hetlb.errors import InputError
from hetlb.model.servers import RateCurve
from hetlb.theory import (
    erlang_c,
    mean_field,
    mm1_mean_response_time,
    mm1k_blocking_probability,
    mm1k_mean_response_time,
    mmc_mean_response_time,
    speed_lower_bound_arrays,
)
from hetlb.theory.meanfield import (
    MEANFIELD_POLICIES,
    fixed_point_solver,
    mean_field_arrays,
    mean_field_trajectory_arrays,
    pod_equal_servers_response_time,
    sampling,
    server_speeds,
)
from hetlb.theory.meanfield.classes import fleet, server_classes
from hetlb.theory.meanfield.ranking import ranking_occupancy
from hetlb.theory.meanfield.slot_filling import SLOT_POLICIES, slot_filling_occupancy

FLEETS = {
    "two": ([1.0, 0.25], [0.5, 0.5]),
    "four": ([1.0, 0.5, 0.25, 0.125], [1, 1, 1, 1]),
    "uniform8": (list(0.5 + (np.arange(8) + 0.5) / 8), [1] * 8),
}
LOADS = (0.5, 0.7, 0.9, 0.95)


def replication_interval(result, checks: int) -> tuple[float, float]:
    """A Student-t interval of the mean response time over the replications, Bonferroni-corrected
    for ``checks`` simultaneous checks at a 1% family error."""
    means = np.array([run.mean_response_time for run in result.runs])
    half = stats.t.ppf(1 - 0.01 / checks / 2, means.size - 1) * means.std(ddof=1) / math.sqrt(means.size)
    return means.mean() - half, means.mean() + half


# --- closed forms ---------------------------------------------------------------------------------


@pytest.mark.parametrize("d", [1, 2, 3, 5])
@pytest.mark.parametrize("load", [0.3, 0.7, 0.9, 0.99])
def test_pod_on_equal_servers_is_the_doubly_exponential_law(d, load):
    # s_i = rho^((d^i - 1)/(d - 1)); E[T] = sum_i s_i / lambda = sum_{i>=1} rho^((d^i - d)/(d - 1)) at mu = 1
    limit = mean_field_arrays([1.0], [1.0], load=load, policy="pod", d=d)
    assert limit.mean_response_time == pytest.approx(pod_equal_servers_response_time(load, d), rel=1e-8)
    levels = np.arange(1, limit.levels + 1)
    expected = load ** ((float(d) ** levels - 1) / (d - 1)) if d > 1 else load**levels
    np.testing.assert_allclose(limit.occupancy[0], expected, atol=1e-9)


def test_pod_closed_form_first_terms():
    # d = 2, rho = 0.5: 1 + 0.5 + 0.5^3 + 0.5^7 + 0.5^15 + ...
    direct = sum(0.5 ** (2**i - 2) for i in range(1, 12))
    assert pod_equal_servers_response_time(0.5, 2) == pytest.approx(direct, rel=1e-15)


@pytest.mark.parametrize("fleet", FLEETS)
@pytest.mark.parametrize("load", LOADS)
def test_weighted_random_is_mm1_per_server(fleet, load):
    speeds, counts = FLEETS[fleet]
    limit = mean_field_arrays(speeds, counts, load=load, policy="weighted-random")
    share = limit.class_fraction * limit.class_speed / np.sum(limit.class_fraction * limit.class_speed)
    expected = sum(
        share[m] * mm1_mean_response_time(load * limit.class_speed[m], limit.class_speed[m]) for m in range(len(share))
    )
    assert limit.mean_response_time == pytest.approx(expected, rel=1e-9)
    np.testing.assert_allclose(limit.utilisation, load, rtol=1e-12)
    assert limit.p_wait == pytest.approx(load, rel=1e-9)


@pytest.mark.parametrize("buffer", [1, 3, 10])
def test_random_with_a_buffer_is_mm1k_per_server(buffer):
    speeds, counts = FLEETS["four"]
    limit = mean_field_arrays(speeds, counts, load=0.9, policy="random", buffer=buffer)
    lam = limit.arrival_rate
    lost = np.mean([mm1k_blocking_probability(lam, mu, buffer) for mu in limit.class_speed])
    assert limit.blocking_probability == pytest.approx(lost, rel=1e-9)
    admitted = np.array([lam * (1 - mm1k_blocking_probability(lam, mu, buffer)) for mu in limit.class_speed])
    times = np.array([mm1k_mean_response_time(lam, mu, buffer) for mu in limit.class_speed])
    assert limit.mean_response_time == pytest.approx(np.sum(admitted * times) / admitted.sum(), rel=1e-9)


def test_random_is_unstable_when_a_class_is_overloaded():
    # lambda = 0.5 * 0.625 > 0.25: the slow servers' queues grow without bound
    limit = mean_field_arrays([1.0, 0.25], [0.5, 0.5], load=0.5, policy="random")
    assert not limit.stable and limit.mean_response_time == math.inf
    assert mean_field_arrays([1.0, 0.25], [0.5, 0.5], load=0.5, policy="random", buffer=4).stable


@pytest.mark.parametrize("policy", ["jfsq", "jfiq", "jsq-fiq"])
@pytest.mark.parametrize("fleet", FLEETS)
@pytest.mark.parametrize("load", LOADS)
def test_fastest_first_policies_reach_the_speed_lower_bound(policy, fleet, load):
    speeds, counts = FLEETS[fleet]
    limit = mean_field_arrays(speeds, counts, load=load, policy=policy)
    per_server = server_speeds(limit.class_speed, limit.class_fraction, 4096)
    bound = speed_lower_bound_arrays(per_server, load * per_server.sum())
    assert limit.mean_response_time == pytest.approx(bound.lower_bound, rel=1e-12)
    np.testing.assert_allclose(limit.utilisation * limit.class_fraction, bound.c_star_by_type, atol=1e-12)
    assert limit.p_wait == 0 and limit.blocking_probability == 0


@pytest.mark.parametrize("fleet", FLEETS)
@pytest.mark.parametrize("load", LOADS)
def test_jsq_takes_idle_servers_uniformly(fleet, load):
    speeds, counts = FLEETS[fleet]
    limit = mean_field_arrays(speeds, counts, load=load, policy="jsq")
    busy = limit.utilisation
    # every idle server receives the same rate R: lambda (1 - s_m) / (1 - S) = mu_m s_m for all m
    idle = 1 - np.sum(limit.class_fraction * busy)
    np.testing.assert_allclose(limit.arrival_rate * (1 - busy) / idle, limit.class_speed * busy, rtol=1e-10)
    assert limit.throughput == pytest.approx(limit.arrival_rate, rel=1e-12)
    for same in ("jiq", "jsq-lisf"):
        np.testing.assert_allclose(mean_field_arrays(speeds, counts, load=load, policy=same).occupancy, limit.occupancy)


def test_jssq_fills_the_slowest_first():
    limit = mean_field_arrays([1.0, 0.25], [0.5, 0.5], load=0.9, policy="jssq")
    # the slow half carries 0.125 of lambda = 0.5625, the fast half the remaining 0.4375
    np.testing.assert_allclose(limit.utilisation, [0.4375 / 0.5, 1.0])
    assert limit.mean_response_time == pytest.approx((0.5 * 0.875 + 0.5) / 0.5625)


def test_equal_servers_ranking_policies_are_busy_rho_of_the_time():
    for policy in ("jsq", "jfsq", "jssq", "sed", "jiq"):
        limit = mean_field_arrays([2.0], [1.0], load=0.8, policy=policy)
        np.testing.assert_allclose(limit.occupancy, [[0.8]])
        assert limit.mean_response_time == pytest.approx(0.5)


def test_sed_queues_at_fast_servers_before_using_idle_slow_ones():
    # mu = 1 and 0.25 at load 0.9: a fast server with 3 jobs (key 4) ties with an idle slow one
    # (key 1 / 0.25 = 4). The slow class is half busy (C* fill); the tied slots fill at rate R per
    # free slot with R / (R + 0.25) = 0.5, so R = 0.25 and a fast server has a 4th job w.p. 0.2.
    limit = mean_field_arrays([1.0, 0.25], [0.5, 0.5], load=0.9, policy="sed")
    np.testing.assert_allclose(limit.occupancy, [[1, 1, 1, 0.2], [0.5, 0, 0, 0]], atol=1e-12)
    assert limit.mean_response_time == pytest.approx((0.5 * 3.2 + 0.5 * 0.5) / 0.5625)


def test_sed_loses_jobs_at_full_fast_servers_before_using_slow_ones():
    # buffer 2: a full fast server has key 3 < 4, so arrivals beyond the fast capacity 0.5 are lost
    limit = mean_field_arrays([1.0, 0.25], [0.5, 0.5], load=0.9, policy="sed", buffer=2)
    np.testing.assert_allclose(limit.occupancy, [[1, 1], [0, 0]], atol=1e-12)
    assert limit.blocking_probability == pytest.approx(0.0625 / 0.5625)


# --- sampling fixed points: the ODE and conservation ----------------------------------------------


@pytest.mark.parametrize(
    "policy,fleet,load,params",
    [
        ("pod", "uniform8", 0.9, {"d": 2}),
        ("pod", "four", 0.7, {"d": 3}),
        ("jsq-df-ds", "two", 0.7, {"p_fast": 0.3}),
        ("jiq-df-ds", "two", 0.5, {}),
    ],
)
def test_the_ode_from_empty_settles_at_the_fixed_point(policy, fleet, load, params):
    speeds, counts = FLEETS[fleet]
    limit = mean_field_arrays(speeds, counts, load=load, policy=policy, **params)
    path = mean_field_trajectory_arrays(speeds, counts, load=load, policy=policy, times=[0.0, 50000.0], **params)
    np.testing.assert_allclose(path.occupancy[-1][:, : limit.levels], limit.occupancy, atol=1e-6)
    assert path.mean_number_in_system[0] == 0
    # arrivals admitted = departures at the fixed point
    assert limit.throughput == pytest.approx(limit.arrival_rate, rel=1e-9)


def test_jsq_and_jiq_df_ds_agree_with_one_sample_each():
    # with d_F = d_S = 1 the shortest sampled server is the sampled server
    for p_fast in (0.2, 0.8):
        a = mean_field_arrays([1.0, 0.3], [0.4, 0.6], load=0.6, policy="jsq-df-ds", d_fast=1, d_slow=1, p_fast=p_fast)
        b = mean_field_arrays([1.0, 0.3], [0.4, 0.6], load=0.6, policy="jiq-df-ds", d_fast=1, d_slow=1, p_fast=p_fast)
        np.testing.assert_allclose(a.occupancy, b.occupancy, atol=1e-9)


def test_speed_blind_pod_overloads_the_slow_servers():
    # lambda beta^d = 0.5625 * 0.25 > 0.125, the slow half's capacity: unstable although rho < 1
    assert not mean_field_arrays([1.0, 0.25], [0.5, 0.5], load=0.9, policy="pod").stable
    assert mean_field_arrays([1.0, 0.25], [0.5, 0.5], load=0.9, policy="pod", d=4).stable  # 0.5625 / 16 < 0.125
    assert mean_field_arrays([1.0, 0.25], [0.5, 0.5], load=0.9, policy="pod", buffer=20).stable


def test_finite_buffers_lose_jobs_and_bound_the_queues():
    limit = mean_field_arrays([1.0, 0.5], [0.5, 0.5], load=0.95, policy="pod", buffer=3)
    # a job is lost when its d = 2 samples are both full: S_b^2 with S_b the fraction at b jobs
    full = np.sum(limit.class_fraction * limit.occupancy[:, 2])
    assert limit.occupancy.shape[1] == 3
    assert limit.blocking_probability == pytest.approx(full**2, rel=1e-8)
    assert limit.throughput == pytest.approx(limit.arrival_rate * (1 - limit.blocking_probability))


def test_every_policy_answers_on_sixteen_classes_and_a_buffer_of_100():
    speeds = np.linspace(0.2, 2.0, 16)
    for policy in MEANFIELD_POLICIES:
        limit = mean_field_arrays(speeds, np.ones(16), load=0.95, policy=policy, buffer=100)
        assert limit.stable and limit.throughput <= limit.arrival_rate * (1 + 1e-12)
        assert math.isfinite(limit.mean_response_time)


def sampling_model_of(limit):
    return sampling.sampling_model(limit.policy, limit.parameters, limit.classes, limit.arrival_rate)


@pytest.mark.parametrize(
    "policy,params,classes",
    [
        ("jsq-df-ds", {"d_fast": 2, "d_slow": 3, "p_fast": 0.3, "p_slow": 0.6}, 4),
        ("jiq-df-ds", {}, 3),
        ("pod", {"d": 3}, 3),
    ],
)
def test_the_chain_rule_jacobian_matches_central_differences_of_phi(policy, params, classes):
    limit = mean_field_arrays(
        np.linspace(2.0, 0.2, classes), np.ones(classes), load=0.8, policy=policy, buffer=12, **params
    )
    model = sampling_model_of(limit)
    tails = np.sort(np.random.default_rng(1).uniform(0.0, 1.0, (model.n_groups, 12)), axis=1)[:, ::-1].ravel()
    step = 1e-6  # central differences: error O(step^2) times third derivatives of order 1
    columns = [
        (model.step((tails + step * unit)[None])[1][0] - model.step((tails - step * unit)[None])[1][0]) / (2 * step)
        for unit in np.eye(tails.size)
    ]
    # the Jacobian's own forward differences of the birth rates (step FD_STEP) are good to ~1e-7
    np.testing.assert_allclose(fixed_point_solver.phi_jacobian(model, tails), np.array(columns).T, atol=1e-6)


@pytest.mark.parametrize(
    "policy,classes,load",
    [("jsq-df-ds", 4, 0.9), ("jsq-df-ds", 2, 0.95), ("jsq-df-ds", 16, 0.99), ("jiq-df-ds", 16, 0.95)],
)
def test_the_solver_finds_the_fixed_point_of_the_plain_iteration(policy, classes, load):
    # the hard cases of the solver (the slow servers fill the buffer of 100): its Newton and
    # pseudo-transient steps against the damped iteration T <- (T + Phi(T)) / 2 from the empty system
    limit = mean_field_arrays(np.linspace(2.0, 0.2, classes), np.ones(classes), load=load, policy=policy, buffer=100)
    model = sampling_model_of(limit)
    solved = model.group_tails(limit.occupancy)[:, 1:].ravel()
    plain = fixed_point_solver.damped(model, np.zeros_like(solved), 100_000, fixed_point_solver.RESIDUAL_TOLERANCE)
    residuals = [np.max(np.abs(fixed_point_solver.residual_of(model, tails))) for tails in (solved, plain)]
    assert max(residuals) < fixed_point_solver.RESIDUAL_TOLERANCE
    # two points with residuals r1, r2 lie within |(I - dPhi/dT)^-1| (r1 + r2) of each other, to
    # first order; a factor 2 covers the second-order term
    inverse = np.linalg.inv(np.eye(solved.size) - fixed_point_solver.phi_jacobian(model, solved))
    assert np.max(np.abs(solved - plain)) <= 2 * np.max(np.abs(inverse).sum(axis=1)) * sum(residuals)


def test_input_errors():
    with pytest.raises(InputError, match="load"):
        mean_field_arrays([1.0], [1.0], load=1.0)
    with pytest.raises(InputError, match="fractions"):
        mean_field_arrays([1.0, 0.5], [1.0], load=0.5)
    with pytest.raises(InputError, match="buffer"):
        mean_field_arrays([1.0], [1.0], load=0.5, buffer=0)
    with pytest.raises(InputError, match="two speed classes"):
        mean_field_arrays([1.0], [1.0], load=0.5, policy="jsq-df-ds")
    with pytest.raises(InputError, match="not a parameter"):
        mean_field_arrays([1.0], [1.0], load=0.5, policy="jsq", d=2)
    with pytest.raises(InputError, match="policy"):
        mean_field_trajectory_arrays([1.0], [1.0], load=0.5, policy="jsq", times=[1.0])
    with pytest.raises(InputError, match="leave a speed class empty"):
        server_speeds([1.0, 0.5], [0.99, 0.01], 10)


# --- servers that serve several jobs at once ------------------------------------------------------

BATCH = {"speeds": [1.0, 0.5], "fractions": [0.5, 0.5], "concurrency": [4, 8], "rate_curve": "saturating:alpha=0.2"}
"""Two classes of inference engines: speeds 1 and 0.5, batches of 4 and 8, iteration time growing by 20%
per job in the batch (capacities 2.5 and 5/3)."""


def batch_limit(policy, load, **changes):
    spec = {**BATCH, **changes}
    return mean_field_arrays(spec.pop("speeds"), spec.pop("fractions"), load=load, policy=policy, **spec)


def chain_distribution(birth, death):
    """The stationary law of a birth-death chain on 0..K (birth[n]: n -> n+1, death[n]: n+1 -> n),
    from the null space of its generator."""
    size = len(birth) + 1
    generator = np.diag(birth, 1) + np.diag(death, -1)
    generator -= np.diag(generator.sum(axis=1))
    law = np.linalg.lstsq(np.vstack([generator.T, np.ones(size)]), np.r_[np.zeros(size), 1.0], rcond=None)[0]
    return law


@pytest.mark.parametrize("policy", ["random", "weighted-random"])
@pytest.mark.parametrize("concurrency", [[4, 8], [3, "inf"]])
def test_queue_blind_policies_make_each_batch_server_its_own_birth_death_chain(policy, concurrency):
    # arrivals at lambda (random) or at rho mu_m phi_m(c_m) (weighted-random: weights = capacities);
    # the chain of a class-m server on 0..K with death mu_m phi_m(min(n, c_m)), exact at every N
    limit = batch_limit(policy, 0.7, concurrency=concurrency)
    curve = RateCurve.parse(BATCH["rate_curve"])
    levels = 600
    mean_jobs, served, waiting = [], [], []
    for m, (speed, slots) in enumerate(zip(limit.class_speed, limit.class_concurrency)):
        capacity = speed * curve.at_concurrency(int(slots))
        birth = limit.arrival_rate if policy == "random" else limit.load * capacity
        death = speed * curve.phi(np.minimum(np.arange(1, levels + 1), slots))
        law = chain_distribution(np.full(levels, birth), death)
        mean_jobs.append(np.arange(levels + 1) @ law)
        served.append(law[1:] @ death)
        waiting.append(law[slots:].sum() if slots < levels else 0.0)  # arrivals that find every slot taken (PASTA)
        assert limit.utilisation[m] == pytest.approx(served[m] / capacity, rel=1e-9)
    fraction = limit.class_fraction
    throughput = fraction @ np.array(served)
    assert limit.throughput == pytest.approx(limit.arrival_rate, rel=1e-9)
    assert limit.mean_response_time == pytest.approx(fraction @ np.array(mean_jobs) / throughput, rel=1e-9)
    arrivals = np.array(served)  # the arrival rate of each class, admitted in full
    assert limit.p_wait == pytest.approx(fraction @ (arrivals * np.array(waiting)) / throughput, rel=1e-8)


@pytest.mark.parametrize("policy", ["random", "jiq", "jfsq", "sed", "pod"])
def test_batch_servers_with_a_buffer_lose_what_they_cannot_hold(policy):
    # buffer 6 on slots of 4 and 8: conservation, and random is M/M/c/b-like per server (PASTA: a job
    # is lost when its server holds b jobs)
    limit = batch_limit(policy, 0.95, buffer=6)
    assert limit.occupancy.shape[1] <= 6
    assert limit.throughput == pytest.approx(limit.arrival_rate * (1 - limit.blocking_probability), rel=1e-9)
    if policy == "random":
        curve = RateCurve.parse(BATCH["rate_curve"])
        lost = [
            chain_distribution(np.full(6, limit.arrival_rate), speed * curve.phi(np.minimum(np.arange(1, 7), slots)))[
                -1
            ]
            for speed, slots in zip(limit.class_speed, limit.class_concurrency)
        ]
        assert limit.blocking_probability == pytest.approx(limit.class_fraction @ np.array(lost), rel=1e-9)


def test_independent_slots_are_mmc():
    # independent: c parallel servers of speed mu, an M/M/c queue per server under random routing
    limit = mean_field_arrays([2.0], [1.0], load=0.8, policy="random", concurrency=3, rate_curve="independent")
    assert limit.mean_response_time == pytest.approx(mmc_mean_response_time(4.8, 2.0, 3), rel=1e-9)
    assert limit.p_wait == pytest.approx(erlang_c(3, 4.8, 2.0), rel=1e-9)
    np.testing.assert_allclose(limit.utilisation, 0.8, rtol=1e-12)


@pytest.mark.parametrize("policy", MEANFIELD_POLICIES)
def test_one_slot_servers_give_todays_limit_bit_for_bit(policy):
    speeds, counts = FLEETS["two"]
    today = mean_field_arrays(speeds, counts, load=0.9, policy=policy)
    curved = mean_field_arrays(
        speeds, counts, load=0.9, policy=policy, concurrency=1, rate_curve="saturating:alpha=0.3"
    )
    np.testing.assert_array_equal(curved.occupancy, today.occupancy)
    assert curved.to_dict() == today.to_dict()
    if policy in hetlb.POLICIES:
        system = hetlb.System.from_speeds("2x1,2x0.25", load=0.9)
        assert mean_field(system, policy).to_dict() == today.to_dict()


@pytest.mark.parametrize("fleet", FLEETS)
@pytest.mark.parametrize("load", LOADS)
@pytest.mark.parametrize("buffer", [None, 2])
def test_slot_filling_on_one_slot_agrees_with_the_explicit_fixed_points(fleet, load, buffer):
    # two derivations of the ranking limits: slot filling by key, and the c = 1 forms
    speeds, counts = FLEETS[fleet]
    classes = server_classes(speeds, counts)
    arrival_rate = load * float(np.sum(classes.fraction * classes.speed))
    for policy in SLOT_POLICIES:
        rule = hetlb.POLICIES[policy].mean_field.rule
        explicit = ranking_occupancy(rule, classes.speed, classes.fraction, arrival_rate, buffer)
        filled = slot_filling_occupancy(policy, classes, arrival_rate, buffer)
        assert filled.shape == explicit.shape, policy
        np.testing.assert_allclose(filled, explicit, atol=1e-10, err_msg=policy)


@pytest.mark.parametrize("concurrency", [4, "inf"])
@pytest.mark.parametrize("policy", ["random", "weighted-random", "pod", "jsq", "jfsq", "sed"])
def test_shared_servers_hold_the_queues_of_one_slot_servers(policy, concurrency):
    # shared: a server with n >= 1 jobs completes at rate mu whatever n, as with one slot; these
    # policies' keys order (class, n) alike, so their limits are today's
    speeds, counts = FLEETS["four"]
    today = mean_field_arrays(speeds, counts, load=0.9, policy=policy)
    shared = mean_field_arrays(speeds, counts, load=0.9, policy=policy, concurrency=concurrency, rate_curve="shared")
    levels = max(shared.levels, today.levels)  # the truncations may differ below TAIL_TOLERANCE
    pad = [np.pad(limit.occupancy, ((0, 0), (0, levels - limit.levels))) for limit in (shared, today)]
    np.testing.assert_allclose(*pad, atol=1e-9)
    assert shared.mean_response_time == pytest.approx(today.mean_response_time, rel=1e-9)


@pytest.mark.parametrize("load", [0.5, 0.9])
def test_jfiq_on_independent_slots_is_jfiq_on_the_slots_as_servers(load):
    # independent slots of speed mu: a free slot gives a new job rate mu whatever n, so jfiq fills
    # the free slots fastest first, as jfiq on one-slot servers, c_m of them per server
    multi = mean_field_arrays(
        [1.0, 0.25], [0.5, 0.5], load=load, policy="jfiq", concurrency=[4, 2], rate_curve="independent"
    )
    slots = mean_field_arrays([1.0, 0.25], [0.5 * 4, 0.5 * 2], load=load, policy="jfiq")
    np.testing.assert_allclose(multi.utilisation, slots.utilisation, atol=1e-12)
    assert multi.mean_response_time == pytest.approx(slots.mean_response_time, rel=1e-12)
    assert multi.p_wait == 0


@pytest.mark.parametrize("load", [0.8, 0.9])
def test_jiq_gives_every_server_with_a_free_slot_the_same_rate(load):
    # the chain of a class-m server: birth R below c_m, none at c_m, death mu_m phi_m(n); so
    # p(n + 1) mu_m phi_m(n + 1) / p(n) is the same R for every class and every n < c_m
    limit = batch_limit("jiq", load)
    curve = RateCurve.parse(BATCH["rate_curve"])
    rates = []
    for m, slots in enumerate(limit.class_concurrency):
        tails = np.r_[1.0, limit.occupancy[m], 0.0]
        law = tails[:-1] - tails[1:]
        assert law[slots + 1 :].sum() == pytest.approx(0.0, abs=1e-12)
        n = np.arange(slots)
        rates.extend(law[n + 1] * limit.class_speed[m] * curve.phi(n + 1) / law[n])
    np.testing.assert_allclose(rates, rates[0], rtol=1e-9)
    assert limit.throughput == pytest.approx(limit.arrival_rate, rel=1e-10)


@pytest.mark.parametrize("policy", ["pod", "weighted-random"])
def test_the_ode_of_batch_servers_settles_at_the_fixed_point(policy):
    # the drift with death mu_m phi_m(min(i, c_m)) has the fixed point of the birth-death chains
    limit = batch_limit(policy, 0.85)
    servers = {"concurrency": BATCH["concurrency"], "rate_curve": BATCH["rate_curve"]}
    path = mean_field_trajectory_arrays(
        BATCH["speeds"], BATCH["fractions"], load=0.85, policy=policy, times=[5000.0], **servers
    )
    np.testing.assert_allclose(path.occupancy[-1][:, : limit.levels], limit.occupancy, atol=1e-6)


def test_batch_limits_refuse_what_they_do_not_derive():
    with pytest.raises(InputError, match="^policy: jsq-lisf has no mean-field limit"):
        batch_limit("jsq-lisf", 0.8)
    with pytest.raises(InputError, match="^concurrency: jsq-df-ds"):
        batch_limit("jsq-df-ds", 0.8)
    with pytest.raises(InputError, match="^concurrency: jiq with unlimited concurrency"):
        batch_limit("jiq", 0.8, concurrency="inf")
    with pytest.raises(InputError, match="^rate_curve"):
        batch_limit("pod", 0.8, concurrency="inf", rate_curve="independent")
    with pytest.raises(InputError, match="^speeds: the classes must differ"):
        mean_field_arrays([1.0, 1.0], [1, 1], load=0.5, concurrency=[2, 2])
    with pytest.raises(InputError, match="^concurrency: pod's mean-field solver resolves"):
        batch_limit("pod", 0.8, concurrency=[4, 5000])


def test_cli_meanfield_on_batch_servers(capsys):
    argv = ["meanfield", "--speeds", "2x1,2x0.5", "--concurrency", "2x4,2x8", "--rate-curve", "saturating:alpha=0.2"]
    assert main([*argv, "--load", "0.85", "--policy", "sed", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mean_response_time"] == pytest.approx(batch_limit("sed", 0.85).mean_response_time, rel=1e-12)
    assert [row["concurrency"] for row in out["classes"]] == [4, 8]
    assert [row["capacity"] for row in out["classes"]] == pytest.approx([2.5, 0.5 * 8 / 2.4])
    assert main([*argv, "--load", "0.85", "--policy", "jiq"]) == 0
    text = capsys.readouterr().out
    assert "slots" in text and "saturating:alpha=0.2" in text and "utilised" in text
    compare = ["--compare", "64", "--jobs", "3000", "--replications", "2", "-q", "--json"]
    assert main([*argv, "--load", "0.75", "--policy", "jfiq", *compare]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["simulation"]["n_servers"] == 64 and out["simulation"]["utilisation"] is None
    assert out["limit"]["classes"][1]["concurrency"] == 8
    assert main([*argv, "--load", "0.85", "--arrivals", "batch:mean=2"]) == 2
    assert capsys.readouterr().err.startswith("hetlb: error: --arrivals: ")


# --- against simulation where the limit holds at every N -----------------------------------------


def test_weighted_random_simulation_matches_at_small_n():
    # the servers are independent M/M/1 queues whatever N: the limit is exact
    limit = mean_field_arrays([1.0, 0.5], [0.5, 0.5], load=0.6, policy="weighted-random")
    system = hetlb.System.from_speeds(server_speeds(limit.class_speed, limit.class_fraction, 32), load=0.6)
    result = hetlb.simulate(system, "weighted-random", jobs=40_000, warmup=200.0, replications=6, seed=3)
    low, high = replication_interval(result, 2)
    assert low <= limit.mean_response_time <= high


def test_jfsq_at_low_load_keeps_every_job_on_the_fast_servers():
    # load on the 128 fast servers 0.625: all of them busy has probability ~1e-10, so T = 1 at N = 256
    limit = mean_field_arrays([1.0, 0.25], [0.5, 0.5], load=0.5, policy="jfsq")
    system = hetlb.System.from_speeds(server_speeds(limit.class_speed, limit.class_fraction, 256), load=0.5)
    result = hetlb.simulate(system, "jfsq", jobs=40_000, warmup=20.0, replications=6, seed=4)
    low, high = replication_interval(result, 2)
    assert limit.mean_response_time == 1.0 and low <= 1.0 <= high


@pytest.mark.slow
@pytest.mark.parametrize(
    "policy,fleet,load",
    [("jsq", "four", 0.9), ("pod", "uniform8", 0.7), ("jsq-df-ds", "two", 0.5), ("sed", "two", 0.9)],
)
def test_large_n_simulation_within_one_percent(policy, fleet, load):
    # at N = 4096 the finite-N gap (order 1/N) is below the 1% the issue asks for at N = 2^14
    speeds, counts = FLEETS[fleet]
    limit = mean_field_arrays(speeds, counts, load=load, policy=policy)
    system = hetlb.System.from_speeds(server_speeds(limit.class_speed, limit.class_fraction, 4096), load=load)
    result = hetlb.simulate(system, policy, jobs=100_000, warmup=300.0, replications=5, seed=5)
    low, high = replication_interval(result, 4)
    target = limit.mean_response_time
    assert low - 0.01 * target <= target <= high + 0.01 * target


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["jiq", "jfiq", "sed", "pod"])
@pytest.mark.parametrize("load", [0.75, 0.95])
def test_batch_classes_at_large_n_within_two_percent(policy, load):
    # the inference engines of BATCH at N = 4096: the criterion, 2%. (At 0.85 sed's keys
    # tie in exact arithmetic, 2.8 = 2.8, but not in floating point, where a simulator orders them.)
    limit = batch_limit(policy, load)
    system = hetlb.System.from_speeds(**fleet(limit.classes, 4096), load=load)
    result = hetlb.simulate(system, policy, jobs=100_000, warmup=300.0, replications=5, seed=6)
    low, high = replication_interval(result, 8)
    target = limit.mean_response_time
    assert low - 0.02 * target <= target <= high + 0.02 * target


# --- the command line -----------------------------------------------------------------------------


def test_cli_meanfield_json(capsys):
    assert main(["meanfield", "--speeds", "2x1,2x0.25", "--load", "0.9", "--policy", "jfsq", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mean_response_time"] == pytest.approx((0.5 + 0.25) / 0.5625)
    assert [row["utilisation"] for row in out["classes"]] == pytest.approx([1.0, 0.5])


def test_cli_meanfield_text_and_compare(capsys):
    argv = ["meanfield", "--speeds", "8x1,8x0.5", "--load", "0.5", "--policy", "jfiq", "--compare", "64"]
    assert main([*argv, "--jobs", "5000", "--replications", "3", "-q"]) == 0
    out = capsys.readouterr().out
    assert "mean response time" in out and "N = 64" in out


@pytest.mark.parametrize(
    "argv,field",
    [
        (["--policy", "nope"], "--policy"),
        (["--policy", "pod", "--set", "e=2"], "--set e"),
        (["--policy", "jiq-df-ds", "--compare", "16"], "--policy"),
        (["--load", "1.2"], "--load"),
    ],
)
def test_cli_meanfield_errors(capsys, argv, field):
    assert (
        main(["meanfield", "--speeds", "2x1,2x0.25", *(["--load", "0.5"] if "--load" not in argv else []), *argv]) == 2
    )
    assert capsys.readouterr().err.startswith(f"hetlb: error: {field}: ")


def test_the_finite_n_gap_of_a_sampling_policy_shrinks_as_one_over_n():
    # jsq-df-ds has a smooth drift: the gap between N servers and the limit is c / N (refined mean
    # field). Weighted least squares of the gap on N^-1 and on N^-1/2: the first fits (chi-square
    # below its 99.9% quantile with 4 degrees of freedom), the second does not.
    limit = mean_field_arrays([1.0, 0.25], [0.5, 0.5], load=0.5, policy="jsq-df-ds")
    sizes = np.array([8, 16, 32, 64, 128])
    gap, error = [], []
    for n_servers in sizes:
        system = hetlb.System.from_speeds(server_speeds(limit.class_speed, limit.class_fraction, n_servers), load=0.5)
        result = hetlb.simulate(system, "jsq-df-ds", jobs=100_000, warmup=100.0, replications=16, seed=12)
        means = np.array([run.mean_response_time for run in result.runs]) / limit.mean_response_time - 1
        gap.append(means.mean())
        error.append(means.std(ddof=1) / math.sqrt(means.size))
    gap, weight = np.array(gap), 1 / np.array(error) ** 2

    def chi_square(rate):
        x = sizes.astype(float) ** -rate
        c = np.sum(weight * gap * x) / np.sum(weight * x * x)
        return np.sum(weight * (gap - c * x) ** 2)

    threshold = stats.chi2.ppf(0.999, sizes.size - 1)
    assert chi_square(1.0) < threshold < chi_square(0.5)


@pytest.mark.parametrize("policy,load", [("weighted-random", 0.7), ("pod", 0.7), ("jsq-df-ds", 0.5)])
def test_the_settling_time_brings_the_ode_within_its_tolerance(policy, load):
    from hetlb.theory.meanfield import mean_field_settling_time

    limit = mean_field_arrays([1.0, 0.25], [0.5, 0.5], load=load, policy=policy)
    settled = mean_field_settling_time(limit, tolerance=1e-3)
    path = mean_field_trajectory_arrays([1.0, 0.25], [0.5, 0.5], load=load, policy=policy, times=[settled])
    assert abs(path.mean_number_in_system[0] / limit.mean_number_in_system - 1) < 1e-3


def test_the_theory_names_resolve_to_their_modules_and_a_sampling_point_loads_no_scipy():
    import importlib
    import subprocess
    import sys

    import hetlb.theory as theory

    assert set(theory.__all__) == set(theory.HOME)
    for name in theory.__all__:
        assert getattr(theory, name) is getattr(importlib.import_module(f"hetlb.theory.{theory.HOME[name]}"), name)
    code = (
        "import sys; from hetlb.theory import mean_field_arrays; "
        "mean_field_arrays([1.0, 0.25], [1, 1], load=0.9, policy='jsq-df-ds', buffer=100); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'scipy'))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[]"


def test_the_system_forms_read_the_classes_load_and_buffer_of_the_system():
    system = hetlb.System.from_speeds("6x1.0,2x0.25", load=0.7, buffer=6)
    for policy, params in (("pod", {"d": 2}), ("jfsq", {})):
        limit = mean_field(system, policy, **params)
        arrays = mean_field_arrays([1.0, 0.25], [0.75, 0.25], load=0.7, policy=policy, buffer=6, **params)
        assert limit.to_dict() == arrays.to_dict()
    path = hetlb.theory.mean_field_trajectory(system, "pod", times=[1.0, 5.0])
    same = mean_field_trajectory_arrays([1.0, 0.25], [3, 1], load=0.7, policy="pod", buffer=6, times=[1.0, 5.0])
    np.testing.assert_array_equal(path.occupancy, same.occupancy)


def test_the_system_forms_refuse_arrays_naming_the_system():
    with pytest.raises(InputError) as error:
        mean_field([1.0, 0.25], "jfsq")
    assert error.value.field == "system" and "_arrays form" in error.value.rule
    with pytest.raises(InputError, match="^system: must be a hetlb.System"):
        hetlb.theory.speed_lower_bound([1.0, 0.5])
