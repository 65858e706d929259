"""Time of one mean-field point (hetlb.theory.meanfield.mean_field_arrays), every policy, at the sizes the
command promises: up to 16 speed classes and buffers up to 100 (and infinite buffers).

    python benchmarks/meanfield_speed.py [--repeat 5]

Prints, per policy, the slowest of the cases (classes 2, 4, 8, 16 spread over [0.2, 2]; loads 0.5,
0.9, 0.95, 0.99; buffers 1, 10, 100 and infinite) as the best of --repeat timings of the process's CPU
time (time.process_time: on a shared machine wall time measures the other users too), in
milliseconds, and the wall time of one `hetlb meanfield` command (process start and imports
included). A case the solver refuses (queues beyond its 1,024 levels) is counted as refused.
"""

import argparse
import subprocess
import sys
import time

import numpy as np

from hetlb.errors import InputError
from hetlb.progress import working
from hetlb.theory.meanfield import MEANFIELD_POLICIES, mean_field_arrays


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"{'policy':<16}{'slowest case':<52}{'CPU ms':>8}")
    for policy in MEANFIELD_POLICIES:
        worst = (0.0, "")
        for classes in (2, 4, 8, 16):
            speeds = np.linspace(2.0, 0.2, classes)
            for load in (0.5, 0.9, 0.95, 0.99):
                for buffer in (1, 10, 100, None):
                    timings = []
                    for _ in range(args.repeat):
                        started = time.process_time()
                        try:
                            limit = mean_field_arrays(speeds, np.ones(classes), load=load, policy=policy, buffer=buffer)
                            stable = str(limit.stable)
                        except InputError:
                            stable = "refused"
                        timings.append(time.process_time() - started)
                    case = f"classes {classes}, load {load}, buffer {buffer}, stable {stable}"
                    worst = max(worst, (min(timings), case))
        print(f"{policy:<16}{worst[1]:<52}{1000 * worst[0]:>8.1f}", flush=True)
    command = [
        sys.executable,
        "-m",
        "hetlb",
        "meanfield",
        "--speeds",
        "8x2,8x1,8x0.5,8x0.25",
        "--load",
        "0.9",
        "--policy",
        "pod",
    ]
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    print(f"one `hetlb meanfield` command, process start included: {1000 * (time.perf_counter() - started):.0f} ms")


if __name__ == "__main__":
    with working("benchmarks/meanfield_speed.py ", live=False):
        main()
