"""hetlb compile: the event loops compiled into numba's cache."""

from __future__ import annotations


def add_flags(parser) -> None:
    """The flags of ``hetlb compile``."""
    parser.description = (
        "Compile the simulator's event loops (continuous time, several dispatchers, slotted) into "
        "numba's on-disk cache for this machine and hetlb's sources (a minute or two, once); later "
        "runs load them in milliseconds. Does nothing when the cache is up to date."
    )
    parser.add_argument("--quiet", action="store_true", help="print nothing")


def run(args) -> int:
    """Fill numba's cache (unless it is up to date) and print where it is."""
    from hetlb.simulation.precompile import warm_cache

    line = warm_cache()
    if not args.quiet:
        print(line)
    return 0
