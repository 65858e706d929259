"""The command line: ``hetlb simulate | exact | bound | meanfield | place | policies | sweep |
store | plot | reproduce | graph | tune | diffusion | compile | demo | serve | pick | envoy-config |
backend | loadgen | testbed``.

Every user error ends in one line on standard error naming the field and the rule, and exit
status 2; so does a bare ``hetlb`` (after the usage). Each command takes only the flags it uses,
so argparse refuses the others. Results go to standard output (text, or JSON with ``--json``);
progress, notices and ``--verbose`` detail go to standard error, and ``--quiet`` silences them.

Each command is a module of this package, named after it, with its flags and its handler side
by side: ``add_flags(parser)`` gives the command its flags, ``run(args)`` carries it out and
returns the exit status; COMMANDS lists them with the line ``hetlb --help`` shows for each.
``hetlb.cli.flags`` holds the flags and helpers that several commands share, ``hetlb.cli.text``
the text output. ``main`` imports the module of the command it runs and no other, and a command
module imports what its handler needs only when the handler runs, so that ``hetlb --help`` and
short commands start fast.
"""

from __future__ import annotations

import importlib
import os
import sys

from hetlb.cli.flags import EXIT_INPUT_ERROR, ArgumentParser, flag_field
from hetlb.documentation import page
from hetlb.errors import InputError
from hetlb.version import __version__

COMMANDS = {
    "simulate": "simulate one scenario",
    "exact": "exact CTMC solution of a small system (finite buffers)",
    "bound": "the lower bound C*/lambda of Proposition 1 (000)",
    "meanfield": "the many-server (N -> infinity) limit on the complete graph, optionally beside a simulation",
    "place": "the sparsest compatibility graph whose jfsq/jfiq mean response time stays within x%% of C*/lambda",
    "policies": "list the policies and their definitions",
    "sweep": "run a sweep spec (TOML) on a process pool or a Dask cluster",
    "store": "list the sweeps in a result store, or print one as CSV",
    "plot": "plot a metric of a finished sweep against an axis",
    "reproduce": "reproduce a paper's figure: CSV, PNG and claims.json",
    "graph": "a compatibility graph's statistics, the load it can carry and a search for Assumption 2 of 000",
    "tune": "tune (p_fast, p_slow) of jsq-df-ds by a grid of simulations with common random numbers",
    "diffusion": "stationary means of the diffusion limits of 002 (JFSQ, random ties, JFIQ, ...) "
    "in the Halfin-Whitt regime",
    "compile": "compile the event loops into numba's cache, so that later runs load them at once",
    "demo": "compare policies on a heterogeneous system: table and plot",
    "serve": "a reverse proxy that routes HTTP requests to backends with a policy",
    "pick": "an endpoint picker for Envoy: the policies over its ext_proc filter",
    "envoy-config": "an Envoy bootstrap: hetlb pickers behind its ext_proc filter, or Envoy's own balancer",
    "backend": "test backends: the model's servers on HTTP, several on several ports; --openai: emulated "
    "inference engines",
    "loadgen": "open-loop load on one or several URLs (simulator's keys); --openai: streamed chat completions",
    "testbed": "a scenario live (backends, hetlb serve, loadgen) and simulated, side by side",
}
"""The commands, in the order ``hetlb --help`` lists them, with the line it shows for each. The
command NAME is the module hetlb.cli.NAME (a dash in NAME an underscore): its ``add_flags(parser)`` gives the command its flags,
its ``run(args)`` carries it out."""


COMMAND_PAGES = {
    "simulate": "reference/model.md",
    "exact": "reference/exact.md",
    "bound": "reference/model.md",
    "meanfield": "background/mean-field.md",
    "place": "how-to/placement.md",
    "policies": "reference/policies.md",
    "sweep": "how-to/sweeps.md",
    "store": "how-to/sweeps.md",
    "plot": "how-to/sweeps.md",
    "reproduce": "reproductions/claims.md",
    "graph": "how-to/placement.md",
    "tune": "reference/policies.md",
    "diffusion": "reference/diffusion.md",
    "compile": "background/performance.md",
    "demo": "tutorial.md",
    "serve": "reference/serve.md",
    "pick": "reference/pick.md",
    "envoy-config": "reference/pick.md",
    "backend": "reference/testbed.md",
    "loadgen": "reference/testbed.md",
    "testbed": "reference/testbed.md",
}
"""The page of the docs that documents each command (a path inside docs/): the last line of
``hetlb COMMAND --help`` names its file (hetlb.documentation.page), in the checkout or as installed."""


def command_module(name: str):
    """The module hetlb.cli.NAME of the command ``name``."""
    return importlib.import_module(f"hetlb.cli.{name.replace('-', '_')}")


def build_parser(flags_of=tuple(COMMANDS)) -> ArgumentParser:
    """The parser of ``hetlb``: its own flags and every command of COMMANDS, those named in
    ``flags_of`` (all, by default) with their flags. The others are there without them, enough
    for the list of commands and the error of an unknown one, and their modules are not imported."""
    parser = ArgumentParser(
        prog="hetlb",
        description="Load balancing in heterogeneous server systems.",
        epilog="`hetlb COMMAND --help` lists a command's flags. Results go to standard output; progress and "
        "notices to standard error (--quiet silences them).",
    )
    parser.add_argument("--version", action="version", version=f"hetlb {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=ArgumentParser)
    for name, summary in COMMANDS.items():
        command = commands.add_parser(name, help=summary, documentation=page(COMMAND_PAGES[name]))
        if name in flags_of:
            command_module(name).add_flags(command)
    return parser


def named_command(argv: list) -> tuple:
    """The command that ``argv`` names, in a tuple of one name or none: its first word that is not
    a flag (hetlb's own flags, --help and --version, take no value)."""
    return tuple(word for word in argv if not word.startswith("-"))[:1]


def main(argv=None) -> int:
    """Run ``hetlb`` on ``argv`` (default: the process's arguments) and return its exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(flags_of=named_command(argv))
    if not argv:  # a bare `hetlb`: the usage, and the exit status of a usage error
        parser.print_help(sys.stderr)
        return EXIT_INPUT_ERROR
    args = parser.parse_args(argv)
    if args.command is None:
        parser.error("give a command (hetlb --help lists them)")
    try:
        return command_module(args.command).run(args)
    except InputError as error:  # named by the flag the user typed, where one set the field
        print(f"hetlb: error: {flag_field(error.field, argv)}: {error.rule}", file=sys.stderr)
        return EXIT_INPUT_ERROR
    except KeyboardInterrupt as interrupt:  # Ctrl-C; during a sweep SIGTERM too, with what it stored
        print(f"hetlb: {str(interrupt) or 'interrupted'}", file=sys.stderr)
        return getattr(interrupt, "exit_status", 130)
    except BrokenPipeError:  # the reader of standard output stopped early (e.g. `| head`)
        sys.stdout = open(os.devnull, "w")
        return 0
