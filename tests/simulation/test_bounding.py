"""JSQ-FSL and JSQ-SSL (paper 002, section 5): the sandwich of Prop 5.1 on coupled paths, closed
forms, exact chains of small systems, and input errors."""

import math

import numpy as np
import pytest
from scipy import stats

from hetlb.errors import InputError
from hetlb.kernels.bounding import (
    FIRST_POLICY_ROW,
    departing_level,
    length_of_rank,
    sandwich_violations,
    serving_rank,
)
from hetlb.simulation.bounding import MEASURES, TIE_BREAKS, check_sandwich_arrays, simulate_bounding_system_arrays
from hetlb.theory import solve_exact_arrays
from hetlb.theory.bounding import solve_bounding_system

from support.statistics import bonferroni_t_halfwidth

ALPHA = 0.001
TWO_POOLS = [0.5, 0.5, 1.5, 1.5]


def assert_matches(samples, exact, comparisons, label):
    half_width = bonferroni_t_halfwidth(samples, ALPHA, comparisons)
    assert abs(np.mean(samples) - exact) <= half_width, f"{label}: {np.mean(samples)} +- {half_width} vs {exact}"


def column(result, measure):
    return result.replication_values[:, MEASURES.index(measure)]


# --- the sandwich on coupled paths ------------------------------------------------------------------


@pytest.mark.parametrize("buffer", [1, 2, 5, None])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sandwich_holds_on_every_coupled_path(buffer, seed):
    """Q^FSL_{+i} <= Q^pi_{+i} <= Q^SSL_{+i} after every tick, every level, every tie-break; speeds
    U[0.7, 1.3], or two pools (seed 2) so that speeds tie; with a finite buffer the load is above
    capacity so that every level up to b is visited, with infinite buffers it is Halfin-Whitt."""
    n = 30
    rng = np.random.default_rng(seed)
    speeds = rng.uniform(0.7, 1.3, n) if seed < 2 else rng.choice([0.5, 1.5], n)
    arrival_rate = speeds.sum() - 0.5 * math.sqrt(n) if buffer is None else 1.3 * speeds.sum()
    check = check_sandwich_arrays(speeds, arrival_rate, buffer, horizon=600.0, seed=seed)
    assert check.holds, (check.lower_violations, check.upper_violations)
    assert check.ticks > 30_000
    jobs = check.mean_jobs
    assert jobs["fsl"] < jobs["ssl"]
    for tie_break in TIE_BREAKS:
        assert jobs["fsl"] <= jobs[tie_break] <= jobs["ssl"]
        assert check.mean_waiting["fsl"] <= check.mean_waiting[tie_break] <= check.mean_waiting["ssl"]


def test_equal_speeds_make_every_system_one_path():
    """With one speed FSL, SSL and JSQ under any tie-break have the same Q_{+i} at all times."""
    check = check_sandwich_arrays(np.full(12, 0.75), 8.5, buffer=3, horizon=500.0, seed=4)
    assert check.holds
    assert len(set(check.mean_jobs.values())) == 1
    assert len(set(check.mean_waiting.values())) == 1


def test_violation_counter_sees_a_broken_level():
    """The check is not vacuous: a JSQ row above SSL at level 2 only is counted as an upper violation."""
    level_count = np.zeros((FIRST_POLICY_ROW + 1, 4), dtype=np.int64)
    level_count[:, 0] = 3
    level_count[:, 1] = 3
    level_count[FIRST_POLICY_ROW, 2] = 1  # JSQ holds 4 jobs, FSL and SSL 3
    violations = np.zeros((1, 2), dtype=np.int64)
    first = np.full((1, 2), np.inf)
    sandwich_violations(level_count, 2, FIRST_POLICY_ROW, violations, first, 7.5)
    assert violations.tolist() == [[0, 1]] and first[0, 1] == 7.5


def test_departure_lookup_matches_sorting():
    """serving_rank and length_of_rank find the buffer a sorted matching would pick, and so does
    the event loop's scan down the levels (departing_level)."""
    rng = np.random.default_rng(5)
    for _ in range(200):
        lengths = np.sort(rng.integers(0, 5, size=7))[::-1]
        level_count = np.array([(lengths >= i).sum() for i in range(lengths.max() + 2)], dtype=np.int64)
        served_rate = np.concatenate([[0.0], np.cumsum(rng.uniform(0.5, 2.0, 7))])
        position = rng.uniform(0.0, served_rate[-1])
        rank = serving_rank(served_rate, position, level_count[1])
        expected_rank = int(np.searchsorted(served_rate, position, side="right"))
        assert rank == min(expected_rank, level_count[1] + 1)
        if rank <= level_count[1]:
            assert length_of_rank(level_count, lengths.max(), rank) == lengths[rank - 1]
            assert departing_level(served_rate, level_count, lengths.max(), position) == lengths[rank - 1]


# --- closed forms and exact chains ------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["fsl", "ssl"])
def test_single_job_buffers_are_a_loss_birth_death_chain(kind):
    """b = 1: FSL keeps the q fastest servers busy, SSL the q slowest, so Q_1 is a birth-death chain
    with birth rate n lambda (below n) and death rate the sum of the q fastest / slowest speeds."""
    speeds = np.array([0.4, 0.7, 1.0, 1.6, 2.3])
    arrival_rate = 4.0
    ordered = np.sort(speeds)[::-1] if kind == "fsl" else np.sort(speeds)
    weight = np.cumprod(np.concatenate([[1.0], arrival_rate / np.cumsum(ordered)]))
    law = weight / weight.sum()
    result = simulate_bounding_system_arrays(
        speeds, arrival_rate, kind, buffer=1, horizon=600.0, warmup=20.0, replications=20, seed=11
    )
    assert_matches(column(result, "Q_1"), law @ np.arange(6), 2, f"{kind} E Q_1")
    assert_matches(column(result, "loss_fraction"), law[-1], 2, f"{kind} loss")


@pytest.mark.parametrize("buffer", [2, None])
def test_equal_speeds_give_homogeneous_jsq(buffer):
    """With one speed FSL and SSL are ordinary JSQ on homogeneous servers (exact solver of JSQ)."""
    speeds, arrival_rate = [1.0, 1.0, 1.0], 2.4
    exact_buffer = 2 if buffer else 16
    exact = solve_exact_arrays(speeds, [arrival_rate], [[0, 1, 2]], exact_buffer, policy="jsq")
    for kind in ("fsl", "ssl"):
        result = simulate_bounding_system_arrays(
            speeds, arrival_rate, kind, buffer, horizon=1500.0, warmup=30.0, replications=20, seed=21
        )
        assert_matches(column(result, "Q_+1"), exact.mean_number_in_system, 4, f"{kind} E Q_+1")
        assert_matches(
            column(result, "loss_fraction"), exact.blocking_probability if buffer else 0.0, 4, f"{kind} loss"
        )


@pytest.mark.parametrize("buffer", [2, None])
@pytest.mark.parametrize("kind", ["fsl", "ssl"])
def test_two_speed_pools_match_the_exact_chain(kind, buffer):
    """Two pools of two servers: level means, loss and the law of Q_{+1} against the exact chain on
    sorted buffer lengths (infinite buffers: b = 12, whose full states carry a mass far below the
    simulation's resolution)."""
    arrival_rate = 2.6
    exact = solve_bounding_system(TWO_POOLS, arrival_rate, kind, buffer or 12)
    if buffer is None:
        assert exact.full_probability < 1e-6
    result = simulate_bounding_system_arrays(
        TWO_POOLS, arrival_rate, kind, buffer, horizon=1500.0, warmup=30.0, replications=20, seed=31
    )
    tail_points = [3, 4, 6]
    comparisons = 5 + len(tail_points)
    expected = {
        "Q_1": exact.level_means[0],
        "Q_2": exact.level_means[1],
        "Q_+1": exact.mean_jobs,
        "Q_+2": exact.mean_waiting,
        "loss_fraction": exact.loss_probability if buffer else 0.0,
    }
    for measure, value in expected.items():
        assert_matches(column(result, measure), value, comparisons, f"{kind} b={buffer} {measure}")
    widen = stats.t.ppf(1 - ALPHA / (2 * comparisons), 19) / stats.t.ppf(0.975, 19)
    law = result.x_plus1_law
    for jobs in tail_points:
        exact_tail = exact.jobs_law[jobs + 1 :].sum()
        simulated = law.tail((jobs - 4) / 2.0)
        assert abs(simulated - exact_tail) <= widen * law.ccdf_half_width[jobs], f"P(Q_+1 > {jobs})"


def test_coupled_jsq_systems_have_the_right_marginals():
    """Each JSQ system of the coupled run is the JSQ chain of its tie-break (exact solver), and the
    bounding systems their own chains: time averages of Q_{+1} over independent seeds."""
    arrival_rate, buffer = 2.6, 2
    runs = [
        check_sandwich_arrays(
            TWO_POOLS, arrival_rate, buffer, ("jsq", "jfsq", "jssq", "jsq-fiq"), horizon=1000.0, warmup=20.0, seed=seed
        )
        for seed in range(12)
    ]
    exact = {kind: solve_bounding_system(TWO_POOLS, arrival_rate, kind, buffer).mean_jobs for kind in ("fsl", "ssl")}
    for policy in runs[0].tie_breaks:
        exact[policy] = solve_exact_arrays(
            TWO_POOLS, [arrival_rate], [[0, 1, 2, 3]], buffer, policy
        ).mean_number_in_system
    for name, value in exact.items():
        assert_matches([run.mean_jobs[name] for run in runs], value, len(exact), name)


# --- results, input errors and the documentation ---------------------------------------------------


def test_same_seed_same_result():
    first = simulate_bounding_system_arrays(
        TWO_POOLS, 2.6, "ssl", 3, horizon=200.0, warmup=10.0, replications=2, seed=8
    )
    second = simulate_bounding_system_arrays(
        TWO_POOLS, 2.6, "ssl", 3, horizon=200.0, warmup=10.0, replications=2, seed=8
    )
    assert np.array_equal(first.replication_values, second.replication_values)
    scaled = first.estimates
    assert scaled["X_+1"].mean == pytest.approx((first.estimates["Q_+1"].mean - 4) / 2)
    assert scaled["X_+1"].mean == pytest.approx(scaled["X_1"].mean + scaled["X_+2"].mean)


@pytest.mark.parametrize(
    "call, field",
    [
        (lambda: simulate_bounding_system_arrays([1.0, -1.0], 1.0), "speeds"),
        (lambda: simulate_bounding_system_arrays([], 1.0), "speeds"),
        (lambda: simulate_bounding_system_arrays([1.0, 1.0], 0.0), "arrival_rate"),
        (lambda: simulate_bounding_system_arrays([1.0, 1.0], 2.0), "arrival_rate"),
        (lambda: simulate_bounding_system_arrays([1.0, 1.0], 1.0, kind="lsf"), "kind"),
        (lambda: simulate_bounding_system_arrays([1.0, 1.0], 1.0, buffer=0), "buffer"),
        (lambda: simulate_bounding_system_arrays([1.0, 1.0], 1.0, buffer=2.5), "buffer"),
        (lambda: simulate_bounding_system_arrays([1.0, 1.0], 1.0, horizon=10.0, warmup=10.0), "horizon"),
        (lambda: simulate_bounding_system_arrays([1.0, 1.0], 1.0, warmup=-1.0), "warmup"),
        (lambda: simulate_bounding_system_arrays([1.0, 1.0], 1.0, replications=0), "replications"),
        (lambda: simulate_bounding_system_arrays([1.0, 1.0], 1.0, seed=-3), "seed"),
        (lambda: check_sandwich_arrays([1.0, 1.0], 1.0, tie_breaks=("jiq",)), "tie_breaks"),
        (lambda: check_sandwich_arrays([1.0, 1.0], 1.0, tie_breaks=()), "tie_breaks"),
        (lambda: solve_bounding_system([1.0, 1.0], 1.0, "fsl", None), "buffer"),
    ],
)
def test_input_errors_name_the_field(call, field):
    with pytest.raises(InputError) as error:
        call()
    assert error.value.field == field
    assert "\n" not in str(error.value)


def test_a_system_gives_the_arrays_form_bit_for_bit_and_refuses_what_bounding_lacks():
    import hetlb

    system = hetlb.System.from_speeds(TWO_POOLS, arrival_rate=2.6, buffer=3)
    run = dict(horizon=200.0, warmup=10.0, replications=2, seed=8)
    by_system = hetlb.simulate_bounding_system(system, "ssl", **run)
    by_arrays = simulate_bounding_system_arrays(TWO_POOLS, 2.6, "ssl", 3, **run)
    np.testing.assert_array_equal(by_system.replication_values, by_arrays.replication_values)
    check = hetlb.check_sandwich(system, horizon=100.0, seed=3)
    assert check.mean_jobs == check_sandwich_arrays(TWO_POOLS, 2.6, 3, horizon=100.0, seed=3).mean_jobs
    for bad, field in (
        (hetlb.System.from_speeds(TWO_POOLS, arrival_rate=2.6, buffer=[3] * (len(TWO_POOLS) - 1) + [2]), "buffer"),
        (hetlb.System.from_speeds(TWO_POOLS, arrival_rate=2.6, buffer=3, job_sizes="deterministic"), "job_sizes"),
        (list(TWO_POOLS), "system"),
    ):
        with pytest.raises(InputError) as error:
            hetlb.simulate_bounding_system(bad)
        assert error.value.field == field
