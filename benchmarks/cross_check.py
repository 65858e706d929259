"""Check that the benchmark implementations simulate the same model (N = 10 by default).

Each implementation runs the canonical system (half of the servers at speed 1.0, half at
0.5, load 0.9, JSQ, exponential sizes) from an empty system for the same number of jobs,
over several independent seeds; the mean response times are reported with 95% confidence
intervals (Student t over the replications), which should overlap. A long run of the
minimal kernel gives the steady-state value to which all of them converge.

Usage:
    python benchmarks/cross_check.py [--servers 10] [--jobs 100000] [--seeds 10]
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ciw_model import run_ciw  # noqa: E402
from minimal_kernel import run_minimal  # noqa: E402
from simpy_model import run_simpy  # noqa: E402

from hetlb.progress import working


def interval(values):
    values = np.asarray(values)
    half = stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
    return values.mean(), half


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=100_000, help="jobs per replication")
    parser.add_argument("--seeds", type=int, default=10, help="replications per implementation")
    parser.add_argument("--long-jobs", type=int, default=10_000_000, help="jobs per long kernel run")
    args = parser.parse_args(argv)

    speeds = np.repeat([1.0, 0.5], args.servers // 2)
    rate = 0.9 * speeds.sum()
    print(f"N = {args.servers}, {args.jobs} jobs per replication, {args.seeds} replications, from empty")
    for name, run in (("minimal kernel", run_minimal), ("SimPy", run_simpy), ("Ciw", run_ciw)):
        t0 = time.perf_counter()
        means = [run(speeds, rate, args.jobs, 1000 + i)[0] for i in range(args.seeds)]
        m, h = interval(means)
        print(f"  {name:<15} mean response {m:.4f} +- {h:.4f}   ({time.perf_counter() - t0:.0f} s)", flush=True)
    means = [run_minimal(speeds, rate, args.long_jobs, 2000 + i)[0] for i in range(args.seeds)]
    m, h = interval(means)
    print(f"  long runs: minimal kernel, {args.seeds} x {args.long_jobs} jobs: {m:.4f} +- {h:.4f}")


if __name__ == "__main__":
    with working("benchmarks/cross_check.py ", live=False):
        main()
