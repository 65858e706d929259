"""What the reproductions of paper 001 share: 001's claims, the slotted model's options and the
LED update options, the [system] and [policy] tables of a series ("l-jsq-push", "jsq", ...), the
sweep of each series over the loads, the points whose number in system grows, the delay figure,
and the message claim C10 of Figs. 1 and 2. Times are in slots."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from hetlb.errors import InputError
from hetlb.experiments.reproduce import (
    Claim,
    decide,
    intervals_note,
    plain_names,
    plot_reproduction,
    series_of,
    two_class_speeds,
)
from hetlb.experiments.spec import SweepSpec
from hetlb.model import parse_speeds
from hetlb.model.slotted import SlottedSystem
from hetlb.signals import LED_STRATEGIES
from hetlb.stats import t_interval

CLAIMS = {
    "C10": "messages per arrival as the policies' definitions give them",
    "C11a": "l-jsq-push below the herding jsq (Fig. 1)",
    "C11b": "l-jba-push below the herding jsq (Fig. 1)",
    "C11c": "the LED push policies stable where pod or jiq are not (Fig. 1)",
    "C12a": "with p_hat = 0.01, l-pod-push and l-jba-push below l-jsq-push (Fig. 2)",
    "C12b": "the gap of C12 grows as p_hat falls (inferred)",
    "C12c": "the gap of C12 vanishes with increment_on_dispatch (inferred)",
    "C13a": "eps E[sum Q] falls towards resource pooling as eps shrinks (Theorem 2)",
    "C13b": "eps E[sum Q] / (zeta / 2) reaches 1 at eps = 0 (Theorem 2)",
    "C14": "throughput optimality: no growth at loads up to 1 (Theorem 1)",
    "C23a": "LED policies below jsq on aligned snapshots in continuous time, Fig. 1 setting (as C11)",
    "C23b": "LED policies below jsq on aligned snapshots in continuous time, Fig. 2 setting (as C11)",
}
"""The claims of 001 that these reproductions check."""
ZHOU_PAGE = "docs/reproductions/zhou.md"
"""The page that documents the causes of the claims that deviate or are refuted; ``evidence``
names its sections by their headings."""

GROWTH_LIMIT = 0.1
"""A point's number in system grows when the 95% interval of its number_in_system_growth (the
second half's time-average sum_n Q_n over the first half's, minus 1) lies entirely above this."""
BASELINES = ("jsq", "pod", "jiq", "weighted-random")
"""Series labels that are policy ids; an LED series is "l-jsq-push", "l-jba-pull", ..."""

SLOTTED_OPTIONS = {
    "seed": (2001, 2001, "root seed of the runs"),
    "dispatchers": (10, 10, "M (001 section 6)"),
    "arrivals": ("poisson", "poisson", "law of A_m(t): poisson, bernoulli or binomial:K (lost)"),
    "service": ("poisson", "poisson", "law of S_n(t): poisson, bernoulli or binomial:K (lost)"),
    "routing": (
        "slot",
        "slot",
        "slot: all of a dispatcher's arrivals of a slot go to one server (001); job: one decision per job",
    ),
    "ties": (
        "independent",
        "independent",
        "ties among least values (jsq, l-jsq): a draw per decision "
        "(independent) or one per slot for all dispatchers (shared)",
    ),
    "push_trigger": (
        "arrival",
        "arrival",
        "a push follows each slot with an arrival at the dispatcher, or every slot (lost)",
    ),
    "increment_on_dispatch": (
        False,
        False,
        "a dispatcher adds the jobs it sends to its own estimate (not LED; an LSQ variant)",
    ),
}
"""Options of the slotted reproductions (zhou-fig1, zhou-fig2, zhou-heavy-traffic): the slotted
model's laws and the LED update rule."""
LED_OPTIONS = {
    "p_hat": (1.0, 1.0, "p_hat, the probability of a push after a slot with an arrival"),
    "push_d": (2, 2, "d, the servers a push samples: 2 d p_hat = 4 messages per decision, Power-of-2's overhead"),
    "pod_d": (2, 2, "d of pod and l-pod"),
}
"""The push updates' p_hat and d, and pod's d, of the slotted reproductions."""


def fast_and_slow_speeds(o: dict) -> str:
    """round(N q_F) servers of speed mu_F and the rest of speed mu_F / speed_ratio (jobs per slot)."""
    return two_class_speeds(o["n_servers"], o["fast_fraction"], o["fast_speed"], o["fast_speed"] / o["speed_ratio"])


def system_table(o: dict, speeds: str) -> dict:
    """The [system] table of the slotted model with the options' dispatchers, laws, routing and ties."""
    return {
        "model": "slotted",
        "speeds": speeds,
        "dispatchers": o["dispatchers"],
        "arrivals": o["arrivals"],
        "service": o["service"],
        "routing": o["routing"],
        "ties": o["ties"],
    }


def policy_table(label: str, o: dict) -> dict:
    """The [policy] table of a series: "l-jsq-push" is l-jsq with push updates of the options' p_hat,
    push_d, push_trigger and increment_on_dispatch (and "l-pod-..." samples pod_d servers); "pod" is
    pod with d = pod_d; the other baselines are policy ids.

    Parameters
    ----------
    label
        The series' label.
    o
        The reproduction's options.
    """
    policy, _, update = label.rpartition("-")
    if policy in ("l-jsq", "l-jba", "l-pod") and update in LED_STRATEGIES:
        table = {
            "id": policy,
            "update": update,
            "p_hat": o["p_hat"],
            "push_d": o["push_d"],
            "push_trigger": o["push_trigger"],
            "increment_on_dispatch": o["increment_on_dispatch"],
        }
        return dict(table, d=o["pod_d"]) if policy == "l-pod" else table
    if label in BASELINES:
        return {"id": label, "d": o["pod_d"]} if label == "pod" else {"id": label}
    raise InputError(
        "policies",
        f"unknown series {label!r}; use l-jsq, l-jba or l-pod with -push or -pull, or one of {', '.join(BASELINES)}",
    )


def series_sweeps(context, name: str, system: dict, series: dict, loads, run: dict):
    """Sweep ``loads`` for each series (label -> [policy] table); return the summary and the runs,
    each with a ``policy`` column of labels (the summary's load column is ``load``)."""
    if context.options["replications"] < 2:
        raise InputError("replications", "must be at least 2: the claims use intervals over replications")
    summaries, runs = [], []
    for label, policy in series.items():
        spec = SweepSpec(
            base={"system": system, "policy": policy, "run": run},
            axes={"system.load": list(loads)},
            replications=context.options["replications"],
            seed=context.options["seed"],
            name=f"{name}-{label}",
        )
        result = context.sweep(spec)
        summaries.append(result.summary.assign(policy=label))
        runs.append(result.runs.assign(policy=label))
    summary = plain_names(pd.concat(summaries, ignore_index=True))
    summary["grows"] = summary["number_in_system_growth_ci_low"] > GROWTH_LIMIT
    return summary, pd.concat(runs, ignore_index=True)


def growing_points(table) -> dict:
    """Label -> loads at which the number in system grows."""
    return {label: rows.loc[rows["grows"], "load"].tolist() for label, rows in table.groupby("policy", sort=False)}


def growth_by_load(table) -> dict:
    """Label -> load -> number_in_system_growth."""
    return {
        label: {f"{load:g}": float(growth) for load, growth in zip(rows["load"], rows["number_in_system_growth"])}
        for label, rows in table.groupby("policy", sort=False)
    }


def panel_against_load(table, metric: str, ylabel: str, title: str) -> dict:
    """A panel of :func:`plot_reproduction`: ``metric`` against load on a log scale, one line per
    series, without the points whose number in system grows."""
    stable = table.copy()
    for column in (metric, f"{metric}_ci_low", f"{metric}_ci_high"):
        stable.loc[stable["grows"], column] = math.nan
    return dict(
        x=sorted(table["load"].unique()),
        series=series_of(stable, metric, "policy", "load"),
        xlabel=r"load $\lambda_\Sigma / \mu_\Sigma$",
        ylabel=ylabel,
        log_y=True,
        title=title,
    )


def delay_figure(table, path, title: str, replications: int) -> None:
    """Mean delay (slots) against load, one line per series, without the points that grow."""
    panel = panel_against_load(
        table, "mean_delay", "mean delay (slots)", title + "\n(points whose number in system grows are left out)"
    )
    plot_reproduction([panel], path, note=intervals_note(replications))


def slotted_system(o: dict, speeds: str, load: float) -> SlottedSystem:
    return SlottedSystem.from_speeds(
        parse_speeds(speeds),
        dispatchers=o["dispatchers"],
        load=load,
        arrivals=o["arrivals"],
        service=o["service"],
        routing=o["routing"],
        ties=o["ties"],
    )


def some_arrival_probability(system: SlottedSystem) -> np.ndarray:
    """P(A_m(t) >= 1) for each dispatcher m."""
    rate, law = system.dispatcher_rate, system.arrivals
    if law.kind == "poisson":
        return 1.0 - np.exp(-rate)
    if law.kind == "bernoulli":
        return rate
    return 1.0 - (1.0 - rate / law.trials) ** law.trials


def messages_per_arrival(label: str, policy: dict, system: SlottedSystem) -> float | None:
    """The closed form of the mean messages per arrival (C10), None where there is none (jiq):
    jsq 2N and pod 2d per decision; a push 2 push_d per push, one push with probability p_hat per
    slot with an arrival (or every slot); a decision per dispatcher and slot with an arrival (per job
    with job routing). Pull has a bound (at most one report per departure), not a closed form.

    Parameters
    ----------
    label
        The series' label.
    policy
        Its [policy] table.
    system
        The slotted system.
    """
    some = some_arrival_probability(system)
    decisions_per_slot = system.dispatcher_rate if system.routing == "job" else some
    if label == "jsq":
        per_slot = 2 * system.n_servers * decisions_per_slot
    elif label == "pod":
        per_slot = 2 * min(policy["d"], system.n_servers) * decisions_per_slot
    elif label.endswith("-push"):
        pushes = np.ones_like(some) if policy["push_trigger"] == "every-slot" else some
        per_slot = 2 * min(policy["push_d"], system.n_servers) * policy["p_hat"] * pushes
    else:
        return None
    return float(per_slot.sum() / system.total_arrival_rate)


def message_claim(table, runs, series: dict, o: dict, speeds: str) -> Claim:
    """C10: the measured messages per arrival against their closed forms (Bonferroni 95% intervals
    over replications, one per point), and pull at most one per arrival."""
    closed_forms = {
        (label, load): messages_per_arrival(label, series[label], slotted_system(o, speeds, load))
        for label, load in zip(table["policy"], table["load"])
    }
    checks = {
        point: expected
        for point, expected in closed_forms.items()
        if point[0].endswith("-pull") or expected is not None
    }
    confidence = 1 - 0.05 / max(len(checks), 1)
    measured, holds = {}, True
    for (label, load), expected in checks.items():
        samples = runs[(runs["policy"] == label) & (runs["system.load"] == load)]["messages_per_arrival"]
        mean, half = t_interval(samples.to_numpy(), confidence)
        ok = mean - half <= 1.0 if expected is None else abs(mean - expected) <= half
        measured[f"{label} at load {load}"] = {
            "measured": mean,
            "interval": [mean - half, mean + half],
            "closed_form": expected if expected is not None else "<= 1",
        }
        holds &= bool(ok)
    per_decision = {
        label: float(rows["messages_per_decision"].mean()) for label, rows in table.groupby("policy", sort=False)
    }
    return decide(
        "C10",
        "messages per arrival match their closed forms (jsq 2N and pod 2d per decision, push "
        "2 d p_hat per slot with an arrival, a decision per dispatcher and slot with an arrival; "
        "pull at most 1 per arrival): each closed form lies in its Bonferroni 95% interval",
        {"points": measured, "mean_messages_per_decision": per_decision},
        holds,
    )
