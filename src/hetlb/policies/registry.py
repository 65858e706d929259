"""Named routing policies: one :class:`PolicySpec` holds everything hetlb knows of a policy.

Policies are data: the kernels branch on the integer ``code`` (the constants below) and
rank servers by :func:`hetlb.policies.rules.selection_key`; everything else (which models run the
policy, its parameters, whether its keys are integers, its exact routing rule, what the bounding
systems, the diffusion limits and the slotted model say of it) is a field of its entry below, and
every table of policies elsewhere in hetlb is derived from this registry. This module is plain
Python, so the theory can read it without compiling a kernel. Adding a policy takes its code and
entry here and its kernel branch or selection key (docs/how-to/add-a-policy.md); a ranking policy
written outside hetlb is added at run time by :func:`register_policy`
(docs/how-to/your-own-policy.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from hetlb.errors import InputError, UnexpectedKeyword
from hetlb.policies import exact_rules
from hetlb.signals import LED_UPDATE_PARAMETERS
from hetlb.validation import (  # noqa: F401
    AT_LEAST_ONE,
    COUNT,
    FLAG,
    NONNEGATIVE,
    POSITIVE_PROBABILITY,
    PROBABILITY,
    describe_kind,
)
from hetlb.validation import of_kind as check_parameter

# --- kernel codes: the kernels branch on these (``policy_code == JSQ``) ---------------------------

RANDOM = 0
WEIGHTED_RANDOM = 1
JSQ = 2
JFSQ = 3
JSSQ = 4
JIQ = 5
JFIQ = 6
POD = 7
SED = 8
JSQ_DF_DS = 9
JSQ_FIQ = 10
JSQ_LISF = 11
JLU = 12
LEW = 13

L_JSQ = 20
L_JBA = 21
L_POD = 22
"""The LED policies of 001, which decide on a dispatcher's local estimates."""

CACHE_AWARE = 30
PREFIX_SCORE = 31
CHASH = 32
BALANCED_PANDAS = 33
EFT = 34
L_EFT = 35
"""The policies that read the prefix cache (docs/background/prefix-caches.md): the routers' rules
and hetlb's earliest expected finish, with its LED form."""

JBA_AVERAGES = ("plain", "rate-weighted")
JBA_EMPTY_SET = ("weighted-random", "l-jsq")
"""Option values of l-jba (its update parameters are those of every LED policy: hetlb.signals)."""

# --- the registry --------------------------------------------------------------------------------

CONTINUOUS, SLOTTED, LIVE = "continuous", "slotted", "live"
MODELS = (CONTINUOUS, SLOTTED, LIVE)
"""Where a policy can run: the continuous-time simulator (hetlb.simulate), the slotted
multi-dispatcher model of 001 (hetlb.simulate_slotted), and real requests (``hetlb serve``, which
decides with hetlb.policies.choice.choose_server on its estimates)."""


@dataclass(frozen=True)
class PolicySpec:
    """A registered policy.

    Parameters
    ----------
    id
        The policy's id (``hetlb policies`` lists them).
    code
        The integer code the kernels branch on.
    definition
        The exact definition, in words.
    reference
        The paper or work it comes from.
    parameters
        Name -> (default, description, kind), the kind one of COUNT, PROBABILITY,
        POSITIVE_PROBABILITY, FLAG or a tuple of allowed strings.
    models
        The models that run it (continuous, slotted, ...).
    ranks_whole_set
        Joins a least-key server of the whole compatible set (the keys of rules.selection_key), so
        the complete graph can use the O(log N) tree.
    integer_keys
        Its selection keys are integers >= 0, so the key buckets can serve it.
    idle_order
        Decides also on the order in which servers became idle.
    on_local_estimates
        Decides on a dispatcher's local estimates (the LED policies of 001).
    exact_rule
        Its routing probabilities for the exact solver (hetlb.policies.exact_rules), or None where
        the solver does not cover it.
    tie_break
        For a JSQ variant of 002, its rule among the shortest queues; the bounding systems' coupled
        check (hetlb.check_sandwich) runs every policy that has one.
    diffusion
        Its Halfin-Whitt diffusion limit in 002 (a :class:`DiffusionRule`), or None.
    slotted_information
        What a dispatcher decides on in the slotted model (None: not there).
    decides_on_estimates
        Hetlb.policies.choice.choose_server decides it on a dispatcher's estimates (the many-
        dispatcher continuous model and ``hetlb serve``).
    decides_on_load
        Its decision reads queue lengths (or estimates of them); random and weighted-random do not,
        so they need no load signal and no probe.
    led_alias
        The policy whose decision an LED policy takes on its local estimates (l-jsq is jsq on
        estimates): its selection key ranks them.
    mean_field
        Its mean-field limit (a :class:`MeanFieldRule`), or None.
    estimate_rule
        An LED policy's routing probabilities on its estimates (a rule of hetlb.policies.exact_rules
        at its default options); an alias's is its alias's exact rule.
    selection_key
        A policy registered with :func:`register_policy`: its own @njit key ``key(queue_len,
        speed_class, n_classes, speed, idle_since)``; None for the built-in ones, whose keys are
        branches of hetlb.policies.rules.selection_key.
    speed_blind
        Its decision reads no speed, concurrency or rate curve (queue lengths, their estimates, or
        nothing), so a dispatcher that knows only its backends' queues decides it as the simulator
        does on any servers (the testbed's multi-slot backends).
    reads_cache
        Its decision reads the router's index of the servers' prefix caches (the job's match at each
        server; hetlb.policies.cache_rules); every other policy ignores the caches.
    exact_cache_rule
        The name of its rule in hetlb.theory.cache_routing, the exact chain's with caches, or None
        where that chain does not cover it.
    """

    id: str
    code: int
    definition: str
    reference: str
    parameters: dict = field(default_factory=dict)
    models: tuple = (CONTINUOUS,)
    ranks_whole_set: bool = False
    integer_keys: bool = False
    idle_order: bool = False
    on_local_estimates: bool = False
    exact_rule: Callable | None = None
    tie_break: str | None = None
    diffusion: DiffusionRule | None = None
    slotted_information: str | None = None
    decides_on_estimates: bool = False
    decides_on_load: bool = True
    led_alias: str | None = None
    mean_field: MeanFieldRule | None = None
    estimate_rule: Callable | None = None
    selection_key: Callable | None = None
    speed_blind: bool = False
    reads_cache: bool = False
    exact_cache_rule: str | None = None

    def __post_init__(self):
        unknown = set(self.models) - set(MODELS)
        if unknown:
            raise ValueError(f"policy {self.id}: unknown models {sorted(unknown)}")
        if (SLOTTED in self.models) != (self.slotted_information is not None):
            raise ValueError(f"policy {self.id}: slotted_information goes with the slotted model")
        if (self.integer_keys or self.idle_order or self.tie_break) and not self.ranks_whole_set:
            raise ValueError(f"policy {self.id}: integer keys, idle order and tie-breaks belong to ranking policies")
        if self.diffusion is not None and self.tie_break is None:
            raise ValueError(f"policy {self.id}: a diffusion limit of 002 is one of a JSQ tie-breaking rule")
        if LIVE in self.models and not self.decides_on_estimates:
            raise ValueError(f"policy {self.id}: hetlb serve decides on estimates, so a live policy decides on them")
        if self.led_alias is not None and not self.on_local_estimates:
            raise ValueError(f"policy {self.id}: an LED alias belongs to a policy on local estimates")
        if self.mean_field is not None and self.mean_field.rule not in MEAN_FIELD_RULES:
            raise ValueError(
                f"policy {self.id}: mean-field rule {self.mean_field.rule!r} is none of {MEAN_FIELD_RULES}"
            )
        if self.selection_key is not None and not self.ranks_whole_set:
            raise ValueError(f"policy {self.id}: a selection key belongs to a ranking policy")

    @property
    def rule_on_estimates(self) -> Callable | None:
        """Its routing probabilities on the values it decides on: ``estimate_rule``, its LED alias's
        exact rule, or its own exact rule."""
        if self.estimate_rule is not None:
            return self.estimate_rule
        return POLICIES[self.led_alias].exact_rule if self.led_alias is not None else self.exact_rule

    @property
    def diffusion_limit(self) -> str | None:
        """The result of 002 giving its diffusion limit, or None."""
        return None if self.diffusion is None else self.diffusion.result

    def defaults(self) -> dict:
        """The default value of every parameter."""
        return {name: default for name, (default, _, _) in self.parameters.items()}


MEAN_FIELD_RANKING_RULES = ("idle-uniform", "idle-fastest-first", "idle-slowest-first", "least-expected-delay")
MEAN_FIELD_SAMPLING_RULES = ("uniform", "speed-weighted", "power-of-d", "fast-slow-shortest", "fast-slow-idle")
MEAN_FIELD_RULES = MEAN_FIELD_RANKING_RULES + MEAN_FIELD_SAMPLING_RULES
"""The fixed points hetlb.theory.meanfield solves (docs/background/mean-field.md): a ranking
policy fills idle servers uniformly, fastest first or slowest first, or fills the slots of least
expected delay; a sampling policy makes every server a birth-death chain whose birth rate is
uniform, proportional to speed, the power-of-d minimum, or JSQ/JIQ(d_F, d_S)'s."""

DIFFUSION_MEASURES = ("slowest", "fastest", "size-biased", "law")
"""The speed measures of 002's limits: delta_{mu_min}, delta_{mu_max}, mu dF / mu_bar and F."""


@dataclass(frozen=True)
class MeanFieldRule:
    """A policy's N -> infinity limit on the complete graph: ``rule`` (one of
    MEAN_FIELD_RANKING_RULES or MEAN_FIELD_SAMPLING_RULES) and the ``description`` its
    MeanFieldLimit carries.

    Parameters
    ----------
    rule
        One of MEAN_FIELD_RANKING_RULES or MEAN_FIELD_SAMPLING_RULES.
    description
        The text its MeanFieldLimit carries.
    """

    rule: str
    description: str

    @property
    def ranking(self) -> bool:
        """Whether the rule ranks servers (a deterministic choice among classes, MEAN_FIELD_RANKING_RULES) rather
        than sampling them."""
        return self.rule in MEAN_FIELD_RANKING_RULES


@dataclass(frozen=True)
class DiffusionRule:
    """A JSQ tie-breaking rule's Halfin-Whitt limit in 002 (Theorem 4.1): ``result``, the result of
    002 that gives it; ``idle_measure``, eta^pi, the speeds of the servers that stay idle (its
    idle rate <iota, eta^pi>: mu_min, mu_max or E[mu^2] / mu_bar); ``routing_measure``, the speeds
    that receive the jobs routed to level 2, alpha_1^pi / u (delta_{mu_max}, delta_{mu_min} or F).
    Measures are named as in DIFFUSION_MEASURES."""

    result: str
    idle_measure: str
    routing_measure: str

    def __post_init__(self):
        if self.idle_measure not in DIFFUSION_MEASURES[:3] or self.routing_measure not in DIFFUSION_MEASURES:
            raise ValueError(f"diffusion rule {self.result!r}: measures must be among {DIFFUSION_MEASURES}")


@dataclass(frozen=True)
class Policy:
    """A policy with its parameter values, e.g. ``Policy("pod", {"d": 2})``.

    Parameters
    ----------
    id
        The policy's id in the registry.
    params
        Its parameters' values by name (make_policy fills in the defaults and checks them).
    """

    id: str
    params: dict = field(default_factory=dict)

    @property
    def spec(self) -> PolicySpec:
        """The registry entry of the policy's id (a PolicySpec: its definition, code and parameters)."""
        return POLICIES[self.id]

    @property
    def code(self) -> int:
        """The integer code the kernels branch on (the registry entry's)."""
        return self.spec.code

    def describe(self) -> dict:
        """The policy as the result's metadata records it: its id and its parameters."""
        return {"id": self.id, **self.params}


LED_INFORMATION = "its local estimates Q~^m(t), reset to Q_n(t+1) by the update strategy"

POLICIES: dict[str, PolicySpec] = {
    spec.id: spec
    for spec in [
        PolicySpec(
            "random",
            RANDOM,
            "a compatible server chosen uniformly at random",
            "baseline; 001 section 5",
            models=MODELS,
            exact_rule=exact_rules.random,
            slotted_information="no information",
            decides_on_estimates=True,
            decides_on_load=False,
            mean_field=MeanFieldRule("uniform", "each server an M/M/1/b queue with arrival rate lambda"),
            speed_blind=True,
        ),
        PolicySpec(
            "weighted-random",
            WEIGHTED_RANDOM,
            "a compatible server chosen with probability proportional to its speed (its capacity mu phi(c) on "
            "multi-slot servers)",
            "baseline; the Delta = 0 reference of 001 section 3",
            models=MODELS,
            exact_rule=exact_rules.weighted_random,
            slotted_information="the speeds mu_n",
            decides_on_estimates=True,
            decides_on_load=False,
            mean_field=MeanFieldRule("speed-weighted", "each server an M/M/1/b queue with arrival rate rho mu_m"),
        ),
        PolicySpec(
            "jsq",
            JSQ,
            "join a shortest compatible queue (queue length counts the job in service); ties uniformly at random",
            "000 section 6 (JSQ); 002 ('RR', random tie-breaking)",
            models=MODELS,
            ranks_whole_set=True,
            integer_keys=True,
            exact_rule=exact_rules.jsq,
            tie_break="shortest queue, ties uniformly at random ('RR' in 002)",
            diffusion=DiffusionRule(
                "Corollary 4.5 / 4.6 ('RR', random ties): eta = mu dF / mu_bar "
                "(idle rate E[mu^2] / mu_bar), alpha_1(u) = u F",
                "size-biased",
                "law",
            ),
            slotted_information="every dispatcher sees the true queues Q(t) at the start of the slot "
            "(2N messages per decision)",
            decides_on_estimates=True,
            mean_field=MeanFieldRule("idle-uniform", "idle servers taken uniformly: s_{m,1} = R / (R + mu_m)"),
            speed_blind=True,
            exact_cache_rule="jsq_rule",
        ),
        PolicySpec(
            "jfsq",
            JFSQ,
            "join a shortest compatible queue; ties to the fastest server, remaining ties at random",
            "000 section 3 (JFSQ); 002 (JFSQ, speed-aware JSQ)",
            models=(CONTINUOUS, LIVE),
            ranks_whole_set=True,
            integer_keys=True,
            exact_rule=exact_rules.jfsq,
            tie_break="shortest queue, ties to the fastest server, then at random",
            diffusion=DiffusionRule(
                "Corollary 4.4: eta = delta_{mu_min} (idle rate mu_min), alpha_1(u) = u delta_{mu_max}",
                "slowest",
                "fastest",
            ),
            decides_on_estimates=True,
            mean_field=MeanFieldRule(
                "idle-fastest-first", "idle servers filled in decreasing speed (the C* of Proposition 1 of 000)"
            ),
        ),
        PolicySpec(
            "jssq",
            JSSQ,
            "join a shortest compatible queue; ties to the slowest server, remaining ties at random",
            "002 (JSSQ)",
            models=(CONTINUOUS, LIVE),
            ranks_whole_set=True,
            integer_keys=True,
            exact_rule=exact_rules.jssq,
            tie_break="shortest queue, ties to the slowest server, then at random",
            diffusion=DiffusionRule(
                "Theorem 4.1 with Proposition 3.7: eta = delta_{mu_max} (idle rate mu_max), "
                "alpha_1(u) = u delta_{mu_min} (ties to the slowest; inferred, no corollary in 002)",
                "fastest",
                "slowest",
            ),
            decides_on_estimates=True,
            mean_field=MeanFieldRule("idle-slowest-first", "idle servers filled in increasing speed"),
        ),
        PolicySpec(
            "jiq",
            JIQ,
            "a compatible idle server uniformly at random; if none is idle, a compatible server uniformly at random",
            "000 section 6 (JIQ)",
            models=MODELS,
            ranks_whole_set=True,
            integer_keys=True,
            exact_rule=exact_rules.jiq,
            slotted_information="idle tokens: at the end of a slot each server with Q_n(t+1) = 0 and no token "
            "out sends one token to a dispatcher chosen uniformly; a dispatcher with tokens uses one chosen "
            "uniformly and discards it, one without sends to a server chosen uniformly; tokens may be stale",
            decides_on_estimates=True,
            mean_field=MeanFieldRule(
                "idle-uniform", "idle servers taken uniformly: s_{m,1} = R / (R + mu_m) (the same limit as jsq)"
            ),
        ),
        PolicySpec(
            "jfiq",
            JFIQ,
            "the fastest compatible idle server (ties at random); if none is idle, a compatible server "
            "uniformly at random, whatever its queue",
            "000 section 3 (JFIQ); not the JFIQ of 002, which is jsq-fiq",
            models=(CONTINUOUS, LIVE),
            ranks_whole_set=True,
            integer_keys=True,
            exact_rule=exact_rules.jfiq,
            decides_on_estimates=True,
            mean_field=MeanFieldRule(
                "idle-fastest-first", "idle servers filled in decreasing speed (the C* of Proposition 1 of 000)"
            ),
        ),
        PolicySpec(
            "pod",
            POD,
            "power-of-d: sample min(d, degree) distinct compatible servers uniformly without replacement, "
            "join the shortest, ties at random",
            "Mitzenmacher; 001 (Pod)",
            {"d": (2, "number of servers sampled", COUNT)},
            models=MODELS,
            exact_rule=exact_rules.pod,
            slotted_information="the true queues of the d sampled servers at the start of the slot "
            "(2d messages per decision)",
            decides_on_estimates=True,
            mean_field=MeanFieldRule(
                "power-of-d", "power-of-d, speed-blind: one birth rate per level, common to all classes"
            ),
            speed_blind=True,
        ),
        PolicySpec(
            "sed",
            SED,
            "shortest expected delay: a compatible server minimising (queue length + 1) / speed, ties at random",
            "practitioners' baseline",
            models=(CONTINUOUS, LIVE),
            ranks_whole_set=True,
            exact_rule=exact_rules.sed,
            decides_on_estimates=True,
            mean_field=MeanFieldRule(
                "least-expected-delay",
                "slots of key i / mu_m filled in increasing key up to a threshold; ties at random",
            ),
            exact_cache_rule="sed_rule",
        ),
        PolicySpec(
            "jlu",
            JLU,
            "join the least utilised compatible server: least n_s / c_s, the jobs at the server over its "
            "concurrency; ties at random (jsq when every c_s = 1; refused with unlimited concurrency)",
            "practitioners' least-connections normalised by the server's capacity in slots: weighted "
            "least-connection of IPVS (wlc, least C_i / W_i) and the weighted least_conn of NGINX and "
            "HAProxy, with the weight c_s",
            models=(CONTINUOUS, LIVE),
            ranks_whole_set=True,
            integer_keys=True,
            exact_rule=exact_rules.jlu,
            decides_on_estimates=True,
        ),
        PolicySpec(
            "lew",
            LEW,
            "least expected work: a compatible server minimising n_s / (mu_s phi_s(c_s)), the time its jobs "
            "take at full capacity (queue length / speed when c_s = 1); ties at random",
            "Least-Work-Remaining (Harchol-Balter, Crovella and Murta, task assignment) on the work expected of "
            "n_s jobs of mean size 1; IPVS's wlc with the weight mu_s phi_s(c_s)",
            models=(CONTINUOUS, LIVE),
            ranks_whole_set=True,
            exact_rule=exact_rules.lew,
            decides_on_estimates=True,
        ),
        PolicySpec(
            "jsq-fiq",
            JSQ_FIQ,
            "join a shortest compatible queue; among idle servers the fastest (ties at random); when none "
            "is idle, ties among the shortest at random",
            "002 (its JFIQ); not the jfiq of 000",
            models=(CONTINUOUS, LIVE),
            ranks_whole_set=True,
            integer_keys=True,
            exact_rule=exact_rules.jsq_fiq,
            tie_break="the fastest idle server (ties at random), else a shortest queue at random ('JFIQ' of 002)",
            diffusion=DiffusionRule(
                "Corollary 4.7 ('JFIQ' of 002): eta = delta_{mu_min} (idle rate mu_min), alpha_1(u) = u F",
                "slowest",
                "law",
            ),
            decides_on_estimates=True,
            mean_field=MeanFieldRule(
                "idle-fastest-first", "idle servers filled in decreasing speed (the C* of Proposition 1 of 000)"
            ),
        ),
        PolicySpec(
            "jsq-lisf",
            JSQ_LISF,
            "join a shortest compatible queue; among idle servers the one idle longest; when none is idle, "
            "ties among the shortest at random",
            "002 (LISF)",
            ranks_whole_set=True,
            idle_order=True,
            exact_rule=exact_rules.jsq_lisf,
            tie_break="the idle server that became idle first (the initial idle servers tie, at random), "
            "else a shortest queue at random ('LISF' of 002)",
            diffusion=DiffusionRule(
                "Corollaries 4.5 / 4.6 with longest-idle-first among idle servers: the same limit as jsq",
                "size-biased",
                "law",
            ),
            decides_on_estimates=True,
            mean_field=MeanFieldRule(
                "idle-uniform", "longest-idle first: the same busy fractions as jsq (renewal-reward)"
            ),
        ),
        PolicySpec(
            "jsq-df-ds",
            JSQ_DF_DS,
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
            exact_rule=exact_rules.jsq_df_ds,
            mean_field=MeanFieldRule(
                "fast-slow-shortest", "JSQ(d_F, d_S) of Gardner et al. (the rule of hetlb's jsq-df-ds)"
            ),
        ),
        PolicySpec(
            "cache-aware",
            CACHE_AWARE,
            "with n_s the jobs at s: when max n - min n > abs and max n > rel min n, a shortest compatible "
            "queue; else, when the highest match ratio m_s / L is at least match, a server of the longest "
            "match; else the server whose index holds the fewest blocks; ties at random",
            "SGLang's router and SMG (cache_aware), vLLM's router (cache_aware); defaults of SMG 1.13",
            {
                "abs": (64.0, "absolute load gap beyond which the system is imbalanced", NONNEGATIVE),
                "rel": (1.5, "relative load gap beyond which the system is imbalanced", AT_LEAST_ONE),
                "match": (0.3, "the least match ratio that routes on the cache", PROBABILITY),
            },
            models=(CONTINUOUS,),
            speed_blind=True,
            reads_cache=True,
            exact_cache_rule="cache_aware_rule",
        ),
        PolicySpec(
            "prefix-score",
            PREFIX_SCORE,
            "the highest a m_s / L + b (q_max - n_s) / (q_max - q_min) + c (1 - u_s): the match ratio, the "
            "queue normalised over the compatible servers (1 when all are equal) and the free share of the "
            "cache (u_s: blocks held by running jobs over K_s, 0 without a cache); ties at random",
            "llm-d's inference scheduler: prefix-cache, queue and kv-cache-utilization scorers, max-score "
            "picker; weights of its default profile",
            {
                "prefix": (3.0, "weight a of the prefix-cache score", NONNEGATIVE),
                "queue": (2.0, "weight b of the queue score", NONNEGATIVE),
                "kv": (2.0, "weight c of the KV-cache utilisation score", NONNEGATIVE),
            },
            models=(CONTINUOUS,),
            speed_blind=True,
            reads_cache=True,
            exact_cache_rule="prefix_score_rule",
        ),
        PolicySpec(
            "chash",
            CHASH,
            "consistent hashing of the job's first block with bounded loads: clockwise from the block's "
            "point on a ring of 100 points a server, the first compatible server holding fewer than "
            "ceil(load (n + 1) / N_k) jobs, n the jobs at the N_k compatible servers",
            "Karger et al.; Mirrokni, Thorup and Zadimoghaddam (bounded loads); the session affinity of "
            "Envoy's RING_HASH, nginx's hash consistent and vllm-router's consistent_hash",
            {"load": (1.25, "the bound on a server's jobs over the mean", AT_LEAST_ONE)},
            models=(CONTINUOUS,),
            speed_blind=True,
            reads_cache=True,
            exact_cache_rule="chash_rule",
        ),
        PolicySpec(
            "balanced-pandas",
            BALANCED_PANDAS,
            "the least (U_s / r_s) (1 + W (L - m_s)) / r_s: the weighted workload of s (U_s the expected "
            "work of its jobs, each 1 + W (L_j - m_j) at its dispatch) over the job's own rate there, "
            "r_s = mu_s phi_s(b') / (1 + W (L - m_s)); ties at random",
            "Balanced-PANDAS (Xie, Yekkehkhany and Lu; Yekkehkhany, Hojjati and Hajiesmaili): its local and "
            "remote rates at every level of the match",
            models=(CONTINUOUS,),
            reads_cache=True,
            exact_cache_rule="balanced_pandas_rule",
        ),
        PolicySpec(
            "eft",
            EFT,
            "earliest expected finish: the least (U_s + 1 + (1 + evict) W (L - m_s)) / (mu_s phi_s(b')), b' = "
            "min(n_s + 1, c_s): the work expected at s with the job's own uncached prefill and decode, at "
            "s's rate, a miss priced also for the blocks it evicts (evict = 0: the job's own time); sed "
            "without a cache or with W = 0; ties at random",
            "hetlb (docs/background/prefix-caches.md)",
            {"evict": (0.0, "weight of the prefill a miss's evictions cost later jobs, per block missed", NONNEGATIVE)},
            models=(CONTINUOUS,),
            reads_cache=True,
            exact_cache_rule="eft_rule",
        ),
        PolicySpec(
            "l-jsq",
            L_JSQ,
            "LED: each dispatcher joins a server with the least local estimate, ties at random; estimates "
            "change only at updates",
            "001 section 5 (L-JSQ); LSQ of Vargaftik et al.",
            dict(LED_UPDATE_PARAMETERS),
            models=(SLOTTED, LIVE),
            on_local_estimates=True,
            slotted_information=LED_INFORMATION,
            decides_on_estimates=True,
            led_alias="jsq",
            speed_blind=True,
        ),
        PolicySpec(
            "l-jba",
            L_JBA,
            "LED: a server whose local estimate is below the mean estimate, with probability proportional "
            "to its speed among those; if none is below, the empty_set rule",
            "001 section 5 (L-JBA); the rule is inferred (docs/reference/slotted.md)",
            {
                **LED_UPDATE_PARAMETERS,
                "average": (
                    "plain",
                    "plain mean of the estimates, or rate-weighted (sum mu_n Q~_n / mu_Sigma)",
                    JBA_AVERAGES,
                ),
                "inclusive": (False, "below means <= instead of <", FLAG),
                "empty_set": (
                    "weighted-random",
                    "when no estimate is below: weighted-random or l-jsq",
                    JBA_EMPTY_SET,
                ),
            },
            models=(SLOTTED, LIVE),
            on_local_estimates=True,
            slotted_information="its local estimates Q~^m(t) and the speeds, reset to Q_n(t+1) by the update strategy",
            estimate_rule=exact_rules.below_average,
            decides_on_estimates=True,
        ),
        PolicySpec(
            "l-pod",
            L_POD,
            "LED: sample min(d, N) distinct servers uniformly, join the least local estimate, ties at random",
            "001 section 5 (L-Pod)",
            {**LED_UPDATE_PARAMETERS, "d": (2, "number of servers sampled", COUNT)},
            models=(SLOTTED, LIVE),
            on_local_estimates=True,
            slotted_information=LED_INFORMATION,
            estimate_rule=exact_rules.pod,
            decides_on_estimates=True,
            speed_blind=True,
        ),
    ]
}

BY_CODE: dict[int, PolicySpec] = {spec.code: spec for spec in POLICIES.values()}
"""The registered policies by kernel code."""


def policies_where(**fields) -> tuple[str, ...]:
    """The ids of the registered policies whose spec has every given field value, e.g.
    ``policies_where(ranks_whole_set=True)``; a value of True also matches any truthy field (a rule,
    a text), and ``model="slotted"`` selects the policies that run in that model."""
    model = fields.pop("model", None)
    return tuple(
        spec.id
        for spec in POLICIES.values()
        if (model is None or model in spec.models)
        and all(
            bool(getattr(spec, name)) == value if isinstance(value, bool) else getattr(spec, name) == value
            for name, value in fields.items()
        )
    )


def make_policy(policy_id: str, **params) -> Policy:
    """Validate a policy id and its parameters; unspecified parameters take their defaults.

    Parameters
    ----------
    policy_id
        A registered policy id (``hetlb policies`` lists them).
    **params
        The policy's parameters by name, e.g. ``d=2`` for ``pod``.

    Returns
    -------
    Policy
        The policy with every parameter's value.

    Raises
    ------
    InputError
        For an unknown id, an unknown parameter or a value out of its range.
    """
    if policy_id not in POLICIES:
        raise InputError("policy", f"unknown policy {policy_id!r}; choose one of: {', '.join(POLICIES)}")
    spec = POLICIES[policy_id]
    unknown = sorted(set(params) - set(spec.parameters))
    if unknown:
        allowed = ", ".join(spec.parameters) or "none"
        raise InputError(f"policy {policy_id}", f"has no parameter {unknown[0]!r} (its parameters: {allowed})")
    values = {name: params.get(name, default) for name, (default, _, _) in spec.parameters.items()}
    for name, (_, _, kind) in spec.parameters.items():
        check_parameter(f"policy {policy_id}.{name}", kind, values[name])
    return Policy(policy_id, values)


def resolve_policy(policy, policy_params: dict, caller: str = "simulate") -> Policy:
    """The Policy that ``caller`` runs: a policy id with its parameters as keywords, or a Policy.

    A keyword that is no parameter of any policy is an unexpected argument of ``caller`` and
    raises :class:`hetlb.errors.UnexpectedKeyword` (a TypeError too), as Python would.
    """
    strangers = sorted(name for name in policy_params if not any(name in spec.parameters for spec in POLICIES.values()))
    if strangers:
        policy_id = policy if isinstance(policy, str) else getattr(policy, "id", policy)
        own = POLICIES[policy_id].parameters if policy_id in POLICIES else {}
        raise UnexpectedKeyword(
            strangers[0],
            f"unexpected keyword argument of hetlb.{caller}, and no parameter of policy {policy_id} "
            f"(its parameters: {', '.join(own) or 'none'})",
        )
    if isinstance(policy, str):
        return make_policy(policy, **policy_params)
    if policy_params:
        raise InputError("policy", "give parameters either in the Policy object or as keywords, not both")
    if not isinstance(policy, Policy):
        raise InputError("policy", "must be a policy id or a hetlb.Policy")
    return policy


# --- policies registered from outside hetlb ------------------------------------------------------

FIRST_REGISTERED_CODE = 100
"""Kernel codes of the policies of :func:`register_policy` start here, above every built-in one."""

KEY_SIGNATURE = ("queue_len", "speed_class", "n_classes", "speed", "idle_since")
"""The arguments of a registered selection key, in order: the server's queue length (jobs, the one
in service included), its speed class (0 = fastest), the number of classes, its speed (mu_s) and
the time it became idle (meaningful while queue_len = 0)."""
EXACT_RULE_SIGNATURE = ("queue_len", "speed", "is_fast", "params", "idle_rank")
"""The arguments of an exact rule (hetlb.policies.exact_rules)."""


def _check_arguments(field_name: str, function, names: tuple) -> None:
    import inspect

    if not callable(function):
        raise InputError(field_name, f"must be a function of ({', '.join(names)})")
    try:
        parameters = inspect.signature(getattr(function, "py_func", function)).parameters
    except (TypeError, ValueError):
        return
    required = [p for p in parameters.values() if p.default is inspect.Parameter.empty]
    if not len(required) <= len(names) <= len(parameters):  # more parameters are fine with defaults
        raise InputError(field_name, f"must take {len(names)} arguments ({', '.join(names)}), takes {len(parameters)}")


def register_policy(
    policy_id: str,
    selection_key: Callable,
    definition: str,
    reference: str,
    *,
    integer_keys: bool = False,
    idle_order: bool = False,
    exact_rule: Callable | None = None,
    mean_field: MeanFieldRule | None = None,
) -> PolicySpec:
    """Register a ranking policy written outside hetlb: a job joins a compatible server of least
    ``selection_key``, ties uniformly at random (docs/how-to/your-own-policy.md).

    The key runs in the continuous simulator (``hetlb.simulate``, sweeps) in a copy of the kernel
    compiled with it once per process, not cached with the package. Registering an id again
    replaces a registered policy; a built-in id is refused.

    Parameters
    ----------
    policy_id
        The new policy's id.
    selection_key
        ``selection_key(queue_len, speed_class, n_classes, speed, idle_since)``: an @njit function
        (a plain one is compiled with numba's njit) of a server's queue length (jobs, the one in
        service included), speed class (0 = fastest of ``n_classes``), speed mu_s and the time it
        became idle, returning a number; the least key wins.
    definition
        The policy's definition in words (``hetlb policies`` shows it).
    reference
        Where the policy comes from.
    integer_keys
        Its keys are integers >= 0 (the O(1) key buckets serve it).
    idle_order
        It reads ``idle_since``.
    exact_rule
        Its routing probabilities (the arguments of hetlb.policies.exact_rules), written from the
        definition; with one, ``hetlb.theory.solve_exact`` covers it and ``hetlb.check_policy``
        holds the kernel against it.
    mean_field
        A ``MeanFieldRule`` of hetlb.theory.meanfield, when one of its fixed points is this
        policy's limit.

    Returns
    -------
    PolicySpec
        The registry entry.
    """
    if not isinstance(policy_id, str) or not policy_id or not all(c.isalnum() or c in "-_" for c in policy_id):
        raise InputError("policy id", f"must be a name of letters, digits, - and _, got {policy_id!r}")
    previous = POLICIES.get(policy_id)
    if previous is not None and previous.selection_key is None:
        raise InputError("policy id", f"{policy_id} is a built-in policy; choose another name")
    _check_arguments(f"policy {policy_id}.selection_key", selection_key, KEY_SIGNATURE)
    if exact_rule is not None:
        _check_arguments(f"policy {policy_id}.exact_rule", exact_rule, EXACT_RULE_SIGNATURE)
    for name, text in (("definition", definition), ("reference", reference)):
        if not isinstance(text, str) or not text.strip():
            raise InputError(f"policy {policy_id}.{name}", "must be a non-empty text")
    if mean_field is not None and not isinstance(mean_field, MeanFieldRule):
        raise InputError(f"policy {policy_id}.mean_field", "must be a hetlb.policies.registry.MeanFieldRule")
    if previous is not None:
        code = previous.code
    else:
        code = max(FIRST_REGISTERED_CODE - 1, *BY_CODE) + 1
    try:
        spec = PolicySpec(
            policy_id,
            code,
            definition,
            reference,
            ranks_whole_set=True,
            integer_keys=bool(integer_keys),
            idle_order=bool(idle_order),
            exact_rule=exact_rule,
            mean_field=mean_field,
            selection_key=selection_key,
        )
    except ValueError as error:
        raise InputError(f"policy {policy_id}", str(error)) from None
    POLICIES[policy_id] = spec
    BY_CODE[code] = spec
    return spec


def unregister_policy(policy_id: str) -> None:
    """Remove a policy of :func:`register_policy` (a built-in one stays).

    Parameters
    ----------
    policy_id
        The id given to register_policy.
    """
    spec = POLICIES.get(policy_id)
    if spec is None or spec.selection_key is None:
        raise InputError("policy id", f"{policy_id!r} is no policy registered with register_policy")
    del POLICIES[policy_id]
    del BY_CODE[spec.code]
