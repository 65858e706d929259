"""hetlb store: the sweeps of a result store, or one of them as CSV."""

from __future__ import annotations

import os

from hetlb import validation
from hetlb.cli.flags import add_output_flags
from hetlb.cli.text import format_sweeps, print_json
from hetlb.errors import InputError


def add_flags(parser) -> None:
    """The flags of ``hetlb store``."""
    parser.add_argument("name", nargs="?", help="a sweep name (omit to list them)")
    parser.add_argument("--store", default="hetlb-results.sqlite", help="result store (default %(default)s)")
    add_output_flags(parser)


def run(args) -> int:
    """Print the sweeps of the result store, or the finished runs of the sweep NAME as CSV."""
    from hetlb.experiments import ResultStore
    from hetlb.validation import input_file, shorten

    path = input_file("store", args.store)  # listing makes no store; a read-only one is read as it is
    with ResultStore(path, readonly=not os.access(path, os.W_OK)) as store:
        if args.name is None:
            sweeps = store.sweeps()
            if args.json:
                print_json(sweeps)
                return 0
            print(format_sweeps(sweeps), end="")
            return 0
        rows = store.load(validation.text("name", args.name))
    if not rows:
        raise InputError("name", f"no finished runs of a sweep named {shorten(repr(args.name))} in {store.name}")
    if args.json:
        print_json(rows)
        return 0
    import pandas as pd

    print(pd.DataFrame.from_records(rows).to_csv(index=False), end="")
    return 0
