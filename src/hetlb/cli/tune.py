"""hetlb tune: (p_fast, p_slow) of jsq-df-ds from a grid of simulations."""

from __future__ import annotations

import numpy as np

from hetlb import validation
from hetlb.cli.flags import add_output_flags, add_scenario_flags, notify_compiling, run_reporter, scenario_from_args
from hetlb.cli.text import format_tuning, print_json


def add_flags(parser) -> None:
    """The flags of ``hetlb tune``."""
    add_scenario_flags(parser)
    grid = parser.add_argument_group("tuning")
    grid.add_argument("--d-fast", type=int, metavar="D", help="fast servers sampled, d_F (default 2)")
    grid.add_argument("--d-slow", type=int, metavar="D", help="slow servers sampled, d_S (default 2)")
    grid.add_argument("--grid", type=int, default=6, help="values of p_fast and of p_slow on [0, 1] (default 6)")
    grid.add_argument("--jobs", type=int, default=50_000, help="jobs per grid point (default 50000)")
    grid.add_argument("--warmup", type=float, default=0.0, help="warm-up, time units (default 0)")
    grid.add_argument("--seed", type=int, default=0, help="seed of every grid point (default 0)")
    grid.add_argument(
        "--max-blocking",
        type=float,
        default=1e-3,
        help="grid points losing more jobs than this are not eligible (default 0.001)",
    )
    add_output_flags(parser, quiet=True, verbose="one line per grid point on standard error")


def run(args) -> int:
    """Simulate the grid of (p_fast, p_slow) of jsq-df-ds and print it with the best point."""
    from hetlb.experiments import tune_jsq_df_ds

    scenario = scenario_from_args(args, continuous_only=True)
    grid = validation.count("--grid", args.grid, low=2)
    validation.check_memory("--grid", 8 * grid, f"a grid of {grid:,} values", "use a smaller grid")
    configured = scenario.policy.params if scenario.policy.id == "jsq-df-ds" else {}  # a [policy] of --config
    notify_compiling(args)
    bar, report = run_reporter(args, "tune ", "grid point")
    tuning = tune_jsq_df_ds(
        scenario.system,
        grid=np.linspace(0.0, 1.0, grid),
        d_fast=args.d_fast if args.d_fast is not None else configured.get("d_fast", 2),
        d_slow=args.d_slow if args.d_slow is not None else configured.get("d_slow", 2),
        jobs=args.jobs,
        warmup=args.warmup,
        seed=args.seed,
        max_blocking=args.max_blocking,
        report=report,
    )
    bar.close()
    values = {
        "p_fast": tuning.p_fast,
        "p_slow": tuning.p_slow,
        "mean_response_time": tuning.mean_response_time,
        "table": [
            dict(zip(("p_fast", "p_slow", "mean_response_time", "blocking_probability"), row)) for row in tuning.table
        ],
    }
    if args.json:
        print_json(values)
    else:
        print(format_tuning(values, scenario.system, args.jobs, args.seed))
    return 0
