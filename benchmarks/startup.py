"""Start-up cost of hetlb: CPU time of a fresh process, median of several runs.

CPU time (user + system of the child) rather than wall time, so that a busy machine does not
move the figures much. Run with a warm numba cache (run each command once first).

    PYTHONPATH=src python benchmarks/startup.py [--repeat 7]

``--baseline SRC`` times each command also with another copy of hetlb's sources first on the path
(another version, with its own compiled kernels), the two in turn, and prints the median of the
ratios of the pairs (this tree's CPU time over the baseline's): a ratio at or below 1 is no slower.
For example, against the commit before a change:

    git archive HEAD~1 src | tar -x -C /tmp/baseline && PYTHONPATH=/tmp/baseline/src python -m hetlb compile
    PYTHONPATH=src python benchmarks/startup.py --baseline /tmp/baseline/src "hetlb simulate (100 jobs)"
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

from hetlb.progress import working

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


def child_cpu(argv: list[str], source: str | None = None) -> float:
    """User + system CPU seconds of one run of argv in a fresh process (with ``source`` first on
    the path, if given)."""
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = os.pathsep.join([source, *filter(None, [os.environ.get("PYTHONPATH")])])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--baseline", metavar="SRC", help="another hetlb source tree to compare with, in pairs")
    parser.add_argument("names", nargs="*", help="which commands (default: all)")
    args = parser.parse_args()
    baseline = None if args.baseline is None else str(Path(args.baseline).resolve())
    for name, argv in COMMANDS.items():
        if args.names and name not in args.names:
            continue
        try:
            child_cpu(argv)  # warm the numba cache and the file cache
            if baseline is not None:
                child_cpu(argv, baseline)
        except subprocess.CalledProcessError:
            print(f"{name:<28} (fails here)")
            continue
        times, ratios = [], []
        for _ in range(args.repeat):
            times.append(child_cpu(argv))
            if baseline is not None:
                ratios.append(times[-1] / child_cpu(argv, baseline))
        line = f"{name:<28} median {statistics.median(times):6.3f} s CPU  (min {min(times):.3f}, max {max(times):.3f})"
        if ratios:
            line += f"  over the baseline: median {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f})"
        print(line)


if __name__ == "__main__":
    with working("benchmarks/startup.py ", live=False):
        main()
