"""The exact solver's jsq-lisf (longest idle server first): routing on the idle order, two servers
by hand, the reduction to jsq on identical servers, conservation, and agreement with an
event-by-event simulation that follows the rule as stated."""

import itertools
import math
import random
from collections import deque

import numpy as np
import pytest

from hetlb.errors import InputError
from hetlb.theory import routing_probabilities, solve_exact_arrays

from support.statistics import bonferroni_t_halfwidth

FAMILY_ALPHA = 0.01
SAME_LAW_TOLERANCE = 1e-10
ALL = [0, 1, 2, 3]


def lisf_routing(q, compat_k, idle_order=None):
    return routing_probabilities("jsq-lisf", np.array(q), compat_k, [1.0, 2.0, 0.5, 1.0], idle_order=idle_order)


def count_states(buffer):
    """(queue lengths, order of the idle servers) pairs, counted one queue-length vector at a time."""
    return sum(math.factorial(q.count(0)) for q in itertools.product(*(range(b + 1) for b in buffer)))


# --- routing -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "q, compat_k, idle_order, expected",
    [
        ([0, 1, 0, 0], ALL, [3, 0, 2], [0, 0, 0, 1]),  # 3 has been idle the longest
        ([0, 1, 0, 0], [0, 1, 2], [3, 0, 2], [1, 0, 0, 0]),  # the longest idle compatible one
        ([0, 1, 0, 0], [1, 2], [3, 0, 2], [0, 0, 1, 0]),
        ([0, 1, 0, 0], ALL, None, [1 / 3, 0, 1 / 3, 1 / 3]),  # all idle since time 0: tied
        ([2, 1, 1, 0], [0, 1, 2], [3], [0, 1 / 2, 1 / 2, 0]),  # none compatible idle: jsq
        ([2, 1, 1, 3], ALL, [], [0, 1 / 2, 1 / 2, 0]),
    ],
)
def test_routing_by_hand(q, compat_k, idle_order, expected):
    np.testing.assert_allclose(lisf_routing(q, compat_k, idle_order), expected, atol=1e-15)


@pytest.mark.parametrize("idle_order", [[0], [0, 2, 1], [0, 0, 2], [0, 2.0], [-1, 2]])
def test_invalid_idle_order_names_its_field(idle_order):
    with pytest.raises(InputError) as error:
        lisf_routing([0, 1, 0, 3], ALL, idle_order)
    assert error.value.field == "idle_order"


def test_state_limit_counts_idle_orders():
    # 3 servers with buffer 2: 27 queue-length vectors but 38 (q, idle order) states
    assert (
        solve_exact_arrays([1.0] * 3, [1.0], [[0, 1, 2]], 2, policy="jsq-lisf").n_states == count_states([2] * 3) == 38
    )
    with pytest.raises(InputError, match="max_states"):
        solve_exact_arrays([1.0] * 3, [1.0], [[0, 1, 2]], 2, policy="jsq-lisf", max_states=30)


# --- the chain -----------------------------------------------------------------------------------


def test_two_servers_by_hand():
    # speeds (2, 1), buffers (2, 1), lambda = 2. States: A = empty with 0 idle the longest, B = empty
    # with 1 idle the longest, C = (1, 0), D = (0, 1), E = (1, 1), F = (2, 0), G = (2, 1).
    # A -> C, B -> D, C -> E, D -> E, F -> G at 2 (to the one idle server); E -> G at 1 (tie, the
    # other half is lost); C -> B at 2 (0 empties, so 1 is now the longest idle); D -> A at 1;
    # E -> D, F -> C, G -> E at 2; E -> C, G -> F at 1. Balance gives
    # (A, B, C, D, E, F, G) = (26, 28, 28, 52, 50, 5, 20) / 209. Blocking (E / 2 + G) = 45/209;
    # throughput 2 (1 - 45/209) = 328/209; L = C + D + 2 (E + F) + 3 G = 250/209; T = 125/164.
    solution = solve_exact_arrays([2.0, 1.0], [2.0], [[0, 1]], [2, 1], policy="jsq-lisf")
    assert solution.n_states == 7
    # C order over (q_0, q_1): (0,0) = A + B, (0,1) = D, (1,0) = C, (1,1) = E, (2,0) = F, (2,1) = G
    np.testing.assert_allclose(solution.stationary, np.array([54, 52, 28, 50, 5, 20]) / 209, atol=1e-15)
    assert solution.blocking_probability == pytest.approx(45 / 209, abs=1e-15)
    assert solution.mean_response_time == pytest.approx(125 / 164, abs=1e-15)
    np.testing.assert_allclose(solution.utilisation, [103 / 209, 122 / 209], atol=1e-15)
    # random ties among the idle servers (jsq) give another law
    jsq = solve_exact_arrays([2.0, 1.0], [2.0], [[0, 1]], [2, 1], policy="jsq")
    assert abs(jsq.utilisation[0] - 103 / 209) > 1e-3


@pytest.mark.parametrize("speed, arrival_rate, buffer", [([1.3] * 4, 4.0, 3), ([1.0] * 3, 2.5, 4), ([0.7] * 5, 3.0, 2)])
def test_identical_servers_have_the_law_of_jsq(speed, arrival_rate, buffer):
    # with identical servers, which idle server gets the job does not change the number-in-system
    # process, and both laws are symmetric in the servers
    compat = [list(range(len(speed)))]
    lisf = solve_exact_arrays(speed, [arrival_rate], compat, buffer, policy="jsq-lisf")
    jsq = solve_exact_arrays(speed, [arrival_rate], compat, buffer, policy="jsq")
    assert lisf.n_states == count_states([buffer] * len(speed))
    for metric in ("mean_response_time", "blocking_probability", "p_wait"):
        assert getattr(lisf, metric) == pytest.approx(getattr(jsq, metric), abs=SAME_LAW_TOLERANCE)
    np.testing.assert_allclose(lisf.stationary, jsq.stationary, atol=SAME_LAW_TOLERANCE)
    np.testing.assert_allclose(lisf.utilisation, jsq.utilisation, atol=SAME_LAW_TOLERANCE)


THREE_SPEEDS = dict(speed=[2.0, 1.0, 0.5], arrival_rate=[2.0], compat=[[0, 1, 2]], buffer=3)
SPARSE_GRAPH = dict(
    speed=[2.0, 1.0, 1.0, 0.5], arrival_rate=[1.6, 1.4], compat=[[0, 1, 2], [1, 2, 3]], buffer=[2, 3, 4, 2]
)


def test_different_speeds_differ_from_jsq():
    # far beyond the agreement of identical servers with jsq above
    lisf = solve_exact_arrays(policy="jsq-lisf", **THREE_SPEEDS)
    jsq = solve_exact_arrays(policy="jsq", **THREE_SPEEDS)
    assert abs(lisf.mean_response_time - jsq.mean_response_time) > 1e4 * SAME_LAW_TOLERANCE
    assert np.abs(lisf.utilisation - jsq.utilisation).max() > 1e4 * SAME_LAW_TOLERANCE


@pytest.mark.parametrize("system", [THREE_SPEEDS, SPARSE_GRAPH], ids=["three-speeds", "sparse-graph"])
def test_conservation(system):
    solution = solve_exact_arrays(policy="jsq-lisf", **system)
    arrival_rate, speed = np.array(system["arrival_rate"]), np.array(system["speed"])
    assert solution.residual < 1e-9
    assert np.all(solution.stationary >= 0)
    assert solution.stationary.sum() == pytest.approx(1.0, abs=1e-12)
    assert solution.throughput == pytest.approx(arrival_rate.sum() * (1 - solution.blocking_probability), rel=1e-12)
    assert solution.throughput == pytest.approx(arrival_rate @ (1 - solution.blocking_probability_by_type), rel=1e-12)
    # in steady state each server's admitted rate equals its departure rate
    np.testing.assert_allclose(solution.admitted_rate_by_server, speed * solution.utilisation, rtol=1e-9)


def test_two_job_types_on_a_sparse_graph_with_unequal_buffers():
    lisf = solve_exact_arrays(policy="jsq-lisf", **SPARSE_GRAPH)
    jsq = solve_exact_arrays(policy="jsq", **SPARSE_GRAPH)
    assert lisf.n_states == count_states(SPARSE_GRAPH["buffer"])
    assert lisf.stationary.shape == jsq.stationary.shape == (3 * 4 * 5 * 3,)
    assert np.all(lisf.blocking_probability_by_type > 0)
    assert abs(lisf.mean_response_time - jsq.mean_response_time) > 1e4 * SAME_LAW_TOLERANCE


def test_a_server_no_job_type_uses_changes_nothing():
    # server 1 never receives a job, so it stays idle and the others behave as without it
    with_unused = solve_exact_arrays(
        [2.0, 1.5, 1.0, 0.5], [1.6, 1.4], [[0, 2], [2, 3]], [2, 3, 4, 2], policy="jsq-lisf"
    )
    without = solve_exact_arrays([2.0, 1.0, 0.5], [1.6, 1.4], [[0, 1], [1, 2]], [2, 4, 2], policy="jsq-lisf")
    assert with_unused.utilisation[1] == 0.0
    np.testing.assert_allclose(with_unused.utilisation[[0, 2, 3]], without.utilisation, atol=1e-12)
    np.testing.assert_allclose(
        with_unused.stationary.reshape(3, 4, 5, 3)[:, 0], without.stationary.reshape(3, 5, 3), atol=1e-12
    )
    assert with_unused.mean_response_time == pytest.approx(without.mean_response_time, abs=1e-12)


# --- Monte Carlo ---------------------------------------------------------------------------------


def simulate_jsq_lisf(seed, speed, arrival_rate, buffer, warmup, horizon):
    """One run from the empty system at time 0 of one job type that may use every server.

    Follows the rule as stated: each server records when it last became idle (0 for idle since
    the start); an arrival joins the compatible idle server idle since the earliest time, ties at
    random, or else a shortest queue, ties at random, and is lost if that server is full. Returns
    the mean response time of the jobs that arrive after ``warmup`` and leave by ``horizon``, the
    fraction of the arrivals after ``warmup`` that are lost, and the fraction of [warmup, horizon]
    that each server is busy.
    """
    rng = random.Random(seed)
    n_servers = len(speed)
    queues = [deque() for _ in speed]  # arrival times, the job in service first
    next_departure = [math.inf] * n_servers
    idle_since = [0.0] * n_servers
    busy_time = [0.0] * n_servers
    response_sum, responses, arrivals, lost = 0.0, 0, 0, 0
    now, next_arrival = 0.0, rng.expovariate(arrival_rate)
    while True:
        server = min(range(n_servers), key=next_departure.__getitem__)
        event_time = min(next_arrival, next_departure[server])
        if event_time > horizon:
            break
        if event_time > warmup:
            for s in range(n_servers):
                if queues[s]:
                    busy_time[s] += event_time - max(now, warmup)
        now = event_time
        if next_arrival < next_departure[server]:
            idle = [s for s in range(n_servers) if not queues[s]]
            if idle:
                earliest = min(idle_since[s] for s in idle)
                candidates = [s for s in idle if idle_since[s] == earliest]
            else:
                shortest = min(len(queue) for queue in queues)
                candidates = [s for s in range(n_servers) if len(queues[s]) == shortest]
            chosen = rng.choice(candidates)
            arrivals += now > warmup
            if len(queues[chosen]) == buffer:
                lost += now > warmup
            else:
                queues[chosen].append(now)
                if len(queues[chosen]) == 1:
                    next_departure[chosen] = now + rng.expovariate(speed[chosen])
            next_arrival = now + rng.expovariate(arrival_rate)
        else:
            arrived = queues[server].popleft()
            if arrived > warmup:
                response_sum += now - arrived
                responses += 1
            if queues[server]:
                next_departure[server] = now + rng.expovariate(speed[server])
            else:
                next_departure[server] = math.inf
                idle_since[server] = now
    return response_sum / responses, lost / arrivals, np.array(busy_time) / (horizon - warmup)


REPLICATIONS = 10
WARMUP, HORIZON = 50.0, 15_050.0


def test_solution_matches_a_simulation_of_the_rule():
    exact = solve_exact_arrays(policy="jsq-lisf", **THREE_SPEEDS)
    speed, (arrival_rate,), buffer = THREE_SPEEDS["speed"], THREE_SPEEDS["arrival_rate"], THREE_SPEEDS["buffer"]
    runs = [simulate_jsq_lisf(seed, speed, arrival_rate, buffer, WARMUP, HORIZON) for seed in range(REPLICATIONS)]
    samples = {
        "mean_response_time": [run[0] for run in runs],
        "blocking_probability": [run[1] for run in runs],
        **{f"utilisation[{s}]": [run[2][s] for run in runs] for s in range(len(speed))},
    }
    expected = {
        "mean_response_time": exact.mean_response_time,
        "blocking_probability": exact.blocking_probability,
        **{f"utilisation[{s}]": exact.utilisation[s] for s in range(len(speed))},
    }
    for metric, values in samples.items():
        half_width = bonferroni_t_halfwidth(values, FAMILY_ALPHA, len(samples))
        assert abs(np.mean(values) - expected[metric]) <= half_width, (
            f"{metric}: simulated {np.mean(values):.5f} +- {half_width:.5f}, exact {expected[metric]:.5f}"
        )
