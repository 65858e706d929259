"""hetlb sweep: a sweep spec run on a process pool or a Dask cluster, into the result store."""

from __future__ import annotations

from hetlb.cli.flags import add_output_flags, notify_compiling, quiet
from hetlb.cli.text import format_sweep, print_json


def add_flags(parser) -> None:
    """The flags of ``hetlb sweep``."""
    parser.add_argument("spec", help="sweep spec TOML file")
    parser.add_argument(
        "--executor", default=None, help="processes (default, all cores), processes:N, serial, or dask://host:port"
    )
    parser.add_argument("--store", default="hetlb-results.sqlite", help="result store (default %(default)s)")
    parser.add_argument(
        "--out", default="sweep-out", help="folder for runs/summary CSV and Parquet (default %(default)s)"
    )
    parser.add_argument("--force", action="store_true", help="recompute runs already in the store")
    add_output_flags(parser, quiet=True)


def run(args) -> int:
    """Run the sweep spec, storing each run, and print its summary table."""
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
    print(format_sweep(result, args.store, args.out))
    return 0
