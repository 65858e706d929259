"""Paper reproductions: ``hetlb reproduce NAME [--scale quick|paper] [--out DIR]``.

Each reproduction runs its points on the sweep runner (parallel, resumable through the result
store) and writes to its folder:

- ``points.csv``: every point with its mean, 95% interval and replications;
- ``NAME.png``: the figure in the paper's layout;
- ``claims.json``: the parameters used (those the paper lost are marked), and for each claim of
  MODEL-SPEC section 5 that the figure addresses: the statement, what was measured, and whether
  it holds.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from hetlb import __version__
from hetlb.errors import InputError
from hetlb.experiments.executors import resolve_executor
from hetlb.experiments.spec import SweepSpec
from hetlb.experiments.sweep import SweepResult, sweep
from hetlb.results.run import finite_or_null, json_default

SCALES = ("quick", "paper")


@dataclass
class Claim:
    """One checked claim: its id in MODEL-SPEC section 5, the statement, the measured values and
    whether they support it."""

    id: str
    statement: str
    measured: dict
    holds: bool


@dataclass
class Context:
    """What a reproduction needs besides its options: where to write, and how its sweeps run (one
    executor for all of them, so that a process pool starts once)."""

    out: Path
    executor: object = None
    store: str | None = "hetlb-results.sqlite"
    progress: bool = False
    options: dict = field(default_factory=dict)

    def sweep(self, spec: SweepSpec) -> SweepResult:
        return sweep(spec, executor=self.executor, store=self.store, progress=self.progress)


@dataclass
class Outcome:
    """What a reproduction returns: its table, its claims and the parameters it used
    (``lost`` names those the paper lost, set here as options)."""

    table: pd.DataFrame
    claims: list
    parameters: dict
    lost: list


@dataclass
class Reproduction:
    """A registered reproduction: ``run(context) -> Outcome`` writes its own figure."""

    name: str
    title: str
    run: Callable
    options: dict  # name -> (quick default, paper default, description)


REPRODUCTIONS: dict[str, Reproduction] = {}


def register(reproduction: Reproduction) -> Reproduction:
    REPRODUCTIONS[reproduction.name] = reproduction
    return reproduction


def series_of(table, metric: str, by: str, x: str) -> dict:
    """The figure's series: for each value of column ``by``, (mean, ci_low, ci_high) of ``metric``
    ordered by column ``x`` (the ``series`` of hetlb.plots.plot_metric)."""
    return {
        label: (
            rows.sort_values(x)[metric].to_numpy(),
            rows.sort_values(x)[metric + "_ci_low"].to_numpy(),
            rows.sort_values(x)[metric + "_ci_high"].to_numpy(),
        )
        for label, rows in table.groupby(by, sort=False)
    }


def plain_names(table: pd.DataFrame) -> pd.DataFrame:
    """Axis columns without their table: system.n_servers -> n_servers, policy.id -> policy."""
    return table.rename(
        columns=lambda c: (
            "policy" if c == "policy.id" else c.split(".", 1)[1] if c.startswith(("system.", "run.")) else c
        )
    )


def two_class_speeds(n_servers: int, fast_fraction: float, fast_speed: float, slow_speed: float) -> str:
    """The speeds text of round(N q_F) servers of speed ``fast_speed`` and the rest of ``slow_speed``."""
    n_fast = round(n_servers * fast_fraction)
    classes = [(n_fast, fast_speed), (n_servers - n_fast, slow_speed)]
    return ",".join(f"{count}x{speed!r}" for count, speed in classes if count)


def row(table, **where) -> pd.Series:
    """The first row of ``table`` whose columns equal the given values."""
    mask = np.ones(len(table), bool)
    for column, value in where.items():
        mask &= table[column].to_numpy() == value
    return table[mask].iloc[0]


def same_kind(value, default) -> bool:
    """Whether an option's value has the kind of its default (an integer also serves for a number,
    a list must hold numbers when the default's do)."""
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(default, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float))
    if isinstance(default, list):
        return isinstance(value, list) and len(value) > 0 and all(same_kind(item, default[0]) for item in value)
    return isinstance(value, type(default))


def describe_kind(default) -> str:
    if isinstance(default, bool):
        return "true or false"
    if isinstance(default, list):
        return f"a non-empty list of {describe_kind(default[0]).removeprefix('a ').removeprefix('an ')}s"
    return {int: "an integer", float: "a number", str: "a text"}.get(type(default), type(default).__name__)


def reproduce(
    name: str,
    *,
    scale: str = "quick",
    out=None,
    executor=None,
    store="hetlb-results.sqlite",
    progress: bool = False,
    **options,
) -> dict:
    """Run a reproduction and write points.csv, NAME.png and claims.json to ``out``
    (default ``reproductions/NAME``). Options override the scale's defaults (see
    ``REPRODUCTIONS[name].options``). Returns the content of claims.json."""
    if name not in REPRODUCTIONS:
        raise InputError("name", f"unknown reproduction {name!r}; choose one of: {', '.join(REPRODUCTIONS)}")
    if scale not in SCALES:
        raise InputError("scale", f"must be one of {', '.join(SCALES)}, got {scale!r}")
    reproduction = REPRODUCTIONS[name]
    unknown = sorted(set(options) - set(reproduction.options))
    if unknown:
        raise InputError(unknown[0], f"is not an option of {name}; its options: {', '.join(reproduction.options)}")
    for key, value in options.items():
        if not same_kind(value, reproduction.options[key][0]):
            raise InputError(key, f"must be {describe_kind(reproduction.options[key][0])}, got {value!r}")
    values = {
        key: options.get(key, quick if scale == "quick" else paper)
        for key, (quick, paper, _) in reproduction.options.items()
    }
    out = Path(out or Path("reproductions") / name)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    pool, _, close = resolve_executor(executor)
    try:
        outcome = reproduction.run(Context(out, pool, store, progress, values))
    finally:
        close()
    outcome.table.to_csv(out / "points.csv", index=False)
    report = {
        "reproduction": name,
        "title": reproduction.title,
        "scale": scale,
        "parameters": outcome.parameters,
        "parameters_lost_by_the_paper": outcome.lost,
        "claims": [asdict(claim) for claim in outcome.claims],
        "all_claims_hold": all(claim.holds for claim in outcome.claims),
        "wall_seconds": time.perf_counter() - started,
        "hetlb": __version__,
    }
    (out / "claims.json").write_text(
        json.dumps(finite_or_null(report), indent=2, default=json_default, allow_nan=False) + "\n"
    )
    return report
