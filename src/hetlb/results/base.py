"""The result family: what every result of hetlb gives, whichever model or command produced it.

A :class:`Result` has ``metadata`` (what was run: system, policy, seed, versions; JSON-ready),
``summary`` (the flat headline figures, each interval as ``name + "_ci"`` = [low, high]),
``to_dict()`` (everything, JSON-ready, every key of ``summary`` among its keys with the same
value), ``to_json()`` (strict JSON: numpy values as numbers, nan and inf as null), ``to_frame()``
(a pandas DataFrame) and a one-line ``repr``: what the result is of, its headline figure with its
95% interval, and how much was measured. Its members: one replication of the continuous, slotted
and many-dispatcher models (RunResult, SlottedRunResult, DispatcherRunResult) and their
replications (SimulationResult, SlottedResult, DispatchersResult), the bounding systems of 002
(BoundingResult), the load generator's runs (LoadResult, InferenceLoadResult) and the testbed's
(hetlb.testbed.Testbed).
"""

from __future__ import annotations

import functools
import json
import math
import os
import platform
import sys

import numpy as np


class Result:
    """The base of every result (see the module's docstring). A member gives ``metadata`` (a dict,
    as a field or a property), ``summary``, ``to_dict``, ``headline``, ``describe`` and ``extent``;
    the rest is here."""

    @property
    def summary(self) -> dict:
        """The flat dictionary of headline figures: the first entries of ``to_dict``."""
        raise NotImplementedError

    def to_dict(self) -> dict:
        """Everything, JSON-ready once through :func:`finite_or_null` and :func:`json_default`."""
        raise NotImplementedError

    def headline(self) -> tuple:
        """(label, value, interval or None) of the figure the repr shows."""
        raise NotImplementedError

    def describe(self) -> str:
        """What the result is of, in a few words (the repr's start)."""
        raise NotImplementedError

    def extent(self) -> str:
        """How much was measured, in a few words (the repr's end)."""
        raise NotImplementedError

    def to_json(self, *args, indent: int | None = 2, **kwargs) -> str:
        """Strict JSON of ``to_dict(*args, **kwargs)``: numpy values become numbers and non-finite
        floats become null.

        Parameters
        ----------
        *args
            The positional arguments of ``to_dict``.
        indent
            The JSON indentation (None: one line).
        **kwargs
            The keyword arguments of ``to_dict``.
        """
        values = finite_or_null(self.to_dict(*args, **kwargs))
        return json.dumps(values, indent=indent, default=json_default, allow_nan=False)

    def to_frame(self):
        """A one-row pandas DataFrame of the summary: its numbers, texts and flags, each interval as
        ``name + "_ci_low"`` and ``name + "_ci_high"``, a mapping of numbers as ``name + "_" + key``."""
        import pandas as pd

        return pd.DataFrame.from_records([flat_row(self.summary)])

    def __repr__(self) -> str:
        label, value, ci = self.headline()
        interval = "" if ci is None else f" {format_interval(ci)}"
        shown = "n/a" if value is None else f"{value:.5g}"  # n/a: not computed (a load without answers)
        return f"<{type(self).__name__} {self.describe()}: {label} {shown}{interval}, {self.extent()}>"


class ReplicationResult(Result):
    """One replication of a simulation: its ``metadata`` is its seed (``seed_entropy``, the root
    entropy, and ``seed_key``, its spawn key); those of the scenario are its replicated result's."""

    seed_entropy: int | list[int]
    seed_key: tuple

    @property
    def metadata(self) -> dict:
        return {"seed": {"entropy": self.seed_entropy, "spawn_key": list(self.seed_key)}}

    def describe(self) -> str:
        return f"seed key {self.seed_key}"

    def figures(self, names) -> dict:
        """Each of ``names`` and its interval ``name + "_ci"`` where the run measures one."""
        return with_intervals(names, lambda name: (getattr(self, name), getattr(self, name + "_ci", None)))


def with_intervals(names, value_and_interval) -> dict:
    """``name`` and, where it is not None, ``name + "_ci"`` for each of ``names``, from
    ``value_and_interval(name)`` = (value, interval or None)."""
    out = {}
    for name in names:
        value, ci = value_and_interval(name)
        out[name] = value
        if ci is not None:
            out[name + "_ci"] = ci
    return out


def flat_row(summary: dict) -> dict:
    """The scalar columns of a summary (:meth:`Result.to_frame`)."""
    row: dict = {}
    for key, value in summary.items():
        if key.endswith("_ci") and isinstance(value, (list, tuple, np.ndarray)) and len(value) == 2:
            row[key + "_low"], row[key + "_high"] = (math.nan if v is None else float(v) for v in value)
        elif isinstance(value, dict):
            row.update({f"{key}_{name}": item for name, item in value.items() if is_scalar(item)})
        elif is_scalar(value) or value is None:
            row[key] = value
    return row


def is_scalar(value) -> bool:
    return isinstance(value, (int, float, str, bool, np.integer, np.floating, np.bool_))


def format_interval(ci) -> str:
    """'[low, high] (95% CI)', or '(no CI)' when there is none."""
    if ci is None or not np.all(np.isfinite(np.asarray(ci, dtype=float))):
        return "(no CI)"
    return f"[{ci[0]:.5g}, {ci[1]:.5g}] (95% CI)"


def finite_or_null(value):
    """Replace nan and inf (anywhere in nested lists and dicts) by None."""
    if isinstance(value, dict):
        return {key: finite_or_null(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [finite_or_null(item) for item in value]
    if isinstance(value, (float, np.floating)) and not math.isfinite(value):
        return None
    return value


def json_default(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    raise TypeError(f"not serialisable: {type(value).__name__}")


def replications_text(replications: int) -> str:
    """ "N replication(s)", the extent of a replicated result."""
    return f"{replications} replication{'s' if replications != 1 else ''}"


def versions() -> dict:
    """The versions of hetlb and of what its results depend on (read from the installed packages'
    metadata, without importing numba or scipy)."""
    from hetlb.version import __version__

    return {
        "hetlb": __version__,
        "numpy": np.__version__,
        "numba": installed_version("numba"),
        "scipy": installed_version("scipy"),
        "python": platform.python_version(),
    }


@functools.cache
def installed_version(name: str) -> str:
    """The version of the installed distribution ``name``: from the name of its ``NAME-VERSION.dist-info``
    folder on the path, which is what importlib.metadata reads it from too (importing that, with the
    email parser it reads the metadata with, costs about 20 ms of CPU, a tenth of a short command);
    importlib.metadata's answer when no such folder is found."""
    prefix = f"{name}-"
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for folder in names:
            if folder.startswith(prefix) and folder.endswith(".dist-info"):
                return folder[len(prefix) : -len(".dist-info")]
    from importlib.metadata import version

    return version(name)
