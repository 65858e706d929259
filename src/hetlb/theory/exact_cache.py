"""Exact stationary solution of small systems of servers with prefix (KV) caches, as a continuous-time
Markov chain: the independent oracle of the simulated caches, written from the docs' page "Prefix
caches" alone (no code shared with the kernels).

Model. N servers (1..3) of speeds mu_s (``speed``), each serving one job at a time in FCFS order
and holding at most b_s jobs (``buffer``, the one in service included); a job sent to a full
server is lost. Server s keeps a cache of K_s blocks (``cache_blocks``, 0..4; 0 is no cache). One
job type may use the servers of ``compatible`` (all by default). Jobs arrive as a Poisson stream of
rate lambda (``arrival_rate``); a job's prompt is prefix k (k = 0..P-1, P in 1..4) with
probability p_k (``popularity``), a chain of B blocks (``blocks``, 1 or 2) with no blocks of its
own. Block j of prefix k has the id k B + j (the ids of ``shared`` prompts in
hetlb.model.prompts, prefixes counted from 0), so blocks of different prefixes differ.

Service. A job's decode work is X ~ Exp(1). When its service starts at s with a hit of h blocks,
its prefill of W (B - h) work (``prefill_work`` W >= 0 per block missed) is an exponential phase of
mean W (B - h) / mu_s (the simulator's ``prefill law exponential``), then its decode an exponential
phase of mean 1 / mu_s. If W = 0 or h = B there is no prefill phase: the job's prefill ends at its
service start.

Cache, per server, an ordered list of blocks, most recent first (the docs' rules):

- at service start the hit h is the longest leading part of the job's chain in the cache; the h
  hit blocks are touched (moved to the front, the head most recent);
- at prefill end the chain's B blocks are in the cache: the missing ones enter and all are touched,
  head most recent, tail least. Room is made by evicting the least recently used blocks that no job
  holds; the running job holds the blocks of its chain in the cache, from its service start to its
  departure, and it is the only job that holds blocks (one job in service). If every block is
  held, the chain's tail is left out (its head enters first).

Since only the job in service changes a server's cache, the cache between a job's service start and
its prefill end is the one its start left, and the hit is read again from it.

Routing. One dispatcher sees the true state (a precise index): each compatible server's n_s, its
cache as it is at the arrival (a block of a prefill under way is not in it: blocks enter at prefill
end), the blocks its running job holds and U_s, the expected work of its jobs, each counted at its
own dispatch as 1 + W (B - m), m its match then. The rules and their ties are those of
hetlb.theory.cache_routing (``jsq``, ``sed``, ``cache-aware``, ``prefix-score``, ``chash``,
``balanced-pandas``, ``eft``); ``chash`` keys on the first block's id, k B.

State. For each server: its cache (the ordered blocks), its jobs in FCFS order, each with its
prefix and its match at dispatch, and whether the job in service is in its prefill phase. What no
rule reads is left out of the state, an exact lumping: the match at dispatch unless the policy
reads U_s (``eft``, ``balanced-pandas``) and W > 0; the prefixes of the jobs at a server without a
cache. The states are those reached from the empty system with empty caches, by a breadth-first
search, refused beyond ``max_states``.

Long run. Caches never shrink, so the states with caches not yet full are transient. The chain
may have several closed classes: ``cache-aware`` on a balanced system sends every job of a prefix
to where it was first cached, so which server holds it is decided once, at random. A single long
run settles in one class and its averages are that class's. Each measure here is then the
average of the classes' measures, each class weighted by the probability that the chain started
empty enters it: the expected value of what a long run started empty reports (a server's hit
ratio is averaged over the classes in which jobs start service there). ``n_closed_classes`` says
how many classes there are; with one, the measures are those of the stationary law. Within a
class the law solves pi Q = 0 with hetlb.theory.exact's solver.

Measures. PASTA: an arrival sees the law in time. A job's blocks hit are counted at its service
start. The mean response time is Little's, the mean number in system over the throughput (the rate
of departures); the mean time to first token (TTFT, from arrival to prefill end) is Little's on
the jobs not yet past their prefill (those waiting and those in a prefill phase; a job without a
prefill phase has its first token at its service start).
"""

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components
from scipy.sparse.linalg import spsolve

from hetlb import validation
from hetlb.errors import InputError
from hetlb.theory.cache_routing import CacheView, cache_policy, cache_rule, reads_expected_work
from hetlb.theory.exact import (
    _check_buffer,
    _check_server_set,
    _frozen,
    _stationary_distribution,
    generator_from_transitions,
)
from hetlb.theory.lru import _popularity

__all__ = ["MAX_CACHE_STATES", "ExactCacheSolution", "solve_exact_cache"]

MAX_CACHE_STATES = 200_000
"""Default limit on the states of the chain (they are enumerated in Python, about 20,000 a second)."""
_SUBSTITUTION_CHUNK = 2000
"""Transient states solved together in the block substitution of _entry_probabilities."""
MOST_SERVERS = 3
MOST_CACHE_BLOCKS = 4
MOST_PREFIXES = 4
MOST_BLOCKS = 2
"""The small model's bounds: N, K_s, P and B."""

Local = tuple[tuple[int, ...], tuple[tuple[int, int], ...], bool]
"""A server's state: its cache (block ids, most recent first), its jobs in FCFS order as (prefix,
match at dispatch), and whether the job in service is in its prefill phase."""
EMPTY_SERVER: Local = ((), (), False)


@dataclass(frozen=True, eq=False)
class ExactCacheSolution:
    """Long-run performance of the chain (rates in jobs per unit time, times in time units, work in
    units of the mean decode work).

    Parameters
    ----------
    policy
        The policy's id.
    policy_params
        Its parameters, defaults filled in.
    n_states
        The states reached from the empty system with empty caches.
    n_recurrent_states
        The states of its closed classes (the others are transient, of probability 0).
    n_closed_classes
        The closed classes (module docstring: with more than one, each measure is the classes'
        measures averaged by the chances of entering each from the empty system).
    blocking_probability
        The share of arrivals lost at a full server (PASTA).
    throughput
        The rate of departures, lambda (1 - blocking_probability).
    mean_number_in_system
        L, the mean jobs in the system.
    mean_response_time
        L / throughput (Little's law over admitted jobs).
    mean_ttft
        The mean time from arrival to prefill end of admitted jobs (Little's law on the jobs not
        yet past their prefill).
    block_hit_ratio
        Blocks hit over blocks requested (B per job) by the jobs that start service.
    block_hit_ratio_by_server
        The same for the jobs that start service at each server (NaN where none does).
    sent_share_by_server
        The share of arrivals sent to each server (those lost at a full one included).
    admitted_rate_by_server
        Jobs admitted to each server per unit time.
    mean_blocks_hit
        The mean blocks hit per admitted job.
    prefill_work_saved
        W times ``mean_blocks_hit``: the mean prefill work a job's hit saves.
    utilisation
        P(n_s >= 1) per server.
    queue_length_law
        The joint law of the queue lengths, of shape buffer + 1 (entry (n_0, ..., n_{N-1})).
    residual
        The largest residual max |pi Q| of the closed classes' solves, relative to the largest
        total rate out of a state (a check of the solve).
    """

    policy: str
    policy_params: dict
    n_states: int
    n_recurrent_states: int
    n_closed_classes: int
    blocking_probability: float
    throughput: float
    mean_number_in_system: float
    mean_response_time: float
    mean_ttft: float
    block_hit_ratio: float
    block_hit_ratio_by_server: np.ndarray
    sent_share_by_server: np.ndarray
    admitted_rate_by_server: np.ndarray
    mean_blocks_hit: float
    prefill_work_saved: float
    utilisation: np.ndarray
    queue_length_law: np.ndarray
    residual: float

    def __repr__(self) -> str:
        return (
            f"<ExactCacheSolution {self.policy}, {len(self.utilisation)} servers, {self.n_states:,} states: mean "
            f"response time {self.mean_response_time:.5g}, TTFT {self.mean_ttft:.5g}, block hit ratio "
            f"{self.block_hit_ratio:.4g}>"
        )


# --- one server's cache ------------------------------------------------------------------------


def chain_of(prefix: int, blocks: int) -> tuple[int, ...]:
    """The block ids of prefix ``prefix``'s chain, head first: k B + j, j = 0..B-1."""
    return tuple(prefix * blocks + j for j in range(blocks))


def leading_hit(cache: tuple[int, ...], chain: tuple[int, ...]) -> int:
    """The longest leading part of ``chain`` in ``cache`` (blocks)."""
    hit = 0
    while hit < len(chain) and chain[hit] in cache:
        hit += 1
    return hit


def touched(cache: tuple[int, ...], chain: tuple[int, ...], hit: int) -> tuple[int, ...]:
    """The cache after a service start with ``hit`` blocks hit: those moved to the front, head first."""
    front = chain[:hit]
    return front + tuple(block for block in cache if block not in front)


def filled(cache: tuple[int, ...], chain: tuple[int, ...], capacity: int) -> tuple[int, ...]:
    """The cache of ``capacity`` blocks after a prefill end: the chain's blocks in it are held; the
    missing ones enter head first while there is room once every block not held is evicted; the
    chain's blocks in the cache are touched (head most recent), then the other blocks are kept in
    their order as far as they fit (the least recently used evicted)."""
    held = [block for block in chain if block in cache]
    missing = [block for block in chain if block not in cache]
    inside = set(held) | set(missing[: max(capacity - len(held), 0)])
    front = tuple(block for block in chain if block in inside)
    return (front + tuple(block for block in cache if block not in chain))[:capacity]


# --- the chain ---------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class _CacheModel:
    """The validated model (module docstring) and the operations on one server's state."""

    speed: np.ndarray
    arrival_rate: float
    buffer: np.ndarray
    cache_blocks: np.ndarray
    popularity: np.ndarray
    blocks: int
    prefill_work: float
    compatible: np.ndarray
    policy: str
    params: dict

    @property
    def tracks_match(self) -> bool:
        """Whether the state keeps each job's match at dispatch (the policy reads U_s and W > 0)."""
        return reads_expected_work(self.policy) and self.prefill_work > 0

    def label(self, s: int, prefix: int, match: int) -> tuple[int, int]:
        """A job's entry in server s's queue, with what no rule reads lumped to 0."""
        return (prefix if self.cache_blocks[s] > 0 else 0, match if self.tracks_match else 0)

    def start(self, s: int, cache: tuple[int, ...], prefix: int) -> tuple[tuple[int, ...], int, bool]:
        """A service start at s: the cache after it, the hit and whether a prefill phase follows."""
        chain = chain_of(prefix, self.blocks)
        hit = leading_hit(cache, chain)
        cache = touched(cache, chain, hit)
        if self.prefill_work == 0 or hit == self.blocks:
            return filled(cache, chain, int(self.cache_blocks[s])), hit, False
        return cache, hit, True

    def server_moves(self, s: int, local: Local) -> list[tuple[Local, float, int]]:
        """The moves of server s alone: (its state after, rate, blocks hit by a service start or -1)."""
        cache, jobs, in_prefill = local
        if not jobs:
            return []
        prefix = jobs[0][0]
        mu = float(self.speed[s])
        if in_prefill:
            chain = chain_of(prefix, self.blocks)
            missed = self.blocks - leading_hit(cache, chain)
            rate = mu / (self.prefill_work * missed)
            return [((filled(cache, chain, int(self.cache_blocks[s])), jobs, False), rate, -1)]
        rest = jobs[1:]
        if not rest:
            return [((cache, (), False), mu, -1)]
        cache, hit, in_prefill = self.start(s, cache, rest[0][0])
        return [((cache, rest, in_prefill), mu, hit)]

    def admitted(self, s: int, local: Local, prefix: int) -> tuple[Local, int]:
        """Server s after admitting a job of ``prefix`` (its buffer not full), and the blocks it hits
        when its service starts at once (-1 when it waits)."""
        cache, jobs, in_prefill = local
        entry = self.label(s, prefix, leading_hit(cache, chain_of(prefix, self.blocks)))
        if jobs:
            return (cache, jobs + (entry,), in_prefill), -1
        cache, hit, in_prefill = self.start(s, cache, prefix)
        return (cache, (entry,), in_prefill), hit

    def seen(self, s: int, local: Local, prefix: int) -> tuple[int, int, int, int, int]:
        """What the dispatcher sees of server s for a job of ``prefix``: n_s, m_s, the blocks of its
        index, the blocks its running job holds, and sum over its jobs of B - m (U_s = n_s + W times it)."""
        cache, jobs, _ = local
        held = len(set(chain_of(jobs[0][0], self.blocks)) & set(cache)) if jobs and cache else 0
        missed = sum(self.blocks - match for _, match in jobs)
        return len(jobs), leading_hit(cache, chain_of(prefix, self.blocks)), len(cache), held, missed

    def routing(self, seen: tuple, prefix: int) -> np.ndarray:
        """The policy's probabilities over the compatible servers from what it sees of them."""
        n, match, index_blocks, held, missed = (np.array(column) for column in zip(*seen))
        expected_work = n + self.prefill_work * missed if self.tracks_match or self.prefill_work == 0 else n * np.nan
        view = CacheView(
            servers=self.compatible,
            queue_len=n,
            matched_blocks=match,
            index_blocks=index_blocks,
            held_blocks=held,
            expected_work=expected_work,
            speed=self.speed[self.compatible],
            cache_blocks=self.cache_blocks[self.compatible],
            blocks=self.blocks,
            prefill_work=self.prefill_work,
            first_block_id=prefix * self.blocks,
            n_servers=len(self.speed),
        )
        return cache_rule(self.policy)(view, self.params)


@dataclass
class _Enumerated:
    """The chain reached from the empty system: its states, transitions and, per state, the rates
    and counts the measures weigh (arrays of n_states rows, one column per server where it has N)."""

    states: list
    rows: list
    cols: list
    rates: list
    hit_rate: list
    start_rate: list
    sent_rate: list
    blocked_rate: list
    departure_rate: list


def _enumerate(model: _CacheModel, max_states: int) -> _Enumerated:
    """Breadth-first search from the empty system with empty caches."""
    n_servers = len(model.speed)
    start = (EMPTY_SERVER,) * n_servers
    index = {start: 0}
    chain = _Enumerated([start], [], [], [], [], [], [], [], [])
    moves: dict = {}
    admissions: dict = {}
    seen_memo: dict = {}
    routes: dict = {}
    arrivals = [(k, model.arrival_rate * float(p)) for k, p in enumerate(model.popularity) if p > 0]
    compatible = [int(s) for s in model.compatible]

    def reach(i: int, state: tuple, s: int, local: Local, rate: float) -> None:
        target = state[:s] + (local,) + state[s + 1 :]
        j = index.get(target)
        if j is None:
            j = index[target] = len(chain.states)
            if j >= max_states:
                raise InputError(
                    "max_states",
                    f"the chain has more than max_states = {max_states:,} states; use fewer servers, prefixes or "
                    "blocks, smaller buffers or caches, or raise max_states",
                )
            chain.states.append(target)
        chain.rows.append(i)
        chain.cols.append(j)
        chain.rates.append(rate)

    i = 0
    while i < len(chain.states):
        state = chain.states[i]
        hits, starts, sent, blocked, departures = ([0.0] * n_servers for _ in range(5))
        for s in range(n_servers):
            key = (s, state[s])
            if key not in moves:
                moves[key] = model.server_moves(s, state[s])
            for local, rate, hit in moves[key]:
                reach(i, state, s, local, rate)
                if hit >= 0:
                    hits[s] += rate * hit
                    starts[s] += rate
                if len(local[1]) < len(state[s][1]):
                    departures[s] += rate
        for prefix, rate in arrivals:
            seen = []
            for s in compatible:
                view_key = (s, state[s], prefix)
                if view_key not in seen_memo:
                    seen_memo[view_key] = model.seen(s, state[s], prefix)
                seen.append(seen_memo[view_key])
            route_key = (prefix, tuple(seen))
            if route_key not in routes:
                routes[route_key] = model.routing(tuple(seen), prefix)
            for s, probability in zip(compatible, routes[route_key]):
                if probability == 0:
                    continue
                sent[s] += rate * probability
                if len(state[s][1]) >= model.buffer[s]:
                    blocked[s] += rate * probability
                    continue
                view_key = (s, state[s], prefix)
                if view_key not in admissions:
                    admissions[view_key] = model.admitted(s, state[s], prefix)
                local, hit = admissions[view_key]
                reach(i, state, s, local, rate * probability)
                if hit >= 0:
                    hits[s] += rate * probability * hit
                    starts[s] += rate * probability
        chain.hit_rate.append(hits)
        chain.start_rate.append(starts)
        chain.sent_rate.append(sent)
        chain.blocked_rate.append(blocked)
        chain.departure_rate.append(departures)
        i += 1
    return chain


def _entry_probabilities(generator: sp.csr_matrix, labels, is_open, members: list) -> np.ndarray:
    """The probability that the chain started in state 0 (transient) enters each closed class:
    sum_i t_i sum_{j in the class} Q_ij over the transient states i, with t the expected times
    spent in them, (-Q_TT)^T t = e_0.

    The transient states are put in a topological order of their strongly connected components
    (no transition goes back to an earlier component), which makes (-Q_TT)^T block lower
    triangular; t is then solved chunk by chunk (runs of whole components of about
    _SUBSTITUTION_CHUNK states), each by sparse LU. A single LU of the whole part fills in badly
    (tens of millions of entries at 50,000 states) and iterative solvers crawl on it."""
    transient_components = np.flatnonzero(is_open)
    rank = np.full(len(is_open), -1, dtype=np.int64)
    rank[transient_components] = _topological_ranks(generator, labels, is_open)
    transient = np.flatnonzero(is_open[labels])
    order = transient[np.argsort(rank[labels[transient]], kind="stable")]
    system = (-generator[order][:, order]).T.tocsr()
    times = np.zeros(len(order))
    times[np.flatnonzero(order == 0)[0]] = 1.0  # e_0, replaced chunk by chunk by t
    component_of = rank[labels[order]]
    cuts = np.flatnonzero(np.diff(component_of)) + 1  # where a component starts
    start = 0
    for end in [*cuts, len(order)]:
        if end - start < _SUBSTITUTION_CHUNK and end < len(order):
            continue
        chunk = slice(start, end)
        right_side = times[chunk] - system[chunk][:, :start] @ times[:start]
        times[chunk] = np.atleast_1d(spsolve(system[chunk][:, chunk].tocsc(), right_side))
        start = end
    into = generator[order].tocsc()
    weights = np.array([float(times @ np.asarray(into[:, states].sum(axis=1)).ravel()) for states in members])
    if not np.all(np.isfinite(weights)) or abs(weights.sum() - 1.0) > 1e-9:
        raise InputError("speed", f"the chances of entering the closed classes sum to {weights.sum():.12g}, not 1")
    return weights


def _topological_ranks(generator: sp.csr_matrix, labels, is_open) -> np.ndarray:
    """A rank for each open (transient) component, in increasing index, such that every transition
    between two of them goes to a higher rank (Kahn's algorithm on the components' graph)."""
    open_components = np.flatnonzero(is_open)
    position = np.full(len(is_open), -1, dtype=np.int64)
    position[open_components] = np.arange(len(open_components))
    coo = generator.tocoo()
    source, target = position[labels[coo.row]], position[labels[coo.col]]
    between = (coo.data > 0) & (source >= 0) & (target >= 0) & (source != target)
    edges = np.unique(np.stack([source[between], target[between]], axis=1), axis=0)
    successors = np.split(edges[:, 1], np.searchsorted(edges[:, 0], np.arange(1, len(open_components))))
    waiting = np.bincount(edges[:, 1], minlength=len(open_components))
    ready = list(np.flatnonzero(waiting == 0))
    ranks = np.empty(len(open_components), dtype=np.int64)
    for rank in range(len(open_components)):
        component = ready.pop()
        ranks[component] = rank
        for successor in successors[component]:
            waiting[successor] -= 1
            if waiting[successor] == 0:
                ready.append(successor)
    return ranks


def _long_run_laws(generator: sp.csr_matrix) -> tuple[list, np.ndarray, float, int]:
    """The stationary law of each closed class of the chain (as laws over all its states) and the
    probability that the chain started in state 0 enters it (module docstring). Returns the laws,
    their weights, the largest residual of their solves and the number of their states."""
    n_states = generator.shape[0]
    n_components, labels = connected_components(generator, directed=True, connection="strong")
    coo = generator.tocoo()
    leaves = (coo.data > 0) & (labels[coo.row] != labels[coo.col])
    is_open = np.zeros(n_components, dtype=bool)
    is_open[labels[coo.row[leaves]]] = True
    members = [np.flatnonzero(labels == c) for c in np.flatnonzero(~is_open)]
    laws = []
    residual = 0.0
    for states in members:
        law, class_residual = _stationary_distribution(generator[states][:, states].tocsr())
        laws.append(np.zeros(n_states))
        laws[-1][states] = law
        residual = max(residual, class_residual)
    weights = np.ones(1) if len(members) == 1 else _entry_probabilities(generator, labels, is_open, members)
    return laws, weights, residual, int(sum(map(len, members)))


# --- validation and the solution ----------------------------------------------------------------


def _cache_sizes(cache_blocks, n_servers: int) -> np.ndarray:
    sizes = [cache_blocks] * n_servers if np.ndim(cache_blocks) == 0 else list(cache_blocks)
    if len(sizes) != n_servers:
        raise InputError("cache_blocks", f"must be one integer or one per server ({n_servers}), got {len(sizes)}")
    return np.array(
        [validation.integer("cache_blocks", k, low=0, high=MOST_CACHE_BLOCKS) for k in sizes], dtype=np.int64
    )


def solve_exact_cache(
    speed,
    arrival_rate,
    buffer,
    policy="jsq",
    *,
    cache_blocks=0,
    popularity=(1.0,),
    blocks: int = 1,
    prefill_work: float = 0.0,
    compatible=None,
    max_states: int = MAX_CACHE_STATES,
    **policy_params,
) -> ExactCacheSolution:
    """Exact long-run performance of a small system of servers with prefix caches (module docstring).

    Parameters
    ----------
    speed
        ``speed[s]`` = mu_s, the speed of server s (1 to 3 servers): its decode of a job takes an
        exponential time of mean 1 / mu_s, its prefill of w work a mean w / mu_s.
    arrival_rate
        lambda, the Poisson arrival rate of jobs (jobs per unit time).
    buffer
        b_s, the most jobs server s holds, the one in service included; one integer for all
        servers or one per server.
    policy
        One of EXACT_CACHE_POLICIES (hetlb.theory.cache_routing), or its text with parameters
        (``cache-aware:abs=0,rel=1,match=0.3``).
    cache_blocks
        K_s, the blocks server s's cache holds (0..4; 0 is no cache); one integer or one per server.
    popularity
        Weights of the prefixes k = 0..P-1 (1 to 4 of them), >= 0 and not all 0; p_k is the
        weight over their sum.
    blocks
        B, the blocks of each prefix's chain (1 or 2); block j of prefix k has the id k B + j.
    prefill_work
        W >= 0, the prefill work per block missed (units of the mean decode work).
    compatible
        The servers the jobs may use (None: every server).
    max_states
        The most states the chain may have; beyond, an InputError.
    **policy_params
        The policy's parameters: ``abs``, ``rel``, ``match`` (cache-aware; defaults 64, 1.5, 0.3),
        ``prefix``, ``queue``, ``kv`` (prefix-score; 3, 2, 2), ``load`` (chash, >= 1; 1.25).

    Returns
    -------
    ExactCacheSolution
        The long-run measures.

    Examples
    --------
    One server, one prefix of two blocks that stays cached: after the first job every job hits,
    so the server is M/M/1/3 and its blocking is rho^3 / (1 + rho + rho^2 + rho^3).

    >>> solution = solve_exact_cache([1.0], 0.5, 3, cache_blocks=2, blocks=2, prefill_work=1.0)
    >>> round(solution.block_hit_ratio, 12), round(solution.blocking_probability, 12)
    (1.0, 0.066666666667)
    """
    speed = validation.positive_finite_array("speed", speed, validation.RATE_RANGE, "rates a model takes")
    n_servers = speed.size
    if n_servers > MOST_SERVERS:
        raise InputError("speed", f"the exact cache chain takes 1 to {MOST_SERVERS} servers, got {n_servers}")
    popularity = _popularity(popularity)
    if len(popularity) > MOST_PREFIXES:
        raise InputError(
            "popularity", f"the exact cache chain takes 1 to {MOST_PREFIXES} prefixes, got {len(popularity)}"
        )
    policy_id, params = cache_policy(policy, policy_params)
    model = _CacheModel(
        speed=speed,
        arrival_rate=validation.positive_number("arrival_rate", arrival_rate),
        buffer=_check_buffer(buffer, n_servers),
        cache_blocks=_cache_sizes(cache_blocks, n_servers),
        popularity=popularity,
        blocks=validation.integer("blocks", blocks, low=1, high=MOST_BLOCKS),
        prefill_work=validation.number("prefill_work", prefill_work, 0.0),
        compatible=np.arange(n_servers)
        if compatible is None
        else _check_server_set("compatible", compatible, n_servers),
        policy=policy_id,
        params=params,
    )
    max_states = validation.count("max_states", max_states)
    if np.any(model.buffer > 64):
        raise InputError("buffer", "the exact cache chain takes buffers of at most 64 jobs")
    chain = _enumerate(model, max_states)
    n_states = len(chain.states)
    generator = generator_from_transitions(
        np.array(chain.rows, dtype=np.int64), np.array(chain.cols, dtype=np.int64), np.array(chain.rates), n_states
    )
    laws, weights, residual, n_recurrent = _long_run_laws(generator)
    per_state = _PerState.of(chain)
    by_class = [_class_measures(model, per_state, law) for law in laws]
    measures: dict[str, Any] = {}
    for name, value in by_class[0].items():
        values = np.array([class_measures[name] for class_measures in by_class])
        defined = ~np.isnan(values)
        if np.ndim(value) == 0:
            measures[name] = float(weights @ values)
        else:  # weighted over the classes where it is defined (a server's hit ratio, where jobs reach it)
            shares = np.where(defined, weights.reshape((-1,) + (1,) * np.ndim(value)), 0.0)
            with np.errstate(invalid="ignore", divide="ignore"):
                combined = (np.where(defined, values, 0.0) * shares).sum(axis=0) / shares.sum(axis=0)
            measures[name] = _frozen(combined)
    return ExactCacheSolution(
        policy=model.policy,
        policy_params=dict(model.params),
        n_states=len(chain.states),
        n_recurrent_states=n_recurrent,
        n_closed_classes=len(laws),
        residual=residual,
        **measures,
    )


@dataclass(frozen=True)
class _PerState:
    """Per state of the chain (rows): the jobs at each server, the jobs not yet past their prefill,
    and the rates of the chain's events there."""

    queue_len: np.ndarray
    before_first_token: np.ndarray
    hit_rate: np.ndarray
    start_rate: np.ndarray
    sent_rate: np.ndarray
    blocked_rate: np.ndarray
    departure_rate: np.ndarray

    @classmethod
    def of(cls, chain: _Enumerated) -> "_PerState":
        queue_len = np.array([[len(local[1]) for local in state] for state in chain.states], dtype=np.int64)
        in_prefill = np.array([[local[2] for local in state] for state in chain.states], dtype=bool)
        return cls(
            queue_len=queue_len,
            before_first_token=np.maximum(queue_len - 1, 0).sum(axis=1) + in_prefill.sum(axis=1),
            hit_rate=np.array(chain.hit_rate),
            start_rate=np.array(chain.start_rate),
            sent_rate=np.array(chain.sent_rate),
            blocked_rate=np.array(chain.blocked_rate),
            departure_rate=np.array(chain.departure_rate),
        )


def _class_measures(model: _CacheModel, per_state: _PerState, pi: np.ndarray) -> dict:
    """The solution's measures under the law ``pi`` of one closed class (module docstring)."""
    hit_rate = pi @ per_state.hit_rate
    start_rate = pi @ per_state.start_rate
    sent_rate = pi @ per_state.sent_rate
    blocked_rate = pi @ per_state.blocked_rate
    throughput = float(pi @ per_state.departure_rate.sum(axis=1))
    mean_number = float(pi @ per_state.queue_len.sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        hit_ratio_by_server = np.where(start_rate > 0, hit_rate / (model.blocks * start_rate), np.nan)
    mean_blocks_hit = float(hit_rate.sum() / start_rate.sum())
    shape = tuple(int(b) + 1 for b in model.buffer)
    law = np.bincount(np.ravel_multi_index(per_state.queue_len.T, shape), weights=pi, minlength=math.prod(shape))
    return {
        "blocking_probability": float(blocked_rate.sum() / model.arrival_rate),
        "throughput": throughput,
        "mean_number_in_system": mean_number,
        "mean_response_time": mean_number / throughput,
        "mean_ttft": float(pi @ per_state.before_first_token) / throughput,
        "block_hit_ratio": mean_blocks_hit / model.blocks,
        "block_hit_ratio_by_server": hit_ratio_by_server,
        "sent_share_by_server": sent_rate / model.arrival_rate,
        "admitted_rate_by_server": sent_rate - blocked_rate,
        "mean_blocks_hit": mean_blocks_hit,
        "prefill_work_saved": model.prefill_work * mean_blocks_hit,
        "utilisation": pi @ (per_state.queue_len >= 1),
        "queue_length_law": law.reshape(shape),
    }
