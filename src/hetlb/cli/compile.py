"""hetlb compile: the continuous-time kernel compiled ahead of time."""

from __future__ import annotations


def add_flags(parser) -> None:
    """The flags of ``hetlb compile``."""
    parser.description = (
        "Compile the continuous-time kernel ahead of time for this machine and hetlb's sources "
        "(seconds to a minute, once); later `hetlb simulate` runs start without importing numba. "
        "Also compiles the many-dispatcher kernel into numba's cache. Does nothing for a kernel that "
        "is up to date."
    )
    parser.add_argument("--quiet", action="store_true", help="no compiler output")


def run(args) -> int:
    """Compile the continuous-time kernel ahead of time (unless it is up to date) and the
    many-dispatcher kernel into numba's cache; print where they are."""
    from hetlb.simulation.precompile import compile_command

    print(compile_command(quiet=args.quiet))
    return 0
