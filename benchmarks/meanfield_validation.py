"""The mean-field limit (hetlb.theory.meanfield) against simulation at large N.

    python benchmarks/meanfield_validation.py table        [--n 16384] [--jobs 1000000] [--out DIR]
    python benchmarks/meanfield_validation.py convergence  [--jobs 2000000] [--out DIR]
    python benchmarks/meanfield_validation.py batch        [--n 4096] [--jobs 1000000] [--out DIR]

``table``: every policy with a simulated mean-field limit, on three fleets (two classes 1 and 0.25
at 50/50; four classes 1, 1/2, 1/4, 1/8 in equal numbers; U[0.5, 1.5] discretised into 8 equal
classes at the midpoints) and loads 0.5, 0.7, 0.9, 0.95, simulated at N servers (complete graph,
infinite buffers, 5 replications, a warm-up of the mean-field ODE's settling time,
mean_field_settling_time; a point whose warm-up would exceed 20 million arrivals is not simulated and says so). Prints and writes (meanfield-table.csv, .md) the limit, the simulated mean with its 95%
interval, the relative gap, and whether the gap is within max(1%, the interval).

``batch``: servers that serve several jobs at once: two classes of inference engines (speeds 1
and 0.5 at 50/50, concurrency 4 and 8, saturating:alpha=0.2) at loads 0.75 to 0.95 for
the policies of BATCH_POLICIES, at N = 4096 by default; agrees when the gap is within
max(2%, the interval). Writes meanfield-batch.csv and .md.

``convergence``: one fleet and load per policy, N = 2^6 ... 2^14; the same number of measured jobs
at every N (split over 5 replications); fits |gap| = c N^-gamma and |gap| = c exp(-N/n0) on the N
where the gap exceeds twice its interval, writes meanfield-convergence.md and draws
meanfield-convergence.png (gap against N, with 1/N and 1/sqrt(N) guides); ``refit`` redoes the fits
and the figure from meanfield-convergence.csv. CPU heavy: about 20 minutes (table) and 20
(convergence) on one free core.
"""

from __future__ import annotations

import argparse
import csv
import math
import time
from pathlib import Path

import numpy as np

import hetlb
from hetlb.progress import working
from hetlb.theory.meanfield import MEANFIELD_POLICIES, mean_field_arrays, mean_field_settling_time
from hetlb.theory.meanfield.classes import fleet as class_fleet

FLEETS = {
    "two classes 1, 0.25": ([1.0, 0.25], [0.5, 0.5]),
    "four classes 1..1/8": ([1.0, 0.5, 0.25, 0.125], [0.25] * 4),
    "U[0.5,1.5] in 8": (list(0.5 + (np.arange(8) + 0.5) / 8), [0.125] * 8),
}
LOADS = (0.5, 0.7, 0.9, 0.95)
BATCH_FLEETS = {
    "engines 1x4, 0.5x8, saturating 0.2": (
        [1.0, 0.5],
        [0.5, 0.5],
        {"concurrency": [4, 8], "rate_curve": "saturating:alpha=0.2"},
    ),
}
"""Fleets of servers of several slots: (speeds, fractions, the classes' concurrency and rate curve)."""
BATCH_LOADS = (0.75, 0.8, 0.85, 0.9, 0.95)
BATCH_POLICIES = ("jiq", "jfiq", "sed", "pod", "jsq", "jfsq", "weighted-random")
SIMULATED = [policy for policy in MEANFIELD_POLICIES if policy != "jiq-df-ds"]
MAX_WARMUP_ARRIVALS = 20_000_000
CONVERGENCE_CASES = {policy: ("U[0.5,1.5] in 8", 0.95) for policy in SIMULATED}
CONVERGENCE_CASES.update(
    {
        "sed": ("two classes 1, 0.25", 0.9),
        "pod": ("U[0.5,1.5] in 8", 0.9),
        "jsq-df-ds": ("two classes 1, 0.25", 0.7),
        "weighted-random": ("two classes 1, 0.25", 0.7),  # exact at every N: a control
        "random": ("U[0.5,1.5] in 8", 0.5),  # exact at every N: a control
    }
)


def simulate_against_limit(
    fleet: str, load: float, policy: str, n_servers: int, jobs: int, replications: int, seed: int
):
    speeds, fractions, servers = BATCH_FLEETS[fleet] if fleet in BATCH_FLEETS else (*FLEETS[fleet], {})
    limit = mean_field_arrays(speeds, fractions, load=load, policy=policy, **servers)
    if not limit.stable:
        return limit, None
    system = hetlb.System.from_speeds(**class_fleet(limit.classes, n_servers), load=load)
    settling = mean_field_settling_time(limit)
    if settling * system.total_arrival_rate > MAX_WARMUP_ARRIVALS:
        return limit, settling
    return limit, hetlb.simulate(system, policy, jobs=jobs, warmup=settling, replications=replications, seed=seed)


def gap_row(fleet, load, policy, n_servers, limit, result, tolerance: float = 0.01) -> dict:
    row = {"fleet": fleet, "load": load, "policy": policy, "n_servers": n_servers, "limit": limit.mean_response_time}
    if result is None:
        row.update(simulated=math.nan, ci_low=math.nan, ci_high=math.nan, gap=math.nan, agrees="unstable limit")
        return row
    if isinstance(result, float):
        row.update(
            simulated=math.nan,
            ci_low=math.nan,
            ci_high=math.nan,
            gap=math.nan,
            agrees=f"not simulated: warm-up {result:.0f} time units exceeds {MAX_WARMUP_ARRIVALS:.0e} arrivals",
        )
        return row
    mean, (low, high) = result.mean_response_time, result.mean_response_time_ci
    gap = (mean - limit.mean_response_time) / limit.mean_response_time
    half = (high - low) / 2 / limit.mean_response_time
    row.update(
        simulated=mean,
        ci_low=low,
        ci_high=high,
        gap=gap,
        half_width=half,
        agrees="yes" if abs(gap) <= max(tolerance, half) else "no",
        warnings="; ".join(result.warnings),
    )
    return row


def write(rows: list[dict], out: Path, name: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    keys = list(dict.fromkeys(key for row in rows for key in row))
    with open(out / f"{name}.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)


def table(args) -> None:
    rows = []
    started = time.perf_counter()
    if args.what == "batch":
        chosen, loads, policies, tolerance = list(BATCH_FLEETS), BATCH_LOADS, BATCH_POLICIES, 0.02
    else:
        chosen = [list(FLEETS)[int(k) - 1] for k in args.fleets.split(",")] if args.fleets else list(FLEETS)
        loads, policies, tolerance = LOADS, tuple(SIMULATED), 0.01
    for fleet in chosen:
        for load in loads:
            for policy in policies:
                if policy == "jsq-df-ds" and len(FLEETS[fleet][0]) != 2:
                    continue
                if args.policies and policy not in args.policies.split(","):
                    continue
                limit, result = simulate_against_limit(fleet, load, policy, args.n, args.jobs // 5, 5, args.seed)
                row = gap_row(fleet, load, policy, args.n, limit, result, tolerance)
                rows.append(row)
                print(
                    f"{fleet:22} {load:4} {policy:16} limit {row['limit']:9.5g} sim {row['simulated']:9.5g} "
                    f"gap {row['gap']:+8.3%} +-{row.get('half_width', math.nan):6.3%} {row['agrees']} "
                    f"[{time.perf_counter() - started:6.0f} s]",
                    flush=True,
                )
    write(rows, args.out, args.name)
    with open(args.out / f"{args.name}.md", "w") as handle:
        handle.write(
            "| fleet | load | policy | limit | simulated (95% CI) | gap | agrees |\n|---|---|---|---|---|---|---|\n"
        )
        for row in rows:
            simulated = (
                "-"
                if math.isnan(row["simulated"])
                else f"{row['simulated']:.4f} ({row['ci_low']:.4f}, {row['ci_high']:.4f})"
            )
            gap = "-" if math.isnan(row["gap"]) else f"{row['gap']:+.2%}"
            handle.write(
                f"| {row['fleet']} | {row['load']} | {row['policy']} | {row['limit']:.4f} | {simulated} | {gap} | {row['agrees']} |\n"
            )


def convergence(args) -> None:
    rows = []
    sizes = [2**k for k in range(6, 15)]
    for policy, (fleet, load) in CONVERGENCE_CASES.items():
        if args.policies and policy not in args.policies.split(","):
            continue
        for n_servers in sizes:
            replications = 5
            limit, result = simulate_against_limit(
                fleet, load, policy, n_servers, args.jobs // replications, replications, args.seed
            )
            rows.append(gap_row(fleet, load, policy, n_servers, limit, result))
            print(
                f"{policy:16} N={n_servers:6} gap {rows[-1]['gap']:+.4%} +-{rows[-1].get('half_width', math.nan):.4%}",
                flush=True,
            )
    write(rows, args.out, args.name)
    report_convergence(rows, args.out)


def report_convergence(rows: list[dict], out: Path) -> None:
    """Fit, per policy, |gap| = c N^-gamma and |gap| = c exp(-N / n0) on the sizes whose gap
    exceeds twice its interval; write meanfield-convergence.md and .png."""
    lines = [
        "| policy | fleet | load | sizes with a significant gap | gamma of c N^-gamma | n0 of c exp(-N/n0) | better fit |",
        "|---|---|---|---|---|---|---|",
    ]
    for policy, (fleet, load) in CONVERGENCE_CASES.items():
        mine = [row for row in rows if row["policy"] == policy and not math.isnan(float(row["gap"]))]
        usable = [row for row in mine if abs(float(row["gap"])) > 2 * float(row["half_width"])]
        gamma = n0 = math.nan
        better = "-"
        if len(usable) >= 3:
            n = np.array([float(row["n_servers"]) for row in usable])
            log_gap = np.log([abs(float(row["gap"])) for row in usable])
            power, power_residual = np.polyfit(np.log(n), log_gap, 1, full=True)[:2]
            exponential, exponential_residual = np.polyfit(n, log_gap, 1, full=True)[:2]
            gamma, n0 = -power[0], -1.0 / exponential[0]
            better = "power" if float(np.sum(power_residual)) < float(np.sum(exponential_residual)) else "exponential"
        sizes = ", ".join(str(int(row["n_servers"])) for row in usable) or "none"
        lines.append(f"| {policy} | {fleet} | {load} | {sizes} | {gamma:.2f} | {n0:.0f} | {better} |")
        print(lines[-1], flush=True)
    (out / "meanfield-convergence.md").write_text("\n".join(lines) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 5))
    for policy in CONVERGENCE_CASES:
        mine = [row for row in rows if row["policy"] == policy and not math.isnan(float(row["gap"]))]
        if mine:
            axis.errorbar(
                [float(row["n_servers"]) for row in mine],
                [max(abs(float(row["gap"])), 1e-5) for row in mine],
                yerr=[float(row["half_width"]) for row in mine],
                marker="o",
                markersize=3,
                capsize=2,
                label=policy,
            )
    n = np.array([2.0**k for k in range(6, 15)])
    axis.plot(n, 1.0 / n, "k--", label="1/N")
    axis.plot(n, 0.1 / np.sqrt(n), "k:", label="0.1/sqrt(N)")
    axis.set_xscale("log", base=2)
    axis.set_yscale("log")
    axis.set_xlabel("servers N")
    axis.set_ylabel("|simulated - limit| / limit (mean response time)")
    axis.set_title("Mean-field limit against simulation (bars: 95% CI)")
    axis.legend(fontsize=7, ncol=2)
    figure.tight_layout()
    figure.savefig(out / "meanfield-convergence.png", dpi=120)


def refit(args) -> None:
    with open(args.out / f"{args.name}.csv") as handle:
        report_convergence(list(csv.DictReader(handle)), args.out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["table", "batch", "convergence", "refit"])
    parser.add_argument("--n", type=int, help="servers for the table (default 16384) or batch (4096)")
    parser.add_argument("--jobs", type=int, default=None, help="measured jobs per point")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--policies", help="comma list: only these policies")
    parser.add_argument("--fleets", help="comma list of fleet numbers 1, 2, 3 (table; default all)")
    parser.add_argument("--name", help="file name of the CSV (default meanfield-table or meanfield-convergence)")
    parser.add_argument("--out", type=Path, default=Path("out/benchmarks"))  # benchmarks/results: the docs' figures
    args = parser.parse_args()
    args.name = args.name or {"table": "meanfield-table", "batch": "meanfield-batch"}.get(
        args.what, "meanfield-convergence"
    )
    args.n = args.n or (4096 if args.what == "batch" else 2**14)
    if args.what == "refit":
        refit(args)
    elif args.what in ("table", "batch"):
        args.jobs = args.jobs or 1_000_000
        table(args)
    else:
        args.jobs = args.jobs or 2_000_000
        convergence(args)


if __name__ == "__main__":
    with working("benchmarks/meanfield_validation.py ", live=False):
        main()
