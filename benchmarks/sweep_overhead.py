"""Overhead of the sweep machinery over the bare runs, for runs of about one second each.

    python benchmarks/sweep_overhead.py [--points 12] [--seconds 1.0]

Measures (1) the bare runs: ``hetlb.simulate`` called in a loop; (2) the same units through
``sweep`` with the serial executor and a fresh result store; (3) the bare runs split over two
plain processes (what two cores give on this machine); (4) the same units through ``sweep`` on a
pool of 2 processes, against (3). Prints the overheads in percent.
"""

import argparse
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import hetlb
from hetlb.experiments import SweepSpec, sweep
from hetlb.progress import working
from hetlb.scenario import Scenario


def bare_runs(units) -> None:
    for unit in units:
        scenario = Scenario.from_mapping(unit.scenario)
        hetlb.simulate(scenario.system, scenario.policy, scenario.run.replace(seed=unit.seed))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--points", type=int, default=12)
    parser.add_argument("--seconds", type=float, default=1.0, help="target length of one run")
    args = parser.parse_args()

    base = {
        "system": {"n_servers": 100, "speed_mix": [[1.0, 0.5], [0.5, 0.5]], "load": 0.9},
        "run": {"jobs": 10_000, "warmup": 10.0},
    }
    probe = Scenario.from_mapping(base)
    hetlb.jit.compile_everything()  # numba's kernels, also for the short warm-up (hetlb.simulation.fast_start)
    hetlb.simulate(probe.system, "jsq", jobs=1000)  # load the compiled kernel
    rate = hetlb.simulate(probe.system, "jsq", jobs=200_000, seed=1).events_per_second
    base["run"]["jobs"] = int(args.seconds * rate / 2)
    loads = [round(0.5 + 0.4 * i / max(args.points - 1, 1), 4) for i in range(args.points)]
    spec = SweepSpec(base=base, axes={"system.load": loads}, replications=1, seed=3, name="overhead")

    units = spec.units()
    started = time.perf_counter()
    bare_runs(units)
    bare = time.perf_counter() - started
    with ProcessPoolExecutor(2) as pool:
        list(pool.map(bare_runs, [units[:1], units[1:2]]))  # start the workers and load the kernel
        started = time.perf_counter()
        list(pool.map(bare_runs, [units[0::2], units[1::2]]))
        bare_parallel = time.perf_counter() - started

    with tempfile.TemporaryDirectory() as folder:
        serial = sweep(spec, executor="serial", store=Path(folder) / "a.sqlite").wall_seconds
        pooled = sweep(spec, executor="processes:2", store=Path(folder) / "b.sqlite").wall_seconds
    print(f"{args.points} runs of ~{args.seconds:.1f} s ({base['run']['jobs']:,} jobs each)")
    print(f"bare runs, serial        {bare:8.2f} s")
    print(f"sweep, serial executor   {serial:8.2f} s   overhead {100 * (serial / bare - 1):+.1f}%")
    print(f"bare runs, 2 processes   {bare_parallel:8.2f} s   (two cores give {bare / bare_parallel:.2f}x)")
    print(
        f"sweep, 2 processes       {pooled:8.2f} s   overhead {100 * (pooled / bare_parallel - 1):+.1f}% "
        "(includes starting the workers and loading the kernel)"
    )


if __name__ == "__main__":
    with working("benchmarks/sweep_overhead.py ", live=False):
        main()
