"""The testbed's table: a row per run, live beside simulated, and the orders of the policies."""

from __future__ import annotations

import math


def run_label(row: dict) -> str:
    """A run's name in a figure: the hetlb policy (with its signals), or the balancer."""
    return row["policy"] if row["balancer"] == "hetlb" else row["balancer"]


def live_interval_minus_overhead(row: dict) -> tuple[float, float]:
    """The live mean's interval, shifted by the path's mean overhead as the mean is (none: unshifted)."""
    shift = row["live_mean_ms"] - row["live_minus_overhead_ms"]
    return row["live_ci_low_ms"] - shift, row["live_ci_high_ms"] - shift


def mean_delay_ms(statuses: list, name: str) -> float | None:
    """The dispatchers' mean ``forward_delay``, ``answer_lag`` or ``scrape_delay`` in ms (their
    /status), weighted by the answers measured; None if none measured it."""
    delays = [status[name] for status in statuses if status and status.get(name, {}).get("count")]
    count = sum(delay["count"] for delay in delays)
    return sum(delay["count"] * delay["mean_ms"] for delay in delays) / count if count else None


def unseen_delay_ms(statuses: list) -> float | None:
    """How long a completion stays unseen by the dispatcher, in ms: the forward delay (decision to
    the backend's arrival) plus the answer lag (departure to the dispatcher reading the answer).

    A constant forward delay F shifts every busy period of a backend by F, and so every departure;
    the dispatcher then learns each departure F + (answer lag) after the model's, and a model whose
    jobs join at once and whose answers are late by F + (answer lag) has the same sojourns and the
    same dispatcher view. None when the dispatchers measured neither."""
    parts = [mean_delay_ms(statuses, name) for name in ("forward_delay", "answer_lag")]
    return None if parts == [None, None] else sum(part or 0.0 for part in parts)


def messages_per_request(statuses: list) -> float | str:
    """Probe messages (push, poll and metrics: a request and its answer each) per request over the
    dispatchers' ``GET /status``; "" when they do not say."""
    probes = requests = 0
    for status in statuses:
        if not isinstance(status, dict) or not isinstance(status.get("messages"), dict):
            return ""
        probes += sum(status["messages"].get(key, 0) for key in ("push_probes", "poll_probes", "metrics_scrapes"))
        requests += status.get("requests", 0)
    return 2 * probes / requests if requests else ""


def row_line(row: dict) -> str:
    """One run's figures on one line."""
    text = (
        f"{row['balancer']:<18} {row['policy']:<22} load {row['load']:<4g} live {row['live_mean_ms']:8.2f} ms "
        f"[{row['live_ci_low_ms']:.2f}, {row['live_ci_high_ms']:.2f}]  minus overhead "
        f"{row['live_minus_overhead_ms']:8.2f}"
    )
    if row.get("live_ttft_mean_ms", math.nan) == row.get("live_ttft_mean_ms"):
        text += f"  TTFT {row['live_ttft_mean_ms']:.2f} ms (p99 {row['live_ttft_p99_ms']:.2f})"
        text += f"  {row['tokens_per_s']:.0f} tokens/s"
    if row.get("live_herd_fraction", math.nan) == row.get("live_herd_fraction"):
        text += f"  herd {row['live_herd_fraction']:.3f} live"
        if "sim_herd_fraction" in row:
            text += f", {row['sim_herd_fraction']:.3f} simulated"
    if "sim_mean_ms" in row:
        text += (
            f"  simulated {row['sim_policy']} {row['sim_mean_ms']:8.2f} [{row['sim_ci_low_ms']:.2f}, "
            f"{row['sim_ci_high_ms']:.2f}], a run this long {row['sim_run_low_ms']:.2f} to {row['sim_run_high_ms']:.2f}"
        )
    if row.get("messages_per_request") not in (None, ""):
        text += f"  {row['messages_per_request']:.2f} messages/request"
    for key, name in (("forward_delay_ms", "forward delay"), ("answer_lag_ms", "answer lag")):
        if row.get(key, math.nan) == row.get(key):  # measured (not nan)
            text += f"  {name} {row[key]:.2f} ms"
    if "agrees" in row:
        text += "  agrees" if row["agrees"] else "  DIFFERS"
    if row["errors"] or row["live_blocking"]:
        text += f"  errors {row['errors']} blocking {row['live_blocking']:.4f}"
    return text


def format_table(rows: list[dict], orders: dict, against_peers: dict | None = None) -> str:
    """The side-by-side table of a testbed's runs, the policies' order at each load, and the policies
    against the balancers' best rules (Testbed.against_peers)."""
    lines = [row_line(row) for row in rows]
    for load, comparison in (against_peers or {}).items():
        best = ", ".join(f"{program} {balancer}" for program, balancer in comparison["best"].items())
        for policy, ratios in comparison["ratio"].items():
            shares = ", ".join(f"{ratio:.3f} x {program}'s" for program, ratio in ratios.items())
            lines.append(f"at load {load}: {policy} mean {shares} (best rules: {best})")
    for load, order in orders.items():
        if order["live"]:
            verdict = "same" if order["same"] else "DIFFERENT"
            if not order["same"]:
                verdict += (
                    ", the same where determined" if order["same_where_determined"] else ", also where determined"
                )
            if order["overlapping"]:
                pairs = "; ".join(" and ".join(pair) for pair in order["overlapping"])
                verdict += f"; either order in runs of this length: {pairs}"
            lines.append(
                f"order at load {load}: live {' < '.join(order['live'])}; simulated "
                f"{' < '.join(order['simulated'])} ({verdict})"
            )
    return "\n".join(lines)
