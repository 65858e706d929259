"""The policies' definitions as exact routing probabilities: the oracle of the exact solver.

Each rule maps the queue lengths ``queue_len`` (n_states, m) of the m servers a job type may use,
their speeds ``speed`` (m,), whether each has the largest speed in the system ``is_fast`` (m,),
the policy's parameters ``params`` (a dict, as in ``Policy.params``) and, for a policy that decides
on the order in which servers became idle, each server's place in that order ``idle_rank``
(n_states, m; None for the others) to the probability (n_states, m) that the job joins each server.

They are written from the definitions in docs/reference/policies.md with numpy alone and share no
code with the kernels' selection keys, so that the exact solver checks the kernels independently.
"""

import itertools

import numpy as np


def _uniform_over(mask: np.ndarray) -> np.ndarray:
    """Uniform probabilities over the True entries of each row."""
    return mask / mask.sum(axis=1, keepdims=True)


def _shortest(value: np.ndarray) -> np.ndarray:
    """Mask of the row-wise minima (all tied entries)."""
    return value == value.min(axis=1, keepdims=True)


def _join_shortest(queue_len: np.ndarray) -> np.ndarray:
    """Uniform probabilities over the shortest queues of each row."""
    return _uniform_over(_shortest(queue_len))


def _join_idle(queue_len: np.ndarray) -> np.ndarray:
    """Uniform probabilities over the idle servers of each row; a zero row where none is idle."""
    idle = queue_len == 0
    return idle / np.maximum(idle.sum(axis=1, keepdims=True), 1)


def _join_shortest_if_none_idle(queue_len: np.ndarray) -> np.ndarray:
    """Uniform probabilities over the shortest queues of each row; a zero row where one is idle."""
    return _join_shortest(queue_len) * (queue_len.min(axis=1, keepdims=True) > 0)


def _mean_over_samples(queue_len: np.ndarray, columns: np.ndarray, size: int, rule) -> np.ndarray:
    """Mean of ``rule`` over the samples of min(size, len(columns)) distinct ``columns``.

    Every such sample is equally likely (uniform sampling without replacement); ``rule`` maps the
    sampled queue lengths to probabilities. Returns zeros when ``columns`` is empty.
    """
    probability = np.zeros(queue_len.shape)
    if columns.size == 0:
        return probability
    subsets = list(itertools.combinations(columns, min(size, columns.size)))
    for subset in subsets:
        sampled = list(subset)
        probability[:, sampled] += rule(queue_len[:, sampled])
    return probability / len(subsets)


def _keep_extreme_speed(mask: np.ndarray, speed: np.ndarray, fastest: bool) -> np.ndarray:
    """Among the True entries of each row of ``mask``, keep the fastest (or slowest) servers."""
    masked = np.where(mask, speed, -np.inf if fastest else np.inf)
    extreme = masked.max(axis=1, keepdims=True) if fastest else masked.min(axis=1, keepdims=True)
    return mask & (masked == extreme)


def random(queue_len, speed, is_fast, params, idle_rank):
    return _uniform_over(np.ones(queue_len.shape, dtype=bool))


def weighted_random(queue_len, speed, is_fast, params, idle_rank):
    return np.broadcast_to(speed / speed.sum(), queue_len.shape).copy()


def jsq(queue_len, speed, is_fast, params, idle_rank):
    return _join_shortest(queue_len)


def jfsq(queue_len, speed, is_fast, params, idle_rank):
    return _uniform_over(_keep_extreme_speed(_shortest(queue_len), speed, fastest=True))


def jssq(queue_len, speed, is_fast, params, idle_rank):
    return _uniform_over(_keep_extreme_speed(_shortest(queue_len), speed, fastest=False))


def _idle_first(queue_len, speed, fastest_idle: bool, fallback: np.ndarray):
    """An idle server if there is one (the fastest, or any), otherwise one from ``fallback``."""
    idle = queue_len == 0
    chosen = _keep_extreme_speed(idle, speed, fastest=True) if fastest_idle else idle
    return _uniform_over(np.where(idle.any(axis=1, keepdims=True), chosen, fallback))


def jiq(queue_len, speed, is_fast, params, idle_rank):
    return _idle_first(queue_len, speed, False, np.ones(queue_len.shape, dtype=bool))


def jfiq(queue_len, speed, is_fast, params, idle_rank):
    return _idle_first(queue_len, speed, True, np.ones(queue_len.shape, dtype=bool))


def jsq_fiq(queue_len, speed, is_fast, params, idle_rank):
    return _idle_first(queue_len, speed, True, _shortest(queue_len))


def pod(queue_len, speed, is_fast, params, idle_rank):
    return _mean_over_samples(queue_len, np.arange(queue_len.shape[1]), params["d"], _join_shortest)


def jsq_df_ds(queue_len, speed, is_fast, params, idle_rank):
    """Exact JSQ-(d_F, d_S) probabilities (module docstring).

    The fast and slow samples are independent, so with the means over samples of: an idle fast
    choice (X), a shortest fast choice when none is idle (Z), and likewise for slow (Y, W),
    P = X + P(no fast idle) (p_S Y + (1 - p_F) W) + (P(slow idle) (1 - p_S) + P(no slow idle) p_F) Z.
    """
    fast, slow = np.flatnonzero(is_fast), np.flatnonzero(~is_fast)
    fast_idle = _mean_over_samples(queue_len, fast, params["d_fast"], _join_idle)
    fast_shortest = _mean_over_samples(queue_len, fast, params["d_fast"], _join_shortest_if_none_idle)
    slow_idle = _mean_over_samples(queue_len, slow, params["d_slow"], _join_idle)
    slow_shortest = _mean_over_samples(queue_len, slow, params["d_slow"], _join_shortest_if_none_idle)
    p_slow = 1.0 if fast.size == 0 else params["p_slow"]
    p_fast = 0.0 if fast.size == 0 else 1.0 if slow.size == 0 else params["p_fast"]
    no_fast_idle = 1.0 - fast_idle.sum(axis=1, keepdims=True)
    some_slow_idle = slow_idle.sum(axis=1, keepdims=True)
    return (
        fast_idle
        + no_fast_idle * (p_slow * slow_idle + (1.0 - p_fast) * slow_shortest)
        + ((1.0 - p_slow) * some_slow_idle + p_fast * (1.0 - some_slow_idle)) * fast_shortest
    )


def sed(queue_len, speed, is_fast, params, idle_rank):
    return _uniform_over(_shortest((queue_len + 1) / speed))


def jsq_lisf(queue_len, speed, is_fast, params, idle_rank):
    """The idle server of least ``idle_rank`` (ties at random) if one is idle, otherwise jsq.

    ``idle_rank`` is each server's position in the order in which the idle servers became idle;
    it is ignored for busy servers.
    """
    idle = queue_len == 0
    longest_idle = _shortest(np.where(idle, idle_rank, np.inf))
    return _uniform_over(np.where(idle.any(axis=1, keepdims=True), longest_idle, _shortest(queue_len)))


def below_average(queue_len, speed, is_fast, params, idle_rank):
    """l-jba on exact values: the servers strictly below the plain mean, by speed; if none, by speed
    over all (its default options; 001 section 5)."""
    below = queue_len < queue_len.mean(axis=1, keepdims=True)
    weight = np.where(below.any(axis=1, keepdims=True), below * speed, speed)
    return weight / weight.sum(axis=1, keepdims=True)
