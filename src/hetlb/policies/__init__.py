"""Routing policies: the registry of named policies and their @njit decision rules."""

from hetlb.policies.registry import (
    POLICIES,
    MeanFieldRule,
    Policy,
    PolicySpec,
    make_policy,
    register_policy,
    unregister_policy,
)

__all__ = ["POLICIES", "MeanFieldRule", "Policy", "PolicySpec", "make_policy", "register_policy", "unregister_policy"]
