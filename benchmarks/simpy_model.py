"""The canonical benchmark system written the way a typical SimPy user would write it.

One ``simpy.Resource(capacity=1)`` per server (FCFS), a source process generating Poisson
arrivals, one process per job, and JSQ by looking at ``len(resource.queue) + resource.count``
of every server (ties uniformly at random). Service time = size / speed with exponential
sizes of mean 1. The run stops when ``jobs`` jobs have completed.

Randomness comes from one explicitly seeded ``random.Random`` (scalar draws from the standard
library are much cheaper in pure Python than scalar draws from a NumPy generator).
"""

import random
import time

import simpy

from hetlb.progress import working


def run_simpy(speeds, arrival_rate, jobs, seed):
    """Simulate JSQ in SimPy until ``jobs`` jobs have completed.

    Returns ``(mean_response_time, events, seconds)`` where events = arrivals + departures
    (model events, not SimPy's internal events) and seconds is the wall time of the run.
    """
    speeds = [float(v) for v in speeds]
    jobs = int(jobs)
    rng = random.Random(seed)
    env = simpy.Environment()
    servers = [simpy.Resource(env, capacity=1) for _ in speeds]
    all_done = env.event()
    stats = {"arrivals": 0, "completed": 0, "total_response": 0.0}

    def job(server, speed):
        arrived = env.now
        with server.request() as request:
            yield request
            yield env.timeout(rng.expovariate(1.0) / speed)
        if stats["completed"] < jobs:
            stats["completed"] += 1
            stats["total_response"] += env.now - arrived
            if stats["completed"] == jobs:
                all_done.succeed()

    def source():
        while True:
            yield env.timeout(rng.expovariate(arrival_rate))
            stats["arrivals"] += 1
            lengths = [len(r.queue) + r.count for r in servers]
            shortest = min(lengths)
            candidates = [i for i, n in enumerate(lengths) if n == shortest]
            i = rng.choice(candidates)
            env.process(job(servers[i], speeds[i]))

    env.process(source())
    t0 = time.perf_counter()
    env.run(until=all_done)
    seconds = time.perf_counter() - t0
    events = stats["arrivals"] + stats["completed"]
    return stats["total_response"] / stats["completed"], events, seconds


if __name__ == "__main__":
    with working("benchmarks/simpy_model.py ", live=False):
        speeds = [1.0] * 5 + [0.5] * 5
        m, ev, sec = run_simpy(speeds, 0.9 * sum(speeds), 100_000, seed=1)
        print(f"N=10: mean response {m:.4f}, {ev} events in {sec:.2f} s, {ev / sec:,.0f} events/s")
