"""Independent checks on the simulator: closed forms, the speed lower bound, exact small systems,
the many-server (mean-field) limits, the Halfin-Whitt diffusion limits of paper 002, the hit
ratios of an LRU (prefix) cache, and exact small systems of servers with prefix caches.

Plain NumPy/SciPy; nothing here depends on the simulation kernels. The names below are imported
from their modules on first use, so that one of them (``hetlb meanfield``) does not pay for the
SciPy modules of the others.
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hetlb.theory.bounds import (
        CacheCapacity,
        SpeedLowerBound,
        cache_capacity,
        speed_lower_bound,
        speed_lower_bound_arrays,
    )
    from hetlb.theory.cache_routing import EXACT_CACHE_POLICIES, cache_routing_probabilities
    from hetlb.theory.diffusion import (
        DIFFUSION_POLICIES,
        DiffusionLimit,
        DiffusionPaths,
        DiffusionStationary,
        ReflectedOUStationary,
        SpeedLaw,
        continuous_speeds,
        default_step,
        diffusion_paths,
        diffusion_relaxation_time,
        policy_diffusion,
        reflected_ou_stationary,
        speed_pools,
        stationary_diffusion,
        stationary_mean_x1,
    )
    from hetlb.theory.dispatchers_exact import DispatcherSolution, solve_dispatchers_exact
    from hetlb.theory.exact import (
        EXACT_POLICIES,
        MAX_STATES,
        ExactSolution,
        routing_probabilities,
        solve_exact,
        solve_exact_arrays,
    )
    from hetlb.theory.exact_cache import MAX_CACHE_STATES, ExactCacheSolution, solve_exact_cache
    from hetlb.theory.lru import LRU_METHODS, MAX_LRU_EXACT_STEPS, LruHitRatio, lru_hit_ratio, zipf_popularity
    from hetlb.theory.meanfield import (
        MEANFIELD_POLICIES,
        MeanFieldLimit,
        MeanFieldTrajectory,
        mean_field,
        mean_field_arrays,
        mean_field_settling_time,
        mean_field_trajectory,
        mean_field_trajectory_arrays,
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
        mxm1_mean_number_in_system,
        mxm1_mean_response_time,
    )

EXPORTS = {
    "bounds": (
        "CacheCapacity",
        "SpeedLowerBound",
        "cache_capacity",
        "speed_lower_bound",
        "speed_lower_bound_arrays",
    ),
    "diffusion": (
        "DIFFUSION_POLICIES",
        "DiffusionLimit",
        "DiffusionPaths",
        "DiffusionStationary",
        "ReflectedOUStationary",
        "SpeedLaw",
        "continuous_speeds",
        "default_step",
        "diffusion_paths",
        "diffusion_relaxation_time",
        "policy_diffusion",
        "reflected_ou_stationary",
        "speed_pools",
        "stationary_diffusion",
        "stationary_mean_x1",
    ),
    "cache_routing": (
        "EXACT_CACHE_POLICIES",
        "cache_routing_probabilities",
    ),
    "dispatchers_exact": (
        "DispatcherSolution",
        "solve_dispatchers_exact",
    ),
    "exact": (
        "EXACT_POLICIES",
        "MAX_STATES",
        "ExactSolution",
        "routing_probabilities",
        "solve_exact",
        "solve_exact_arrays",
    ),
    "exact_cache": (
        "MAX_CACHE_STATES",
        "ExactCacheSolution",
        "solve_exact_cache",
    ),
    "lru": (
        "LRU_METHODS",
        "MAX_LRU_EXACT_STEPS",
        "LruHitRatio",
        "lru_hit_ratio",
        "zipf_popularity",
    ),
    "meanfield": (
        "MEANFIELD_POLICIES",
        "MeanFieldLimit",
        "MeanFieldTrajectory",
        "mean_field",
        "mean_field_arrays",
        "mean_field_settling_time",
        "mean_field_trajectory",
        "mean_field_trajectory_arrays",
    ),
    "queues": (
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
        "mxm1_mean_number_in_system",
        "mxm1_mean_response_time",
    ),
}
"""The public names of hetlb.theory, by the module that defines them."""
HOME = {name: module for module, names in EXPORTS.items() for name in names}

__all__ = [
    "CacheCapacity",
    "DIFFUSION_POLICIES",
    "DiffusionLimit",
    "DiffusionPaths",
    "DiffusionStationary",
    "EXACT_CACHE_POLICIES",
    "EXACT_POLICIES",
    "LRU_METHODS",
    "LruHitRatio",
    "MAX_CACHE_STATES",
    "MAX_LRU_EXACT_STEPS",
    "MAX_STATES",
    "MEANFIELD_POLICIES",
    "MeanFieldLimit",
    "MeanFieldTrajectory",
    "ReflectedOUStationary",
    "SpeedLaw",
    "DispatcherSolution",
    "ExactCacheSolution",
    "ExactSolution",
    "SpeedLowerBound",
    "cache_capacity",
    "continuous_speeds",
    "default_step",
    "diffusion_paths",
    "diffusion_relaxation_time",
    "erlang_b",
    "mean_field",
    "mean_field_arrays",
    "mean_field_settling_time",
    "mean_field_trajectory",
    "mean_field_trajectory_arrays",
    "erlang_c",
    "cache_routing_probabilities",
    "lru_hit_ratio",
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
    "mxm1_mean_number_in_system",
    "mxm1_mean_response_time",
    "policy_diffusion",
    "reflected_ou_stationary",
    "routing_probabilities",
    "solve_dispatchers_exact",
    "solve_exact",
    "solve_exact_arrays",
    "solve_exact_cache",
    "speed_lower_bound",
    "speed_lower_bound_arrays",
    "speed_pools",
    "stationary_diffusion",
    "stationary_mean_x1",
    "zipf_popularity",
]


def __dir__() -> list:
    """Every public name, the ones loaded on first use too (for tab completion)."""
    return sorted(set(globals()) | set(__all__))


def __getattr__(name: str) -> Any:
    if name not in HOME:
        raise AttributeError(f"module 'hetlb.theory' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"hetlb.theory.{HOME[name]}"), name)
    globals()[name] = value
    return value
