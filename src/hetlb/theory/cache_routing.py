"""The routers' rules on prefix caches (docs: "Prefix caches"), as routing probabilities of one
dispatcher that sees the true state, for the exact chain of hetlb.theory.exact_cache.

Written from the docs' definitions alone, sharing no code with the kernels. A job arrives with a
prompt of B blocks (``blocks``); what the dispatcher sees of each compatible server s is a
:class:`CacheView`: its jobs n_s (the one in service counted), the match m_s of the job's chain in
s's index (its longest leading part there; with one dispatcher the index is the cache itself, a
block of a prefill still under way not in it), the blocks the index holds, the blocks of s's
cache held by its running job, U_s (the expected work of the jobs at s, each job's
1 + W (B - m) at its own dispatch, m its match then), the speed mu_s and the cache size K_s.

Each rule returns the probability that the job goes to each compatible server. Ties are uniform
among the tied servers; keys that are real numbers tie when they are within a relative
RELATIVE_TIE of the best (so that rounding does not break a tie the formula has, e.g. two
servers' (n_s + 1) / mu_s or U_s sums accumulated in another order).
"""

import bisect
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from hetlb import validation
from hetlb.errors import InputError
from hetlb.policies.registry import POLICIES, make_policy, policies_where
from hetlb.theory.exact import _check_server_set

__all__ = [
    "EXACT_CACHE_POLICIES",
    "CacheView",
    "cache_routing_probabilities",
    "chash_key",
    "chash_ring",
    "mix64",
]

RELATIVE_TIE = 1e-12
"""Real keys within this share of the best one tie with it."""

EXACT_CACHE_POLICIES = policies_where(exact_cache_rule=True)
"""The policies that hetlb.theory.solve_exact_cache implements: those whose registry entry names a
rule of this module (PolicySpec.exact_cache_rule); their parameters and defaults are the registry's."""

EXPECTED_WORK_RULES = ("balanced_pandas_rule", "eft_rule")
"""The rules that read U_s (so the chain keeps each job's match at dispatch)."""

RING_POINTS = 100
"""Points of each server on the ring of ``chash``."""
RING_SERVER_STRIDE = 1_000_003
"""Server s's point j is at mix64(s * RING_SERVER_STRIDE + j)."""
KEY_SALT = 0x632BE59BD9B4E019
"""A job's key on the ring is mix64(first block id + KEY_SALT) (mod 2^64)."""
_MASK64 = (1 << 64) - 1


@dataclass(frozen=True, eq=False)
class CacheView:
    """What one dispatcher with a precise index sees of the compatible servers when a job arrives.

    Every array is over the compatible servers, in increasing index.

    Parameters
    ----------
    servers
        The compatible servers' indices s (0..N-1).
    queue_len
        n_s, the jobs at s, the one in service included.
    matched_blocks
        m_s, the match: the longest leading part (blocks) of the job's chain in s's index.
    index_blocks
        The blocks s's index holds.
    held_blocks
        The blocks of s's cache held by its running job (0 when s is idle).
    expected_work
        U_s, the expected work of the jobs at s: the sum of each one's 1 + W (B - m) at its own
        dispatch (units of the mean decode work; NaN where the caller does not track it).
    speed
        mu_s.
    cache_blocks
        K_s, the blocks s's cache holds at most (0: no cache).
    blocks
        B, the blocks of the job's chain.
    prefill_work
        W >= 0, the prefill work per block missed (units of the mean decode work).
    first_block_id
        The id of the chain's first block (an int64, read by ``chash``).
    n_servers
        N, every server of the system (the ring of ``chash`` holds them all).
    """

    servers: np.ndarray
    queue_len: np.ndarray
    matched_blocks: np.ndarray
    index_blocks: np.ndarray
    held_blocks: np.ndarray
    expected_work: np.ndarray
    speed: np.ndarray
    cache_blocks: np.ndarray
    blocks: int
    prefill_work: float
    first_block_id: int
    n_servers: int


def _uniform_among(chosen: np.ndarray) -> np.ndarray:
    return chosen / chosen.sum()


def _least(keys: np.ndarray) -> np.ndarray:
    """Uniform among the keys within RELATIVE_TIE of the least."""
    least = keys.min()
    return _uniform_among(keys <= least + RELATIVE_TIE * abs(least))


def _greatest(keys: np.ndarray) -> np.ndarray:
    """Uniform among the keys within RELATIVE_TIE of the greatest."""
    return _least(-keys)


# --- the rules ---------------------------------------------------------------------------------


def jsq_rule(view: CacheView, params: dict) -> np.ndarray:
    """``jsq``: "join a shortest compatible queue (queue length counts the job in service); ties
    uniformly at random"."""
    return _least(view.queue_len.astype(float))


def sed_rule(view: CacheView, params: dict) -> np.ndarray:
    """``sed``: "shortest expected delay: argmin (queue_len + 1) / speed", ties at random."""
    return _least((view.queue_len + 1.0) / view.speed)


def cache_aware_rule(view: CacheView, params: dict) -> np.ndarray:
    """``cache-aware:abs=A,rel=R,match=M``: "with n_s the jobs at s, the system is *imbalanced*
    when max_s n_s - min_s n_s > A and max_s n_s > R min_s n_s; then the job joins a shortest
    queue. Otherwise, if the highest match ratio is at least M, it goes to a server of that match;
    else to the server whose index holds the fewest blocks." Maxima and minima are over the
    compatible servers; the match ratio is m_s / B; ties at random."""
    n = view.queue_len
    longest, shortest = int(n.max()), int(n.min())
    if longest - shortest > params["abs"] and longest > params["rel"] * shortest:
        return _least(n.astype(float))
    best = int(view.matched_blocks.max())
    if best / view.blocks >= params["match"]:
        return _uniform_among(view.matched_blocks == best)
    return _least(view.index_blocks.astype(float))


def prefix_score_rule(view: CacheView, params: dict) -> np.ndarray:
    """``prefix-score:prefix=a,queue=b,kv=c``: "the score a m_s / L + b (q_max - n_s) / (q_max -
    q_min) (1 when every n_s is equal) + c (1 - u_s), with u_s the share of s's cache held by its
    running jobs (the KV usage an engine reports; 0 without a cache); the highest score wins."
    Here u_s = held blocks / K_s, q_max and q_min over the compatible servers; ties at random."""
    n = view.queue_len.astype(float)
    spread = n.max() - n.min()
    queue_score = np.ones_like(n) if spread == 0 else (n.max() - n) / spread
    usage = np.where(view.cache_blocks > 0, view.held_blocks / np.maximum(view.cache_blocks, 1), 0.0)
    score = (
        params["prefix"] * view.matched_blocks / view.blocks
        + params["queue"] * queue_score
        + params["kv"] * (1 - usage)
    )
    return _greatest(score)


def chash_rule(view: CacheView, params: dict) -> np.ndarray:
    """``chash:load=L``: "consistent hashing of the job's first block with bounded loads (Mirrokni,
    Thorup and Zadimoghaddam): each compatible server has 100 points on a ring; the job starts at
    its first block's point and takes the first server whose n_s is below ceil(L (n + 1) / N_k), n
    the jobs in the system and N_k the compatible servers". The ring is :func:`chash_ring`, the key
    :func:`chash_key`; the walk starts at the first point at or after the key (wrapping around) and
    skips the points of incompatible servers; the bound is ``math.ceil(L * (n + 1) / N_k)`` in
    float64 with n the jobs at the compatible servers (all the jobs: there is one job type)."""
    bound = math.ceil(params["load"] * (int(view.queue_len.sum()) + 1) / len(view.servers))
    place = {int(s): i for i, s in enumerate(view.servers)}
    positions, owners = chash_ring(view.n_servers)
    start = bisect.bisect_left(positions, chash_key(view.first_block_id))
    probability = np.zeros(len(view.servers))
    for step in range(len(owners)):
        i = place.get(owners[(start + step) % len(owners)])
        if i is not None and view.queue_len[i] < bound:
            probability[i] = 1.0
            return probability
    raise AssertionError("with load >= 1 some compatible server is below the bound")


def balanced_pandas_rule(view: CacheView, params: dict) -> np.ndarray:
    """``balanced-pandas``: "each server keeps its weighted workload U_s / mu_s, U_s the expected
    work of the jobs it holds (each job's 1 + W (L - m) at its dispatch); a job goes to the least
    (U_s / mu_s) / r_s, where r_s = mu_s / (1 + W (L - m_s)) is its own service rate there".
    Idle servers (U_s = 0) all tie at 0, whatever their speed and match; ties at random."""
    own_rate = view.speed / (1.0 + view.prefill_work * (view.blocks - view.matched_blocks))
    return _least(view.expected_work / view.speed / own_rate)


def eft_rule(view: CacheView, params: dict) -> np.ndarray:
    """``eft``: "the job goes to the server where it is expected to finish first, counting the work
    queued there, its own uncached prefill there and its decode, at that server's speed:
    eft_s = (U_s + 1 + W (L - m_s)) / (mu_s phi_s(b'_s))", a miss weighed (1 + evict) times; here
    c_s = 1, so phi_s = 1. Ties at random."""
    missed = (1.0 + params["evict"]) * view.prefill_work * (view.blocks - view.matched_blocks)
    return _least((view.expected_work + 1.0 + missed) / view.speed)


def cache_rule(policy_id: str) -> Callable[[CacheView, dict], np.ndarray]:
    """The rule of this module that the registry names for ``policy_id`` (one of EXACT_CACHE_POLICIES)."""
    return globals()[str(POLICIES[policy_id].exact_cache_rule)]


def reads_expected_work(policy_id: str) -> bool:
    """Whether the policy's rule reads U_s."""
    return POLICIES[policy_id].exact_cache_rule in EXPECTED_WORK_RULES


# --- the ring of chash -------------------------------------------------------------------------


def mix64(x: int) -> int:
    """splitmix64's finaliser on an unsigned 64-bit integer (``x`` is taken mod 2^64):
    z = x + 0x9E3779B97F4A7C15; z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EB; z ^ (z >> 31), every step mod 2^64.

    Parameters
    ----------
    x
        An integer (its value mod 2^64 is used).

    Returns
    -------
    int
        The mixed value, in [0, 2^64).
    """
    z = (x + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def chash_key(first_block_id: int) -> int:
    """The position on the ring of a job whose chain starts with block ``first_block_id`` (an
    int64, negative ones taken mod 2^64): mix64(first_block_id + 0x632BE59BD9B4E019).

    Parameters
    ----------
    first_block_id
        The id of the chain's first block.

    Returns
    -------
    int
        The key, in [0, 2^64).
    """
    return mix64((first_block_id + KEY_SALT) & _MASK64)


@functools.lru_cache(maxsize=8)
def chash_ring(n_servers: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The ring of ``chash`` for servers 0..N-1: server s has 100 points, at mix64(s * 1_000_003 +
    j) for j = 0..99, sorted by position (ties by server index, then j).

    Parameters
    ----------
    n_servers
        N.

    Returns
    -------
    tuple
        The points' positions (increasing) and the server each belongs to.
    """
    points = sorted((mix64(s * RING_SERVER_STRIDE + j), s, j) for s in range(n_servers) for j in range(RING_POINTS))
    return tuple(point[0] for point in points), tuple(point[1] for point in points)


# --- policies and their parameters ---------------------------------------------------------------


def cache_policy(policy, policy_params: dict) -> tuple[str, dict]:
    """The policy id and its parameters (defaults filled in, each checked) from an id with keyword
    parameters or a text ``id:key=value,...`` (not both)."""
    if not isinstance(policy, str):
        raise InputError("policy", f"must be one of {', '.join(EXACT_CACHE_POLICIES)}, got {validation.shown(policy)}")
    policy_id, _, text = policy.partition(":")
    policy_id = validation.choice("policy", policy_id.strip(), EXACT_CACHE_POLICIES)
    given = dict(policy_params)
    if text.strip():
        if given:
            raise InputError("policy", "give the parameters either in the text (id:key=value) or as keywords, not both")
        for item in text.split(","):
            name, equals, value = item.partition("=")
            try:
                given[name.strip()] = float(value)
            except ValueError:
                raise InputError("policy", f"parameters must be key=number, got {item.strip()!r}") from None
            if not equals:
                raise InputError("policy", f"parameters must be key=number, got {item.strip()!r}")
    params = dict(make_policy(policy_id, **given).params)
    return policy_id, params


def cache_routing_probabilities(
    policy,
    queue_len,
    matched_blocks,
    speed,
    *,
    blocks: int,
    index_blocks=None,
    held_blocks=None,
    expected_work=None,
    cache_blocks=None,
    prefill_work: float = 0.0,
    first_block_id: int = 0,
    compatible=None,
    **policy_params,
) -> np.ndarray:
    """The probability that ``policy`` sends a job to each server, one dispatcher with a precise
    index (docs: "Prefix caches"; the rules are those of hetlb.theory.solve_exact_cache).

    Parameters
    ----------
    policy
        One of EXACT_CACHE_POLICIES, or its text with parameters (``cache-aware:abs=0,rel=1``).
    queue_len
        n_s, the jobs at each server (the one in service counted).
    matched_blocks
        m_s, the match: the longest leading part of the job's chain in each server's index (blocks,
        0..B).
    speed
        mu_s, each server's speed.
    blocks
        B, the blocks of the job's chain.
    index_blocks
        The blocks each server's index holds (None: 0 each).
    held_blocks
        The blocks of each server's cache held by its running job (None: 0 each).
    expected_work
        U_s, each server's expected work, each job's 1 + W (B - m) at its dispatch (None: n_s,
        which it is when W = 0).
    cache_blocks
        K_s, each server's cache size in blocks (None: 0 each, no cache).
    prefill_work
        W >= 0, the prefill work per block missed.
    first_block_id
        The id of the chain's first block (``chash`` hashes it; :func:`chash_key`).
    compatible
        The servers the job may use (None: all).
    **policy_params
        The policy's parameters: ``abs``, ``rel``, ``match`` (cache-aware), ``prefix``, ``queue``,
        ``kv`` (prefix-score), ``load`` (chash).

    Returns
    -------
    numpy.ndarray
        A length-N vector that sums to 1 and is 0 outside ``compatible``.
    """
    policy_id, params = cache_policy(policy, policy_params)
    speed = validation.positive_finite_array("speed", speed)
    n_servers = speed.size
    blocks = validation.integer("blocks", blocks, low=1)
    prefill_work = validation.number("prefill_work", prefill_work, 0.0)
    servers = np.arange(n_servers) if compatible is None else _check_server_set("compatible", compatible, n_servers)

    def counts(name: str, values, default, high: int | None = None) -> np.ndarray:
        values = default if values is None else values
        array = np.asarray(values)
        if array.shape != (n_servers,) or not np.issubdtype(array.dtype, np.integer) or np.any(array < 0):
            raise InputError(name, f"must be {n_servers} non-negative integers, one per server")
        if high is not None and np.any(array > high):
            raise InputError(name, f"every value must be at most {high}, got {array.max()}")
        return array.astype(np.int64)

    zeros = np.zeros(n_servers, dtype=np.int64)
    queue_len = counts("queue_len", queue_len, zeros)
    matched_blocks = counts("matched_blocks", matched_blocks, zeros, high=blocks)
    index_blocks = counts("index_blocks", index_blocks, zeros)
    held_blocks = counts("held_blocks", held_blocks, zeros)
    cache_blocks = counts("cache_blocks", cache_blocks, zeros)
    if expected_work is None:
        expected_work = queue_len.astype(float)
    else:
        expected_work = np.asarray(expected_work, dtype=float)
        if expected_work.shape != (n_servers,) or not np.all(np.isfinite(expected_work) & (expected_work >= 0)):
            raise InputError("expected_work", f"must be {n_servers} finite numbers >= 0, one per server")
    if not validation.is_integer(first_block_id) or not -(2**63) <= first_block_id < 2**63:
        raise InputError("first_block_id", f"must be an int64, got {validation.shown(first_block_id)}")
    view = CacheView(
        servers=servers,
        queue_len=queue_len[servers],
        matched_blocks=matched_blocks[servers],
        index_blocks=index_blocks[servers],
        held_blocks=held_blocks[servers],
        expected_work=expected_work[servers],
        speed=speed[servers],
        cache_blocks=cache_blocks[servers],
        blocks=blocks,
        prefill_work=prefill_work,
        first_block_id=int(first_block_id),
        n_servers=n_servers,
    )
    probability = np.zeros(n_servers)
    probability[servers] = cache_rule(policy_id)(view, params)
    return probability
