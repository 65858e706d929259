"""hetlb's events/s against the minimal kernel's (the floor), measured side by side.

On a shared machine the speed moves between windows, so a ratio of two figures taken minutes
apart means little. This script alternates the two implementations: each round runs the
minimal kernel, then hetlb, on the canonical system (see README.md) at each N, and takes the
ratio floor events/s / hetlb events/s of that round. It reports the median ratio over the
rounds and the range, with the best events/s of each.

    python benchmarks/floor_ratio.py --rounds 7 --policy jsq --sizes 10,100,1000
"""

import argparse
import os
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from minimal_kernel import run_minimal  # noqa: E402
from run_benchmarks import LOAD, SEED, canonical_speeds, run_hetlb  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds per N")
    parser.add_argument("--jobs", type=int, default=1_000_000, help="completed jobs per run")
    parser.add_argument("--policy", default="jsq", help="hetlb policy id")
    parser.add_argument("--sizes", default="10,100,1000", help="comma-separated numbers of servers")
    args = parser.parse_args(argv)
    print(f"load average at start: {os.getloadavg()}")
    print(f"{'N':>7} {'floor M ev/s':>13} {'hetlb M ev/s':>13} {'median ratio':>13} {'ratio range':>14}")
    for n in (int(x) for x in args.sizes.split(",")):
        speeds = canonical_speeds(n)
        floor, simulator = [], []
        for _ in range(args.rounds):
            m, events, seconds = run_minimal(speeds, LOAD * speeds.sum(), args.jobs, SEED)
            floor.append(events / seconds)
            simulator.append(run_hetlb(speeds, LOAD, args.policy, args.jobs, SEED)[3])
        ratios = [f / h for f, h in zip(floor, simulator)]
        print(
            f"{n:>7} {max(floor) / 1e6:>13.2f} {max(simulator) / 1e6:>13.2f} {statistics.median(ratios):>13.3f} "
            f"{min(ratios):>6.3f}-{max(ratios):<7.3f}",
            flush=True,
        )
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
