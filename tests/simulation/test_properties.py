"""Invariants that hold on every sample path: conservation, compatibility, buffers, determinism."""

import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import hetlb
from hetlb.policies import POLICIES, rules
from hetlb.policies.registry import policies_where

POLICY_IDS = [spec.id for spec in POLICIES.values() if "continuous" in spec.models]


@st.composite
def small_systems(draw):
    n_servers = draw(st.integers(1, 7))
    n_types = draw(st.integers(1, 3))
    speed = draw(st.lists(st.sampled_from([0.25, 0.5, 1.0, 2.0, 3.0]), min_size=n_servers, max_size=n_servers))
    graph = [sorted(draw(st.sets(st.integers(0, n_servers - 1), min_size=1))) for _ in range(n_types)]
    buffer = draw(st.lists(st.integers(1, 4), min_size=n_servers, max_size=n_servers))
    load = draw(st.floats(0.2, 1.6))
    return hetlb.System.from_speeds(speed, load=load, graph=graph, buffer=buffer)


@settings(max_examples=40, deadline=None)
@given(
    system=small_systems(),
    policy=st.sampled_from(POLICY_IDS),
    seed=st.integers(0, 2**32),
    path=st.sampled_from(["scan", "tree", "buckets"]),
)
def test_decisions_respect_graph_and_buffers_and_jobs_are_conserved(system, policy, seed, path):
    from hetlb.simulation import continuous as simulation

    thresholds = simulation.TREE_MIN_SERVERS, simulation.BUCKET_MAX_CLASSES
    simulation.TREE_MIN_SERVERS = 10**9 if path == "scan" else 1
    simulation.BUCKET_MAX_CLASSES = 10**9 if path == "buckets" else -1
    try:
        result = hetlb.simulate(system, policy, jobs=400, seed=seed, trace=2000)
    finally:
        simulation.TREE_MIN_SERVERS, simulation.BUCKET_MAX_CLASSES = thresholds
    run = result.runs[0]
    trace = run.trace
    for job_type, server in zip(trace["job_type"], trace["server"]):
        assert server in system.graph.servers_of(job_type)
    assert np.all(trace["queue_len"] <= system.buffer[trace["server"]])
    assert np.all(run.peak_queue_length <= system.buffer)
    counters = run.counters
    assert counters["arrivals"] == counters["admitted"] + counters["blocked"]
    assert counters["admitted"] == counters["departed"] + counters["in_system"]
    blocked_in_trace = np.count_nonzero(trace["queue_len"] == system.buffer[trace["server"]])
    if len(trace["server"]) == counters["arrivals"]:
        assert blocked_in_trace == counters["blocked"]
    assert np.all((run.utilisation >= 0) & (run.utilisation <= 1 + 1e-12))


@settings(max_examples=200, deadline=None)
@given(queue_len=st.lists(st.integers(0, 5), min_size=1, max_size=8), data=st.data())
def test_rules_choose_inside_the_candidate_range(queue_len, data):
    n = len(queue_len)
    queue_len = np.array(queue_len, dtype=np.int64)
    speed = np.array(data.draw(st.lists(st.sampled_from([0.5, 1.0, 2.0]), min_size=n, max_size=n)))
    classes, server_class = np.unique(-speed, return_inverse=True)
    candidates = np.array(sorted(data.draw(st.sets(st.integers(0, n - 1), min_size=1))), dtype=np.int64)
    lo, hi = 0, len(candidates)
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    idle_since = np.array(data.draw(st.lists(st.floats(0, 1e6), min_size=n, max_size=n)))
    for code in [POLICIES[policy_id].code for policy_id in policies_where(ranks_whole_set=True)]:
        keys = rules.selection_keys(code, queue_len, server_class.astype(np.int64), len(classes), speed, idle_since)
        server, least = rules.least_key_server(candidates, lo, hi, keys, np.zeros(hi - lo, np.int64), rng)
        assert server in candidates
        assert keys[server] == least == min(keys[candidates])
    d = data.draw(st.integers(1, 4))
    sample = np.zeros(d, dtype=np.int64)
    assert rules.power_of_d_server(candidates, lo, hi, d, queue_len, sample, rng) in candidates
    cumulative = np.cumsum(speed[candidates])
    assert rules.speed_weighted_server(candidates, lo, hi, cumulative, rng) in candidates


@settings(max_examples=100, deadline=None)
@given(n=st.integers(1, 12), d=st.integers(1, 14), seed=st.integers(0, 1000))
def test_sample_without_replacement_is_distinct(n, d, seed):
    sample = np.zeros(max(d, n), dtype=np.int64)
    taken = rules.sample_without_replacement(n, d, sample, np.random.default_rng(seed))
    assert taken == min(n, d)
    assert len(set(sample[:taken].tolist())) == taken
    assert all(0 <= i < n for i in sample[:taken])


def test_same_seed_same_result_bit_for_bit():
    system = hetlb.System.from_speeds([2.0, 1.0, 1.0, 0.5], load=0.85, buffer=6)
    first = hetlb.simulate(system, "jfsq", jobs=20_000, warmup=10.0, replications=2, seed=77)
    second = hetlb.simulate(system, "jfsq", jobs=20_000, warmup=10.0, replications=2, seed=77)

    def strip(r):
        return {k: v for k, v in r.summary.items() if k not in ("events_per_second", "wall_seconds")}

    assert json.dumps(strip(first)) == json.dumps(strip(second))
    other = hetlb.simulate(system, "jfsq", jobs=20_000, warmup=10.0, replications=2, seed=78)
    assert other.mean_response_time != first.mean_response_time


def test_common_random_numbers_across_policies():
    """Same seed: every policy sees the same arrival epochs and job types."""
    system = hetlb.System.from_speeds([2.0, 1.0, 0.5], arrival_rate=[1.0, 1.0], graph=[[0, 1], [1, 2]])
    traces = [hetlb.simulate(system, p, jobs=500, seed=5, trace=300).runs[0].trace for p in ("jsq", "jfiq", "pod")]
    for trace in traces[1:]:
        np.testing.assert_array_equal(trace["time"], traces[0]["time"])
        np.testing.assert_array_equal(trace["job_type"], traces[0]["job_type"])


def test_progress_chunks_do_not_change_results(monkeypatch):
    from hetlb.simulation import continuous as simulation

    system = hetlb.System.from_speeds([1.0] * 30, load=0.9)
    whole = hetlb.simulate(system, "jsq", jobs=5_000, seed=3)
    monkeypatch.setattr(simulation, "EVENTS_PER_CALL", 997)
    chunked = hetlb.simulate(system, "jsq", jobs=5_000, seed=3)
    assert whole.mean_response_time == chunked.mean_response_time
    assert whole.runs[0].events == chunked.runs[0].events


def test_job_pool_grows_without_changing_results(monkeypatch):
    """Starting from a pool of 3 job slots, the pool doubles as needed and nothing else changes."""
    from hetlb.simulation import continuous as simulation

    system = hetlb.System.from_speeds([1.0, 1.0, 0.5], load=0.95)
    roomy = hetlb.simulate(system, "jsq", jobs=30_000, seed=1)
    original = simulation.job_pool
    first_call = []

    def tiny_first_pool(slots):
        first_call.append(slots)
        return original(3 if len(first_call) == 1 else slots)

    monkeypatch.setattr(simulation, "job_pool", tiny_first_pool)
    grown = hetlb.simulate(system, "jsq", jobs=30_000, seed=1)
    assert len(first_call) > 2  # the pool grew at least twice
    assert grown.mean_response_time == roomy.mean_response_time
    assert grown.runs[0].counters == roomy.runs[0].counters


def test_littles_law_and_occupancy_consistency():
    system = hetlb.System.from_speeds([2.0] * 5 + [1.0] * 5 + [0.5] * 5, load=0.8, buffer=8)
    result = hetlb.simulate(system, "jsq", horizon=20_000.0, warmup=500.0, seed=2)
    run = result.runs[0]
    assert abs(run.littles_law_gap) < 0.01
    # s_{m,1} summed over classes is the fraction of busy servers; C_m sums to L / N
    assert np.isclose(run.occupancy[:, 0].sum(), run.utilisation.mean())
    assert np.isclose(run.class_jobs.sum(), run.mean_number_in_system / system.n_servers)
    # with buffer 8 and 10 recorded levels, the levels are complete: C_m = sum_i s_{m,i}
    assert np.allclose(run.occupancy.sum(axis=1), run.class_jobs)
    # work conservation: throughput = sum of speed x utilisation
    throughput = run.completed_jobs / run.measured_time
    assert abs(throughput - float(system.speed @ run.utilisation)) < 0.02 * throughput
