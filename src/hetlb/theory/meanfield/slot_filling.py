"""Ranking policies on servers that serve several jobs at once: the levels of every class filled in
increasing key up to a threshold (docs/background/mean-field.md, "Servers with several slots").

A ranking policy sends each job to a server of least key, ties at random. Here the key of a class-m
server holding n jobs, k_m(n), is the policy's own (docs/reference/policies.md; rules.slot_selection_key
orders servers alike): with r_m(n) = mu_m phi_m(b') / b', b' = min(n + 1, c_m), the rate a new job
would receive there,

    jsq n;  jfsq n + 1 / (2 + r_m(n));  jssq n + 1/2 - 1 / (2 + r_m(n));
    jiq 0 with a free slot (n < c_m), else 1;  jfiq 1 / (2 + r_m(n)) with a free slot, else 1;
    jsq-fiq 1 / (2 + r_m(n)) - 1 with a free slot, else n;  sed (n + 1) / (mu_m phi_m(b')).

Every k_m is non-decreasing in n. As N -> infinity the arrivals (N lambda per unit time) fill every
level whose key is below a threshold theta at once, never use a level above it, and share the levels
at theta, R per server per unit time: a class-m server moves between f_m (its first level of key
>= theta) and t_m (its first of key > theta) as a birth-death chain with birth R below t_m and death
mu_m phi_m(min(n, c_m)); a full server (n = b) tied at theta loses the R sent to it. theta is the
least key at which the classes' chains can absorb lambda, and R solves absorbed(R) = lambda.
"""

from __future__ import annotations

import numpy as np

from hetlb.errors import InputError
from hetlb.theory.meanfield.classes import ServerClasses

KEY_TOLERANCE = 1e-12
"""Keys within this relative distance (absolute below 1) are equal: a tie."""
FIRST_LEVELS = 64
MAX_LEVELS = 1 << 17
"""The most levels a class's chain may need (sed holds about mu_max phi(c) / (mu_min phi(1))
jobs per fastest server)."""


SLOT_POLICIES = ("jsq", "jfsq", "jssq", "jiq", "jfiq", "jsq-fiq", "sed")
"""The ranking policies :func:`slot_keys` defines."""


def new_job_rate(classes: ServerClasses, levels: int) -> np.ndarray:
    """r_m(n) = mu_m phi_m(b') / b', b' = min(n + 1, c_m): the rate a job sent to a class-m server
    holding n = 0..levels-1 jobs would receive, shape (M, levels)."""
    slots = np.minimum(np.arange(1, levels + 1)[None, :], classes.concurrency[:, None])
    return classes.death_rate(levels) / slots


def slot_keys(policy: str, classes: ServerClasses, levels: int) -> np.ndarray:
    """k_m(n) of ``policy`` (one of SLOT_POLICIES) for n = 0..levels-1, shape (M, levels) (the
    module's docstring)."""
    n = np.arange(levels, dtype=float)[None, :]
    free = n < classes.concurrency[:, None]
    rate = new_job_rate(classes, levels)
    faster_first = 1.0 / (2.0 + rate)
    if policy == "jsq":
        return np.broadcast_to(n, rate.shape).copy()
    if policy == "jfsq":
        return n + faster_first
    if policy == "jssq":
        return n + 0.5 - faster_first
    if policy == "jiq":
        return np.where(free, 0.0, 1.0)
    if policy == "jfiq":
        return np.where(free, faster_first, 1.0)
    if policy == "jsq-fiq":
        return np.where(free, faster_first - 1.0, n)
    return (n + 1.0) / classes.death_rate(levels)  # sed


def check_slot_policy(policy: str, classes: ServerClasses) -> None:
    """Refuse, in one line, a ranking policy whose limit is not derived here for these classes."""
    if policy not in SLOT_POLICIES:
        why = (
            "its order among free slots is the time since they last had none, which the queue lengths do not carry"
            if policy == "jsq-lisf"
            else "its key on such servers is not derived here"
        )
        raise InputError(
            "policy",
            f"{policy} has no mean-field limit on servers that serve several jobs at once ({why}); "
            f"the ranking policies with one are {', '.join(SLOT_POLICIES)}",
        )
    if policy == "jiq" and np.any(classes.unlimited):
        raise InputError(
            "concurrency", "jiq with unlimited concurrency always finds a free slot: it is random (use that policy)"
        )


def slot_filling_occupancy(policy: str, classes: ServerClasses, arrival_rate: float, buffer) -> np.ndarray:
    """s_{m,i} at the fixed point of ``policy`` on ``classes`` (the module's docstring). Levels are
    computed in doubling numbers until theta's chains stay below the truncation."""
    check_slot_policy(policy, classes)
    levels = FIRST_LEVELS
    while True:
        count = buffer + 1 if buffer is not None else levels
        keys = slot_keys(policy, classes, count)
        death = np.concatenate([np.zeros((classes.size, 1)), classes.death_rate(count)], axis=1)
        found = threshold(keys, death, classes.fraction, arrival_rate, buffer)
        if found is not None:
            return chains_at(found, keys, death, classes.fraction, arrival_rate, buffer)
        if 2 * levels > MAX_LEVELS:
            raise InputError(
                "speeds",
                f"{policy}'s fixed point needs more than {MAX_LEVELS} jobs per server; the classes differ too much",
            )
        levels *= 2


def threshold(keys, death, fraction, arrival_rate, buffer) -> float | None:
    """theta: the least key t such that the chains pushed through every level of key <= t absorb
    more than lambda (sum_m alpha_m mu_m phi_m(min(t_m, c_m)) > lambda), or a full server's key
    (its arrivals are lost). None when the levels computed do not reach it (infinite buffers)."""
    join = keys if buffer is None else keys[:, :-1]  # the keys of joining (n < b); keys[:, b] is a full server's
    candidates = np.unique(join if buffer is None else keys)
    margin = KEY_TOLERANCE * np.maximum(1.0, np.abs(candidates))
    top = np.array([np.searchsorted(row, candidates + margin, side="right") for row in join])  # (M, C)
    if buffer is None:
        inside = np.all(top < join.shape[1], axis=0)
        sink = np.zeros(candidates.size, dtype=bool)
    else:
        inside = np.ones(candidates.size, dtype=bool)
        sink = np.any(keys[:, -1:] <= (candidates + margin)[None, :], axis=0)
    absorbed = np.sum(fraction[:, None] * np.take_along_axis(death, top, axis=1), axis=0)
    reached = np.flatnonzero(inside & (sink | (absorbed > arrival_rate)))
    # the first candidate whose chains reach the truncation ends the search: later ones do too
    beyond = np.flatnonzero(~inside)
    if reached.size and (not beyond.size or reached[0] < beyond[0]):
        return float(candidates[reached[0]])
    return None


def chains_at(theta: float, keys, death, fraction, arrival_rate, buffer) -> np.ndarray:
    """s_{m,i} of the classes' chains at threshold ``theta``, with R solving absorbed(R) = lambda."""
    from scipy import optimize  # here: the sampling policies need no SciPy

    margin = KEY_TOLERANCE * max(1.0, abs(theta))
    join = keys if buffer is None else keys[:, :-1]
    first = np.array([np.searchsorted(row, theta - margin, side="left") for row in join])
    top = np.array([np.searchsorted(row, theta + margin, side="right") for row in join])
    sink = np.zeros(fraction.size, dtype=bool)
    if buffer is not None:
        sink = (top == buffer) & (keys[:, -1] <= theta + margin)

    def distributions(rate: float) -> list:
        """pi_m on levels first_m..top_m: birth ``rate`` below top_m, death mu_m phi_m(min(n, c_m))."""
        out = []
        for m in range(fraction.size):
            levels = death[m, first[m] + 1 : top[m] + 1]
            with np.errstate(divide="ignore"):
                log_p = np.concatenate([[0.0], np.cumsum(np.log(rate) - np.log(levels))])
            p = np.exp(log_p - log_p.max())
            out.append(p / p.sum())
        return out

    def excess(rate: float) -> float:
        absorbed = 0.0
        for m, p in enumerate(distributions(rate)):
            served = float(np.dot(p, death[m, first[m] : top[m] + 1]))
            absorbed += fraction[m] * (served + (rate * p[-1] if sink[m] else 0.0))
        return absorbed - arrival_rate

    if excess(0.0) >= 0.0:
        rate = 0.0
    else:
        high = float(np.max(death, initial=1.0))
        while excess(high) < 0.0:
            high *= 2.0
        rate = float(optimize.brentq(excess, 0.0, high, xtol=1e-15, rtol=4 * np.finfo(float).eps))
    levels = int(max(1, np.max(top)))
    occupancy = np.zeros((fraction.size, levels))
    for m, p in enumerate(distributions(rate)):
        occupancy[m, : first[m]] = 1.0
        tail = np.cumsum(p[::-1])[::-1]  # P(N >= n) for n = first_m..top_m
        occupancy[m, first[m] : top[m]] = tail[1:]
    return occupancy
