"""Server speeds drawn at random: mu_k i.i.d. from a distribution F (paper 002 section 3).

A scenario names the distribution in a table::

    [system]
    n_servers = 500
    speed_distribution = { kind = "uniform", low = 0.7, high = 1.3, seed = 1 }
    excess_capacity = 1.0          # n lambda = sum(mu_k) - c sqrt(n)

Kinds (``SPEED_DISTRIBUTIONS``):

- ``uniform``: U[low, high];
- ``discrete``: ``speeds`` with ``probabilities`` (pools drawn at random; for exact pool sizes
  use ``speed_mix``);
- ``lognormal``: with ``mean`` and coefficient of variation ``cv``;
- ``empirical``: resampled with replacement from ``values`` or from a ``file`` of numbers.

The sample is the system's ``speed`` array, so it is recorded in every result's metadata; the
draw takes its own seed (default 0), so every policy of a study sees the same speeds.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np

from hetlb import validation
from hetlb.errors import InputError
from hetlb.model.system import RATE_RULE, server_count

SPEED_DISTRIBUTIONS = {
    "uniform": {"low", "high"},
    "discrete": {"speeds", "probabilities"},
    "lognormal": {"mean", "cv"},
    "empirical": {"values", "file"},
}


def draw_speeds(n_servers: int, spec: dict) -> np.ndarray:
    """``n_servers`` speeds drawn i.i.d. from the distribution a ``speed_distribution`` table names."""
    kind = spec.get("kind")
    if kind not in SPEED_DISTRIBUTIONS:
        raise InputError(
            "system.speed_distribution.kind", f"must be one of {', '.join(SPEED_DISTRIBUTIONS)}, got {kind!r}"
        )
    allowed = SPEED_DISTRIBUTIONS[kind] | {"kind", "seed"}
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise InputError(
            f"system.speed_distribution.{unknown[0]}",
            f"unknown key for kind {kind!r}; allowed: {', '.join(sorted(allowed))}",
        )
    n_servers = server_count("system.n_servers", n_servers)
    seed = spec.get("seed", 0)
    rng = np.random.default_rng(validation.seed("system.speed_distribution.seed", seed))
    if kind == "uniform":
        low, high = _positive(spec, "low"), _positive(spec, "high")
        if not low < high:
            raise InputError("system.speed_distribution.high", f"must exceed low ({low}), got {high}")
        return rng.uniform(low, high, n_servers)
    if kind == "discrete":
        speeds = _positive_list(spec, "speeds")
        field = "system.speed_distribution.probabilities"
        probabilities = validation.positive_finite_array(field, spec.get("probabilities", []))
        if len(probabilities) != len(speeds) or not np.isclose(probabilities.sum(), 1):
            raise InputError(field, "needs one probability > 0 per speed, summing to 1")
        return rng.choice(speeds, size=n_servers, p=probabilities / probabilities.sum())
    if kind == "lognormal":
        mean, cv = _positive(spec, "mean"), _positive(spec, "cv")
        sigma2 = math.log1p(cv * cv)
        return rng.lognormal(math.log(mean) - sigma2 / 2, math.sqrt(sigma2), n_servers)
    if ("values" in spec) == ("file" in spec):
        raise InputError("system.speed_distribution.values", "give either values or file")
    values = _positive_list(spec, "values") if "values" in spec else _read_numbers(spec["file"])
    return rng.choice(values, size=n_servers, replace=True)


def _positive(spec: dict, key: str) -> float:
    """A rate of the distribution (or its cv), in validation.RATE_RANGE."""
    value = validation.positive_number(f"system.speed_distribution.{key}", spec.get(key))
    validation.positive_finite_array(f"system.speed_distribution.{key}", value, validation.RATE_RANGE, RATE_RULE)
    return value


def _positive_list(spec: dict, key: str) -> np.ndarray:
    return validation.positive_finite_array(
        f"system.speed_distribution.{key}", spec.get(key), validation.RATE_RANGE, RATE_RULE
    )


READ_BYTES_PER_BYTE = 64
"""Memory reading a file of numbers takes per byte of it, at most (its text, the words, the floats)."""


def _read_numbers(path) -> np.ndarray:
    field = "system.speed_distribution.file"
    try:
        file = Path(path)
        if not file.is_file():  # a folder, a device such as /dev/zero, or nothing
            raise InputError(field, f"{validation.shown(str(path))} is not a file")
        validation.check_memory(
            field, READ_BYTES_PER_BYTE * file.stat().st_size, f"reading {validation.shown(str(path))}"
        )
        text = file.read_text(encoding="utf-8")
    except (OSError, ValueError) as error:  # ValueError: a NUL in the path; UnicodeDecodeError: not UTF-8 text
        if isinstance(error, InputError):
            raise
        raise InputError(field, f"cannot read {validation.shown(str(path))} as text: {error}") from None
    try:
        values = np.array([float(word) for word in re.split(r"[\s,]+", text.strip()) if word])
    except ValueError:
        raise InputError(field, f"{validation.shown(str(path))} must hold numbers only") from None
    return _positive_list({"file": values}, "file")
