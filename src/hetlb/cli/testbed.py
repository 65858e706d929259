"""hetlb testbed: a scenario live and simulated, side by side.

Exit status: 0 when every hetlb run held to a prediction agrees with it, EXIT_DIFFERS when one
differs, 1 when a child process failed, 2 on bad input.
"""

from __future__ import annotations

import sys

EXIT_DIFFERS = 3
"""The exit status when a hetlb run lies outside its prediction (``DIFFERS`` in its line)."""


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
    parser.add_argument("--json", action="store_true", help="print testbed.json's content instead of the table")


def run(args) -> int:
    """Run the scenario live and simulated; print the table (or --json) and write CSV, JSON and PNG
    to --out; the exit status says whether every run agreed."""
    from hetlb import testbed, validation
    from hetlb.errors import one_line
    from hetlb.processes import ChildFailed, signals_interrupt
    from hetlb.testbed.report import format_table

    compare = None if args.compare is None else [name for name in args.compare.split(",") if name]
    out = validation.output_folder("--out", args.out, make=True)  # before the run, not after
    say = (lambda line: None) if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    earlier = [name for name in ("testbed.csv", "testbed.json", "testbed.png") if (out / name).exists()]
    if earlier:
        say(
            f"hetlb testbed: replacing the earlier {', '.join(earlier)} in {out} (give --out another folder to keep them)"
        )
    try:
        with signals_interrupt():  # SIGTERM as Ctrl-C: the children are stopped on the way out (exit 143)
            bed = testbed.run_testbed(args.scenario, out, compare=compare, progress=False, say=say)
    except ChildFailed as failure:
        print(f"hetlb: testbed failed: {one_line(str(failure))}", file=sys.stderr)
        return 1
    if args.json:
        print(bed.to_json())
    else:
        print(format_table(bed.rows, bed.order_agreement(), bed.against_peers()))
        print(f"written: {out / 'testbed.csv'}, {out / 'testbed.json'}, {out / 'testbed.png'}")
    summary = bed.summary
    if not summary["all_agree"]:
        differing = summary["compared"] - summary["agreeing"]
        say(
            f"hetlb testbed: {differing} of {summary['compared']} runs differ from their prediction (exit {EXIT_DIFFERS})"
        )
        return EXIT_DIFFERS
    return 0
