"""One decision on a dispatcher's view of the queues: the rule of every policy that can decide on
estimates, for the dispatchers that hold estimates rather than the truth.

:func:`choose_server` is what ``hetlb serve`` and the many-dispatcher continuous model call per
request: given the servers a job type may use (``candidates[lo:hi]``, as in the compatibility
graph's CSR arrays) and the dispatcher's number-in-system estimate of each server, it applies the
registered rule of hetlb.policies.rules (selection keys, least-key scan, power-of-d, speed-weighted
draw) or hetlb.policies.local_estimates (l-jba). It carries no rule of its own: the single-
dispatcher kernels call the same functions inline.
"""

from hetlb.jit import njit
from hetlb.policies import rules
from hetlb.policies.local_estimates import below_average_server
from hetlb.policies.registry import (
    JFIQ,
    JFSQ,
    JIQ,
    JSQ,
    JSQ_FIQ,
    JSQ_LISF,
    JSSQ,
    L_JBA,
    L_JSQ,
    L_POD,
    POD,
    RANDOM,
    SED,
    WEIGHTED_RANDOM,
)

ON_ESTIMATES = (RANDOM, WEIGHTED_RANDOM, JSQ, JFSQ, JSSQ, JIQ, JFIQ, JSQ_FIQ, JSQ_LISF, POD, SED, L_JSQ, L_JBA, L_POD)
"""The kernel codes :func:`choose_server` decides (the registry's ``decides_on_estimates``)."""

JBA_FALLBACK_WEIGHTED = 0
JBA_FALLBACK_LEAST = 1
"""What l-jba does when no estimate is below the mean: weighted-random or l-jsq."""


def jba_options(params: dict) -> tuple[bool, bool, int]:
    """choose_server's ``jba_rate_weighted``, ``jba_inclusive`` and ``jba_fallback`` from a
    policy's parameters (l-jba's ``average``, ``inclusive`` and ``empty_set``; their defaults for
    every other policy)."""
    return (
        params.get("average") == "rate-weighted",
        bool(params.get("inclusive", False)),
        JBA_FALLBACK_LEAST if params.get("empty_set") == "l-jsq" else JBA_FALLBACK_WEIGHTED,
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
    key_code = JSQ if code == L_JSQ or code == L_JBA else code
    for i in range(lo, hi):
        s = candidates[i]
        keys[s] = rules.selection_key(key_code, estimate[s], speed_class[s], n_classes, speed[s], idle_since[s])
    s, least = rules.least_key_server(candidates, lo, hi, keys, ties, rng)
    if rules.falls_back_to_uniform(key_code, least, n_classes):
        return candidates[lo + rules.uniform_index(rng, hi - lo)]
    return s
