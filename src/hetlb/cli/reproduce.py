"""hetlb reproduce: a figure of one of the papers, its tables and its claims checked."""

from __future__ import annotations

import argparse

from hetlb.cli.flags import add_output_flags, notify_compiling, parse_assignment, quiet
from hetlb.cli.text import format_claims, print_json


def reproductions_epilog() -> str:
    """The registered reproductions, one per line (importing the registry takes a second)."""
    from hetlb.experiments import REPRODUCTIONS

    width = max(len(name) for name in REPRODUCTIONS) + 2
    return "reproductions:\n" + "\n".join(
        f"  {name:<{width}}{reproduction.title}" for name, reproduction in REPRODUCTIONS.items()
    )


def add_flags(parser) -> None:
    """The flags of ``hetlb reproduce``."""
    parser.epilog = reproductions_epilog  # a function: ArgumentParser.format_help calls it, when the help is shown
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("name", help="the reproduction (listed below)")
    parser.add_argument(
        "--scale", choices=["quick", "paper"], default="quick", help="quick (default) or the paper's sizes"
    )
    parser.add_argument("--out", help="folder for the outputs (default reproductions/NAME)")
    parser.add_argument(
        "--set", action="append", metavar="NAME=VALUE", help="set an option, e.g. --set load=0.95 (repeatable)"
    )
    parser.add_argument("--executor", default=None, help="processes (default), processes:N, serial or dask://host:port")
    parser.add_argument("--store", default="hetlb-results.sqlite", help="result store (default %(default)s)")
    add_output_flags(parser, quiet=True)


def run(args) -> int:
    """Reproduce the named figure and print its claims; exit 1 if one of them fails."""
    from hetlb.experiments.reproduce import reproduce

    options = dict(parse_assignment(text) for text in args.set or [])
    notify_compiling(args, ("continuous", "slotted"))  # a reproduction may use either model
    report = reproduce(
        args.name,
        scale=args.scale,
        out=args.out,
        executor=args.executor,
        store=args.store,
        progress=not quiet(args),
        **options,
    )
    if args.json:
        print_json(report)
        return 0 if report["all_claims_hold"] else 1
    print(format_claims(report, args.name, args.out or f"reproductions/{args.name}"))
    return 0 if report["passes"] else 1
