"""Speed of hetlb against a minimal numba kernel, SimPy and Ciw on the canonical system.

Canonical system: N single-server FCFS queues, half of speed 1.0 and half of speed 0.5, one
Poisson stream of rate 0.9 * sum(speeds), exponential sizes of mean 1, infinite buffers,
JSQ (ties uniformly at random), run until ``jobs`` jobs have completed, starting empty.
Events = arrivals + departures. Every run also reports the mean response time of the
completed jobs so the implementations can be checked against each other; the column
``ref mean`` is the minimal kernel's value for the same N and number of jobs (from an empty
system the mean depends on the number of jobs, so only equal horizons are comparable).

Usage:
    python benchmarks/run_benchmarks.py            # full run (several minutes)
    python benchmarks/run_benchmarks.py --quick    # fewer jobs, for a smoke test

Writes the table to out/benchmarks/latest.json (benchmarks/results/ holds the figures the docs quote:
--out benchmarks/results/latest.json renews them).
"""

import argparse
import datetime
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from minimal_kernel import run_minimal  # noqa: E402

from hetlb.progress import working  # noqa: E402

LOAD = 0.9
SEED = 1

# Jobs per run: (full, quick). SimPy and Ciw are far slower; their events per second are
# what is compared, so they run fewer jobs.
JOBS = {
    "minimal": (1_000_000, 100_000),
    "hetlb": (1_000_000, 100_000),
    ("simpy", 10): (200_000, 20_000),
    ("simpy", 1000): (100_000, 10_000),
    ("ciw", 10): (100_000, 10_000),
    ("ciw", 1000): (20_000, 2_000),
}
MAIN_SIZES = (10, 1000)
MINIMAL_SIZES = (10, 100, 1000, 100_000)
SCALING_SIZES = (100, 1000, 100_000)
SCALING_POLICIES = ("jsq", "jfsq", "jiq")


class HetlbNotAvailable(Exception):
    """hetlb, or the part of its public API used here, cannot be imported yet."""


def canonical_speeds(n_servers):
    """Half of the servers at speed 1.0, half at 0.5."""
    return np.repeat([1.0, 0.5], n_servers // 2)


def run_hetlb(speeds, load, policy, jobs, seed):
    """Run the full simulator through its public API.

    A short run first compiles (or loads from the cache) the kernel, so that the timed run
    measures simulation only. Returns
    ``(mean_response_time, events, seconds, events_per_second, call_seconds)``: the first four
    are the result's own ``mean_response_time``, ``events``, ``wall_seconds`` and
    ``events_per_second``; ``call_seconds`` is the wall time of the whole ``hetlb.simulate``
    call as seen by the caller (validation and packing included).
    Raises ``HetlbNotAvailable`` if hetlb or the API is missing.
    """
    try:
        import hetlb

        system = hetlb.System.from_speeds(list(speeds), load=load)
        hetlb.jit.compile_everything()  # numba's kernels, also for the short warm-up (hetlb.simulation.fast_start)
        hetlb.simulate(system, policy, jobs=1_000, seed=seed)
        t0 = time.perf_counter()
        result = hetlb.simulate(system, policy, jobs=jobs, seed=seed)
        call_seconds = time.perf_counter() - t0
        return (
            float(result.mean_response_time),
            int(result.events),
            float(result.wall_seconds),
            float(result.events_per_second),
            call_seconds,
        )
    except (ImportError, AttributeError) as exc:
        raise HetlbNotAvailable(f"{type(exc).__name__}: {exc}") from exc


def best_of(repeat, fn, *args):
    """Run ``fn`` ``repeat`` times (same seed, same result) and keep the fastest."""
    runs = [fn(*args) for _ in range(repeat)]
    return min(runs, key=lambda r: r[2])


def row(implementation, policy, n_servers, jobs, mean_response, events, seconds, ref_mean=None, **extra):
    out = {
        "implementation": implementation,
        "policy": policy,
        "n_servers": n_servers,
        "jobs": jobs,
        "events": events,
        "seconds": seconds,
        "events_per_second": events / seconds if seconds else None,
        "mean_response_time": mean_response,
        "ref_mean_response_time": ref_mean,
    }
    out.update(extra)
    return out


def fmt_row(r):
    if r.get("error"):
        return f"{r['implementation']:<16} {r['policy']:<5} {r['n_servers']:>7} {r['jobs']:>10}   {r['error']}"
    ref = f"{r['ref_mean_response_time']:.4f}" if r["ref_mean_response_time"] is not None else "-"
    return (
        f"{r['implementation']:<16} {r['policy']:<5} {r['n_servers']:>7} {r['jobs']:>10} {r['events']:>10} "
        f"{r['seconds']:>9.3f} {r['events_per_second']:>14,.0f} {r['mean_response_time']:>9.4f} {ref:>9}"
    )


HEADER = (
    f"{'implementation':<16} {'pol.':<5} {'N':>7} {'jobs':>10} {'events':>10} "
    f"{'seconds':>9} {'events/s':>14} {'mean T':>9} {'ref mean':>9}"
)


def print_table(title, rows):
    print(f"\n{title}\n{HEADER}\n{'-' * len(HEADER)}")
    for r in rows:
        print(fmt_row(r))
    sys.stdout.flush()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="about ten times fewer jobs")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of the numba kernels; the fastest is kept")
    parser.add_argument(
        "--only",
        default="minimal,simpy,ciw,hetlb",
        help="comma-separated subset of: minimal, simpy, ciw, hetlb",
    )
    parser.add_argument(
        "--out", default=str(HERE.parent / "out" / "benchmarks" / "latest.json"), help="where to write the JSON table"
    )
    args = parser.parse_args(argv)
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    unknown = only - {"minimal", "simpy", "ciw", "hetlb"}
    if unknown:
        parser.error(f"unknown implementation(s) {sorted(unknown)}; choose from minimal, simpy, ciw, hetlb")
    k = 1 if args.quick else 0
    load_average_start = os.getloadavg() if hasattr(os, "getloadavg") else None

    def jobs_for(name, n):
        return JOBS[(name, n)][k] if (name, n) in JOBS else JOBS[name][k]

    ref_cache = {}

    def ref_mean(n, jobs):
        if (n, jobs) not in ref_cache:
            speeds = canonical_speeds(n)
            ref_cache[(n, jobs)] = run_minimal(speeds, LOAD * speeds.sum(), jobs, SEED)[0]
        return ref_cache[(n, jobs)]

    main_rows = []
    if "minimal" in only:
        for n in MINIMAL_SIZES:
            speeds = canonical_speeds(n)
            jobs = jobs_for("minimal", n)
            m, ev, sec = best_of(args.repeat, run_minimal, speeds, LOAD * speeds.sum(), jobs, SEED)
            ref_cache[(n, jobs)] = m
            main_rows.append(row("minimal kernel", "jsq", n, jobs, m, ev, sec, m))
            print(fmt_row(main_rows[-1]), flush=True)
    for name in ("simpy", "ciw"):
        if name not in only:
            continue
        if name == "simpy":
            from simpy_model import run_simpy as run
        else:
            from ciw_model import run_ciw as run
        for n in MAIN_SIZES:
            speeds = canonical_speeds(n)
            jobs = jobs_for(name, n)
            m, ev, sec = run(speeds, LOAD * speeds.sum(), jobs, SEED)
            main_rows.append(row({"simpy": "SimPy", "ciw": "Ciw"}[name], "jsq", n, jobs, m, ev, sec, ref_mean(n, jobs)))
            print(fmt_row(main_rows[-1]), flush=True)

    scaling_rows = []
    hetlb_status = "not run"
    hetlb_failed = False
    if "hetlb" in only:
        hetlb_status = "ok"
        configs = [("jsq", n) for n in MAIN_SIZES] + [
            (p, n) for p in SCALING_POLICIES for n in SCALING_SIZES if not (p == "jsq" and n in MAIN_SIZES)
        ]
        for policy, n in configs:
            speeds = canonical_speeds(n)
            jobs = jobs_for("hetlb", n)
            try:
                runs = [run_hetlb(speeds, LOAD, policy, jobs, SEED) for _ in range(args.repeat)]
            except HetlbNotAvailable as exc:
                hetlb_status = f"not available ({exc})"
                print(f"hetlb not available: {exc}", flush=True)
                break
            except Exception as exc:  # a real failure of the simulator: record it, keep going
                hetlb_failed = True
                r = row("hetlb", policy, n, jobs, None, None, None, error=f"{type(exc).__name__}: {exc}")
            else:
                m, ev, sec, ev_per_sec, call = min(runs, key=lambda r: r[2])
                ref = ref_mean(n, jobs) if policy == "jsq" else None
                r = row("hetlb", policy, n, jobs, m, ev, sec, ref, events_per_second=ev_per_sec, call_seconds=call)
            print(fmt_row(r), flush=True)
            (main_rows if policy == "jsq" and n in MAIN_SIZES else scaling_rows).append(r)
        scaling_rows = [
            r
            for r in [r for r in main_rows if r["implementation"] == "hetlb"] + scaling_rows
            if r["n_servers"] in SCALING_SIZES
        ]
        scaling_rows.sort(key=lambda r: (SCALING_POLICIES.index(r["policy"]), r["n_servers"]))

    print_table(
        "Canonical system (events = arrivals + departures; 'ref mean': minimal kernel, same N and jobs)", main_rows
    )

    ratios = {}
    minimal_by_n = {r["n_servers"]: r for r in main_rows if r["implementation"] == "minimal kernel"}
    if 100 in minimal_by_n and 100_000 in minimal_by_n:
        ratios["minimal kernel jsq"] = (
            minimal_by_n[100_000]["events_per_second"] / minimal_by_n[100]["events_per_second"]
        )
    for policy in SCALING_POLICIES:
        by_n = {r["n_servers"]: r for r in scaling_rows if r["policy"] == policy and not r.get("error")}
        if 100 in by_n and 100_000 in by_n:
            ratios[f"hetlb {policy}"] = by_n[100_000]["events_per_second"] / by_n[100]["events_per_second"]
    if scaling_rows:
        print_table("hetlb scaling", scaling_rows)
    elif "hetlb" in only:
        print(f"\nhetlb {hetlb_status}")
    if ratios:
        print("\nevents/s at N=100000 divided by events/s at N=100 (1.0 = cost per event independent of N)")
        for name, ratio in ratios.items():
            print(f"  {name:<20} {ratio:6.2f}")

    import ciw
    import numba
    import simpy

    report = {
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "quick": args.quick,
        "repeat": args.repeat,
        "system": {
            "speeds": "half 1.0, half 0.5",
            "load": LOAD,
            "sizes": "exponential, mean 1",
            "buffers": "infinite",
            "stop": "jobs completed, from an empty system",
            "seed": SEED,
        },
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(),
            # Other processes competing for the CPUs inflate wall times: check these.
            "load_average_start": load_average_start,
            "load_average_end": os.getloadavg() if hasattr(os, "getloadavg") else None,
        },
        "versions": {
            "numpy": np.__version__,
            "numba": numba.__version__,
            "simpy": simpy.__version__,
            "ciw": ciw.__version__,
        },
        "hetlb_status": hetlb_status,
        "results": main_rows,
        "hetlb_scaling": scaling_rows,
        "scaling_ratio_100000_over_100": ratios,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n")
    tmp.replace(out)
    print(f"\nwrote {out}")
    return 1 if hetlb_failed else 0


if __name__ == "__main__":
    with working("benchmarks/run_benchmarks.py ", live=False):
        status = main()
    sys.exit(status)
