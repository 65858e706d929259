"""hetlb plot: a figure of a finished sweep against one of its axes."""

from __future__ import annotations

from pathlib import Path

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
    from hetlb.plots.figures import image_formats
    from hetlb.plots.sweeps import plot_columns, sweep_figure

    folder = validation.path("sweep_dir", args.sweep_dir)
    table = read_summary(folder)
    metric = plot_columns(table, args.x, args.by, args.metric)[2]
    output = validation.output_file("--output", args.output or folder / f"{metric}.png", suffixes=image_formats())
    try:
        sweep_figure(
            table, x=args.x, by=args.by, metric=metric, bound=args.bound, path=output, name=folder.resolve().name
        )
    except OSError as error:
        raise InputError(
            "--output", f"cannot write {validation.shorten(str(output))}: {error.strerror or error}"
        ) from None
    print(f"wrote {output}")
    return 0


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
