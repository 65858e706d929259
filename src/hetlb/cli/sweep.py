"""hetlb sweep: a sweep spec run on a process pool or a Dask cluster, into the result store."""

from __future__ import annotations

from hetlb.cli.flags import add_output_flags, notify_compiling, quiet
from hetlb.cli.text import print_json


def add_parser(commands) -> None:
    """The ``hetlb sweep`` command and its flags."""
    sweep = commands.add_parser("sweep", help="run a sweep spec (TOML) on a process pool or a Dask cluster")
    sweep.set_defaults(handler=run)
    sweep.add_argument("spec", help="sweep spec TOML file")
    sweep.add_argument(
        "--executor", default=None, help="processes (default, all cores), processes:N, serial, or dask://host:port"
    )
    sweep.add_argument("--store", default="hetlb-results.sqlite", help="result store (default %(default)s)")
    sweep.add_argument(
        "--out", default="sweep-out", help="folder for runs/summary CSV and Parquet (default %(default)s)"
    )
    sweep.add_argument("--force", action="store_true", help="recompute runs already in the store")
    add_output_flags(sweep, quiet=True)


def run(args) -> int:
    from hetlb.experiments import SweepSpec, sweep

    spec = SweepSpec.from_toml(args.spec)
    base_model = spec.base.get("system", {}).get("model", "continuous")
    notify_compiling(args, tuple(spec.axes.get("system.model", [base_model])))
    result = sweep(
        spec,
        executor=args.executor,
        store=args.store,
        out=args.out,
        force=args.force,
        progress=not quiet(args),
    )
    summary = result.summary
    if args.json:
        print_json(
            {
                "computed": result.computed,
                "reused": result.reused,
                "wall_seconds": result.wall_seconds,
                "store": args.store,
                "out": args.out,
                "summary": summary.to_dict(orient="records"),
            }
        )
        return 0
    axes = [c for c in summary.columns if "." in c]
    shown = summary[axes + [c for c in SWEEP_COLUMNS if c in summary.columns]]
    print(shown.to_string(index=False, float_format=lambda v: f"{v:.5g}"))
    print(
        f"\n{result.computed} runs computed, {result.reused} reused from {args.store}, "
        f"{result.wall_seconds:.1f} s; tables in {args.out}"
    )
    return 0


SWEEP_COLUMNS = (
    "replications",
    "mean_response_time",
    "mean_response_time_ci_low",
    "mean_response_time_ci_high",
    "blocking_probability",
    "speed_lower_bound",
    "mean_delay",
    "mean_delay_ci_low",
    "mean_delay_ci_high",
    "messages_per_arrival",
)
"""The summary columns `hetlb sweep` prints after the axes, those of the sweep's model (the
continuous model's first, then the slotted model's: a sweep over system.model has both)."""
