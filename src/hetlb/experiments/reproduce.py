"""Paper reproductions: ``hetlb reproduce NAME [--scale quick|paper] [--out DIR]``.

Each reproduction runs its points on the sweep runner (parallel, resumable through the result
store) and writes to its folder:

- ``points.csv``: every point with its mean, 95% interval and replications;
- ``NAME.png``: the figure in the paper's layout;
- ``claims.json``: the parameters used (those the paper lost are marked), and for each claim of
  the paper that the figure addresses: the statement as checked, what was measured, and its
  status (:data:`STATUSES`).

A claim ``holds`` when the data support it as worded and ``fails`` when they do not. It
``deviates`` when it does not hold as worded, the code has found in the data the cause documented
in docs/reproductions (a parameter the paper lost, a setting the data show to matter) and the
claim says that cause and where its evidence is. An inferred corollary (a prediction drawn from
the paper, not stated in it) is ``refuted`` when the data contradict it: that is a finding about
the inference, not a failure of the reproduction. ``hetlb reproduce`` exits with status 1 only
when a claim fails.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from hetlb import validation
from hetlb.errors import InputError
from hetlb.experiments.executors import resolve_executor
from hetlb.experiments.spec import SweepSpec
from hetlb.experiments.store import ResultStore
from hetlb.experiments.sweep import SweepResult, sweep
from hetlb.results.base import finite_or_null, json_default
from hetlb.version import __version__

if TYPE_CHECKING:
    import pandas as pd

SCALES = ("quick", "paper")
STATUSES = ("holds", "deviates", "refuted", "fails")
"""A claim's possible statuses; only ``fails`` makes a reproduction fail."""


@dataclass(frozen=True)
class Explanation:
    """Why a claim does not hold as worded: the documented cause (a sentence or two) and the
    evidence (the docs section that documents it, with the figures this run measured)."""

    cause: str
    evidence: str


@dataclass
class Claim:
    """One checked claim: its id (the paper's claim, with a letter for each part checked
    separately), the statement as checked, the measured values and the status; ``cause`` and
    ``evidence`` are set for a claim that deviates or is refuted."""

    id: str
    statement: str
    measured: dict
    status: str
    cause: str = ""
    evidence: str = ""

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"claim {self.id}: status must be one of {', '.join(STATUSES)}, got {self.status!r}")
        explained = self.status in ("deviates", "refuted")
        if explained != bool(self.cause and self.evidence):
            raise ValueError(f"claim {self.id}: a cause and evidence go with deviates or refuted, and only with them")

    @property
    def holds(self) -> bool:
        return self.status == "holds"

    @property
    def fails(self) -> bool:
        return self.status == "fails"


def decide(
    claim_id: str,
    statement: str,
    measured: dict,
    holds: bool,
    *,
    deviation: Explanation | None = None,
    refutation: Explanation | None = None,
) -> Claim:
    """The claim's status from the data: ``holds`` when ``holds``; else ``deviates`` when the
    caller has checked that the data show the documented cause and passes its ``deviation``;
    else ``refuted`` when the claim is an inferred corollary that the data contradict (the caller
    passes its ``refutation``); else ``fails``."""
    if holds:
        return Claim(claim_id, statement, measured, "holds")
    for status, explanation in (("deviates", deviation), ("refuted", refutation)):
        if explanation is not None:
            return Claim(claim_id, statement, measured, status, explanation.cause, explanation.evidence)
    return Claim(claim_id, statement, measured, "fails")


@dataclass
class Context:
    """What a reproduction needs besides its options: where to write, and how its sweeps run (one
    executor for all of them, so that a process pool starts once)."""

    out: Path
    executor: object = None
    store: str | None = None
    progress: bool = True
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
    """A registered reproduction: ``run(context) -> Outcome`` writes its own figure. ``claims``
    maps the id of every claim it may check to the paper's claim in a few words: an id means one
    claim wherever it appears (C1, the bound, is checked on three figures)."""

    name: str
    title: str
    run: Callable
    options: dict  # name -> (quick default, paper default, description)
    claims: dict = field(default_factory=dict)  # id -> the paper's claim in a few words


PAPER_MODULES = ("hetlb.experiments.weng", "hetlb.experiments.zhou", "hetlb.experiments.buke")
"""The modules that register the reproductions of papers 000, 001 and 002, in listing order."""


def paper_rank(reproduction) -> int:
    """The place in :data:`PAPER_MODULES` of the module whose function runs ``reproduction``."""
    module = reproduction.run.__module__
    ranks = [i for i, paper in enumerate(PAPER_MODULES) if module == paper or module.startswith(paper + ".")]
    return ranks[0] if ranks else len(PAPER_MODULES)


class Registry(dict):
    """The reproductions by name: a dict that imports :data:`PAPER_MODULES` (which register their
    reproductions) the first time it is read, so that importing hetlb.experiments stays cheap."""

    loaded = False

    def load(self) -> Registry:
        if not self.loaded:
            self.loaded = True
            import importlib

            for module in PAPER_MODULES:
                importlib.import_module(module)
            # a paper's module imported earlier registered first: list them in the papers' order
            in_order = sorted(dict.items(self), key=lambda item: paper_rank(item[1]))
            dict.clear(self)
            dict.update(self, in_order)
        return self

    def __getitem__(self, name):
        return dict.__getitem__(self.load(), name)

    def __contains__(self, name) -> bool:
        return dict.__contains__(self.load(), name)

    def __iter__(self):
        return dict.__iter__(self.load())

    def __len__(self) -> int:
        return dict.__len__(self.load())

    def __eq__(self, other) -> bool:
        return dict.__eq__(self.load(), other)

    __hash__ = None

    def __repr__(self) -> str:
        return dict.__repr__(self.load())

    def keys(self):
        return dict.keys(self.load())

    def values(self):
        return dict.values(self.load())

    def items(self):
        return dict.items(self.load())

    def get(self, name, default=None):
        return dict.get(self.load(), name, default)


REPRODUCTIONS: dict[str, Reproduction] = Registry()
"""Every registered reproduction by name (filled on first use)."""


def claims_of(catalogue: dict, *ids: str) -> dict:
    """The entries of a paper's claim ``catalogue`` (id -> the claim in a few words) that one
    reproduction checks, for :attr:`Reproduction.claims`."""
    return {claim_id: catalogue[claim_id] for claim_id in ids}


def register(reproduction: Reproduction) -> Reproduction:
    dict.__setitem__(REPRODUCTIONS, reproduction.name, reproduction)
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


MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*")
LINE_STYLES = ("-", "--", "-.", ":")


def style(index: int) -> dict:
    """The marker and line style of a panel's ``index``-th series: each series its own, every
    other marker hollow, so that series lying on each other (jfsq and jfiq) stay visible."""
    return {
        "marker": MARKERS[index % len(MARKERS)],
        "linestyle": LINE_STYLES[index % len(LINE_STYLES)],
        "markersize": 6 if index % 2 else 4,
        "markerfacecolor": "none" if index % 2 else None,
    }


def draw_bars(axes, x, series: dict, *, xlabel: str, ylabel: str, title: str = "", bound=None, bound_label=""):
    """Points with 95% error bars, each series shifted a little along x so that bars at the same
    x do not hide each other; ``bound`` dashed."""
    x = np.asarray(x, dtype=float)
    shift = 0.5 * np.min(np.diff(x)) / max(len(series), 1) if len(x) > 1 else 0.0
    for index, (label, (mean, low, high)) in enumerate(series.items()):
        offset = (index - (len(series) - 1) / 2) * shift
        mean, low, high = (np.asarray(v, dtype=float) for v in (mean, low, high))
        look = style(index)
        axes.errorbar(
            x + offset,
            mean,
            yerr=[mean - low, high - mean],
            capsize=2.5,
            linewidth=1.0,
            label=label,
            **{k: v for k, v in look.items() if v is not None},
        )
    if bound is not None:
        axes.plot(x, bound, "k--", linewidth=1.2, label=bound_label)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    if title:
        axes.set_title(title, fontsize=10)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)


def plot_reproduction(panels: list, path=None, *, title: str = "", note: str = ""):
    """Write a reproduction's figure: panels side by side, each a dict of the arguments of
    hetlb.plots' draw_metric (lines with shaded intervals), or of :func:`draw_bars` with
    ``bars=True``. Each series of a panel has its own marker and line style; ``note`` (what the
    shading or the bars are) is written under the panels. Returns the matplotlib Figure, written to
    ``path`` when given."""
    from hetlb.plots.figures import ShownFigure, draw_metric

    figure = ShownFigure(figsize=(6.4 * len(panels), 4.6))
    axes = figure.subplots(1, len(panels), squeeze=False)
    for panel, ax in zip(panels, axes[0]):
        panel = dict(panel)
        if panel.pop("bars", False):
            draw_bars(ax, panel.pop("x"), panel.pop("series"), **panel)
            continue
        labels = list(panel["series"])
        draw_metric(ax, panel.pop("x"), panel.pop("series"), **panel)
        for line in ax.get_lines():
            if line.get_label() in labels:
                for key, value in style(labels.index(line.get_label())).items():
                    if value is not None:
                        getattr(line, f"set_{key}")(value)
        ax.legend(fontsize=8)
    if title:
        figure.suptitle(title, fontsize=11)
    if note:
        figure.text(0.5, 0.01, note, ha="center", va="bottom", fontsize=8.5, style="italic")
    figure.tight_layout(rect=(0, 0.04 if note else 0, 1, 1))
    if path is not None:
        figure.savefig(path, dpi=130)
    return figure


def intervals_note(replications: int, what: str = "shaded") -> str:
    return f"{what}: 95% confidence intervals of the mean over {replications} independent replications (t)"


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
    store=None,
    progress: bool = True,
    **options,
) -> dict:
    """Run a reproduction and write points.csv, NAME.png and claims.json to ``out``
    (default ``reproductions/NAME``); its runs go to the result store ``store`` when one is given
    (``hetlb reproduce`` keeps hetlb-results.sqlite), its progress to standard error unless
    ``progress`` is False. Options override the scale's defaults (see
    ``REPRODUCTIONS[name].options``). Returns the content of claims.json: ``passes`` is true
    when no claim fails (each holds, deviates with its documented cause, or is a refuted inferred
    corollary), ``all_claims_hold`` when each holds as worded.

    Parameters
    ----------
    name
        A reproduction of REPRODUCTIONS (``hetlb reproduce --help`` lists them).
    scale
        "quick" or "paper".
    out
        The folder (default ``reproductions/NAME``).
    executor
        As in ``sweep``.
    store
        The result store's path, as in ``sweep``.
    progress
        Draw a progress bar on standard error.
    **options
        Overrides of the scale's options.
    """
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
    out = validation.output_folder("out", Path("reproductions") / name if out is None else out)
    if store is not None:  # a store that cannot be used fails now, not after the first sweep
        ResultStore(store).close()
    with validation.os_errors("out", out):
        out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    pool, _, close = resolve_executor(executor)
    try:
        outcome = reproduction.run(Context(out, pool, store, progress, values))
    finally:
        close()
    ids = [claim.id for claim in outcome.claims]
    undeclared = sorted(set(ids) - set(reproduction.claims))
    if undeclared or len(set(ids)) != len(ids):
        raise ValueError(f"{name}: claim ids must be declared and distinct, got {ids}")
    with validation.os_errors("out", out):
        outcome.table.to_csv(out / "points.csv", index=False)
    statuses = [claim.status for claim in outcome.claims]
    report = {
        "reproduction": name,
        "title": reproduction.title,
        "scale": scale,
        "parameters": outcome.parameters,
        "parameters_lost_by_the_paper": outcome.lost,
        "claims": [asdict(claim) for claim in outcome.claims],
        "statuses": {status: statuses.count(status) for status in STATUSES if status in statuses},
        "passes": "fails" not in statuses,
        "all_claims_hold": all(status == "holds" for status in statuses),
        "wall_seconds": time.perf_counter() - started,
        "hetlb": __version__,
    }
    with validation.os_errors("out", out):
        (out / "claims.json").write_text(
            json.dumps(finite_or_null(report), indent=2, default=json_default, allow_nan=False) + "\n"
        )
    return report
