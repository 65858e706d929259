"""The exact chain of small systems with prefix caches (hetlb.theory.solve_exact_cache) against
independent checks: the exact solver without caches (hetlb.theory.exact), M/M/1/K and the M/G/1/1
loss system, the exact LRU hit ratio under independent requests (hetlb.theory.lru), a discrete
chain of one block cache written here, conservation laws, the routers' rules on chosen states,
and a Monte-Carlo simulator of the model written here from the docs' page "Prefix caches"."""

import bisect
import itertools
import math
import random
from collections import deque

import numpy as np
import pytest

from hetlb.errors import InputError
from hetlb.theory import (
    EXACT_CACHE_POLICIES,
    cache_routing_probabilities,
    lru_hit_ratio,
    mm1k_blocking_probability,
    mm1k_mean_number_in_system,
    mm1k_mean_response_time,
    solve_exact_arrays,
    solve_exact_cache,
)
from hetlb.theory.cache_routing import chash_ring, mix64

from support.statistics import bonferroni_t_halfwidth

EXACT = 1e-9
"""Relative agreement of two exact solutions: each chain is solved to a residual of 1e-9 of its
largest rate."""

ALPHA = 0.001
"""Family error rate of the Monte-Carlo comparisons of one test (Bonferroni over them)."""


# --- without caches, or where caches change nothing: the exact solver of queue lengths ---------


@pytest.mark.parametrize("policy", ["jsq", "sed"])
@pytest.mark.parametrize("compatible", [None, [0, 2]])
@pytest.mark.parametrize("cache_blocks", [0, [2, 1, 3]])
def test_queues_are_the_exact_solvers_when_prefill_is_free(policy, compatible, cache_blocks):
    """With W = 0 a job's service is its decode alone, and jsq and sed do not read the caches, so
    the queue lengths are those of hetlb.theory.exact whatever the caches hold."""
    speed, arrival_rate, buffer = [1.0, 2.0, 0.5], 1.7, [2, 3, 2]
    solution = solve_exact_cache(
        speed, arrival_rate, buffer, policy, cache_blocks=cache_blocks, popularity=[0.5, 0.3, 0.2], blocks=2,
        compatible=compatible,
    )  # fmt: skip
    reference = solve_exact_arrays(speed, [arrival_rate], [compatible or [0, 1, 2]], buffer, policy)
    assert solution.mean_response_time == pytest.approx(reference.mean_response_time, rel=EXACT)
    assert solution.blocking_probability == pytest.approx(reference.blocking_probability, rel=EXACT, abs=1e-15)
    assert solution.throughput == pytest.approx(reference.throughput, rel=EXACT)
    assert solution.mean_number_in_system == pytest.approx(reference.mean_number_in_system, rel=EXACT)
    np.testing.assert_allclose(solution.admitted_rate_by_server, reference.admitted_rate_by_server, rtol=EXACT)
    np.testing.assert_allclose(solution.utilisation, reference.utilisation, rtol=EXACT)
    np.testing.assert_allclose(solution.queue_length_law.ravel(), reference.stationary, rtol=EXACT, atol=1e-15)
    assert solution.mean_ttft == pytest.approx(reference.mean_waiting_time, rel=EXACT)  # first token at start
    if cache_blocks == 0:
        assert solution.block_hit_ratio == 0.0
        assert solution.prefill_work_saved == 0.0
    else:
        assert 0.0 < solution.block_hit_ratio < 1.0


# --- one server ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("cache_blocks", "blocks", "buffer"), [(1, 1, 1), (2, 2, 4), (4, 2, 3), (3, 1, 5)])
def test_one_prefix_that_stays_cached_is_mm1k(cache_blocks, blocks, buffer):
    """K >= B with one prefix: after the first job every job hits all B blocks, so there is no
    prefill and the server is M/M/1/b at rate mu; the state of the empty cache is transient."""
    arrival_rate, speed = 0.9, 1.3
    solution = solve_exact_cache(
        [speed], arrival_rate, buffer, cache_blocks=cache_blocks, blocks=blocks, prefill_work=2.0
    )
    assert solution.block_hit_ratio == pytest.approx(1.0, rel=EXACT)
    assert solution.prefill_work_saved == pytest.approx(2.0 * blocks, rel=EXACT)
    assert solution.mean_response_time == pytest.approx(mm1k_mean_response_time(arrival_rate, speed, buffer), rel=EXACT)
    assert solution.blocking_probability == pytest.approx(
        mm1k_blocking_probability(arrival_rate, speed, buffer), rel=EXACT
    )
    assert solution.mean_number_in_system == pytest.approx(
        mm1k_mean_number_in_system(arrival_rate, speed, buffer), rel=EXACT
    )
    waiting = mm1k_mean_response_time(arrival_rate, speed, buffer) - 1 / speed
    assert solution.mean_ttft == pytest.approx(waiting, rel=EXACT, abs=1e-15)
    assert solution.n_closed_classes == 1
    assert solution.n_recurrent_states < solution.n_states


@pytest.mark.parametrize(("cache_blocks", "blocks"), [(0, 2), (1, 2), (2, 2), (1, 1)])
def test_one_place_is_the_insensitive_loss_system(cache_blocks, blocks):
    """b = 1 on one server is M/G/1/1: its idle periods are Exp(lambda) and its busy periods one
    service each, so its blocking is lambda E[S] / (1 + lambda E[S]) whatever the services' law
    and correlation. With K <= B the cache holds the first K blocks of the last admitted job's
    chain, and admitted prefixes are i.i.d. (p), so a job hits K blocks with probability
    sum_k p_k^2 and none otherwise."""
    arrival_rate, speed, work = 0.8, 1.5, 1.5
    popularity = np.array([0.7, 0.3])
    solution = solve_exact_cache(
        [speed], arrival_rate, 1, cache_blocks=cache_blocks, popularity=popularity, blocks=blocks, prefill_work=work
    )
    hit_blocks = cache_blocks * float(popularity @ popularity)
    mean_service = (1 + work * (blocks - hit_blocks)) / speed
    assert solution.block_hit_ratio == pytest.approx(hit_blocks / blocks, rel=EXACT, abs=1e-15)
    assert solution.mean_response_time == pytest.approx(mean_service, rel=EXACT)
    assert solution.mean_ttft == pytest.approx(work * (blocks - hit_blocks) / speed, rel=EXACT)
    load = arrival_rate * mean_service
    assert solution.blocking_probability == pytest.approx(load / (1 + load), rel=EXACT)


@pytest.mark.parametrize("buffer", [1, 3, 5])
@pytest.mark.parametrize("work", [0.0, 1.5])
@pytest.mark.parametrize(
    ("popularity", "capacity"), [([0.5, 0.3, 0.15, 0.05], 2), ([0.4, 0.3, 0.3], 1), ([0.25] * 4, 3)]
)
def test_single_blocks_hit_as_lru_under_independent_requests(popularity, capacity, buffer, work):
    """One server: its cache sees the prefixes in the order services start, the FCFS order of
    admitted arrivals, and one job's prefill ends before the next one starts. Whether a job is
    admitted depends on the queue it finds, not on its own prefix, so admitted prefixes are i.i.d.
    with law p: the cache is an LRU under independent requests, of one-block items (B = 1)."""
    solution = solve_exact_cache(
        [1.0], 0.9, buffer, cache_blocks=capacity, popularity=popularity, blocks=1, prefill_work=work
    )
    assert solution.block_hit_ratio == pytest.approx(lru_hit_ratio(popularity, capacity).hit_ratio, rel=EXACT)


@pytest.mark.parametrize("popularity", [[0.6, 0.4], [0.5, 0.3, 0.2], [0.4, 0.3, 0.2, 0.1]])
def test_whole_chains_hit_as_lru_items(popularity):
    """With B = 2 and K = 4 a chain is always evicted whole (its tail first, then its head): the
    block cache is an LRU of K / B = 2 items under independent requests."""
    solution = solve_exact_cache([1.0], 0.7, 3, cache_blocks=4, popularity=popularity, blocks=2, prefill_work=0.5)
    assert solution.block_hit_ratio == pytest.approx(lru_hit_ratio(popularity, 2).hit_ratio, rel=EXACT)


def block_cache_hit_ratio(popularity, capacity: int, blocks: int) -> float:
    """The block hit ratio of one block LRU under independent requests, from the docs' rules as a
    discrete chain over requests: a request for prefix k hits its longest cached leading blocks,
    which are touched; then its chain is put at the front, head first, the other blocks kept in
    their order behind it as far as they fit (the chain's own cached blocks are held; if they fill
    the cache, its tail is left out)."""

    def step(cache: tuple, k: int) -> tuple[tuple, int]:
        chain = [(k, j) for j in range(blocks)]
        hit = next((j for j, block in enumerate(chain) if block not in cache), blocks)
        rest = [block for block in cache if block[0] != k]
        kept_chain = [block for block in chain if block in cache]
        for block in chain:
            if block not in kept_chain and len(kept_chain) < capacity:
                kept_chain.append(block)
        kept_chain.sort()
        return tuple((kept_chain + rest)[:capacity]), hit

    states, index, transitions = [()], {(): 0}, []
    for state in states:
        for k, p in enumerate(popularity):
            nxt, hit = step(state, k)
            if nxt not in index:
                index[nxt] = len(states)
                states.append(nxt)
            transitions.append((index[state], index[nxt], p, hit))
    matrix = np.zeros((len(states), len(states)))
    hits = np.zeros(len(states))
    for i, j, p, hit in transitions:
        matrix[i, j] += p
        hits[i] += p * hit
    law = np.full(len(states), 1.0 / len(states))
    for _ in range(20_000):  # the chain is aperiodic (a repeated request leaves the cache as it is)
        law = law @ matrix
    return float(law @ hits) / blocks


@pytest.mark.parametrize(("popularity", "capacity"), [([0.6, 0.4], 3), ([0.5, 0.3, 0.2], 3), ([0.5, 0.3, 0.2], 1)])
def test_partial_chains_hit_as_the_block_lru_chain(popularity, capacity):
    """K = 3 or 1 blocks for chains of B = 2: a chain's head stays cached without its tail, a
    partial hit, which the item LRU does not model; a discrete chain over requests does."""
    solution = solve_exact_cache(
        [1.0], 0.7, 3, cache_blocks=capacity, popularity=popularity, blocks=2, prefill_work=0.5
    )
    assert solution.block_hit_ratio == pytest.approx(block_cache_hit_ratio(popularity, capacity, 2), rel=1e-9)


# --- conservation -------------------------------------------------------------------------------

SMALL = {"cache_blocks": [2, 1], "popularity": [0.6, 0.4], "blocks": 2, "prefill_work": 0.8}
POLICY_PARAMS = {"cache-aware": {"abs": 1, "rel": 1.5, "match": 0.5}}


@pytest.mark.parametrize("policy", EXACT_CACHE_POLICIES)
def test_flows_balance(policy):
    """Departures balance admissions (throughput = lambda (1 - blocking)); the shares sent sum to
    1; hit ratios are ratios; the first token comes before the departure."""
    arrival_rate = 1.6
    solution = solve_exact_cache([1.0, 1.7], arrival_rate, [2, 3], policy, **SMALL, **POLICY_PARAMS.get(policy, {}))
    assert solution.throughput == pytest.approx(arrival_rate * (1 - solution.blocking_probability), rel=EXACT)
    assert solution.admitted_rate_by_server.sum() == pytest.approx(solution.throughput, rel=EXACT)
    assert solution.sent_share_by_server.sum() == pytest.approx(1.0, rel=EXACT)
    assert solution.queue_length_law.sum() == pytest.approx(1.0, rel=EXACT)
    assert 0.0 <= solution.block_hit_ratio <= 1.0
    assert np.all((solution.block_hit_ratio_by_server >= 0) & (solution.block_hit_ratio_by_server <= 1))
    assert solution.prefill_work_saved == pytest.approx(0.8 * 2 * solution.block_hit_ratio, rel=EXACT)
    assert 0.0 < solution.mean_ttft < solution.mean_response_time
    assert solution.residual < 1e-9


def views(n_servers: int, buffer: int, blocks: int, cache_size: int):
    """Every view a dispatcher can have of ``n_servers`` servers (a superset of the reachable ones):
    per server its jobs n, the job's match m, its index's blocks, the blocks its running job holds
    and the blocks its jobs missed at dispatch, sum of B - m."""
    per_server = [
        (n, m, size, held, missed)
        for n in range(buffer + 1)
        for m in range(blocks + 1)
        for size in range(m, cache_size + 1)
        for held in range(min(size, blocks) + 1 if n else 1)
        for missed in range(n * blocks + 1)
    ]
    yield from itertools.product(per_server, repeat=n_servers)


@pytest.mark.parametrize("policy", EXACT_CACHE_POLICIES)
def test_routing_probabilities_of_every_state_sum_to_one(policy):
    """Every view of two servers of buffer 2 with caches of 2 blocks, for chains of 2 blocks."""
    blocks, work, cache_size = 2, 0.7, 2
    seen = 0
    for view in views(2, 2, blocks, cache_size):
        n, m, size, held, missed = (np.array(column) for column in zip(*view))
        probability = cache_routing_probabilities(
            policy, n, m, [1.0, 2.5], blocks=blocks, index_blocks=size, held_blocks=held,
            expected_work=n + work * missed, cache_blocks=[cache_size, cache_size], prefill_work=work,
            first_block_id=int(n.sum()) * blocks,
        )  # fmt: skip
        assert np.all(probability >= 0)
        assert probability.sum() == pytest.approx(1.0, abs=1e-12)
        seen += 1
    assert seen == sum(1 for _ in views(1, 2, blocks, cache_size)) ** 2


# --- the rules on chosen states --------------------------------------------------------------------


def route(policy, n, m, **keywords):
    defaults = {"speed": [1.0] * len(n), "blocks": 2}
    return cache_routing_probabilities(policy, np.array(n), np.array(m), **{**defaults, **keywords})


def test_cache_aware_follows_the_match_when_balanced_and_the_queues_when_not():
    assert route("cache-aware", [2, 0], [2, 0]).tolist() == [1.0, 0.0]  # balanced (A = 64): the longest match
    assert route("cache-aware", [2, 0], [2, 2]).tolist() == [0.5, 0.5]  # a tie of matches
    imbalanced = {"abs": 0, "rel": 1}  # any difference is an imbalance
    assert route("cache-aware", [2, 1], [2, 0], **imbalanced).tolist() == [0.0, 1.0]
    assert route("cache-aware", [1, 1], [2, 0], **imbalanced).tolist() == [1.0, 0.0]  # equal queues: balanced
    assert route("cache-aware:abs=0,rel=1", [2, 1], [2, 0]).tolist() == [0.0, 1.0]  # the text form
    assert route("cache-aware", [2, 1], [2, 0], rel=2, abs=0).tolist() == [1.0, 0.0]  # 2 > 2 x 1 fails
    # below the match threshold: the server whose index holds the fewest blocks
    low = route("cache-aware", [0, 3], [1, 0], match=0.6, index_blocks=np.array([3, 2]))
    assert low.tolist() == [0.0, 1.0]


def test_chash_keeps_a_prefix_on_its_server_while_under_the_bound():
    load, n_servers = 1.25, 3
    positions, owners = chash_ring(n_servers)
    for k in range(12):
        key = mix64((k * 2 + 0x632BE59BD9B4E019) % 2**64)
        home = owners[bisect.bisect_left(positions, key) % len(owners)]
        for n in itertools.product(range(4), repeat=n_servers):
            probability = route("chash", list(n), [0] * n_servers, first_block_id=k * 2, load=load)
            bound = math.ceil(load * (sum(n) + 1) / n_servers)
            chosen = int(np.argmax(probability))
            assert probability[chosen] == 1.0
            assert n[chosen] < bound
            assert (chosen == home) == (n[home] < bound)


def test_chash_skips_incompatible_servers_and_the_ring_is_splitmix():
    assert mix64(0) == 0xE220A8397B1DCDAF  # splitmix64's first two outputs from seed 0
    assert mix64(0x9E3779B97F4A7C15) == 0x6E789E6AA1B965F4
    positions, owners = chash_ring(3)
    assert len(positions) == 300 and list(positions) == sorted(positions)
    for k in range(12):
        everyone = route("chash", [0, 0, 0], [0, 0, 0], first_block_id=k)
        home = int(np.argmax(everyone))
        others = [s for s in range(3) if s != home]
        without_home = route("chash", [0, 0, 0], [0, 0, 0], first_block_id=k, compatible=others)
        assert without_home[home] == 0.0 and without_home.sum() == 1.0


@pytest.mark.parametrize(("work", "expected"), [(0.4, [1.0, 0.0]), (0.5, [0.5, 0.5]), (0.6, [0.0, 1.0])])
def test_eft_prices_a_miss_on_a_fast_server_against_a_hit_on_a_slow_one(work, expected):
    """Fast server 0 (mu_f = 2) with a miss, slow server 1 (mu_s = 1) with a hit, both idle:
    eft_0 = (1 + W B) / mu_f against eft_1 = 1 / mu_s, so the fast one wins exactly when its extra
    prefill W B / mu_f is below the slow one's longer decode 1 / mu_s - 1 / mu_f = 0.5 (B = 2: W < 0.5)."""
    probability = route("eft", [0, 0], [0, 2], speed=[2.0, 1.0], prefill_work=work)
    assert probability.tolist() == expected


@pytest.mark.parametrize("queued", [(0.0, 1.0), (1.0, 0.0), (2.5, 1.5)])
def test_eft_counts_the_work_queued(queued):
    """(U_f + 1 + W B) / mu_f < (U_s + 1) / mu_s with work U_f, U_s at each server: the rule is the
    inequality, both sides of it."""
    work, blocks, fast, slow = 0.3, 2, 2.0, 1.0
    u_fast, u_slow = queued
    fast_wins = (u_fast + 1 + work * blocks) / fast < (u_slow + 1) / slow
    probability = route(
        "eft", [1, 1], [0, 2], speed=[fast, slow], prefill_work=work, expected_work=np.array([u_fast, u_slow])
    )
    assert probability.tolist() == ([1.0, 0.0] if fast_wins else [0.0, 1.0])


def test_balanced_pandas_and_prefix_score_on_chosen_states():
    # balanced-pandas: (U / mu) (1 + W (B - m)) / mu; idle servers all tie at 0
    assert route("balanced-pandas", [0, 0], [0, 2], speed=[2.0, 1.0], prefill_work=1.0).tolist() == [0.5, 0.5]
    chosen = route("balanced-pandas", [1, 1], [0, 2], speed=[2.0, 1.0], prefill_work=1.0,
                   expected_work=np.array([3.0, 1.0]))  # fmt: skip
    assert chosen.tolist() == [0.0, 1.0]  # 3 x 3 / 4 = 2.25 against 1 x 1 / 1 = 1
    # prefix-score: a m / B + b (q_max - n) / (q_max - q_min) + c (1 - held / K)
    scores = route("prefix-score", [2, 0], [2, 0], index_blocks=np.array([2, 0]), held_blocks=np.array([2, 0]),
                   cache_blocks=np.array([2, 2]))  # fmt: skip
    assert scores.tolist() == [0.0, 1.0]  # 3 + 0 + 0 against 0 + 2 + 2
    assert route("prefix-score", [1, 1], [2, 0], prefix=1, queue=0, kv=0).tolist() == [1.0, 0.0]


# --- several closed classes ------------------------------------------------------------------------


def test_a_prefix_settled_on_one_server_for_good_is_a_mixture():
    """cache-aware with its defaults on two servers and one prefix, W = 0: the first job goes to
    either server (no index holds a block: a tie), and its chain is cached at once; every later job
    matches there and never finds the queues imbalanced (A = 64), so that server alone serves, an
    M/M/1/b queue at its speed. Two closed classes, entered with probability 1/2 each."""
    arrival_rate, speeds, buffer = 0.8, [1.0, 2.0], 3
    solution = solve_exact_cache(speeds, arrival_rate, buffer, "cache-aware", cache_blocks=2, blocks=2)
    assert solution.n_closed_classes == 2
    np.testing.assert_allclose(solution.sent_share_by_server, [0.5, 0.5], rtol=EXACT)
    mixed = [mm1k_mean_response_time(arrival_rate, mu, buffer) for mu in speeds]
    assert solution.mean_response_time == pytest.approx(np.mean(mixed), rel=EXACT)
    blocking = [mm1k_blocking_probability(arrival_rate, mu, buffer) for mu in speeds]
    assert solution.blocking_probability == pytest.approx(np.mean(blocking), rel=EXACT)
    assert solution.block_hit_ratio == pytest.approx(1.0, rel=EXACT)


# --- Monte Carlo ----------------------------------------------------------------------------------------

MASK64 = 2**64 - 1


def splitmix_finaliser(x: int) -> int:
    z = (x + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


class SimulatedServer:
    """One FCFS server with its block LRU: ``cache`` lists (prefix, block), most recent first;
    ``jobs`` holds [prefix, match at dispatch, arrival time] in order, the first in service."""

    def __init__(self, speed: float, buffer: int, capacity: int):
        self.speed, self.buffer, self.capacity = speed, buffer, capacity
        self.cache: list = []
        self.jobs: deque = deque()
        self.prefill_rate = 0.0  # > 0 while the job in service is in its prefill

    def rate(self) -> float:
        if not self.jobs:
            return 0.0
        return self.prefill_rate or self.speed

    def match(self, prefix: int, blocks: int) -> int:
        return next((j for j in range(blocks) if (prefix, j) not in self.cache), blocks)


class Simulation:
    """The model of the docs' page "Prefix caches", event by event (exponential races): one job
    type on every server, concurrency 1, one dispatcher with a precise index."""

    def __init__(self, speed, arrival_rate, buffer, capacity, popularity, blocks, work, policy, params, seed):
        self.rng = random.Random(seed)
        self.servers = [SimulatedServer(mu, b, k) for mu, b, k in zip(speed, buffer, capacity)]
        self.arrival_rate, self.popularity, self.blocks, self.work = arrival_rate, popularity, blocks, work
        self.policy, self.params = policy, params
        points = sorted((splitmix_finaliser(s * 1_000_003 + j), s, j) for s in range(len(speed)) for j in range(100))
        self.ring = [point[0] for point in points], [point[1] for point in points]
        self.now, self.counting = 0.0, False
        self.response = self.ttft = self.hits = 0.0
        self.departed = self.first_tokens = self.started = 0

    def start_service(self, server: SimulatedServer) -> None:
        prefix = server.jobs[0][0]
        hit = server.match(prefix, self.blocks)
        front = [(prefix, j) for j in range(hit)]
        server.cache = front + [block for block in server.cache if block not in front]
        if self.counting:
            self.hits += hit
            self.started += 1
        if self.work == 0 or hit == self.blocks:
            self.end_prefill(server)
        else:
            server.prefill_rate = server.speed / (self.work * (self.blocks - hit))

    def end_prefill(self, server: SimulatedServer) -> None:
        prefix, _, arrival = server.jobs[0]
        chain = [(prefix, j) for j in range(self.blocks)]
        cached = [block for block in chain if block in server.cache]  # held by the job
        for block in chain:  # the missing blocks enter head first while there is room
            if block not in cached and len(cached) < server.capacity:
                cached.append(block)
        cached.sort()
        others = [block for block in server.cache if block[0] != prefix]
        server.cache = (cached + others)[: server.capacity]  # the least recently used others leave
        server.prefill_rate = 0.0
        if self.counting:
            self.ttft += self.now - arrival
            self.first_tokens += 1

    def choose(self, prefix: int) -> int:
        servers, blocks, work = self.servers, self.blocks, self.work
        n = [len(server.jobs) for server in servers]
        m = [server.match(prefix, blocks) for server in servers]
        u = [sum(1 + work * (blocks - job[1]) for job in server.jobs) for server in servers]
        mu = [server.speed for server in servers]
        if self.policy == "cache-aware":
            if max(n) - min(n) > self.params["abs"] and max(n) > self.params["rel"] * min(n):
                return self.least(n)
            if max(m) / blocks >= self.params["match"]:
                return self.least([-x for x in m])
            return self.least([len(server.cache) for server in servers])
        if self.policy == "prefix-score":
            held = [sum((s.jobs[0][0], j) in s.cache for j in range(blocks)) if s.jobs else 0 for s in servers]
            spread = max(n) - min(n)
            score = [
                3 * m[s] / blocks
                + 2 * ((max(n) - n[s]) / spread if spread else 1)
                + 2 * (1 - held[s] / servers[s].capacity)
                for s in range(len(servers))
            ]
            return self.least([-x for x in score])
        if self.policy == "chash":
            bound = math.ceil(self.params["load"] * (sum(n) + 1) / len(servers))
            positions, owners = self.ring
            first = bisect.bisect_left(positions, splitmix_finaliser((prefix * blocks + 0x632BE59BD9B4E019) & MASK64))
            return next(
                owners[(first + i) % len(owners)]
                for i in range(len(owners))
                if n[owners[(first + i) % len(owners)]] < bound
            )
        if self.policy == "balanced-pandas":
            return self.least([u[s] / mu[s] * (1 + work * (blocks - m[s])) / mu[s] for s in range(len(servers))])
        if self.policy == "eft":
            return self.least([(u[s] + 1 + work * (blocks - m[s])) / mu[s] for s in range(len(servers))])
        raise ValueError(self.policy)

    def least(self, keys: list) -> int:
        best = min(keys)
        tied = [s for s, key in enumerate(keys) if key <= best + 1e-12 * abs(best)]
        return tied[self.rng.randrange(len(tied))]

    def run(self, warmup: float, horizon: float) -> tuple[float, float, float]:
        """Mean response time and TTFT of the jobs that leave, and reach their first token, after
        ``warmup``, and the block hit ratio of those that start service then."""
        rng, servers = self.rng, self.servers
        weights = np.cumsum(self.popularity).tolist()
        while self.now < horizon:
            rates = [server.rate() for server in servers]
            total = self.arrival_rate + sum(rates)
            self.now += rng.expovariate(total)
            self.counting = self.now >= warmup
            pick = rng.random() * total - self.arrival_rate
            if pick < 0:
                prefix = min(bisect.bisect_right(weights, rng.random() * weights[-1]), len(weights) - 1)
                server = servers[self.choose(prefix)]
                if len(server.jobs) < server.buffer:
                    server.jobs.append([prefix, server.match(prefix, self.blocks), self.now])
                    if len(server.jobs) == 1:
                        self.start_service(server)
                continue
            busy = [s for s, rate in enumerate(rates) if rate > 0]
            s = next((s for s in busy if pick < sum(rates[: s + 1])), busy[-1])
            server = servers[s]
            if server.prefill_rate:
                self.end_prefill(server)
                continue
            _, _, arrival = server.jobs.popleft()
            if self.counting:
                self.response += self.now - arrival
                self.departed += 1
            if server.jobs:
                self.start_service(server)
        return self.response / self.departed, self.ttft / self.first_tokens, self.hits / (self.blocks * self.started)


CACHE_POLICY_DEFAULTS = {
    "cache-aware": {"abs": 64.0, "rel": 1.5, "match": 0.3},
    "chash": {"load": 1.25},
    "prefix-score": {},
    "eft": {},
    "balanced-pandas": {},
}
"""The docs' defaults, for the simulation (prefix-score's 3, 2, 2 are written in it)."""

MONTE_CARLO = {
    "cache-aware": ([0.5, 0.3, 0.2], {"abs": 1.0, "rel": 1.5, "match": 0.5}),
    "chash": ([0.5, 0.3, 0.2], {"load": 1.25}),
    "prefix-score": ([0.5, 0.3, 0.2], {}),
    "eft": ([0.6, 0.4], {}),
    "balanced-pandas": ([0.6, 0.4], {}),
}


@pytest.mark.parametrize("policy", list(MONTE_CARLO))
def test_exact_chain_agrees_with_a_monte_carlo_simulation(policy):
    """Two servers of speeds 1 and 2, buffers 3, caches of 2 and 3 blocks, chains of B = 2, W = 1:
    the exact mean response time, TTFT and block hit ratio lie in the 99.9% Bonferroni intervals
    of independent replications of the simulation above, each started empty and warmed up."""
    popularity, params = MONTE_CARLO[policy]
    system = {"speed": [1.0, 2.0], "arrival_rate": 1.8, "buffer": [3, 3]}
    cache = {"capacity": [2, 3], "popularity": popularity, "blocks": 2, "work": 1.0}
    exact = solve_exact_cache(
        system["speed"], system["arrival_rate"], system["buffer"], policy, cache_blocks=cache["capacity"],
        popularity=popularity, blocks=2, prefill_work=1.0, **params,
    )  # fmt: skip
    assert exact.n_closed_classes == 1
    full = {**CACHE_POLICY_DEFAULTS[policy], **params}
    replications = np.array(
        [Simulation(**system, **cache, policy=policy, params=full, seed=seed).run(50.0, 6000.0) for seed in range(30)]
    )
    means = replications.mean(axis=0)
    for column, value in enumerate([exact.mean_response_time, exact.mean_ttft, exact.block_hit_ratio]):
        halfwidth = bonferroni_t_halfwidth(replications[:, column], ALPHA, 3)
        assert abs(means[column] - value) <= halfwidth, (column, means[column], value, halfwidth)


# --- input ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("keywords", "field"),
    [
        ({"speed": [1.0] * 4}, "speed"),
        ({"speed": [1.0, -1.0]}, "speed"),
        ({"arrival_rate": 0.0}, "arrival_rate"),
        ({"buffer": 0}, "buffer"),
        ({"buffer": [1, 2, 3]}, "buffer"),
        ({"cache_blocks": 5}, "cache_blocks"),
        ({"cache_blocks": [1, 2, 3]}, "cache_blocks"),
        ({"popularity": [1, 1, 1, 1, 1]}, "popularity"),
        ({"popularity": [0, 0]}, "popularity"),
        ({"blocks": 3}, "blocks"),
        ({"prefill_work": -1.0}, "prefill_work"),
        ({"compatible": [2]}, "compatible"),
        ({"compatible": []}, "compatible"),
        ({"policy": "jfsq"}, "policy"),
        ({"policy": "chash", "load": 0.5}, "policy chash.load"),  # the registry checks the parameters
        ({"policy": "cache-aware", "match": 1.5}, "policy cache-aware.match"),
        ({"policy": "cache-aware:abs=x"}, "policy"),
        ({"policy": "cache-aware:abs=1", "rel": 2}, "policy"),
        ({"max_states": 5}, "max_states"),
    ],
)
def test_invalid_input_names_its_field(keywords, field):
    arguments = {"speed": [1.0, 2.0], "arrival_rate": 1.0, "buffer": 2, "cache_blocks": 2, "blocks": 2,
                 "prefill_work": 1.0, **keywords}  # fmt: skip
    with pytest.raises(InputError) as error:
        solve_exact_cache(**arguments)
    assert error.value.field == field


def test_an_unknown_policy_parameter_is_refused_with_the_policys_parameters():
    with pytest.raises(InputError, match=r"^policy eft: has no parameter 'load' \(its parameters: evict\)"):
        solve_exact_cache([1.0], 1.0, 2, "eft", load=2.0)
