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
    parameters: dict = field(default_factory=dict)  # name -> (default, description)
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
                   "Mitzenmacher; 001 (Pod)", {"d": (2, "number of servers sampled, an integer >= 1")}),
        PolicySpec("sed", rules.SED,
                   "shortest expected delay: a compatible server minimising (queue length + 1) / speed, ties at random",
                   "practitioners' baseline", ranks_whole_set=True),
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
    values = {name: params.get(name, default) for name, (default, _) in spec.parameters.items()}
    if "d" in values:
        d = values["d"]
        if isinstance(d, bool) or not isinstance(d, int) or d < 1:
            raise InputError(f"policy {policy_id}.d", f"must be an integer >= 1, got {d!r}")
    return Policy(policy_id, values)


def as_policy(policy) -> Policy:
    """Accept a :class:`Policy` or a policy id."""
    return policy if isinstance(policy, Policy) else make_policy(policy)
