"""The mean-field limit beside a simulation of the same fleet at N servers (``hetlb meanfield --compare N``).

>>> from hetlb.theory.meanfield import mean_field_arrays
>>> limit = mean_field_arrays([1.0, 0.25], [0.5, 0.5], load=0.5, policy="jsq")
>>> comparison = compare_with_simulation(limit, 256, jobs=20_000, replications=3, seed=1)
>>> comparison["simulation"]["n_servers"]
256
"""

from __future__ import annotations

import numpy as np

from hetlb import validation
from hetlb.errors import InputError
from hetlb.model.system import System
from hetlb.policies.registry import POLICIES
from hetlb.simulation.continuous import EVENTS_PER_S_AT_MOST
from hetlb.simulation.simulate import simulate
from hetlb.theory.meanfield import MeanFieldLimit, mean_field_settling_time
from hetlb.theory.meanfield.classes import fleet


def compare_with_simulation(
    limit: MeanFieldLimit,
    n_servers: int,
    *,
    jobs: int = 200_000,
    replications: int = 5,
    warmup: float | None = None,
    seed: int = 0,
    progress: bool = False,
) -> dict:
    """Simulate ``limit``'s fleet at ``n_servers`` (class counts by largest remainders), same load,
    buffer and policy; return the limit's figures, the simulated ones with their 95% intervals, and
    the relative gaps (of the utilisation by speed class with servers of one slot). warmup: time units discarded (default :func:`mean_field_settling_time`)."""
    if limit.policy not in POLICIES:
        raise InputError(
            "policy", f"{limit.policy} exists only in the mean-field theory; --compare needs a simulated policy"
        )
    if not limit.stable:
        raise InputError(
            "policy", f"{limit.policy} has no stable limit at load {limit.load:g}: nothing to compare with"
        )
    validation.count("replications", replications, low=2)
    if warmup is None:
        warmup = mean_field_settling_time(limit)
    check_comparison_cost(limit, n_servers, jobs, replications, warmup)
    system = System.from_speeds(**fleet(limit.classes, n_servers), load=limit.load, buffer=limit.buffer)
    result = simulate(
        system,
        limit.policy,
        jobs=jobs,
        warmup=warmup,
        replications=replications,
        seed=seed,
        progress=progress,
        occupancy_levels=max(1, min(limit.levels, 50)),
        **limit.parameters,
    )
    class_rows = result.occupancy_by_class
    simulated = {
        "n_servers": int(n_servers),
        "jobs": jobs,
        "replications": replications,
        "warmup": warmup,
        "seed": seed,
        "mean_response_time": result.mean_response_time,
        "mean_response_time_ci": list(result.mean_response_time_ci),
        "mean_waiting_time": result.mean_waiting_time,
        "p_wait": result.p_wait,
        "blocking_probability": result.blocking_probability,
        # the busy fraction by speed class: the limit's utilisation with servers of one slot only
        "utilisation": [row["utilisation"] for row in class_rows] if limit.classes.single_slot else None,
        "warnings": result.warnings,
    }
    mean = limit.mean_response_time
    low, high = result.mean_response_time_ci
    return {
        "limit": limit.to_dict(),
        "simulation": simulated,
        "gap": {
            "mean_response_time": (result.mean_response_time - mean) / mean,
            "mean_response_time_half_width": (high - low) / 2.0 / mean,
            "utilisation": None
            if simulated["utilisation"] is None
            else list(np.array(simulated["utilisation"]) - limit.utilisation),
        },
    }


SIMULATED_BYTES_PER_SERVER_AT_LEAST = 400
"""Bytes a simulation holds per server at the least (hetlb.simulation.continuous.run_memory: its
records, trees, key buckets and row of the graph), with the fleet's arrays built for it."""


def check_comparison_cost(limit: MeanFieldLimit, n_servers: int, jobs: int, replications: int, warmup: float) -> None:
    """Refuse, before the fleet is built, a comparison at N = ``n_servers`` whose simulation does not
    fit in memory or would take more than a day: each replication has an arrival and a departure
    for each of the ``jobs`` measured and of the lambda N ``warmup`` arrivals before them."""
    n_servers = validation.count("--compare", n_servers)
    events = 2.0 * replications * (jobs + limit.arrival_rate * n_servers * warmup)
    validation.check_cost(
        "--compare",
        f"a simulation of {validation.quantity(n_servers)} servers ({validation.quantity(events)} events)",
        memory=SIMULATED_BYTES_PER_SERVER_AT_LEAST * n_servers,
        seconds=events / EVENTS_PER_S_AT_MOST,
        advice="use fewer servers, jobs or replications",
    )
