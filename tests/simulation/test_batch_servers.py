"""Servers that serve many jobs at once (concurrency c_s, rate curve phi_s), simulated by
hetlb.kernels.batch_servers and the many-dispatcher loop, against independent facts: Erlang C,
M/M/1 for limited processor sharing, processor-sharing insensitivity, a birth-death chain written
here from the definition, the exact CTMC oracle of tests/support/reference_ctmc.py, Little's law
and conservation. Each comparison is a Student-t interval over independent replications, the
family of each test at error rate FAMILY_ALPHA (Bonferroni)."""

import math

import numpy as np
import pytest

import hetlb
from hetlb.errors import InputError
from hetlb.policies import POLICIES, register_policy
from hetlb.simulation import batch_servers
from hetlb.simulation import continuous as simulation

from support.closed_forms import erlang_c, erlang_c_response_time
from support.reference_ctmc import solve_reference_ctmc
from support.statistics import bonferroni_t_halfwidth

FAMILY_ALPHA = 0.01
REPLICATIONS = 8


def assert_agrees(result, metric, expected, comparisons):
    samples = [getattr(run, metric) for run in result.runs]
    half_width = bonferroni_t_halfwidth(samples, FAMILY_ALPHA, comparisons)
    assert abs(np.mean(samples) - expected) <= half_width, (
        f"{metric}: simulated {np.mean(samples):.5f} +- {half_width:.5f}, expected {expected:.5f}"
    )


@pytest.mark.parametrize("slots", [2, 4, 8])
def test_parallel_servers_are_erlang_c(slots):
    """One server of c independent slots of speed 1 is M/M/c: mean response and P(wait)."""
    rate = 0.8 * slots
    system = hetlb.System.from_speeds([1.0], concurrency=slots, rate_curve="independent", arrival_rate=rate)
    result = hetlb.simulate(system, "jsq", jobs=40_000, warmup=20.0, replications=REPLICATIONS, seed=slots)
    assert_agrees(result, "mean_response_time", erlang_c_response_time(slots, rate, 1.0), 2)
    assert_agrees(result, "p_wait", erlang_c(slots, rate), 2)
    run = result.runs[0]
    assert run.mean_in_service[0] == pytest.approx(rate, rel=0.05)  # E[b] = lambda / mu
    assert run.slot_utilisation[0] == pytest.approx(0.8, rel=0.05)


@pytest.mark.parametrize("slots", [2, 8, "inf"])
def test_limited_processor_sharing_is_mm1(slots):
    """``shared`` serves at total rate mu whatever c: the number in system is M/M/1's. At load 0.9
    with unlimited c the regions of jobs in service grow beyond their first size."""
    load = 0.9 if slots == "inf" else 0.7
    system = hetlb.System.from_speeds([1.0], concurrency=slots, rate_curve="shared", arrival_rate=load)
    result = hetlb.simulate(system, "jsq", jobs=40_000, warmup=20.0, replications=REPLICATIONS, seed=3)
    assert_agrees(result, "mean_response_time", 1.0 / (1.0 - load), 1)
    if slots == "inf":
        assert max(int(run.peak_queue_length[0]) for run in result.runs) > batch_servers.kernel.INITIAL_SERVICE_ROOM
        assert all(math.isnan(run.slot_utilisation[0]) for run in result.runs)


@pytest.mark.parametrize("sizes", ["lognormal", "pareto"])
def test_processor_sharing_is_insensitive_to_the_sizes(sizes):
    """M/G/1-PS has the mean response time of M/M/1 for any sizes of mean 1."""
    system = hetlb.System.from_speeds(
        [1.0], concurrency="inf", rate_curve="shared", arrival_rate=0.6, job_sizes=hetlb.JobSizes(sizes, scv=0.5)
    )
    result = hetlb.simulate(system, "jsq", jobs=40_000, warmup=20.0, replications=REPLICATIONS, seed=7)
    assert_agrees(result, "mean_response_time", 1.0 / (1.0 - 0.6), 2)


def test_a_saturating_server_is_its_birth_death_chain():
    """One server, c = 4, saturating alpha = 0.3, buffer 8: the chain of n with births lambda and
    deaths mu phi(min(n, c)), phi(b) = b / (1 + alpha (b - 1)), solved here."""
    speed, rate, slots, alpha, buffer = 1.5, 3.0, 4, 0.3, 8
    n = np.arange(1, buffer + 1)
    in_service = np.minimum(n, slots)
    deaths = speed * in_service / (1.0 + alpha * (in_service - 1))
    weights = np.concatenate(([1.0], np.cumprod(rate / deaths)))
    pi = weights / weights.sum()
    mean_number = float(np.arange(buffer + 1) @ pi)
    blocking = float(pi[-1])  # PASTA
    response = mean_number / (rate * (1.0 - blocking))
    system = hetlb.System.from_speeds(
        [speed], concurrency=slots, rate_curve=f"saturating:alpha={alpha}", arrival_rate=rate, buffer=buffer
    )
    result = hetlb.simulate(system, "jsq", jobs=40_000, warmup=20.0, replications=REPLICATIONS, seed=2)
    for metric, expected in (
        ("mean_number_in_system", mean_number),
        ("blocking_probability", blocking),
        ("mean_response_time", response),
    ):
        assert_agrees(result, metric, expected, 3)
    in_service_mean = float(np.concatenate(([0], in_service)) @ pi)
    assert_agrees_array = [run.mean_in_service[0] for run in result.runs]
    half_width = bonferroni_t_halfwidth(assert_agrees_array, FAMILY_ALPHA, 1)
    assert abs(np.mean(assert_agrees_array) - in_service_mean) <= half_width


ORACLE_SYSTEMS = {
    "saturating": dict(
        speed=[2.0, 1.0, 1.0],
        concurrency=[2, 3, 1],
        rate_curve="saturating:alpha=0.4",
        arrival_rate=[4.0],
        buffer=[4, 4, 3],
    ),
    "table": dict(
        speed=[1.0, 0.5], concurrency=[3, 2], rate_curve="table:1,1.6,2.0", arrival_rate=[2.2], buffer=[5, 4]
    ),
}
ORACLE_POLICIES = [policy for policy in ("jsq", "jfsq", "jiq", "sed", "jlu", "lew", "pod") if policy in POLICIES]
ORACLE_CASES = [
    (name, policy, path) for name in ORACLE_SYSTEMS for policy in ORACLE_POLICIES for path in ("tree", "scan")
]


@pytest.mark.parametrize("name,policy,path", ORACLE_CASES)
def test_policies_on_multi_slot_servers_match_the_exact_chain(name, policy, path, monkeypatch):
    """jsq, jfsq, jiq, sed (and jlu, lew where registered) on the tree of the complete graph and on
    the scan, against the exact CTMC of the same definitions (free slot, the new job's rate,
    sed's delay), with saturating and table curves and finite buffers."""
    monkeypatch.setattr(simulation, "TREE_MIN_SERVERS", 1 if path == "tree" else 10**9)
    spec = ORACLE_SYSTEMS[name]
    exact = solve_reference_ctmc(
        spec["speed"],
        spec["arrival_rate"],
        buffer=spec["buffer"],
        policy=policy,
        concurrency=spec["concurrency"],
        rate_curve=spec["rate_curve"],
    )
    system = hetlb.System.from_speeds(
        spec["speed"],
        arrival_rate=spec["arrival_rate"],
        buffer=spec["buffer"],
        concurrency=spec["concurrency"],
        rate_curve=spec["rate_curve"],
    )
    result = hetlb.simulate(system, policy, jobs=30_000, warmup=20.0, replications=REPLICATIONS, seed=13)
    comparisons = 3 * len(ORACLE_CASES)
    for metric in ("mean_response_time", "blocking_probability", "mean_waiting_time"):
        assert_agrees(result, metric, exact[metric], comparisons)


@pytest.mark.parametrize("arrivals", ["batch:mean=2", "mmpp:ratio=4,on=2,off=3"])
def test_bursts_on_multi_slot_servers_match_the_exact_chain(arrivals):
    """Batch and Markov-modulated arrivals reach the multi-slot loop (the arrival code of c = 1)."""
    spec = ORACLE_SYSTEMS["saturating"]
    exact = solve_reference_ctmc(
        spec["speed"],
        spec["arrival_rate"],
        buffer=spec["buffer"],
        policy="jsq",
        concurrency=spec["concurrency"],
        rate_curve=spec["rate_curve"],
        arrivals=arrivals,
    )
    system = hetlb.System.from_speeds(
        spec["speed"],
        arrival_rate=spec["arrival_rate"],
        buffer=spec["buffer"],
        concurrency=spec["concurrency"],
        rate_curve=spec["rate_curve"],
        arrivals=arrivals,
    )
    result = hetlb.simulate(system, "jsq", jobs=30_000, warmup=20.0, replications=REPLICATIONS, seed=17)
    for metric in ("mean_number_in_system", "blocking_probability"):
        assert_agrees(result, metric, exact[metric], 4)


@pytest.mark.parametrize("policy", ["jsq", "jsq-fiq", "jsq-lisf", "jfiq", "random", "weighted-random", "pod"])
def test_littles_law_and_conservation(policy):
    """L = lambda W over the measured window, and every arrival is admitted or blocked, every
    admitted job departed or still held, on a system of two generations of servers (buffers of 30,
    so that random's static split stays stable)."""
    system = hetlb.System.from_speeds(
        [2.0] * 4 + [1.0] * 8, concurrency="4x8,8x4", rate_curve="saturating:alpha=0.2", load=0.8, buffer=30
    )
    result = hetlb.simulate(system, policy, jobs=50_000, warmup=20.0, seed=5)
    run = result.runs[0]
    assert abs(run.littles_law_gap) < 0.01
    counters = run.counters
    assert counters["arrivals"] == counters["admitted"] + counters["blocked"]
    assert counters["admitted"] == counters["departed"] + counters["in_system"]
    assert np.all(run.mean_in_service <= np.minimum(run.mean_queue_length, system.concurrency) + 1e-9)
    assert np.all((run.slot_utilisation > 0) & (run.slot_utilisation <= 1))


def test_weighted_random_weighs_by_capacity():
    """weighted-random sends each server a share of the jobs proportional to mu phi(c): with equal
    speeds and c = 1 and 4 (shared curve vs independent), the shares are 1 : 4."""
    system = hetlb.System.from_speeds(
        [1.0, 1.0], concurrency=[1, 4], rate_curve=["shared", "independent"], arrival_rate=3.0
    )
    result = hetlb.simulate(system, "weighted-random", jobs=50_000, warmup=20.0, seed=3)
    busy = result.runs[0].mean_in_service  # E[b] = lambda_s / mu: the arrival rate each server takes
    assert busy[1] / busy[0] == pytest.approx(4.0, rel=0.05)


def test_concurrency_one_takes_the_single_slot_path_bit_for_bit(monkeypatch):
    """A system with every c_s = 1 (whatever its curve) runs hetlb.kernels.continuous.advance: the
    same result, bit for bit, as one built without concurrency, and the multi-slot loop never runs."""

    def refuse(*args):
        raise AssertionError("the multi-slot loop ran on a single-slot system")

    monkeypatch.setattr(simulation, "advance_slots", refuse)
    plain = hetlb.System.from_speeds([2.0, 1.0, 0.5], load=0.8, buffer=5)
    single = hetlb.System.from_speeds([2.0, 1.0, 0.5], load=0.8, buffer=5, concurrency=1, rate_curve="shared")
    for policy in ("jsq", "sed", "weighted-random"):
        expected = hetlb.simulate(plain, policy, jobs=5_000, seed=4).runs[0]
        got = hetlb.simulate(single, policy, jobs=5_000, seed=4).runs[0]
        assert got.mean_response_time == expected.mean_response_time
        assert got.events == expected.events
        assert got.mean_in_service is None and got.slot_utilisation is None


def test_a_multi_slot_run_is_reproducible_and_reports_its_keys():
    system = hetlb.System.from_speeds([1.0, 2.0], concurrency="1x3,1xinf", rate_curve="saturating:alpha=0.3", load=0.8)
    first = hetlb.simulate(system, "sed", jobs=5_000, seed=9)
    again = hetlb.simulate(system, "sed", jobs=5_000, seed=9)
    assert first.mean_response_time == again.mean_response_time
    data = first.runs[0].to_dict()
    assert len(data["mean_in_service"]) == len(data["slot_utilisation"]) == 2


def test_many_dispatchers_with_exact_updates_agree_with_the_exact_chain():
    """M = 3 dispatchers deciding on the truth (exact updates) are jsq itself."""
    spec = ORACLE_SYSTEMS["saturating"]
    exact = solve_reference_ctmc(
        spec["speed"],
        spec["arrival_rate"],
        buffer=spec["buffer"],
        policy="jsq",
        concurrency=spec["concurrency"],
        rate_curve=spec["rate_curve"],
    )
    system = hetlb.System.from_speeds(
        spec["speed"],
        arrival_rate=spec["arrival_rate"],
        buffer=spec["buffer"],
        concurrency=spec["concurrency"],
        rate_curve=spec["rate_curve"],
    )
    for policy in ("jsq", "l-jsq"):
        result = hetlb.simulate(
            system, policy, dispatchers=3, update="exact", jobs=30_000, warmup=20.0, replications=REPLICATIONS, seed=19
        )
        for metric in ("mean_response_time", "blocking_probability"):
            assert_agrees(result, metric, exact[metric], 4)


@pytest.mark.parametrize("policy,update", [("l-jsq", "push"), ("l-jsq", "piggyback"), ("sed", "probe")])
def test_many_dispatchers_on_multi_slot_servers_conserve_jobs(policy, update):
    """Stale estimates on multi-slot servers: every job accounted for, and Little's law."""
    system = hetlb.System.from_speeds(
        [2.0] * 4 + [1.0] * 8, concurrency="4x8,8xinf", rate_curve="saturating:alpha=0.3", load=0.8
    )
    result = hetlb.simulate(system, policy, dispatchers=4, update=update, jobs=40_000, warmup=20.0, seed=21)
    run = result.runs[0]
    counters = run.counters
    assert counters["arrivals"] == counters["admitted"] + counters["blocked"]
    assert counters["admitted"] == counters["departed"] + counters["in_system"]
    assert abs(run.littles_law_gap) < 0.01
    assert sum(run.decisions_by_dispatcher) > 0


def test_policies_without_a_meaning_on_multi_slot_servers_are_refused(restore_registry):
    system = hetlb.System.from_speeds([2.0, 1.0], concurrency=4, load=0.5)
    with pytest.raises(InputError, match="jsq-df-ds"):
        hetlb.simulate(system, "jsq-df-ds", jobs=1_000)
    from hetlb.jit import njit

    register_policy("plain-queue", njit(lambda q, c, n, s, t: float(q)), "the queue length", "tests")
    with pytest.raises(InputError, match="concurrency 1"):
        hetlb.simulate(system, "plain-queue", jobs=1_000)
    if "jlu" in POLICIES:
        unlimited = hetlb.System.from_speeds([2.0, 1.0], concurrency="inf", rate_curve="shared", load=0.5)
        with pytest.raises(InputError):
            hetlb.simulate(unlimited, "jlu", jobs=1_000)


def test_the_slotted_model_refuses_concurrency_in_one_line(capsys):
    from hetlb.cli import main

    for flag in (["--concurrency", "4"], ["--rate-curve", "shared"]):
        assert (
            main(["simulate", "--model", "slotted", "--speeds", "4x1.0", "--load", "0.5", "--policy", "l-jsq", *flag])
            == 2
        )
        error = capsys.readouterr().err.strip()
        assert len(error.splitlines()) == 1
        assert "one job at a time" in error and error.startswith(f"hetlb: error: {flag[0]}: ")
