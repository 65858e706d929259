"""hetlb: load balancing in large heterogeneous server systems.

Simulate, analyse and compare policies that route jobs to servers of different speeds
(JSQ and its speed-aware variants, JIQ, power-of-d, SED, ...), with job types restricted to
some servers by a compatibility graph, finite buffers, and exact and asymptotic theory to
check them against.
"""

from hetlb.errors import InputError
from hetlb.model import CompatibilityGraph, CountDistribution, JobSizes, SlottedSystem, System, parse_speeds
from hetlb.policies import POLICIES, Policy, make_policy, register_policy
from hetlb.policies.plugins import load_plugins
from hetlb.simulation.bounding import check_sandwich, simulate_bounding_system
from hetlb.simulation.options import RunOptions, SlottedRunOptions
from hetlb.simulation.simulate import simulate
from hetlb.simulation.slotted import simulate_slotted
from hetlb.version import __version__

__all__ = [
    "CompatibilityGraph",
    "CountDistribution",
    "InputError",
    "JobSizes",
    "POLICIES",
    "Policy",
    "RunOptions",
    "SlottedRunOptions",
    "SlottedSystem",
    "System",
    "__version__",
    "check_policy",
    "check_sandwich",
    "fit_rate_curve",
    "load_plugins",
    "make_policy",
    "parse_speeds",
    "register_policy",
    "simulate",
    "simulate_bounding_system",
    "simulate_slotted",
]


def __dir__() -> list:
    """Every public name, the ones loaded on first use too (for tab completion)."""
    return sorted(set(globals()) | set(__all__))


def __getattr__(name):
    # loaded when first asked for: the conformance check imports the exact solver and scipy.stats,
    # the rate-curve fit scipy.optimize
    if name == "check_policy":
        from hetlb.conformance import check_policy

        return check_policy
    if name == "fit_rate_curve":
        from hetlb.model.rate_curve_fit import fit_rate_curve

        return fit_rate_curve
    raise AttributeError(f"module 'hetlb' has no attribute {name!r}")
