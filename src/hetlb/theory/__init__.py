"""Independent checks on the simulator: closed forms, the speed lower bound and exact small systems.

Plain NumPy/SciPy; nothing here depends on the simulation kernels.
"""

from hetlb.theory.bounds import SpeedLowerBound, speed_lower_bound
from hetlb.theory.exact import (
    EXACT_POLICIES,
    MAX_STATES,
    ExactSolution,
    routing_probabilities,
    solve_exact,
)
from hetlb.theory.queues import (
    erlang_b,
    erlang_c,
    mm1_mean_number_in_system,
    mm1_mean_response_time,
    mm1_mean_waiting_time,
    mm1_p_wait,
    mm1_response_time_quantile,
    mm1k_blocking_probability,
    mm1k_mean_number_in_system,
    mm1k_mean_response_time,
    mm1k_p_wait,
    mm1k_stationary_distribution,
    mmc_mean_number_in_system,
    mmc_mean_response_time,
    mmc_mean_waiting_time,
    mmc_p_wait,
)

__all__ = [
    "EXACT_POLICIES",
    "MAX_STATES",
    "ExactSolution",
    "SpeedLowerBound",
    "erlang_b",
    "erlang_c",
    "mm1_mean_number_in_system",
    "mm1_mean_response_time",
    "mm1_mean_waiting_time",
    "mm1_p_wait",
    "mm1_response_time_quantile",
    "mm1k_blocking_probability",
    "mm1k_mean_number_in_system",
    "mm1k_mean_response_time",
    "mm1k_p_wait",
    "mm1k_stationary_distribution",
    "mmc_mean_number_in_system",
    "mmc_mean_response_time",
    "mmc_mean_waiting_time",
    "mmc_p_wait",
    "routing_probabilities",
    "solve_exact",
    "speed_lower_bound",
]
