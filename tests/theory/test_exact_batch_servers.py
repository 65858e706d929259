"""The exact solver on servers that serve many jobs at once and on batch and MMPP arrivals,
against closed forms (Erlang C, M/M/c/K, M/M/1, M^X/M/1), a matrix-geometric solution of MMPP/M/1
written here from the definition, the independent CTMC of tests/support/reference_ctmc.py (which
builds a batch's whole transition law instead of routing states), and facts that hold whatever
the chain."""

import math

import numpy as np
import pytest
import scipy.linalg

from hetlb import System
from hetlb.errors import InputError
from hetlb.policies.registry import register_policy, unregister_policy
from hetlb.theory import routing_probabilities, solve_exact, solve_exact_arrays

from support.reference_ctmc import POLICIES as REFERENCE_POLICIES
from support.reference_ctmc import solve_reference_ctmc

EXACT = 1e-9
"""Relative agreement of the solver with a closed form: the chain is solved to a residual of 1e-9;
where the closed form is of an infinite buffer, the buffer is long enough that the mass it cuts
off is below 1e-14."""


def one_server(arrival_rate, buffer, **servers_and_arrivals):
    return solve_exact_arrays([1.0], [arrival_rate], [[0]], buffer, "jsq", **servers_and_arrivals)


def erlang_c(arrival_rate, speed, c):
    """P(wait) and the mean response time of M/M/c (infinite buffer)."""
    a = arrival_rate / speed
    rho = a / c
    top = a**c / math.factorial(c) / (1 - rho)
    p_wait = top / (sum(a**k / math.factorial(k) for k in range(c)) + top)
    return p_wait, p_wait / (c * speed - arrival_rate) + 1 / speed


@pytest.mark.parametrize("c", [2, 4, 8])
def test_independent_curve_is_erlang_c(c):
    arrival_rate = 0.7 * c
    solution = one_server(arrival_rate, 150, concurrency=c, rate_curve="independent")
    p_wait, response = erlang_c(arrival_rate, 1.0, c)
    assert solution.p_wait == pytest.approx(p_wait, rel=EXACT)
    assert solution.mean_response_time == pytest.approx(response, rel=EXACT)
    assert solution.mean_service_time == pytest.approx(1.0, rel=EXACT)
    assert solution.mean_in_service[0] == pytest.approx(arrival_rate, rel=EXACT)  # each in service at rate 1


@pytest.mark.parametrize(("c", "buffer"), [(3, 3), (3, 7), (5, 6)])
def test_independent_curve_blocks_as_mmck(c, buffer):
    """M/M/c/K: p_n proportional to a^n / n! up to c, then a^n / (c! c^(n - c)); PASTA."""
    arrival_rate = 3.2
    weight = np.array([3.2**n / math.factorial(min(n, c)) / c ** max(n - c, 0) for n in range(buffer + 1)])
    law = weight / weight.sum()
    solution = one_server(arrival_rate, buffer, concurrency=c, rate_curve="independent")
    assert solution.blocking_probability == pytest.approx(law[-1], rel=EXACT)
    assert solution.mean_number_in_system == pytest.approx(law @ np.arange(buffer + 1), rel=EXACT)
    assert solution.p_wait == pytest.approx(law[c:buffer].sum() / (1 - law[-1]), rel=EXACT)
    np.testing.assert_allclose(solution.stationary, law, rtol=EXACT)


@pytest.mark.parametrize("c", [1, 2, 8, "inf"])
def test_shared_curve_is_mm1_at_any_concurrency(c):
    solution = one_server(0.6, 120, concurrency=c, rate_curve="shared")
    assert solution.mean_response_time == pytest.approx(1 / (1 - 0.6), rel=EXACT)
    assert solution.utilisation[0] == pytest.approx(0.6, rel=EXACT)


def test_saturating_server_is_its_birth_death_chain():
    """One server: p_n proportional to prod_{j <= n} lambda / (mu phi(min(j, c))), phi(b) = b / (1 + A (b - 1))."""
    arrival_rate, speed, c, alpha, buffer = 2.0, 1.5, 4, 0.3, 12
    phi = [b / (1 + alpha * (b - 1)) for b in range(1, c + 1)]
    weight = np.cumprod([1.0] + [arrival_rate / (speed * phi[min(n, c) - 1]) for n in range(1, buffer + 1)])
    law = weight / weight.sum()
    solution = solve_exact_arrays(
        [speed], [arrival_rate], [[0]], buffer, "jsq", concurrency=c, rate_curve=f"saturating:alpha={alpha}"
    )
    assert solution.mean_number_in_system == pytest.approx(law @ np.arange(buffer + 1), rel=EXACT)
    assert solution.blocking_probability == pytest.approx(law[-1], rel=EXACT)
    waiting = law @ np.maximum(np.arange(buffer + 1) - c, 0)
    assert solution.mean_waiting_time == pytest.approx(waiting / solution.throughput, rel=EXACT)


@pytest.mark.parametrize(("load", "mean_batch"), [(0.5, 2.0), (0.3, 4.0)])
def test_geometric_batches_on_one_server_are_mx_m1(load, mean_batch):
    """M^X/M/1 with geometric batches: L = rho (E[X] + E[X^2] / E[X]) / (2 (1 - rho)) = B rho / (1 - rho)."""
    solution = one_server(load, 200, arrivals=f"batch:mean={mean_batch}")
    assert solution.mean_number_in_system == pytest.approx(mean_batch * load / (1 - load), rel=EXACT)
    assert solution.throughput == pytest.approx(load, rel=EXACT)
    assert solution.n_states == 2 * 201


def test_a_batch_on_full_buffers_is_lost():
    """A buffer of one: a batch that finds the server busy is lost whole, one that finds it idle
    leaves one job; so the server is an M/M/1/1 fed at the batch rate lambda / B, and the share of
    jobs admitted is its throughput over lambda."""
    arrival_rate, mean_batch = 1.2, 3.0
    batch_rate = arrival_rate / mean_batch
    busy = batch_rate / (1 + batch_rate)
    solution = one_server(arrival_rate, 1, arrivals=f"batch:mean={mean_batch}")
    assert solution.utilisation[0] == pytest.approx(busy, rel=EXACT)
    assert solution.throughput == pytest.approx(busy, rel=EXACT)
    assert solution.blocking_probability == pytest.approx(1 - busy / arrival_rate, rel=EXACT)


def mmpp_m1_mean_number(arrival_rate, speed, ratio, on, off):
    """E[N] of MMPP/M/1 (infinite buffer) by the matrix-geometric method: levels n, phases (on,
    off); A0 = diag(lambda_on, lambda_off) up, A2 = mu I down, A1 the phase flips less both on the
    diagonal; R the least solution of A0 + R A1 + R^2 A2 = 0 (iterated), pi_n = pi_0 R^n with
    pi_0 (B1 + R A2) = 0, B1 = A1 + mu I, and pi_0 (I - R)^-1 1 = 1."""
    off_rate = arrival_rate * (on + off) / (ratio * on + off)
    up = np.diag([ratio * off_rate, off_rate])
    flips = np.array([[-1 / on, 1 / on], [1 / off, -1 / off]])
    down = speed * np.eye(2)
    local = flips - up - down
    rate_matrix = np.zeros((2, 2))
    for _ in range(100_000):
        updated = -(up + rate_matrix @ rate_matrix @ down) @ np.linalg.inv(local)
        if np.abs(updated - rate_matrix).max() < 1e-16:
            break
        rate_matrix = updated
    boundary = np.vstack([(local + down + rate_matrix @ down).T, np.ones(2) @ np.linalg.inv(np.eye(2) - rate_matrix).T])
    pi_0 = scipy.linalg.lstsq(boundary, np.array([0.0, 0.0, 1.0]))[0]
    inverse = np.linalg.inv(np.eye(2) - rate_matrix)
    return float(pi_0 @ rate_matrix @ inverse @ inverse @ np.ones(2))


@pytest.mark.parametrize(("ratio", "on", "off"), [(3.0, 2.0, 3.0), (10.0, 0.5, 5.0)])
def test_mmpp_on_one_server_is_the_matrix_geometric_mmpp_m1(ratio, on, off):
    arrival_rate = 0.5
    solution = one_server(arrival_rate, 250, arrivals=f"mmpp:ratio={ratio},on={on},off={off}")
    expected = mmpp_m1_mean_number(arrival_rate, 1.0, ratio, on, off)
    assert solution.mean_number_in_system == pytest.approx(expected, rel=1e-8)
    assert solution.mean_response_time == pytest.approx(expected / arrival_rate, rel=1e-8)
    assert solution.n_states == 2 * 251


SMALL = {"speed": [2.0, 1.0, 1.0], "arrival_rate": [2.4, 1.0], "compat": [[0, 1, 2], [1, 2]], "buffer": [5, 4, 3]}


@pytest.mark.parametrize("policy", ["jsq", "jfsq", "jiq", "sed", "jlu", "lew", "jsq-lisf", "pod"])
def test_unit_batches_and_flat_mmpp_are_poisson(policy):
    servers = {"concurrency": [3, 2, 1], "rate_curve": "saturating:alpha=0.4"}
    poisson = solve_exact_arrays(policy=policy, **SMALL, **servers)
    for arrivals in ("batch:mean=1", "mmpp:ratio=1,on=0.5,off=2"):
        other = solve_exact_arrays(policy=policy, arrivals=arrivals, **SMALL, **servers)
        for measure in ("mean_response_time", "blocking_probability", "p_wait", "mean_waiting_time"):
            assert getattr(other, measure) == pytest.approx(getattr(poisson, measure), rel=1e-9, abs=1e-13)


def test_bursts_cost_more_than_poisson():
    servers = {"concurrency": 2, "rate_curve": "table:1,1.7"}
    poisson = solve_exact_arrays(policy="jsq", **SMALL, **servers)
    for arrivals in ("batch:mean=3", "mmpp:ratio=6,on=1,off=2"):
        bursty = solve_exact_arrays(policy="jsq", arrivals=arrivals, **SMALL, **servers)
        assert bursty.mean_response_time > poisson.mean_response_time
        assert bursty.blocking_probability > poisson.blocking_probability


def test_jlu_is_jsq_and_lew_is_jsq_when_the_servers_alike():
    """n / c orders as n when every c is the same; n / (mu phi(c)) as n when every capacity is."""
    system = {**SMALL, "speed": [1.0, 1.0, 1.0], "concurrency": 3, "rate_curve": "saturating:alpha=0.5"}
    jsq = solve_exact_arrays(policy="jsq", **system)
    for policy in ("jlu", "lew"):
        assert solve_exact_arrays(policy=policy, **system).mean_response_time == pytest.approx(
            jsq.mean_response_time, rel=1e-12
        )


def test_jsq_lisf_with_servers_never_full_is_random():
    """With unlimited concurrency no server ever loses its last free slot: all have been free since
    time 0 and tie, so jsq-lisf picks uniformly, as random does."""
    system = {**SMALL, "concurrency": "inf", "rate_curve": "shared"}
    lisf = solve_exact_arrays(policy="jsq-lisf", **system)
    random = solve_exact_arrays(policy="random", **system)
    assert lisf.mean_response_time == pytest.approx(random.mean_response_time, rel=1e-10)
    assert lisf.n_states == random.n_states


def test_jsq_lisf_on_multi_slot_servers_counts_its_states():
    """States (q, order of the servers with a free slot); for two servers of buffer 3 and c = 2:
    both free (2 x 2 queue pairs, 2 orders), one free (2 x 2 x 2), none (2 x 2): 8 + 8 + 4 = 20."""
    solution = solve_exact_arrays([2.0, 1.0], [2.0], [[0, 1]], 3, "jsq-lisf", concurrency=2, rate_curve="shared")
    assert solution.n_states == 20


def test_routing_on_multi_slot_servers_follows_the_definitions():
    speed = [1.0, 1.0, 2.0]
    servers = {"concurrency": [4, 1, 2], "rate_curve": "saturating:alpha=0.5"}
    q = np.array([2, 0, 2])
    # free slots: servers 0 (2 < 4) and 1 (0 < 1); server 2 is full
    np.testing.assert_allclose(routing_probabilities("jiq", q, [0, 1, 2], speed, **servers), [0.5, 0.5, 0.0])
    # rate for a new job: server 0 at b' = 3: 1 / (1 + 0.5 * 2) = 0.5; server 1 at b' = 1: 1
    np.testing.assert_allclose(routing_probabilities("jfiq", q, [0, 1, 2], speed, **servers), [0.0, 1.0, 0.0])
    # sed: (n + 1) / (mu phi(min(n + 1, c))): 3 / 1.5 = 2, 1 / 1 = 1, 3 / (2 * 4 / 3) = 1.125
    np.testing.assert_allclose(routing_probabilities("sed", q, [0, 1, 2], speed, **servers), [0.0, 1.0, 0.0])
    # jlu: n / c = 0.5, 0, 1; with server 1 excluded, server 0
    np.testing.assert_allclose(routing_probabilities("jlu", q, [0, 2], speed, **servers), [1.0, 0.0, 0.0])
    # lew: n / (mu phi(c)): 2 / 1.6 = 1.25, 2 / (2 * 4 / 3) = 0.75
    np.testing.assert_allclose(routing_probabilities("lew", q, [0, 2], speed, **servers), [0.0, 0.0, 1.0])
    # jfsq: shortest among 0 and 2 (tied at 2), then the larger new-job rate: 0.5 against 2 / 1.5 * ...
    # server 2 at b' = 2: 2 * (2 / 1.5) / 2 = 1.333 > 0.5
    np.testing.assert_allclose(routing_probabilities("jfsq", q, [0, 2], speed, **servers), [0.0, 0.0, 1.0])
    np.testing.assert_allclose(routing_probabilities("jssq", q, [0, 2], speed, **servers), [1.0, 0.0, 0.0])


def test_single_slot_servers_give_todays_chain():
    """concurrency 1 with any curve is the papers' server: the same numbers, exactly."""
    today = solve_exact_arrays(policy="jsq-fiq", **SMALL)
    for curve in ("shared", "saturating:alpha=0.7", "table:1,1.5"):
        same = solve_exact_arrays(policy="jsq-fiq", concurrency=1, rate_curve=curve, **SMALL)
        assert same.mean_response_time == today.mean_response_time
        np.testing.assert_array_equal(same.stationary, today.stationary)


def test_system_reaches_the_solver_with_its_servers_and_arrivals():
    system = System.from_speeds(
        [2.0, 1.0], load=0.7, buffer=4, concurrency=[2, 3], rate_curve="table:1,1.8,2.4", arrivals="batch:mean=2"
    )
    direct = solve_exact_arrays(
        system.speed,
        system.arrival_rate,
        system.graph.to_lists(),
        system.buffer,
        "lew",
        concurrency=[2, 3],
        rate_curve="table:1,1.8,2.4",
        arrivals="batch:mean=2",
    )
    assert solve_exact(system, "lew").mean_response_time == direct.mean_response_time


def test_refusals_name_their_field():
    with pytest.raises(InputError) as error:
        solve_exact_arrays(policy="jlu", concurrency="inf", rate_curve="shared", **SMALL)
    assert error.value.field == "concurrency"
    with pytest.raises(InputError) as error:
        solve_exact_arrays(policy="jsq", arrivals="mmpp:ratio=2", **SMALL)
    assert error.value.field == "arrivals"
    with pytest.raises(InputError) as error:
        solve_exact_arrays(policy="jsq", concurrency=2, rate_curve="table:1,3", **SMALL)
    assert error.value.field == "rate_curve.values"


def test_a_registered_policy_runs_on_single_slot_servers_only():
    def fewest(queue_len, speed_class, n_classes, speed, idle_since):
        return float(queue_len)

    def fewest_exact(queue_len, speed, is_fast, params, idle_rank):
        least = queue_len == queue_len.min(axis=1, keepdims=True)
        return least / least.sum(axis=1, keepdims=True)

    register_policy("fewest-jobs", fewest, "least n", "a test", exact_rule=fewest_exact)
    try:
        assert solve_exact_arrays(policy="fewest-jobs", **SMALL).mean_response_time == pytest.approx(
            solve_exact_arrays(policy="jsq", **SMALL).mean_response_time, rel=1e-12
        )
        with pytest.raises(InputError) as error:
            solve_exact_arrays(policy="fewest-jobs", concurrency=2, **SMALL)
        assert error.value.field == "concurrency"
    finally:
        unregister_policy("fewest-jobs")


ORACLE_SYSTEMS = {
    "saturating": {
        "speed": [2.0, 1.0, 1.0],
        "arrival_rate": [2.5, 1.0],
        "compat": [[0, 1, 2], [1, 2]],
        "buffer": [5, 4, 3],
        "concurrency": [3, 2, 1],
        "rate_curve": "saturating:alpha=0.3",
    },
    "table": {
        "speed": [1.5, 1.0],
        "arrival_rate": [2.6],
        "compat": [[0, 1]],
        "buffer": [6, 5],
        "concurrency": [4, 3],
        "rate_curve": "table:1,1.6,2,2.2",
    },
}
ORACLE_POLICIES = list(REFERENCE_POLICIES)
"""Every policy of both solvers (weighted-random weighs by capacity, docs/reference/policies.md)."""


@pytest.mark.parametrize("arrivals", ["poisson", "batch:mean=2", "mmpp:ratio=4,on=2,off=3"])
@pytest.mark.parametrize("system", list(ORACLE_SYSTEMS))
@pytest.mark.parametrize("policy", ORACLE_POLICIES)
def test_agrees_with_the_reference_ctmc(policy, system, arrivals):
    case = ORACLE_SYSTEMS[system]
    ours = solve_exact_arrays(policy=policy, arrivals=arrivals, **case)
    reference = solve_reference_ctmc(policy=policy, arrivals=arrivals, **case)
    for measure in ("mean_response_time", "mean_waiting_time", "blocking_probability", "throughput"):
        assert getattr(ours, measure) == pytest.approx(reference[measure], rel=1e-8, abs=1e-12), measure
    np.testing.assert_allclose(ours.utilisation, reference["utilisation"], rtol=1e-8)
