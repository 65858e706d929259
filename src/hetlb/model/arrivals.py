"""The arrival process of the continuous-time model: Poisson, batches, or a two-phase MMPP.

Every process has the long-run rate lambda of the system (``arrival_rate``, split over the job
types in fixed shares):

* ``poisson``: the papers' arrivals;
* ``batch:mean=B``: batches at Poisson epochs of rate lambda / B, with geometric sizes on
  {1, 2, ...} of mean B (P(k) = (1 - p)^(k-1) p, p = 1 / B); each job of a batch draws its own type
  and is routed in turn at the same instant (the herd's worst case);
* ``mmpp:ratio=R,on=T1,off=T2``: a Markov-modulated Poisson process of two phases with exponential
  sojourns of means T1 (on) and T2 (off), whose on phase has R times the off phase's rate:
  lambda_off = lambda (T1 + T2) / (R T1 + T2), lambda_on = R lambda_off. It starts in its
  stationary phase (on with probability T1 / (T1 + T2)). Times in the model's unit (a job of
  mean size at speed 1).
"""

from __future__ import annotations

from dataclasses import dataclass

from hetlb import validation
from hetlb.constants import ARRIVAL_KINDS
from hetlb.errors import InputError

ARRIVAL_SYNTAX = "poisson, batch:mean=B or mmpp:ratio=R,on=T1,off=T2"
MMPP_KEYS = ("ratio", "on", "off")


@dataclass(frozen=True)
class ArrivalProcess:
    """How jobs arrive; ``mean_batch`` is B, ``ratio``, ``on`` and ``off`` are R, T1 and T2."""

    kind: str = "poisson"
    mean_batch: float = 1.0
    ratio: float = 1.0
    on: float = 1.0
    off: float = 1.0

    def __post_init__(self):
        if self.kind not in ARRIVAL_KINDS:
            raise InputError("arrivals", f"must be {ARRIVAL_SYNTAX}, got {validation.shown(self.kind)}")
        if self.kind == "batch":
            object.__setattr__(self, "mean_batch", validation.number("arrivals.mean", self.mean_batch, 1.0, high=1e9))
        if self.kind == "mmpp":
            object.__setattr__(self, "ratio", validation.number("arrivals.ratio", self.ratio, 1.0, high=1e9))
            for name in ("on", "off"):
                value = validation.number(f"arrivals.{name}", getattr(self, name), 0.0, strict=True, high=1e12)
                object.__setattr__(self, name, value)

    @classmethod
    def parse(cls, text) -> ArrivalProcess:
        """A process from its text (ARRIVAL_SYNTAX)."""
        if isinstance(text, ArrivalProcess):
            return text
        text = validation.text("arrivals", text).strip()
        kind, _, rest = text.partition(":")
        kind = kind.strip()
        values = {}
        for item in (item for item in rest.split(",") if item.strip()):
            key, _, value = item.partition("=")
            try:
                values[key.strip()] = float(value)
            except ValueError:
                raise InputError(
                    "arrivals", f"{validation.shown(item.strip())}: each parameter is KEY=NUMBER"
                ) from None
        allowed = {"poisson": (), "batch": ("mean",), "mmpp": MMPP_KEYS}.get(kind)
        if allowed is None:
            raise InputError("arrivals", f"must be {ARRIVAL_SYNTAX}, got {validation.shown(text)}")
        if set(values) != set(allowed):
            wanted = ",".join(f"{key}=..." for key in allowed) or "no parameters"
            raise InputError("arrivals", f"{kind} takes {wanted}, got {validation.shown(text)}")
        if kind == "batch":
            return cls("batch", mean_batch=values["mean"])
        if kind == "mmpp":
            return cls("mmpp", ratio=values["ratio"], on=values["on"], off=values["off"])
        return cls()

    @property
    def code(self) -> int:
        return ARRIVAL_KINDS[self.kind]

    @property
    def is_poisson(self) -> bool:
        return self.kind == "poisson"

    @property
    def text(self) -> str:
        if self.kind == "batch":
            return f"batch:mean={self.mean_batch:g}"
        if self.kind == "mmpp":
            return f"mmpp:ratio={self.ratio:g},on={self.on:g},off={self.off:g}"
        return "poisson"

    def phase_rates(self, total_rate: float) -> tuple[float, float]:
        """(lambda_on, lambda_off) of the MMPP whose long-run rate is ``total_rate``."""
        off_rate = total_rate * (self.on + self.off) / (self.ratio * self.on + self.off)
        return self.ratio * off_rate, off_rate

    def on_probability(self) -> float:
        """The stationary probability of the on phase, T1 / (T1 + T2)."""
        return self.on / (self.on + self.off)

    def describe(self) -> str:
        return self.text
