"""Standard figures: a metric against an axis, one line per policy, confidence bands, a bound.

Every series has its own marker and line style as well as its colour, with hollow markers, so
series that coincide (jsq under jiq at low load) stay visible; the legend says what the shading
is. Axis labels given as a table's column names (``system.load``, ``mean_response_time``) are
written out in words with their units (:func:`axis_label`).

Every function returns its matplotlib Figure (shown by a notebook as it is returned) and writes a
file only when given a path. The figures are not pyplot's: nothing is left open or shown twice.
"""

from __future__ import annotations

import io
import itertools
import re

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch


class ShownFigure(Figure):
    """A matplotlib Figure that a notebook shows as a PNG when a cell returns it, whether or not
    pyplot (which registers matplotlib's own display) was imported."""

    def _repr_png_(self) -> bytes:
        buffer = io.BytesIO()
        self.savefig(buffer, format="png", dpi=100)
        return buffer.getvalue()


MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*")
LINE_STYLES = ("-", "--", "-.", ":")
BAND_LABEL = "shaded: 95% confidence interval"

LABELS = {
    "system.load": r"load $\rho$ (arrival rate / total capacity)",
    "system.n_servers": r"number of servers $N$",
    "system.excess_capacity": r"excess capacity $c$ (Halfin-Whitt)",
    "system.dispatchers": r"number of dispatchers $M$",
    "system.buffer": r"buffer size $b$ (jobs per server)",
    "system.scv": "squared coefficient of variation of job sizes",
    "system.arrival_rate": r"arrival rate $\lambda$ (jobs per time unit)",
    "policy.id": "policy",
    "policy.d": r"servers sampled $d$",
    "policy.p_hat": r"update probability $\hat{p}$",
    "policy.push_d": "servers probed per update",
    "run.jobs": "measured jobs",
    "run.slots": "measured slots",
    "mean_response_time": "mean response time (time units)",
    "mean_waiting_time": "mean waiting time (time units)",
    "response_time_p50": "median response time (time units)",
    "response_time_p95": "95th percentile of response time (time units)",
    "response_time_p99": "99th percentile of response time (time units)",
    "p_wait": "P(wait): fraction of jobs that wait",
    "blocking_probability": "blocking probability",
    "mean_number_in_system": "mean number of jobs in system",
    "number_in_system_growth": "growth of the number in system (second half / first half - 1)",
    "littles_law_gap": r"Little's law gap $(L - \lambda W) / L$",
    "mean_delay": "mean delay (slots)",
    "mean_estimate_error": r"mean estimate error $|Q - \tilde{Q}|$ (jobs)",
    "messages_per_arrival": "messages per arrival",
    "messages_per_decision": "messages per decision",
    "speed_lower_bound": r"lower bound $C^* / \lambda$ (time units)",
}
"""Words for the column names of the sweep tables."""


def axis_label(text: str) -> str:
    """Words for a column name (``system.load`` -> 'load rho (arrival rate / total capacity)'),
    also when written with spaces for underscores; other axis columns (``system.*``, ``policy.*``,
    ``run.*``) lose their table prefix and underscores; any other text is kept."""
    key = text.strip().replace(" ", "_")
    if key in LABELS:
        return LABELS[key]
    if re.fullmatch(r"(system|policy|run)\.[A-Za-z_][A-Za-z0-9_]*", text.strip()):
        return text.strip().split(".", 1)[1].replace("_", " ")
    return text


def draw_metric(
    axes,
    x,
    series: dict,
    *,
    xlabel: str,
    ylabel: str,
    title: str = "",
    bound=None,
    bound_label: str = "lower bound",
    log_y: bool = False,
    log2_x: bool = False,
    legend_title: str | None = None,
    band_label: str = BAND_LABEL,
) -> None:
    """Draw on ``axes``: ``series`` maps a label to (means, ci_low, ci_high) over ``x``, each with
    its own marker and line style, the interval shaded (``band_label`` says which); ``bound`` is an optional curve over ``x``
    drawn black dashed; ``log_y`` for a logarithmic y axis, ``log2_x`` for a base-2 logarithmic x
    axis (numbers of servers). Labels pass through :func:`axis_label`."""
    shaded = False
    for (label, (mean, low, high)), marker, style in zip(
        series.items(), itertools.cycle(MARKERS), itertools.cycle(LINE_STYLES)
    ):
        (line,) = axes.plot(
            x, mean, marker=marker, markersize=5, markerfacecolor="none", linestyle=style, linewidth=1.3, label=label
        )
        band = np.isfinite(np.asarray(low, dtype=float)) & np.isfinite(np.asarray(high, dtype=float))
        if band.any():
            axes.fill_between(x, low, high, color=line.get_color(), alpha=0.2, linewidth=0)
            shaded = True
    if bound is not None:
        axes.plot(x, bound, "k--", linewidth=1.2, label=bound_label)
    if log_y:
        axes.set_yscale("log")
    if log2_x:
        axes.set_xscale("log", base=2)
    axes.set_xlabel(axis_label(xlabel))
    axes.set_ylabel(axis_label(ylabel))
    if title:
        axes.set_title(title, fontsize=10)
    axes.grid(alpha=0.3)
    handles, labels = axes.get_legend_handles_labels()
    if shaded:
        handles.append(Patch(facecolor="grey", alpha=0.3, linewidth=0))
        labels.append(band_label)
    axes.legend(handles, labels, fontsize=8, title=axis_label(legend_title) if legend_title else None)


def plot_intervals(panels: list, path=None, *, sharey: bool = True) -> Figure:
    """The Figure of panels side by side, drawn as points with interval bars at one category each.

    Parameters
    ----------
    panels
        A list of dicts with ``title``, ``ylabel`` and ``rows``: a list of (label, mean, low, high),
        a category each (a nan mean: left out; nan bounds: no bar).
    path
        A file to write the figure to (its format by the extension, e.g. PNG); None: none written.
    sharey
        Whether the panels share one y scale.

    Returns
    -------
    matplotlib.figure.Figure
        The figure.
    """
    width = max(6.4, 0.55 * max(len(panel["rows"]) for panel in panels) + 2)
    figure = ShownFigure(figsize=(width * len(panels), 4.8))
    axes = figure.subplots(1, len(panels), squeeze=False, sharey=sharey)
    for panel, ax in zip(panels, axes[0]):
        labels = [row[0] for row in panel["rows"]]
        mean, low, high = (np.array([row[i] for row in panel["rows"]], dtype=float) for i in (1, 2, 3))
        position = np.arange(len(labels))
        errors = np.vstack([mean - low, high - mean])
        shown = np.isfinite(mean)
        ax.errorbar(position[shown], mean[shown], yerr=np.nan_to_num(errors[:, shown]), fmt="o", capsize=4)
        ax.set_xticks(position, labels, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel(panel["ylabel"])
        ax.set_title(panel["title"], fontsize=10)
        ax.grid(alpha=0.3)
    return finished(figure, path)


def image_formats() -> tuple:
    """The file extensions matplotlib writes (png, pdf, svg, ...), without dots."""
    from matplotlib.backend_bases import FigureCanvasBase

    return tuple(sorted(FigureCanvasBase.get_supported_filetypes()))


def plot_metric(x, series: dict, path=None, **options) -> Figure:
    """The Figure of one panel, written to ``path`` when given, in the format of its extension
    (``image_formats``).

    Parameters
    ----------
    x
        The values of the x axis.
    series
        The curves: label -> values (one per x), as ``draw_metric`` takes them.
    path
        The file to write (None: none).
    **options
        The other options of ``draw_metric`` (axis labels, intervals, a bound, scales).

    Returns
    -------
    Figure
        The matplotlib Figure (shown in a notebook).
    """
    return plot_panels([dict(x=x, series=series, **options)], path)


def plot_panels(panels: list, path=None, *, title: str = "", sharey: bool = False) -> Figure:
    """The Figure of panels side by side, written to ``path`` (PNG) when given.

    Parameters
    ----------
    panels
        One dict of ``draw_metric``'s arguments per panel.
    path
        The file to write (None: none).
    title
        The figure's title.
    sharey
        Draw every panel on one y scale.

    Returns
    -------
    Figure
        The matplotlib Figure (shown in a notebook).
    """
    figure = ShownFigure(figsize=(6.4 * len(panels), 4.4))
    axes = figure.subplots(1, len(panels), squeeze=False, sharey=sharey)
    for panel, ax in zip(panels, axes[0]):
        panel = dict(panel)
        draw_metric(ax, panel.pop("x"), panel.pop("series"), **panel)
    if title:
        figure.suptitle(title, fontsize=11)
    return finished(figure, path)


def finished(figure: Figure, path=None) -> Figure:
    """``figure`` laid out, and written to ``path`` (its format by the extension) when given."""
    figure.tight_layout()
    if path is not None:
        figure.savefig(path, dpi=130)
    return figure


def plot_occupancy(labels, occupancy, path=None, *, title: str = "", band_label: str = BAND_LABEL) -> Figure:
    """The Figure of the occupancy of 000: per class m (``labels[m]``), s_{m,i}, the fraction of
    its servers with at least i jobs, against i. ``occupancy[r, m, i - 1]`` holds replication r's
    (one row: no band; several: the mean and the 95% t interval over them); written to ``path``
    when given."""
    from hetlb.stats.intervals import interval

    occupancy = np.asarray(occupancy, dtype=float)
    levels = np.arange(1, occupancy.shape[2] + 1)
    series = {}
    for m, label in enumerate(labels):
        values = occupancy[:, m, :]
        bands = np.array([interval(values[:, i]) for i in range(len(levels))])
        series[label] = (values.mean(axis=0), bands[:, 0], bands[:, 1])
    return plot_metric(
        levels,
        series,
        path,
        xlabel=r"jobs $i$ at a server",
        ylabel=r"$s_{m,i}$: fraction of class $m$ with $\geq i$ jobs",
        title=title,
        band_label=band_label,
    )
