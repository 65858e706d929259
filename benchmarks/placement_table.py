"""Paper 000 revisited: the port degree each graph family needs to stay within 5% and 1% of C*/lambda
under jfsq, against the degree of the Fig. 3 formula, on the fleet of Fig. 3.

    python benchmarks/placement_table.py [--sizes 256,512,...,16384] [--loads 0.5,0.7,0.9]
        [--tolerances 5,1] [--budget 900] [--jobs 100000] [--replications 3] [--max-edges 150000000]
        [--store placement.sqlite] [--out DIR]

The fleet of Fig. 3 of 000: four speed classes 1, 1/2, 1/4, 1/8 in equal numbers, L = N^1.25 job
types of equal rates, infinite buffers. For every (load, N, tolerance) it runs hetlb.place
(families fig3, typed, theorem3; by default 100,000 jobs and 3 replications per candidate, which
--jobs and --replications set for all tolerances, "3", or per tolerance, "5:3,1:12"; common
random numbers; graphs of more than --max-edges edges are not built) with a time budget per
point, and writes placement-table.csv, placement-table.md and placement-degrees.png (least passing
mean port degree against N, one panel per load, the Fig. 3 formula's degree as a line). The rows
it computes replace those of the same (load, N, tolerance) in an existing placement-table.csv of
--out and the others are kept, so points run separately make one table. The store makes the
script resumable: run it again and the finished candidates are read back (a row whose candidates
were all read back keeps the seconds of the run that simulated them). A point whose search ran out
of its budget is marked so; at small N even the complete graph may miss the tolerance: its interval
above it is "infeasible" (no graph can meet it), across it "complete graph undecided".
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
from hetlb.progress import working

FAMILIES = ("fig3", "typed", "theorem3")


def fleet(n_servers: int, load: float) -> tuple[np.ndarray, np.ndarray]:
    speeds = np.repeat([1.0, 0.5, 0.25, 0.125], n_servers // 4)
    n_ports = round(n_servers**1.25)
    return speeds, np.full(n_ports, load * speeds.sum() / n_ports)


def per_tolerance(text: str, name: str) -> dict:
    """ "3" (every tolerance) or "5:3,1:12" (per tolerance in percent) as {tolerance: int}, with
    None for the default of every tolerance not listed."""
    if ":" not in text:
        return {None: int(text)}
    values: dict = {}
    for part in text.split(","):
        tolerance, _, value = part.partition(":")
        if not value:
            raise SystemExit(f"--{name}: give N or TOL:N,TOL:N, got {text!r}")
        values[float(tolerance)] = int(value)
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="256,512,1024,2048,4096,8192,16384")
    parser.add_argument("--loads", default="0.5,0.7,0.9")
    parser.add_argument("--tolerances", default="5,1", help="percent")
    parser.add_argument("--budget", type=float, default=900.0, help="seconds per (load, N, tolerance)")
    parser.add_argument("--jobs", default="100000", help='per candidate run: "N" or per tolerance "5:N,1:N"')
    parser.add_argument("--replications", default="3", help='first round per candidate: "N" or "5:N,1:N"')
    parser.add_argument("--max-edges", type=int, default=150_000_000, help="largest graph built")
    parser.add_argument("--store", default="out/benchmarks/placement.sqlite")
    parser.add_argument("--out", type=Path, default=Path("out/benchmarks"))  # benchmarks/results: the docs' figures
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    jobs = per_tolerance(args.jobs, "jobs")
    replications = per_tolerance(args.replications, "replications")
    rows = read(args.out)
    with ResultStore(args.store) as store:
        for load in (float(x) for x in args.loads.split(",")):
            for n_servers in (int(x) for x in args.sizes.split(",")):
                for tolerance in (float(x) for x in args.tolerances.split(",")):
                    speeds, rates = fleet(n_servers, load)
                    n_jobs = jobs.get(tolerance, jobs.get(None, 100_000))
                    n_replications = replications.get(tolerance, replications.get(None, 3))
                    started = time.perf_counter()
                    result = place(
                        speeds,
                        rates,
                        tolerance=tolerance / 100,
                        families=FAMILIES,
                        time_budget=args.budget,
                        store=store,
                        jobs=n_jobs,
                        replications=n_replications,
                        max_edges=args.max_edges,
                    )
                    fig3_degree = n_servers * fig3_edge_probability(n_servers, load)
                    full = next(c for c in result.candidates if c.family == "complete")
                    row = {
                        "load": load,
                        "n_servers": n_servers,
                        "n_ports": rates.size,
                        "tolerance_pct": tolerance,
                        "jobs": n_jobs,
                        "replications": n_replications,
                        "fig3_formula_degree": fig3_degree,
                        "search_complete": result.complete,
                        "seconds": round(time.perf_counter() - started, 1),
                        "infeasible": full.verdict == "fail",
                    }
                    for family in FAMILIES:
                        best = result.best_by_family.get(family)
                        row[f"{family}_degree"] = best.mean_degree if best else math.nan
                        row[f"{family}_edges"] = best.edges if best else math.nan
                    row["verified"] = result.verification["verdict"] if result.verification else "none"
                    row["complete_graph_ratio"] = full.ratio
                    row["complete_graph_ci_low"], row["complete_graph_ci_high"] = full.ratio_ci
                    row["complete_graph_verdict"] = full.verdict
                    row["notes"] = " / ".join(result.notes)
                    earlier = [r for r in rows if point(r) == point(row)]
                    if earlier and all(c.cached for c in result.candidates):
                        row["seconds"] = earlier[0]["seconds"]  # read back: the time of the run that simulated it
                    rows = [r for r in rows if point(r) != point(row)] + [row]
                    print(row, flush=True)
                    write(rows, args.out)
    figure(rows, args.out)


def point(row: dict) -> tuple:
    return (row["load"], row["n_servers"], row["tolerance_pct"])


def read(out: Path) -> list[dict]:
    """The rows of an existing placement-table.csv (none if absent), typed as written."""
    path = out / "placement-table.csv"
    if not path.is_file():
        return []
    rows = []
    with open(path, newline="") as handle:
        for raw in csv.DictReader(handle):
            row: dict = {}
            for key, value in raw.items():
                if key in ("search_complete", "infeasible"):
                    row[key] = value == "True"
                elif key in ("verified", "notes", "complete_graph_verdict"):
                    row[key] = value
                elif key in ("n_servers", "n_ports", "jobs", "replications"):
                    row[key] = int(value)
                else:
                    row[key] = float(value) if value not in ("", None) else math.nan
            row.setdefault("jobs", 100_000)  # the tables written before these columns used the defaults
            row.setdefault("replications", 3)
            for key in ("complete_graph_ratio", "complete_graph_ci_low", "complete_graph_ci_high"):
                row.setdefault(key, math.nan)
            row.setdefault("complete_graph_verdict", "fail" if row["infeasible"] else "")
            row.setdefault("notes", "")
            rows.append(row)
    return rows


FIELDS = (
    "load n_servers n_ports tolerance_pct jobs replications fig3_formula_degree search_complete seconds infeasible "
    "fig3_degree fig3_edges typed_degree typed_edges theorem3_degree theorem3_edges verified complete_graph_ratio "
    "complete_graph_ci_low complete_graph_ci_high complete_graph_verdict notes"
).split()


def write(rows: list[dict], out: Path) -> None:
    rows.sort(key=lambda r: (-r["load"], r["n_servers"], -r["tolerance_pct"]))
    with open(out / "placement-table.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    with open(out / "placement-table.md", "w") as handle:
        handle.write(
            "| load | N | L | tolerance | jobs x reps | Fig. 3 degree | fig3 | typed | theorem3 | verified | "
            "complete graph | note |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|\n"
        )
        for row in rows:
            cells = [
                "-" if math.isnan(row[f"{family}_degree"]) else f"{row[f'{family}_degree']:.1f}" for family in FAMILIES
            ]
            note = "infeasible (complete graph misses it)" if row["infeasible"] else ""
            if row["complete_graph_verdict"] == "undecided":
                note = "complete graph undecided"
            note += "" if row["search_complete"] else " budget spent"
            full = ""
            if not math.isnan(row["complete_graph_ratio"]):
                low, high = row["complete_graph_ci_low"] - 1, row["complete_graph_ci_high"] - 1
                full = f"{row['complete_graph_ratio'] - 1:+.2%} ({low:+.2%}, {high:+.2%})"
            handle.write(
                f"| {row['load']} | {row['n_servers']} | {row['n_ports']} | {row['tolerance_pct']:g}% | "
                f"{row['jobs'] // 1000}k x {row['replications']} | {row['fig3_formula_degree']:.1f} | "
                f"{' | '.join(cells)} | {row['verified']} | {full} | {note.strip()} |\n"
            )


def figure(rows: list[dict], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    loads = sorted({row["load"] for row in rows})
    fig, axes = plt.subplots(1, len(loads), figsize=(4.5 * len(loads), 4.4), squeeze=False)
    for axis, load in zip(axes[0], loads):
        mine = [row for row in rows if row["load"] == load]
        sizes = sorted({row["n_servers"] for row in mine})
        axis.plot(
            sizes,
            [next(r["fig3_formula_degree"] for r in mine if r["n_servers"] == n) for n in sizes],
            "k--",
            label="Fig. 3 formula",
        )
        for tolerance, style in ((5.0, "-o"), (1.0, ":s")):
            for family, color in zip(FAMILIES, ("C0", "C1", "C2")):
                points = [(r["n_servers"], r[f"{family}_degree"]) for r in mine if r["tolerance_pct"] == tolerance]
                points = [(n, d) for n, d in points if not math.isnan(d)]
                if points:
                    axis.plot(*zip(*points), style, color=color, label=f"{family} {tolerance:g}%")
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.set_xlabel("servers N")
        axis.set_ylabel("mean port degree needed")
        axis.set_title(f"load {load}")
    handles, labels = max((axis.get_legend_handles_labels() for axis in axes[0]), key=lambda pair: len(pair[1]))
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(out / "placement-degrees.png", dpi=120)


if __name__ == "__main__":
    with working("benchmarks/placement_table.py ", live=False):
        main()
