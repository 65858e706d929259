"""Results as table rows: the row of one replication and the row of one point (its replications
together), the rows of a sweep's runs and summary tables (runs.csv, summary.csv).

A point's row has its figures with 95% intervals: Student-t over the replications, or the
batch-means interval of a single replication where the run measures one. ``result.to_frame()``
gives a simulation result's point row, computed by the same functions a sweep uses.
"""

from __future__ import annotations

import math

import numpy as np

from hetlb.stats import t_interval
from hetlb.stats.halfin_whitt import MEASURES, scaled_ccdf

METRICS = (
    "mean_response_time",
    "mean_waiting_time",
    "p_wait",
    "blocking_probability",
    "mean_number_in_system",
    "response_time_p50",
    "response_time_p95",
    "response_time_p99",
    "littles_law_gap",
    "number_in_system_growth",
    "mean_ttft",
    "ttft_p50",
    "ttft_p90",
    "ttft_p99",
    "cache_hit_ratio",
    "mean_prefill_saved",
) + MEASURES
"""Per-run figures of the continuous model that a point's row gives with 95% intervals (with the
X measures of 002, hetlb.stats.halfin_whitt); those of the prefix caches only for runs with caches."""
SLOTTED_METRICS = (
    "mean_number_in_system",
    "mean_delay",
    "mean_estimate_error",
    "messages_per_arrival",
    "messages_per_decision",
    "number_in_system_growth",
)
"""The same for the slotted model (hetlb.simulate_slotted): its per-run scalar figures."""
DISPATCHER_METRICS = (
    "messages_per_job",
    "mean_estimate_error",
    "mean_estimate_bias",
    "mean_estimate_age",
    "herd_fraction",
    "herd_same_fraction",
)
"""The same for the continuous model with dispatchers (hetlb.simulation.dispatchers); messages_per_job
is the total over the kinds, which the ``messages_KIND`` columns give one by one."""
INTERVAL_COLUMNS = (
    "mean_response_time",
    "mean_waiting_time",
    "blocking_probability",
    "mean_number_in_system",
    "mean_delay",
    "messages_per_arrival",
    "mean_ttft",
)
"""Metrics whose batch-means interval is kept for a point with a single replication."""
MAX_CLASS_COLUMNS = 16
"""Rows carry s_{m,1}, s_{m,2} and C_m per speed class up to this many classes."""
CCDF_GRID = {"x_plus1": np.round(np.arange(-3.0, 4.01, 0.5), 2), "x_plus2": np.round(np.arange(0.0, 4.01, 0.5), 2)}
"""Points y of the CCDFs P(X > y) that rows carry when the run records its state distribution."""
AVERAGED_PREFIXES = ("class", "eta_bin", "xi2_bin", "tb_eta_bin", "ccdf_", "messages_")
"""Columns of the runs' rows that a point's row gives as plain means over the replications."""


def is_slotted(result) -> bool:
    """Whether a result is of the slotted model (its metadata say so)."""
    return result.metadata.get("model") == "slotted"


def run_row(result) -> dict:
    """The row of a result of one replication (a SimulationResult or SlottedResult with one run):
    its figures and intervals, then events, wall_seconds and events_per_second."""
    run = result.runs[0]
    row = slotted_row(result) if is_slotted(result) else continuous_row(result)
    row.update(events=run.events, wall_seconds=run.wall_seconds, events_per_second=run.events_per_second)
    return row


def continuous_row(result) -> dict:
    run = result.runs[0]
    summary = result.summary
    row = {metric: summary[metric] for metric in METRICS if metric in summary}
    row.update(summary["halfin_whitt"])
    if "messages_per_job" in summary:
        per_job = summary["messages_per_job"]
        row.update({metric: summary[metric] for metric in DISPATCHER_METRICS[1:]}, messages_per_job=per_job["total"])
        row.update({f"messages_{kind}": value for kind, value in per_job.items() if kind != "total"})
    for metric in INTERVAL_COLUMNS:
        if metric + "_ci" in summary:
            row[metric + "_ci_low"], row[metric + "_ci_high"] = summary[metric + "_ci"]
    if len(summary["occupancy_by_class"]) <= MAX_CLASS_COLUMNS:
        for m, occupancy in enumerate(summary["occupancy_by_class"], start=1):
            levels = occupancy["s_m"] + [math.nan, math.nan]  # levels the run did not track
            row.update(
                {
                    f"class{m}_speed": occupancy["speed"],
                    f"class{m}_s1": levels[0],
                    f"class{m}_s2": levels[1],
                    f"class{m}_C": occupancy["C_m"],
                }
            )
    if run.speed_profile is not None:
        for name in ("eta", "xi2", "tb_eta"):
            row.update({f"{name}_bin{i + 1}": value for i, value in enumerate(run.speed_profile[name])})
    if run.jobs_distribution is not None:
        for measure, grid in CCDF_GRID.items():
            values = scaled_ccdf(run, len(run.utilisation), measure, grid)
            row.update({f"ccdf_{measure}_{y:g}": float(value) for y, value in zip(grid, values)})
    row.update(completed_jobs=run.completed_jobs, measured_time=run.measured_time)
    return row


def slotted_row(result) -> dict:
    summary = result.summary
    row = {metric: summary[metric] for metric in SLOTTED_METRICS}
    for metric in INTERVAL_COLUMNS:
        if metric + "_ci" in summary:
            row[metric + "_ci_low"], row[metric + "_ci_high"] = summary[metric + "_ci"]
    row.update(
        {f"messages_{kind}": count for kind, count in summary["messages"].items() if isinstance(count, (int, float))}
    )
    row.update({key: value for key, value in summary.items() if key.startswith("preference_")})
    return row


def point_row(runs) -> dict:
    """The figures of one point from the DataFrame of its replications' rows (:func:`run_row`):
    replications, each metric's mean with its 95% interval, the means of the per-class, CCDF and
    message columns, and the events."""
    record: dict[str, float] = {"replications": len(runs)}
    for metric in (m for m in dict.fromkeys(METRICS + SLOTTED_METRICS + DISPATCHER_METRICS) if m in runs):
        values = runs[metric].to_numpy(dtype=float)
        mean, half = t_interval(values)
        record[metric] = mean
        if metric + "_ci_low" in runs and len(runs) == 1:
            record[metric + "_ci_low"] = float(runs[metric + "_ci_low"].iloc[0])
            record[metric + "_ci_high"] = float(runs[metric + "_ci_high"].iloc[0])
        else:
            record[metric + "_ci_low"], record[metric + "_ci_high"] = mean - half, mean + half
    for column in runs.columns:
        if column.startswith(AVERAGED_PREFIXES):
            record[column] = float(runs[column].mean())
    record["events"] = int(runs["events"].sum())
    return record


def speed_lower_bound_or_nan(speed, total_arrival_rate: float, concurrency=None, rate_curve=None) -> float:
    """C*/lambda of Proposition 1 in 000 (on multi-slot servers, its extension: concurrency and
    rate_curve as in hetlb.System.from_speeds), or nan when the load is not below 1."""
    from hetlb.model.servers import capacity_factor, concurrency_array, rate_curve_tuple
    from hetlb.theory import speed_lower_bound_arrays

    speed = np.asarray(speed, dtype=float)
    factor = capacity_factor(concurrency_array(concurrency, len(speed)), rate_curve_tuple(rate_curve, len(speed)))
    if not math.isfinite(total_arrival_rate) or total_arrival_rate >= (speed * factor).sum():
        return math.nan
    return speed_lower_bound_arrays(
        speed, total_arrival_rate, concurrency=concurrency, rate_curve=rate_curve
    ).lower_bound


def metadata_servers(system: dict, class_speed, class_count) -> tuple:
    """(speed, concurrency, rate_curve) per server from a result's system metadata: its "servers"
    groups for multi-slot servers, else the speed classes with one slot each."""
    groups = system.get("servers")
    if not groups:
        return np.repeat(class_speed, class_count), None, None
    counts = [group["count"] for group in groups]
    slots = [math.inf if group["concurrency"] == "unlimited" else group["concurrency"] for group in groups]
    speeds = np.repeat([group["speed"] for group in groups], counts)
    return speeds, np.repeat(slots, counts), [[count, group["rate_curve"]] for count, group in zip(counts, groups)]


def identity(result) -> dict:
    """The columns that name a result's point, as a sweep's axes name them: ``policy.id`` and the
    policy's parameters, ``system.n_servers``, ``system.dispatchers`` (slotted model) and
    ``system.load`` (to 12 significant digits; the exact rates are in the metadata)."""
    system = result.metadata.get("system", {})
    policy = result.metadata.get("policy", {})
    out = {f"policy.{name}": value for name, value in policy.items() if isinstance(value, (str, int, float, bool))}
    out["system.n_servers"] = result.n_servers
    if "dispatchers" in system:
        out["system.dispatchers"] = system["dispatchers"]
    if "load" in system:
        out["system.load"] = float(f"{system['load']:.12g}")
    return out


def result_frame(result):
    """The one-row DataFrame of a result (:meth:`ReplicatedResult.to_frame`): its identity
    columns, then the columns of a sweep's summary row for one point."""
    import pandas as pd

    runs = pd.DataFrame.from_records([run_row(type(result)([run], result.metadata)) for run in result.runs])
    record = {**identity(result), **point_row(runs)}
    if not is_slotted(result):
        first, system = result.runs[0], result.metadata.get("system", {})
        servers = metadata_servers(system, first.class_speed, first.class_count)
        record["speed_lower_bound"] = speed_lower_bound_or_nan(
            *servers[:1], system.get("total_arrival_rate", math.nan), *servers[1:]
        )
    return pd.DataFrame.from_records([record])
