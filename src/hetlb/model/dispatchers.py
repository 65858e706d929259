"""The dispatchers of the continuous model: how many, how the arrivals split among them, and the
update signals that refresh their estimates (docs/reference/dispatchers.md).

An update specification is a comma-separated list of signals, each with ``:name=value``
parameters, e.g. ``"piggyback,push:p_hat=0.1:d=2"``:

- ``exact``: every dispatcher knows every number in system at every instant (no messages);
- ``probe``: true probes: each decision asks the servers its policy reads (pod: d, a ranking
  policy: every compatible server) and decides on their answers, 2 messages per server asked;
- ``increment``: a dispatcher adds each job it sends to its own estimate (local, no message);
- ``piggyback``: a server's response to a job (its completion, or its rejection at a full buffer)
  tells the job's dispatcher the server's number in system;
- ``push:p_hat=P:d=D``: after each decision, with probability P, the dispatcher probes D servers
  drawn uniformly without replacement (D probes and D replies);
- ``pull:p_hat=P``: after each departure, with probability P, the server reports its number to
  one dispatcher drawn uniformly (one message);
- ``snapshot:tau=T:phases=aligned|independent:timing=periodic|poisson``: every dispatcher learns
  every server's number every T time units (N messages per dispatcher per poll), all at the same
  instants (aligned: a shared cache refreshed every T) or each at its own phase, drawn uniformly
  in [0, T); ``timing=poisson`` makes the times between polls exponential with mean T.

The four message signals take ``delay=X`` (a constant delay, time units) or ``mean_delay=X`` (an
exponential delay of mean X); without either, messages arrive at once. A message carries the
number the server held when it was sent, and a dispatcher applies it only if it observed the
server no earlier than what its estimate holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from hetlb import validation
from hetlb.errors import InputError

SIGNALS = ("exact", "probe", "increment", "piggyback", "push", "pull", "snapshot")
TRUTH_SIGNALS = ("exact", "probe")
"""Signals with which a dispatcher decides on the truth: they take no other signal."""
DELAYED_SIGNALS = ("piggyback", "push", "pull", "snapshot")
PHASES = ("aligned", "independent")
TIMINGS = ("periodic", "poisson")

SIGNAL_PARAMETERS: dict[str, dict] = {
    "exact": {},
    "probe": {},
    "increment": {},
    "piggyback": {},
    "push": {"p_hat": 1.0, "d": 2},
    "pull": {"p_hat": 1.0},
    "snapshot": {"tau": 1.0, "phases": "aligned", "timing": "periodic"},
}
"""Each signal's parameters and their defaults (push's are 001's: 2 d p_hat = 4 messages per
decision, the overhead of pod(2)); the delayed signals also take ``delay`` or ``mean_delay``."""

EXAMPLE = "piggyback,push:p_hat=0.1:d=2"


@dataclass(frozen=True)
class Delay:
    """A message's delay: none, a constant ``mean``, or exponential with mean ``mean`` (time units)."""

    law: str = "none"
    mean: float = 0.0

    def describe(self) -> dict:
        return {"law": self.law, "mean": self.mean}


@dataclass(frozen=True)
class Updates:
    """Parsed update signals: ``signals`` maps each signal given to its parameters (defaults
    filled in), ``delays`` each delayed signal to its :class:`Delay`."""

    signals: dict = field(default_factory=dict)
    delays: dict = field(default_factory=dict)

    @classmethod
    def parse(cls, value) -> Updates:
        """Updates from a specification string (the module's docstring), a mapping of signal ->
        parameters (a TOML table: ``{"push": {"p_hat": 0.1, "d": 2}, "piggyback": {}}``), or an
        Updates."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            entries = {}
            for part in value.split(","):
                name, *pairs = part.strip().split(":")
                if name in entries:
                    raise InputError("update", f"signal {name!r} given twice in {value!r}")
                params = {}
                for pair in pairs:
                    key, equals, text = pair.partition("=")
                    if not equals or not key:
                        raise InputError("update", f"{pair!r} in {value!r} is no name=value (e.g. {EXAMPLE})")
                    params[key.strip()] = parse_value(text.strip())
                entries[name] = params
            return cls.from_mapping(entries)
        if isinstance(value, dict):
            return cls.from_mapping(value)
        raise InputError("update", f"must be a string such as {EXAMPLE!r} or a table of signals, got {value!r}")

    @classmethod
    def from_mapping(cls, entries: dict) -> Updates:
        signals, delays = {}, {}
        for name, given in entries.items():
            if name not in SIGNALS:
                raise InputError("update", f"unknown signal {name!r}; the signals: {', '.join(SIGNALS)}")
            if not isinstance(given, dict):
                raise InputError(f"update.{name}", f"must be a table of parameters, got {given!r}")
            params = dict(given)
            delay = pop_delay(name, params)
            if delay is not None:
                delays[name] = delay
            allowed = SIGNAL_PARAMETERS[name]
            unknown = sorted(set(params) - set(allowed))
            if unknown:
                names = ", ".join([*allowed, *(("delay", "mean_delay") if name in DELAYED_SIGNALS else ())]) or "none"
                raise InputError(f"update.{name}", f"has no parameter {unknown[0]!r} (its parameters: {names})")
            signals[name] = check_parameters(name, {**allowed, **params})
        if not signals:
            raise InputError("update", "give at least one signal")
        truth = [name for name in signals if name in TRUTH_SIGNALS]
        if truth and len(signals) > 1:
            raise InputError(
                "update", f"{truth[0]} decides on the truth: it takes no other signal, got {', '.join(signals)}"
            )
        for name in DELAYED_SIGNALS:
            if name in signals and name not in delays:
                delays[name] = Delay()
        return cls(signals, delays)

    @property
    def truth(self) -> bool:
        """Whether the dispatchers decide on the truth (exact knowledge or true probes)."""
        return any(name in self.signals for name in TRUTH_SIGNALS)

    def describe(self) -> dict:
        return {
            name: {**params, **({"delay": self.delays[name].describe()} if name in self.delays else {})}
            for name, params in self.signals.items()
        }

    def text(self) -> str:
        """The specification string of these updates."""
        parts = []
        for name, params in self.signals.items():
            pairs = [
                f"{key}={value:g}" if isinstance(value, float) else f"{key}={value}" for key, value in params.items()
            ]
            delay = self.delays.get(name)
            if delay is not None and delay.law != "none":
                pairs.append(f"{'delay' if delay.law == 'constant' else 'mean_delay'}={delay.mean:g}")
            parts.append(":".join([name, *pairs]))
        return ",".join(parts)


def parse_value(text: str):
    """A parameter's value from its text: an integer, a number, or a word."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def pop_delay(name: str, params: dict) -> Delay | None:
    """The delay given among a signal's ``params`` (removed from them), or None."""
    constant, mean = params.pop("delay", None), params.pop("mean_delay", None)
    if constant is None and mean is None:
        return None
    if name not in DELAYED_SIGNALS:
        raise InputError(f"update.{name}", "has no delay (only piggyback, push, pull and snapshot send messages)")
    if constant is not None and mean is not None:
        raise InputError(f"update.{name}", "give either delay (constant) or mean_delay (exponential), not both")
    value = constant if constant is not None else mean
    if not validation.is_real(value) or not math.isfinite(value) or value < 0:
        raise InputError(f"update.{name}.{'delay' if constant is not None else 'mean_delay'}", "must be a time >= 0")
    if value == 0:
        return Delay()
    return Delay("constant" if constant is not None else "exponential", float(value))


def check_parameters(name: str, params: dict) -> dict:
    """A signal's parameters checked, as their canonical types."""
    field_of = f"update.{name}."
    if "p_hat" in params:
        params["p_hat"] = validation.probability(field_of + "p_hat", params["p_hat"], positive=True)
    if "d" in params:
        params["d"] = validation.count(field_of + "d", params["d"])
    if "tau" in params:
        tau = params["tau"]
        if not validation.is_real(tau) or not math.isfinite(tau) or tau <= 0:
            raise InputError(field_of + "tau", f"must be a time > 0, got {tau!r}")
        params["tau"] = float(tau)
    if "phases" in params:
        validation.choice(field_of + "phases", params["phases"], PHASES)
    if "timing" in params:
        validation.choice(field_of + "timing", params["timing"], TIMINGS)
    return params
