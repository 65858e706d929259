"""The demo: six policies on 100 servers of four speeds, mean response time against load.

The speed mix is that of Fig. 3 in paper 000 (speeds 1, 1/2, 1/4, 1/8 in equal numbers) on the
complete graph with infinite buffers. Two independent values frame the table: the lower bound
C*/lambda of Proposition 1 in 000, and the exact mean response time of weighted-random routing,
which splits the system into independent M/M/1 queues all at load rho, N / ((1 - rho) sum(mu)).
The slowest servers relax on a time scale of 1/(mu (1 - sqrt(rho))^2), about 3,000 time units at
rho = 0.9, hence the long warm-up. Speed-blind power-of-2 is left out: with these speeds it is
unstable from load 0.8 on (the two slow classes receive a quarter of the jobs whenever their
queues are long, more than their capacity).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from hetlb.model import System
from hetlb.plots import plot_metric
from hetlb.policies import make_policy
from hetlb.simulation.simulate import simulate
from hetlb.theory import speed_lower_bound

SPEEDS = np.repeat([1.0, 0.5, 0.25, 0.125], 25)
LOADS = (0.3, 0.5, 0.7, 0.8, 0.9)
POLICIES: tuple[tuple[str, dict], ...] = (
    ("weighted-random", {}),
    ("jiq", {}),
    ("jfiq", {}),
    ("jsq", {}),
    ("sed", {}),
    ("jfsq", {}),
)
WARMUP = 3000.0


def run_demo(out: Path, jobs: int = 100_000, replications: int = 3, report=None, echo: bool = True) -> list[dict]:
    """Simulate every policy at every load; print a table (unless ``echo`` is false), write
    demo.csv and demo.png in ``out``. ``report(done, total, label, result)`` is called after each
    simulation. demo.csv names its columns as a sweep's summary table does (``policy.id``,
    ``system.load``, ``mean_response_time_ci_low``, ``speed_lower_bound``, ...), plus
    ``weighted_random_exact``."""
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for load in LOADS:
        system = System.from_speeds(SPEEDS, load=load)
        bound = speed_lower_bound(system).lower_bound
        for policy_id, params in POLICIES:
            policy = make_policy(policy_id, **params)
            result = simulate(system, policy, jobs=jobs, warmup=WARMUP, replications=replications, seed=2024)
            low, high = result.mean_response_time_ci
            rows.append(
                {
                    "policy.id": policy_id,
                    "system.load": load,
                    "replications": result.replications,
                    "mean_response_time": result.mean_response_time,
                    "mean_response_time_ci_low": low,
                    "mean_response_time_ci_high": high,
                    "p_wait": result.p_wait,
                    "response_time_p99": result.response_time_p99,
                    "speed_lower_bound": bound,
                    "weighted_random_exact": system.n_servers / ((1 - load) * system.capacity),
                    "events_per_second": result.events_per_second,
                }
            )
            if report is not None:
                report(len(rows), len(LOADS) * len(POLICIES), f"{policy_id} at load {load:g}", result)
    write_csv(rows, out / "demo.csv")
    if echo:
        print(format_table(rows))
    series = {}
    for policy_id, _ in POLICIES:
        mine = [r for r in rows if r["policy.id"] == policy_id]
        series[policy_id] = tuple(
            np.array([r[k] for r in mine])
            for k in ("mean_response_time", "mean_response_time_ci_low", "mean_response_time_ci_high")
        )
    plot_metric(
        LOADS,
        series,
        out / "demo.png",
        xlabel="system.load",
        ylabel="mean_response_time",
        bound=[r["speed_lower_bound"] for r in rows if r["policy.id"] == POLICIES[0][0]],
        bound_label=r"lower bound $C^* / \lambda$ (000, Prop. 1)",
        title=f"100 servers: 25 each of speed 1, 1/2, 1/4, 1/8 ({replications} replications per point)",
        log_y=True,
        legend_title="policy.id",
    )
    if echo:
        print(f"\nwrote {out / 'demo.csv'} and {out / 'demo.png'}")
    return rows


def write_csv(rows: list[dict], path: Path) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def format_table(rows: list[dict]) -> str:
    lines = [
        "mean response time (95% CI half-width) on 100 servers, speeds 25 x {1, 1/2, 1/4, 1/8}",
        f"{'policy':<16}" + "".join(f"{'load ' + format(load, 'g'):>17}" for load in LOADS),
    ]
    for policy_id, _ in POLICIES:
        cells = []
        for load in LOADS:
            r = next(r for r in rows if r["policy.id"] == policy_id and r["system.load"] == load)
            half_width = (r["mean_response_time_ci_high"] - r["mean_response_time_ci_low"]) / 2
            cells.append(f"{r['mean_response_time']:>9.3f} ({half_width:.3f})")
        lines.append(f"{policy_id:<16}" + "".join(f"{c:>17}" for c in cells))
    for label, key in (("C*/lambda", "speed_lower_bound"), ("w-random exact", "weighted_random_exact")):
        values = [next(r[key] for r in rows if r["system.load"] == load) for load in LOADS]
        lines.append(f"{label:<16}" + "".join(f"{v:>17.3f}" for v in values))
    return "\n".join(lines)
