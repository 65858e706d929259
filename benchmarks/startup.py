"""Start-up cost of hetlb: CPU time of a fresh process, median of several runs.

CPU time (user + system of the child) rather than wall time, so that a busy machine does not
move the figures much. Run with a warm numba cache (run each command once first).

    PYTHONPATH=src python benchmarks/startup.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys

COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "import numpy": [sys.executable, "-c", "import numpy"],
    "import hetlb": [sys.executable, "-c", "import hetlb"],
    "import hetlb.experiments": [sys.executable, "-c", "import hetlb.experiments"],
    "hetlb simulate (100 jobs)": [
        sys.executable,
        "-m",
        "hetlb",
        "simulate",
        "--speeds",
        "2,1",
        "--load",
        "0.5",
        "--jobs",
        "100",
    ],
    "hetlb meanfield (jsq-df-ds, b 100)": [
        sys.executable,
        "-m",
        "hetlb",
        "meanfield",
        "--speeds",
        "2,1",
        "--load",
        "0.9",
        "--policy",
        "jsq-df-ds",
        "--buffer",
        "100",
    ],
    "sweep worker start": [
        sys.executable,
        "-c",
        "from hetlb.experiments.sweep import run_units; from hetlb.experiments.executors import warm_kernels; warm_kernels()",
    ],
    "hetlb reproduce --help": [sys.executable, "-m", "hetlb", "reproduce", "--help"],
}


def child_cpu(argv: list[str]) -> float:
    """User + system CPU seconds of one run of argv in a fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("names", nargs="*", help="which commands (default: all)")
    args = parser.parse_args()
    for name, argv in COMMANDS.items():
        if args.names and name not in args.names:
            continue
        try:
            child_cpu(argv)  # warm the numba cache and the file cache
        except subprocess.CalledProcessError:
            print(f"{name:<28} (fails here)")
            continue
        times = [child_cpu(argv) for _ in range(args.repeat)]
        print(f"{name:<28} median {statistics.median(times):6.3f} s CPU  (min {min(times):.3f}, max {max(times):.3f})")


if __name__ == "__main__":
    main()
