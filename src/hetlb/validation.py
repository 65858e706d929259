"""The checks every user value passes: numbers, integers, arrays, choices and seeds.

Each check returns the value in its canonical type or raises :class:`hetlb.errors.InputError`
naming the field and the rule it breaks, so that the command line prints one line and exits 2.
This module is the bottom layer of hetlb: model, simulation, theory, experiments and the CLI
all check their input with it, and it imports nothing of hetlb but the error type.
"""

from __future__ import annotations

import math

import numpy as np

from hetlb.errors import InputError

REAL_TYPES = (int, float, np.integer, np.floating)
INTEGER_TYPES = (int, np.integer)


def is_integer(value) -> bool:
    """An int (or numpy integer), never a bool."""
    return isinstance(value, INTEGER_TYPES) and not isinstance(value, bool)


def is_real(value) -> bool:
    """An int or float (or their numpy types), never a bool."""
    return isinstance(value, REAL_TYPES) and not isinstance(value, bool)


def integer(name: str, value, low: int = 1, high: int | None = None) -> int:
    """An integer in [low, high] (high None: no upper bound), as an int."""
    if not is_integer(value) or value < low or (high is not None and value > high):
        rule = f"an integer >= {low}" if high is None else f"an integer in [{low}, {high}]"
        raise InputError(name, f"must be {rule}, got {value!r}")
    return int(value)


def number(name: str, value, low: float | None = None, *, strict: bool = False, high: float | None = None) -> float:
    """A finite number >= low (> low when ``strict``) and <= high, as a float; None bounds are open."""
    if not is_real(value) or not math.isfinite(value):
        raise InputError(name, f"must be a finite number, got {value!r}")
    below = low is not None and (value <= low if strict else value < low)
    if below or (high is not None and value > high):
        parts = [f"{'>' if strict else '>='} {low:g}"] if low is not None else []
        parts += [f"<= {high:g}"] if high is not None else []
        raise InputError(name, f"must be a finite number {' and '.join(parts)}, got {value!r}")
    return float(value)


def positive_number(name: str, value) -> float:
    """A finite number > 0 (a rate, a time, a speed), as a float."""
    return number(name, value, 0.0, strict=True)


def probability(name: str, value, *, positive: bool = False) -> float:
    """A number in [0, 1], or in (0, 1] when ``positive``."""
    if not is_real(value) or not (0.0 < value <= 1.0 if positive else 0.0 <= value <= 1.0):
        raise InputError(name, f"must be a number in {'(0, 1]' if positive else '[0, 1]'}, got {value!r}")
    return float(value)


def positive_finite_array(name: str, values) -> np.ndarray:
    """A non-empty 1-d float64 array of finite numbers > 0 (a scalar becomes one element)."""
    try:
        array = np.atleast_1d(np.asarray(values, dtype=np.float64))
    except (TypeError, ValueError):
        raise InputError(name, "must be numbers") from None
    if array.ndim != 1 or len(array) == 0:
        raise InputError(name, "must be a non-empty list of numbers")
    bad = array[~(np.isfinite(array) & (array > 0))]
    if len(bad):
        raise InputError(name, f"every value must be finite and > 0, got {bad[0]}")
    return array


def choice(name: str, value, choices) -> object:
    """One of ``choices`` (a sequence of allowed values)."""
    if value not in choices:
        raise InputError(name, f"must be one of {', '.join(map(str, choices))}, got {value!r}")
    return value


def flag(name: str, value) -> bool:
    """True or false, never a number standing for one."""
    if not isinstance(value, bool):
        raise InputError(name, f"must be true or false, got {value!r}")
    return value


def seed(name: str, value) -> int:
    """A seed: an integer >= 0."""
    return integer(name, value, low=0)
