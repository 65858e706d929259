"""``zhou-continuous``, 001 Figs. 1 and 2 in continuous time (claims C23a and C23b): the settings
of the slotted figures with M dispatchers that decide per job on estimates updated by push or pull
messages, against jsq on aligned snapshots every tau (the herd the LED policies face), jsq and pod
with true probes. Times are in time units (a fast server's mean service time)."""

from __future__ import annotations

import pandas as pd

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
)
from hetlb.experiments.sweep import paired_differences
from hetlb.experiments.zhou.series import CLAIMS, fast_and_slow_speeds, panel_against_load, series_sweeps

SNAPSHOT_LABEL = "jsq-snapshot"
"""jsq on a shared cache refreshed every tau (aligned snapshots): the herd the LED policies face."""
CONTINUOUS_LED = ("l-jsq-push", "l-jsq-pull", "l-jba-push", "l-jba-pull", "l-pod-push", "l-pod-pull")
CONTINUOUS_CLAIMED = {
    "fig1": ("l-jsq-push", "l-jsq-pull", "l-jba-push", "l-jba-pull"),
    "fig2": CONTINUOUS_LED,
}
"""The LED series each setting's claim covers: l-pod is 001's policy for equal servers only."""
CONTINUOUS_PAGE = "docs/reproductions/zhou-continuous.md"
INFORMATION_RATIO = 100.0
"""How many times the LED series' messages per job jsq-snapshot must receive for C23b's cause."""


def continuous_policy_table(label: str, o: dict, p_hat: float, increment: bool = False) -> dict:
    """The [policy] table of a series of zhou-continuous: an LED policy with push (p_hat, push_d)
    or pull (p_hat) updates, and the dispatchers' own dispatches with ``increment``; jsq on aligned
    snapshots every tau; jsq and pod(pod_d) with true probes."""
    if label == SNAPSHOT_LABEL:
        return {"id": "jsq", "update": f"snapshot:tau={o['tau']!r}:phases=aligned"}
    if label == "pod":
        return {"id": "pod", "d": o["pod_d"], "update": "probe"}
    if label == "jsq-probe":
        return {"id": "jsq", "update": "probe"}
    policy, _, update = label.rpartition("-")
    text = f"push:p_hat={p_hat!r}:d={o['push_d']}" if update == "push" else f"pull:p_hat={p_hat!r}"
    table = {"id": policy, "update": ("increment," if increment else "") + text}
    return dict(table, d=o["pod_d"]) if policy == "l-pod" else table


def loads_below(runs, label: str, base: str = SNAPSHOT_LABEL) -> list:
    """The loads at which the paired 95% interval of ``label`` minus ``base`` (mean response time) lies below 0."""
    differences = paired_differences(runs, "mean_response_time", "policy", label, base)
    return sorted(float(load) for load in differences.loc[differences["ci_high"] < 0, "system.load"])


def continuous_claim(context, figure: str, setting: tuple, table, runs) -> Claim:
    """C23a / C23b: each claimed LED series below jsq-snapshot at the heaviest load, as C11 says
    of 001's herding jsq. Where one is not: it deviates for the cause of C11a when, with the
    dispatchers counting their own dispatches, every such series is below (runs made here); in
    the Fig. 2 setting, for the cost of information when jsq-snapshot receives at least
    INFORMATION_RATIO times the LED series' messages per job and its estimates are closer.

    Parameters
    ----------
    context
        The reproduction's context (its options and folder).
    figure
        The figure's setting, "fig1" or "fig2".
    setting
        The setting's (speeds, p_hat).
    table
        The points' table.
    runs
        The runs' table.
    """
    o = context.options
    speeds, p_hat = setting
    heaviest = max(o["loads"])
    below = {label: loads_below(runs, label) for label in CONTINUOUS_LED}
    claimed = CONTINUOUS_CLAIMED[figure]
    behind = [label for label in claimed if heaviest not in below[label]]
    claim_id = "C23a" if figure == "fig1" else "C23b"
    statement = (
        f"{figure} setting in continuous time (p_hat = {p_hat:g}): {', '.join(claimed)} below jsq on aligned "
        f"snapshots every tau = {o['tau']:g} at the heaviest load {heaviest:g} (paired 95% intervals); "
        "measured: the loads where each LED series is below"
    )
    measured: dict = {"loads_below_jsq_snapshot": below, "not_below_at_heaviest_load": behind}
    deviation = None
    if behind:
        heavy = table[table["load"] == heaviest].set_index("policy")
        increment = {f"{label}-increment": continuous_policy_table(label, o, p_hat, True) for label in behind}
        increment_runs = series_sweeps(
            context,
            f"zhou-continuous-{figure}",
            {"speeds": speeds, "dispatchers": o["dispatchers"]},
            increment,
            [heaviest],
            {"jobs": o["jobs"], "warmup": o["warmup"]},
        )[1]
        both = pd.concat([runs[runs["policy"] == SNAPSHOT_LABEL], increment_runs], ignore_index=True)
        fixed = {label: heaviest in loads_below(both, f"{label}-increment") for label in behind}
        snapshot_messages = float(heavy.loc[SNAPSHOT_LABEL, "messages_per_job"])
        ratio = {label: snapshot_messages / float(heavy.loc[label, "messages_per_job"]) for label in behind}
        closer = {
            label: float(heavy.loc[SNAPSHOT_LABEL, "mean_estimate_error"])
            < float(heavy.loc[label, "mean_estimate_error"])
            for label in behind
        }
        measured.update(
            below_with_increment_on_dispatch=fixed,
            snapshot_messages_per_job_over_led=ratio,
            snapshot_estimates_closer=closer,
        )
        if all(fixed.values()):
            deviation = Explanation(
                "Between updates an LED dispatcher keeps sending to the server of its least estimate, which "
                "its own jobs do not raise: herding on its own stale estimates (the cause of C11a). Counting "
                "its own dispatches (increment, the LSQ variant) removes it.",
                f"{CONTINUOUS_PAGE}, section 'Herding on stale estimates' (C23). This run: at load {heaviest:g}, "
                f"{', '.join(behind)} with increment below jsq-snapshot.",
            )
        elif figure == "fig2" and all(r >= INFORMATION_RATIO for r in ratio.values()) and all(closer.values()):
            deviation = Explanation(
                "In the Fig. 2 setting the LED policies get 2 d p_hat = 0.04 messages per job, the aligned "
                "snapshots M N / (lambda tau) per job, hundreds of times more: the snapshots' herd costs less "
                "than the LED policies' stale information.",
                f"{CONTINUOUS_PAGE}, section 'The cost of information' (C23b). This run: at load {heaviest:g}, "
                f"jsq-snapshot gets {min(ratio.values()):.0f} to {max(ratio.values()):.0f} times the messages per "
                "job of the LED series, and its estimates' mean error is below theirs.",
            )
    return decide(claim_id, statement, measured, not behind, deviation=deviation)


def run_continuous(context) -> Outcome:
    o = context.options
    settings = {
        "fig1": (fast_and_slow_speeds(o), o["p_hat_fig1"]),
        "fig2": (f"{o['n_servers']}x{o['fast_speed']!r}", o["p_hat_fig2"]),
    }
    labels = [*CONTINUOUS_LED, SNAPSHOT_LABEL, "jsq-probe", "pod"]
    tables, claims, panels = [], [], []
    for figure, setting in settings.items():
        speeds, p_hat = setting
        series = {label: continuous_policy_table(label, o, p_hat) for label in labels}
        system = {"speeds": speeds, "dispatchers": o["dispatchers"]}
        run = {"jobs": o["jobs"], "warmup": o["warmup"]}
        table, runs = series_sweeps(context, f"zhou-continuous-{figure}", system, series, o["loads"], run)
        tables.append(table.assign(setting=figure))
        panels.append(
            panel_against_load(
                table,
                "mean_response_time",
                "mean response time (time units)",
                f"{figure} setting: {speeds}, p_hat = {p_hat:g}",
            )
        )
        claims.append(continuous_claim(context, figure, setting, table, runs))
    plot_reproduction(
        panels,
        context.out / "zhou-continuous.png",
        title=f"001 in continuous time: M = {o['dispatchers']} dispatchers, N = {o['n_servers']} servers "
        "(points whose number in system grows are left out)",
        note=intervals_note(o["replications"]),
    )
    return Outcome(pd.concat(tables, ignore_index=True), claims, dict(o), ["fast_fraction", "speed_ratio", "loads"])


register(
    Reproduction(
        "zhou-continuous",
        "001 Fig. 1 and Fig. 2 in continuous time: M dispatchers deciding per job on estimates updated by messages",
        run_continuous,
        {
            "seed": (2001, 2001, "root seed of the runs"),
            "dispatchers": (10, 10, "M (001 section 6)"),
            "n_servers": (100, 100, "N (001 section 6)"),
            "fast_fraction": (0.5, 0.5, "fraction of fast servers in the Fig. 1 setting (lost)"),
            "fast_speed": (1.0, 1.0, "speed of a fast server, and of every server in the Fig. 2 setting"),
            "speed_ratio": (10.0, 10.0, "fast speed / slow speed in the Fig. 1 setting (lost)"),
            "p_hat_fig1": (1.0, 1.0, "p_hat of the Fig. 1 setting: push 2 d p_hat = 4 messages per job, pod(2)'s"),
            "p_hat_fig2": (0.01, 0.01, "p_hat of the Fig. 2 setting (001 section 6)"),
            "push_d": (2, 2, "d, the servers a push probes"),
            "pod_d": (2, 2, "d of pod and l-pod"),
            "tau": (1.0, 1.0, "snapshot period of jsq-snapshot (time units: a fast server's mean service time)"),
            "loads": ([0.5, 0.7, 0.85, 0.95], [round(0.05 * k, 2) for k in range(2, 20)], "loads (lost)"),
            "jobs": (50_000, 500_000, "measured jobs per run"),
            "warmup": (100.0, 500.0, "warm-up per run (time units)"),
            "replications": (4, 10, "independent replications per point (at least 2)"),
        },
        claims_of(CLAIMS, "C23a", "C23b"),
    )
)
