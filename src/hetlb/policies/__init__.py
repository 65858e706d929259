"""Routing policies: the registry of named policies and their @njit decision rules."""

from hetlb.policies.registry import POLICIES, Policy, PolicySpec, make_policy

__all__ = ["POLICIES", "Policy", "PolicySpec", "make_policy"]
