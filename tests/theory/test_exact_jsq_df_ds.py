"""The exact solver's jsq-df-ds (JSQ-(d_F, d_S)) routing: hand cases, reductions to simpler
policies, and agreement with a Monte-Carlo sampler that follows the rule's steps one by one."""

import itertools

import numpy as np
import pytest
from scipy import stats

from hetlb.errors import InputError
from hetlb.theory import routing_probabilities, solve_exact_arrays

FAMILY_ALPHA = 0.01
TWO_FAST_TWO_SLOW = [2.0, 2.0, 1.0, 1.0]  # servers 0, 1 are fast; 2, 3 slow
ALL = [0, 1, 2, 3]


def jsq_df_ds_routing(q, compat_k, speed, **params):
    return routing_probabilities("jsq-df-ds", np.array(q), compat_k, speed, **params)


def all_states(n_servers, longest):
    return [np.array(q) for q in itertools.product(range(longest + 1), repeat=n_servers)]


# --- Monte-Carlo sampler of the rule as stated -------------------------------------------------


def pick_uniformly(rng, servers, eligible):
    """One eligible server per row, uniformly (-1 where none is eligible), and whether one was."""
    if servers.shape[1] == 0:
        return np.full(len(servers), -1), np.zeros(len(servers), dtype=bool)
    keys = np.where(eligible, rng.random(servers.shape), np.inf)
    column = keys.argmin(axis=1)
    return servers[np.arange(len(servers)), column], eligible.any(axis=1)


def row_minimum(queue_len):
    return queue_len.min(axis=1, keepdims=True, initial=np.iinfo(queue_len.dtype).max)


def sample_jsq_df_ds(rng, queue_len, compat_k, speed, d_fast, d_slow, p_fast, p_slow):
    """Server chosen for each row of queue lengths (draws, N), following steps 1-4 literally."""
    draws = len(queue_len)
    compat_k = np.asarray(compat_k)
    is_fast = np.asarray(speed)[compat_k] == max(speed)
    fast, slow = compat_k[is_fast], compat_k[~is_fast]

    def sample(servers, size):  # uniform subsets: the first entries of random permutations
        order = np.argsort(rng.random((draws, servers.size)), axis=1)
        return servers[order[:, : min(size, servers.size)]]

    sampled_fast, sampled_slow = sample(fast, d_fast), sample(slow, d_slow)
    fast_q = np.take_along_axis(queue_len, sampled_fast, axis=1)
    slow_q = np.take_along_axis(queue_len, sampled_slow, axis=1)
    idle_fast, has_idle_fast = pick_uniformly(rng, sampled_fast, fast_q == 0)
    idle_slow, has_idle_slow = pick_uniformly(rng, sampled_slow, slow_q == 0)
    shortest_fast, _ = pick_uniformly(rng, sampled_fast, fast_q == row_minimum(fast_q))
    shortest_slow, _ = pick_uniformly(rng, sampled_slow, slow_q == row_minimum(slow_q))
    # a choice of a fast server goes to the slow side when there is none, and vice versa
    idle_slow_wins = (rng.random(draws) < p_slow) | (fast.size == 0)
    fast_wins = ((rng.random(draws) < p_fast) | (slow.size == 0)) & (fast.size > 0)
    return np.where(
        has_idle_fast,
        idle_fast,
        np.where(
            has_idle_slow,
            np.where(idle_slow_wins, idle_slow, shortest_fast),
            np.where(fast_wins, shortest_fast, shortest_slow),
        ),
    )


def assert_frequencies_match(counts, probability, draws, comparisons):
    """Binomial counts against exact probabilities, two-sided normal intervals, Bonferroni."""
    z = stats.norm.ppf(1 - FAMILY_ALPHA / (2 * comparisons))
    half_width = z * np.sqrt(probability * (1 - probability) / draws)
    np.testing.assert_array_less(np.abs(counts / draws - probability), half_width + 1e-12)


# --- distributions -----------------------------------------------------------------------------


@pytest.mark.parametrize("compat_k", [[0, 1, 2, 3, 4], [1, 2, 4], [0, 1], [2, 3, 4]])
def test_probabilities_are_distributions_on_compatible_servers_in_every_state(compat_k):
    speed = [2.0, 2.0, 1.0, 0.5, 1.0]
    incompatible = np.setdiff1d(np.arange(5), compat_k)
    for q in all_states(5, 2):
        for d_fast, d_slow, p_fast, p_slow in [(1, 3, 0.3, 1.0), (2, 1, 1.0, 0.0)]:
            probability = jsq_df_ds_routing(
                q, compat_k, speed, d_fast=d_fast, d_slow=d_slow, p_fast=p_fast, p_slow=p_slow
            )
            assert probability.sum() == pytest.approx(1.0, abs=1e-12)
            assert np.all(probability >= -1e-15)
            assert np.all(probability[incompatible] == 0)


# --- by hand: servers 0, 1 fast (speed 2), 2, 3 slow (speed 1) -----------------------------------


@pytest.mark.parametrize(
    "q, compat_k, params, expected",
    [
        # every server is sampled (d = 2 per class); server 0 is the only idle fast server
        ([0, 1, 0, 0], ALL, {}, [1, 0, 0, 0]),
        ([0, 0, 0, 0], ALL, {}, [1 / 2, 1 / 2, 0, 0]),
        # no fast server idle, slow server 2 idle: p_S = 0.2 to it, 0.8 to the shorter fast queue (0)
        ([1, 2, 0, 3], ALL, {"p_slow": 0.2}, [0.8, 0, 0.2, 0]),
        # none idle: p_F = 0.7 to the shorter fast queue (1), 0.3 to the shorter slow queue (3)
        ([2, 1, 3, 1], ALL, {"p_fast": 0.7}, [0, 0.7, 0, 0.3]),
        # none idle, ties inside both classes split evenly
        ([1, 1, 2, 2], ALL, {"p_fast": 0.7}, [0.35, 0.35, 0.15, 0.15]),
        # d_F = d_S = 1: {0} sampled (1/2) -> 0 is idle, take it. {1} sampled (1/2): with {2} (1/2)
        # none idle -> 1 w.p. 0.7, 2 w.p. 0.3; with {3} (1/2) 3 is idle -> 3 w.p. 0.2, 1 w.p. 0.8.
        # So 0: 1/2, 1: (0.7 + 0.8)/4 = 0.375, 2: 0.3/4 = 0.075, 3: 0.2/4 = 0.05.
        ([0, 1, 1, 0], ALL, {"d_fast": 1, "d_slow": 1, "p_fast": 0.7, "p_slow": 0.2}, [0.5, 0.375, 0.075, 0.05]),
        # d_F = 1, d_S = 2, no fast idle, 2 idle, p_S = 0.2: 0.2 to 2; 0.8 to the one sampled fast
        # server, 0 or 1 with 1/2 each
        ([3, 1, 0, 1], ALL, {"d_fast": 1, "p_slow": 0.2}, [0.4, 0.4, 0.2, 0]),
        # only slow servers compatible (F_k empty): idle slow 3 with probability 1 whatever p_S
        ([0, 0, 1, 0], [2, 3], {"p_slow": 0.2}, [0, 0, 0, 1]),
        # F_k empty, none idle: the shorter slow queue with probability 1 whatever p_F
        ([0, 0, 1, 2], [2, 3], {"p_fast": 0.7}, [0, 0, 1, 0]),
        # only fast servers compatible (S_k empty): the shorter fast queue with probability 1
        ([1, 2, 0, 0], [0, 1], {"p_fast": 0.3}, [1, 0, 0, 0]),
        # S_k empty, d_F = 1: a uniform fast server (like pod with d = 1)
        ([1, 2, 0, 0], [0, 1], {"d_fast": 1, "p_fast": 0.3}, [1 / 2, 1 / 2, 0, 0]),
    ],
)
def test_routing_by_hand(q, compat_k, params, expected):
    np.testing.assert_allclose(jsq_df_ds_routing(q, compat_k, TWO_FAST_TWO_SLOW, **params), expected, atol=1e-15)


def test_three_fast_servers_sampled_two_at_a_time():
    # fast = {0, 1, 2}, d_F = 2: {0,1}, {0,2}, {1,2} with 1/3 each; 0 is idle in the first two.
    # From {1,2} with the one slow server 3 busy: 0.7 to 1 (shorter), 0.3 to 3.
    probability = jsq_df_ds_routing([0, 1, 2, 5], ALL, [2.0, 2.0, 2.0, 1.0], d_fast=2, d_slow=1, p_fast=0.7, p_slow=0.2)
    np.testing.assert_allclose(probability, [2 / 3, 0.7 / 3, 0, 0.3 / 3], atol=1e-15)


def test_fast_means_fastest_in_the_whole_system():
    # speeds 3, 2, 1, 1: server 1 is the fastest compatible one but slow, so F_k is empty and the
    # rule is pod(d_S = 2) over {1, 2, 3}: samples {1,2} -> 2, {1,3} -> 3, {2,3} -> 2 or 3.
    probability = jsq_df_ds_routing([0, 1, 0, 0], [1, 2, 3], [3.0, 2.0, 1.0, 1.0], p_slow=0.0, p_fast=1.0)
    np.testing.assert_allclose(probability, [0, 0, 1 / 2, 1 / 2], atol=1e-15)


# --- reductions --------------------------------------------------------------------------------


@pytest.mark.parametrize("d_fast", [1, 2, 3, 4])
def test_one_speed_is_pod_with_d_fast(d_fast):
    speed = [1.5] * 4
    for q in all_states(4, 2):
        for compat_k in (ALL, [0, 2, 3]):
            np.testing.assert_allclose(
                jsq_df_ds_routing(q, compat_k, speed, d_fast=d_fast, d_slow=1, p_fast=0.2, p_slow=0.9),
                routing_probabilities("pod", q, compat_k, speed, d=d_fast),
                atol=1e-14,
            )


def test_one_speed_solves_like_pod():
    args = ([1.0, 1.0, 1.0], [2.4], [[0, 1, 2]], 3)
    pod = solve_exact_arrays(*args, policy="pod", d=2)
    jsq_df_ds = solve_exact_arrays(*args, policy="jsq-df-ds", d_fast=2, d_slow=3, p_fast=0.1, p_slow=0.8)
    np.testing.assert_allclose(jsq_df_ds.stationary, pod.stationary, atol=1e-13)


@pytest.mark.parametrize("d_fast, d_slow", [(1, 1), (2, 1), (1, 2), (3, 3)])
def test_one_class_compatible_is_pod_within_it(d_fast, d_slow):
    # with only fast (or only slow) servers compatible the p's are irrelevant: pod over that class
    speed = [2.0, 2.0, 2.0, 1.0, 0.5, 1.0]
    for q in all_states(6, 1):
        for compat_k, d in (([0, 1, 2], d_fast), ([3, 4, 5], d_slow)):
            np.testing.assert_allclose(
                jsq_df_ds_routing(q, compat_k, speed, d_fast=d_fast, d_slow=d_slow, p_fast=0.4, p_slow=0.3),
                routing_probabilities("pod", q, compat_k, speed, d=d),
                atol=1e-14,
            )


@pytest.mark.parametrize("d_fast", [2, 3])
def test_never_slow_is_pod_over_the_fast_servers(d_fast):
    # p_F = 1, p_S = 0: steps 2-4 all choose a sampled fast server, so d_S does not matter
    speed = [2.0, 2.0, 2.0, 1.0, 0.5]
    for q in all_states(5, 2):
        for compat_k, fast in (([0, 1, 2, 3, 4], [0, 1, 2]), ([1, 2, 4], [1, 2])):
            np.testing.assert_allclose(
                jsq_df_ds_routing(q, compat_k, speed, d_fast=d_fast, d_slow=2, p_fast=1.0, p_slow=0.0),
                routing_probabilities("pod", q, fast, speed, d=d_fast),
                atol=1e-14,
            )


@pytest.mark.parametrize("p_fast", [0.0, 0.35])
def test_sampling_everyone_with_idle_slow_first(p_fast):
    # d_F >= |F|, d_S >= |S| and p_S = 1 on two speeds: with an idle compatible server, the
    # fastest idle one (jsq-fiq); otherwise p_F * jsq over the fast servers + (1 - p_F) * jsq over
    # the slow ones
    speed = [2.0, 2.0, 1.0, 1.0, 1.0]
    for q in all_states(5, 2):
        for compat_k, fast, slow in (([0, 1, 2, 3, 4], [0, 1], [2, 3, 4]), ([0, 3, 4], [0], [3, 4])):
            if np.any(q[compat_k] == 0):
                expected = routing_probabilities("jsq-fiq", q, compat_k, speed)
            else:
                expected = p_fast * routing_probabilities("jsq", q, fast, speed) + (1 - p_fast) * routing_probabilities(
                    "jsq", q, slow, speed
                )
            np.testing.assert_allclose(
                jsq_df_ds_routing(q, compat_k, speed, d_fast=2, d_slow=3, p_fast=p_fast, p_slow=1.0),
                expected,
                atol=1e-14,
            )


# --- Monte Carlo -------------------------------------------------------------------------------

MC_SPEED = [2.0, 2.0, 2.0, 1.0, 0.5, 1.0]  # fast {0, 1, 2}; slow {3, 4, 5} with two speeds
MC_PARAMS = dict(d_fast=2, d_slow=2, p_fast=0.7, p_slow=0.2)
MC_CASES = [
    ([1, 0, 2, 0, 1, 0], [0, 1, 2, 3, 4, 5]),  # a fast server idle in some samples
    ([1, 2, 2, 0, 3, 0], [0, 1, 2, 3, 4, 5]),  # no fast idle, slow idle in most samples
    ([2, 1, 1, 1, 3, 2], [0, 1, 2, 3, 4, 5]),  # none idle, ties
    ([1, 3, 2, 0, 0, 4], [0, 1, 3, 4, 5]),  # non-complete: two fast, three slow
    ([0, 0, 0, 1, 0, 2], [3, 4, 5]),  # no fast server compatible
    ([3, 1, 1, 0, 0, 0], [0, 1, 2]),  # no slow server compatible
]
MC_DRAWS = 200_000


def test_routing_matches_monte_carlo_of_the_stated_rule():
    rng = np.random.default_rng(20240611)
    comparisons = len(MC_CASES) * len(MC_SPEED)
    for q, compat_k in MC_CASES:
        queue_len = np.broadcast_to(np.array(q), (MC_DRAWS, len(q)))
        chosen = sample_jsq_df_ds(rng, queue_len, compat_k, MC_SPEED, **MC_PARAMS)
        counts = np.bincount(chosen, minlength=len(MC_SPEED))
        assert_frequencies_match(counts, jsq_df_ds_routing(q, compat_k, MC_SPEED, **MC_PARAMS), MC_DRAWS, comparisons)


def test_solver_admission_and_blocking_match_monte_carlo_arrivals():
    # arrivals see the stationary law (PASTA): draw a state from it, route by the stated rule, and
    # count where the job is admitted or whether it is lost
    speed, arrival_rate, buffer = [2.0, 2.0, 1.0, 0.5], 3.5, 2
    params = dict(d_fast=1, d_slow=2, p_fast=0.6, p_slow=0.3)
    solution = solve_exact_arrays(speed, [arrival_rate], [[0, 1, 2, 3]], buffer, policy="jsq-df-ds", **params)
    rng = np.random.default_rng(7)
    queue_len = solution.states[rng.choice(solution.n_states, size=MC_DRAWS, p=solution.stationary)]
    chosen = sample_jsq_df_ds(rng, queue_len, [0, 1, 2, 3], speed, **params)
    lost = queue_len[np.arange(MC_DRAWS), chosen] >= buffer
    counts = np.append(np.bincount(chosen[~lost], minlength=4), lost.sum())
    expected = np.append(solution.admitted_rate_by_server / arrival_rate, solution.blocking_probability)
    assert_frequencies_match(counts, expected, MC_DRAWS, len(expected))


# --- the solver on a non-complete graph ----------------------------------------------------------


def test_two_job_types_on_a_sparse_graph_with_finite_buffers():
    speed, arrival_rate = np.array([2.0, 2.0, 1.0, 1.0, 0.5]), np.array([2.0, 1.5])
    solution = solve_exact_arrays(
        speed,
        arrival_rate,
        [[0, 2, 3], [1, 3, 4]],
        [2, 3, 2, 3, 2],
        policy="jsq-df-ds",
        d_fast=1,
        d_slow=1,
        p_fast=0.6,
        p_slow=0.4,
    )
    assert solution.n_states == 3 * 4 * 3 * 4 * 3
    assert solution.residual < 1e-9
    assert np.all(solution.stationary >= 0)
    assert solution.stationary.sum() == pytest.approx(1.0, abs=1e-12)
    # in steady state each server's admitted rate equals its departure rate
    np.testing.assert_allclose(solution.admitted_rate_by_server, speed * solution.utilisation, rtol=1e-9)
    admitted = arrival_rate @ (1 - solution.blocking_probability_by_type)
    assert solution.throughput == pytest.approx(admitted, rel=1e-9)
    assert np.all(solution.blocking_probability_by_type > 0)


# --- input checks --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "params, field",
    [
        ({"d_fast": 0}, "d_fast"),
        ({"d_slow": 1.5}, "d_slow"),
        ({"p_fast": 1.2}, "p_fast"),
        ({"p_slow": -0.1}, "p_slow"),
        ({"p_slow": True}, "p_slow"),
        ({"p_fast": "0.5"}, "p_fast"),
    ],
)
def test_invalid_parameters_name_their_field(params, field):
    with pytest.raises(InputError) as routing_error:
        jsq_df_ds_routing([0, 0, 0, 0], ALL, TWO_FAST_TWO_SLOW, **params)
    with pytest.raises(InputError) as solver_error:
        solve_exact_arrays(TWO_FAST_TWO_SLOW, [1.0], [ALL], 2, policy="jsq-df-ds", **params)
    # named as hetlb.simulate names them: the policy and its parameter
    assert routing_error.value.field == solver_error.value.field == f"policy jsq-df-ds.{field}"
