"""hetlb's speed against the floor kernels, every simulation path, measured side by side.

On a shared machine the speed moves between windows, so a ratio of two figures taken minutes
apart means little. This script alternates the two implementations of each path: every round
runs the floor, then hetlb, on each path in turn, and takes the ratio of their rates (events or
slots per CPU second of the compiled kernel alone) in that round. It reports, per path, the
median of the per-round ratios floor / hetlb (1.0: level with the floor; below 1: faster) and
their range, with the best rate of each, then every round's ratio. Compilation is done before the
first round.

Paths (each floor kernel is a file of this folder, written from the model, not from hetlb):

* ``complete-N``: the canonical system (README.md) at N servers, jsq (minimal_kernel.py);
* ``sparse``: Fig. 3 of paper 000 at N = 2048, L = N^1.2 ports, degree about 64, b = 5, jfsq
  (floor_sparse.py);
* ``slotted-jsq``, ``slotted-l-jsq-push``: the slotted model of paper 001, M = 10 dispatchers,
  N = 100 servers of speeds 1 and 0.5, load 0.9, Poisson counts (floor_slotted.py);
* ``fsl``, ``ssl``: the bounding systems of paper 002 at n = 1000, speeds evenly spread over
  [0.5, 1.5], excess capacity 1 in the Halfin-Whitt scaling, infinite buffers (floor_bounding.py);
* ``dispatchers-l-jsq-push``: M = 10 dispatchers in continuous time, the canonical system at
  N = 100, l-jsq with push updates without delay (p_hat = 1, d = 2) (floor_dispatchers.py);
* ``batch-100``, ``batch-10000``: servers that serve many jobs at once, the canonical speeds at
  N = 100 and 10,000, c = 8, saturating alpha = 0.2, load 0.9 of the capacity, jsq
  (floor_batch.py; hetlb's multi-slot loop, hetlb.kernels.batch_servers);
* ``cache-10``, ``cache-1000``: prefix caches (docs/background/prefix-caches.md) on the canonical
  speeds at N = 10 and 1000, load 0.7, 64 blocks a server, shared prompts of 100 prefixes of 4
  blocks (Zipf 1) and 2 blocks of their own, prefill work 0.05 a block, jsq (floor_cache.py;
  hetlb's loop with caches, hetlb.kernels.continuous.advance_with_caches).

    python benchmarks/floor_ratio.py --rounds 9
    python benchmarks/floor_ratio.py --rounds 5 --paths complete-10,sparse --scale 0.5
"""

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from dispatchers import time_dispatchers  # noqa: E402
from floor_batch import ALPHA, CONCURRENCY, run_floor_batch  # noqa: E402
from floor_bounding import run_floor_bounding  # noqa: E402
from floor_cache import run_floor_cache  # noqa: E402
from floor_dispatchers import run_floor_dispatchers  # noqa: E402
from floor_slotted import run_floor_slotted  # noqa: E402
from floor_sparse import run_floor_sparse  # noqa: E402
from minimal_kernel import _simulate_jsq  # noqa: E402
from run_benchmarks import LOAD, SEED, canonical_speeds  # noqa: E402

import hetlb  # noqa: E402
from hetlb.graphs.constructions import fig3_edge_probability, random_bipartite  # noqa: E402
from hetlb.kernels import batch_servers as batch_kernel  # noqa: E402
from hetlb.kernels import bounding as bounding_kernel  # noqa: E402
from hetlb.kernels import continuous as continuous_kernel  # noqa: E402
from hetlb.kernels import slotted as slotted_kernel  # noqa: E402
from hetlb.policies.registry import resolve_policy  # noqa: E402
from hetlb.progress import working  # noqa: E402
from hetlb.simulation import batch_servers, caches, continuous, slotted  # noqa: E402
from hetlb.simulation.bounding import served_rate  # noqa: E402
from hetlb.simulation.options import RunOptions  # noqa: E402

CLOCK = time.thread_time
"""CPU time of this thread: a kernel runs in the calling thread, and CPU time counts neither the
time the shared machine gives to other processes nor the threads of linear-algebra libraries."""


# --- hetlb, timed around its compiled kernel alone ----------------------------------------------


def hetlb_continuous(system, policy_id, jobs, seed):
    """Events and CPU seconds of hetlb's continuous kernel measuring ``jobs`` jobs from empty."""
    policy = resolve_policy(policy_id, {})
    model = continuous.pack_model(system, policy, RunOptions(jobs=jobs))
    arrival_stream, policy_stream = np.random.SeedSequence(seed).spawn(2)
    arrival_rng = np.random.Generator(np.random.PCG64(arrival_stream))
    policy_rng = np.random.Generator(np.random.PCG64(policy_stream))
    state = continuous.new_state(model, system.n_servers, 0)
    state.counters[0]["window_end"] = np.inf
    state.counters[0]["next_arrival"] = arrival_rng.exponential() / model.total_arrival_rate
    seconds = 0.0
    while True:
        t0 = CLOCK()
        status = continuous_kernel.advance(model, state, arrival_rng, policy_rng, 1 << 40)
        seconds += CLOCK() - t0
        if status == continuous_kernel.FINISHED:
            return int(state.counters[0]["events"]), seconds
        state = continuous.grow_job_pool(model, state)


def hetlb_caches(system, policy_id, jobs, seed):
    """Events and CPU seconds of hetlb's loop with prefix caches measuring ``jobs`` jobs from empty."""
    policy = resolve_policy(policy_id, {})
    model = continuous.pack_model(system, policy, RunOptions(jobs=jobs))
    arrival_stream, policy_stream = np.random.SeedSequence(seed).spawn(2)
    arrival_rng = np.random.Generator(np.random.PCG64(arrival_stream))
    policy_rng = np.random.Generator(np.random.PCG64(policy_stream))
    state = continuous.new_state(
        model,
        system.n_servers,
        0,
        extension=lambda slots: caches.new_cache_extension(system, policy, slots, len(model.batch_ends)),
    )
    state.counters[0]["window_end"] = np.inf
    state.counters[0]["next_arrival"] = arrival_rng.exponential() / model.total_arrival_rate
    seconds = 0.0
    while True:
        t0 = CLOCK()
        status = continuous_kernel.advance_with_caches(model, state, arrival_rng, policy_rng, 1 << 40)
        seconds += CLOCK() - t0
        if status == continuous_kernel.FINISHED:
            return int(state.counters[0]["events"]), seconds
        state = continuous.grow_job_pool(model, state)


def hetlb_batch_servers(system, policy_id, jobs, seed):
    """Events and CPU seconds of hetlb's multi-slot kernel measuring ``jobs`` jobs from empty."""
    policy = resolve_policy(policy_id, {})
    model = continuous.pack_model(system, policy, RunOptions(jobs=jobs))
    slot_model, slot_state = batch_servers.pack_slots(system), batch_servers.new_slot_state(system)
    arrival_stream, policy_stream = np.random.SeedSequence(seed).spawn(2)
    arrival_rng = np.random.Generator(np.random.PCG64(arrival_stream))
    policy_rng = np.random.Generator(np.random.PCG64(policy_stream))
    state = continuous.new_state(model, system.n_servers, 0, slots=(slot_model, slot_state))
    state.counters[0]["window_end"] = np.inf
    state.counters[0]["next_arrival"] = arrival_rng.exponential() / model.total_arrival_rate
    seconds = 0.0
    while True:
        t0 = CLOCK()
        status = batch_kernel.advance(model, state, slot_model, slot_state, arrival_rng, policy_rng, 1 << 40)
        seconds += CLOCK() - t0
        if status == continuous_kernel.FINISHED:
            return int(state.counters[0]["events"]), seconds
        if status == batch_kernel.NEEDS_SERVICE_ROOM:
            slot_state = batch_servers.grow_service_room(slot_state)
        else:
            state = continuous.grow_job_pool(model, state)


def hetlb_slotted(system, policy_id, slots, seed, **params):
    """Slots and CPU seconds of hetlb's slotted kernel running ``slots`` slots from empty."""
    policy = resolve_policy(policy_id, dict(params), "simulate_slotted")
    model = slotted.pack_model(system, policy, slots, 0, 20, False)
    streams = [np.random.Generator(np.random.PCG64(s)) for s in np.random.SeedSequence(seed).spawn(4)]
    state = slotted.new_state(model, 0)
    t0 = CLOCK()
    slotted_kernel.advance(model, state, *streams, slots)
    return slots, CLOCK() - t0


def hetlb_bounding(kind, speed, arrival_rate, horizon, seed):
    """Events and CPU seconds of hetlb's JSQ-FSL / JSQ-SSL kernel up to ``horizon`` from empty."""
    rates = served_rate(speed, kind)
    rng = np.random.default_rng(seed)
    t0 = CLOCK()
    counts = bounding_kernel.simulate_bounding(rates, float(arrival_rate), np.iinfo(np.int64).max, horizon, 0.0, rng)[3]
    return int(counts[2]), CLOCK() - t0


# --- the paths ------------------------------------------------------------------------------------


def complete_path(n, jobs):
    speeds = canonical_speeds(n)
    system = hetlb.System.from_speeds(list(speeds), load=LOAD)
    rate = LOAD * speeds.sum()
    scan = n <= 32

    def floor():
        rng = np.random.default_rng(SEED)
        t0 = CLOCK()
        _, events = _simulate_jsq(speeds, rate, jobs, rng, scan)
        return events / (CLOCK() - t0)

    def simulator():
        events, seconds = hetlb_continuous(system, "jsq", jobs, SEED)
        return events / seconds

    return floor, simulator, "M events/s", 1e6


def sparse_path(jobs, n=2048):
    speeds = np.repeat([1.0, 0.5, 0.25, 0.125], n // 4)
    ports = round(n**1.2)
    graph, _ = random_bipartite(ports, n, fig3_edge_probability(n, LOAD), np.random.default_rng(SEED))
    port_rate = np.full(ports, LOAD * speeds.sum() / ports)
    system = hetlb.System.from_speeds(speeds, arrival_rate=port_rate, buffer=5, graph=graph)

    def floor():
        _, _, events, seconds = run_floor_sparse(graph.indptr, graph.indices, speeds, port_rate, 5, jobs, SEED, CLOCK)
        return events / seconds

    def simulator():
        events, seconds = hetlb_continuous(system, "jfsq", jobs, SEED)
        return events / seconds

    return floor, simulator, "M events/s", 1e6


def slotted_path(rule, slots):
    speeds = np.repeat([1.0, 0.5], 50)
    system = hetlb.SlottedSystem.from_speeds(speeds, dispatchers=10, load=LOAD)
    params = {"update": "push", "p_hat": 1.0, "push_d": 2} if rule == "l-jsq-push" else {}

    def floor():
        _, _, seconds = run_floor_slotted(rule, speeds, system.dispatcher_rate, slots, SEED, 1.0, 2, CLOCK)
        return slots / seconds

    def simulator():
        done, seconds = hetlb_slotted(system, rule.removesuffix("-push"), slots, SEED, **params)
        return done / seconds

    return floor, simulator, "k slots/s", 1e3


def bounding_path(kind, horizon, n=1000):
    speeds = np.linspace(0.5, 1.5, n)
    arrival_rate = speeds.sum() - math.sqrt(n)

    def floor():
        _, events, seconds = run_floor_bounding(kind, speeds, arrival_rate, horizon, SEED, clock=CLOCK)
        return events / seconds

    def simulator():
        events, seconds = hetlb_bounding(kind, speeds, arrival_rate, horizon, SEED)
        return events / seconds

    return floor, simulator, "M events/s", 1e6


def dispatchers_path(jobs, n=100, m=10):
    speeds = canonical_speeds(n)
    system = hetlb.System.from_speeds(list(speeds), load=LOAD)
    rate = LOAD * speeds.sum()

    def floor():
        _, events, seconds = run_floor_dispatchers(speeds, rate, m, 1.0, 2, jobs, SEED, CLOCK)
        return events / seconds

    def simulator():
        events, _, seconds = time_dispatchers(system, "l-jsq", m, "push:p_hat=1:d=2", jobs, SEED)
        return events / seconds

    return floor, simulator, "M events/s", 1e6


def batch_path(n, jobs):
    speeds = canonical_speeds(n)
    system = hetlb.System.from_speeds(
        list(speeds), concurrency=CONCURRENCY, rate_curve=f"saturating:alpha={ALPHA}", load=LOAD
    )

    def floor():
        events, seconds = run_floor_batch(n, jobs, SEED, CLOCK)
        return events / seconds

    def simulator():
        events, seconds = hetlb_batch_servers(system, "jsq", jobs, SEED)
        return events / seconds

    return floor, simulator, "M events/s", 1e6


CACHE_LOAD = 0.7
CACHE_PROMPTS = dict(count=100, blocks=4, unique=2, zipf=1.0, capacity=64, work=0.05)
"""The cache paths' system: with every prefill a miss its load is 0.7 (1 + 0.05 x 6) = 0.91."""


def cache_path(n, jobs):
    speeds = canonical_speeds(n)
    p = CACHE_PROMPTS
    system = hetlb.System.from_speeds(
        list(speeds),
        load=CACHE_LOAD,
        cache_blocks=p["capacity"],
        prompts=f"shared:count={p['count']},blocks={p['blocks']},zipf={p['zipf']:g},unique={p['unique']}",
        prefill_work=p["work"],
    )
    rate = CACHE_LOAD * speeds.sum()

    def floor():
        _, _, events, seconds = run_floor_cache(speeds, rate, jobs, SEED, CLOCK, **CACHE_PROMPTS)
        return events / seconds

    def simulator():
        events, seconds = hetlb_caches(system, "jsq", jobs, SEED)
        return events / seconds

    return floor, simulator, "M events/s", 1e6


def paths(scale):
    jobs = int(1_000_000 * scale)
    return {
        "complete-10": lambda: complete_path(10, jobs),
        "complete-100": lambda: complete_path(100, jobs),
        "complete-1000": lambda: complete_path(1000, jobs),
        "sparse": lambda: sparse_path(jobs),
        "slotted-jsq": lambda: slotted_path("jsq", int(100_000 * scale)),
        "slotted-l-jsq-push": lambda: slotted_path("l-jsq-push", int(100_000 * scale)),
        "fsl": lambda: bounding_path("fsl", 2_000.0 * scale),
        "ssl": lambda: bounding_path("ssl", 2_000.0 * scale),
        "dispatchers-l-jsq-push": lambda: dispatchers_path(jobs),
        "batch-100": lambda: batch_path(100, jobs),
        "batch-10000": lambda: batch_path(10_000, jobs),
        "cache-10": lambda: cache_path(10, jobs),
        "cache-1000": lambda: cache_path(1000, jobs),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds")
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies every run's length")
    parser.add_argument("--paths", default="", help="comma-separated subset of the paths (default all)")
    args = parser.parse_args(argv)
    available = paths(args.scale)
    chosen = [p for p in args.paths.split(",") if p] or list(available)
    unknown = [p for p in chosen if p not in available]
    if unknown:
        parser.error(f"unknown paths {unknown}; choose from {', '.join(available)}")
    built = {name: available[name]() for name in chosen}
    hetlb.jit.compile_everything()  # numba's kernels, also for the short warm-up (hetlb.simulation.fast_start)
    for floor, simulator, _, _ in built.values():  # compile or load every kernel first
        floor()
        simulator()
    print(f"load average at start: {os.getloadavg()}", flush=True)
    rates = {name: ([], []) for name in chosen}
    for _ in range(args.rounds):
        for name, (floor, simulator, _, _) in built.items():
            rates[name][0].append(floor())
            rates[name][1].append(simulator())
    print(f"load average at end: {os.getloadavg()}")
    print(f"{'path':<20} {'unit':>11} {'floor':>9} {'hetlb':>9} {'median ratio':>13} {'ratio range':>14}")
    for name, (floor_rates, simulator_rates) in rates.items():
        _, _, unit, divisor = built[name]
        ratios = [f / h for f, h in zip(floor_rates, simulator_rates)]
        print(
            f"{name:<20} {unit:>11} {max(floor_rates) / divisor:>9.2f} {max(simulator_rates) / divisor:>9.2f} "
            f"{statistics.median(ratios):>13.3f} {min(ratios):>6.3f}-{max(ratios):<7.3f}"
        )
    print("per-round ratios floor / hetlb:")
    for name, (floor_rates, simulator_rates) in rates.items():
        print(f"  {name:<20} " + " ".join(f"{f / h:.3f}" for f, h in zip(floor_rates, simulator_rates)))


if __name__ == "__main__":
    with working("benchmarks/floor_ratio.py ", live=False):
        main()
