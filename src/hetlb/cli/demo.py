"""hetlb demo: policies compared on a heterogeneous system, a table and a plot."""

from __future__ import annotations

from hetlb import validation
from hetlb.cli.flags import add_output_flags, notify_compiling, run_reporter
from hetlb.cli.text import print_json

DEMO_MAX_JOBS = 10**8


DEMO_MAX_REPLICATIONS = 100
"""The demo's 30 points at most: 30 x 100 x 10^8 jobs is days of computing already; larger
studies are sweeps (resumable, on every core)."""


def add_flags(parser) -> None:
    """The flags of ``hetlb demo``."""
    parser.add_argument("--out", default="out", help="folder for the CSV and PNG (default out)")
    parser.add_argument("--jobs", type=int, default=100_000, help="jobs per run (default 100000)")
    parser.add_argument("--replications", type=int, default=3, help="replications per point (default 3)")
    add_output_flags(parser, quiet=True, verbose="one line per finished run on standard error")


def run(args) -> int:
    """Compare the demo's policies on 100 servers of four speeds; print the table (or --json) and
    write it and the plot to --out."""
    from hetlb.demo import run_demo

    out = validation.output_folder("--out", args.out)
    validation.integer("--jobs", args.jobs, low=100, high=DEMO_MAX_JOBS)
    validation.integer("--replications", args.replications, low=1, high=DEMO_MAX_REPLICATIONS)
    notify_compiling(args)
    bar, report = run_reporter(args, "demo ", "run")
    rows = run_demo(out, jobs=args.jobs, replications=args.replications, report=report, echo=not args.json)
    bar.close()
    if args.json:
        print_json({"out": args.out, "rows": rows})
    return 0
