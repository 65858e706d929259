"""The update signals of the continuous model of many dispatchers (docs/reference/dispatchers.md).

An update specification is a comma-separated list of signals, each with ``:name=value``
parameters, e.g. ``"piggyback,push:p_hat=0.1:d=2"``, or a table of signals; the signals, their
parameters, defaults and delays are the entries of :mod:`hetlb.signals` that the continuous model
implements (exact, probe, increment, piggyback, push, pull, snapshot). A message carries the number
the server held when it was sent, and a dispatcher applies it only if it observed the server no
earlier than what its estimate holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hetlb import signals as vocabulary
from hetlb.signals import CONTINUOUS, SIGNALS, Delay

__all__ = ["Delay", "Updates"]


@dataclass(frozen=True)
class Updates:
    """Parsed update signals: ``signals`` maps each signal given to its parameters (defaults
    filled in), ``delays`` each message signal to its :class:`Delay`."""

    signals: dict = field(default_factory=dict)
    delays: dict = field(default_factory=dict)

    @classmethod
    def parse(cls, value) -> Updates:
        """Updates from a specification string (``"piggyback,push:p_hat=0.1:d=2"``), a mapping of
        signal -> parameters (a TOML table: ``{"push": {"p_hat": 0.1, "d": 2}, "piggyback": {}}``),
        or an Updates."""
        if isinstance(value, cls):
            return value
        return cls.from_mapping(value)

    @classmethod
    def from_mapping(cls, entries: dict) -> Updates:
        return cls(*vocabulary.checked(CONTINUOUS, vocabulary.parse_spec(entries)))

    @property
    def truth(self) -> bool:
        """Whether the dispatchers decide on the truth (exact knowledge or true probes)."""
        return any(SIGNALS[name].truth for name in self.signals)

    def describe(self) -> dict:
        return {
            name: {**params, **({"delay": self.delays[name].describe()} if name in self.delays else {})}
            for name, params in self.signals.items()
        }

    def text(self) -> str:
        """The specification string of these updates."""
        return vocabulary.text(
            {name: {**params, **self.delays.get(name, Delay()).given()} for name, params in self.signals.items()}
        )
