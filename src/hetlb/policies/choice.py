"""One decision on a dispatcher's view of the queues: the rule of every policy that can decide on
estimates, for the dispatchers that hold estimates rather than the truth.

:func:`choose_server` is what ``hetlb serve`` and the many-dispatcher continuous model call per
request: given the servers a job type may use (``candidates[lo:hi]``, as in the compatibility
graph's CSR arrays) and the dispatcher's number-in-system estimate of each server, it applies the
registered rule of hetlb.policies.rules (selection keys, least-key scan, power-of-d, speed-weighted
draw) or hetlb.policies.local_estimates (l-jba). It carries no rule of its own: the single-
dispatcher kernels call the same functions inline.
"""

import numpy as np

from hetlb.jit import njit
from hetlb.policies import rules
from hetlb.policies.local_estimates import below_average_server
from hetlb.policies.registry import (
    BY_CODE,
    JBA_AVERAGES,
    JBA_EMPTY_SET,
    L_JBA,
    L_JSQ,
    L_POD,
    POD,
    POLICIES,
    RANDOM,
    WEIGHTED_RANDOM,
    policies_where,
)

ON_ESTIMATES = tuple(POLICIES[policy_id].code for policy_id in policies_where(decides_on_estimates=True))
"""The kernel codes of the policies that decide on estimates (PolicySpec.decides_on_estimates),
which :func:`choose_server` decides (:func:`decides`)."""

JBA_FALLBACK_WEIGHTED, JBA_FALLBACK_LEAST = (JBA_EMPTY_SET.index(BY_CODE[code].id) for code in (WEIGHTED_RANDOM, L_JSQ))
"""What l-jba does when no estimate is below the mean (its ``empty_set``, by position in
JBA_EMPTY_SET): weighted-random or l-jsq."""

KEY_CODE = np.arange(max(BY_CODE) + 1, dtype=np.int64)
"""The code whose selection key each code ranks by: its own, or an LED policy's alias's (l-jsq
ranks as jsq; PolicySpec.led_alias), and l-jba's as l-jsq, its empty-set choice."""
for _spec in POLICIES.values():
    if _spec.led_alias is not None:
        KEY_CODE[_spec.code] = POLICIES[_spec.led_alias].code
KEY_CODE[L_JBA] = KEY_CODE[L_JSQ]

BRANCHES = (RANDOM, WEIGHTED_RANDOM, POD, L_POD, L_JBA)
"""The codes :func:`choose_server` has a branch of its own for; it ranks every other one by the
selection key KEY_CODE names."""


def decides(code: int) -> bool:
    """Whether choose_server has a rule for ``code``: a branch, or a key of
    hetlb.policies.rules.selection_key (hetlb refuses any other code before a kernel runs)."""
    return code in BRANCHES or (0 <= code < len(KEY_CODE) and int(KEY_CODE[code]) in rules.KEYED_CODES)


def jba_options(params: dict) -> tuple[bool, bool, int]:
    """choose_server's ``jba_rate_weighted``, ``jba_inclusive`` and ``jba_fallback`` from a
    policy's parameters (l-jba's ``average``, ``inclusive`` and ``empty_set``; their defaults for
    every other policy). The one reading of l-jba's options: the slotted model takes them too."""
    return (
        params.get("average") == JBA_AVERAGES[1],
        bool(params.get("inclusive", False)),
        JBA_EMPTY_SET.index(params.get("empty_set", JBA_EMPTY_SET[JBA_FALLBACK_WEIGHTED])),
    )


@njit
def choose_server(
    code,
    candidates,
    lo,
    hi,
    estimate,
    speed_class,
    n_classes,
    speed,
    cumulative_speed,
    idle_since,
    d,
    jba_rate_weighted,
    jba_inclusive,
    jba_fallback,
    keys,
    ties,
    sample,
    rng,
):
    """The server of ``candidates[lo:hi]`` that policy ``code`` sends a job to, on ``estimate``.

    ``estimate[s]``: the number in system the dispatcher believes server s holds (its queue length
    counting the job in service; Q~^m_n of 001); ``speed_class[s]`` (0 = fastest of ``n_classes``),
    ``speed[s]`` (mu_s); ``cumulative_speed[lo:hi]``: the running sum of the candidates' speeds
    (weighted-random and l-jba's fallback); ``idle_since[s]``: when server s became idle (jsq-lisf);
    ``d``: the sample size of pod and l-pod. ``keys`` (indexed by server), ``ties`` and ``sample``
    (at least hi - lo entries) are scratch. Ranking policies (jsq ... sed) and l-jsq take a least
    selection key of hetlb.policies.rules.selection_key, ties uniformly at random; jiq and jfiq
    with no idle candidate fall back to a uniform candidate.
    """
    if code == RANDOM:
        return candidates[lo + rules.uniform_index(rng, hi - lo)]
    if code == WEIGHTED_RANDOM:
        return rules.speed_weighted_server(candidates, lo, hi, cumulative_speed, rng)
    if code == POD or code == L_POD:
        return rules.power_of_d_server(candidates, lo, hi, d, estimate, sample, rng)
    if code == L_JBA:
        s = below_average_server(candidates, lo, hi, estimate, speed, jba_rate_weighted, jba_inclusive, rng)
        if s >= 0:
            return s
        if jba_fallback == JBA_FALLBACK_WEIGHTED:
            return rules.speed_weighted_server(candidates, lo, hi, cumulative_speed, rng)
    key_code = KEY_CODE[code]
    for i in range(lo, hi):
        s = candidates[i]
        keys[s] = rules.selection_key(key_code, estimate[s], speed_class[s], n_classes, speed[s], idle_since[s])
    s, least = rules.least_key_server(candidates, lo, hi, keys, ties, rng)
    if rules.falls_back_to_uniform(key_code, least, n_classes):
        return candidates[lo + rules.uniform_index(rng, hi - lo)]
    return s
