"""Self-checks of the reference simulator against closed forms, conservation laws and the
reference CTMC solver.

Every tolerance is a confidence interval: batch means (20 batches of one long run) or independent
replications, with a Student-t quantile at level 99.9 %. Seeds are fixed, so the tests are
deterministic. Nothing here imports hetlb.
"""

import math

import numpy as np
import pytest
from scipy import stats

from support.closed_forms import erlang_b, erlang_c, erlang_c_response_time, pollaczek_khinchine_waiting_time
from support.reference_ctmc import routing_probabilities, solve_reference_ctmc
from support.reference_model import make_servers
from support.reference_sim import (
    POLICIES,
    choose_server,
    draw_size,
    h2_parameters,
    lognormal_parameters,
    pareto_parameters,
    simulate_reference,
    size_second_moment,
    weibull_parameters,
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


# --------------------------------------------------------------------------------------------
# Multi-slot servers, bursty arrivals and the new size laws
# --------------------------------------------------------------------------------------------


def replicated(replications=10, horizon=3_000.0, warmup=100.0, **kwargs):
    """The results of independent replications (seeds 0, 1, ...) of one configuration."""
    return [simulate_reference(**kwargs, horizon=horizon, warmup=warmup, seed=seed) for seed in range(replications)]


def column(runs, metric):
    """``metric`` of every run."""
    return [run[metric] for run in runs]


def one_server(arrival_rate, speed=1.0, buffer=None):
    return dict(speed=[speed], arrival_rate=[arrival_rate], compat=[[0]], buffer=buffer, policy="random")


@pytest.mark.parametrize("servers, arrival_rate", [(2, 1.5), (4, 3.0)])
def test_erlang_c(servers, arrival_rate):
    config = one_server(arrival_rate) | dict(concurrency=servers, rate_curve="independent")
    exact = erlang_c_response_time(servers, arrival_rate, 1.0)
    runs = replicated(**config)
    assert_in_ci(column(runs, "mean_response_time"), exact, f"M/M/{servers} response time")
    assert_in_ci(column(runs, "mean_waiting_time"), exact - 1.0, f"M/M/{servers} waiting time")
    # PASTA: an arrival waits with probability C(c, a)
    assert_in_ci(column(runs, "p_wait"), erlang_c(servers, arrival_rate), f"M/M/{servers} p_wait")
    busy_slots = [slots[0] for slots in column(runs, "mean_busy_slots")]
    assert_in_ci(busy_slots, arrival_rate, f"M/M/{servers} busy slots")


def test_erlang_b():
    servers, offered = 3, 2.5
    config = one_server(offered, buffer=servers) | dict(concurrency=servers)
    assert_in_ci(column(replicated(**config), "blocking_probability"), erlang_b(servers, offered), "M/M/3/3 blocking")


@pytest.mark.parametrize("concurrency", [2, 5, math.inf])
def test_shared_is_mm1_at_any_concurrency(concurrency):
    config = one_server(0.7) | dict(concurrency=concurrency, rate_curve="shared")
    runs = replicated(**config)
    assert_in_ci(column(runs, "mean_response_time"), 1.0 / (1.0 - 0.7), f"shared, c = {concurrency}")
    assert_in_ci(column(runs, "throughput"), 0.7, f"shared, c = {concurrency}: throughput")


def test_shared_mm1k_blocking():
    lam, buffer = 0.9, 3
    p = lam ** np.arange(buffer + 1)
    p /= p.sum()
    config = one_server(lam, buffer=buffer) | dict(concurrency=2, rate_curve="shared")
    assert_in_ci(column(replicated(**config), "blocking_probability"), p[buffer], "shared M/M/1/3 blocking")


@pytest.mark.parametrize(
    "size_dist, scv", [("lognormal", 4.0), ("pareto", 1.0), ("hyperexponential", 9.0), ("deterministic", 0.0)]
)
def test_processor_sharing_is_insensitive(size_dist, scv):
    """M/G/1-PS: the mean response time is that of M/M/1 whatever the size law (mean 1)."""
    lam = 0.5
    config = one_server(lam) | dict(concurrency=math.inf, rate_curve="shared", size_dist=size_dist, scv=scv)
    samples = column(replicated(replications=12, horizon=4_000.0, **config), "mean_response_time")
    assert_in_ci(samples, 1.0 / (1.0 - lam), f"M/{size_dist}/1-PS response time")


def test_many_independent_slots_never_queue():
    """M/G/c with c far above the load: no job waits, so its response time has mean E[size] / mu = 1 / mu."""
    lam, speed = 3.0, 1.5
    config = one_server(lam, speed) | dict(concurrency=40, size_dist="lognormal", scv=3.0)
    runs = replicated(replications=8, horizon=1_500.0, **config)
    assert all(run["mean_waiting_time"] == 0.0 for run in runs)
    assert_in_ci(column(runs, "mean_response_time"), 1.0 / speed, "M/G/40 response time")
    assert_in_ci(column(runs, "mean_number_in_system"), lam / speed, "M/G/40 mean number")


EMPIRICAL = [0.5, 0.5, 1.0, 2.0, 6.0]  # mean 2; scaled to mean 1 by the simulator


@pytest.mark.parametrize(
    "size_dist, scv", [("lognormal", 2.0), ("pareto", 0.2), ("weibull", 0.5), ("weibull", 3.0), ("empirical", None)]
)
def test_pollaczek_khinchine_under_weighted_random(size_dist, scv):
    """Weighted-random splits the Poisson stream: each server is an M/G/1 of rate lambda mu_s / sum mu."""
    speed, lam = [2.0, 1.0], 1.5
    second_moment = size_second_moment(size_dist, scv, EMPIRICAL)
    exact = 0.0
    for mu in speed:
        rate = lam * mu / sum(speed)
        exact += rate / lam * (pollaczek_khinchine_waiting_time(rate, mu, second_moment) + 1.0 / mu)
    config = dict(
        speed=speed,
        arrival_rate=[lam],
        compat=[[0, 1]],
        buffer=None,
        policy="weighted-random",
        size_dist=size_dist,
        scv=scv,
        empirical_sizes=EMPIRICAL,
    )
    samples = column(replicated(replications=12, **config), "mean_response_time")
    assert_in_ci(samples, exact, f"M/{size_dist}/1 under weighted-random")


def test_empirical_second_moment():
    sizes = np.array(EMPIRICAL) / np.mean(EMPIRICAL)
    assert size_second_moment("empirical", None, EMPIRICAL) == pytest.approx(np.mean(sizes**2))


@pytest.mark.parametrize(
    "size_dist, scv, law",
    [
        (
            "lognormal",
            2.0,
            lambda scv: stats.lognorm(s=lognormal_parameters(scv)[1], scale=math.exp(lognormal_parameters(scv)[0])),
        ),
        ("pareto", 0.5, lambda scv: stats.pareto(b=pareto_parameters(scv)[0], scale=pareto_parameters(scv)[1])),
        ("weibull", 0.3, lambda scv: stats.weibull_min(c=weibull_parameters(scv)[0], scale=weibull_parameters(scv)[1])),
        ("weibull", 4.0, lambda scv: stats.weibull_min(c=weibull_parameters(scv)[0], scale=weibull_parameters(scv)[1])),
    ],
)
def test_size_laws(size_dist, scv, law):
    """The parameters give mean 1 and the scv (scipy's moments), and the sampler draws that law (KS)."""
    distribution = law(scv)
    mean, variance = distribution.stats(moments="mv")
    assert float(mean) == pytest.approx(1.0, rel=1e-9)
    assert float(variance) == pytest.approx(scv, rel=1e-9)
    rng = np.random.default_rng(4)
    sizes = [draw_size(size_dist, scv, rng) for _ in range(5_000)]
    assert stats.kstest(sizes, distribution.cdf).pvalue > 1 - LEVEL


def test_empirical_draws_from_the_scaled_table():
    rng = np.random.default_rng(0)
    table = np.array(EMPIRICAL) / np.mean(EMPIRICAL)
    sizes = [draw_size("empirical", None, rng, table) for _ in range(5_000)]
    values, counts = np.unique(sizes, return_counts=True)
    assert values == pytest.approx(np.unique(table))
    expected = np.array([2, 1, 1, 1]) / 5 * len(sizes)  # 0.5 appears twice
    assert float(np.sum((counts - expected) ** 2 / expected)) < stats.chi2.ppf(LEVEL, df=3)


@pytest.mark.parametrize("mean_batch", [2.0, 4.0])
def test_mx_m1_mean_number(mean_batch):
    """M^X/M/1 with geometric batches of mean B: L = B rho / (1 - rho)."""
    lam = 0.5
    config = one_server(lam) | dict(arrivals=f"batch:mean={mean_batch}")
    runs = replicated(replications=12, horizon=4_000.0, **config)
    assert_in_ci(column(runs, "mean_number_in_system"), mean_batch * lam / (1.0 - lam), f"M^X/M/1, B = {mean_batch}")
    assert_in_ci(column(runs, "throughput"), lam, "M^X/M/1 throughput")


def test_mmpp_m1_against_the_exact_solver():
    lam, spec = 0.6, "mmpp:ratio=4,on=5,off=10"
    exact = solve_reference_ctmc([1.0], [lam], arrivals=spec, truncation=400)
    assert exact["truncation_mass"] < 1e-12
    config = one_server(lam) | dict(arrivals=spec)
    samples = column(replicated(replications=12, horizon=5_000.0, **config), "mean_response_time")
    assert_in_ci(samples, exact["mean_response_time"], "MMPP/M/1 response time")


SMALL = dict(
    speed=[2.0, 1.0, 0.5],
    arrival_rate=[1.6, 0.6],
    compat=[[0, 1, 2], [1, 2]],
    buffer=[5, 4, 4],
    concurrency=[3, 2, 1],
    rate_curve=["saturating:alpha=0.4", "table:1,1.6", "shared"],
)
CROSS_CHECKS = [
    ("jsq", "poisson"),
    ("jfsq", "batch:mean=2"),
    ("jiq", "mmpp:ratio=5,on=4,off=8"),
    ("sed", "batch:mean=3"),
    ("jlu", "poisson"),
    ("lew", "mmpp:ratio=3,on=2,off=2"),
    ("jssq", "poisson"),
    ("jfiq", "batch:mean=2"),
    ("jsq-fiq", "mmpp:ratio=5,on=4,off=8"),
    ("weighted-random", "batch:mean=2"),
]


@pytest.mark.parametrize(
    "policy, arrivals",
    [pytest.param(*case, marks=[pytest.mark.slow] if i >= 2 else []) for i, case in enumerate(CROSS_CHECKS)],
)
def test_agrees_with_the_exact_solver(policy, arrivals):
    """The two oracles, which share only the model's definitions, agree on a small system."""
    exact = solve_reference_ctmc(**SMALL, policy=policy, arrivals=arrivals)
    config = SMALL | dict(policy=policy, arrivals=arrivals)
    runs = replicated(horizon=2_000.0, warmup=50.0, **config)
    for metric in ("mean_response_time", "blocking_probability", "mean_number_in_system", "throughput"):
        assert_in_ci(column(runs, metric), exact[metric], f"{policy}, {arrivals}: {metric}")


HETERO_SLOTS = HETERO | dict(
    concurrency=[2, 1, 4, math.inf, 3],
    rate_curve=["saturating:alpha=0.5", "shared", "table:1,1.9,2.5", "shared", "independent"],
)


@pytest.mark.parametrize("arrivals", ["poisson", "batch:mean=3", "mmpp:ratio=4,on=2,off=3"])
@pytest.mark.parametrize("policy", [p for p in POLICIES if p != "jlu"])
def test_conservation_on_multi_slot_servers(policy, arrivals):
    result = simulate_reference(**HETERO_SLOTS, policy=policy, arrivals=arrivals, horizon=300.0, warmup=50.0, seed=2)
    assert result["arrivals"] == result["admitted"] + result["blocked"]
    assert result["admitted"] == result["departures"] + result["in_system_at_end"]
    assert result["counted_completed"] <= result["counted_admitted"]
    assert result["arrivals"] > 700
    assert np.all(result["mean_busy_slots"] <= np.array(HETERO_SLOTS["concurrency"], dtype=float))
    assert np.all(result["mean_busy_slots"] >= result["utilisation"] - 1e-9)
    assert result["mean_number_in_system"] >= result["mean_busy_slots"].sum() - 1e-9
    assert result["mean_response_time"] >= result["mean_waiting_time"] >= 0.0


def test_jlu_refuses_unlimited_concurrency():
    with pytest.raises(ValueError, match="concurrency"):
        simulate_reference(**HETERO_SLOTS, policy="jlu", horizon=10.0)


def test_one_slot_is_todays_server_bit_for_bit():
    """Concurrency 1 with any curve (phi(1) = 1) is the default server, draw for draw."""
    default = simulate_reference(**HETERO, policy="jfsq", horizon=200.0, seed=8)
    for curve in ("shared", "saturating:alpha=0.3", "table:1,1.5"):
        one_slot = simulate_reference(**HETERO, policy="jfsq", horizon=200.0, seed=8, concurrency=1, rate_curve=curve)
        assert one_slot["mean_response_time"] == default["mean_response_time"]
        assert one_slot["events"] == default["events"]


def test_decision_rules_match_the_exact_routing_laws():
    """choose_server draws from the law of reference_ctmc.routing_probabilities (chi-square)."""
    servers = make_servers(
        [1.0, 1.0, 2.0, 0.5], [4, 1, 2, math.inf], ["shared", "independent", "saturating:alpha=0.5", "shared"]
    )
    speed = [server.speed for server in servers]
    everyone = [0, 1, 2, 3]
    rng = np.random.default_rng(3)
    draws = 3_000
    for q in ([2, 1, 1, 3], [4, 1, 2, 3], [0, 0, 0, 0], [1, 0, 1, 1]):
        for policy in (
            "random",
            "weighted-random",
            "jsq",
            "jfsq",
            "jssq",
            "jiq",
            "jfiq",
            "jsq-fiq",
            "pod",
            "sed",
            "lew",
        ):
            law = routing_probabilities(policy, everyone, q, servers)
            counts = np.zeros(4)
            for _ in range(draws):
                counts[choose_server(policy, everyone, q, speed, rng, 2, servers)] += 1
            support = sorted(law)
            assert set(np.flatnonzero(counts)) <= set(support), (policy, q)
            if len(support) > 1:
                expected = np.array([law[s] for s in support]) * draws
                chi2 = float(np.sum((counts[support] - expected) ** 2 / expected))
                assert chi2 < stats.chi2.ppf(LEVEL, df=len(support) - 1), (policy, q)
