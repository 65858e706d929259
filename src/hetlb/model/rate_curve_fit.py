"""A server's rate curve phi fitted to an engine's measured throughput.

An inference engine measured at batch sizes 1 = b_1 < b_2 < ... (throughput in tokens/s or
requests/s: any unit, it cancels) gives phi(b) = throughput(b) / throughput(1), the rate curve of a
batch server (docs/background/batch-servers.md): with b jobs in service the server does work at
rate mu phi(b). :func:`fit_rate_curve` turns such a measurement into a curve's text in the model's
syntax, ``saturating:alpha=A`` or ``table:v1,...,vk``, which ``--rate-curve`` and the scenario key
``system.rate_curve`` read, together with the fit's residual.

Measured points carry noise, and the model's rules (phi non-decreasing, phi(b) / b non-increasing)
hold of them only up to it: a point may lie off the rules by at most ``tolerance`` (a fraction of
its value); beyond it the measurement is refused, naming the batch size and the rule.
"""

from __future__ import annotations

from decimal import ROUND_FLOOR, Context, Decimal
from typing import NamedTuple

import numpy as np

from hetlb import validation
from hetlb.errors import InputError

FIT_KINDS = ("saturating", "table")

DEFAULT_TOLERANCE = 0.05
"""How far (a fraction of its value) a measured phi(b) may lie off the rules: a few per cent is
the run-to-run noise of an engine's benchmark (a throughput that dips slightly past the knee, a
batch measured slightly more than b times as fast as one request)."""

MAX_BATCH_SIZE = 65_536
"""The largest batch size a measurement may give (a table has one value per batch size up to it);
engines batch at most a few thousand requests."""

ALPHA_DIGITS = 6
"""Significant digits of alpha in the curve's text: far beyond any measurement's precision."""

TABLE_DIGITS = 9
"""Significant digits of a table's values. Where phi(b) / b is constant (a segment whose ends
share phi(b) / b), each value is its predecessor times b / (b - 1), rounded down to keep the rule
exactly, and the roundings add up along the segment: at 9 digits a segment of 1,000 batch sizes
stays within 1e-6 of the exact values (6 digits drift by up to 1e-3)."""

_FLOOR = Context(prec=TABLE_DIGITS, rounding=ROUND_FLOOR)
_ALPHA_GRID = np.concatenate(([0.0], np.geomspace(1e-8, 1.0, 321)))
"""Where the least-squares search for alpha starts: 0 and 40 points per decade down to 1e-8; the
best of them is refined between its neighbours, so that a second local minimum cannot trap it."""


class RateCurveFit(NamedTuple):
    """A fitted rate curve: ``curve``, its text in the model's syntax, and ``residual``, the root
    mean square over the measured batch sizes b > 1 of the curve's phi(b) minus the measured one
    (phi(1) = 1; dimensionless)."""

    curve: str
    residual: float


def fit_rate_curve(
    batch_sizes, throughputs, kind: str = "saturating", *, tolerance: float = DEFAULT_TOLERANCE
) -> RateCurveFit:
    """The rate curve of ``kind`` fitted to ``throughputs`` measured at ``batch_sizes``.

    - ``saturating``: phi(b) = b / (1 + alpha (b - 1)); alpha is the least-squares fit over
      [0, 1] to the measured phi (an optimum outside is clipped to the nearer end).
    - ``table``: v_b for b = 1 .. k, k the largest batch size measured: the measured points moved
      onto the rules (each at most ``tolerance``), linear in between (which keeps the rules).

    Both refuse a measurement that lies off the rules by more than ``tolerance``.

    Parameters
    ----------
    batch_sizes
        Distinct integers >= 1, including 1 (phi is normalised there), in any order.
    throughputs
        One finite value > 0 per batch size (tokens/s or requests/s).
    kind
        "saturating" or "table".
    tolerance
        The largest relative distance of a measurement from the rules.

    Returns
    -------
    RateCurveFit
        The curve (its text in the model's syntax) and its residual.
    """
    kind = validation.choice("kind", kind, FIT_KINDS)
    tolerance = validation.number("tolerance", tolerance, 0.0, high=1.0)
    sizes, phi = _normalised_throughput(batch_sizes, throughputs)
    on_rules = _onto_rules(sizes, phi, tolerance)
    if kind == "saturating":
        alpha = float(f"{_least_squares_alpha(sizes, phi):.{ALPHA_DIGITS}g}")
        return RateCurveFit(f"saturating:alpha={alpha:.{ALPHA_DIGITS}g}", _rms(_saturating(sizes, alpha) - phi))
    values = _table_values(np.interp(np.arange(1, sizes[-1] + 1), sizes, on_rules))
    fitted = np.array([float(values[b - 1]) for b in sizes])
    return RateCurveFit("table:" + ",".join(format(value, "f") for value in values), _rms(fitted - phi))


def _normalised_throughput(batch_sizes, throughputs) -> tuple[np.ndarray, np.ndarray]:
    """(batch sizes ascending, phi = throughput / throughput at b = 1), checked."""
    if isinstance(batch_sizes, (str, bytes)) or not hasattr(batch_sizes, "__iter__"):
        raise InputError("batch_sizes", f"must be a list of integers, got {validation.shown(batch_sizes)}")
    sizes = [
        validation.integer(f"batch_sizes[{i}]", size, 1, MAX_BATCH_SIZE) for i, size in enumerate(list(batch_sizes))
    ]
    if len(sizes) < 2:
        raise InputError("batch_sizes", f"needs at least two batch sizes (1 and one more), got {len(sizes)}")
    if len(set(sizes)) < len(sizes):
        repeated = next(size for size in sizes if sizes.count(size) > 1)
        raise InputError("batch_sizes", f"gives each batch size once, got {repeated} twice")
    if 1 not in sizes:
        raise InputError("batch_sizes", "must include 1: phi(b) is the throughput at b over the throughput at 1")
    rates = validation.positive_finite_array("throughputs", throughputs)
    if len(rates) != len(sizes):
        raise InputError("throughputs", f"needs one value per batch size ({len(sizes)}), got {len(rates)}")
    order = np.argsort(sizes)
    ascending = np.asarray(sizes, dtype=np.int64)[order]
    return ascending, rates[order] / rates[order][0]


def _onto_rules(sizes: np.ndarray, phi: np.ndarray, tolerance: float) -> np.ndarray:
    """The measured phi moved, point by point in order of b, onto the rules: each at least its
    predecessor (non-decreasing) and at most its predecessor times b_i / b_{i-1} (phi(b) / b
    non-increasing); refused where a point moves by more than ``tolerance`` of its value."""
    moved = phi.copy()
    for i in range(1, len(sizes)):
        ceiling = moved[i - 1] * sizes[i] / sizes[i - 1]
        moved[i] = min(max(phi[i], moved[i - 1]), ceiling)
        if abs(moved[i] - phi[i]) > tolerance * phi[i]:
            rule = (
                "must not fall as the batch grows"
                if moved[i] > phi[i]
                else "must not grow faster than the batch (phi(b) / b non-increasing)"
            )
            raise InputError(
                "throughputs",
                f"at batch size {sizes[i]}: phi = {phi[i]:.4g} after {moved[i - 1]:.4g} at {sizes[i - 1]}; "
                f"the throughput {rule}, within tolerance {tolerance:g} (off by {abs(moved[i] / phi[i] - 1):.1%})",
            )
    return moved


def _saturating(sizes: np.ndarray, alpha: float) -> np.ndarray:
    """phi(b) = b / (1 + alpha (b - 1))."""
    return sizes / (1.0 + alpha * (sizes - 1.0))


def _least_squares_alpha(sizes: np.ndarray, phi: np.ndarray) -> float:
    """The alpha in [0, 1] with the least sum of squares of saturating phi(b) minus measured phi."""
    from scipy.optimize import minimize_scalar

    def squares(alpha: float) -> float:
        return float(np.sum((_saturating(sizes, alpha) - phi) ** 2))

    errors = [squares(alpha) for alpha in _ALPHA_GRID]
    best = int(np.argmin(errors))
    low, high = _ALPHA_GRID[max(best - 1, 0)], _ALPHA_GRID[min(best + 1, len(_ALPHA_GRID) - 1)]
    refined = minimize_scalar(squares, bounds=(low, high), method="bounded", options={"xatol": 1e-15})
    return float(refined.x) if refined.fun <= errors[best] else float(_ALPHA_GRID[best])


def _table_values(values: np.ndarray) -> list[Decimal]:
    """``values`` (phi at b = 1, 2, ..., on the rules up to float rounding) as decimals of
    TABLE_DIGITS significant digits that keep the rules exactly: each rounded, then raised to its
    predecessor or lowered (rounding down) to its predecessor times b / (b - 1) where rounding
    broke a rule."""
    table = [Decimal(1)]
    for b, value in enumerate(values[1:], start=2):
        previous = table[-1]
        rounded = Decimal(f"{value:.{TABLE_DIGITS}g}")
        ceiling = _FLOOR.divide(previous * b, Decimal(b - 1))
        table.append(min(max(rounded, previous), ceiling).normalize())
    return table


def _rms(differences: np.ndarray) -> float:
    """Root mean square over the batch sizes b > 1 (the first entry, b = 1, is 0 by construction)."""
    return float(np.sqrt(np.mean(differences[1:] ** 2)))
