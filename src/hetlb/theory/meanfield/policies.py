"""The policies with a mean-field limit here: the registry's mean-field rules, the policy that exists
only in the theory (jiq-df-ds), and their parameters."""

from __future__ import annotations

from hetlb import validation
from hetlb.errors import InputError
from hetlb.policies.registry import BY_CODE, COUNT, JSQ_DF_DS, POLICIES, MeanFieldRule

THEORY_ONLY = {
    "jiq-df-ds": (
        MeanFieldRule(
            "fast-slow-idle",
            "JIQ(d_F, d_S) of Gardner et al.: as jsq-df-ds, but a busy sampled server chosen at random",
        ),
        BY_CODE[JSQ_DF_DS].id,
    )
}
"""Policies that exist only in the theory: id -> (its mean-field rule, the registered policy whose
parameters it takes)."""


def mean_field_rules() -> dict[str, MeanFieldRule]:
    """Every policy with a mean-field limit here, the ranking ones first: id -> its rule
    (PolicySpec.mean_field, and THEORY_ONLY's)."""
    rules = {spec.id: spec.mean_field for spec in POLICIES.values() if spec.mean_field is not None}
    rules.update((name, rule) for name, (rule, _) in THEORY_ONLY.items())
    return dict(sorted(rules.items(), key=lambda item: not item[1].ranking))


MEANFIELD_POLICIES = tuple(mean_field_rules())
"""Policies with a mean-field limit here, the ranking ones first: the registry's (PolicySpec.mean_field)
and ``jiq-df-ds``, which exists only in the theory."""


def sampling_policies() -> tuple[str, ...]:
    """The sampling policies, whose ODE :func:`mean_field_trajectory` integrates (read anew)."""
    return tuple(name for name, rule in mean_field_rules().items() if not rule.ranking)


SAMPLING = sampling_policies()
"""The sampling policies among them at import (:func:`sampling_policies`)."""
INDEPENDENT_RULES = ("uniform", "speed-weighted")
"""The rules blind to the queues: each server an M/M/1 (M/M/1/b) queue, in closed form."""


def policy_parameters(policy: str, params: dict) -> dict:
    """The policy's parameters (its registry entry's, at their defaults unless given): a count is
    an integer in 1..64 here (the solver enumerates samples), a probability one in [0, 1]."""
    registered = THEORY_ONLY[policy][1] if policy in THEORY_ONLY else policy
    kinds = {name: kind for name, (_, _, kind) in POLICIES[registered].parameters.items()}
    unknown = sorted(set(params) - set(kinds))
    if unknown:
        rule = f"takes {', '.join(sorted(kinds))}" if kinds else "takes no parameters"
        raise InputError(unknown[0], f"is not a parameter of {policy}, which {rule}")
    out: dict = POLICIES[registered].defaults()
    for name, value in params.items():
        if value is None:
            continue
        if kinds[name] == COUNT:
            out[name] = validation.integer(name, value, low=1, high=64)
        else:
            out[name] = validation.probability(name, value)
    return out
