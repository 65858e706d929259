"""Decision time of hetlb serve: one call of the policy's rule on a dispatcher's estimates, as the
proxy makes it per request (hetlb.gateway.dispatcher.Dispatcher.choose, which calls
hetlb.policies.choice.choose_server), at 64 backends of four speeds, with random estimates.

    PYTHONPATH=src python benchmarks/serve_decision.py [--backends 64] [--decisions 50000]

Prints the median and 99th percentile per live policy, in microseconds (goal: median <= 5 us), and
the same call with a numpy Generator as the rule's ``rng`` (what the live dispatcher avoids).
"""

import argparse
import time

import numpy as np

from hetlb.gateway.config import LIVE_POLICIES, ServeConfig
from hetlb.gateway.dispatcher import Dispatcher
from hetlb.policies.choice import choose_server
from hetlb.policies.registry import POLICIES
from hetlb.progress import working


def decision_times(dispatcher: Dispatcher, decisions: int, rng) -> np.ndarray:
    """Nanoseconds of each decision; the estimates change between decisions (not timed)."""
    times = np.empty(decisions, dtype=np.int64)
    estimates = rng.integers(0, 5, size=(256, dispatcher.n_backends))
    clock = time.perf_counter_ns
    for i in range(decisions):
        dispatcher.estimate[:] = estimates[i % 256]
        start = clock()
        dispatcher.choose(0)
        times[i] = clock() - start
    return times


def with_generator(dispatcher: Dispatcher, decisions: int) -> np.ndarray:
    """The same rule called with a numpy Generator (numba unboxes it on every call)."""
    generator = np.random.default_rng(1)
    d = dispatcher
    args = (
        d.policy_code, d.candidates, 0, d.n_backends, d.estimate, d.speed_class, d.n_classes, d.speed,
        d.cumulative_speed, d.idle_since, d.sample_size, d.jba_rate_weighted, d.jba_inclusive, d.jba_fallback,
        d.keys, d.ties, d.sample, generator,
    )  # fmt: skip
    choose_server(*args)
    times = np.empty(decisions, dtype=np.int64)
    for i in range(decisions):
        start = time.perf_counter_ns()
        choose_server(*args)
        times[i] = time.perf_counter_ns() - start
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", type=int, default=64)
    parser.add_argument("--decisions", type=int, default=50_000)
    args = parser.parse_args()
    speeds = [1.0, 0.5, 0.25, 0.125]
    backends = [f"http://127.0.0.1:{20000 + i},speed={speeds[i % 4]}" for i in range(args.backends)]
    rng = np.random.default_rng(0)
    print(f"decision time at {args.backends} backends, {args.decisions:,} decisions per policy (microseconds)")
    print(f"{'policy':<16}{'median':>8}{'p99':>8}")
    for policy in LIVE_POLICIES:
        signals = "piggyback" if POLICIES[policy].on_local_estimates else "inflight,piggyback"
        dispatcher = Dispatcher(ServeConfig.from_mapping({"backends": backends, "policy": policy, "signals": signals}))
        dispatcher.warm_up()
        times = decision_times(dispatcher, args.decisions, rng) / 1000.0
        print(f"{policy:<16}{np.median(times):>8.2f}{np.percentile(times, 99):>8.2f}")
    dispatcher = Dispatcher(ServeConfig.from_mapping({"backends": backends, "policy": "jfsq"}))
    times = with_generator(dispatcher, args.decisions) / 1000.0
    print(
        f"{'jfsq, Generator':<16}{np.median(times):>8.2f}{np.percentile(times, 99):>8.2f}  (the rule with a numpy Generator)"
    )


if __name__ == "__main__":
    with working("benchmarks/serve_decision.py ", live=False):
        main()
