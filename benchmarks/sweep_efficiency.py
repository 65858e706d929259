"""Parallel efficiency of a sweep on two workers, end to end.

    PYTHONPATH=src python benchmarks/sweep_efficiency.py [--runs 8] [--events 5e6] [--servers 1000]

A sweep of ``--runs`` replications of one scenario (JSQ, ``--servers`` servers of two speeds at
load 0.9, about ``--events`` events a run) on ``processes:2``, timed from the call of ``sweep``
to its return (workers started and warmed, runs, tables), against the floor two cores give:
two plain Python processes started at the same moment, each running half of the same runs (same
seeds) in a loop, timed from their start to the end of the later one. Parallel efficiency is
the floor's wall time over the sweep's (median over alternated rounds); events per minute count the simulated arrivals and
departures over the sweep's wall time.
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import subprocess
import sys
import time

from hetlb.experiments import SweepSpec, sweep
from hetlb.progress import working

PLAIN = """
import pickle, sys
from hetlb.scenario import Scenario
events = 0
for scenario, seed in pickle.load(sys.stdin.buffer):
    events += Scenario.from_mapping(scenario).simulate(seed=seed).runs[0].events
print(events)
"""


def spec_of(runs: int, events: float, servers: int) -> SweepSpec:
    base = {
        "system": {"n_servers": servers, "speed_mix": [[2.0, 0.5], [1.0, 0.5]], "load": 0.9},
        "policy": {"id": "jsq"},
        "run": {"jobs": int(events / 2), "warmup": 0.0},
    }
    return SweepSpec(base=base, axes={}, replications=runs, seed=7, name="efficiency")


def plain_processes(units, processes: int = 2) -> tuple[float, int]:
    """Wall seconds and events of ``units`` split over ``processes`` plain processes at once."""
    shares = [[(unit.scenario, unit.seed) for unit in units[i::processes]] for i in range(processes)]
    started = time.perf_counter()
    children = [
        subprocess.Popen([sys.executable, "-c", PLAIN], stdin=subprocess.PIPE, stdout=subprocess.PIPE) for _ in shares
    ]
    for child, share in zip(children, shares):  # both start at once, then read their share
        assert child.stdin is not None
        child.stdin.write(pickle.dumps(share))
        child.stdin.close()
    events = 0
    for child in children:
        assert child.stdout is not None
        events += int(child.stdout.read())
        child.wait()
    return time.perf_counter() - started, events


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--events", type=float, default=5e6, help="events of one run (about)")
    parser.add_argument("--servers", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5, help="rounds of (floor, sweep), alternated")
    args = parser.parse_args()
    spec = spec_of(args.runs, args.events, args.servers)
    units = spec.units(spec.points())
    ratios, floors, sweeps = [], [], []
    for _ in range(args.rounds):  # alternated, so that a busy moment of the machine hits both
        floor_seconds, floor_events = plain_processes(units)
        started = time.perf_counter()
        result = sweep(spec, executor="processes:2", store=None)
        sweep_seconds = time.perf_counter() - started
        events = int(result.runs["events"].sum())
        assert events == floor_events, (events, floor_events)  # the same runs
        ratios.append(floor_seconds / sweep_seconds)
        floors.append(floor_seconds)
        sweeps.append(sweep_seconds)
    floor_seconds, sweep_seconds = statistics.median(floors), statistics.median(sweeps)
    print(
        f"{args.runs} runs x {events / args.runs / 1e6:.2f} M events, N = {args.servers}, 2 workers, {args.rounds} rounds"
    )
    print(f"two plain processes : median {floor_seconds:6.2f} s  {events / floor_seconds * 60 / 1e6:7.0f} M events/min")
    print(f"sweep, processes:2  : median {sweep_seconds:6.2f} s  {events / sweep_seconds * 60 / 1e6:7.0f} M events/min")
    print(
        f"parallel efficiency : median {statistics.median(ratios):.3f} "
        f"(rounds: {', '.join(f'{ratio:.3f}' for ratio in ratios)})"
    )


if __name__ == "__main__":
    with working("benchmarks/sweep_efficiency.py ", live=False):
        main()
