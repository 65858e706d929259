"""Named routing policies: each id maps to an integer code, its parameters and its definition.

Policies are data (DESIGN.md, principle 3): the kernel branches on ``Policy.code``; the
decision rules themselves are the @njit functions of :mod:`hetlb.policies.rules`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hetlb.errors import InputError
from hetlb.policies import rules


@dataclass(frozen=True)
class PolicySpec:
    """A registered policy: id, kernel code, definition and its source."""

    id: str
    code: int
    definition: str
    reference: str
    parameters: dict = field(default_factory=dict)  # name -> (default, description, kind: COUNT or PROBABILITY)
    ranks_whole_set: bool = False  # chooses by a key over every compatible server


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


def valid_parameter(kind: str, value) -> bool:
    if kind == COUNT:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 1
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0.0 <= value <= 1.0


POLICIES: dict[str, PolicySpec] = {
    spec.id: spec
    for spec in [
        PolicySpec("random", rules.RANDOM,
                   "a compatible server chosen uniformly at random",
                   "baseline; 001 section 5"),
        PolicySpec("weighted-random", rules.WEIGHTED_RANDOM,
                   "a compatible server chosen with probability proportional to its speed",
                   "baseline; the Delta = 0 reference of 001 section 3"),
        PolicySpec("jsq", rules.JSQ,
                   "join a shortest compatible queue (queue length counts the job in service); ties uniformly at random",
                   "000 section 6 (JSQ); 002 ('RR', random tie-breaking)", ranks_whole_set=True),
        PolicySpec("jfsq", rules.JFSQ,
                   "join a shortest compatible queue; ties to the fastest server, remaining ties at random",
                   "000 section 3 (JFSQ); 002 (JFSQ, speed-aware JSQ)", ranks_whole_set=True),
        PolicySpec("jssq", rules.JSSQ,
                   "join a shortest compatible queue; ties to the slowest server, remaining ties at random",
                   "002 (JSSQ)", ranks_whole_set=True),
        PolicySpec("jiq", rules.JIQ,
                   "a compatible idle server uniformly at random; if none is idle, a compatible server uniformly at random",
                   "000 section 6 (JIQ)", ranks_whole_set=True),
        PolicySpec("jfiq", rules.JFIQ,
                   "the fastest compatible idle server (ties at random); if none is idle, a compatible server "
                   "uniformly at random, whatever its queue",
                   "000 section 3 (JFIQ); not the JFIQ of 002, which is jsq-fiq", ranks_whole_set=True),
        PolicySpec("pod", rules.POD,
                   "power-of-d: sample min(d, degree) distinct compatible servers uniformly without replacement, "
                   "join the shortest, ties at random",
                   "Mitzenmacher; 001 (Pod)", {"d": (2, "number of servers sampled", COUNT)}),
        PolicySpec("sed", rules.SED,
                   "shortest expected delay: a compatible server minimising (queue length + 1) / speed, ties at random",
                   "practitioners' baseline", ranks_whole_set=True),
        PolicySpec("jsq-fiq", rules.JSQ_FIQ,
                   "join a shortest compatible queue; among idle servers the fastest (ties at random); when none "
                   "is idle, ties among the shortest at random",
                   "002 (its JFIQ); not the jfiq of 000", ranks_whole_set=True),
        PolicySpec("jsq-lisf", rules.JSQ_LISF,
                   "join a shortest compatible queue; among idle servers the one idle longest; when none is idle, "
                   "ties among the shortest at random",
                   "002 (LISF)", ranks_whole_set=True),
        PolicySpec("jsq-df-ds", rules.JSQ_DF_DS,
                   "JSQ(d_F, d_S): sample d_F fast and d_S slow compatible servers (fast = the fastest speed of "
                   "the system, slow = the rest) and take the shortest of each sample, ties at random; an idle "
                   "fast one gets the job; else an idle slow one gets it with probability p_S (else the fast "
                   "one); else the fast one with probability p_F, the slow one otherwise",
                   "Gardner et al. (JSQ(d_F, d_S)); 000 App. D.1 (JSQ-(2,2))",
                   {"d_fast": (2, "fast servers sampled, d_F", COUNT),
                    "d_slow": (2, "slow servers sampled, d_S", COUNT),
                    "p_fast": (0.5, "probability of the fast server when no sampled server is idle, p_F",
                               PROBABILITY),
                    "p_slow": (0.5, "probability of an idle slow server when no sampled fast one is idle, p_S",
                               PROBABILITY)}),
    ]
}


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
            raise InputError(f"policy {policy_id}.{name}", f"must be {kind}, got {values[name]!r}")
    return Policy(policy_id, values)


def as_policy(policy) -> Policy:
    """Accept a :class:`Policy` or a policy id."""
    return policy if isinstance(policy, Policy) else make_policy(policy)
