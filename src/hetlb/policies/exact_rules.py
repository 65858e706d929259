"""The policies' definitions as exact routing probabilities: the oracle of the exact solver.

Each rule maps the queue lengths ``queue_len`` (n_states, m) of the m servers a job type may use,
their speeds ``speed`` (m,), whether each has the largest speed in the system ``is_fast`` (m,),
the policy's parameters ``params`` (a dict, as in ``Policy.params``) and, for a policy that decides
on the order in which servers became idle, each server's place in that order ``idle_rank``
(n_states, m; None for the others) to the probability (n_states, m) that the job joins each server.
The built-in rules also take ``slots``, the :class:`Slots` of those servers when they serve many
jobs at once (None: one job at a time, the papers' servers).

On multi-slot servers (docs/reference/policies.md) the queue length n counts every job at the
server; "idle" reads as a free slot, n < c; "fastest" ranks by the rate a new job would receive,
mu phi(b') / b' with b' = min(n + 1, c); sed's expected delay is (n + 1) / (mu phi(min(n + 1, c))).
With c = 1 these are the definitions above, value for value.

They are written from the definitions in docs/reference/policies.md with numpy alone and share no
code with the kernels' selection keys, so that the exact solver checks the kernels independently.
"""

import itertools
from dataclasses import dataclass

import numpy as np

from hetlb.model.servers import SINGLE_SLOT


@dataclass(frozen=True, eq=False)
class Slots:
    """The m servers of a job type as servers of many slots: ``concurrency`` c_s (m,), ``curves``
    (m RateCurves, phi_s) and ``speed`` mu_s (m,)."""

    concurrency: np.ndarray
    curves: tuple
    speed: np.ndarray

    @classmethod
    def single(cls, speed: np.ndarray) -> "Slots":
        """One slot per server: free means idle, the new job's rate is mu, the delay (n + 1) / mu."""
        return cls(np.ones(speed.shape, dtype=np.int64), (SINGLE_SLOT,) * speed.size, speed)

    def free(self, queue_len: np.ndarray) -> np.ndarray:
        """Whether each server has a free slot, n < c (its "idle")."""
        return queue_len < self.concurrency

    def _rate(self, jobs_in_service: np.ndarray, per_job: bool) -> np.ndarray:
        """mu_s phi_s(b) (or mu_s phi_s(b) / b) column by column, b >= 1."""
        columns = [
            curve.per_job_rate(jobs_in_service[:, j]) if per_job else curve.phi(jobs_in_service[:, j])
            for j, curve in enumerate(self.curves)
        ]
        return self.speed * np.column_stack(columns).reshape(jobs_in_service.shape)

    def new_job_rate(self, queue_len: np.ndarray) -> np.ndarray:
        """mu phi(b') / b' with b' = min(n + 1, c): the rate a job sent there would receive."""
        if np.all(self.concurrency == 1):
            return np.broadcast_to(self.speed, queue_len.shape)
        return self._rate(np.minimum(queue_len + 1, self.concurrency), per_job=True)

    def expected_delay(self, queue_len: np.ndarray) -> np.ndarray:
        """sed's expected delay (n + 1) / (mu phi(min(n + 1, c)))."""
        if np.all(self.concurrency == 1):
            return (queue_len + 1) / self.speed
        return (queue_len + 1) / self._rate(np.minimum(queue_len + 1, self.concurrency), per_job=False)

    @property
    def capacity(self) -> np.ndarray:
        """mu phi(c): the most work per unit time the server does."""
        return self.speed * np.array([curve.at_concurrency(int(c)) for c, curve in zip(self.concurrency, self.curves)])


def _slots(slots, speed) -> Slots:
    return Slots.single(speed) if slots is None else slots


def _uniform_over(mask: np.ndarray) -> np.ndarray:
    """Uniform probabilities over the True entries of each row."""
    return mask / mask.sum(axis=1, keepdims=True)


def _shortest(value: np.ndarray) -> np.ndarray:
    """Mask of the row-wise minima (all tied entries)."""
    return value == value.min(axis=1, keepdims=True)


def _join_shortest(queue_len: np.ndarray) -> np.ndarray:
    """Uniform probabilities over the shortest queues of each row."""
    return _uniform_over(_shortest(queue_len))


def _join_free(free: np.ndarray) -> np.ndarray:
    """Uniform probabilities over the servers with a free slot of each row; a zero row where none."""
    return free / np.maximum(free.sum(axis=1, keepdims=True), 1)


def _join_shortest_if_none_free(queue_len: np.ndarray, free: np.ndarray) -> np.ndarray:
    """Uniform probabilities over the shortest queues of each row; a zero row where a slot is free."""
    return _join_shortest(queue_len) * ~free.any(axis=1, keepdims=True)


def _mean_over_samples(columns: np.ndarray, size: int, rule, shape: tuple) -> np.ndarray:
    """Mean of ``rule`` over the samples of min(size, len(columns)) distinct ``columns``.

    Every such sample is equally likely (uniform sampling without replacement); ``rule`` maps the
    sampled columns (a list) to probabilities over them. Returns zeros when ``columns`` is empty.
    """
    probability = np.zeros(shape)
    if columns.size == 0:
        return probability
    subsets = list(itertools.combinations(columns, min(size, columns.size)))
    for subset in subsets:
        sampled = list(subset)
        probability[:, sampled] += rule(sampled)
    return probability / len(subsets)


def _keep_extreme(mask: np.ndarray, value: np.ndarray, largest: bool) -> np.ndarray:
    """Among the True entries of each row of ``mask``, keep those of largest (or least) ``value``."""
    masked = np.where(mask, value, -np.inf if largest else np.inf)
    extreme = masked.max(axis=1, keepdims=True) if largest else masked.min(axis=1, keepdims=True)
    return mask & (masked == extreme)


def random(queue_len, speed, is_fast, params, idle_rank, slots=None):
    return _uniform_over(np.ones(queue_len.shape, dtype=bool))


def weighted_random(queue_len, speed, is_fast, params, idle_rank, slots=None):
    """Proportional to the capacity mu phi(c), the speed when c = 1."""
    weight = speed if slots is None else slots.capacity
    return np.broadcast_to(weight / weight.sum(), queue_len.shape).copy()


def jsq(queue_len, speed, is_fast, params, idle_rank, slots=None):
    return _join_shortest(queue_len)


def jfsq(queue_len, speed, is_fast, params, idle_rank, slots=None):
    rate = _slots(slots, speed).new_job_rate(queue_len)
    return _uniform_over(_keep_extreme(_shortest(queue_len), rate, largest=True))


def jssq(queue_len, speed, is_fast, params, idle_rank, slots=None):
    rate = _slots(slots, speed).new_job_rate(queue_len)
    return _uniform_over(_keep_extreme(_shortest(queue_len), rate, largest=False))


def _free_first(queue_len, speed, slots, fastest_free: bool, fallback: np.ndarray):
    """A server with a free slot if there is one (the fastest for a new job, or any), otherwise one
    from ``fallback``."""
    slots = _slots(slots, speed)
    free = slots.free(queue_len)
    chosen = _keep_extreme(free, slots.new_job_rate(queue_len), largest=True) if fastest_free else free
    return _uniform_over(np.where(free.any(axis=1, keepdims=True), chosen, fallback))


def jiq(queue_len, speed, is_fast, params, idle_rank, slots=None):
    return _free_first(queue_len, speed, slots, False, np.ones(queue_len.shape, dtype=bool))


def jfiq(queue_len, speed, is_fast, params, idle_rank, slots=None):
    return _free_first(queue_len, speed, slots, True, np.ones(queue_len.shape, dtype=bool))


def jsq_fiq(queue_len, speed, is_fast, params, idle_rank, slots=None):
    return _free_first(queue_len, speed, slots, True, _shortest(queue_len))


def pod(queue_len, speed, is_fast, params, idle_rank, slots=None):
    columns = np.arange(queue_len.shape[1])
    return _mean_over_samples(
        columns, params["d"], lambda sampled: _join_shortest(queue_len[:, sampled]), queue_len.shape
    )


def jsq_df_ds(queue_len, speed, is_fast, params, idle_rank, slots=None):
    """Exact JSQ-(d_F, d_S) probabilities (hetlb.theory.exact's docstring; "idle" is a free slot).

    The fast and slow samples are independent, so with the means over samples of: a free fast
    choice (X), a shortest fast choice when none is free (Z), and likewise for slow (Y, W),
    P = X + P(no fast free) (p_S Y + (1 - p_F) W) + (P(slow free) (1 - p_S) + P(no slow free) p_F) Z.
    """
    free = _slots(slots, speed).free(queue_len)
    shape = queue_len.shape

    def free_choice(sampled):
        return _join_free(free[:, sampled])

    def shortest_choice(sampled):
        return _join_shortest_if_none_free(queue_len[:, sampled], free[:, sampled])

    fast, slow = np.flatnonzero(is_fast), np.flatnonzero(~is_fast)
    fast_free = _mean_over_samples(fast, params["d_fast"], free_choice, shape)
    fast_shortest = _mean_over_samples(fast, params["d_fast"], shortest_choice, shape)
    slow_free = _mean_over_samples(slow, params["d_slow"], free_choice, shape)
    slow_shortest = _mean_over_samples(slow, params["d_slow"], shortest_choice, shape)
    p_slow = 1.0 if fast.size == 0 else params["p_slow"]
    p_fast = 0.0 if fast.size == 0 else 1.0 if slow.size == 0 else params["p_fast"]
    no_fast_free = 1.0 - fast_free.sum(axis=1, keepdims=True)
    some_slow_free = slow_free.sum(axis=1, keepdims=True)
    return (
        fast_free
        + no_fast_free * (p_slow * slow_free + (1.0 - p_fast) * slow_shortest)
        + ((1.0 - p_slow) * some_slow_free + p_fast * (1.0 - some_slow_free)) * fast_shortest
    )


def sed(queue_len, speed, is_fast, params, idle_rank, slots=None):
    return _uniform_over(_shortest(_slots(slots, speed).expected_delay(queue_len)))


def jlu(queue_len, speed, is_fast, params, idle_rank, slots=None):
    """The least utilised: least n / c (jsq when c = 1); refused with unlimited c."""
    return _uniform_over(_shortest(queue_len / _slots(slots, speed).concurrency))


def lew(queue_len, speed, is_fast, params, idle_rank, slots=None):
    """The least expected work: least n / (mu phi(c)), the time to clear the jobs at full capacity."""
    return _uniform_over(_shortest(queue_len / _slots(slots, speed).capacity))


def jsq_lisf(queue_len, speed, is_fast, params, idle_rank, slots=None):
    """The server with a free slot of least ``idle_rank`` (ties at random) if one has a free slot,
    otherwise jsq.

    ``idle_rank`` is each server's position in the order in which the servers last gained a free
    slot (became idle when c = 1); it is ignored for full servers.
    """
    free = _slots(slots, speed).free(queue_len)
    longest_free = _shortest(np.where(free, idle_rank, np.inf))
    return _uniform_over(np.where(free.any(axis=1, keepdims=True), longest_free, _shortest(queue_len)))


def below_average(queue_len, speed, is_fast, params, idle_rank, slots=None):
    """l-jba on exact values: the servers strictly below the plain mean, by speed; if none, by speed
    over all (its default options; 001 section 5)."""
    below = queue_len < queue_len.mean(axis=1, keepdims=True)
    weight = np.where(below.any(axis=1, keepdims=True), below * speed, speed)
    return weight / weight.sum(axis=1, keepdims=True)
