"""The speed lower bound of Proposition 1 in paper 000 (Weng, Zhou, Srikant).

With infinite buffers, under any stable policy, the mean response time is at least C*/lambda:
the mean service time obtained by filling the fastest servers first (000 section 4;
docs/reference/model.md).
"""

from dataclasses import dataclass

import numpy as np

from hetlb import validation
from hetlb.errors import InputError
from hetlb.model.system import RATE_RULE

__all__ = ["SpeedLowerBound", "speed_lower_bound"]


@dataclass(frozen=True, eq=False)
class SpeedLowerBound:
    """K, C* and the lower bound C*/lambda of Proposition 1 (000).

    ``K`` is the number of server types needed to carry the load (1-based, as in 000);
    ``type_speeds`` are the distinct rates mu_1 > mu_2 > ... > mu_M (jobs per unit time);
    ``type_fractions`` are alpha_m = N_m / N; ``c_star_by_type`` are C*_m, the fraction of all
    servers that are busy servers of type m; ``c_star`` is C* = sum_m C*_m;
    ``arrival_rate_per_server`` is lambda = lambda_Sigma / N; ``lower_bound`` is C*/lambda, a
    lower bound on the mean response time (time units); ``load`` is lambda_Sigma / sum_r mu_r.
    """

    K: int
    c_star: float
    c_star_by_type: np.ndarray
    type_speeds: np.ndarray
    type_fractions: np.ndarray
    arrival_rate_per_server: float
    lower_bound: float
    load: float


def speed_lower_bound(speed, total_arrival_rate) -> SpeedLowerBound:
    """Proposition 1 of 000 for servers with rates ``speed`` and total arrival rate lambda_Sigma.

    ``speed[s]`` is the service rate of server s (mu_{t_s} in 000); servers of equal speed form
    one type. Requires lambda_Sigma < sum_s speed[s].
    """
    speed = validation.positive_finite_array("speed", speed, validation.RATE_RANGE, RATE_RULE)
    if not validation.is_real(total_arrival_rate):
        raise InputError("total_arrival_rate", "must be a positive finite rate (jobs per unit time)")
    total_arrival_rate = float(
        validation.positive_finite_array("total_arrival_rate", total_arrival_rate, validation.RATE_RANGE, RATE_RULE)[0]
    )
    capacity = float(speed.sum())
    if total_arrival_rate >= capacity:
        raise InputError(
            "total_arrival_rate",
            f"must be below the total capacity sum(speed) = {capacity:.6g}, "
            f"got {total_arrival_rate:.6g} (load {total_arrival_rate / capacity:.6g})",
        )

    n_servers = speed.size
    ascending_speeds, counts = np.unique(speed, return_counts=True)
    type_speeds = ascending_speeds[::-1]
    type_fractions = counts[::-1] / n_servers
    arrival_rate_per_server = total_arrival_rate / n_servers

    # capacity_up_to[k] = sum_{m <= k} mu_m alpha_m; K is the first k where it exceeds lambda.
    capacity_up_to = np.cumsum(type_speeds * type_fractions)
    last = min(int(np.searchsorted(capacity_up_to, arrival_rate_per_server, side="right")), type_speeds.size - 1)
    c_star_by_type = np.zeros(type_speeds.size)
    c_star_by_type[:last] = type_fractions[:last]
    carried_by_faster = capacity_up_to[last - 1] if last > 0 else 0.0
    c_star_by_type[last] = (arrival_rate_per_server - carried_by_faster) / type_speeds[last]
    c_star = float(c_star_by_type.sum())

    for array in (c_star_by_type, type_speeds, type_fractions):
        array.setflags(write=False)
    return SpeedLowerBound(
        K=last + 1,
        c_star=c_star,
        c_star_by_type=c_star_by_type,
        type_speeds=type_speeds,
        type_fractions=type_fractions,
        arrival_rate_per_server=arrival_rate_per_server,
        lower_bound=c_star / arrival_rate_per_server,
        load=total_arrival_rate / capacity,
    )
