"""hetlb plot: a figure of a finished sweep against one of its axes."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hetlb.errors import InputError


def add_flags(parser) -> None:
    """The flags of ``hetlb plot``."""
    parser.add_argument("sweep_dir", help="the --out folder of hetlb sweep")
    parser.add_argument("--x", required=True, help="axis column, e.g. system.load")
    parser.add_argument("--metric", default="mean_response_time", help="column to plot (default %(default)s)")
    parser.add_argument(
        "--by", help="one line per value of this axis (default policy.id when the sweep varies it; '' for one line)"
    )
    parser.add_argument("--bound", action="store_true", help="draw the speed lower bound C*/lambda")
    parser.add_argument("--output", help="PNG path (default SWEEP_DIR/METRIC.png)")


def run(args) -> int:
    """Plot --metric of a finished sweep against the axis --x, one line per value of --by."""
    from hetlb import validation
    from hetlb.plots import plot_metric
    from hetlb.plots.figures import axis_label, image_formats

    folder = validation.path("sweep_dir", args.sweep_dir)
    table = read_summary(folder)
    x, by, metric = plot_columns(table, args.x, args.by, args.metric)
    output = validation.output_file("--output", args.output or folder / f"{metric}.png", suffixes=image_formats())
    xs, series, bound = plot_series(table, x, by, metric, args.bound)
    try:
        plot_metric(
            xs,
            series,
            output,
            xlabel=x,
            ylabel=metric.replace("_", " "),
            title=f"{folder.resolve().name}: {axis_label(metric)} by {axis_label(x).split(' (')[0]}",
            legend_title=axis_label(by) if by else None,
            bound=bound,
            bound_label=BOUND_LABEL,
        )
    except OSError as error:
        raise InputError(
            "--output", f"cannot write {validation.shorten(str(output))}: {error.strerror or error}"
        ) from None
    print(f"wrote {output}")
    return 0


BOUND_LABEL = "C*/lambda (000, Prop. 1)"


def read_summary(folder: Path):
    """The summary table a sweep wrote to ``folder`` (summary.parquet), checked to be one."""
    import pandas as pd
    import pyarrow

    from hetlb.validation import shorten

    path = folder / "summary.parquet"
    if not path.is_file():
        raise InputError("sweep_dir", f"no summary.parquet in {shorten(str(folder))} (run hetlb sweep --out DIR first)")
    try:
        table = pd.read_parquet(path)
    except (OSError, ValueError, TypeError, NotImplementedError, pyarrow.ArrowException) as error:
        reason = shorten(str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__)
        raise InputError("sweep_dir", f"{shorten(str(path))} is not a readable Parquet table ({reason})") from None
    if len(table) == 0 or not all(isinstance(column, str) for column in table.columns):
        raise InputError("sweep_dir", f"{shorten(str(path))} is not the summary table of a sweep")
    return table


def plot_columns(table, x: str, by: str | None, metric: str) -> tuple:
    """The columns of a plot, checked: ``x`` an axis of the sweep, ``by`` another axis ('' for one
    line, None for the default), ``metric`` a numeric column other than the axes."""
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    from hetlb.validation import shown

    axes = [c for c in table.columns if "." in c]
    if x not in axes:
        raise InputError("--x", f"must be an axis of the sweep ({', '.join(axes) or 'it has none'}), got {shown(x)}")
    if by is None:  # the default: a line per policy when the sweep varies the policy
        by = "policy.id" if "policy.id" in axes and x != "policy.id" else ""
    by = by or None
    others = [c for c in axes if c != x]
    if by is not None and by not in others:
        rule = f"must be another axis of the sweep ({', '.join(others) or 'it has none'}) or '' for one line"
        raise InputError("--by", f"{rule}, got {shown(by)}")
    figures = [c for c in table.columns if f"{c}_ci_low" in table.columns]
    column = table[metric] if metric in table.columns else None
    identity = metric in axes or metric in ("point", "replications") or metric.endswith(("_ci_low", "_ci_high"))
    if identity or column is None or not is_numeric_dtype(column) or is_bool_dtype(column):
        raise InputError(
            "--metric",
            f"must be a figure of the sweep such as {', '.join(figures[:4]) or 'events'} (a numeric column of "
            f"summary.csv other than the axes, point, replications and the interval bounds), got {shown(metric)}",
        )
    for flag, name in (("--x", x), ("--by", by)):
        if name is not None and not table[name].map(lambda v: isinstance(v, (str, int, float, np.number))).all():
            raise InputError(flag, f"the values of {name} must be numbers or texts to plot against")
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
                f"the axis {varying[0]} varies too: give --by {varying[0]}"
                if len(varying) == 1
                else (f"the axes {', '.join(varying)} vary too: plot a sweep that varies one axis besides --x")
            )
            raise InputError("--by", f"a line has one point per value of {x}, but {rule}")
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
            raise InputError("--bound", "this sweep has no speed lower bound (C*/lambda is for the continuous model)")
        bound = aligned[0]["speed_lower_bound"].to_numpy(dtype=float)
    return xs, series, bound
