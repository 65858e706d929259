"""The conformance check of a registered policy: does every part of hetlb agree on its definition?

:func:`check_policy` runs, for one policy id, the checks that apply to it:

- ``registry``: its entry is consistent (a unique code, valid defaults, a definition and a source);
- ``selection keys``: for a ranking policy, the servers of least key (hetlb.policies.rules, what the
  kernels use) are exactly the servers its exact routing rule (hetlb.policies.exact_rules, written
  from the definition alone) can choose, on random states; integer keys are integers >= 0;
- ``kernel branches``: every model the entry declares has a rule for its code in its kernel
  (hetlb.kernels.continuous.CODES, hetlb.kernels.slotted.CODES, choose_server's for the models on
  estimates), or the policy brings its own selection key;
- ``continuous decisions``: the continuous kernel's decisions, on short traced runs whose servers
  are too slow to finish a job (so every state is known from the trace), are the exact rule's:
  never a server outside its support, and as often as it says on every state visited often
  (a chi-square test per state, Bonferroni over the states, family level ``alpha``); a missing or
  wrong branch of the kernel shows here even where conservation holds;
- ``continuous invariants``: a traced run on a small sparse system with finite buffers routes every
  job to a compatible server, blocks exactly the jobs sent to a full server, and conserves jobs
  (admitted = departed + in system);
- ``exact agreement``: the simulated mean response time and blocking probability on a small
  heterogeneous system with two job types and finite buffers lie within Student-t intervals
  (Bonferroni over the two measures, family level ``alpha``) of the exact CTMC solution;
- ``slotted invariants``: a run of the slotted model conserves jobs and routes within range;
- ``choice on estimates``: for a policy that runs live, hetlb.policies.choice.choose_server (what
  ``hetlb serve`` decides with) draws each server of a random candidate set as often as the exact
  rule says (a chi-square test per state, Bonferroni over the states, family level ``alpha``),
  and never one the rule excludes.

The tests run it over every registered policy, so a new policy is checked as soon as it has an
entry (docs/how-to/add-a-policy.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from hetlb.errors import InputError
from hetlb.model.slotted import SlottedSystem
from hetlb.model.system import System, speed_classes
from hetlb.policies.choice import JBA_FALLBACK_WEIGHTED, choose_server, decides
from hetlb.policies.registry import BY_CODE, CONTINUOUS, LIVE, POLICIES, SLOTTED, PolicySpec, make_policy
from hetlb.simulation import continuous, slotted
from hetlb.simulation.simulate import simulate
from hetlb.simulation.slotted import simulate_slotted
from hetlb.theory.exact import solve_exact

SPARSE_SPEEDS = [2.0, 1.0, 1.0, 0.5]
SPARSE_RATES = [1.5, 1.2]
SPARSE_GRAPH = [[0, 1, 2], [1, 2, 3]]
SPARSE_BUFFERS = [2, 3, 4, 2]
"""The small system of the invariants and the exact agreement: four servers of three speeds, two
job types on a non-complete graph, unequal finite buffers, load 0.6 of the total speed."""
STALLED_SPEED_SCALE = 2.0**-23
STALLED_BUFFER = 10**6
"""The decisions check slows SPARSE_SPEEDS by this factor, so that a job finishes within one of its
short runs with a chance of about 1e-6 (the simulator still accepts the run's cost), and gives
room for every arrival."""


@dataclass(frozen=True)
class Check:
    """One conformance check: its name, whether it passed, and what was measured."""

    name: str
    passed: bool
    detail: str


@dataclass(frozen=True)
class ConformanceReport:
    """The checks run on one policy."""

    policy: str
    checks: list = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)

    @property
    def summary(self) -> str:
        """The report as readable lines, one per check."""
        lines = [f"{self.policy}: {'conforms' if self.passed else 'FAILS'}"]
        lines += [f"  {'ok  ' if c.passed else 'FAIL'} {c.name}: {c.detail}" for c in self.checks]
        return "\n".join(lines)


def check_policy(policy_id: str, *, seed: int = 0, alpha: float = 1e-3) -> ConformanceReport:
    """Run every conformance check that applies to ``policy_id`` (module docstring).

    ``alpha``: family error level of the statistical comparison with the exact solution.

    Parameters
    ----------
    policy_id
        A registered policy id.
    seed
        The root seed of the simulations the checks run (an integer >= 0).
    alpha
        The family error level of the statistical comparison with the exact solution (the chance
        that a correct policy fails it).

    Returns
    -------
    ConformanceReport
        Each check with its verdict.
    """
    if policy_id not in POLICIES:
        raise InputError("policy", f"unknown policy {policy_id!r}; choose one of: {', '.join(POLICIES)}")
    spec = POLICIES[policy_id]
    checks = [_registry(policy_id), _kernel_branches(spec)]
    if spec.ranks_whole_set and spec.exact_rule is not None:
        checks.append(_refused_as_failure("selection keys", _selection_keys, policy_id, seed))
    if CONTINUOUS in spec.models:
        if spec.exact_rule is not None:
            checks.append(_refused_as_failure("continuous decisions", _continuous_decisions, policy_id, seed, alpha))
        checks.append(_refused_as_failure("continuous invariants", _continuous_invariants, policy_id, seed))
        if spec.exact_rule is not None:
            checks.append(_refused_as_failure("exact agreement", _exact_agreement, policy_id, seed, alpha))
    if SLOTTED in spec.models:
        checks.append(_refused_as_failure("slotted invariants", _slotted_invariants, policy_id, seed))
    if LIVE in spec.models:
        checks.append(_refused_as_failure("choice on estimates", _choice_on_estimates, policy_id, seed, alpha))
    return ConformanceReport(policy_id, checks)


def _refused_as_failure(name: str, check, *args) -> Check:
    """``check(*args)``, or a failed check when hetlb refuses to run the policy there."""
    try:
        return check(*args)
    except InputError as error:
        return Check(name, False, f"refused: {error}")


def _kernel_branches(spec: PolicySpec) -> Check:
    """Every model the entry declares has a rule for its code (module docstring)."""
    missing = [
        where
        for model, where, check in (
            (CONTINUOUS, "the continuous kernel", continuous.check_kernel_branch),
            (SLOTTED, "the slotted kernel", slotted.check_kernel_branch),
        )
        if model in spec.models and _refuses(check, spec)
    ]
    if spec.decides_on_estimates and not decides(spec.code):
        missing.append("choose_server (dispatchers and hetlb serve)")
    detail = (
        f"no rule for code {spec.code} in {', '.join(missing)}" if missing else f"a rule in {', '.join(spec.models)}"
    )
    return Check("kernel branches", not missing, detail)


def _refuses(check, spec: PolicySpec) -> bool:
    """Whether ``check(spec)``, a model's refusal of a policy it has no branch for, refuses it."""
    try:
        check(spec)
    except InputError:
        return True
    return False


def _registry(policy_id: str) -> Check:
    spec = POLICIES[policy_id]
    problems = []
    if BY_CODE.get(spec.code) is not spec:
        problems.append(f"code {spec.code} is shared")
    if not spec.definition or not spec.reference:
        problems.append("no definition or source")
    try:
        make_policy(policy_id)
    except InputError as error:
        problems.append(f"invalid defaults ({error})")
    return Check("registry", not problems, "; ".join(problems) or f"code {spec.code}, defaults valid")


def _selection_keys(policy_id: str, seed: int, n_states: int = 400) -> Check:
    """The least-key servers equal the support of the exact rule, on random states."""
    spec = POLICIES[policy_id]
    exact_rule = spec.exact_rule
    assert exact_rule is not None, "check_policy runs this check only on policies with an exact rule"
    rng = np.random.default_rng(seed)
    params = make_policy(policy_id).params
    for _ in range(n_states):
        n = int(rng.integers(1, 7))
        speed = rng.choice([0.25, 0.5, 1.0, 2.0], size=n)
        queue_len = rng.integers(0, 4, size=n) * (rng.random(n) < 0.8)
        _, server_class = speed_classes(speed)
        n_classes = int(server_class.max()) + 1
        idle_rank = np.where(queue_len == 0, rng.permutation(n), 0)
        keys = continuous.policy_functions(spec.code)[1](  # the kernels' keys, a plugin's own included
            spec.code,
            queue_len,
            server_class,
            n_classes,
            speed,
            idle_rank.astype(float) if spec.idle_order else np.zeros(n),
        )
        least = set(np.flatnonzero(keys == keys.min()).tolist())
        probability = exact_rule(
            queue_len[None, :], speed, speed == speed.max(), params, idle_rank[None, :] if spec.idle_order else None
        )[0]
        support = set(np.flatnonzero(probability > 0).tolist())
        if least != support:
            return Check(
                "selection keys",
                False,
                f"q={queue_len.tolist()}, speed={speed.tolist()}: keys choose "
                f"{sorted(least)}, the exact rule {sorted(support)}",
            )
        if spec.integer_keys and not (np.all(keys >= 0) and np.all(keys == np.floor(keys))):
            return Check("selection keys", False, f"keys {keys.tolist()} are not integers >= 0")
    return Check("selection keys", True, f"least keys = exact rule's support on {n_states} random states")


def _continuous_decisions(
    policy_id: str, seed: int, alpha: float, runs: int = 150, horizon: float = 3.0, min_visits: int = 30
) -> Check:
    """The kernel's decisions against the exact rule, on states known from the trace (module docstring)."""
    spec = POLICIES[policy_id]
    exact_rule = spec.exact_rule
    assert exact_rule is not None, "check_policy runs this check only on policies with an exact rule"
    speed = np.array(SPARSE_SPEEDS) * STALLED_SPEED_SCALE
    system = System.from_speeds(speed, arrival_rate=SPARSE_RATES, graph=SPARSE_GRAPH, buffer=STALLED_BUFFER)
    params = make_policy(policy_id).params
    is_fast = speed == speed.max()
    counts: dict[tuple, np.ndarray] = {}
    probabilities: dict[tuple, np.ndarray] = {}
    decisions = 0
    for run in range(runs):
        trace = simulate(system, policy_id, horizon=horizon, warmup=horizon * (1 - 1e-9), seed=seed + run, trace=1000)
        trace = trace.runs[0].trace
        queue_len = np.zeros(len(speed), np.int64)
        for job_type, server, seen in zip(trace["job_type"], trace["server"], trace["queue_len"], strict=True):
            if queue_len[server] != seen:
                break  # a job finished after all (a chance of about 1e-6 a run): the states are unknown from here
            servers = SPARSE_GRAPH[job_type]
            state = (int(job_type), *queue_len[servers].tolist())
            if state not in probabilities:
                idle_rank = np.zeros((1, len(servers))) if spec.idle_order else None
                probabilities[state] = exact_rule(
                    queue_len[servers][None, :], speed[servers], is_fast[servers], params, idle_rank
                )[0]
                counts[state] = np.zeros(len(servers), np.int64)
            at = servers.index(int(server)) if int(server) in servers else -1
            if at < 0 or probabilities[state][at] == 0:
                return Check(
                    "continuous decisions",
                    False,
                    f"job type {job_type} at queues {queue_len[servers].tolist()} (servers {servers}) went to server "
                    f"{server}, which the exact rule never chooses there",
                )
            counts[state][at] += 1
            queue_len[server] += 1
            decisions += 1
    tested = [state for state in counts if counts[state].sum() >= min_visits and (probabilities[state] > 0).sum() > 1]
    for state in tested:
        support = probabilities[state] > 0
        observed = counts[state][support]
        p_value = stats.chisquare(observed, observed.sum() * probabilities[state][support]).pvalue
        if p_value < alpha / max(len(tested), 1):
            return Check(
                "continuous decisions",
                False,
                f"job type {state[0]} at queues {list(state[1:])}: chose {counts[state].tolist()} times, the exact "
                f"rule's probabilities {np.round(probabilities[state], 3).tolist()} (p = {p_value:.2g})",
            )
    return Check(
        "continuous decisions",
        True,
        f"{decisions} decisions in the exact rule's support; frequencies match on {len(tested)} frequent states",
    )


def _sparse_system() -> System:
    return System.from_speeds(SPARSE_SPEEDS, arrival_rate=SPARSE_RATES, graph=SPARSE_GRAPH, buffer=SPARSE_BUFFERS)


def _continuous_invariants(policy_id: str, seed: int, jobs: int = 3000) -> Check:
    system = _sparse_system()
    run = simulate(system, policy_id, jobs=jobs, seed=seed, trace=10 * jobs).runs[0]
    trace, counters = run.trace, run.counters
    compatible = np.zeros((system.n_types, system.n_servers), dtype=bool)
    for k, servers in enumerate(SPARSE_GRAPH):
        compatible[k, servers] = True
    problems = []
    if len(trace["server"]) != counters["arrivals"]:
        problems.append(f"traced {len(trace['server'])} of {counters['arrivals']} decisions")
    if not compatible[trace["job_type"], trace["server"]].all():
        problems.append("a job went to an incompatible server")
    sent_to_full = int(np.sum(trace["queue_len"] >= system.buffer[trace["server"]]))
    if sent_to_full != counters["blocked"]:
        problems.append(f"{counters['blocked']} blocked, {sent_to_full} sent to a full server")
    if counters["admitted"] != counters["departed"] + counters["in_system"]:
        problems.append(f"admitted {counters['admitted']} != departed + in system")
    if counters["arrivals"] != counters["admitted"] + counters["blocked"]:
        problems.append("arrivals != admitted + blocked")
    return Check(
        "continuous invariants",
        not problems,
        "; ".join(problems) or f"{counters['arrivals']} decisions compatible, blocking and conservation exact",
    )


def _exact_agreement(policy_id: str, seed: int, alpha: float, replications: int = 8, jobs: int = 20_000) -> Check:
    system = _sparse_system()
    exact = solve_exact(system, policy_id)
    result = simulate(system, policy_id, jobs=jobs, warmup=20.0, replications=replications, seed=seed)
    quantile = stats.t.ppf(1.0 - alpha / 4.0, replications - 1)
    details, passed = [], True
    for measure in ("mean_response_time", "blocking_probability"):
        samples = np.array([getattr(run, measure) for run in result.runs])
        half_width = quantile * samples.std(ddof=1) / math.sqrt(replications)
        ok = abs(samples.mean() - getattr(exact, measure)) <= half_width
        passed &= bool(ok)
        details.append(f"{measure} {samples.mean():.5g} +- {half_width:.2g}, exact {getattr(exact, measure):.5g}")
    return Check("exact agreement", passed, "; ".join(details))


def _slotted_invariants(policy_id: str, seed: int, slots: int = 2000) -> Check:
    system = SlottedSystem.from_speeds([1.0, 0.5, 0.5, 0.5], dispatchers=2, load=0.6)
    run = simulate_slotted(system, policy_id, slots=slots, seed=seed, trace=10 * slots).runs[0]
    counters, trace = run.counters, run.trace
    problems = []
    if counters["arrivals"] != counters["departures"] + counters["in_system"]:
        problems.append("arrivals != departures + in system")
    if len(trace["server"]) and not (np.all(trace["server"] >= 0) and np.all(trace["server"] < system.n_servers)):
        problems.append("a decision outside the servers")
    return Check(
        "slotted invariants", not problems, "; ".join(problems) or f"{counters['arrivals']} arrivals conserved"
    )


def _choice_on_estimates(policy_id: str, seed: int, alpha: float, n_states: int = 25, draws: int = 800) -> Check:
    """choose_server's draws on random candidate sets against the exact routing probabilities."""
    spec = POLICIES[policy_id]
    if not decides(spec.code):
        raise InputError("policy", f"{policy_id} (code {spec.code}) has no branch in choose_server")
    rule = spec.rule_on_estimates
    assert rule is not None, "every live policy has an exact rule or an estimate rule"
    params = make_policy(policy_id).params
    rng = np.random.default_rng(seed)
    decision_rng = np.random.default_rng(seed + 1)
    n_servers = 8
    for state in range(n_states):
        speed = rng.choice([0.25, 0.5, 1.0, 2.0], size=n_servers)
        # every other state has no idle server, where jiq, jfiq and jsq-fiq fall back
        estimate = rng.integers(state % 2, 4, size=n_servers).astype(np.int64)
        _, server_class = speed_classes(speed)
        candidates = np.concatenate([[n_servers], rng.permutation(n_servers)[: int(rng.integers(1, n_servers + 1))]])
        lo, hi = 1, len(candidates)
        chosen = candidates[lo:hi]
        scratch = np.zeros(n_servers + 1)
        counts = np.zeros(n_servers + 1, dtype=np.int64)
        cumulative = np.zeros(len(candidates))
        cumulative[lo:hi] = np.cumsum(speed[chosen])
        for _ in range(draws):
            s = choose_server(
                spec.code, candidates, lo, hi, estimate, server_class, int(server_class.max()) + 1, speed,
                cumulative, np.zeros(n_servers), params.get("d", 2), False, False, JBA_FALLBACK_WEIGHTED,
                scratch, np.zeros(n_servers + 1, dtype=np.int64), np.zeros(n_servers + 1, dtype=np.int64),
                decision_rng,
            )  # fmt: skip
            counts[s] += 1
        probability = rule(estimate[chosen][None, :], speed[chosen], speed[chosen] == speed.max(), params, None)[0]
        observed = counts[chosen]
        if observed.sum() != draws or np.any(observed[probability == 0] > 0):
            return Check(
                "choice on estimates", False, f"estimates {estimate[chosen].tolist()}: chose an excluded server"
            )
        support = probability > 0
        if support.sum() > 1:
            p_value = stats.chisquare(observed[support], draws * probability[support]).pvalue
            if p_value < alpha / n_states:
                return Check(
                    "choice on estimates",
                    False,
                    f"estimates {estimate[chosen].tolist()}, speeds {speed[chosen].tolist()}: draws "
                    f"{observed.tolist()} against probabilities {np.round(probability, 3).tolist()} (p = {p_value:.2g})",
                )
    return Check("choice on estimates", True, f"draws match the exact rule on {n_states} random candidate sets")
