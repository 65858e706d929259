"""Small runs of every kernel path, reduced to their numbers, for test_jit_off.py.

test_jit_off.py runs them with ``NUMBA_DISABLE_JIT=1`` (the kernels as plain Python) and runs this
file as a script, compiled, in a subprocess, which writes the same numbers as a pickle to stdout;
the two must agree bit for bit. Each scenario is a few thousand events, so that plain Python
takes a second or two.
"""

import contextlib
import pickle
import sys

import numpy as np

import hetlb
from hetlb.graphs.graph import CompatibilityGraph
from hetlb.simulation import continuous
from hetlb.simulation.bounding import check_sandwich_arrays, simulate_bounding_system_arrays

SPEEDS = [2.0, 1.0, 1.0, 0.5, 0.25]
SHARED = "shared:count=5,blocks=2,zipf=1,unique=1"
"""Prompts of the runs with prefix caches."""


@contextlib.contextmanager
def routing_path(path: str):
    """Route the complete job types by a scan, the tree or the key buckets (as test_exact_agreement)."""
    saved = continuous.TREE_MIN_SERVERS, continuous.BUCKET_MAX_CLASSES
    continuous.TREE_MIN_SERVERS = 10**9 if path == "scan" else 1
    continuous.BUCKET_MAX_CLASSES = 10**9 if path == "buckets" else -1
    try:
        yield
    finally:
        continuous.TREE_MIN_SERVERS, continuous.BUCKET_MAX_CLASSES = saved


def continuous_numbers(result) -> dict:
    """Everything a continuous run measured, but its wall time."""
    (run,) = result.runs
    numbers = {
        name: np.asarray(getattr(run, name), dtype=float)
        for name in (
            "mean_response_time",
            "response_time_std",
            "mean_waiting_time",
            "p_wait",
            "blocking_probability",
            "mean_number_in_system",
            "utilisation",
            "mean_queue_length",
            "peak_queue_length",
            "occupancy",
            "class_jobs",
            "histogram",
            "measured_time",
            "end_time",
            "events",
            "batch_response_means",
        )
    }
    numbers["counters"] = np.array(list(run.counters.values()), dtype=float)
    for name in ("jobs_distribution", "waiting_distribution"):
        if getattr(run, name) is not None:
            numbers[name] = getattr(run, name)
    if run.trace is not None:
        numbers.update({"trace_" + name: np.asarray(values, dtype=float) for name, values in run.trace.items()})
    if run.has_caches:
        for name in ("mean_ttft", "ttft_histogram", "blocks_hit", "blocks_requested", "server_blocks_hit"):
            numbers[name] = np.asarray(getattr(run, name), dtype=float)
        if run.rank_jobs is not None:
            numbers["rank_blocks_hit"] = np.asarray(run.rank_blocks_hit, dtype=float)
    return numbers


def slotted_numbers(result) -> dict:
    (run,) = result.runs
    numbers = {
        name: np.asarray(getattr(run, name), dtype=float)
        for name in (
            "arrivals",
            "departures",
            "decisions",
            "mean_number_in_system",
            "mean_delay",
            "mean_estimate_error",
            "mean_queue_length",
            "batch_delay_means",
        )
    }
    numbers["messages"] = np.array(list(run.messages.values()), dtype=float)
    numbers["counters"] = np.array(list(run.counters.values()), dtype=float)
    if run.preference_samples is not None:
        numbers["preference_samples"] = run.preference_samples
    if run.trace is not None:
        numbers.update({"trace_" + name: np.asarray(values, dtype=float) for name, values in run.trace.items()})
    return numbers


def continuous_run(path: str, policy: str, jobs: int = 1500, **options) -> dict:
    system_options = {
        key: options.pop(key)
        for key in (
            "buffer",
            "job_sizes",
            "graph",
            "arrival_rate",
            "arrivals",
            "concurrency",
            "rate_curve",
            "cache_blocks",
            "prompts",
            "prefill_work",
            "prefill_law",
        )
        if key in options
    }
    if "arrival_rate" not in system_options:
        system_options["load"] = 0.85
    system = hetlb.System.from_speeds(SPEEDS, **system_options)
    with routing_path(path):
        result = hetlb.simulate(system, policy, jobs=jobs, warmup=5.0, batches=5, seed=7, trace=20, **options)
    return continuous_numbers(result)


def trace_file() -> str:
    """A small Mooncake-format trace (the same every time): 300 requests whose chains share leading
    blocks, in a temporary folder."""
    import json
    import os
    import tempfile

    path = os.path.join(tempfile.mkdtemp(prefix="hetlb-jit-off-"), "trace.jsonl")
    rng = np.random.default_rng(17)
    with open(path, "w") as handle:
        time = 0.0
        for _ in range(300):
            time += float(rng.exponential(50.0))
            root = int(rng.integers(4))
            ids = [root, 10 + root * 3 + int(rng.integers(3))][: int(rng.integers(1, 3))] + [
                1000 + int(rng.integers(50))
            ]
            record = {"timestamp": time, "input_length": 512 * len(ids), "output_length": int(rng.integers(1, 400))}
            handle.write(json.dumps({**record, "hash_ids": ids}) + "\n")
    return path


def dispatcher_numbers(result) -> dict:
    """A continuous run's numbers with those of its dispatchers."""
    (run,) = result.runs
    numbers = continuous_numbers(result)
    numbers["messages"] = np.array(list(run.messages.values()), dtype=float)
    for name in ("mean_estimate_error", "mean_estimate_age", "herd_fraction", "stale_messages", "message_events"):
        numbers[name] = np.asarray(getattr(run, name), dtype=float)
    return numbers


def dispatchers_run(path: str, policy: str, update: str, **options) -> dict:
    system_options = {
        key: options.pop(key)
        for key in (
            "buffer",
            "job_sizes",
            "arrivals",
            "concurrency",
            "rate_curve",
            "cache_blocks",
            "prompts",
            "prefill_work",
            "prefill_law",
        )
        if key in options
    }
    system = hetlb.System.from_speeds(SPEEDS, load=0.8, **system_options)
    with routing_path(path):
        result = hetlb.simulate(
            system, policy, jobs=800, warmup=5.0, batches=5, seed=7, trace=20, dispatchers=3, update=update, **options
        )
    return dispatcher_numbers(result)


def sandwich_numbers() -> dict:
    check = check_sandwich_arrays(SPEEDS, 4.2, buffer=4, horizon=300.0, warmup=10.0, seed=5)
    numbers = {
        name: np.asarray(getattr(check, name), dtype=float)
        for name in ("ticks", "arrivals", "lower_violations", "upper_violations")
    }
    numbers["mean_jobs"] = np.array(list(check.mean_jobs.values()))
    numbers["mean_waiting"] = np.array(list(check.mean_waiting.values()))
    return numbers


def scenarios() -> dict:
    """Name -> a function returning that run's numbers."""
    sparse = CompatibilityGraph.from_lists([[0, 1, 3], [1, 2, 4], [0, 2, 3, 4]], len(SPEEDS))
    return {
        "scan jfsq, finite buffers, hyperexponential sizes": lambda: continuous_run(
            "scan", "jfsq", buffer=3, job_sizes=hetlb.JobSizes("hyperexponential", scv=4.0)
        ),
        "tree sed, state distribution": lambda: continuous_run("tree", "sed", state_distribution=True),
        "tree jsq-lisf, deterministic sizes": lambda: continuous_run("tree", "jsq-lisf", job_sizes="deterministic"),
        "buckets jsq": lambda: continuous_run("buckets", "jsq"),
        "buckets jfiq, finite buffers": lambda: continuous_run("buckets", "jfiq", buffer=2),
        "sparse graph jsq-fiq": lambda: continuous_run("scan", "jsq-fiq", graph=sparse, arrival_rate=3.0),
        "sparse graph pod": lambda: continuous_run("scan", "pod", graph=sparse, arrival_rate=3.0, d=2),
        "jsq-df-ds": lambda: continuous_run("scan", "jsq-df-ds", buffer=4, p_fast=0.7, p_slow=0.4),
        "weighted-random": lambda: continuous_run("scan", "weighted-random", buffer=4, job_sizes="deterministic"),
        "tree jsq, batch arrivals, lognormal sizes": lambda: continuous_run(
            "tree", "jsq", arrivals="batch:mean=3", job_sizes=hetlb.JobSizes("lognormal", 2.0)
        ),
        "scan sed, mmpp arrivals, pareto sizes": lambda: continuous_run(
            "scan", "sed", buffer=5, arrivals="mmpp:ratio=4,on=5,off=10", job_sizes=hetlb.JobSizes("pareto", 0.5)
        ),
        "caches eft, shared prompts, finite buffers": lambda: continuous_run(
            "scan", "eft", buffer=4, cache_blocks=[6, 4, 4, 3, 2], prompts=SHARED, prefill_work=0.1
        ),
        "caches jsq buckets, exponential prefill": lambda: continuous_run(
            "buckets", "jsq", buffer=6, cache_blocks=5, prompts=SHARED, prefill_work=0.2, prefill_law="exponential"
        ),
        "caches chash and cache-aware on a sparse graph": lambda: {
            **continuous_run("scan", "chash", graph=sparse, arrival_rate=2.5, cache_blocks=4, prompts=SHARED),
            **{
                name + " cache-aware": value
                for name, value in continuous_run(
                    "scan", "cache-aware", graph=sparse, arrival_rate=2.5, cache_blocks=4, prompts=SHARED, abs=2
                ).items()
            },
        },
        "caches prefix-score and balanced-pandas": lambda: {
            **continuous_run("scan", "prefix-score", cache_blocks=5, prompts=SHARED, prefill_work=0.1),
            **{
                name + " balanced-pandas": value
                for name, value in continuous_run(
                    "scan", "balanced-pandas", cache_blocks=5, prompts=SHARED, prefill_work=0.1
                ).items()
            },
        },
        "caches multi-slot eft, saturating, exponential prefill": lambda: continuous_run(
            "scan",
            "eft",
            buffer=6,
            concurrency=[3, 1, 2, 4, 2],
            rate_curve="saturating:alpha=0.3",
            cache_blocks=[5, 4, 4, 6, 3],
            prompts=SHARED,
            prefill_work=0.15,
            prefill_law="exponential",
        ),
        "caches multi-slot jsq buckets, unlimited shared": lambda: continuous_run(
            "buckets", "jsq", concurrency="inf", rate_curve="shared", cache_blocks=4, prompts=SHARED, prefill_work=0.1
        ),
        "caches trace, eft and multi-slot jsq": lambda: {
            **continuous_run("scan", "eft", cache_blocks=4, prompts=f"trace:{trace_file()}", prefill_work=0.2),
            **{
                name + " multi-slot": value
                for name, value in continuous_run(
                    "buckets",
                    "jsq",
                    concurrency=[2, 1, 3, 2, 1],
                    rate_curve="saturating:alpha=0.3",
                    cache_blocks=4,
                    prompts=f"trace:{trace_file()}",
                    prefill_work=0.2,
                ).items()
            },
        },
        "multi-slot tree jfsq, saturating, finite buffers": lambda: continuous_run(
            "tree", "jfsq", buffer=5, concurrency=3, rate_curve="saturating:alpha=0.3"
        ),
        "multi-slot buckets jsq, table curve": lambda: continuous_run(
            "buckets", "jsq", concurrency=[1, 2, 3, 4, 2], rate_curve="table:1,1.5,1.8"
        ),
        "multi-slot scan sed, unlimited shared, batch arrivals": lambda: continuous_run(
            "scan", "sed", concurrency="inf", rate_curve="shared", arrivals="batch:mean=2"
        ),
        "multi-slot scan jsq-lisf, finite buffers": lambda: continuous_run(
            "scan", "jsq-lisf", buffer=6, concurrency=[2, 3, 2, 1, 2], rate_curve="saturating:alpha=0.5"
        ),
        "slotted l-jsq push, preference": lambda: slotted_numbers(
            hetlb.simulate_slotted(
                hetlb.SlottedSystem.from_speeds(SPEEDS, dispatchers=3, load=0.8),
                "l-jsq",
                slots=400,
                warmup=20,
                batches=4,
                seed=3,
                preference=True,
                trace=20,
                p_hat=0.3,
                push_d=2,
            )
        ),
        "slotted l-jba pull, binomial arrivals": lambda: slotted_numbers(
            hetlb.simulate_slotted(
                hetlb.SlottedSystem.from_speeds(SPEEDS, dispatchers=2, load=0.8, arrivals="binomial:4"),
                "l-jba",
                slots=400,
                batches=4,
                seed=3,
                p_hat=0.5,
                update="pull",
            )
        ),
        "slotted jiq, bernoulli service, job routing": lambda: slotted_numbers(
            hetlb.simulate_slotted(
                hetlb.SlottedSystem.from_speeds(
                    [0.9, 0.5, 0.5, 0.3], dispatchers=2, load=0.7, service="bernoulli", routing="job"
                ),
                "jiq",
                slots=400,
                batches=4,
                seed=3,
            )
        ),
        "slotted jsq, shared ties; pod": lambda: {
            **slotted_numbers(
                hetlb.simulate_slotted(
                    hetlb.SlottedSystem.from_speeds(SPEEDS, dispatchers=3, load=0.8, ties="shared"),
                    "jsq",
                    slots=300,
                    batches=4,
                    seed=3,
                )
            ),
            **{
                "pod " + name: value
                for name, value in slotted_numbers(
                    hetlb.simulate_slotted(
                        hetlb.SlottedSystem.from_speeds(SPEEDS, dispatchers=3, load=0.8),
                        "pod",
                        slots=300,
                        batches=4,
                        seed=3,
                        d=2,
                    )
                ).items()
            },
        },
        "dispatchers tree l-jsq, delayed piggyback and push": lambda: dispatchers_run(
            "tree", "l-jsq", "increment,piggyback:delay=0.2,push:p_hat=0.5:d=2:mean_delay=0.3", buffer=4
        ),
        "dispatchers multi-slot scan sed probe, tree l-jsq push": lambda: {
            **dispatchers_run("scan", "sed", "probe", concurrency=[2, 2, 3, 1, 4], rate_curve="saturating:alpha=0.2"),
            **{
                f"l-jsq {name}": value
                for name, value in dispatchers_run(
                    "tree", "l-jsq", "push:p_hat=0.5:d=2", concurrency="inf", rate_curve="shared"
                ).items()
            },
        },
        "dispatchers with caches, scan sed probe and multi-slot tree l-jsq push": lambda: {
            **dispatchers_run("scan", "sed", "probe", buffer=5, cache_blocks=4, prompts=SHARED, prefill_work=0.1),
            **{
                f"l-jsq {name}": value
                for name, value in dispatchers_run(
                    "tree",
                    "l-jsq",
                    "push:p_hat=0.5:d=2",
                    concurrency=[2, 1, 3, 2, 1],
                    rate_curve="saturating:alpha=0.2",
                    cache_blocks=4,
                    prompts=SHARED,
                    prefill_work=0.1,
                    prefill_law="exponential",
                ).items()
            },
        },
        "dispatchers tree l-jsq push, mmpp arrivals, weibull sizes": lambda: dispatchers_run(
            "tree",
            "l-jsq",
            "push:p_hat=0.5:d=2",
            arrivals="mmpp:ratio=3,on=4,off=8",
            job_sizes=hetlb.JobSizes("weibull", 0.5),
        ),
        "dispatchers scan l-jba pull, jsq-lisf on independent snapshots": lambda: {
            **dispatchers_run("scan", "l-jba", "pull:p_hat=0.7:mean_delay=0.1"),
            **{
                "snapshot " + name: value
                for name, value in dispatchers_run(
                    "tree", "jsq-lisf", "snapshot:tau=0.5:phases=independent:delay=0.1"
                ).items()
            },
        },
        "bounding fsl and ssl": lambda: {
            f"{kind} {buffer}": bounding.replication_values
            for kind in ("fsl", "ssl")
            for buffer in (None, 3)
            for bounding in [
                simulate_bounding_system_arrays(
                    SPEEDS, 4.0, kind, buffer, horizon=300.0, warmup=30.0, replications=2, seed=5
                )
            ]
        },
        "coupled sandwich check": sandwich_numbers,
    }


if __name__ == "__main__":
    pickle.dump({name: run() for name, run in scenarios().items()}, sys.stdout.buffer)
