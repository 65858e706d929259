"""The decision rules of the policies that read the prefix cache (docs/background/prefix-caches.md),
as small @njit functions the kernels call and tests can call alone.

A decision takes the job's chain of L blocks as the router sees it at each compatible server s: its
match m_s (the longest leading part of the chain in the router's index of s), the index's size in
blocks, the blocks of s's cache held by its running jobs and its capacity K_s, the jobs at s n_s,
the expected work U_s of the jobs at s (each job's 1 + W (L_j - m_j) at its dispatch; n_s when
W = 0) and the rate ``rate[s]`` at which s would serve the job (mu_s phi_s(b'), b' = min(n_s + 1,
c_s); mu_s with concurrency 1). Every rule but chash is a selection key, least wins, ties uniformly
at random (hetlb.policies.rules.least_key_server); chash walks a ring.

``params`` holds a policy's parameters in the order of its registry entry: cache-aware (abs, rel,
match), prefix-score (prefix, queue, kv), chash (load,), eft (evict,).
"""

import numpy as np

from hetlb.jit import DISABLED, njit
from hetlb.policies.registry import BALANCED_PANDAS, CACHE_AWARE, EFT, L_EFT, PREFIX_SCORE

RING_POINTS = 100
"""Points of each server on chash's ring."""
SERVER_STRIDE = 1_000_003
"""Point j of server s sits at mix64(s * SERVER_STRIDE + j)."""
KEY_OFFSET = 0x632BE59BD9B4E019
"""A job's point on the ring is mix64(its first block's id + KEY_OFFSET)."""
MASK64 = (1 << 64) - 1

if DISABLED:

    def mix64(x):
        """splitmix64's finaliser of the unsigned 64-bit integer ``x`` (Steele, Lea and Flood), on
        Python integers (plain Python: no overflow warnings)."""
        z = (int(x) + 0x9E3779B97F4A7C15) & MASK64
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return np.uint64(z ^ (z >> 31))

else:

    @njit(inline="always")
    def mix64(x):
        """splitmix64's finaliser of the unsigned 64-bit integer ``x`` (Steele, Lea and Flood):
        arithmetic modulo 2^64."""
        z = np.uint64(x) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def chash_ring(n_servers: int) -> tuple[np.ndarray, np.ndarray]:
    """chash's ring of ``n_servers`` servers: (positions, servers), RING_POINTS points a server at
    mix64(s * SERVER_STRIDE + j), sorted by position (ties by server, then j). The same for any seed
    and in the gateway, so that a prefix goes where the simulator sends it."""
    points = []
    for s in range(n_servers):
        for j in range(RING_POINTS):
            z = (s * SERVER_STRIDE + j + 0x9E3779B97F4A7C15) & MASK64
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
            points.append((z ^ (z >> 31), s, j))
    points.sort()
    return np.array([p for p, _, _ in points], dtype=np.uint64), np.array([s for _, s, _ in points], dtype=np.int64)


@njit(inline="always")
def ring_key(first_block):
    """A job's position on chash's ring, from its first block's id (int64 >= 0)."""
    return mix64(np.uint64(first_block) + np.uint64(KEY_OFFSET))


@njit(error_model="numpy")
def cache_keys(
    policy_code,
    params,
    candidates,
    lo,
    hi,
    queue_len,
    match,
    chain_len,
    index_size,
    held,
    capacity,
    work,
    rate,
    prefill_work,
    key,
):
    """Write the selection key of every server ``candidates[lo:hi]`` into ``key`` (least wins).

    cache-aware: when max n - min n > abs and max n > rel min n (imbalanced), n_s; else, when the
    highest match ratio max m_s / L is at least ``match``, -m_s (a longest match); else the index's
    size (the emptiest cache). prefix-score: -(a m_s / L + b (q_max - n_s) / (q_max - q_min) +
    c (1 - held_s / K_s)), the queue term 1 when every n_s is equal, the usage 0 without a cache.
    balanced-pandas: (U_s / rate_s) (1 + W (L - m_s)) / rate_s. eft and l-eft:
    (U_s + 1 + (1 + evict) W (L - m_s)) / rate_s. A prompt of no block has match ratios 0."""
    most, least, best = queue_len[candidates[lo]], queue_len[candidates[lo]], 0
    for i in range(lo, hi):
        s = candidates[i]
        most = max(most, queue_len[s])
        least = min(least, queue_len[s])
        best = max(best, match[s])
    inverse_length = 1.0 / chain_len if chain_len > 0 else 0.0
    if policy_code == CACHE_AWARE:
        imbalanced = most - least > params[0] and most > params[1] * least
        affine = not imbalanced and best * inverse_length >= params[2]
        for i in range(lo, hi):
            s = candidates[i]
            key[s] = float(queue_len[s]) if imbalanced else (-float(match[s]) if affine else float(index_size[s]))
    elif policy_code == PREFIX_SCORE:
        spread = most - least
        for i in range(lo, hi):
            s = candidates[i]
            queue_score = 1.0 if spread == 0 else (most - queue_len[s]) / spread
            usage = held[s] / capacity[s] if capacity[s] > 0 else 0.0
            key[s] = -(params[0] * match[s] * inverse_length + params[1] * queue_score + params[2] * (1.0 - usage))
    elif policy_code == BALANCED_PANDAS:
        for i in range(lo, hi):
            s = candidates[i]
            key[s] = work[s] / rate[s] * (1.0 + prefill_work * (chain_len - match[s])) / rate[s]
    elif policy_code == EFT or policy_code == L_EFT:
        for i in range(lo, hi):
            s = candidates[i]
            key[s] = (work[s] + 1.0 + (1.0 + params[0]) * prefill_work * (chain_len - match[s])) / rate[s]


@njit
def chash_server(candidates, lo, hi, queue_len, load_factor, position, ring_position, ring_server, eligible):
    """chash: from the job's ``position`` on the ring, clockwise, the first point of a compatible
    server holding fewer than ceil(L (n + 1) / N_k) jobs, n the jobs at the N_k compatible servers
    (consistent hashing with bounded loads, Mirrokni, Thorup and Zadimoghaddam); one exists, since
    the N_k servers hold n < N_k L (n + 1) / N_k jobs. ``eligible`` (one entry a server, all 0) marks
    the compatible servers for the walk and is left all 0."""
    total = 0
    for i in range(lo, hi):
        eligible[candidates[i]] = 1
        total += queue_len[candidates[i]]
    bound = np.ceil(load_factor * (total + 1.0) / (hi - lo))
    n_points = len(ring_position)
    start = np.searchsorted(ring_position, position)
    chosen = candidates[lo]
    for step in range(n_points):
        s = ring_server[(start + step) % n_points]
        if eligible[s] == 1 and queue_len[s] < bound:
            chosen = s
            break
    for i in range(lo, hi):
        eligible[candidates[i]] = 0
    return chosen
