"""Standard figures: a metric against an axis, one line per policy, confidence bands, a bound."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


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
) -> None:
    """Draw on ``axes``: ``series`` maps a label to (means, ci_low, ci_high) over ``x``;
    ``bound`` is an optional curve over ``x`` drawn dashed; ``log_y`` for a logarithmic y axis,
    ``log2_x`` for a base-2 logarithmic x axis (numbers of servers)."""
    for label, (mean, low, high) in series.items():
        (line,) = axes.plot(x, mean, marker="o", markersize=3.5, label=label)
        axes.fill_between(x, low, high, color=line.get_color(), alpha=0.2, linewidth=0)
    if bound is not None:
        axes.plot(x, bound, "k--", linewidth=1.2, label=bound_label)
    if log_y:
        axes.set_yscale("log")
    if log2_x:
        axes.set_xscale("log", base=2)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    if title:
        axes.set_title(title, fontsize=10)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)


def plot_metric(x, series: dict, path, **options) -> None:
    """Write a PNG of one panel (the options of :func:`draw_metric`)."""
    plot_panels([dict(x=x, series=series, **options)], path)


def plot_panels(panels: list, path, *, title: str = "") -> None:
    """Write a PNG of panels side by side, each a dict of :func:`draw_metric`'s arguments."""
    figure, axes = plt.subplots(1, len(panels), figsize=(6.4 * len(panels), 4.4), squeeze=False)
    for panel, ax in zip(panels, axes[0]):
        panel = dict(panel)
        draw_metric(ax, panel.pop("x"), panel.pop("series"), **panel)
    if title:
        figure.suptitle(title, fontsize=11)
    figure.tight_layout()
    figure.savefig(path, dpi=130)
    plt.close(figure)
