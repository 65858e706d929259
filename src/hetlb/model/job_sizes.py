"""Job-size distributions with mean 1: a job of size x takes x / speed[s] time units at server s."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hetlb.errors import InputError

SIZE_KINDS = {"exponential": 0, "hyperexponential": 1, "deterministic": 2}

MAX_SCV = 1e8
"""The largest squared coefficient of variation of hyperexponential sizes. Its second phase has
probability about 1 / (2 scv) and mean about scv: beyond this, the phase probability loses its
digits in float64 (at about 1e16 it is 0) and a run of any sensible length meets too few of its
jobs to measure anything."""


@dataclass(frozen=True)
class JobSizes:
    """Distribution of job sizes, mean 1.

    ``kind`` is ``exponential``, ``deterministic``, or ``hyperexponential``: the two-phase
    balanced-means H2 with squared coefficient of variation ``scv`` (> 1), phase probabilities
    p1 = (1 + sqrt((scv - 1)/(scv + 1)))/2 and p2 = 1 - p1, and phase rates 2 p1 and 2 p2.
    """

    kind: str = "exponential"
    scv: float = 1.0

    def __post_init__(self):
        if self.kind not in SIZE_KINDS:
            raise InputError("job_sizes.kind", f"must be one of {', '.join(SIZE_KINDS)}, got {self.kind!r}")
        expected_scv = {"exponential": 1.0, "deterministic": 0.0}.get(self.kind)
        if self.kind == "hyperexponential":
            if not (isinstance(self.scv, (int, float)) and math.isfinite(self.scv) and 1.0 < self.scv <= MAX_SCV):
                raise InputError(
                    "job_sizes.scv", f"a hyperexponential needs a finite scv in (1, {MAX_SCV:g}], got {self.scv!r}"
                )
        elif self.scv not in (expected_scv, 1.0):
            raise InputError("job_sizes.scv", f"is fixed at {expected_scv} for {self.kind} sizes")
        else:
            object.__setattr__(self, "scv", expected_scv)

    @property
    def code(self) -> int:
        return SIZE_KINDS[self.kind]

    def phase_parameters(self) -> np.ndarray:
        """(p1, rate1, rate2) of the H2; unused entries for other kinds."""
        if self.kind != "hyperexponential":
            return np.array([1.0, 1.0, 1.0])
        p1 = 0.5 * (1.0 + math.sqrt((self.scv - 1.0) / (self.scv + 1.0)))
        return np.array([p1, 2.0 * p1, 2.0 * (1.0 - p1)])

    def second_moment(self) -> float:
        """E[X^2] = 1 + scv (mean 1)."""
        return 1.0 + self.scv

    def largest(self, count: float) -> float:
        """About the expected largest of ``count`` sizes (an estimate for bounding a run's length):
        1 if deterministic, ln(count) + 0.58 for exponential sizes (0.58: Euler's constant), and for
        the H2 the larger of that for each phase over the sizes it is expected to draw (at least
        one when the expected number is below one, weighted by its chance)."""
        count = max(float(count), 1.0)
        if self.kind == "deterministic":
            return 1.0
        if self.kind == "exponential":
            return math.log(count) + 0.58
        p1, rate1, rate2 = self.phase_parameters()
        drawn = [count * p1, count * (1.0 - p1)]
        return float(max(min(n, 1.0) * (math.log(max(n, 1.0)) + 0.58) / rate for n, rate in zip(drawn, (rate1, rate2))))

    def describe(self) -> dict:
        return {"kind": self.kind, "mean": 1.0, "scv": self.scv}
