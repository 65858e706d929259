"""hetlb testbed: a scenario live and simulated, side by side."""

from __future__ import annotations

import sys


def add_flags(parser) -> None:
    """The flags of ``hetlb testbed``."""
    parser.add_argument("scenario", metavar="SCENARIO.toml", help="[system], [testbed] and [run] tables")
    parser.add_argument(
        "--compare",
        metavar="LIST",
        help="also these balancers on the same backends: haproxy,nginx,envoy (with engines also vllm-router, sglang-router)",
    )
    parser.add_argument("--out", default="testbed-out", help="folder for the CSV, JSON and PNG (default %(default)s)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress on standard error")


def run(args) -> int:
    """Run the scenario live and simulated; print the table and write CSV, JSON and PNG to --out."""
    from hetlb import validation
    from hetlb.errors import one_line
    from hetlb.live import testbed
    from hetlb.processes import ChildFailed, signals_interrupt

    compare = None if args.compare is None else [name for name in args.compare.split(",") if name]
    out = validation.output_folder("--out", args.out, make=True)  # before the run, not after
    say = (lambda line: None) if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    try:
        with signals_interrupt():  # SIGTERM as Ctrl-C: the children are stopped on the way out (exit 143)
            bed = testbed.run_testbed(args.scenario, out, compare=compare, progress=False, say=say)
    except ChildFailed as failure:
        print(f"hetlb: testbed failed: {one_line(str(failure))}", file=sys.stderr)
        return 1
    print(testbed.format_table(bed.rows, bed.order_agreement(), bed.against_peers()))
    print(f"written: {out / 'testbed.csv'}, {out / 'testbed.json'}, {out / 'testbed.png'}")
    return 0
