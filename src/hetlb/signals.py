"""The update signals: every way a dispatcher learns the servers' load, one :class:`Signal` each.

An entry of :data:`SIGNALS` holds everything hetlb knows of a signal: its definition, its
parameters with their defaults and kinds, whether it sends messages (which may then be delayed),
whether a dispatcher that uses it decides on the truth, the models that implement it (the
continuous model of M dispatchers, ``hetlb.simulate(dispatchers=M, update=...)``, and the slotted
model of 001, ``hetlb.simulate_slotted``) and its live forms, the signals of ``hetlb serve
--signals`` (a snapshot is a poll of ``/load`` or a scrape of an engine's metrics), each with the
update signals that are its simulated twin. Every other table of signals is
read from these entries: the continuous model's updates (hetlb.model.dispatchers), the LED
policies' update parameters (:data:`LED_UPDATE_PARAMETERS`, hetlb.policies.registry), the kernel's
message counts, serve's ``--signals`` (hetlb.gateway.config) and the testbed's twin of a live run
(:func:`model_twin`). Adding a signal is one entry here and its kernel or live support
(docs/how-to/add-a-signal.md).

An update specification means the same in every model: comma-separated signals, each with
``:name=value`` parameters, e.g. ``"piggyback,push:p_hat=0.1:d=2"``, or a table of signals
``{"push": {"p_hat": 0.1, "d": 2}, "piggyback": {}}``. The continuous model takes any set of its
signals (``exact`` and ``probe`` alone); the slotted model takes one of its strategies, ``push``
or ``pull``, with its parameters, and ``increment`` (:func:`slotted_update`). The signals that send
messages take ``delay=X`` (constant, time units) or ``mean_delay=X`` (exponential of mean X) in the
continuous model. Live, ``hetlb serve --signals inflight,piggyback,push,poll:tau=100ms`` or
``inflight,metrics:vllm:tau=50ms`` names the live forms (docs/reference/serve.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from hetlb import validation
from hetlb.errors import InputError
from hetlb.validation import COUNT, FLAG, POSITIVE_PROBABILITY, POSITIVE_TIME

CONTINUOUS, SLOTTED = "continuous", "slotted"
MODELS = (CONTINUOUS, SLOTTED)
"""The models that may implement a signal: many dispatchers in continuous time
(hetlb.simulation.dispatchers) and the slotted model of 001 (hetlb.simulation.slotted)."""

DURATION = "a duration such as 100ms or 0.5s"
"""The kind of a live signal's time parameter (seconds; hetlb.gateway.config.duration reads it)."""
WORD = "a name"
"""The kind of a live signal's positional option (metrics' engine; hetlb.gateway.config checks it)."""

EXAMPLE = "piggyback,push:p_hat=0.1:d=2"
SLOTTED_EXAMPLE = "pull:p_hat=0.5:trigger=departure"
DELAY_KEYS = ("delay", "mean_delay")
"""A message signal's delay in the continuous model: constant, or exponential of this mean."""


@dataclass(frozen=True)
class Parameter:
    """A parameter of a signal: its ``default``, what it means, its ``kind`` (a kind of
    hetlb.validation or a tuple of choices), the ``models`` that read it, and ``led_name``, its name
    among the LED policies' parameters in the slotted model (None: not there)."""

    default: object
    description: str
    kind: object
    models: tuple = MODELS
    led_name: str | None = None


@dataclass(frozen=True)
class LiveRun:
    """What a live signal's simulated twin depends on: the model's time unit (``time_unit_ms``,
    the testbed's mean_service_ms), the number of dispatchers, whether the policy decides on local
    estimates only (an LED policy, whose estimates change by updates only), serve's ``--p-hat``
    and ``--d``, and ``unseen_ms``, how long a completion stays unseen by its dispatcher (the
    forward delay plus the answer lag measured live; None: not measured), and ``snapshot_delay_ms``,
    the mean time from sending a poll or a scrape to reading its answer (measured live; None: not
    measured)."""

    time_unit_ms: float
    dispatchers: int = 1
    led: bool = False
    p_hat: float = 1.0
    d: int = 2
    unseen_ms: float | None = None
    snapshot_delay_ms: float | None = None

    @property
    def lagged(self) -> bool:
        return self.unseen_ms is not None and self.unseen_ms > 0

    def piggyback(self) -> dict:
        """The piggyback's parameters: the unseen time as its constant delay, in time units."""
        return self.delay(self.unseen_ms)

    def snapshot(self, tau_s: float) -> dict:
        """A snapshot every ``tau_s`` seconds, each dispatcher at its own phase, its answers late
        by the measured snapshot delay: the snapshot's parameters in time units."""
        return {
            "tau": tau_s * 1000.0 / self.time_unit_ms,
            "phases": "independent",
            **self.delay(self.snapshot_delay_ms),
        }

    def delay(self, ms: float | None) -> dict:
        """A constant message delay of ``ms`` milliseconds in time units (empty: none)."""
        return {"delay": ms / self.time_unit_ms} if ms is not None and ms > 0 else {}


@dataclass(frozen=True)
class LiveSignal:
    """A signal's live form: its ``name`` in ``hetlb serve --signals``, what the dispatcher does,
    its options (name -> :class:`Parameter`, e.g. poll's tau), whether it is among the default
    signals, and ``twin(options, run)``: the update signals of the continuous model that simulate
    it in a :class:`LiveRun` (a table of signals; ``exact`` where the dispatcher knows every number
    at once). ``positional``: the option (of kind WORD) given as the first word after the name,
    without its key (metrics' engine: ``metrics:vllm:tau=50ms``)."""

    name: str
    definition: str
    twin: Callable[[dict, LiveRun], dict]
    options: dict = field(default_factory=dict)
    default: bool = False
    positional: str | None = None

    def __post_init__(self):
        if self.positional is not None and self.options[self.positional].kind != WORD:
            raise ValueError(f"live signal {self.name}: its positional option is a word")

    def text(self, options: dict) -> str:
        """The signal's text with ``options`` (live name -> value; durations in ms)."""
        parts = [self.name]
        for key, value in options.items():
            parts.append(value if key == self.positional else f"{key}={value * 1000:g}ms")
        return ":".join(parts)

    @property
    def example(self) -> str:
        return self.text({key: option.default for key, option in self.options.items()})


@dataclass(frozen=True)
class Signal:
    """A registered update signal.

    ``parameters``: name -> :class:`Parameter`. ``messages``: it sends messages (which the
    continuous model may delay, ``delay=`` or ``mean_delay=``). ``truth``: a dispatcher using it
    decides on the true numbers in system, so it takes no other signal. ``counted``: the
    continuous model counts its messages (or local updates) per job. ``models``: the models that
    implement it. ``led_flag``: in the slotted model, the LED policies' flag that switches it on
    (for a signal that is not a strategy). ``strategy``: an update strategy of 001's slotted model,
    of which a run takes exactly one. ``live``: its forms in ``hetlb serve`` (none: not live).
    """

    name: str
    definition: str
    cost: str
    parameters: dict = field(default_factory=dict)
    messages: bool = False
    truth: bool = False
    counted: bool = True
    models: tuple = (CONTINUOUS,)
    strategy: bool = False
    led_flag: str | None = None
    led_description: str = ""
    live: tuple[LiveSignal, ...] = ()

    def __post_init__(self):
        if set(self.models) - set(MODELS):
            raise ValueError(f"signal {self.name}: unknown models {sorted(set(self.models) - set(MODELS))}")
        if (self.strategy or self.led_flag) and SLOTTED not in self.models:
            raise ValueError(f"signal {self.name}: a strategy or an LED flag belongs to the slotted model")
        if self.truth and self.messages:
            raise ValueError(f"signal {self.name}: a signal of the truth sends no messages")

    def parameters_in(self, model: str) -> dict:
        """The parameters ``model`` reads."""
        return {name: p for name, p in self.parameters.items() if model in p.models}

    def defaults(self, model: str) -> dict:
        return {name: p.default for name, p in self.parameters_in(model).items()}


def joined(names) -> str:
    """``a, b and c``."""
    names = list(names)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def own_counts(options: dict, run: LiveRun) -> dict:
    """inflight: with one dispatcher and no lag, its own in-flight counts are the numbers in
    system (the single-dispatcher model); else the dispatcher counts what it sends (increment) and
    learns a server's number when one of its jobs is answered (piggyback), or, for an LED policy,
    whose estimates change by updates only, nothing."""
    if run.dispatchers == 1 and not run.lagged:
        return {"exact": {}}
    return {} if run.led else {"increment": {}, "piggyback": run.piggyback()}


SIGNALS: dict[str, Signal] = {
    signal.name: signal
    for signal in [
        Signal(
            "exact",
            "every dispatcher knows every number in system at every instant (the single dispatcher's knowledge)",
            "none",
            truth=True,
            counted=False,
        ),
        Signal(
            "probe",
            "true probes: each decision asks the servers its policy reads (pod: d, a ranking policy: every "
            "compatible server) and decides on their answers",
            "2 per server asked",
            truth=True,
        ),
        Signal(
            "increment",
            "a dispatcher adds each job it sends to its own estimate, at most the buffer (local, the LSQ "
            "variant); a late message gets the jobs sent to that server since its observation added",
            "none (local)",
            models=MODELS,
            led_flag="increment_on_dispatch",
            led_description="add the jobs a dispatcher sends to its own estimate (an LSQ variant)",
            live=(
                LiveSignal(
                    "inflight",
                    "its own in-flight count per backend, exact for its own requests",
                    own_counts,
                    default=True,
                ),
            ),
        ),
        Signal(
            "piggyback",
            "a server's response to a job (its completion, or its rejection at a full buffer) tells the "
            "job's dispatcher the server's number in system",
            "1 per job",
            messages=True,
            live=(
                LiveSignal(
                    "piggyback",
                    "X-Queue-Length: n on a backend's answer, the number in system after that request left; else "
                    "the ORCA endpoint-load-metrics header's named metrics num_requests_running + "
                    "num_requests_waiting",
                    lambda options, run: {"piggyback": run.piggyback()},
                    default=True,
                ),
            ),
        ),
        Signal(
            "push",
            "after each decision (slotted: each slot with an arrival, push_trigger), with probability "
            "p_hat, the dispatcher probes d servers drawn uniformly without replacement",
            "2 d per push: 2 d p_hat per decision",
            {
                "p_hat": Parameter(
                    1.0, "probability of an update at each trigger", POSITIVE_PROBABILITY, led_name="p_hat"
                ),
                "d": Parameter(2, "servers a push samples, without replacement", COUNT, led_name="push_d"),
                "trigger": Parameter(
                    "arrival",
                    "push after each slot with >= 1 arrival at the dispatcher, or every slot",
                    ("arrival", "every-slot"),
                    models=(SLOTTED,),
                    led_name="push_trigger",
                ),
            },
            messages=True,
            models=MODELS,
            strategy=True,
            live=(
                LiveSignal(
                    "push",
                    "with probability p_hat per request (--p-hat), GET /load of d backends (--d) sampled without "
                    "replacement, off the request's path",
                    lambda options, run: {"push": {"p_hat": run.p_hat, "d": run.d}},
                ),
            ),
        ),
        Signal(
            "pull",
            "after each departure (slotted: each slot with a departure, pull_trigger), with probability "
            "p_hat, the server reports its number to one dispatcher drawn uniformly",
            "1 per report: p_hat per departure",
            {
                "p_hat": Parameter(
                    1.0, "probability of an update at each trigger", POSITIVE_PROBABILITY, led_name="p_hat"
                ),
                "trigger": Parameter(
                    "departure-slot",
                    "pull after each slot with >= 1 departure at the server, after each departure, or every slot",
                    ("departure-slot", "departure", "every-slot"),
                    models=(SLOTTED,),
                    led_name="pull_trigger",
                ),
            },
            messages=True,
            models=MODELS,
            strategy=True,
        ),
        Signal(
            "snapshot",
            "every dispatcher learns every server's number every tau, all at the same instants (aligned: a "
            "shared cache) or each at its own phase, uniform in [0, tau); poisson: exponential times between "
            "polls of mean tau",
            "N per dispatcher per tau",
            {
                "tau": Parameter(1.0, "time between two polls", POSITIVE_TIME),
                "phases": Parameter(
                    "aligned", "the dispatchers poll together or each at its phase", ("aligned", "independent")
                ),
                "timing": Parameter("periodic", "periodic polls or a Poisson process of them", ("periodic", "poisson")),
            },
            messages=True,
            live=(
                LiveSignal(
                    "poll",
                    "GET /load of every backend every tau (a snapshot, what makes replicas herd)",
                    lambda options, run: {"snapshot": run.snapshot(options["tau"])},
                    options={"tau": Parameter(0.1, "time between two polls of every backend (seconds)", DURATION)},
                ),
                LiveSignal(
                    "metrics",
                    "GET an inference engine's Prometheus metrics of every backend every tau; its number in "
                    "system is running + waiting (vllm, sglang, or an [engine_metrics] table)",
                    lambda options, run: {"snapshot": run.snapshot(options["tau"])},
                    options={
                        "engine": Parameter("vllm", "the engine whose metric names are read", WORD),
                        "tau": Parameter(
                            0.05,
                            "time between two scrapes of every backend (seconds; the Inference Extension's)",
                            DURATION,
                        ),
                    },
                    positional="engine",
                ),
            ),
        ),
    ]
}
"""Every update signal, in the order the error messages and the documentation list them."""


def names_in(model: str) -> tuple[str, ...]:
    """The signals that ``model`` implements."""
    return tuple(name for name, signal in SIGNALS.items() if model in signal.models)


MESSAGE_KINDS = tuple(
    [s.name for s in SIGNALS.values() if s.messages and CONTINUOUS in s.models]
    + [s.name for s in SIGNALS.values() if s.counted and not s.messages and CONTINUOUS in s.models]
)
"""The update kinds the continuous kernel counts, in the order of its counts
(hetlb.kernels.updates): those that send messages first (each may be delayed), then the others."""

LED_STRATEGIES = tuple(name for name, signal in SIGNALS.items() if signal.strategy)
"""The update strategies of 001 (the LED policies' ``update``); the first is the default."""


def led_update_parameters() -> dict:
    """The LED policies' update parameters of the slotted model, read from the entries:
    name -> (default, description, kind), as hetlb.policies.registry declares parameters."""
    table: dict = {
        "update": (
            LED_STRATEGIES[0],
            "push: the dispatcher probes push_d sampled servers; pull: servers report to a random dispatcher",
            LED_STRATEGIES,
        )
    }
    for name in LED_STRATEGIES:
        for p in SIGNALS[name].parameters_in(SLOTTED).values():
            table.setdefault(p.led_name, (p.default, p.description, p.kind))
    for signal in SIGNALS.values():
        if signal.led_flag is not None:
            table[signal.led_flag] = (False, signal.led_description, FLAG)
    return table


LED_UPDATE_PARAMETERS = led_update_parameters()
"""Parameters shared by the LED policies: the update strategy of 001 section 5
(docs/reference/slotted.md)."""

LIVE_FORMS: dict[str, LiveSignal] = {live.name: live for signal in SIGNALS.values() for live in signal.live}
"""The signals of ``hetlb serve --signals``: live name -> its live form, in the entries' order."""

LIVE_SIGNALS: dict[str, Signal] = {live.name: signal for signal in SIGNALS.values() for live in signal.live}
"""The entry of each live signal, by its live name (several live forms may share an entry)."""


def default_live_signals() -> dict:
    """The signals of ``hetlb serve`` without --signals (inflight,piggyback): live name -> options."""
    return {name: {} for name, live in LIVE_FORMS.items() if live.default}


# --- the specification text --------------------------------------------------------------------


def parse_spec(value, example: str = EXAMPLE) -> dict[str, dict]:
    """{signal: parameters as given} from a specification text (``"piggyback,push:p_hat=0.1:d=2"``)
    or a table of signals; only the syntax is checked here."""
    if isinstance(value, str):
        entries: dict[str, dict] = {}
        for part in value.split(","):
            name, *pairs = part.strip().split(":")
            if name in entries:
                raise InputError("update", f"signal {name!r} given twice in {value!r}")
            params = {}
            for pair in pairs:
                key, equals, text = pair.partition("=")
                if not equals or not key:
                    raise InputError("update", f"{pair!r} in {value!r} is no name=value (e.g. {example})")
                params[key.strip()] = parse_value(text.strip())
            entries[name] = params
        return entries
    if isinstance(value, dict):
        for name, given in value.items():
            if not isinstance(given, dict):
                raise InputError(f"update.{name}", f"must be a table of parameters, got {given!r}")
        return {name: dict(given) for name, given in value.items()}
    raise InputError("update", f"must be a string such as {example!r} or a table of signals, got {value!r}")


def parse_value(text: str):
    """A parameter's value from its text: an integer, a number, or a word."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def text(entries: dict) -> str:
    """The specification text of a table of signals (numbers as %g)."""
    parts = []
    for name, params in entries.items():
        pairs = [f"{key}={value:g}" if isinstance(value, float) else f"{key}={value}" for key, value in params.items()]
        parts.append(":".join([name, *pairs]))
    return ",".join(parts)


# --- checks --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Delay:
    """A message's delay: none, a constant ``mean``, or exponential with mean ``mean`` (time units)."""

    law: str = "none"
    mean: float = 0.0

    def describe(self) -> dict:
        return {"law": self.law, "mean": self.mean}

    def given(self) -> dict:
        """The delay as a specification gives it (empty: none)."""
        return {} if self.law == "none" else {DELAY_KEYS[self.law != "constant"]: self.mean}


def checked(model: str, entries: dict) -> tuple[dict, dict]:
    """(signal -> parameters with their defaults, signal -> :class:`Delay` of each message signal)
    of a parsed specification in ``model``, every name and value checked against the entries."""
    known = names_in(model)
    signals, delays = {}, {}
    for name, given in entries.items():
        if name in SIGNALS and name not in known:
            raise InputError("update", f"{name} does not run in the {model} model; its signals: {', '.join(known)}")
        if name not in known:
            where = f" of the {model} model" if model != CONTINUOUS else ""
            raise InputError("update", f"unknown signal {name!r}; the signals{where}: {', '.join(known)}")
        signal = SIGNALS[name]
        params = dict(given)
        delay = pop_delay(model, signal, params)
        if delay is not None:
            delays[name] = delay
        allowed = signal.parameters_in(model)
        unknown = sorted(set(params) - set(allowed))
        if unknown:
            delay_keys = DELAY_KEYS if signal.messages and model == CONTINUOUS else ()
            names = ", ".join([*allowed, *delay_keys]) or "none"
            where = f" in the {model} model" if unknown[0] in signal.parameters else ""
            raise InputError(f"update.{name}", f"has no parameter {unknown[0]!r}{where} (its parameters: {names})")
        values = {**signal.defaults(model), **params}
        signals[name] = {
            key: validation.of_kind(f"update.{name}.{key}", allowed[key].kind, values[key]) for key in allowed
        }
    if not signals:
        raise InputError("update", "give at least one signal")
    truth = [name for name in signals if SIGNALS[name].truth]
    if truth and len(signals) > 1:
        raise InputError(
            "update", f"{truth[0]} decides on the truth: it takes no other signal, got {', '.join(signals)}"
        )
    if model == CONTINUOUS:
        for name in signals:
            if SIGNALS[name].messages and name not in delays:
                delays[name] = Delay()
    return signals, delays


def pop_delay(model: str, signal: Signal, params: dict) -> Delay | None:
    """The delay given among a signal's ``params`` (removed from them), or None."""
    constant, mean = (params.pop(key, None) for key in DELAY_KEYS)
    if constant is None and mean is None:
        return None
    field_of = f"update.{signal.name}"
    if model != CONTINUOUS:
        raise InputError(field_of, f"has no delay in the {model} model (its updates arrive within the slot)")
    if not signal.messages:
        senders = joined(name for name, s in SIGNALS.items() if s.messages and model in s.models)
        raise InputError(field_of, f"has no delay (only {senders} send messages)")
    if constant is not None and mean is not None:
        raise InputError(field_of, "give either delay (constant) or mean_delay (exponential), not both")
    value = constant if constant is not None else mean
    if not validation.is_real(value) or not math.isfinite(value) or value < 0:
        raise InputError(f"{field_of}.{DELAY_KEYS[constant is None]}", "must be a time >= 0")
    if value == 0:
        return Delay()
    return Delay("constant" if constant is not None else "exponential", float(value))


# --- the slotted model ---------------------------------------------------------------------------


def slotted_update(params: dict) -> dict:
    """The LED policy parameters ``params`` with their ``update`` read as an update specification
    of the slotted model: one strategy (``push`` or ``pull``) with its parameters and, optionally,
    ``increment``; e.g. ``{"update": "pull:p_hat=0.5:trigger=departure"}`` becomes ``{"update":
    "pull", "p_hat": 0.5, "pull_trigger": "departure"}``. A parameter given both ways is refused; a
    single word is the strategy's name, which the policy checks."""
    value = params.get("update")
    if value is None or (isinstance(value, str) and not set(value) & {",", ":"}):
        return params
    entries = parse_spec(params["update"], SLOTTED_EXAMPLE)
    signals, _ = checked(SLOTTED, entries)
    strategies = [name for name in signals if SIGNALS[name].strategy]
    if len(strategies) != 1:
        raise InputError(
            "update",
            f"the slotted model takes one of {' or '.join(LED_STRATEGIES)}, got {', '.join(signals) or 'none'}",
        )
    led = {key: value for key, value in params.items() if key != "update"}
    given = {"update": strategies[0]}
    for name in signals:
        signal = SIGNALS[name]
        if signal.led_flag is not None:
            given[signal.led_flag] = True
        for key in entries[name]:
            given[signal.parameters[key].led_name] = signals[name][key]
    twice = sorted(set(given) & set(led))
    if twice:
        raise InputError(f"update.{twice[0]}", "given twice: in the update and as a policy parameter")
    return {**led, **given}


def update_help() -> str:
    """The help of ``--update``: one meaning in both models."""
    strategies = " or ".join(LED_STRATEGIES)
    flags = ", ".join(s.name for s in SIGNALS.values() if s.led_flag)
    return (
        f"the update signals, e.g. {EXAMPLE}: continuous (with --dispatchers) any of "
        f"{', '.join(names_in(CONTINUOUS))}; slotted: one of {strategies} with its parameters, and {flags} "
        f"(e.g. {SLOTTED_EXAMPLE}; or {LED_STRATEGIES[0]} with --p-hat, --push-d, ...); docs/reference/dispatchers.md"
    )


# --- the live side ------------------------------------------------------------------------------


def live_help() -> str:
    """The help of ``hetlb serve --signals``."""
    forms = ", ".join(live.example for live in LIVE_FORMS.values())
    return f"load signals among {forms} (default {','.join(default_live_signals())})"


def model_twin(chosen: dict, run: LiveRun) -> dict | None:
    """The update signals of the continuous model (a table of signals) that simulate the live
    signals ``chosen`` (live name -> options) in ``run``, each entry's twin in the entries' order;
    None when a dispatcher knows every number at once (the single-dispatcher model). Push probes
    arrive at once in the twin; the piggybacked answers carry the unseen time, the snapshots (polls
    and scrapes) the measured snapshot delay."""
    twin: dict = {}
    for name, live in LIVE_FORMS.items():
        if name in chosen:
            twin.update(live.twin(chosen[name], run))
    return None if any(SIGNALS[name].truth for name in twin) else twin
