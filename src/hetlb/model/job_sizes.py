"""Job-size distributions with mean 1: a job of size x takes x / speed[s] time units at server s
(x units of work; on a multi-slot server, hetlb.model.servers, it receives them at a rate that
depends on how many jobs share the server)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from hetlb import validation
from hetlb.errors import InputError

SIZE_KINDS = {
    "exponential": 0,
    "hyperexponential": 1,
    "deterministic": 2,
    "lognormal": 3,
    "pareto": 4,
    "weibull": 5,
    "empirical": 6,
}
SCV_KINDS = ("hyperexponential", "lognormal", "pareto", "weibull")
"""The kinds whose squared coefficient of variation is a parameter (``scv``)."""
EMPIRICAL_MAX = 10_000_000
"""The most sizes an empirical file may hold."""

MAX_SCV = 1e8
"""The largest squared coefficient of variation of hyperexponential sizes. Its second phase has
probability about 1 / (2 scv) and mean about scv: beyond this, the phase probability loses its
digits in float64 (at about 1e16 it is 0) and a run of any sensible length meets too few of its
jobs to measure anything."""


@dataclass(frozen=True)
class JobSizes:
    """Distribution of job sizes, mean 1, squared coefficient of variation ``scv``.

    ``kind`` is one of:

    * ``exponential`` (scv 1) or ``deterministic`` (scv 0);
    * ``hyperexponential``: the two-phase balanced-means H2 with scv > 1, phase probabilities
      p1 = (1 + sqrt((scv - 1)/(scv + 1)))/2 and p2 = 1 - p1, and phase rates 2 p1 and 2 p2;
    * ``lognormal``: exp(m + sigma Z), sigma^2 = ln(1 + scv), m = -sigma^2 / 2;
    * ``pareto``: type I, P(X > x) = (x_m / x)^a for x >= x_m, with shape a = 1 + sqrt(1 + 1/scv)
      (> 2) and scale x_m = (a - 1) / a;
    * ``weibull``: scale * E^(1/k) with E exponential, the shape k solving
      Gamma(1 + 2/k) / Gamma(1 + 1/k)^2 - 1 = scv and scale = 1 / Gamma(1 + 1/k);
    * ``empirical``: the sizes listed in the text file ``path`` (one or more numbers > 0 per
      line), scaled to mean 1 and drawn uniformly; its scv is theirs.

    Parameters
    ----------
    kind
        One of the kinds above.
    scv
        The squared coefficient of variation (for the kinds that take one).
    path
        The file of an ``empirical`` law.
    values
        The sizes of an ``empirical`` law, scaled to mean 1 (read from ``path``).
    """

    kind: str = "exponential"
    scv: float = 1.0
    path: str | None = None
    values: np.ndarray = field(default_factory=lambda: np.zeros(0), compare=False, repr=False)  # empirical, mean 1

    def __post_init__(self):
        if self.kind not in SIZE_KINDS:
            raise InputError("job_sizes.kind", f"must be one of {', '.join(SIZE_KINDS)}, got {self.kind!r}")
        if (self.path is not None) != (self.kind == "empirical"):
            raise InputError("job_sizes.path", "is the file of empirical sizes (empirical:FILE), and only theirs")
        expected_scv = {"exponential": 1.0, "deterministic": 0.0}.get(self.kind)
        if self.kind == "empirical":
            if self.scv != 1.0:
                raise InputError("job_sizes.scv", "is that of the file's sizes for empirical sizes")
            values = read_sizes(self.path)
            object.__setattr__(self, "values", values)
            object.__setattr__(self, "scv", float(np.mean(values**2) - 1.0))
        elif self.kind in SCV_KINDS:
            low = 1.0 if self.kind == "hyperexponential" else 0.0
            if not (validation.is_real(self.scv) and math.isfinite(self.scv) and low < self.scv <= MAX_SCV):
                raise InputError(
                    "job_sizes.scv", f"{self.kind} sizes need a finite scv in ({low:g}, {MAX_SCV:g}], got {self.scv!r}"
                )
            object.__setattr__(self, "scv", float(self.scv))
        elif self.scv not in (expected_scv, 1.0):
            raise InputError("job_sizes.scv", f"is fixed at {expected_scv} for {self.kind} sizes")
        else:
            object.__setattr__(self, "scv", expected_scv)

    @classmethod
    def parse(cls, text: str, scv: float | None = None) -> JobSizes:
        """Sizes from a kind's name, or "empirical:FILE", with the scv of the kinds that take one.

        Parameters
        ----------
        text
            A kind's name, or "empirical:FILE".
        scv
            The squared coefficient of variation of the kinds that take one.
        """
        kind, _, path = validation.text("job_sizes", text).partition(":")
        if kind == "empirical":
            return cls(kind, path=path or None) if scv is None else cls(kind, scv, path=path or None)
        if path:
            raise InputError("job_sizes", f"only empirical sizes name a file, got {validation.shown(text)}")
        return cls(kind) if scv is None else cls(kind, scv)

    @property
    def code(self) -> int:
        """The law's integer code, as the kernels read it (hetlb.constants)."""
        return SIZE_KINDS[self.kind]

    def phase_parameters(self) -> np.ndarray:
        """(p1, rate1, rate2) of the H2; unused entries for other kinds."""
        if self.kind != "hyperexponential":
            return np.array([1.0, 1.0, 1.0])
        p1 = 0.5 * (1.0 + math.sqrt((self.scv - 1.0) / (self.scv + 1.0)))
        return np.array([p1, 2.0 * p1, 2.0 * (1.0 - p1)])

    def kernel_parameters(self) -> np.ndarray:
        """What a kernel's size draw reads (hetlb.kernels.continuous.draw_size): the H2's
        (p1, rate1, rate2); lognormal (m, sigma, 0); pareto (a, x_m, 0); weibull (1/k, scale, 0);
        the empirical sizes themselves; (1, 1, 1) for the others."""
        if self.kind == "lognormal":
            sigma2 = math.log1p(self.scv)
            return np.array([-sigma2 / 2.0, math.sqrt(sigma2), 0.0])
        if self.kind == "pareto":
            shape = 1.0 + math.sqrt(1.0 + 1.0 / self.scv)
            return np.array([shape, (shape - 1.0) / shape, 0.0])
        if self.kind == "weibull":
            shape = weibull_shape(self.scv)
            return np.array([1.0 / shape, 1.0 / math.gamma(1.0 + 1.0 / shape), 0.0])
        if self.kind == "empirical":
            return np.concatenate([np.ones(3), self.values])
        return self.phase_parameters()

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` sizes drawn with numpy (the live backends and tests; the kernels draw their own).

        Parameters
        ----------
        rng
            The generator to draw from.
        n
            How many sizes.
        """
        parameters = self.kernel_parameters()
        if self.kind == "deterministic":
            return np.ones(n)
        if self.kind == "hyperexponential":
            p1, rate1, rate2 = parameters
            return rng.exponential(size=n) / np.where(rng.random(n) < p1, rate1, rate2)
        if self.kind == "lognormal":
            return np.exp(parameters[0] + parameters[1] * rng.standard_normal(n))
        if self.kind == "pareto":
            return parameters[1] * (1.0 - rng.random(n)) ** (-1.0 / parameters[0])
        if self.kind == "weibull":
            return parameters[1] * rng.exponential(size=n) ** parameters[0]
        if self.kind == "empirical":
            return self.values[rng.integers(0, len(self.values), n)]
        return rng.exponential(size=n)

    def second_moment(self) -> float:
        """E[X^2] = 1 + scv (mean 1)."""
        return 1.0 + self.scv

    def largest(self, count: float) -> float:
        """About the expected largest of ``count`` sizes (an estimate for bounding a run's length):
        1 if deterministic, ln(count) + 0.58 for exponential sizes (0.58: Euler's constant), and for
        the H2 the larger of that for each phase over the sizes it is expected to draw (at least
        one when the expected number is below one, weighted by its chance).

        Parameters
        ----------
        count
            How many sizes are drawn.
        """
        count = max(float(count), 1.0)
        if self.kind == "deterministic":
            return 1.0
        if self.kind == "exponential":
            return math.log(count) + 0.58
        parameters = self.kernel_parameters()
        if self.kind == "lognormal":  # the 1 - 1/count quantile, z ~ sqrt(2 ln count)
            return float(math.exp(parameters[0] + parameters[1] * math.sqrt(2.0 * math.log(count + 1.0))))
        if self.kind == "pareto":  # the 1 - 1/count quantile
            return float(parameters[1] * count ** (1.0 / parameters[0]))
        if self.kind == "weibull":
            return float(parameters[1] * (math.log(count) + 0.58) ** parameters[0])
        if self.kind == "empirical":
            return float(self.values.max())
        p1, rate1, rate2 = self.phase_parameters()
        drawn = [count * p1, count * (1.0 - p1)]
        return float(max(min(n, 1.0) * (math.log(max(n, 1.0)) + 0.58) / rate for n, rate in zip(drawn, (rate1, rate2))))

    def describe(self) -> dict:
        """The law as the result's metadata records it: kind, mean (1), squared coefficient of variation, and the
        trace file if any."""
        return {"kind": self.kind, "mean": 1.0, "scv": self.scv, **({"path": self.path} if self.path else {})}


def weibull_shape(scv: float) -> float:
    """The Weibull shape k whose squared coefficient of variation is ``scv``:
    Gamma(1 + 2/k) / Gamma(1 + 1/k)^2 - 1 = scv (decreasing in k; bisection on log k)."""

    def scv_of(shape: float) -> float:
        return math.expm1(math.lgamma(1.0 + 2.0 / shape) - 2.0 * math.lgamma(1.0 + 1.0 / shape))

    low, high = math.log(0.02), math.log(1e4)  # scv from about 1e-5 to beyond MAX_SCV
    for _ in range(200):
        middle = 0.5 * (low + high)
        low, high = (middle, high) if scv_of(math.exp(middle)) > scv else (low, middle)
    return math.exp(0.5 * (low + high))


def read_sizes(path) -> np.ndarray:
    """The sizes of an empirical file, scaled to mean 1: numbers > 0, whitespace or commas apart."""
    path = validation.input_file("job_sizes.path", path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeError) as error:
        raise InputError("job_sizes.path", f"cannot read {path}: {error}") from None
    items = text.replace(",", " ").split()
    if not items:
        raise InputError("job_sizes.path", f"{path} lists no sizes")
    if len(items) > EMPIRICAL_MAX:
        raise InputError("job_sizes.path", f"{path} lists more than {EMPIRICAL_MAX:,} sizes")
    try:
        values = np.array([float(item) for item in items])
    except ValueError:
        raise InputError("job_sizes.path", f"{path}: every size must be a number") from None
    if not np.all(np.isfinite(values) & (values > 0)):
        raise InputError("job_sizes.path", f"{path}: every size must be a finite number > 0")
    return values / values.mean()
