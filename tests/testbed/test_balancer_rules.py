"""benchmarks/balancer_rules.py: the balancers' selection rules on small cases, and the simulator
against exact results (closed forms and exact Markov chains on a truncated state space).

Tolerances: independent replications, a Student t interval at family level 1% split over the
simulation checks (Bonferroni); the exact values come from theory, never from a previous run.
"""

import math
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sparse
import scipy.sparse.linalg as sparse_linalg
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import balancer_rules as br  # noqa: E402

SIMULATION_CHECKS = 9
FAMILY_ALPHA = 0.01
REPLICATIONS = 10
JOBS = 20_000
WARMUP = 2_000


def replicate(rule, speeds, load, seed):
    seeds = np.random.SeedSequence(seed).spawn(REPLICATIONS)
    return np.array([br.simulate(rule, speeds, load, JOBS, WARMUP, s) for s in seeds])


def assert_within_interval(values, exact):
    alpha = FAMILY_ALPHA / SIMULATION_CHECKS
    half = stats.t.ppf(1 - alpha / 2, len(values) - 1) * values.std(ddof=1) / math.sqrt(len(values))
    assert abs(values.mean() - exact) <= half, (values.mean(), half, exact)


def route_probabilities(rule, speeds, n):
    """The routing distribution of jsq, jfsq or sed in state n (their definitions)."""
    N = len(speeds)
    if rule == "jsq":
        keys = [n[s] for s in range(N)]
    elif rule == "jfsq":
        keys = [(n[s], -speeds[s]) for s in range(N)]
    else:  # sed
        keys = [(n[s] + 1) / speeds[s] for s in range(N)]
    least = min(keys)
    ties = [s for s in range(N) if keys[s] == least]
    p = np.zeros(N)
    p[ties] = 1.0 / len(ties)
    return p


def exact_mean_response(rule, speeds, load, cap):
    """Mean response time of the Markov chain (n_1..n_N), each n_s <= cap (an arrival routed to a
    full queue is lost), from its stationary distribution: E[T] = E[sum n] / accepted rate; and the
    stationary probability that some queue is at the cap (the truncation's reach). The rule keeps
    no memory: the chain of exact_augmented_mean_response with none."""

    def arrival(n, _):
        return [(p, s, None) for s, p in enumerate(route_probabilities(rule, speeds, n)) if p > 0]

    return exact_augmented_mean_response(arrival, lambda n, aux, s: None, None, speeds, load, cap)


def exact_augmented_mean_response(arrival, departure, aux0, speeds, load, cap):
    """Mean response time of a two-or-more-server chain whose state is (n, aux): aux is the rule's
    own memory (HAProxy's order of equal keys, nginx's current weights). arrival(n, aux) lists
    (probability, server, aux after); departure(n, aux, s) is aux after a departure from s. The
    reachable states are found from the empty system; an arrival routed to a full queue is lost."""
    N = len(speeds)
    lam = load * sum(speeds)
    start = ((0,) * N, aux0)
    index = {start: 0}
    states = [start]
    rows, cols, rates = [], [], []
    accepted_rate = []
    i = 0
    while i < len(states):
        n, aux = states[i]
        moves = []
        accepted = 0.0
        for p, s, after in arrival(n, aux):
            if n[s] < cap:
                moves.append((lam * p, (n[:s] + (n[s] + 1,) + n[s + 1 :], after)))
                accepted += lam * p
        for s in range(N):
            if n[s] > 0:
                moves.append((speeds[s], (n[:s] + (n[s] - 1,) + n[s + 1 :], departure(n, aux, s))))
        accepted_rate.append(accepted)
        for rate, target in moves:
            if target not in index:
                index[target] = len(states)
                states.append(target)
            rows.append(i)
            cols.append(index[target])
            rates.append(rate)
        i += 1
    size = len(states)
    q = sparse.csr_matrix((rates, (rows, cols)), shape=(size, size))
    q = q - sparse.diags(np.asarray(q.sum(axis=1)).ravel())
    a = q.T.tolil()
    a[0, :] = np.ones(size)
    b = np.zeros(size)
    b[0] = 1.0
    pi = sparse_linalg.spsolve(a.tocsc(), b)
    total = np.array([sum(n) for n, _ in states])
    at_cap = sum(pi[k] for k, (n, _) in enumerate(states) if max(n) == cap)
    return float(pi @ total) / float(pi @ np.array(accepted_rate)), float(at_cap)


def haproxy_leastconn_chain(weights):
    """aux = the server whose key changed last (every event re-inserts the server it touches);
    among equal keys the other one was inserted earlier and comes first."""
    eweight = [w * br.BE_WEIGHT_SCALE for w in weights]

    def arrival(n, last):
        keys = [(n[s] + 1) * br.SRV_EWGHT_MAX // eweight[s] if n[s] else 0 for s in range(2)]
        if keys[0] != keys[1]:
            s = 0 if keys[0] < keys[1] else 1
        else:
            s = 1 - last
        return [(1.0, s, s)]

    return arrival, (lambda n, last, s: s), 1  # at start server 1 was inserted after server 0


def nginx_least_conn_chain(weights):
    """aux = the peers' current weights (touched only when least conns / weight ties)."""

    def arrival(n, current):
        a, b = n[0] * weights[1], n[1] * weights[0]
        if a != b:
            return [(1.0, 0 if a < b else 1, current)]
        current = [current[0] + weights[0], current[1] + weights[1]]
        best = 1 if current[1] > current[0] else 0
        current[best] -= sum(weights)
        return [(1.0, best, tuple(current))]

    return arrival, (lambda n, current, s: current), (0, 0)


def nginx_random_two_chain(weights):
    """Two peers: the pair is always {0, 1}, the first drawn is 0 with probability p0 = w0 / (w0 + w1)
    and the second is taken unless strictly worse; the same peer drawn 21 times in a row
    (probability p0^21 + p1^21) sends the request by smooth weighted round robin, whose current
    weights are aux."""
    p0 = weights[0] / sum(weights)
    p1 = 1 - p0
    fallback = p0**21 + p1**21

    def arrival(n, current):
        worse_1 = n[1] * weights[0] > n[0] * weights[1]
        worse_0 = n[0] * weights[1] > n[1] * weights[0]
        rr = [current[0] + weights[0], current[1] + weights[1]]
        best = 1 if rr[1] > rr[0] else 0
        rr[best] -= sum(weights)
        return [
            (p0 - p0**21, 0 if worse_1 else 1, current),
            (p1 - p1**21, 1 if worse_0 else 0, current),
            (fallback, best, tuple(rr)),
        ]

    return arrival, (lambda n, current, s: current), (0, 0)


# ---- the rules, step by step ----


def scripted(values):
    it = iter(values)
    return lambda: next(it)


def test_haproxy_leastconn_keys_and_idle_order():
    speeds = [1.0, 0.5, 0.25]
    weights = br.weight_of(speeds)
    assert weights == [256, 128, 64]
    choose, start, end = br.make_rule("haproxy-leastconn", speeds, weights, scripted([]))
    n = [0, 0, 0]

    def send():
        s = choose(n)
        n[s] += 1
        start(s, n[s])
        return s

    def leave(s):
        n[s] -= 1
        end(s, n[s])

    # idle servers first, in configuration order at start
    assert [send(), send(), send()] == [0, 1, 2]
    # keys now (1 + 1) * 4096 // (16 w): 2, 4, 8 -> server 0 again, then key 3 * 4096 // 4096 = 3 < 4
    assert send() == 0 and send() == 0
    # server 2 then server 1 become idle: the one idle the longest (2) is picked first
    leave(2)
    leave(1)
    assert send() == 2 and send() == 1


def test_haproxy_leastconn_equal_keys_in_insertion_order():
    speeds = [1.0, 1.0]
    choose, start, end = br.make_rule("haproxy-leastconn", speeds, br.weight_of(speeds), scripted([]))
    n = [1, 1]
    start(1, 1)  # server 1 got key 2 before server 0
    start(0, 1)
    assert choose(n) == 1


def test_nginx_least_conn_ties_by_smooth_weighted_round_robin():
    speeds = [1.0, 0.5]
    choose, start, end = br.make_rule("nginx-least_conn", speeds, [2, 1], scripted([]))
    start(0, 2)
    start(1, 1)  # 2 / 2 == 1 / 1: a tie
    n = [2, 1]
    assert [choose(n) for _ in range(6)] == [0, 1, 0, 0, 1, 0]
    start(1, 2)  # 2 / 2 < 2 / 1: no tie
    assert choose([2, 2]) == 0


def test_nginx_random_two_redraws_the_same_peer_and_takes_the_second_on_ties():
    speeds = [1.0, 1.0]
    # draws: peer 0, peer 0 again (redrawn), peer 1; tie 0 / w == 0 / w -> the second (1)
    choose, _, _ = br.make_rule("nginx-random-two-least_conn", speeds, [1, 1], scripted([0.1, 0.2, 0.7]))
    assert choose([0, 0]) == 1
    choose, _, _ = br.make_rule("nginx-random-two-least_conn", speeds, [1, 1], scripted([0.1, 0.7]))
    assert choose([0, 1]) == 0  # the second has strictly more conns per weight
    # weights 3:1 -> x = int(u * 4) in 0..2 is peer 0, 3 is peer 1; 1 / 1 == 3 / 3: a tie
    choose, _, _ = br.make_rule("nginx-random-two-least_conn", speeds, [3, 1], scripted([0.74, 0.76]))
    assert choose([3, 1]) == 1


def test_nginx_random_two_falls_back_to_round_robin_past_twenty_tries():
    speeds = [1.0, 1.0]
    # tries: the first draw and 19 redraws of the same peer make 20, then a different peer is taken
    choose, _, _ = br.make_rule("nginx-random-two-least_conn", speeds, [2, 1], scripted([0.1] * 20 + [0.9]))
    assert choose([9, 0]) == 1
    # a 21st draw of the same peer: the smooth round robin's first pick, not the least loaded
    choose, _, _ = br.make_rule("nginx-random-two-least_conn", speeds, [2, 1], scripted([0.1] * 21))
    assert choose([9, 0]) == 0


def test_bad_rule_and_bad_options_are_one_line_errors(capsys):
    with pytest.raises(br.InputError, match="rule"):
        br.make_rule("nope", [1.0], [256], scripted([]))
    assert br.main(["--loads", "1.2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--loads" in err


# ---- the simulator against exact results ----


def test_single_server_is_mm1_for_every_rule():
    load = 0.5
    values = replicate("jsq", [1.0], load, 11)
    assert_within_interval(values, 1.0 / (1.0 - load))
    for rule in br.RULES:  # one server: every rule sends every job there, the same run
        assert br.simulate(rule, [1.0], load, 2_000, 100, 3) == br.simulate("jsq", [1.0], load, 2_000, 100, 3)


def test_weighted_random_closed_form():
    speeds, load = [1.0, 0.5, 1.0], 0.5
    exact = br.weighted_random_mean(speeds, load)
    assert exact == pytest.approx(len(speeds) / (sum(speeds) * (1 - load)))
    assert_within_interval(replicate("weighted-random", speeds, load, 12), exact)


@pytest.mark.parametrize(
    "rule, speeds, load, cap, seed",
    [
        ("jsq", [1.0, 0.5], 0.7, 60, 13),
        ("jfsq", [1.0, 0.5], 0.7, 60, 14),
        ("jsq", [1.0, 0.5, 0.25], 0.6, 16, 15),
        ("sed", [1.0, 0.5, 0.25], 0.6, 16, 16),
    ],
)
def test_small_systems_against_the_exact_chain(rule, speeds, load, cap, seed):
    exact, at_cap = exact_mean_response(rule, speeds, load, cap)
    assert at_cap < 1e-5  # the truncated chain is the model's up to far less than the interval
    assert_within_interval(replicate(rule, speeds, load, seed), exact)


@pytest.mark.parametrize(
    "rule, chain, seed",
    [
        ("haproxy-leastconn", haproxy_leastconn_chain, 17),
        ("nginx-least_conn", nginx_least_conn_chain, 18),
        ("nginx-random-two-least_conn", nginx_random_two_chain, 19),
    ],
)
def test_balancer_rules_on_two_servers_against_their_exact_chains(rule, chain, seed):
    # speeds 1 and 1/4 at load 0.3: the exact means of the three rules differ by 8 to 22%
    speeds, load = [1.0, 0.25], 0.3
    arrival, departure, aux0 = chain(br.weight_of(speeds))
    exact, at_cap = exact_augmented_mean_response(arrival, departure, aux0, speeds, load, 30)
    assert at_cap < 1e-5
    assert_within_interval(replicate(rule, speeds, load, seed), exact)
