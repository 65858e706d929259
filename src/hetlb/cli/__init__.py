"""The command line: ``hetlb simulate | exact | bound | meanfield | place | policies | sweep |
store | plot | reproduce | graph | tune | diffusion | compile | demo | serve | backend | loadgen |
testbed``.

Every user error ends in one line on standard error naming the field and the rule, and exit
status 2; so does a bare ``hetlb`` (after the usage). Each command takes only the flags it uses,
so argparse refuses the others. Results go to standard output (text, or JSON with ``--json``);
progress, notices and ``--verbose`` detail go to standard error, and ``--quiet`` silences them.

Each command is a module of this package, named after it, with its parser and its handler side
by side: ``add_parser(commands)`` adds the command and its flags, ``run(args)`` carries it out and
returns the exit status. ``hetlb.cli.flags`` holds the flags and helpers that several commands
share, ``hetlb.cli.text`` the text output. A command module imports what its handler needs only
when the handler runs, so that ``hetlb --help`` and short commands start fast.
"""

from __future__ import annotations

import importlib
import os
import sys

from hetlb.cli.flags import EXIT_INPUT_ERROR, ArgumentParser
from hetlb.errors import InputError
from hetlb.version import __version__

COMMANDS = (
    "simulate",
    "exact",
    "bound",
    "meanfield",
    "place",
    "policies",
    "sweep",
    "store",
    "plot",
    "reproduce",
    "graph",
    "tune",
    "diffusion",
    "compile",
    "demo",
    "serve",
    "backend",
    "loadgen",
    "testbed",
)
"""The commands, in the order ``hetlb --help`` lists them; each is the module hetlb.cli.NAME."""


def build_parser() -> ArgumentParser:
    """The parser of ``hetlb``: its own flags, and every command of COMMANDS with its flags."""
    parser = ArgumentParser(
        prog="hetlb",
        description="Load balancing in heterogeneous server systems.",
        epilog="`hetlb COMMAND --help` lists a command's flags. Results go to standard output; progress and "
        "notices to standard error (--quiet silences them).",
    )
    parser.add_argument("--version", action="version", version=f"hetlb {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=ArgumentParser)
    for name in COMMANDS:
        importlib.import_module(f"hetlb.cli.{name}").add_parser(commands)
    return parser


def main(argv=None) -> int:
    """Run ``hetlb`` on ``argv`` (default: the process's arguments) and return its exit status."""
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:  # a bare `hetlb`: the usage, and the exit status of a usage error
        parser.print_help(sys.stderr)
        return EXIT_INPUT_ERROR
    args = parser.parse_args(argv)
    if args.command is None:
        parser.error("give a command (hetlb --help lists them)")
    try:
        return args.handler(args)
    except InputError as error:
        print(f"hetlb: error: {error}", file=sys.stderr)
        return EXIT_INPUT_ERROR
    except KeyboardInterrupt as interrupt:  # Ctrl-C; during a sweep SIGTERM too, with what it stored
        print(f"hetlb: {str(interrupt) or 'interrupted'}", file=sys.stderr)
        return getattr(interrupt, "exit_status", 130)
    except BrokenPipeError:  # the reader of standard output stopped early (e.g. `| head`)
        sys.stdout = open(os.devnull, "w")
        return 0
