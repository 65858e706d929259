"""hetlb testbed: a scenario live and simulated, side by side."""

from __future__ import annotations

import signal
import sys


def add_flags(parser) -> None:
    """The flags of ``hetlb testbed``."""
    parser.add_argument("scenario", metavar="SCENARIO.toml", help="[system], [testbed] and [run] tables")
    parser.add_argument(
        "--compare", metavar="LIST", help="also HAProxy and/or nginx on the same backends: haproxy,nginx"
    )
    parser.add_argument("--out", default="testbed-out", help="folder for the CSV, JSON and PNG (default %(default)s)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress on standard error")


def run(args) -> int:
    """Run the scenario live and simulated; print the table and write CSV, JSON and PNG to --out."""
    from hetlb import validation
    from hetlb.errors import one_line
    from hetlb.live import testbed
    from hetlb.live.children import ChildFailed

    compare = None if args.compare is None else [name for name in args.compare.split(",") if name]
    signal.signal(signal.SIGTERM, stop_on_sigterm)  # so that the children are stopped on the way out
    out = validation.output_folder("--out", args.out)
    say = (lambda line: None) if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    try:
        bed = testbed.run_testbed(args.scenario, out, compare=compare, progress=False, say=say)
    except ChildFailed as failure:
        print(f"hetlb: testbed failed: {one_line(str(failure))}", file=sys.stderr)
        return 1
    print(testbed.format_table(bed.rows, bed.order_agreement()))
    print(f"written: {out / 'testbed.csv'}, {out / 'testbed.json'}, {out / 'testbed.png'}")
    return 0


def stop_on_sigterm(signal_number, frame) -> None:
    """SIGTERM as Ctrl-C: the testbed stops its children and exits 143."""
    interrupt = KeyboardInterrupt("stopped by SIGTERM")
    interrupt.exit_status = 128 + signal_number  # type: ignore[attr-defined]
    raise interrupt
