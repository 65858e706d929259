"""The largest systems: N up to 1,000,000 servers on the complete graph, events/s and peak memory.

    python benchmarks/scale.py [--sizes 1000,100000,1000000] [--events 10000000] [--policy jfsq]

Each size runs in a fresh process (so the peak resident memory is that run's own): half the
servers of speed 1.0 and half of 0.5, load 0.9, infinite buffers, from an empty system until
the given number of events. Prints N, events, seconds, events/s and peak memory (MiB).
"""

import argparse
import json
import subprocess
import sys

from hetlb.progress import working

CHILD = """
import json, resource, sys, time
import numpy as np
import hetlb
hetlb.jit.compile_everything()  # numba's kernels, also for the short warm-up (hetlb.simulation.fast_start)
n, events, policy = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
hetlb.simulate(hetlb.System.from_speeds([1.0, 0.5], load=0.5), policy, jobs=100)  # load the kernel
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
system = hetlb.System.from_speeds(np.repeat([1.0, 0.5], n // 2), load=0.9)
started = time.perf_counter()
result = hetlb.simulate(system, policy, jobs=events // 2, seed=1)
print(json.dumps({"n_servers": n, "policy": policy, "events": result.events,
                  "kernel_seconds": result.wall_seconds, "call_seconds": time.perf_counter() - started,
                  "events_per_second": result.events_per_second,
                  "mean_response_time": result.mean_response_time,
                  "peak_memory_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "memory_before_mib": before / 1024}))
"""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,100000,1000000")
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--policy", default="jfsq")
    args = parser.parse_args()
    print(f"{'N':>10} {'events':>12} {'kernel s':>9} {'call s':>8} {'events/s':>12} {'peak MiB':>9}")
    for n in (int(x) for x in args.sizes.split(",")):
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(n), str(args.events), args.policy],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        row = json.loads(out.strip().splitlines()[-1])
        print(
            f"{n:>10,} {row['events']:>12,} {row['kernel_seconds']:>9.2f} {row['call_seconds']:>8.2f} "
            f"{row['events_per_second']:>12,.0f} {row['peak_memory_mib']:>9.0f}"
        )


if __name__ == "__main__":
    with working("benchmarks/scale.py ", live=False):
        main()
