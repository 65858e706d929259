"""Simulation against the exact CTMC solution, for every policy on small heterogeneous systems.

Each comparison uses a Student-t interval over independent replications; the family of all
comparisons in this file has error rate FAMILY_ALPHA by a Bonferroni correction. The exact
solver (hetlb.theory.exact) shares no code with the kernel.
"""

import numpy as np
import pytest

import hetlb
from hetlb.policies.registry import policies_where
from hetlb.theory import EXACT_POLICIES, solve_exact

from support.statistics import bonferroni_t_halfwidth

FAMILY_ALPHA = 0.01
PARAMETERS = {"pod": {"d": 2}, "jsq-df-ds": {"d_fast": 1, "d_slow": 2, "p_fast": 0.7, "p_slow": 0.3}}
"""Non-default parameters where they make the test stronger; every policy the solver covers runs."""
POLICIES = [(policy_id, PARAMETERS.get(policy_id, {})) for policy_id in EXACT_POLICIES]
RANKING = policies_where(ranks_whole_set=True)
INTEGER_KEYS = policies_where(integer_keys=True)

SYSTEMS = {
    # three speeds, equal buffers, one job type, complete graph
    "three-speeds": dict(speed=[2.0, 1.0, 0.5], arrival_rate=[2.8], graph=None, buffer=3),
    # four servers, two job types on a non-complete graph, unequal buffers
    "sparse-graph": dict(
        speed=[1.5, 1.0, 1.0, 0.5], arrival_rate=[1.6, 1.4], graph=[[0, 1, 2], [1, 2, 3]], buffer=[2, 3, 4, 2]
    ),
    # two very different speeds, deeper buffers, heavy load
    "fast-and-slow": dict(speed=[3.0, 1.0], arrival_rate=[3.6], graph=None, buffer=6),
}
CASES = [
    (name, policy, params, path)
    for name in SYSTEMS
    for policy, params in POLICIES
    for path in ("scan", "tree", "buckets")
    if path == "scan" or SYSTEMS[name]["graph"] is None and policy in (RANKING if path == "tree" else INTEGER_KEYS)
]
COMPARISONS = 2 * len(CASES)
REPLICATIONS = 10
JOBS = 30_000


def build(name):
    spec = SYSTEMS[name]
    return hetlb.System.from_speeds(
        spec["speed"], arrival_rate=spec["arrival_rate"], graph=spec["graph"], buffer=spec["buffer"]
    )


@pytest.mark.parametrize("name,policy,params,path", CASES)
def test_mean_response_time_and_blocking_match_exact(name, policy, params, path, monkeypatch):
    from hetlb.simulation import continuous as simulation

    monkeypatch.setattr(simulation, "TREE_MIN_SERVERS", 10**9 if path == "scan" else 1)
    monkeypatch.setattr(simulation, "BUCKET_MAX_CLASSES", 10**9 if path == "buckets" else -1)
    system = build(name)
    exact = solve_exact(system, policy, **params)
    result = hetlb.simulate(system, policy, jobs=JOBS, warmup=50.0, replications=REPLICATIONS, seed=11, **params)
    for metric in ("mean_response_time", "blocking_probability"):
        samples = [getattr(run, metric) for run in result.runs]
        half_width = bonferroni_t_halfwidth(samples, FAMILY_ALPHA, COMPARISONS)
        assert abs(np.mean(samples) - getattr(exact, metric)) <= half_width, (
            f"{metric}: simulated {np.mean(samples):.5f} +- {half_width:.5f}, exact {getattr(exact, metric):.5f}"
        )


@pytest.mark.parametrize("policy", ["jsq", "jfsq", "jfiq", "sed"])
def test_waiting_probability_and_number_in_system_match_exact(policy):
    system = build("three-speeds")
    exact = solve_exact(system, policy)
    result = hetlb.simulate(system, policy, jobs=JOBS, warmup=50.0, replications=REPLICATIONS, seed=5)
    for metric in ("p_wait", "mean_number_in_system", "mean_waiting_time"):
        samples = [getattr(run, metric) for run in result.runs]
        half_width = bonferroni_t_halfwidth(samples, FAMILY_ALPHA, 12)
        assert abs(np.mean(samples) - getattr(exact, metric)) <= half_width, metric
    utilisation = np.array([run.utilisation for run in result.runs])
    for s in range(system.n_servers):
        half_width = bonferroni_t_halfwidth(utilisation[:, s], FAMILY_ALPHA, 12)
        assert abs(utilisation[:, s].mean() - exact.utilisation[s]) <= half_width
