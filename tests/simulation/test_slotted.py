"""The slotted model of paper 001: agreement with the reference simulator, closed forms, message
counts, the dispatching preference and input errors.

Statistical tolerances are Student-t or binomial intervals at family level 1 %, Bonferroni over the
comparisons of a test; every run has a fixed seed, so each test is deterministic.
"""

import json
import math

import numpy as np
import pytest
from scipy import stats

import hetlb
from hetlb import InputError, SlottedSystem, simulate_slotted
from hetlb.policies.local_estimates import below_average_server

from support.reference_slotted import simulate as reference_simulate
from support.statistics import bonferroni_t_halfwidth

FAMILY_ALPHA = 0.01


def binomial_within(successes, trials, p, comparisons=1):
    """Is a Binomial(trials, p) count within its two-sided normal interval at FAMILY_ALPHA / comparisons?"""
    z = stats.norm.ppf(1 - FAMILY_ALPHA / (2 * comparisons))
    return abs(successes - trials * p) <= z * math.sqrt(trials * p * (1 - p)) + 1e-9


def generators(seed, replication=0):
    sequence = np.random.SeedSequence(seed, spawn_key=(replication,))
    return [np.random.Generator(np.random.PCG64(stream)) for stream in sequence.spawn(4)]


# ------------------------------------------------------------------------------------------------
# the kernel against the reference simulator: same draws, so the same numbers exactly

AGREEMENT_CASES = [
    ("l-jsq", {"p_hat": 0.5}, {}),
    ("l-jsq", {"update": "pull", "p_hat": 0.5, "increment_on_dispatch": True}, {"routing": "job"}),
    ("l-jsq", {"update": "pull", "pull_trigger": "departure", "p_hat": 0.7}, {"arrivals": "binomial:3"}),
    ("l-jba", {"update": "pull", "pull_trigger": "every-slot", "p_hat": 0.2}, {"service": "bernoulli"}),
    ("l-jba", {"average": "rate-weighted", "inclusive": True, "push_trigger": "every-slot", "p_hat": 0.3}, {}),
    ("l-jba", {"empty_set": "l-jsq", "p_hat": 0.1, "push_d": 1}, {"routing": "job"}),
    ("l-pod", {"d": 2, "push_d": 1, "p_hat": 0.3}, {"arrivals": "binomial:4"}),
    ("l-pod", {"d": 3, "update": "pull", "increment_on_dispatch": True}, {}),
    ("jsq", {}, {}),
    ("jsq", {}, {"ties": "shared", "routing": "job"}),
    ("l-jsq", {"p_hat": 0.05}, {"ties": "shared"}),
    ("l-jba", {"empty_set": "l-jsq", "p_hat": 0.1}, {"ties": "shared", "service": "bernoulli"}),
    ("pod", {"d": 2}, {"routing": "job"}),
    ("jiq", {}, {}),
    ("random", {}, {"service": "binomial:2", "speed": [1.0, 1.0, 0.9, 0.9, 0.9]}),
    ("weighted-random", {}, {}),
]


@pytest.mark.parametrize("policy, params, options", AGREEMENT_CASES)
def test_kernel_agrees_with_reference(policy, params, options):
    options = dict(options)
    speed = options.pop(
        "speed", [0.9, 0.8, 0.5, 0.4, 0.4] if options.get("service") == "bernoulli" else [1.5, 1.0, 0.7, 0.4, 0.4]
    )
    system = SlottedSystem.from_speeds(speed, dispatchers=3, load=0.85, **options)
    slots, warmup = 300, 40
    result = simulate_slotted(system, policy, slots=slots, warmup=warmup, seed=7, trace=10_000, **params)
    run = result.runs[0]
    policy_params = hetlb.make_policy(policy, **params).params
    reference = reference_simulate(
        list(system.speed),
        list(system.dispatcher_rate),
        (system.arrivals.kind, system.arrivals.trials),
        (system.service.kind, system.service.trials),
        system.routing,
        policy,
        policy_params,
        slots,
        warmup,
        generators(7),
        system.ties,
    )
    for name in ("arrivals", "departures", "decisions"):
        assert getattr(run, name) == reference[name], name
    assert run.messages == {kind: reference[kind] for kind in ("probes", "replies", "reports", "tokens")}
    assert np.array_equal(run.mean_queue_length, np.array(reference["queue_area_by_server"]) / slots)
    assert run.mean_number_in_system == reference["queue_area"] / slots
    if policy.startswith("l-"):
        assert run.mean_estimate_error == reference["error_area"] / (slots * 3 * 5)
    trace = list(zip(*(run.trace[key].tolist() for key in ("slot", "dispatcher", "jobs", "server"))))
    assert trace == reference["trace"]
    assert run.counters["in_system"] == sum(reference["queue"])
    assert run.counters["arrivals"] == run.counters["departures"] + run.counters["in_system"]


# ------------------------------------------------------------------------------------------------
# l-jsq with exact information is jsq


def test_l_jsq_with_every_server_pushed_every_slot_is_jsq():
    system = SlottedSystem.from_speeds([2.0, 1.0, 1.0, 0.5, 0.25], load=0.6)
    common = {"slots": 3000, "seed": 3, "trace": 5000}
    jsq = simulate_slotted(system, "jsq", **common).runs[0]
    exact = {"p_hat": 1.0, "push_d": 5, "push_trigger": "every-slot"}
    ljsq = simulate_slotted(system, "l-jsq", **common, **exact).runs[0]
    for key in ("slot", "server", "jobs"):
        assert np.array_equal(jsq.trace[key], ljsq.trace[key]), key
    assert np.array_equal(ljsq.trace["seen"], ljsq.trace["queue"])  # its estimates are the true queues
    assert np.array_equal(jsq.mean_queue_length, ljsq.mean_queue_length)
    assert ljsq.mean_estimate_error == 0.0
    # the control: pushed only after slots with arrivals, the estimates go stale in the empty slots
    stale = simulate_slotted(system, "l-jsq", **common, **{**exact, "push_trigger": "arrival"}).runs[0]
    assert not np.array_equal(jsq.trace["server"], stale.trace["server"][: len(jsq.trace["server"])])
    assert stale.mean_estimate_error > 0


# ------------------------------------------------------------------------------------------------
# shared ties: the herd of 001 section 6


def decisions_by_slot(run):
    """slot -> the servers its decisions chose, from the trace."""
    chosen = {}
    for slot, server in zip(run.trace["slot"].tolist(), run.trace["server"].tolist()):
        chosen.setdefault(slot, []).append(server)
    return chosen


def test_shared_ties_send_every_dispatcher_of_a_slot_to_one_shortest_queue():
    system = SlottedSystem.from_speeds([1.0] * 20, dispatchers=5, load=0.5, ties="shared")
    run = simulate_slotted(system, "jsq", slots=2000, warmup=0, seed=4, trace=20_000).runs[0]
    chosen = decisions_by_slot(run)
    assert all(len(set(servers)) == 1 for servers in chosen.values())
    assert np.all(run.trace["queue"] == run.trace["seen"])
    # they do not always agree with a draw per decision: at load 0.5 most slots tie many servers
    independent = simulate_slotted(
        SlottedSystem.from_speeds([1.0] * 20, dispatchers=5, load=0.5),
        "jsq",
        slots=2000,
        warmup=0,
        seed=4,
        trace=20_000,
    ).runs[0]
    assert sum(len(set(servers)) > 1 for servers in decisions_by_slot(independent).values()) > 1000
    # the herd costs delay: a slot's jobs of every dispatcher pile onto one server
    assert run.mean_number_in_system > independent.mean_number_in_system


# ------------------------------------------------------------------------------------------------
# message counts


def test_exact_information_messages():
    n, rate = 6, 0.4
    system = SlottedSystem.from_speeds([1.0] * n, dispatchers=3, arrival_rate=3 * rate)
    jsq = simulate_slotted(system, "jsq", slots=20_000, seed=1).runs[0]
    assert jsq.messages["probes"] == jsq.messages["replies"] == n * jsq.decisions
    assert jsq.messages_per_decision == 2 * n
    # one decision per dispatcher and slot with arrivals: Binomial(M slots, 1 - exp(-lambda_m))
    assert binomial_within(jsq.decisions, 3 * 20_000, 1 - math.exp(-rate))
    per_job = SlottedSystem.from_speeds([1.0] * n, dispatchers=3, arrival_rate=3 * rate, routing="job")
    assert simulate_slotted(per_job, "jsq", slots=2000, seed=1).messages_per_arrival == 2 * n
    pod = simulate_slotted(system, "pod", slots=2000, seed=1, d=3).runs[0]
    assert pod.messages["probes"] == pod.messages["replies"] == 3 * pod.decisions
    for policy in ("random", "weighted-random"):
        assert sum(simulate_slotted(system, policy, slots=500, seed=1).messages.values()) == 0


def test_push_messages():
    system = SlottedSystem.from_speeds([1.0] * 8, dispatchers=4, load=0.5)
    slots, p_hat, push_d = 20_000, 0.3, 3
    after_arrivals = simulate_slotted(system, "l-jsq", slots=slots, seed=2, p_hat=p_hat, push_d=push_d).runs[0]
    every_slot = simulate_slotted(
        system, "l-pod", slots=slots, seed=2, p_hat=p_hat, push_d=push_d, push_trigger="every-slot"
    ).runs[0]
    for run in (after_arrivals, every_slot):
        assert run.messages["probes"] == run.messages["replies"]
        assert run.messages["probes"] % push_d == 0 and run.messages["reports"] == run.messages["tokens"] == 0
    # a push happens with probability p_hat after each slot with arrivals (= each decision), or each slot
    assert binomial_within(after_arrivals.messages["probes"] // push_d, after_arrivals.decisions, p_hat, 2)
    assert binomial_within(every_slot.messages["probes"] // push_d, 4 * slots, p_hat, 2)
    assert after_arrivals.messages_per_decision <= 2 * push_d


def test_pull_messages():
    speed = [0.9, 0.6, 0.6, 0.3]
    slots, p_hat = 20_000, 0.4
    system = SlottedSystem.from_speeds(speed, dispatchers=3, load=0.8)
    per_departure = simulate_slotted(
        system, "l-jsq", slots=slots, seed=4, update="pull", p_hat=p_hat, pull_trigger="departure"
    ).runs[0]
    assert binomial_within(per_departure.messages["reports"], per_departure.departures, p_hat, 2)
    every_slot = simulate_slotted(
        system, "l-jba", slots=slots, seed=4, update="pull", p_hat=p_hat, pull_trigger="every-slot"
    ).runs[0]
    assert binomial_within(every_slot.messages["reports"], len(speed) * slots, p_hat, 2)
    # with Bernoulli service a server departs at most once a slot: with p_hat = 1 one report per departure
    bernoulli = SlottedSystem.from_speeds(speed, dispatchers=3, load=0.8, service="bernoulli")
    run = simulate_slotted(bernoulli, "l-jsq", slots=5000, seed=4, update="pull", p_hat=1.0).runs[0]
    assert run.messages["reports"] == run.departures
    assert run.messages["probes"] == run.messages["replies"] == 0
    assert run.messages_per_arrival <= 1.0 + 1e-12


def test_jiq_tokens_with_one_dispatcher_are_the_idle_servers():
    system = SlottedSystem.from_speeds([1.0, 0.8, 0.5, 0.5, 0.2], load=0.7)
    for slots in (3, 50, 5000):
        run = simulate_slotted(system, "jiq", slots=slots, seed=5, batches=3).runs[0]
        assert run.counters["tokens_held"] == run.counters["idle_servers"]
    assert run.messages["tokens"] > 0 and run.messages["probes"] == 0


# ------------------------------------------------------------------------------------------------
# closed forms


def bernoulli_service_mean_queue(arrival_mean, arrival_variance, speed):
    """E[Q] of Q' = max(Q + A - S, 0) with S ~ Bernoulli(speed) and A i.i.d. independent of Q:
    (Var A + Var S + eps^2 - eps) / (2 eps), eps = speed - E[A] (from E[Q'^2] = E[Q^2])."""
    eps = speed - arrival_mean
    return (arrival_variance + speed * (1 - speed) + eps**2 - eps) / (2 * eps)


def test_single_bernoulli_queue():
    p, q = 0.3, 0.5
    system = SlottedSystem.from_speeds([q], arrival_rate=p, arrivals="bernoulli", service="bernoulli")
    result = simulate_slotted(system, "jsq", slots=40_000, warmup=200, replications=10, seed=6)
    ratio = p * (1 - q) / (q * (1 - p))
    exact = ratio / (1 - ratio)  # the birth-death chain with up p(1-q), down q(1-p)
    assert exact == pytest.approx(bernoulli_service_mean_queue(p, p * (1 - p), q))
    # zeta of 001 Eq. (4): eps E[Q] = (zeta + eps^2 - eps) / 2 -> zeta / 2 in heavy traffic (C13)
    assert system.pooled_variance() == pytest.approx(p * (1 - p) + q * (1 - q))
    assert (q - p) * exact == pytest.approx((system.pooled_variance() + (q - p) ** 2 - (q - p)) / 2)
    queue = [run.mean_number_in_system for run in result.runs]
    delay = [run.mean_delay for run in result.runs]
    assert abs(np.mean(queue) - exact) <= bonferroni_t_halfwidth(queue, FAMILY_ALPHA, 2)
    assert abs(np.mean(delay) - exact / p) <= bonferroni_t_halfwidth(delay, FAMILY_ALPHA, 2)


@pytest.mark.parametrize("routing", ["slot", "job"])
def test_weighted_random_servers_are_independent_queues(routing):
    speed = np.array([0.9, 0.7, 0.5, 0.3])
    system = SlottedSystem.from_speeds(speed, dispatchers=3, load=0.7, routing=routing, service="bernoulli")
    result = simulate_slotted(system, "weighted-random", slots=40_000, warmup=1000, replications=8, seed=8)
    weight = speed / speed.sum()
    rate = system.dispatcher_rate  # Poisson per dispatcher
    if routing == "slot":  # A_n = sum_m A_m 1{m chooses n}
        variance = np.sum([weight * (r + r * r) - weight**2 * r * r for r in rate], axis=0)
    else:  # every job independently: a thinned Poisson stream
        variance = system.total_arrival_rate * weight
    exact = bernoulli_service_mean_queue(system.total_arrival_rate * weight, variance, speed)
    per_server = np.array([run.mean_queue_length for run in result.runs])
    for n in range(len(speed)):
        half = bonferroni_t_halfwidth(per_server[:, n], FAMILY_ALPHA, 2 * len(speed))
        assert abs(per_server[:, n].mean() - exact[n]) <= half, n


# ------------------------------------------------------------------------------------------------
# the dispatching preference (001 section 5)


def test_l_jsq_preference():
    speed = np.array([2.0, 2.0, 1.0, 1.0, 0.5, 0.5])
    system = SlottedSystem.from_speeds(speed, dispatchers=3, load=0.8)
    preference = simulate_slotted(system, "l-jsq", slots=10_000, seed=9, preference=True, p_hat=0.2).preference
    # the chosen server is always first in sigma: Delta_1 = 1 - mu_sigma(1)/mu_Sigma, Delta_n = -mu_sigma(n)/mu_Sigma
    assert preference["selection"] == [1.0] + [0.0] * 5
    assert np.allclose(preference["delta"], np.array([1.0] + [0.0] * 5) - preference["share"], atol=1e-12)
    share = np.array(preference["share"])
    assert np.all(share >= speed.min() / speed.sum() - 1e-12) and np.all(share <= speed.max() / speed.sum() + 1e-12)
    assert preference["tilted"] and preference["delta_tilted"]
    assert preference["delta_min"] >= speed.min() / speed.sum() - 1e-12


@pytest.mark.parametrize("d", [2, 3])
def test_l_pod_preference(d):
    n = 8
    system = SlottedSystem.from_speeds([1.0] * n, dispatchers=2, load=0.8)
    run = simulate_slotted(system, "l-pod", slots=20_000, seed=10, preference=True, d=d, p_hat=0.1, batches=40).runs[0]
    ranks = np.arange(1, n + 1)
    selection = np.array([math.comb(n - r, d - 1) for r in ranks]) / math.comb(n, d)
    exact = selection - 1.0 / n
    if d == 2:
        assert exact[0] == pytest.approx(1 / n) and exact[-1] == pytest.approx(-1 / n)
    assert np.allclose(run.preference["share"], 1.0 / n)
    for r in range(n):
        half = bonferroni_t_halfwidth(run.preference_samples[:, r], FAMILY_ALPHA, n)
        assert abs(run.preference["delta"][r] - exact[r]) <= half, r
    assert run.preference["tilted"] and run.preference["delta_tilted"]


def test_l_jba_rule_prefers_exactly_the_below_average_servers():
    speed = np.array([1.0, 0.5, 2.0, 1.0, 0.25, 1.0])
    estimate = np.array([0, 3, 1, 5, 2, 7], dtype=np.int64)  # mean 3: below are servers 0, 2, 4
    everyone = np.arange(len(speed))
    rng = np.random.default_rng(11)
    draws = 20_000
    counts = np.bincount(
        [below_average_server(everyone, 0, len(speed), estimate, speed, False, False, rng) for _ in range(draws)],
        minlength=len(speed),
    )
    below = np.array([True, False, True, False, True, False])
    assert np.all(counts[~below] == 0)
    probability = np.where(below, speed / speed[below].sum(), 0.0)
    for n in np.flatnonzero(below):
        assert binomial_within(counts[n], draws, probability[n], int(below.sum()))
    delta = probability - speed / speed.sum()
    assert np.array_equal(delta > 0, below)
    # "<=" takes the server at the mean; equal estimates leave the strict set empty
    assert below_average_server(everyone, 0, len(speed), estimate, speed, False, True, rng) in (0, 1, 2, 4)
    assert any(
        below_average_server(everyone, 0, len(speed), estimate, speed, False, True, rng) == 1 for _ in range(200)
    )
    assert below_average_server(everyone, 0, len(speed), np.full(6, 4, dtype=np.int64), speed, True, False, rng) == -1
    # on a subset of candidates the mean is theirs: of servers 3, 1, 5 (mean 5) only server 1 is below
    subset = np.array([9, 3, 1, 5])
    assert {below_average_server(subset, 1, 4, estimate, speed, False, False, rng) for _ in range(50)} == {1}


def test_l_jba_and_weighted_random_preferences():
    speed = [2.0, 2.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5]
    system = SlottedSystem.from_speeds(speed, dispatchers=3, load=0.8)
    jba = simulate_slotted(system, "l-jba", slots=10_000, seed=12, preference=True, p_hat=0.2).preference
    assert jba["tilted"] and jba["delta_tilted"]
    run = simulate_slotted(system, "weighted-random", slots=20_000, seed=12, preference=True, batches=40).runs[0]
    for r in range(len(speed)):  # routing independent of the queues: Delta = 0
        assert abs(run.preference["delta"][r]) <= bonferroni_t_halfwidth(
            run.preference_samples[:, r], FAMILY_ALPHA, len(speed)
        )
    assert run.preference["tilted"] and not run.preference["delta_tilted"]


# ------------------------------------------------------------------------------------------------
# results, seeds, registry


def test_same_seed_same_result_and_the_estimator_does_not_move_the_sample_path():
    system = SlottedSystem.from_speeds([1.0, 0.5, 0.5], dispatchers=2, load=0.7)
    first = simulate_slotted(system, "l-pod", slots=3000, seed=13, replications=2, p_hat=0.2)
    again = simulate_slotted(system, "l-pod", slots=3000, seed=13, replications=2, p_hat=0.2, preference=True)
    for a, b in zip(first.runs, again.runs):
        assert np.array_equal(a.mean_queue_length, b.mean_queue_length) and a.messages == b.messages
    assert first.runs[0].mean_delay != first.runs[1].mean_delay


def test_result_serialises_with_its_metadata():
    system = SlottedSystem.from_speeds([1.0, 0.5], dispatchers=2, load=0.5, dispatcher_share=[3, 1])
    result = simulate_slotted(
        system, "l-jsq", slots=2000, replications=2, seed=14, preference=True, increment_on_dispatch=True
    )
    data = json.loads(result.to_json())
    assert data["metadata"]["model"] == "slotted"
    assert data["metadata"]["policy"]["increment_on_dispatch"] is True
    assert data["metadata"]["system"]["dispatcher_share"] == [0.75, 0.25]
    assert data["preference"]["tilted"] in (True, False) and len(data["runs"]) == 2
    assert result.slots_per_second > 0 and data["mean_delay"] == pytest.approx(result.mean_delay)


# ------------------------------------------------------------------------------------------------
# input errors: one line naming the field and the rule

SYSTEM_ERRORS = [
    (dict(speeds=[1.0, -1.0], load=0.5), "speeds", "> 0"),
    (dict(speeds=[1.0], load=0.5, dispatchers=0), "dispatchers", ">= 1"),
    (dict(speeds=[1.0, 1.0], load=1.0), "load", "load < 1"),
    (dict(speeds=[1.0, 1.0], arrival_rate=2.5), "arrival_rate", "load < 1"),
    (dict(speeds=[1.0], load=0.5, arrival_rate=0.5), "arrival_rate", "exactly one"),
    (dict(speeds=[3.0], load=0.8, arrivals="bernoulli"), "arrivals", "mean <= 1"),
    (dict(speeds=[2.0], load=0.5, service="bernoulli"), "service", "mean <= 1"),
    (dict(speeds=[1.0], load=0.5, service="binomial:x"), "trials", "integer"),
    (dict(speeds=[1.0], load=0.5, arrivals="geometric"), "distribution", "poisson, bernoulli, binomial"),
    (dict(speeds=[1.0], load=0.5, routing="batch"), "routing", "slot, job"),
    (dict(speeds=[1.0], load=0.5, ties="lowest-index"), "ties", "independent, shared"),
    (dict(speeds=[1.0], load=0.5, dispatchers=2, dispatcher_share=[1.0]), "dispatcher_share", "one share"),
]


@pytest.mark.parametrize("kwargs, field, rule", SYSTEM_ERRORS)
def test_system_input_errors(kwargs, field, rule):
    kwargs = dict(kwargs)
    with pytest.raises(InputError) as error:
        SlottedSystem.from_speeds(kwargs.pop("speeds"), **kwargs)
    assert error.value.field == field and rule in error.value.rule and "\n" not in str(error.value)


SIMULATE_ERRORS = [
    (("jfsq",), {}, "policy", "no rule in the slotted model"),
    (("l-jsq",), {"p_hat": 0.0}, "policy l-jsq.p_hat", "(0, 1]"),
    (("l-jsq",), {"update": "poll"}, "policy l-jsq.update", "push, pull"),
    (("l-jsq",), {"push_d": 0}, "policy l-jsq.push_d", ">= 1"),
    (("l-pod",), {"pull_trigger": "arrival"}, "policy l-pod.pull_trigger", "departure-slot"),
    (("l-jba",), {"empty_set": "random"}, "policy l-jba.empty_set", "weighted-random, l-jsq"),
    (("l-jsq",), {"increment_on_dispatch": 1}, "policy l-jsq.increment_on_dispatch", "true or false"),
    (("l-jsq",), {"average": "plain"}, "policy l-jsq", "no parameter 'average'"),
    (("jsq",), {"slots": 10, "batches": 20}, "slots", "number of batches"),
    (("jsq",), {"warmup": -1}, "warmup", ">= 0"),
    (("jsq",), {"seed": -3}, "seed", ">= 0"),
    (("random",), {}, "policy", "random is unstable"),
]


@pytest.mark.parametrize("args, kwargs, field, rule", SIMULATE_ERRORS)
def test_simulate_input_errors(args, kwargs, field, rule):
    system = SlottedSystem.from_speeds([2.0, 0.2], load=0.5)
    with pytest.raises(InputError) as error:
        simulate_slotted(system, *args, **kwargs)
    assert error.value.field == field and rule in error.value.rule and "\n" not in str(error.value)


def test_models_do_not_mix():
    with pytest.raises(InputError, match="slotted model"):
        hetlb.simulate(hetlb.System.from_speeds([1.0, 1.0], load=0.5), "l-jsq")
    with pytest.raises(InputError, match="SlottedSystem"):
        simulate_slotted(hetlb.System.from_speeds([1.0, 1.0], load=0.5), "jsq")


def test_command_line(capsys):
    from hetlb.cli import main

    argv = [
        "simulate",
        "--model",
        "slotted",
        "--speeds",
        "4x1,4x0.5",
        "--dispatchers",
        "2",
        "--load",
        "0.8",
        "--policy",
        "l-pod",
        "--d",
        "2",
        "--update",
        "pull",
        "--p-hat",
        "0.5",
        "--increment-on-dispatch",
        "--slots",
        "2000",
        "--seed",
        "3",
        "--ties",
        "shared",
    ]
    assert main(argv + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["metadata"]["policy"] == {
        **hetlb.make_policy("l-pod").params,
        "d": 2,
        "update": "pull",
        "p_hat": 0.5,
        "increment_on_dispatch": True,
        "id": "l-pod",
    }
    assert out["metadata"]["system"]["dispatchers"] == 2 and out["runs"][0]["slots"] == 2000
    assert out["metadata"]["system"]["ties"] == "shared"
    assert main(argv) == 0 and "mean delay (slots)" in capsys.readouterr().out
    assert main(argv + ["--buffer", "3"]) == 2
    assert capsys.readouterr().err.startswith("hetlb: error: --buffer: unknown key; allowed: ")
