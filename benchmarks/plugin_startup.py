"""Seconds to the first result of a policy registered from a plugin, against a built-in one.

A built-in policy runs in the cached kernel: a fresh process loads its machine code. A plugin's
policy (examples/fiq_sed.py, "fastest idle, else shortest expected delay") runs in a copy of the
kernel compiled with its selection key in that process (hetlb.kernels.specialise), which numba
cannot cache. Each figure is the CPU time (user + system) of a fresh process that simulates 2,000
jobs on six servers, median of several runs, with a warm numba cache; run from the project root:

    PYTHONPATH=src python benchmarks/plugin_startup.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys

from startup import child_cpu

from hetlb.progress import working

RUN = (
    "import hetlb; {load}"
    "hetlb.simulate(hetlb.System.from_speeds([2, 1, 1, 0.5, 0.5, 0.25], load=0.8, buffer=6), {policy!r}, jobs=2000)"
)
COMMANDS = {
    "built-in sed": [sys.executable, "-c", RUN.format(load="", policy="sed")],
    "plugin fiq-sed": [
        sys.executable,
        "-c",
        RUN.format(load="hetlb.load_plugins(['examples/fiq_sed.py']); ", policy="fiq-sed"),
    ],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    for name, argv in COMMANDS.items():
        child_cpu(argv)  # warm the numba cache and the file cache
        times = [child_cpu(argv) for _ in range(args.repeat)]
        print(f"{name:<16} median {statistics.median(times):6.2f} s CPU  (min {min(times):.2f}, max {max(times):.2f})")


if __name__ == "__main__":
    with working("benchmarks/plugin_startup.py ", live=False):
        main()
