"""Reproductions of paper 002 (Büke, Mukhopadhyay, Tekin): Figs. 4.1 and 4.2 and the scaling in n
(002 section 4; the number of speed bins of Fig. 4.1, the grid of c, n and the replications of
Fig. 4.2 were lost from its text and are options).

Every system has n servers with speeds drawn i.i.d. from U[0.7, 1.3] (one sample per n, shared by
the policies), arrival rate n lambda = sum(mu_k) - c sqrt(n), infinite buffers, an empty start,
horizon T and warm-up T_wu; the measures are exact time averages over [T_wu, T]
(hetlb.stats.halfin_whitt). Policies are compared with common random numbers: the same speeds,
arrival epochs and job sizes.

- ``buke-fig41``: eta (the share of idleness) and xi_2 (servers with a queue) by speed bin for
  jfsq, jsq-fiq, jssq, jsq (RR) and jsq-lisf at c = 1, n = 500, with the TB benchmark; also the
  CCDFs of X_{+1} and X_{+2} (claim C19).
- ``buke-fig42``: paired differences JFSQ - RR of E|X_1|, E X_2, E X_3, E X_{+1} and E X_{+2}
  across c.
- ``buke-scaling``: E|X_1|, E X_2, E X_{+1} as n grows at c = 1, against the diffusion limits of
  hetlb.theory.diffusion; with the coupled sandwich check (C20), the stability boundary (C21) and
  the idle servers' mean-reversion rates (C22).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from hetlb.experiments.reproduce import (
    Claim,
    Outcome,
    Reproduction,
    claims_of,
    decide,
    intervals_note,
    plain_names,
    plot_reproduction,
    register,
    row,
)
from hetlb.experiments.spec import SweepSpec
from hetlb.experiments.sweep import CCDF_GRID, paired_differences
from hetlb.model.speed_distributions import draw_speeds
from hetlb.model.system import arrival_rate_for_excess_capacity
from hetlb.simulation.bounding import check_sandwich_arrays
from hetlb.stats import t_interval
from hetlb.theory.diffusion import continuous_speeds, policy_diffusion, stationary_diffusion

FIG41_POLICIES = ["jfsq", "jsq-fiq", "jssq", "jsq", "jsq-lisf"]
LABELS = {"jfsq": "JFSQ", "jsq-fiq": "JFIQ (jsq-fiq)", "jssq": "JSSQ", "jsq": "RR (jsq)", "jsq-lisf": "LISF"}
MEASURE_LABELS = {
    "x1": r"$\mathbb{E}|X_1|$",
    "x2": r"$\mathbb{E}[X_2]$",
    "x3": r"$\mathbb{E}[X_3]$",
    "x_plus1": r"$\mathbb{E}[X_{+1}]$",
    "x_plus2": r"$\mathbb{E}[X_{+2}]$",
}

CLAIMS = {
    "C15a": "eta of jfsq and jsq-fiq in the slowest servers, the two alike (Fig. 4.1)",
    "C15b": "eta of jssq in the fastest servers (Fig. 4.1)",
    "C15c": "eta of RR and LISF follows the TB profile (Fig. 4.1)",
    "C16": "where queues form: jfsq at the fastest, jssq at the slowest servers (Fig. 4.1)",
    "C17a": "JFSQ - RR of E|X_1| positive, growing with c (Fig. 4.2)",
    "C17b": "JFSQ - RR of E X_2 and E X_{+2} negative, shrinking with c (Fig. 4.2)",
    "C17c": "JFSQ - RR of E X_{+1} negative, not monotone in c (Fig. 4.2)",
    "C17d": "JFSQ - RR of E X_3 at most 0 (Fig. 4.2)",
    "C18a": "E|X_1| and E X_2 stay O(1) as n grows",
    "C18b": "E X_3 falls like n^-1/2",
    "C19": "the CCDFs of X_{+1} and X_{+2} smallest under jfsq",
    "C20": "sample-path bounds JSQ-FSL <= pi <= JSQ-SSL (Prop. 5.1)",
    "C21": "stable iff c > 0",
    "C22": "the idle servers' mean-reversion rates (Cor. 4.4, 4.5)",
    "diffusion": "the simulated stationary measures approach those of the diffusion limits (002 section 4)",
}
"""The claims of 002 that these reproductions check ("diffusion" is hetlb's own check of its limits)."""


COMMON_OPTIONS = {
    "low": (0.7, 0.7, "speeds U[low, high] (002 section 4)"),
    "high": (1.3, 1.3, "speeds U[low, high]"),
    "horizon": (3000.0, 3000.0, "T, time units (002 section 4)"),
    "warmup": (300.0, 300.0, "T_wu, time units (002 section 4)"),
    "speed_seed": (1, 1, "seed of the speed sample"),
    "seed": (2002, 2002, "root seed of the runs"),
}


def base_system(o: dict, n_servers: int, excess_capacity: float) -> dict:
    return {
        "n_servers": n_servers,
        "excess_capacity": excess_capacity,
        "speed_distribution": {"kind": "uniform", "low": o["low"], "high": o["high"], "seed": o["speed_seed"]},
    }


def run_sweep(context, name: str, base: dict, axes: dict):
    """The sweep's result, points with common random numbers across policies."""
    return context.sweep(
        SweepSpec(
            base=base,
            axes=axes,
            replications=context.options["replications"],
            seed=context.options["seed"],
            common_random_numbers=True,
            name=name,
        )
    )


# ---------------------------------------------------------------------------------------------
# Fig. 4.1


def run_fig41(context) -> Outcome:
    o = context.options
    bins = o["bins"]
    base = {
        "system": base_system(o, o["n_servers"], o["excess_capacity"]),
        "run": {"horizon": o["horizon"], "warmup": o["warmup"], "speed_bins": bins, "state_distribution": True},
    }
    result = run_sweep(context, "buke-fig41", base, {"policy.id": FIG41_POLICIES})
    table, runs = plain_names(result.summary), plain_names(result.runs)
    edges = np.linspace(o["low"], o["high"], bins + 1)
    centres = (edges[:-1] + edges[1:]) / 2
    profile = {
        p: {
            name: row(table, policy=p)[[f"{name}_bin{i + 1}" for i in range(bins)]].to_numpy(dtype=float)
            for name in ("eta", "xi2", "tb_eta")
        }
        for p in FIG41_POLICIES
    }
    tb = profile["jsq"]["tb_eta"]
    series = {name: {LABELS[p]: bin_intervals(runs, p, name, bins) for p in FIG41_POLICIES} for name in ("eta", "xi2")}
    plot_reproduction(
        [
            dict(
                bars=True,
                x=centres,
                series=series["eta"],
                xlabel="service rate (bin centre; points shifted apart to stay visible)",
                ylabel=r"$\eta$ (share of idleness)",
                bound=tb,
                bound_label=r"TB benchmark ($\mu\,dF$)",
                title=r"(a) fairness measure $\eta$",
            ),
            dict(
                bars=True,
                x=centres,
                series=series["xi2"],
                xlabel="service rate (bin centre; points shifted apart to stay visible)",
                ylabel=r"$\xi_2$ ($n^{-1/2}$ servers with $\geq 2$ jobs)",
                title=r"(b) occupancy $\xi_2$",
            ),
        ],
        context.out / "buke-fig41.png",
        title=f"002 Fig. 4.1: n = {o['n_servers']}, U[{o['low']}, {o['high']}], c = {o['excess_capacity']}, "
        f"$T = {o['horizon']:g}$, $T_{{wu}} = {o['warmup']:g}$, {bins} bins",
        note=intervals_note(o["replications"], "error bars"),
    )
    eta = {p: profile[p]["eta"] for p in FIG41_POLICIES}
    xi2 = {p: profile[p]["xi2"] for p in FIG41_POLICIES}
    xi2_share = {p: xi2[p] / xi2[p].sum() for p in FIG41_POLICIES}
    claims = [
        decide(
            "C15a",
            "eta of jfsq and jsq-fiq is concentrated in the slowest bin (more than half of the idleness) "
            "and the two profiles nearly coincide (within 0.05 in every bin)",
            {"eta": {p: eta[p].tolist() for p in ("jfsq", "jsq-fiq")}},
            eta["jfsq"][0] > 0.5 and eta["jsq-fiq"][0] > 0.5 and np.abs(eta["jfsq"] - eta["jsq-fiq"]).max() <= 0.05,
        ),
        decide(
            "C15b",
            "eta of jssq is concentrated in the fastest bin (more than half of the idleness)",
            {"eta": eta["jssq"].tolist()},
            eta["jssq"][-1] > 0.5,
        ),
        decide(
            "C15c",
            "eta of RR (jsq) and LISF follows the TB profile mu dF (within 0.02 in every bin) and increases "
            "with the speed",
            {"eta": {p: eta[p].tolist() for p in ("jsq", "jsq-lisf")}, "tb": tb.tolist()},
            all(np.abs(eta[p] - tb).max() <= 0.02 for p in ("jsq", "jsq-lisf"))
            and all(eta[p][-1] > eta[p][0] for p in ("jsq", "jsq-lisf")),
        ),
        decide(
            "C16",
            "xi_2 under jfsq is concentrated in the fastest bin and under jssq in the slowest (more than half "
            "of each); under jsq-fiq, RR and LISF no bin holds more than a third",
            {"xi2": {p: xi2[p].tolist() for p in FIG41_POLICIES}},
            xi2_share["jfsq"][-1] > 0.5
            and xi2_share["jssq"][0] > 0.5
            and all(xi2_share[p].max() <= 1 / 3 for p in ("jsq-fiq", "jsq", "jsq-lisf")),
        ),
        ccdf_claim(table),
    ]
    parameters = dict(o, tb_eta=tb.tolist(), bin_edges=edges.tolist())
    return Outcome(table, claims, parameters, ["bins", "replications"])


def bin_intervals(runs, policy: str, name: str, bins: int) -> tuple:
    """(mean, low, high) by speed bin of a per-bin measure (eta, xi2) over the replications."""
    mine = runs[runs["policy"] == policy]
    stats = [t_interval(mine[f"{name}_bin{i + 1}"].to_numpy()) for i in range(bins)]
    mean = np.array([m for m, _ in stats])
    half = np.nan_to_num(np.array([h for _, h in stats]))
    return mean, mean - half, mean + half


def ccdf_claim(table) -> Claim:
    """C19: the CCDFs of X_{+1} and X_{+2} under jfsq lie below those of every other tie-break."""
    measured, holds = {}, True
    for measure, grid in CCDF_GRID.items():
        columns = [f"ccdf_{measure}_{y:g}" for y in grid]
        jfsq = row(table, policy="jfsq")[columns].to_numpy(dtype=float)
        for policy in FIG41_POLICIES[1:]:
            other = row(table, policy=policy)[columns].to_numpy(dtype=float)
            excess = float((jfsq - other).max())
            measured[f"{measure} jfsq minus {policy}, largest"] = excess
            holds &= excess <= 0.01
    return decide(
        "C19",
        "the CCDFs P(X_{+1} > y) and P(X_{+2} > y) under jfsq lie below those under jsq-fiq, jssq, "
        "RR and LISF at every y of the grid (by at most 0.01 above, for sampling noise)",
        measured,
        holds,
    )


# ---------------------------------------------------------------------------------------------
# Fig. 4.2


def run_fig42(context) -> Outcome:
    o = context.options
    base = {"system": base_system(o, o["n_servers"], 1.0), "run": {"horizon": o["horizon"], "warmup": o["warmup"]}}
    runs = run_sweep(
        context, "buke-fig42", base, {"system.excess_capacity": o["excess_capacities"], "policy.id": ["jfsq", "jsq"]}
    ).runs
    runs = runs.assign(x1=-runs["x1"])  # E|X_1| = -E X_1, as X_1 <= 0
    differences = {
        m: plain_names(paired_differences(runs, m, "policy.id", "jfsq", "jsq"))
        .rename(columns={f"{m}_difference": "difference"})
        .sort_values("excess_capacity")
        for m in MEASURE_LABELS
    }
    cs = differences["x1"]["excess_capacity"].to_numpy()
    table = pd.concat([d.assign(measure=m) for m, d in differences.items()], ignore_index=True)
    plot_reproduction(
        [
            dict(
                x=cs,
                series={
                    MEASURE_LABELS[m]: (d["difference"].to_numpy(), d["ci_low"].to_numpy(), d["ci_high"].to_numpy())
                    for m, d in differences.items()
                    if m in group
                },
                xlabel=r"$c = \varsigma + \nu$",
                ylabel="JFSQ - RR (paired)",
                title=title,
                bound=np.zeros(len(cs)),
                bound_label="0",
            )
            for group, title in ((("x1", "x2", "x3"), "(a) E|X_i|"), (("x_plus1", "x_plus2"), "(b) E X_{+i}"))
        ],
        context.out / "buke-fig42.png",
        title=f"002 Fig. 4.2: n = {o['n_servers']}, {o['replications']} paired replications, T = {o['horizon']:g}",
        note=f"shaded: 95% confidence intervals of the mean paired difference over {o['replications']} "
        "replications (t); each pair of runs shares its random numbers",
    )
    d = {m: differences[m]["difference"].to_numpy() for m in MEASURE_LABELS}
    high = {m: differences[m]["ci_high"].to_numpy() for m in MEASURE_LABELS}
    low = {m: differences[m]["ci_low"].to_numpy() for m in MEASURE_LABELS}
    claims = [
        decide(
            "C17a",
            "E|X_1|: JFSQ - RR > 0 at every c (interval above 0), and larger at the largest c than at the smallest",
            {"difference": d["x1"].tolist(), "c": cs.tolist()},
            bool(np.all(low["x1"] > 0) and d["x1"][-1] > d["x1"][0]),
        ),
        decide(
            "C17b",
            "E X_2 and E X_{+2}: JFSQ - RR < 0 at every c (interval below 0), smaller in magnitude at the "
            "largest c than at the smallest",
            {"difference": {m: d[m].tolist() for m in ("x2", "x_plus2")}, "c": cs.tolist()},
            all(np.all(high[m] < 0) and abs(d[m][-1]) < abs(d[m][0]) for m in ("x2", "x_plus2")),
        ),
        decide(
            "C17c",
            "E X_{+1}: JFSQ - RR < 0 at every c (interval below 0), and not monotone in c",
            {"difference": d["x_plus1"].tolist(), "c": cs.tolist()},
            bool(np.all(high["x_plus1"] < 0)) and len(set(np.sign(np.diff(d["x_plus1"])))) > 1,
        ),
        decide(
            "C17d",
            "E X_3: JFSQ - RR <= 0 at every c (interval reaching below 0; X_3 vanishes as n grows, C18)",
            {"difference": d["x3"].tolist(), "c": cs.tolist()},
            bool(np.all(low["x3"] <= 0)),
        ),
    ]
    return Outcome(table, claims, dict(o), ["excess_capacities", "n_servers", "replications"])


# ---------------------------------------------------------------------------------------------
# Scaling in n


def diffusion_means(o: dict, seed: int) -> dict:
    """Stationary E|X_1|, E X_2 and E X_{+1} of the diffusion limits of jfsq and jsq for U[low, high]."""
    speeds = continuous_speeds(o["low"], o["high"])
    out = {}
    for policy in ("jfsq", "jsq"):
        stationary = stationary_diffusion(policy_diffusion(policy, speeds, o["excess_capacity"]), seed=seed)
        out[policy] = {
            "x1": (-stationary.mean["x1"], stationary.standard_error["x1"]),
            "x2": (stationary.mean["x2"], stationary.standard_error["x2"]),
            "x_plus1": (stationary.mean["x_plus1"], stationary.standard_error["x_plus1"]),
        }
    return out


def run_scaling(context) -> Outcome:
    o = context.options
    sizes = o["n_servers"]
    base = {
        "system": base_system(o, sizes[0], o["excess_capacity"]),
        "run": {"horizon": o["horizon"], "warmup": o["warmup"]},
    }
    result = run_sweep(context, "buke-scaling", base, {"system.n_servers": sizes, "policy.id": ["jfsq", "jsq"]})
    table, runs = plain_names(result.summary), plain_names(result.runs)
    runs = runs.assign(x1=-runs["x1"], q3=runs["x3"] * np.sqrt(runs["n_servers"]))
    stats = {
        (p, n, m): t_interval(runs[(runs["policy"] == p) & (runs["n_servers"] == n)][m])
        for p in ("jfsq", "jsq")
        for n in sizes
        for m in ("x1", "x2", "x_plus1", "q3")
    }
    limits = diffusion_means(o, o["seed"])
    panels = []
    for measure in ("x1", "x2", "x_plus1"):
        series = {
            LABELS[p]: tuple(
                np.array([f(stats[p, n, measure]) for n in sizes])
                for f in (lambda s: s[0], lambda s: s[0] - s[1], lambda s: s[0] + s[1])
            )
            for p in ("jfsq", "jsq")
        }
        for p in ("jfsq", "jsq"):
            series[f"{LABELS[p]} diffusion limit"] = (np.full(len(sizes), limits[p][measure][0]),) * 3
        panels.append(dict(x=sizes, series=series, xlabel=r"$n$", ylabel=MEASURE_LABELS[measure], log2_x=True))
    plot_reproduction(
        panels,
        context.out / "buke-scaling.png",
        title=f"002: scaling in n at c = {o['excess_capacity']}, U[{o['low']}, {o['high']}]",
        note=intervals_note(o["replications"]) + "; flat lines: the stationary means of the diffusion limits",
    )
    first, last = sizes[0], sizes[-1]
    gap = {
        (p, n, m): abs(stats[p, n, m][0] - limits[p][m][0])
        for p in ("jfsq", "jsq")
        for n in (first, last)
        for m in ("x1", "x2")
    }
    tolerance = {
        (p, m): math.hypot(stats[p, last, m][1], 1.96 * limits[p][m][1]) for p in ("jfsq", "jsq") for m in ("x1", "x2")
    }
    claims = [
        decide(
            "C18a",
            f"E|X_1| and E X_2 stay O(1): from n = {first} to n = {last} they change by less than a factor 2",
            {f"{p} {m}": [stats[p, n, m][0] for n in sizes] for p in ("jfsq", "jsq") for m in ("x1", "x2")},
            all(
                max(stats[p, n, m][0] for n in sizes) < 2 * min(stats[p, n, m][0] for n in sizes)
                for p in ("jfsq", "jsq")
                for m in ("x1", "x2")
            ),
        ),
        decide(
            "C18b",
            "E X_3 falls like n^-1/2: the number of servers with >= 3 jobs (sqrt(n) E X_3) stays below 1 at every n",
            {f"{p} E Q_3": [stats[p, n, "q3"][0] for n in sizes] for p in ("jfsq", "jsq")},
            all(stats[p, n, "q3"][0] < 1 for p in ("jfsq", "jsq") for n in sizes),
        ),
        decide(
            "diffusion",
            f"the simulated E|X_1| and E X_2 approach the diffusion limit as n grows: at n = {last} "
            f"they are closer to it than at n = {first}, or within the combined 95% half-width",
            {
                "limit": {p: {m: limits[p][m][0] for m in ("x1", "x2")} for p in ("jfsq", "jsq")},
                "gap_first": {f"{p} {m}": gap[p, first, m] for p in ("jfsq", "jsq") for m in ("x1", "x2")},
                "gap_last": {f"{p} {m}": gap[p, last, m] for p in ("jfsq", "jsq") for m in ("x1", "x2")},
            },
            all(
                gap[p, last, m] < gap[p, first, m] or gap[p, last, m] <= tolerance[p, m]
                for p in ("jfsq", "jsq")
                for m in ("x1", "x2")
            ),
        ),
    ]
    claims += [sandwich_claim(o), stability_claim(context)]
    claims += idle_rate_claims(stats, last, o)
    return Outcome(table, claims, dict(o, diffusion_limits=limits), ["replications"])


def sandwich_claim(o: dict) -> Claim:
    """C20: on coupled paths (the coupling of the proof of Prop. 5.1), JSQ-FSL <= pi <= JSQ-SSL."""
    n = o["sandwich_servers"]
    speed = draw_speeds(n, base_system(o, n, o["excess_capacity"])["speed_distribution"])
    arrival_rate = arrival_rate_for_excess_capacity(speed, o["excess_capacity"])
    check = check_sandwich_arrays(speed, arrival_rate, horizon=o["sandwich_horizon"], seed=o["seed"])
    return decide(
        "C20",
        f"on coupled paths of {n} servers, Q^FSL_+i <= Q^pi_+i <= Q^SSL_+i at every level and "
        f"every event for jsq, jfsq, jssq, jsq-fiq and jsq-lisf (Prop. 5.1)",
        {
            "ticks": check.ticks,
            "lower_violations": dict(zip(check.tie_breaks, check.lower_violations.tolist())),
            "upper_violations": dict(zip(check.tie_breaks, check.upper_violations.tolist())),
        },
        bool(check.holds),
    )


def stability_claim(context) -> Claim:
    """C21: stable iff c > 0. Just above and just below capacity (a buffer too large to fill in
    the horizon), the number in system levels off or keeps growing."""
    o = context.options
    base = {
        "system": dict(base_system(o, o["stability_servers"], 1.0), buffer=10 * int(o["horizon"])),
        "policy": {"id": "jfsq"},
        "run": {"horizon": o["horizon"], "warmup": o["warmup"]},
    }
    table = plain_names(run_sweep(context, "buke-stability", base, {"system.excess_capacity": [-0.25, 0.25]}).summary)
    growth = {float(c): float(row(table, excess_capacity=c)["number_in_system_growth"]) for c in (-0.25, 0.25)}
    return decide(
        "C21",
        "stable iff c > 0: under jfsq the number in system over the second half of the run exceeds "
        "the first half's by more than 50% at c = -0.25, and by less than 10% at c = 0.25",
        {"growth_by_c": growth},
        growth[-0.25] > 0.5 and abs(growth[0.25]) < 0.1,
    )


def idle_rate_claims(stats: dict, n: int, o: dict) -> list:
    """C22: in stationarity E[-X_1] = c / kappa, kappa the mean-reversion rate of X_1 (Cor. 4.4,
    4.5): mu_min for jfsq (plus the effect of a finite sample's minimum), E[mu^2] / E[mu] for RR."""
    low, high = o["low"], o["high"]
    rr_rate = (high**3 - low**3) / 3 / (high - low) / ((low + high) / 2)
    implied = {p: o["excess_capacity"] / stats[p, n, "x1"][0] for p in ("jfsq", "jsq")}
    return [
        decide(
            "C22",
            f"at n = {n} the idle servers' mean-reversion rate implied by E|X_1| = c / kappa is "
            f"within [mu_min, mu_min + 0.1] = [{low}, {low + 0.1:.2f}] for jfsq and within 5% of "
            f"E[mu^2]/E[mu] = {rr_rate:.4f} for RR (jsq)",
            {"implied_rate": implied, "rr_rate": rr_rate},
            low <= implied["jfsq"] <= low + 0.1 and abs(implied["jsq"] / rr_rate - 1) <= 0.05,
        )
    ]


register(
    Reproduction(
        "buke-fig41",
        "002 Fig. 4.1: where idleness and queues sit, by service rate",
        run_fig41,
        {
            **COMMON_OPTIONS,
            "n_servers": (500, 500, "n (002 section 4)"),
            "excess_capacity": (1.0, 1.0, "c = varsigma + nu (002 section 4)"),
            "bins": (6, 6, "speed bins (lost)"),
            "replications": (3, 10, "independent replications (lost)"),
        },
        claims_of(CLAIMS, "C15a", "C15b", "C15c", "C16", "C19"),
    )
)
register(
    Reproduction(
        "buke-fig42",
        "002 Fig. 4.2: paired differences JFSQ - RR across c",
        run_fig42,
        {
            **COMMON_OPTIONS,
            "n_servers": (500, 500, "n (lost; as Fig. 4.1)"),
            "excess_capacities": (
                [0.25, 0.5, 1.0, 2.0, 3.0],
                [0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0],
                "grid of c (lost)",
            ),
            "replications": (10, 20, "paired replications (lost)"),
        },
        claims_of(CLAIMS, "C17a", "C17b", "C17c", "C17d"),
    )
)
register(
    Reproduction(
        "buke-scaling",
        "002: the measures as n grows, against the diffusion limits",
        run_scaling,
        {
            **COMMON_OPTIONS,
            "n_servers": ([125, 250, 500, 1000, 2000], [125, 250, 500, 1000, 2000, 4000, 8000], "n"),
            "excess_capacity": (1.0, 1.0, "c"),
            "replications": (5, 10, "independent replications"),
            "sandwich_servers": (100, 200, "n of the coupled sandwich check (C20)"),
            "sandwich_horizon": (2000.0, 3000.0, "horizon of the coupled sandwich check, time units"),
            "stability_servers": (500, 500, "n of the stability check at c = -0.25 and 0.25 (C21)"),
        },
        claims_of(CLAIMS, "C18a", "C18b", "diffusion", "C20", "C21", "C22"),
    )
)
