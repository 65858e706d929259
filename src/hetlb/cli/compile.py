"""hetlb compile: the continuous-time kernel compiled ahead of time."""

from __future__ import annotations


def add_parser(commands) -> None:
    """The ``hetlb compile`` command and its flags."""
    compile_parser = commands.add_parser(
        "compile",
        help="compile the continuous-time kernel ahead of time, so that short simulations start without numba",
        description="Compile the continuous-time kernel ahead of time for this machine and hetlb's sources "
        "(seconds to a minute, once); later `hetlb simulate` runs start without importing numba. "
        "Also compiles the many-dispatcher kernel into numba's cache. Does nothing for a kernel that "
        "is up to date.",
    )
    compile_parser.set_defaults(handler=run)
    compile_parser.add_argument("--quiet", action="store_true", help="no compiler output")


def run(args) -> int:
    """Compile the continuous-time kernel ahead of time (unless it is up to date) and the
    many-dispatcher kernel into numba's cache; print where they are."""
    from hetlb.simulation.precompile import compile_command

    print(compile_command(quiet=args.quiet))
    return 0
