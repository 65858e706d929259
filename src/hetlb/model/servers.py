"""Servers that serve many jobs at once: a concurrency c_s and a rate curve phi_s per server.

With n_s jobs at server s, b = min(n_s, c_s) of them are in service (the earliest arrived) and
each receives work at rate mu_s phi_s(b) / b; the others wait in FIFO order. A job of size x
leaves when it has received x units of work. With c_s = 1 every curve is the papers' server
(phi(1) = 1). The curves (docs/background/batch-servers.md):

* ``independent``: phi(b) = b, c parallel servers of speed mu each (M/G/c);
* ``shared``: phi(b) = 1, limited processor sharing (processor sharing when c is unlimited);
* ``saturating:alpha=A``: phi(b) = b / (1 + A (b - 1)), A in [0, 1], a batch whose iteration
  time grows with b (an inference engine); A = 0 is ``independent``, A = 1 is ``shared``;
* ``table:v1,v2,...,vk``: phi(b) = v_b for b <= k and v_k beyond, a measured curve.

Every curve has phi(1) = 1, phi non-decreasing and phi(b) / b non-increasing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hetlb import validation
from hetlb.constants import UNLIMITED_CONCURRENCY
from hetlb.errors import InputError

CURVE_KINDS = ("independent", "shared", "saturating", "table")
CURVE_SYNTAX = "independent, shared, saturating:alpha=A or table:v1,v2,..."
TABLE_MAX = 4096
"""The most values a table curve may list (a measured curve of batch sizes 1..k)."""
UNLIMITED_WORDS = ("inf", "unlimited")


@dataclass(frozen=True)
class RateCurve:
    """phi, the total service rate of a server with b jobs in service, in units of its speed mu
    (so phi(1) = 1). ``alpha`` is the saturating curve's A; ``values`` the table's v_1..v_k."""

    kind: str = "independent"
    alpha: float = 0.0
    values: tuple = ()

    def __post_init__(self):
        field = "rate_curve"
        if self.kind not in CURVE_KINDS:
            raise InputError(field, f"must be {CURVE_SYNTAX}, got {validation.shown(self.kind)}")
        if self.kind == "saturating":
            object.__setattr__(self, "alpha", validation.probability(f"{field}.alpha", self.alpha))
        elif self.alpha != 0.0:
            raise InputError(f"{field}.alpha", f"applies to the saturating curve only, not {self.kind}")
        if self.kind != "table":
            if self.values:
                raise InputError(f"{field}.values", f"apply to the table curve only, not {self.kind}")
            return
        values = tuple(float(v) for v in validation.positive_finite_array(f"{field}.values", list(self.values)))
        if len(values) > TABLE_MAX:
            raise InputError(f"{field}.values", f"a table lists at most {TABLE_MAX} values, got {len(values)}")
        if values[0] != 1.0:
            raise InputError(f"{field}.values", f"phi(1) must be 1 (rates in units of the speed), got {values[0]:g}")
        for b in range(1, len(values)):
            if values[b] < values[b - 1]:
                raise InputError(f"{field}.values", f"phi must be non-decreasing: phi({b + 1}) < phi({b})")
            if values[b] / (b + 1) > values[b - 1] / b * (1 + 1e-12):
                raise InputError(
                    f"{field}.values", f"phi(b)/b must be non-increasing: phi({b + 1})/{b + 1} > phi({b})/{b}"
                )
        object.__setattr__(self, "values", values)

    @classmethod
    def parse(cls, text) -> RateCurve:
        """A curve from its text: "independent", "shared", "saturating:alpha=0.2", "table:1,1.8,2.4"."""
        if isinstance(text, RateCurve):
            return text
        text = validation.text("rate_curve", text).strip()
        kind, _, rest = text.partition(":")
        kind = kind.strip()
        if kind == "saturating":
            key, _, value = rest.partition("=")
            if key.strip() != "alpha" or not value:
                raise InputError(
                    "rate_curve", f"the saturating curve is saturating:alpha=A, got {validation.shown(text)}"
                )
            return cls("saturating", alpha=_number("rate_curve.alpha", value))
        if kind == "table":
            items = [item for item in rest.split(",") if item.strip()]
            if not items:
                raise InputError("rate_curve", f"the table curve is table:v1,v2,..., got {validation.shown(text)}")
            return cls("table", values=tuple(_number("rate_curve.values", item) for item in items))
        if rest:
            raise InputError("rate_curve", f"{kind} takes no parameters, got {validation.shown(text)}")
        return cls(kind)

    @property
    def text(self) -> str:
        """The curve in the syntax :meth:`parse` reads."""
        if self.kind == "saturating":
            return f"saturating:alpha={self.alpha:g}"
        if self.kind == "table":
            return "table:" + ",".join(f"{v:g}" for v in self.values)
        return self.kind

    def phi(self, b):
        """phi(b) for b >= 1 jobs in service (an int or an int array)."""
        b = np.asarray(b, dtype=float)
        if self.kind == "independent":
            result = b
        elif self.kind == "shared":
            result = np.ones_like(b)
        elif self.kind == "saturating":
            result = b / (1.0 + self.alpha * (b - 1.0))
        else:
            table = np.asarray(self.values)
            result = table[np.minimum(b, len(table)).astype(np.int64) - 1]
        return result if result.ndim else float(result)

    def per_job_rate(self, b):
        """phi(b) / b, the rate of each of b jobs in service in units of the speed."""
        return self.phi(b) / np.asarray(b, dtype=float)

    @property
    def limit(self) -> float:
        """lim phi(b) as b grows: inf for independent, 1 / alpha for saturating, v_k for a table."""
        if self.kind == "independent" or (self.kind == "saturating" and self.alpha == 0.0):
            return math.inf
        if self.kind == "saturating":
            return 1.0 / self.alpha
        return self.values[-1] if self.kind == "table" else 1.0

    def at_concurrency(self, concurrency: int) -> float:
        """phi(c), the curve at c jobs in service (its limit for unlimited c)."""
        return self.limit if concurrency >= UNLIMITED_CONCURRENCY else float(self.phi(concurrency))

    def describe(self) -> str:
        return self.text


def _number(field: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InputError(field, f"must be a number, got {validation.shown(text.strip())}") from None


SINGLE_SLOT = RateCurve()
"""The curve of a server with c = 1 (every curve is that one then)."""


def concurrency_array(concurrency, n_servers: int) -> np.ndarray:
    """Per-server concurrency c_s (int64; UNLIMITED_CONCURRENCY for unlimited): None (1 each),
    one value for all, one per server, or a text in the speeds' syntax ("8", "50x8,50x32",
    "inf")."""
    if concurrency is None:
        return np.ones(n_servers, dtype=np.int64)
    values = per_server_values("concurrency", concurrency, n_servers, "C or COUNTxC (e.g. 50x8, C an integer or inf)")
    slots = [_slots(value) for value in values]
    return np.broadcast_to(np.array(slots, dtype=np.int64), (n_servers,)).copy()


def per_server_values(field: str, value, n_servers: int, item_rule: str) -> list:
    """The values of a per-server setting, unchecked: one for all servers or one per server, from a
    list or a text in the speeds' syntax ("8", "50x8,50x32"); ``item_rule`` says what an item of the
    text must be."""
    if isinstance(value, str):
        values: list = []
        for item in value.split(","):
            item = item.strip()
            count, _, text = item.partition("x") if "x" in item else ("1", "", item)
            try:
                count_int = int(count)
            except ValueError:
                count_int = 0
            if count_int < 1:
                raise InputError(field, f"each item must be {item_rule}, got {validation.shown(item)}")
            values.extend([text] * count_int)
    else:
        values = list(np.atleast_1d(np.asarray(value, dtype=object)))
    if len(values) not in (1, n_servers):
        raise InputError(field, f"give one value or one per server ({n_servers}), got {len(values)}")
    return values


def _slots(value) -> int:
    if isinstance(value, str) and value.strip().lower() in UNLIMITED_WORDS:
        return UNLIMITED_CONCURRENCY
    if value is None or (validation.is_real(value) and float(value) >= UNLIMITED_CONCURRENCY):
        return UNLIMITED_CONCURRENCY  # inf, or the marker itself
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise InputError("concurrency", f"must be an integer >= 1 or inf, got {validation.shown(value)}") from None
    if validation.is_real(value) and not validation.is_integer(value) and float(value).is_integer():
        value = int(value)
    return validation.integer("concurrency", value, high=UNLIMITED_CONCURRENCY - 1)


def rate_curve_tuple(rate_curve, n_servers: int) -> tuple:
    """One RateCurve per server from None (independent, which is every curve at c = 1), one curve
    for all (a RateCurve or its text), one per server, or [count, curve] pairs in server order."""
    if rate_curve is None:
        return (SINGLE_SLOT,) * n_servers
    if isinstance(rate_curve, (str, RateCurve)):
        return (RateCurve.parse(rate_curve),) * n_servers
    items = list(rate_curve)
    if items and all(isinstance(item, (list, tuple)) for item in items):
        curves: list = []
        for item in items:
            if len(item) != 2:
                raise InputError("rate_curve", "pairs must be [count, curve]")
            curves.extend([RateCurve.parse(item[1])] * validation.integer("rate_curve.count", item[0]))
    else:
        curves = [RateCurve.parse(item) for item in items]
    if len(curves) == 1:
        curves = curves * n_servers
    if len(curves) != n_servers:
        raise InputError(
            "rate_curve",
            f"give one curve, one per server or [count, curve] pairs for {n_servers} servers, got {len(curves)}",
        )
    return tuple(curves)


def check_servers(concurrency: np.ndarray, curves: tuple) -> None:
    """Refuse an independent curve with unlimited concurrency (its capacity would be infinite)."""
    for s, (slots, curve) in enumerate(zip(concurrency, curves)):
        if slots >= UNLIMITED_CONCURRENCY and math.isinf(curve.limit):
            raise InputError(
                "rate_curve",
                f"server {s}: {curve.text} with unlimited concurrency has infinite capacity; limit the concurrency",
            )


def capacity_factor(concurrency: np.ndarray, curves: tuple) -> np.ndarray:
    """phi_s(c_s) per server: the capacity of s in units of its speed."""
    return np.array([curve.at_concurrency(int(c)) for c, curve in zip(concurrency, curves)])


def concurrency_text(value: int) -> str | int:
    """A concurrency for metadata: the integer, or "unlimited"."""
    return "unlimited" if value >= UNLIMITED_CONCURRENCY else int(value)
