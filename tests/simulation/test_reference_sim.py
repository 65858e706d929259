"""Self-checks of the reference simulator against closed forms and conservation laws.

Every tolerance is a confidence interval: batch means (20 batches of one long run) or independent
replications, with a Student-t quantile at level 99.9 %. Seeds are fixed, so the tests are
deterministic. Nothing here imports hetlb.
"""

import math

import numpy as np
import pytest
from scipy import stats

from support.reference_sim import (
    POLICIES,
    choose_server,
    draw_size,
    h2_parameters,
    simulate_reference,
)

LEVEL = 0.999


def t_half_width(samples, level=LEVEL):
    """Half-width of the Student-t confidence interval for the mean of ``samples``."""
    samples = np.asarray(samples, dtype=float)
    assert np.all(np.isfinite(samples))
    n = len(samples)
    quantile = stats.t.ppf(0.5 + level / 2, n - 1)
    return quantile * samples.std(ddof=1) / math.sqrt(n)


def assert_in_ci(samples, exact, what):
    samples = np.asarray(samples, dtype=float)
    estimate = samples.mean()
    half = t_half_width(samples)
    assert abs(estimate - exact) <= half, (
        f"{what}: estimate {estimate:.5f} +- {half:.5f} does not contain the exact value {exact:.5f}"
    )


def single_server(arrival_rate, service_rate, **kwargs):
    """One server of speed ``service_rate`` fed by one Poisson stream (sizes have mean 1)."""
    return simulate_reference(
        speed=[service_rate], arrival_rate=[arrival_rate], compat=[[0]], policy="random", **kwargs
    )


# --------------------------------------------------------------------------------------------
# Closed forms
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "arrival_rate, service_rate, horizon",
    [(1.0, 2.0, 40_000.0), (0.8, 1.0, 200_000.0)],  # loads 0.5 and 0.8
)
def test_mm1_mean_response_time(arrival_rate, service_rate, horizon):
    result = single_server(arrival_rate, service_rate, buffer=None, horizon=horizon, warmup=500.0, seed=11)
    exact = 1.0 / (service_rate - arrival_rate)
    assert_in_ci(result["batch_response_means"], exact, "M/M/1 mean response time")
    # Waiting = response - service, and service has mean 1/mu.
    assert_in_ci(result["batch_waiting_means"], exact - 1.0 / service_rate, "M/M/1 mean wait")
    # The overall mean is the job-weighted mean of the batch means.
    counts = result["batch_counts"]
    assert counts.sum() == result["counted_completed"]
    assert result["mean_response_time"] == pytest.approx(np.dot(counts, result["batch_response_means"]) / counts.sum())


def test_mm1k_by_replications():
    """M/M/1/K: blocking, utilisation, mean number, p_wait and response time."""
    lam, mu, K = 0.9, 1.0, 3
    rho = lam / mu
    p = np.array([rho**n for n in range(K + 1)])
    p /= p.sum()  # stationary distribution of the number in system, 0..K
    blocking = p[K]
    exact = {
        "blocking_probability": blocking,
        "utilisation": 1.0 - p[0],
        "mean_number_in_system": float(np.dot(np.arange(K + 1), p)),
        # PASTA: an admitted arrival sees the stationary law conditioned on fewer than K jobs.
        "p_wait": p[1:K].sum() / (1.0 - blocking),
    }
    exact["mean_response_time"] = exact["mean_number_in_system"] / (lam * (1.0 - blocking))
    exact["mean_waiting_time"] = exact["mean_response_time"] - 1.0 / mu

    samples = {name: [] for name in exact}
    for seed in range(20):
        result = single_server(lam, mu, buffer=K, horizon=4_000.0, warmup=50.0, seed=seed)
        for name in exact:
            value = result[name]
            samples[name].append(value[0] if name == "utilisation" else value)
    for name, value in exact.items():
        assert_in_ci(samples[name], value, f"M/M/1/{K} {name}")


def test_md1_pollaczek_khinchine():
    lam, mu = 0.7, 1.0  # deterministic service time 1/mu
    rho = lam / mu
    second_moment = 1.0 / mu**2
    exact_wait = lam * second_moment / (2.0 * (1.0 - rho))
    result = single_server(lam, mu, buffer=None, size_dist="deterministic", horizon=60_000.0, warmup=300.0, seed=5)
    assert_in_ci(result["batch_waiting_means"], exact_wait, "M/D/1 mean waiting time")
    # Deterministic service: response = waiting + 1/mu exactly, job by job.
    assert result["mean_response_time"] == pytest.approx(result["mean_waiting_time"] + 1.0 / mu)


def test_mh2_1_pollaczek_khinchine():
    lam, mu, scv = 0.5, 1.0, 4.0
    rho = lam / mu
    second_moment = (scv + 1.0) / mu**2  # E[S^2] = Var + mean^2 = (scv + 1) mean^2
    exact_wait = lam * second_moment / (2.0 * (1.0 - rho))
    result = single_server(
        lam,
        mu,
        buffer=None,
        size_dist="hyperexponential",
        scv=scv,
        horizon=150_000.0,
        warmup=500.0,
        seed=7,
    )
    assert_in_ci(result["batch_waiting_means"], exact_wait, "M/H2/1 mean waiting time")
    assert_in_ci(result["batch_response_means"], exact_wait + 1.0 / mu, "M/H2/1 mean response")


def test_random_over_identical_servers_is_mm1():
    n, lam_per_server, mu = 3, 0.7, 1.0
    result = simulate_reference(
        speed=[mu] * n,
        arrival_rate=[n * lam_per_server],
        compat=[list(range(n))],
        buffer=None,
        policy="random",
        horizon=30_000.0,
        warmup=300.0,
        seed=3,
    )
    assert_in_ci(result["batch_response_means"], 1.0 / (mu - lam_per_server), "random over 3 servers")


def test_h2_moments():
    for scv in (1.0, 2.0, 4.0, 10.0):
        p1, rate1, p2, rate2 = h2_parameters(scv)
        mean = p1 / rate1 + p2 / rate2
        second = 2 * p1 / rate1**2 + 2 * p2 / rate2**2
        assert mean == pytest.approx(1.0)
        assert second - mean**2 == pytest.approx(scv)
        assert p1 / rate1 == pytest.approx(p2 / rate2)  # balanced means
    rng = np.random.default_rng(0)
    sizes = np.array([draw_size("hyperexponential", 4.0, rng) for _ in range(40_000)])
    # Sample mean within 5 standard errors of 1 (sd of the size is sqrt(scv) = 2).
    assert abs(sizes.mean() - 1.0) < 5 * 2.0 / math.sqrt(len(sizes))


# --------------------------------------------------------------------------------------------
# Conservation laws and sanity on a heterogeneous system, for every policy
# --------------------------------------------------------------------------------------------

HETERO = dict(
    speed=[2.0, 1.0, 1.0, 0.5, 0.5],
    arrival_rate=[1.5, 1.0, 1.0],
    compat=[[0, 1, 2], [1, 3, 4], [0, 2, 3, 4]],
    buffer=[3, 2, None, 2, 4],
)


@pytest.mark.parametrize("policy", POLICIES)
def test_conservation(policy):
    result = simulate_reference(**HETERO, policy=policy, horizon=800.0, warmup=100.0, seed=1)
    assert result["arrivals"] == result["admitted"] + result["blocked"]
    assert result["admitted"] == result["departures"] + result["in_system_at_end"]
    assert result["counted_arrivals"] == result["counted_admitted"] + result["counted_blocked"]
    assert result["counted_completed"] <= result["counted_admitted"]
    assert result["arrivals"] > 2000
    assert 0.0 <= result["blocking_probability"] <= 1.0
    assert 0.0 <= result["p_wait"] <= 1.0
    assert np.all((result["utilisation"] >= 0.0) & (result["utilisation"] <= 1.0))
    assert result["mean_number_in_system"] >= result["utilisation"].sum() - 1e-9
    assert result["mean_response_time"] >= result["mean_waiting_time"] >= 0.0
    assert len(result["batch_response_means"]) == 20


def test_same_seed_same_result():
    a = simulate_reference(**HETERO, policy="pod", d=2, horizon=300.0, seed=42)
    b = simulate_reference(**HETERO, policy="pod", d=2, horizon=300.0, seed=42)
    c = simulate_reference(**HETERO, policy="pod", d=2, horizon=300.0, seed=43)
    assert a["arrivals"] == b["arrivals"] and a["mean_response_time"] == b["mean_response_time"]
    assert a["mean_response_time"] != c["mean_response_time"]


def test_unknown_names_raise():
    with pytest.raises(ValueError, match="policy"):
        simulate_reference(**HETERO, policy="jsq2", horizon=10.0)
    with pytest.raises(ValueError, match="size_dist"):
        simulate_reference(**HETERO, policy="jsq", size_dist="gamma", horizon=10.0)


# --------------------------------------------------------------------------------------------
# Decision rules, called directly
# --------------------------------------------------------------------------------------------


def outcomes(policy, candidates, q, speed, d=2, draws=400):
    rng = np.random.default_rng(0)
    return {choose_server(policy, candidates, q, speed, rng, d) for _ in range(draws)}


def test_decision_rules_with_an_idle_server():
    speed = [1.0, 1.0, 2.0, 3.0, 3.0]
    q = [1, 0, 0, 2, 0]
    everyone = [0, 1, 2, 3, 4]
    assert outcomes("jsq", everyone, q, speed) == {1, 2, 4}
    assert outcomes("jfsq", everyone, q, speed) == {4}
    assert outcomes("jssq", everyone, q, speed) == {1}
    assert outcomes("jiq", everyone, q, speed) == {1, 2, 4}
    assert outcomes("jfiq", everyone, q, speed) == {4}
    assert outcomes("jsq-fiq", everyone, q, speed) == {4}
    # sed: (q+1)/speed = 2, 1, 0.5, 1, 1/3
    assert outcomes("sed", everyone, q, speed) == {4}
    # Restricted to a compatible subset.
    assert outcomes("jfsq", [0, 1, 2, 3], q, speed) == {2}
    assert outcomes("jfiq", [0, 1, 3], q, speed) == {1}
    assert outcomes("random", [0, 3], q, speed) == {0, 3}


def test_decision_rules_without_an_idle_server():
    speed = [1.0, 1.0, 2.0, 3.0]
    q = [2, 1, 1, 4]
    everyone = [0, 1, 2, 3]
    assert outcomes("jiq", everyone, q, speed) == {0, 1, 2, 3}
    assert outcomes("jfiq", everyone, q, speed) == {0, 1, 2, 3}
    assert outcomes("jsq-fiq", everyone, q, speed) == {1, 2}
    assert outcomes("jsq", everyone, q, speed) == {1, 2}
    assert outcomes("jfsq", everyone, q, speed) == {2}
    assert outcomes("jssq", everyone, q, speed) == {1}
    # sed: (q+1)/speed = 3, 2, 1, 5/3; an exact tie: speeds 2 and 4 with q 1 and 3.
    assert outcomes("sed", everyone, q, speed) == {2}
    assert outcomes("sed", [0, 1], [1, 3], [2.0, 4.0]) == {0, 1}


def test_pod_samples_without_replacement():
    speed = [1.0] * 4
    q = [3, 0, 2, 1]
    # d >= number of compatible servers: every server is sampled, so pod is jsq.
    assert outcomes("pod", [0, 1, 2, 3], q, speed, d=4) == {1}
    assert outcomes("pod", [0, 2, 3], q, speed, d=7) == {3}
    # d = 1 is uniform; d = 2 never picks the longest queue (it always has a shorter partner).
    assert outcomes("pod", [0, 1, 2, 3], q, speed, d=1) == {0, 1, 2, 3}
    assert outcomes("pod", [0, 1, 2, 3], q, speed, d=2) == {1, 2, 3}
    # d = 2 picks the shortest of 4 exactly when it is sampled: probability 1/2.
    rng = np.random.default_rng(1)
    draws = 20_000
    hits = sum(choose_server("pod", [0, 1, 2, 3], q, speed, rng, 2) == 1 for _ in range(draws))
    assert abs(hits / draws - 0.5) < 5 * math.sqrt(0.25 / draws)


def test_weighted_random_frequencies():
    speed = [1.0, 2.0, 5.0, 9.0]
    candidates = [0, 1, 2]
    rng = np.random.default_rng(2)
    draws = 30_000
    counts = np.zeros(len(speed))
    for _ in range(draws):
        counts[choose_server("weighted-random", candidates, [0] * 4, speed, rng)] += 1
    expected = np.array([1.0, 2.0, 5.0, 0.0]) / 8.0 * draws
    assert counts[3] == 0
    chi2 = float(np.sum((counts[:3] - expected[:3]) ** 2 / expected[:3]))
    assert chi2 < stats.chi2.ppf(LEVEL, df=2)
