"""Paper 000 revisited: the port degree each graph family needs to stay within 5% and 1% of C*/lambda
under jfsq, against the degree of the Fig. 3 formula, on the fleet of Fig. 3.

    python benchmarks/placement_table.py [--sizes 256,512,...,16384] [--loads 0.5,0.7,0.9]
        [--tolerances 5,1] [--budget 900] [--store placement.sqlite] [--out DIR]

The fleet of Fig. 3 of 000: four speed classes 1, 1/2, 1/4, 1/8 in equal numbers, L = N^1.25 job
types of equal rates, infinite buffers. For every (load, N, tolerance) it runs hetlb.place
(families fig3, typed, theorem3; 100,000 jobs and 3 replications per candidate; common random
numbers) with a time budget per point, and writes placement-table.csv, placement-table.md and
placement-degrees.png (least passing mean port degree against N, one panel per load, the Fig. 3
formula's degree as a line). The store makes the script resumable: run it again and the finished
candidates are read back. A point whose search ran out of its budget is marked so; at small N
even the complete graph may miss the tolerance (then no graph can meet it: "infeasible").
"""

from __future__ import annotations

import argparse
import csv
import math
import time
from pathlib import Path

import numpy as np

from hetlb.experiments.place import place
from hetlb.experiments.store import ResultStore
from hetlb.graphs.constructions import fig3_edge_probability

FAMILIES = ("fig3", "typed", "theorem3")


def fleet(n_servers: int, load: float) -> tuple[np.ndarray, np.ndarray]:
    speeds = np.repeat([1.0, 0.5, 0.25, 0.125], n_servers // 4)
    n_ports = round(n_servers**1.25)
    return speeds, np.full(n_ports, load * speeds.sum() / n_ports)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="256,512,1024,2048,4096,8192,16384")
    parser.add_argument("--loads", default="0.5,0.7,0.9")
    parser.add_argument("--tolerances", default="5,1", help="percent")
    parser.add_argument("--budget", type=float, default=900.0, help="seconds per (load, N, tolerance)")
    parser.add_argument("--store", default="benchmarks/results/placement.sqlite")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    with ResultStore(args.store) as store:
        for load in (float(x) for x in args.loads.split(",")):
            for n_servers in (int(x) for x in args.sizes.split(",")):
                for tolerance in (float(x) for x in args.tolerances.split(",")):
                    speeds, rates = fleet(n_servers, load)
                    started = time.perf_counter()
                    result = place(
                        speeds,
                        rates,
                        tolerance=tolerance / 100,
                        families=FAMILIES,
                        time_budget=args.budget,
                        store=store,
                    )
                    fig3_degree = n_servers * fig3_edge_probability(n_servers, load)
                    row = {
                        "load": load,
                        "n_servers": n_servers,
                        "n_ports": rates.size,
                        "tolerance_pct": tolerance,
                        "fig3_formula_degree": fig3_degree,
                        "search_complete": result.complete,
                        "seconds": round(time.perf_counter() - started, 1),
                        "infeasible": any("complete graph itself" in note for note in result.notes),
                    }
                    for family in FAMILIES:
                        best = result.best_by_family.get(family)
                        row[f"{family}_degree"] = best.mean_degree if best else math.nan
                        row[f"{family}_edges"] = best.edges if best else math.nan
                    row["verified"] = result.verification["verdict"] if result.verification else "none"
                    rows.append(row)
                    print(row, flush=True)
                    write(rows, args.out)
    figure(rows, args.out)


def write(rows: list[dict], out: Path) -> None:
    with open(out / "placement-table.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    with open(out / "placement-table.md", "w") as handle:
        handle.write(
            "| load | N | L | tolerance | Fig. 3 degree | fig3 | typed | theorem3 | verified | note |\n"
            "|---|---|---|---|---|---|---|---|---|---|\n"
        )
        for row in rows:
            cells = [
                "-" if math.isnan(row[f"{family}_degree"]) else f"{row[f'{family}_degree']:.1f}" for family in FAMILIES
            ]
            note = "infeasible (complete graph misses it)" if row["infeasible"] else ""
            note += "" if row["search_complete"] else " budget spent"
            handle.write(
                f"| {row['load']} | {row['n_servers']} | {row['n_ports']} | {row['tolerance_pct']:g}% | "
                f"{row['fig3_formula_degree']:.1f} | {' | '.join(cells)} | {row['verified']} | {note.strip()} |\n"
            )


def figure(rows: list[dict], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    loads = sorted({row["load"] for row in rows})
    fig, axes = plt.subplots(1, len(loads), figsize=(4.5 * len(loads), 4), squeeze=False)
    for axis, load in zip(axes[0], loads):
        mine = [row for row in rows if row["load"] == load]
        sizes = sorted({row["n_servers"] for row in mine})
        axis.plot(
            sizes,
            [next(r["fig3_formula_degree"] for r in mine if r["n_servers"] == n) for n in sizes],
            "k--",
            label="Fig. 3 formula",
        )
        for tolerance, marker in ((5.0, "o"), (1.0, "s")):
            for family in FAMILIES:
                points = [(r["n_servers"], r[f"{family}_degree"]) for r in mine if r["tolerance_pct"] == tolerance]
                points = [(n, d) for n, d in points if not math.isnan(d)]
                if points:
                    axis.plot(*zip(*points), marker=marker, label=f"{family} {tolerance:g}%")
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.set_xlabel("servers N")
        axis.set_ylabel("mean port degree needed")
        axis.set_title(f"load {load}")
        axis.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "placement-degrees.png", dpi=120)


if __name__ == "__main__":
    main()
