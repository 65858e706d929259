"""Named routing policies: each id maps to an integer code, its parameters and its definition.

Policies are data (docs/background/design.md): the kernel branches on ``Policy.code``; the
decision rules themselves are the @njit functions of :mod:`hetlb.policies.rules`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hetlb.errors import InputError
from hetlb.policies import local_estimates, rules


@dataclass(frozen=True)
class PolicySpec:
    """A registered policy: id, kernel code, definition and its source."""

    id: str
    code: int
    definition: str
    reference: str
    parameters: dict = field(default_factory=dict)  # name -> (default, description, kind: COUNT or PROBABILITY)
    ranks_whole_set: bool = False  # chooses by a key over every compatible server
    models: tuple = ("continuous",)  # where it runs: "continuous" (hetlb.simulate), "slotted" (hetlb.simulate_slotted)


@dataclass(frozen=True)
class Policy:
    """A policy with its parameter values, e.g. ``Policy("pod", {"d": 2})``."""

    id: str
    params: dict = field(default_factory=dict)

    @property
    def spec(self) -> PolicySpec:
        return POLICIES[self.id]

    @property
    def code(self) -> int:
        return self.spec.code

    def describe(self) -> dict:
        return {"id": self.id, **self.params}


COUNT = "an integer >= 1"
PROBABILITY = "a number in [0, 1]"
POSITIVE_PROBABILITY = "a number in (0, 1]"
FLAG = "true or false"
"""Kinds of parameter values; a tuple of strings is a choice among them."""


def valid_parameter(kind, value) -> bool:
    if isinstance(kind, tuple):
        return value in kind
    if kind == FLAG:
        return isinstance(value, bool)
    if kind == COUNT:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 1
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return number and (0.0 < value <= 1.0 if kind == POSITIVE_PROBABILITY else 0.0 <= value <= 1.0)


def describe_kind(kind) -> str:
    return f"one of {', '.join(kind)}" if isinstance(kind, tuple) else kind


BOTH_MODELS = ("continuous", "slotted")

LED_UPDATE_PARAMETERS = {
    "update": (
        "push",
        "push: the dispatcher probes push_d sampled servers; pull: servers report to a random dispatcher",
        local_estimates.UPDATES,
    ),
    "p_hat": (1.0, "probability of an update at each trigger", POSITIVE_PROBABILITY),
    "push_d": (2, "servers a push samples, without replacement", COUNT),
    "push_trigger": (
        "arrival",
        "push after each slot with >= 1 arrival at the dispatcher, or every slot",
        local_estimates.PUSH_TRIGGERS,
    ),
    "pull_trigger": (
        "departure-slot",
        "pull after each slot with >= 1 departure at the server, after each departure, or every slot",
        local_estimates.PULL_TRIGGERS,
    ),
    "increment_on_dispatch": (False, "add the jobs a dispatcher sends to its own estimate (an LSQ variant)", FLAG),
}
"""Parameters shared by the LED policies: the update strategy of 001 section 5 (docs/reference/slotted.md)."""

POLICIES: dict[str, PolicySpec] = {
    spec.id: spec
    for spec in [
        PolicySpec(
            "random",
            rules.RANDOM,
            "a compatible server chosen uniformly at random",
            "baseline; 001 section 5",
            models=BOTH_MODELS,
        ),
        PolicySpec(
            "weighted-random",
            rules.WEIGHTED_RANDOM,
            "a compatible server chosen with probability proportional to its speed",
            "baseline; the Delta = 0 reference of 001 section 3",
            models=BOTH_MODELS,
        ),
        PolicySpec(
            "jsq",
            rules.JSQ,
            "join a shortest compatible queue (queue length counts the job in service); ties uniformly at random",
            "000 section 6 (JSQ); 002 ('RR', random tie-breaking)",
            ranks_whole_set=True,
            models=BOTH_MODELS,
        ),
        PolicySpec(
            "jfsq",
            rules.JFSQ,
            "join a shortest compatible queue; ties to the fastest server, remaining ties at random",
            "000 section 3 (JFSQ); 002 (JFSQ, speed-aware JSQ)",
            ranks_whole_set=True,
        ),
        PolicySpec(
            "jssq",
            rules.JSSQ,
            "join a shortest compatible queue; ties to the slowest server, remaining ties at random",
            "002 (JSSQ)",
            ranks_whole_set=True,
        ),
        PolicySpec(
            "jiq",
            rules.JIQ,
            "a compatible idle server uniformly at random; if none is idle, a compatible server uniformly at random",
            "000 section 6 (JIQ)",
            ranks_whole_set=True,
            models=BOTH_MODELS,
        ),
        PolicySpec(
            "jfiq",
            rules.JFIQ,
            "the fastest compatible idle server (ties at random); if none is idle, a compatible server "
            "uniformly at random, whatever its queue",
            "000 section 3 (JFIQ); not the JFIQ of 002, which is jsq-fiq",
            ranks_whole_set=True,
        ),
        PolicySpec(
            "pod",
            rules.POD,
            "power-of-d: sample min(d, degree) distinct compatible servers uniformly without replacement, "
            "join the shortest, ties at random",
            "Mitzenmacher; 001 (Pod)",
            {"d": (2, "number of servers sampled", COUNT)},
            models=BOTH_MODELS,
        ),
        PolicySpec(
            "sed",
            rules.SED,
            "shortest expected delay: a compatible server minimising (queue length + 1) / speed, ties at random",
            "practitioners' baseline",
            ranks_whole_set=True,
        ),
        PolicySpec(
            "jsq-fiq",
            rules.JSQ_FIQ,
            "join a shortest compatible queue; among idle servers the fastest (ties at random); when none "
            "is idle, ties among the shortest at random",
            "002 (its JFIQ); not the jfiq of 000",
            ranks_whole_set=True,
        ),
        PolicySpec(
            "jsq-lisf",
            rules.JSQ_LISF,
            "join a shortest compatible queue; among idle servers the one idle longest; when none is idle, "
            "ties among the shortest at random",
            "002 (LISF)",
            ranks_whole_set=True,
        ),
        PolicySpec(
            "jsq-df-ds",
            rules.JSQ_DF_DS,
            "JSQ(d_F, d_S): sample d_F fast and d_S slow compatible servers (fast = the fastest speed of "
            "the system, slow = the rest) and take the shortest of each sample, ties at random; an idle "
            "fast one gets the job; else an idle slow one gets it with probability p_S (else the fast "
            "one); else the fast one with probability p_F, the slow one otherwise",
            "Gardner et al. (JSQ(d_F, d_S)); 000 App. D.1 (JSQ-(2,2))",
            {
                "d_fast": (2, "fast servers sampled, d_F", COUNT),
                "d_slow": (2, "slow servers sampled, d_S", COUNT),
                "p_fast": (0.5, "probability of the fast server when no sampled server is idle, p_F", PROBABILITY),
                "p_slow": (
                    0.5,
                    "probability of an idle slow server when no sampled fast one is idle, p_S",
                    PROBABILITY,
                ),
            },
        ),
    ]
}
POLICIES.update(
    {
        spec.id: spec
        for spec in [
            PolicySpec(
                "l-jsq",
                local_estimates.L_JSQ,
                "LED: each dispatcher joins a server with the least local estimate, ties at random; estimates "
                "change only at updates",
                "001 section 5 (L-JSQ); LSQ of Vargaftik et al.",
                dict(LED_UPDATE_PARAMETERS),
                models=("slotted",),
            ),
            PolicySpec(
                "l-jba",
                local_estimates.L_JBA,
                "LED: a server whose local estimate is below the mean estimate, with probability proportional "
                "to its speed among those; if none is below, the empty_set rule",
                "001 section 5 (L-JBA); rule inferred, see docs/reference/slotted.md",
                {
                    **LED_UPDATE_PARAMETERS,
                    "average": (
                        "plain",
                        "plain mean of the estimates, or rate-weighted (sum mu_n Q~_n / mu_Sigma)",
                        local_estimates.JBA_AVERAGES,
                    ),
                    "inclusive": (False, "below means <= instead of <", FLAG),
                    "empty_set": (
                        "weighted-random",
                        "when no estimate is below: weighted-random or l-jsq",
                        local_estimates.JBA_EMPTY_SET,
                    ),
                },
                models=("slotted",),
            ),
            PolicySpec(
                "l-pod",
                local_estimates.L_POD,
                "LED: sample min(d, N) distinct servers uniformly, join the least local estimate, ties at random",
                "001 section 5 (L-Pod)",
                {**LED_UPDATE_PARAMETERS, "d": (2, "number of servers sampled", COUNT)},
                models=("slotted",),
            ),
        ]
    }
)


def make_policy(policy_id: str, **params) -> Policy:
    """Validate a policy id and its parameters; unspecified parameters take their defaults."""
    if policy_id not in POLICIES:
        raise InputError("policy", f"unknown policy {policy_id!r}; choose one of: {', '.join(POLICIES)}")
    spec = POLICIES[policy_id]
    unknown = sorted(set(params) - set(spec.parameters))
    if unknown:
        allowed = ", ".join(spec.parameters) or "none"
        raise InputError(f"policy {policy_id}", f"has no parameter {unknown[0]!r} (its parameters: {allowed})")
    values = {name: params.get(name, default) for name, (default, _, _) in spec.parameters.items()}
    for name, (_, _, kind) in spec.parameters.items():
        if not valid_parameter(kind, values[name]):
            raise InputError(f"policy {policy_id}.{name}", f"must be {describe_kind(kind)}, got {values[name]!r}")
    return Policy(policy_id, values)


def resolve_policy(policy, policy_params: dict) -> Policy:
    """The Policy a simulation runs: a policy id with its parameters as keywords, or a Policy."""
    if isinstance(policy, str):
        return make_policy(policy, **policy_params)
    if policy_params:
        raise InputError("policy", "give parameters either in the Policy object or as keywords, not both")
    if not isinstance(policy, Policy):
        raise InputError("policy", "must be a policy id or a hetlb.Policy")
    return policy
