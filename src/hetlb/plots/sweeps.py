"""Figures of a sweep's summary table: a metric against one of its axes, a line per value of
another (``hetlb plot`` and :meth:`hetlb.experiments.SweepResult.plot`)."""

from __future__ import annotations

import numpy as np

from hetlb.errors import InputError
from hetlb.plots.figures import axis_label, plot_metric

BOUND_LABEL = "C*/lambda (000, Prop. 1)"


def sweep_figure(
    table, *, x: str, by: str | None = None, metric: str = "mean_response_time", bound: bool = False, path=None, name=""
):
    """The matplotlib Figure of ``metric`` against the axis ``x``, one line per value of the axis
    ``by``, with 95% bands and, with ``bound``, C*/lambda.

    Parameters
    ----------
    table
        A sweep's summary table (SweepResult.summary, or the summary.csv of ``hetlb sweep``).
    x
        The axis on the horizontal, e.g. "system.load".
    by
        The axis with a line per value; None: "policy.id" when the sweep varies it; "": one line.
    metric
        A numeric column of ``table``, e.g. "mean_response_time" (time units).
    bound
        Whether to draw C*/lambda, the lower bound of Prop. 1 of 000 on the mean response time.
    path
        A file to write the figure to (its format by the extension); None: none written.
    name
        The start of the title ("" for none).

    Returns
    -------
    matplotlib.figure.Figure
        The figure.
    """
    x, by, metric = plot_columns(table, x, by, metric)
    xs, series, lower = plot_series(table, x, by, metric, bound)
    title = f"{axis_label(metric)} by {axis_label(x).split(' (')[0]}"
    return plot_metric(
        xs,
        series,
        path,
        xlabel=x,
        ylabel=metric.replace("_", " "),
        title=f"{name}: {title}" if name else title,
        legend_title=axis_label(by) if by else None,
        bound=lower,
        bound_label=BOUND_LABEL,
    )


def plot_columns(table, x: str, by: str | None, metric: str) -> tuple:
    """The columns of a plot, checked: ``x`` an axis of the sweep, ``by`` another axis ('' for one
    line, None for the default), ``metric`` a numeric column other than the axes."""
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    from hetlb.validation import shown

    axes = [c for c in table.columns if "." in c]
    if x not in axes:
        raise InputError("x", f"must be an axis of the sweep ({', '.join(axes) or 'it has none'}), got {shown(x)}")
    if by is None:  # the default: a line per policy when the sweep varies the policy
        by = "policy.id" if "policy.id" in axes and x != "policy.id" else ""
    by = by or None
    others = [c for c in axes if c != x]
    if by is not None and by not in others:
        rule = f"must be another axis of the sweep ({', '.join(others) or 'it has none'}) or '' for one line"
        raise InputError("by", f"{rule}, got {shown(by)}")
    figures = [c for c in table.columns if f"{c}_ci_low" in table.columns]
    column = table[metric] if metric in table.columns else None
    identity = metric in axes or metric in ("point", "replications") or metric.endswith(("_ci_low", "_ci_high"))
    if identity or column is None or not is_numeric_dtype(column) or is_bool_dtype(column):
        raise InputError(
            "metric",
            f"must be a figure of the sweep such as {', '.join(figures[:4]) or 'events'} (a numeric column of "
            f"the summary other than the axes, point, replications and the interval bounds), got {shown(metric)}",
        )
    for field, name in (("x", x), ("by", by)):
        if name is not None and not table[name].map(lambda v: isinstance(v, (str, int, float, np.number))).all():
            raise InputError(field, f"the values of {name} must be numbers or texts to plot against")
    return x, by, metric


def plot_series(table, x: str, by: str | None, metric: str, with_bound: bool) -> tuple:
    """The x values, the series {label: (mean, ci_low, ci_high)} on them (NaN where a line has
    no point) and the speed lower bound on them (with ``with_bound``, else None)."""
    xs = sorted(table[x].dropna().unique())
    groups = list(table.groupby(by, sort=False, dropna=False)) if by else [(metric, table)]
    axes = [c for c in table.columns if "." in c and c not in (x, by)]
    series, aligned = {}, []
    for label, rows in groups:
        rows = rows.dropna(subset=[x])
        if rows[x].duplicated().any():
            varying = [c for c in axes if rows[c].map(repr).nunique() > 1]
            rule = (
                f"the axis {varying[0]} varies too: draw a line per value of it (by {varying[0]})"
                if len(varying) == 1
                else (f"the axes {', '.join(varying)} vary too: plot a sweep that varies one axis besides x")
            )
            raise InputError("by", f"a line has one point per value of {x}, but {rule}")
        rows = rows.set_index(x).reindex(xs)
        aligned.append(rows)
        band = [
            rows[f"{metric}_ci_{end}"] if f"{metric}_ci_{end}" in rows else np.nan * rows[metric]
            for end in ("low", "high")
        ]
        series[str(label)] = tuple(np.asarray(values, dtype=float) for values in (rows[metric], *band))
    bound = None
    if with_bound:
        if "speed_lower_bound" not in table.columns:
            raise InputError("bound", "this sweep has no speed lower bound (C*/lambda is for the continuous model)")
        bound = aligned[0]["speed_lower_bound"].to_numpy(dtype=float)
    return xs, series, bound
