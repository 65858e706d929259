"""Events per second of the many-dispatcher kernel against the single-dispatcher kernel, same system.

The canonical system (README.md: N servers, half of speed 1 and half of 0.5, load 0.9, exponential
sizes) measured for ``--jobs`` jobs from empty, each kernel timed alone in CPU seconds of this
thread, best of ``--repeat``, after a compiling run. Rows:

* ``single jsq``: hetlb's single-dispatcher kernel (hetlb.kernels.continuous), jsq, on its key
  buckets (its default here), and ``single jsq, tree`` on its least-key tree;
* ``M=1 jsq exact``: the dispatcher kernel with one dispatcher that knows the truth (the
  decisions of the single kernel's tree path, bit for bit);
* ``M=10 l-jsq push``, ``M=10 l-jsq piggyback,push delayed``, ``M=10 jsq snapshot``,
  ``M=10 pod probe``: ten dispatchers with their own estimates.

Events are arrivals and departures, as the single kernel counts them; ``all events/s`` adds the
deliveries of delayed messages and the snapshot polls.

    python benchmarks/dispatchers.py --servers 100 --jobs 1000000
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run_benchmarks import LOAD, SEED, canonical_speeds  # noqa: E402

import hetlb  # noqa: E402
from hetlb.kernels import continuous as continuous_kernel  # noqa: E402
from hetlb.kernels import dispatchers as dispatcher_kernel  # noqa: E402
from hetlb.model.dispatchers import Updates  # noqa: E402
from hetlb.policies.registry import resolve_policy  # noqa: E402
from hetlb.progress import working  # noqa: E402
from hetlb.simulation import continuous, dispatchers  # noqa: E402
from hetlb.simulation.batch_servers import no_slots  # noqa: E402
from hetlb.simulation.options import RunOptions  # noqa: E402

CLOCK = time.thread_time


def time_single(system, policy_id, jobs, seed, tree=False):
    """(events, 0, CPU seconds) of the single-dispatcher kernel (on its tree with ``tree``)."""
    policy = resolve_policy(policy_id, {})
    buckets = continuous.BUCKET_MAX_CLASSES
    continuous.BUCKET_MAX_CLASSES = -1 if tree else buckets
    try:
        model = continuous.pack_model(system, policy, RunOptions(jobs=jobs))
        state = continuous.new_state(model, system.n_servers, 0)
    finally:
        continuous.BUCKET_MAX_CLASSES = buckets
    arrival_stream, policy_stream = np.random.SeedSequence(seed).spawn(2)
    arrival_rng = np.random.Generator(np.random.PCG64(arrival_stream))
    policy_rng = np.random.Generator(np.random.PCG64(policy_stream))
    state.counters[0]["window_end"] = np.inf
    state.counters[0]["next_arrival"] = arrival_rng.exponential() / model.total_arrival_rate
    seconds = 0.0
    while True:
        t0 = CLOCK()
        status = continuous_kernel.advance(model, state, arrival_rng, policy_rng, 1 << 40)
        seconds += CLOCK() - t0
        if status == continuous_kernel.FINISHED:
            return int(state.counters[0]["events"]), 0, seconds
        state = continuous.grow_job_pool(model, state)


def time_dispatchers(system, policy_id, n_dispatchers, update, jobs, seed):
    """(events, extra events, CPU seconds) of the dispatcher kernel."""
    policy = resolve_policy(policy_id, {})
    model = continuous.pack_model(system, policy, RunOptions(jobs=jobs, dispatchers=n_dispatchers))
    rates = dispatchers.source_rates(system, n_dispatchers, None)
    dispatcher_model = dispatchers.pack_dispatchers(
        system, policy, model, Updates.parse(update), rates, dispatchers.default_herd_window(system)
    )
    streams = [np.random.Generator(np.random.PCG64(s)) for s in np.random.SeedSequence(seed).spawn(3)]
    state = continuous.new_state(model, system.n_servers, 0)
    dispatcher_state = dispatchers.new_dispatcher_state(model, dispatcher_model, system.n_servers, len(state.job_next))
    dispatcher_model = dispatchers.first_snapshot(dispatcher_model, dispatcher_state.counters, streams[2])
    state.counters[0]["window_end"] = np.inf
    state.counters[0]["next_arrival"] = streams[0].exponential() / model.total_arrival_rate
    seconds = 0.0
    while True:
        t0 = CLOCK()
        status = dispatcher_kernel.advance(
            model, state, dispatcher_model, dispatcher_state, *no_slots(), *streams, 1 << 40
        )
        seconds += CLOCK() - t0
        if status == continuous_kernel.FINISHED:
            c = dispatcher_state.counters[0]
            return int(state.counters[0]["events"]), int(c["message_events"] + c["snapshot_events"]), seconds
        if status == continuous_kernel.NEEDS_JOB_SLOTS:
            state = continuous.grow_job_pool(model, state)
            grown = np.zeros(len(state.job_next), np.int64)
            grown[: len(dispatcher_state.job_dispatcher)] = dispatcher_state.job_dispatcher
            dispatcher_state = dispatcher_state._replace(job_dispatcher=grown)
        else:
            dispatcher_state = dispatchers.grow_messages(dispatcher_state)


ROWS = {
    "single jsq": lambda system, jobs: time_single(system, "jsq", jobs, SEED),
    "single jsq, tree": lambda system, jobs: time_single(system, "jsq", jobs, SEED, tree=True),
    "M=1 jsq exact": lambda system, jobs: time_dispatchers(system, "jsq", 1, "exact", jobs, SEED),
    "M=10 l-jsq push": lambda system, jobs: time_dispatchers(system, "l-jsq", 10, "push:p_hat=1:d=2", jobs, SEED),
    "M=10 l-jsq piggyback,push delayed": lambda system, jobs: time_dispatchers(
        system, "l-jsq", 10, "piggyback:mean_delay=0.1,push:p_hat=1:d=2:mean_delay=0.1", jobs, SEED
    ),
    "M=10 jsq snapshot": lambda system, jobs: time_dispatchers(system, "jsq", 10, "snapshot:tau=1", jobs, SEED),
    "M=10 pod probe": lambda system, jobs: time_dispatchers(system, "pod", 10, "probe", jobs, SEED),
}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    speeds = canonical_speeds(args.servers)
    system = hetlb.System.from_speeds(list(speeds), load=LOAD)
    hetlb.jit.compile_everything()  # numba's kernels, also for the short warm-up (hetlb.simulation.fast_start)
    for run in ROWS.values():  # compile or load every kernel first
        run(system, 1000)
    print(f"N = {args.servers}, load {LOAD}, {args.jobs:,} jobs, best of {args.repeat} (CPU seconds of the kernel)")
    print(f"{'':<36}{'M events/s':>12}{'all events/s':>14}")
    for name, run in ROWS.items():
        best = max((lambda e, x, s: ((e / s), (e + x) / s))(*run(system, args.jobs)) for _ in range(args.repeat))
        print(f"{name:<36}{best[0] / 1e6:>12.3f}{best[1] / 1e6:>14.3f}", flush=True)


if __name__ == "__main__":
    with working("benchmarks/dispatchers.py ", live=False):
        main()
