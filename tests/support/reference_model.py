"""The server and traffic model of multi-slot servers, written out plainly for the test oracles.

Shared by the reference simulator (reference_sim.py) and the reference CTMC solver
(reference_ctmc.py); nothing here imports hetlb. Definitions (docs/reference/policies.md and the
model of batch servers):

- Server ``s`` has speed ``mu_s``, concurrency ``c_s`` (an integer >= 1 or ``math.inf``) and a
  rate curve ``phi_s`` with ``phi_s(1) = 1``. With ``n`` jobs at ``s``, ``b = min(n, c_s)`` are in
  service, each receiving work at rate ``mu_s phi_s(b) / b``; the server completes work at rate
  ``mu_s phi_s(b)``.
- Curves: ``independent`` phi(b) = b; ``shared`` phi(b) = 1; ``saturating:alpha=A``
  phi(b) = b / (1 + A (b - 1)); ``table:v1,...,vk`` phi(b) = v_b for b <= k, v_k beyond; or any
  callable ``phi(b)`` (an optional attribute ``limit`` gives lim phi(b) as b -> inf).
- Arrivals: ``poisson``; ``batch:mean=B`` (batches at Poisson epochs of rate lambda / B, geometric
  sizes on {1, 2, ...} of mean B); ``mmpp:ratio=R,on=T1,off=T2`` (two phases with exponential
  sojourns of means T1 and T2, rate in ``on`` = R times the rate in ``off``, long-run rate lambda).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

CURVE_KINDS = ("independent", "shared", "saturating", "table")
ARRIVAL_KINDS = ("poisson", "batch", "mmpp")


def _parameters(text, spec):
    """``"a=1,b=2"`` as a dict of floats."""
    parameters = {}
    for item in text.split(","):
        name, equals, value = item.partition("=")
        if not equals:
            raise ValueError(f"{spec!r}: expected name=value, got {item!r}")
        parameters[name.strip()] = float(value)
    return parameters


@dataclass(frozen=True)
class Curve:
    """A rate curve phi: the server's total work rate with b jobs in service, in units of its speed."""

    kind: str
    alpha: float = math.nan
    values: tuple = ()
    function: Callable | None = None

    @classmethod
    def parse(cls, spec):
        """A curve from ``"independent"``, ``"shared"``, ``"saturating:alpha=A"``, ``"table:v1,..."``."""
        kind, _, rest = spec.partition(":")
        if kind in ("independent", "shared") and not rest:
            return cls(kind)
        if kind == "saturating":
            alpha = _parameters(rest, spec).get("alpha", math.nan)
            if not 0.0 <= alpha <= 1.0:
                raise ValueError(f"rate curve {spec!r}: alpha must lie in [0, 1]")
            return cls(kind, alpha=alpha)
        if kind == "table":
            values = tuple(float(v) for v in rest.split(","))
            if values[0] != 1.0:
                raise ValueError(f"rate curve {spec!r}: v1 must be 1")
            for b in range(1, len(values)):
                if values[b] < values[b - 1] or values[b] / (b + 1) > values[b - 1] / b:
                    raise ValueError(f"rate curve {spec!r}: phi must be non-decreasing and phi(b)/b non-increasing")
            return cls(kind, values=values)
        raise ValueError(f"unknown rate curve {spec!r}; valid kinds: {', '.join(CURVE_KINDS)}")

    def phi(self, b):
        """phi(b) for an integer ``b >= 1`` (float)."""
        if self.function is not None:
            return float(self.function(b))
        if self.kind == "independent":
            return float(b)
        if self.kind == "shared":
            return 1.0
        if self.kind == "saturating":
            return b / (1.0 + self.alpha * (b - 1))
        return self.values[min(b, len(self.values)) - 1]

    @property
    def limit(self):
        """lim phi(b) as b -> inf (``math.inf`` for independent, ``None`` if a callable has none)."""
        if self.function is not None:
            return getattr(self.function, "limit", None)
        if self.kind == "independent":
            return math.inf
        if self.kind == "shared":
            return 1.0
        if self.kind == "saturating":
            return 1.0 / self.alpha if self.alpha > 0 else math.inf
        return self.values[-1]


def as_curve(curve):
    """A ``Curve`` from a spec string, a ``Curve`` or a callable phi(b)."""
    if isinstance(curve, Curve):
        return curve
    if isinstance(curve, str):
        return Curve.parse(curve)
    if callable(curve):
        return Curve("callable", function=curve)
    raise ValueError(f"rate_curve must be a spec string, a Curve or a callable, got {curve!r}")


def per_server(value, n_servers, name):
    """``value`` repeated for every server, or the list ``value`` checked to have one per server."""
    if isinstance(value, (str, int, float, Curve)) or callable(value):
        return [value] * n_servers
    value = list(value)
    if len(value) != n_servers:
        raise ValueError(f"{name} has {len(value)} entries, expected {n_servers} (one per server)")
    return value


def concurrency_list(concurrency, n_servers):
    """Per-server concurrency: integers >= 1 or ``math.inf``."""
    values = per_server(1 if concurrency is None else concurrency, n_servers, "concurrency")
    for c in values:
        if not (c == math.inf or (float(c).is_integer() and c >= 1)):
            raise ValueError(f"concurrency must be an integer >= 1 or math.inf, got {c!r}")
    return [math.inf if c == math.inf else int(c) for c in values]


def curve_list(rate_curve, n_servers):
    """Per-server ``Curve`` objects (default: independent, which is today's server at c = 1)."""
    return [
        as_curve(c) for c in per_server("independent" if rate_curve is None else rate_curve, n_servers, "rate_curve")
    ]


@dataclass(frozen=True)
class Server:
    """One server: speed mu, concurrency c (int or inf) and rate curve phi."""

    speed: float
    concurrency: float
    curve: Curve

    def in_service(self, n):
        """b = min(n, c), the number of jobs in service with ``n`` jobs present."""
        return int(min(n, self.concurrency))

    def work_rate(self, n):
        """mu phi(b): the total rate of work with ``n`` jobs present (0 when empty)."""
        b = self.in_service(n)
        return self.speed * self.curve.phi(b) if b > 0 else 0.0

    def new_job_rate(self, n):
        """r(n) = mu phi(b') / b', b' = min(n + 1, c): the rate a job joining ``n`` others would receive."""
        b = self.in_service(n + 1)
        return self.speed * self.curve.phi(b) / b

    def expected_delay(self, n):
        """sed's d(n) = (n + 1) / (mu phi(min(n + 1, c)))."""
        return (n + 1) / (self.speed * self.curve.phi(self.in_service(n + 1)))

    def has_free_slot(self, n):
        """n < c: a job joining now starts service at once."""
        return n < self.concurrency

    def full_capacity(self):
        """mu phi(c) (mu times the curve's limit when c is unlimited)."""
        if self.concurrency == math.inf:
            limit = self.curve.limit
            if limit is None or limit == math.inf:
                raise ValueError("a server with unlimited concurrency needs a curve with a finite limit")
            return self.speed * limit
        return self.speed * self.curve.phi(int(self.concurrency))

    def utilisation_key(self, n):
        """jlu's key n / c (refused with unlimited c)."""
        if self.concurrency == math.inf:
            raise ValueError("jlu needs a finite concurrency on every server")
        return n / self.concurrency

    def expected_work_key(self, n):
        """lew's key n / (mu phi(c)): the time to clear the ``n`` jobs at full capacity."""
        return n / self.full_capacity()


def make_servers(speed, concurrency=None, rate_curve=None):
    """The ``Server`` list from per-server speeds, concurrency and curves (scalars apply to all)."""
    n_servers = len(speed)
    return [
        Server(float(mu), c, curve)
        for mu, c, curve in zip(speed, concurrency_list(concurrency, n_servers), curve_list(rate_curve, n_servers))
    ]


@dataclass(frozen=True)
class Arrivals:
    """The arrival process: ``kind`` in poisson | batch | mmpp and its parameters."""

    kind: str = "poisson"
    mean_batch: float = 1.0
    ratio: float = 1.0
    on: float = 1.0
    off: float = 1.0

    @classmethod
    def parse(cls, spec):
        """From ``"poisson"``, ``"batch:mean=B"``, ``"mmpp:ratio=R,on=T1,off=T2"``."""
        if isinstance(spec, Arrivals):
            return spec
        kind, _, rest = (spec or "poisson").partition(":")
        if kind == "poisson" and not rest:
            return cls()
        if kind == "batch":
            mean = _parameters(rest, spec)["mean"]
            if not mean >= 1.0:
                raise ValueError(f"arrivals {spec!r}: mean batch size must be >= 1")
            return cls(kind, mean_batch=mean)
        if kind == "mmpp":
            p = _parameters(rest, spec)
            if not (p["ratio"] > 0 and p["on"] > 0 and p["off"] > 0):
                raise ValueError(f"arrivals {spec!r}: ratio, on and off must be positive")
            return cls(kind, ratio=p["ratio"], on=p["on"], off=p["off"])
        raise ValueError(f"unknown arrivals {spec!r}; valid kinds: {', '.join(ARRIVAL_KINDS)}")

    def phase_rates(self, total_rate):
        """(rate in on, rate in off) with long-run rate ``total_rate``."""
        rate_off = total_rate * (self.on + self.off) / (self.ratio * self.on + self.off)
        return self.ratio * rate_off, rate_off

    def on_probability(self):
        """The stationary probability of phase on, T1 / (T1 + T2)."""
        return self.on / (self.on + self.off)
