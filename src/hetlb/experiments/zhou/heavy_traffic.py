"""``zhou-heavy-traffic``, 001 Theorems 1 and 2 (claims C13 and C14): eps E[sum_n Q_n] against
eps = mu_Sigma - lambda_Sigma for delta-tilted LED policies, against the resource-pooled value
zeta / 2 of 001 Eq. (4), with runs as long as a number of the pooled queue's relaxation times
zeta / eps^2 (slots). The regression on the smallest eps overshoots 1 when the runs stop short of
them (C13b deviates): each run checks that cause, the curve's bend, on its data."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from hetlb.experiments.reproduce import (
    Claim,
    Explanation,
    Outcome,
    Reproduction,
    claims_of,
    decide,
    intervals_note,
    plot_reproduction,
    register,
    series_of,
)
from hetlb.experiments.zhou.series import (
    CLAIMS,
    GROWTH_LIMIT,
    LED_OPTIONS,
    SLOTTED_OPTIONS,
    ZHOU_PAGE,
    fast_and_slow_speeds,
    growing_points,
    growth_by_load,
    policy_table,
    series_sweeps,
    slotted_system,
    system_table,
)


def run_heavy_traffic(context) -> Outcome:
    o = context.options
    speeds = fast_and_slow_speeds(o)
    series = {label: policy_table(label, o) for label in o["policies"]}
    tables, runs = [], []
    for load in o["loads"]:
        system = slotted_system(o, speeds, load)
        epsilon = system.capacity - system.total_arrival_rate
        zeta = system.pooled_variance()
        relaxation = zeta / epsilon**2  # slots: the pooled queue's relaxation time
        run = {
            "slots": math.ceil(o["relaxation_times"] * relaxation),
            "warmup": math.ceil(o["warmup_relaxation_times"] * relaxation),
        }
        summary, load_runs = series_sweeps(
            context, f"zhou-heavy-traffic-{load}", system_table(o, speeds), series, [load], run
        )
        scale = epsilon / (zeta / 2)
        tables.append(
            summary.assign(
                epsilon=epsilon,
                zeta=zeta,
                slots=run["slots"],
                warmup=run["warmup"],
                **{
                    f"scaled_number_in_system{suffix}": scale * summary[f"mean_number_in_system{suffix}"]
                    for suffix in ("", "_ci_low", "_ci_high")
                },
            )
        )
        runs.append(
            load_runs.assign(scaled_number_in_system=scale * load_runs["mean_number_in_system"], epsilon=epsilon)
        )
    table = pd.concat(tables, ignore_index=True)
    runs = pd.concat(runs, ignore_index=True)
    plot_reproduction(
        [
            dict(
                x=sorted(table["epsilon"].unique()),
                series=series_of(table, "scaled_number_in_system", "policy", "epsilon"),
                xlabel=r"$\epsilon = \mu_\Sigma - \lambda_\Sigma$ (jobs per slot)",
                ylabel=r"$\epsilon\, \mathbb{E}[\sum_n Q_n] / (\zeta / 2)$",
                log2_x=True,
                bound=np.ones(table["epsilon"].nunique()),
                bound_label=r"resource pooling, $\zeta / 2$ (001 Eq. (4))",
                title=f"001 Theorem 2: M = {o['dispatchers']}, N = {o['n_servers']} ({speeds}), push d = "
                rf"{o['push_d']}, $\hat{{p}} = {o['p_hat']:g}$",
            )
        ],
        context.out / "zhou-heavy-traffic.png",
        note=intervals_note(o["replications"]),
    )
    claims = heavy_traffic_claims(table, runs, o["fit_points"]) + [throughput_claim(table)]
    return Outcome(
        table,
        claims,
        dict(o, speeds=speeds),
        ["n_servers", "fast_fraction", "fast_speed", "speed_ratio", "loads", "arrivals", "service", "push_trigger"],
    )


def intercept_interval(epsilon, samples: list) -> tuple:
    """Weighted least squares of the scaled number in system on eps, each point weighted by the
    inverse variance of its mean over replications: (intercept, 95% half-width, slope); the
    half-width uses the t quantile of the fewest replications."""
    means = np.array([np.mean(s) for s in samples])
    variances = np.array([np.var(s, ddof=1) / len(s) for s in samples])
    design = np.column_stack([np.ones(len(epsilon)), epsilon])
    weights = 1.0 / variances
    covariance = np.linalg.inv(design.T @ (design * weights[:, None]))
    intercept, slope = covariance @ design.T @ (weights * means)
    quantile = stats.t.ppf(0.975, min(len(s) for s in samples) - 1)
    return float(intercept), float(quantile * math.sqrt(covariance[0, 0])), float(slope)


def regression(runs, label: str, epsilons: list) -> dict:
    """The weighted fit of a series' scaled number in system on ``epsilons``: intercept, its 95%
    interval, slope and the eps values used."""
    samples = [
        runs[(runs["policy"] == label) & np.isclose(runs["epsilon"], e)]["scaled_number_in_system"].to_numpy()
        for e in epsilons
    ]
    intercept, half, slope = intercept_interval(np.array(epsilons), samples)
    return {
        "intercept": intercept,
        "interval": [intercept - half, intercept + half],
        "slope": slope,
        "epsilons": epsilons,
    }


def heavy_traffic_claims(table, runs, fit_points: int) -> list:
    """C13: eps E[sum Q] / (zeta / 2) falls towards 1 as eps shrinks (C13a), and its regression
    on the smallest eps reaches 1 at eps = 0 (C13b). C13b deviates when a series' intercept lies
    above 1 because the curve bends (the fit one eps further from 0 gives a larger intercept
    still): the bias of a straight line through the smallest eps a run reaches, documented in
    docs/reproductions/zhou.md.

    Parameters
    ----------
    table
        The points' table.
    runs
        The runs' table.
    fit_points
        The smallest eps values the regression of C13b uses.
    """
    trend, fits, shifted, reaches, biased = {}, {}, {}, {}, {}
    falls = extrapolates = True
    for label, rows in table.groupby("policy", sort=False):
        rows = rows.sort_values("epsilon", ascending=False)
        low = rows["scaled_number_in_system_ci_low"].to_numpy()
        high = rows["scaled_number_in_system_ci_high"].to_numpy()
        trend[label] = {f"{e:.6g}": value for e, value in zip(rows["epsilon"], rows["scaled_number_in_system"])}
        series_falls = bool(high[-1] < low[0] and np.all(low[1:] <= high[:-1]))
        falls &= series_falls
        epsilons = sorted(rows["epsilon"])
        fits[label] = regression(runs, label, epsilons[:fit_points])
        reaches[label] = fits[label]["interval"][0] <= 1.0 <= fits[label]["interval"][1]
        extrapolates &= reaches[label]
        if len(epsilons) > fit_points:
            shifted[label] = regression(runs, label, epsilons[1 : fit_points + 1])
        biased[label] = (
            not reaches[label]
            and series_falls
            and fits[label]["interval"][0] > 1.0
            and label in shifted
            and shifted[label]["intercept"] > fits[label]["interval"][1]
        )
    deviation = None
    if not extrapolates and all(biased[label] or reaches[label] for label in fits):
        figures = "; ".join(
            f"{label}: {fits[label]['intercept']:.3f} ({fits[label]['interval'][0]:.3f} to "
            f"{fits[label]['interval'][1]:.3f}), one eps further out {shifted[label]['intercept']:.3f}"
            for label in fits
            if biased[label]
        )
        deviation = Explanation(
            "eps E[sum_n Q_n] / (zeta / 2) bends down near eps = 0 (its slope steepens as eps shrinks, from the "
            "queue imbalance of stale, batched decisions), so a straight line through the smallest eps a run "
            "reaches overshoots the eps = 0 value; each smaller eps added moves the intercept down towards 1.",
            f"{ZHOU_PAGE}, section 'Longer runs: the fit's bias' (at load 0.9975, eps = 0.01875, the intercepts "
            f"contain 1). This run, smallest eps {min(table['epsilon']):.4g}: intercepts {figures}.",
        )
    return [
        decide(
            "C13a",
            "eps E[sum_n Q_n] / (zeta / 2) falls as eps shrinks (its interval at the smallest eps lies "
            "below the one at the largest, and no step up is significant)",
            {"scaled_number_in_system_by_epsilon": trend},
            falls,
        ),
        decide(
            "C13b",
            f"a weighted linear regression of eps E[sum_n Q_n] / (zeta / 2) on eps over the {fit_points} "
            "smallest eps reaches 1 at eps = 0 (its intercept's 95% interval contains 1)",
            {"regression": fits, "regression_one_eps_further_out": shifted},
            extrapolates,
            deviation=deviation,
        ),
    ]


def throughput_claim(table) -> Claim:
    """C14: no drift at the heaviest loads."""
    growing = growing_points(table)
    return decide(
        "C14",
        f"the number in system does not grow at any load up to {table['load'].max()} (no point's "
        f"growth between the halves of a run is significantly above {GROWTH_LIMIT:.0%})",
        {"growth": growth_by_load(table), "loads_where_the_number_in_system_grows": growing},
        not any(growing.values()),
    )


register(
    Reproduction(
        "zhou-heavy-traffic",
        "001 Theorem 2: eps E[sum Q] against eps -> 0 for delta-tilted LED policies, against resource pooling",
        run_heavy_traffic,
        {
            **SLOTTED_OPTIONS,
            **LED_OPTIONS,
            "n_servers": (10, 10, "N (the theorem is for fixed N; small N reaches heavy traffic at feasible eps)"),
            "fast_fraction": (0.5, 0.5, "fraction of fast servers"),
            "fast_speed": (1.0, 1.0, "mu_F, mean services per slot of a fast server"),
            "speed_ratio": (2.0, 2.0, "mu_F / mu_S"),
            "loads": (
                [0.9, 0.95, 0.975, 0.9875, 0.995],
                [0.9, 0.95, 0.975, 0.9875, 0.995, 0.9975],
                "loads 1 - eps / mu_Sigma, eps halving",
            ),
            "policies": (["l-jsq-push", "l-jba-push"], ["l-jsq-push", "l-jba-push"], "delta-tilted series"),
            "relaxation_times": (
                300.0,
                3000.0,
                "measured slots per run, in units of zeta / eps^2 (the pooled queue's relaxation time)",
            ),
            "warmup_relaxation_times": (30.0, 100.0, "warm-up slots per run, in units of zeta / eps^2"),
            "fit_points": (3, 3, "smallest eps values in the regression of C13"),
            "replications": (4, 10, "independent replications per point (at least 2)"),
        },
        claims_of(CLAIMS, "C13a", "C13b", "C14"),
    )
)
