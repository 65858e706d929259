"""LED dispatching on local estimates (001 sections 3 and 5; docs/reference/slotted.md): the rules.

Dispatcher m decides on its own estimates Q~^m_n of the queue lengths (``estimate``) and the known
speeds mu_n; messages are exchanged only by the update strategy, after the decision. ``l-pod``
uses hetlb.policies.rules.power_of_d_server on the estimates; ``l-jsq`` (and ``jsq`` of the slotted
model) :func:`least_value_server`; ``l-jba`` :func:`below_average_server`.
"""

from hetlb.jit import njit


@njit
def is_below(scaled_estimate, total, inclusive):
    return scaled_estimate <= total if inclusive else scaled_estimate < total


@njit
def below_average_server(candidates, lo, hi, estimate, speed, rate_weighted, inclusive, rng):
    """l-jba over the servers ``candidates[lo:hi]``: one of B = {s : estimate[s] < average} with
    probability speed[s] / sum_{k in B} speed[k] (one uniform draw); -1 when B is empty.

    average: the plain mean of the candidates' estimates, or with ``rate_weighted`` the mean
    sum_s speed[s] estimate[s] / sum_s speed[s]; ``inclusive``: "<=" instead of "<". The comparison
    is made as scale * estimate[s] < sum (scale = the count or the sum of speeds), exact for the
    plain mean.
    """
    total = 0.0
    scale = 0.0
    for i in range(lo, hi):
        s = candidates[i]
        weight = speed[s] if rate_weighted else 1.0
        total += weight * estimate[s]
        scale += weight
    below_weight = 0.0
    for i in range(lo, hi):
        s = candidates[i]
        if is_below(scale * estimate[s], total, inclusive):
            below_weight += speed[s]
    if below_weight == 0.0:
        return -1
    u = rng.random() * below_weight
    chosen = -1
    for i in range(lo, hi):
        s = candidates[i]
        if is_below(scale * estimate[s], total, inclusive):
            chosen = s
            u -= speed[s]
            if u < 0.0:
                break
    return chosen


@njit
def least_value_server(values, u):
    """A server with the least ``values[n]``; among k ties the one of rank floor(u k) in index order,
    so a uniform ``u`` on [0, 1) picks uniformly (two scans and one draw, however many servers
    tie: stale estimates tie often)."""
    least = values[0]
    ties = 0
    for n in range(len(values)):
        if values[n] < least:
            least = values[n]
            ties = 1
        elif values[n] == least:
            ties += 1
    k = min(int(u * ties), ties - 1)
    for n in range(len(values)):
        if values[n] == least:
            if k == 0:
                return n
            k -= 1
    return -1
