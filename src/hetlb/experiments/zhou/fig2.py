"""``zhou-fig2``, 001 Fig. 2 (001 section 6; claims C10 and C12): M = 10 dispatchers, N = 100
equal servers, p_hat = 0.01, d = 2: l-jsq, l-pod and l-jba with push updates against load
(mean delay in slots); at one load, the gap between them against p_hat (C12b, inferred) and with
increment_on_dispatch (C12c, inferred, and refuted: increments do not remove the gap)."""

from __future__ import annotations

from hetlb.experiments.reproduce import Explanation, Outcome, Reproduction, claims_of, decide, register
from hetlb.experiments.sweep import paired_differences
from hetlb.experiments.zhou.series import (
    CLAIMS,
    LED_OPTIONS,
    SLOTTED_OPTIONS,
    ZHOU_PAGE,
    delay_figure,
    message_claim,
    policy_table,
    series_sweeps,
    system_table,
)

FIG2_SERIES = ("l-jsq-push", "l-pod-push", "l-jba-push")


def gap(runs, load: float, better: str) -> dict:
    """Paired difference of mean delay, l-jsq-push minus ``better``, at ``load`` (slots)."""
    at_load = runs[runs["system.load"] == load]
    difference = paired_differences(at_load, "mean_delay", "policy", "l-jsq-push", better).iloc[0]
    return {
        "difference": float(difference["mean_delay_difference"]),
        "interval": [float(difference["ci_low"]), float(difference["ci_high"])],
    }


def stale_information_claims(table, runs, p_hat_runs: dict, increment_runs, o: dict) -> list:
    """C12 (C12a) and its two inferred corollaries: the gap grows as p_hat falls (C12b), and it
    vanishes with increment_on_dispatch (C12c; refuted when l-jsq-push stays significantly
    slower, the finding documented for it).

    Parameters
    ----------
    table
        The points' table.
    runs
        The runs' table.
    p_hat_runs
        The runs of the p_hat sweep, by p_hat.
    increment_runs
        The runs with increment_on_dispatch.
    o
        The reproduction's options.
    """
    randomised = ("l-pod-push", "l-jba-push")
    loads = sorted(table["load"].unique())
    heaviest = loads[-1]
    per_load = {f"{v:g}": {label: gap(runs, v, label) for label in randomised} for v in loads}
    never_above = all(g["interval"][1] >= 0 for at in per_load.values() for g in at.values())
    below_at_heaviest = all(g["interval"][0] > 0 for g in per_load[f"{heaviest:g}"].values())
    load = o["corollary_load"]
    by_p_hat = {
        f"{p:g}": {label: gap(p_hat_runs[p], load, label) for label in randomised}
        for p in sorted(p_hat_runs, reverse=True)
    }
    ordered = list(by_p_hat.values())
    grows_as_p_hat_falls = all(
        later[label]["interval"][0] > earlier[label]["interval"][1]
        for earlier, later in zip(ordered, ordered[1:])
        for label in randomised
    )
    with_increment = {label: gap(increment_runs, load, label) for label in randomised}
    vanishes = all(g["interval"][0] <= 0 <= g["interval"][1] for g in with_increment.values())
    still_slower = all(g["interval"][0] > 0 for g in with_increment.values())
    refutation = None
    if still_slower and not o["increment_on_dispatch"]:
        figures = "; ".join(
            f"minus {label} {g['difference']:.3g} ({g['interval'][0]:.3g} to {g['interval'][1]:.3g})"
            for label, g in with_increment.items()
        )
        refutation = Explanation(
            "Counting one's own dispatches never counts departures, so between updates every estimate "
            "only rises; a freshly updated server then looks far shorter than the others and l-jsq sends "
            "everything to it: herding on the newest estimate, which l-pod and l-jba rarely sample. "
            "Increments replace the stale-minimum herding with another kind instead of removing it.",
            f"{ZHOU_PAGE}, section 'Fig. 2: very stale estimates (p_hat = 0.01)' (C12c). This run, at load {load:g} "
            f"and p_hat = {o['p_hat']:g} with increment_on_dispatch, l-jsq-push {figures} slots: paired "
            "95% intervals above 0.",
        )
    return [
        decide(
            "C12a",
            f"with p_hat = {o['p_hat']:g}, l-pod-push and l-jba-push are never slower than l-jsq-push "
            f"(paired 95% intervals of l-jsq minus them reach 0 or above) and are faster at the heaviest "
            f"load {heaviest}",
            {"l_jsq_minus_policy_mean_delay": per_load},
            never_above and below_at_heaviest,
        ),
        decide(
            "C12b",
            f"(inferred) at load {load}, the gap l-jsq-push minus l-pod-push and minus l-jba-push grows "
            f"as p_hat falls through {sorted(p_hat_runs, reverse=True)} (successive intervals disjoint)",
            {"l_jsq_minus_policy_mean_delay_by_p_hat": by_p_hat},
            grows_as_p_hat_falls,
        ),
        decide(
            "C12c",
            f"(inferred) at load {load} and p_hat = {o['p_hat']:g}, the gap vanishes with "
            "increment_on_dispatch (its paired interval contains 0)",
            {
                "l_jsq_minus_policy_mean_delay_with_increment": with_increment,
                "l_jsq_minus_policy_mean_delay_without": per_load.get(f"{load:g}"),
            },
            vanishes,
            refutation=refutation,
        ),
    ]


def run_fig2(context) -> Outcome:
    o = context.options
    speeds = f"{o['n_servers']}x{o['server_speed']!r}"
    system = system_table(o, speeds)
    run = {"slots": o["slots"], "warmup": o["warmup"]}
    series = {label: policy_table(label, o) for label in FIG2_SERIES}
    load = o["corollary_load"]
    table, runs = series_sweeps(context, "zhou-fig2", system, series, o["loads"], run)
    p_hat_runs = {
        p: runs
        if p == o["p_hat"] and load in o["loads"]
        # the main sweep has that point
        else series_sweeps(
            context,
            f"zhou-fig2-p_hat-{p}",
            system,
            {label: policy_table(label, dict(o, p_hat=p)) for label in FIG2_SERIES},
            [load],
            run,
        )[1]
        for p in o["corollary_p_hats"]
    }
    increment_runs = series_sweeps(
        context,
        "zhou-fig2-increment",
        system,
        {label: policy_table(label, dict(o, increment_on_dispatch=True)) for label in FIG2_SERIES},
        [load],
        run,
    )[1]
    delay_figure(
        table,
        context.out / "zhou-fig2.png",
        f"001 Fig. 2: M = {o['dispatchers']}, N = {o['n_servers']} servers of speed {o['server_speed']:g}, "
        f"push p_hat = {o['p_hat']:g}, d = {o['push_d']}",
        o["replications"],
    )
    claims = [message_claim(table, runs, series, o, speeds)] + stale_information_claims(
        table, runs, p_hat_runs, increment_runs, o
    )
    return Outcome(
        table,
        claims,
        dict(o, speeds=speeds),
        ["server_speed", "loads", "arrivals", "service", "push_trigger", "corollary_load"],
    )


register(
    Reproduction(
        "zhou-fig2",
        "001 Fig. 2: stale information, l-jsq against l-pod and l-jba with p_hat = 0.01, homogeneous servers",
        run_fig2,
        {
            **SLOTTED_OPTIONS,
            **LED_OPTIONS,
            "p_hat": (0.01, 0.01, "p_hat (001 section 6)"),
            "push_d": (2, 2, "d, the servers a push samples (001 section 6)"),
            "n_servers": (100, 100, "N (001 section 6)"),
            "server_speed": (1.0, 1.0, "mu_n, mean services per slot of every server (lost)"),
            "loads": ([0.3, 0.5, 0.6, 0.7, 0.8, 0.9], [round(0.05 * k, 2) for k in range(2, 20)], "loads (lost)"),
            "corollary_load": (0.8, 0.8, "load of the inferred corollaries (p_hat and increment_on_dispatch)"),
            "corollary_p_hats": ([1.0, 0.1, 0.01], [1.0, 0.3, 0.1, 0.03, 0.01], "p_hat values of the first corollary"),
            "slots": (25_000, 200_000, "measured slots per run"),
            "warmup": (5_000, 20_000, "warm-up slots per run"),
            "replications": (3, 10, "independent replications per point (at least 2)"),
        },
        claims_of(CLAIMS, "C10", "C12a", "C12b", "C12c"),
    )
)
