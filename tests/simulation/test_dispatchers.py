"""M dispatchers in continuous time (hetlb.simulation.dispatchers): against the single-dispatcher
kernel bit for bit, message counts against their closed forms, the herd of uniform routing
against its closed form, and invariants on every sample path.

Intervals are Student-t over replications (or binomial for counts), Bonferroni-corrected over
the comparisons of this file (FAMILY_ALPHA).
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import hetlb
from hetlb.errors import InputError
from hetlb.kernels import dispatchers as kernel
from hetlb.policies import POLICIES
from hetlb.policies.choice import ON_ESTIMATES
from hetlb.simulation import continuous as single
from hetlb.simulation import dispatchers as simulation
from hetlb.simulation.batch_servers import no_slots
from hetlb.simulation.options import RunOptions

from support.statistics import bonferroni_t_halfwidth

FAMILY_ALPHA = 0.01
COMPARISONS = 9
"""push 1, pull 1, herd 2, split 3, exponential delays' overtaking 1, late answers 1."""
SINGLE_POLICIES = [spec.id for spec in POLICIES.values() if spec.code in ON_ESTIMATES and "continuous" in spec.models]
TWIN = {"l-jsq": ("jsq", {}), "l-pod": ("pod", {"d": 2})}
"""LED policies that decide as a single-dispatcher policy does when they know the truth."""


def same_results(a, b) -> None:
    ra, rb = a.runs[0], b.runs[0]
    for name in ("mean_response_time", "mean_waiting_time", "p_wait", "blocking_probability", "mean_number_in_system"):
        assert getattr(ra, name) == getattr(rb, name) or (
            math.isnan(getattr(ra, name)) and math.isnan(getattr(rb, name))
        ), name
    assert ra.events == rb.events
    np.testing.assert_array_equal(ra.histogram, rb.histogram)
    np.testing.assert_array_equal(ra.utilisation, rb.utilisation)
    np.testing.assert_array_equal(ra.peak_queue_length, rb.peak_queue_length)
    assert ra.batch_response_means == rb.batch_response_means or np.allclose(
        ra.batch_response_means, rb.batch_response_means, equal_nan=True, rtol=0, atol=0
    )


SYSTEMS = {
    "complete": dict(speeds=[2.0, 1.0, 1.0, 0.5] * 3, load=0.45),
    "sparse-buffers": dict(
        speeds=[1.5, 1.0, 1.0, 0.5, 2.0], load=0.9, graph=[[0, 1, 2], [1, 2, 3, 4], [4]], buffer=[2, 3, 4, 2, 3]
    ),
}


@pytest.mark.parametrize("update", ["exact", "increment,piggyback"])
@pytest.mark.parametrize("path", ["scan", "tree"])
@pytest.mark.parametrize("name", list(SYSTEMS))
@pytest.mark.parametrize("policy", SINGLE_POLICIES + list(TWIN))
def test_one_dispatcher_that_knows_the_truth_is_the_single_kernel(policy, name, path, update, monkeypatch):
    """M = 1 with exact knowledge, or with its own dispatches and every response (no delay): bit
    for bit the single kernel's results (its tree path, not its key buckets, which order ties
    otherwise)."""
    monkeypatch.setattr(single, "TREE_MIN_SERVERS", 10**9 if path == "scan" else 1)
    monkeypatch.setattr(single, "BUCKET_MAX_CLASSES", -1)
    system = hetlb.System.from_speeds(**SYSTEMS[name])
    twin, params = TWIN.get(policy, (policy, {}))
    if policy == "random" and name == "complete":
        system = hetlb.System.from_speeds(SYSTEMS[name]["speeds"], load=0.2)
    try:
        expected = hetlb.simulate(system, twin, jobs=3000, warmup=5.0, seed=7, **params)
    except InputError:
        pytest.skip(f"{twin} is unstable on {name}")
    got = hetlb.simulate(system, policy, jobs=3000, warmup=5.0, seed=7, dispatchers=1, update=update, **params)
    same_results(expected, got)
    assert got.mean_estimate_error == 0.0


def test_push_messages_match_their_closed_form():
    """push: 2 d messages per push, a push with probability p_hat per decision."""
    system = hetlb.System.from_speeds([1.0] * 10, load=0.7)
    p_hat, d = 0.3, 3
    result = hetlb.simulate(system, "l-jsq", dispatchers=3, update=f"push:p_hat={p_hat}:d={d}", jobs=20_000, seed=2)
    run = result.runs[0]
    assert run.messages["push"] % (2 * d) == 0
    pushes = run.messages["push"] // (2 * d)
    interval = stats.binomtest(pushes, run.arrivals, p_hat).proportion_ci(1 - FAMILY_ALPHA / COMPARISONS)
    assert interval.low <= p_hat <= interval.high


def test_pull_and_piggyback_messages_per_job():
    """pull: p_hat per departure, so p_hat per admitted job; piggyback: one per completion or
    rejection, so the arrivals of the window plus the jobs in system at its start minus those at
    its end (at most the sum of the buffers)."""
    system = hetlb.System.from_speeds([1.0, 2.0, 0.5, 1.0], load=0.8, buffer=3)
    result = hetlb.simulate(
        system, "l-jba", dispatchers=2, update="piggyback,pull:p_hat=0.4", jobs=10_000, seed=3, replications=8
    )
    samples = [run.messages_per_job["pull"] / (1.0 - run.blocking_probability) for run in result.runs]
    assert abs(np.mean(samples) - 0.4) <= bonferroni_t_halfwidth(samples, FAMILY_ALPHA, COMPARISONS)
    for run in result.runs:
        assert abs(run.messages["piggyback"] - run.arrivals) <= system.buffer.sum()


@pytest.mark.parametrize("timing", ["aligned", "independent"])
def test_snapshot_messages_are_n_per_dispatcher_per_tau(timing):
    """Periodic polls: M N messages per tau (aligned: at k tau; independent: each dispatcher at
    its phase + k tau), counted over the measured window."""
    system = hetlb.System.from_speeds([1.0] * 6, load=0.6)
    tau, m = 0.7, 3
    result = hetlb.simulate(
        system, "jsq", dispatchers=m, update=f"snapshot:tau={tau}:phases={timing}", jobs=5000, warmup=3.0, seed=4
    )
    run = result.runs[0]
    window = (3.0, 3.0 + run.measured_time)
    polls = math.floor(window[1] / tau) - math.ceil(window[0] / tau) + 1
    if timing == "aligned":
        assert run.messages["snapshot"] == m * 6 * polls
    else:  # each dispatcher polls floor or ceil of (window / tau) times
        assert abs(run.messages["snapshot"] / (6 * m) - run.measured_time / tau) <= 1
    assert run.snapshot_events >= polls


@pytest.mark.parametrize("policy,per_decision", [("jsq", 2 * 7), ("pod", 2 * 2)])
def test_true_probes_cost_two_messages_per_server_asked(policy, per_decision):
    system = hetlb.System.from_speeds([1.0] * 7, load=0.6)
    result = hetlb.simulate(system, policy, dispatchers=4, update="probe", jobs=3000, seed=5)
    run = result.runs[0]
    assert run.messages["probe"] == per_decision * run.arrivals
    assert run.mean_estimate_error == 0.0


def test_herd_of_uniform_routing_matches_its_closed_form():
    """Uniform routing over N servers: decisions for a server are Poisson of rate lambda / N and the
    previous one was another dispatcher's with probability (M - 1) / M, so a fraction
    (1 - exp(-lambda w / N)) (M - 1) / M of the decisions herd within a window w."""
    n, m, window = 8, 4, 0.5
    system = hetlb.System.from_speeds([1.0] * n, load=0.5)
    result = hetlb.simulate(
        system,
        "random",
        dispatchers=m,
        update="probe",
        herd_window=window,
        jobs=20_000,
        warmup=10.0,
        seed=6,
        replications=6,
    )
    expected = (1 - math.exp(-system.total_arrival_rate * window / n)) * (m - 1) / m
    samples = [run.herd_fraction for run in result.runs]
    assert abs(np.mean(samples) - expected) <= bonferroni_t_halfwidth(samples, FAMILY_ALPHA, COMPARISONS)
    same = [run.herd_same_fraction for run in result.runs]
    expected_same = (1 - math.exp(-system.total_arrival_rate * window / n)) / m
    assert abs(np.mean(same) - expected_same) <= bonferroni_t_halfwidth(same, FAMILY_ALPHA, COMPARISONS)


def test_split_by_rates_sends_each_dispatcher_its_share():
    system = hetlb.System.from_speeds([1.0] * 5, load=0.5)
    shares = [0.1, 0.6, 0.3]
    result = hetlb.simulate(system, "l-jsq", dispatchers=3, dispatcher_share=shares, update="pull", jobs=20_000, seed=8)
    decisions = np.array(result.runs[0].decisions_by_dispatcher)
    total = decisions.sum()
    for count, share in zip(decisions, shares):
        interval = stats.binomtest(int(count), int(total), share).proportion_ci(1 - FAMILY_ALPHA / COMPARISONS)
        assert interval.low <= share <= interval.high


def step_events(system, policy, update, dispatchers, events, seed):
    """Run a dispatcher kernel one event at a time; yield (model, state, dispatcher model, state)."""
    policy_object = hetlb.make_policy(policy)
    updates = simulation.Updates.parse(update)
    model = single.pack_model(
        system, policy_object, RunOptions(jobs=10**9, occupancy_levels=3, dispatchers=dispatchers)
    )
    rates = simulation.source_rates(system, dispatchers, None)
    dispatcher_model = simulation.pack_dispatchers(system, policy_object, model, updates, rates, 0.1)
    state = single.new_state(model, system.n_servers, events)
    dispatcher_state = simulation.new_dispatcher_state(model, dispatcher_model, system.n_servers, len(state.job_next))
    streams = [np.random.Generator(np.random.PCG64(s)) for s in np.random.SeedSequence(seed).spawn(3)]
    dispatcher_model = simulation.first_snapshot(dispatcher_model, dispatcher_state.counters, streams[2])
    state.counters[0]["window_end"] = np.inf
    state.counters[0]["next_arrival"] = streams[0].exponential() / system.total_arrival_rate
    for _ in range(events):
        before = int(state.counters[0]["arrivals_total"])
        status = kernel.advance(model, state, dispatcher_model, dispatcher_state, *no_slots(), *streams, 1)
        assert status == kernel.RUNNING
        arrived = int(state.counters[0]["arrivals_total"]) > before
        yield state, dispatcher_state, int(state.trace_server[state.counters[0]["trace_n"] - 1]) if arrived else -1


@st.composite
def small_systems(draw):
    n_servers = draw(st.integers(1, 5))
    n_types = draw(st.integers(1, 3))
    speed = draw(st.lists(st.sampled_from([0.5, 1.0, 2.0]), min_size=n_servers, max_size=n_servers))
    graph = [sorted(draw(st.sets(st.integers(0, n_servers - 1), min_size=1))) for _ in range(n_types)]
    buffer = draw(st.lists(st.integers(1, 3), min_size=n_servers, max_size=n_servers))
    return hetlb.System.from_speeds(speed, load=draw(st.floats(0.3, 1.5)), graph=graph, buffer=buffer)


UPDATES = st.sampled_from(
    [
        "piggyback",
        "increment,pull:p_hat=0.5",
        "push:p_hat=0.7:d=2:mean_delay=0.3",
        "snapshot:tau=0.5:phases=independent:delay=0.2",
        "pull:p_hat=1:mean_delay=1",
        "probe",
    ]
)


@settings(max_examples=30, deadline=None)
@given(
    system=small_systems(),
    policy=st.sampled_from([spec.id for spec in POLICIES.values() if spec.code in ON_ESTIMATES]),
    update=UPDATES,
    dispatchers=st.integers(1, 4),
    seed=st.integers(0, 2**31),
)
def test_never_incompatible_never_past_a_buffer(system, policy, update, dispatchers, seed):
    result = hetlb.simulate(system, policy, dispatchers=dispatchers, update=update, jobs=200, seed=seed, trace=200)
    run = result.runs[0]
    trace = run.trace
    for job_type, server in zip(trace["job_type"], trace["server"]):
        assert server in system.graph.servers_of(int(job_type))
    assert np.all(run.peak_queue_length <= system.buffer)
    assert run.counters["arrivals"] == run.counters["admitted"] + run.counters["blocked"]


@settings(max_examples=15, deadline=None)
@given(system=small_systems(), dispatchers=st.integers(1, 3), seed=st.integers(0, 2**31))
def test_estimates_equal_the_truth_right_after_a_zero_delay_update(system, dispatchers, seed):
    """A push of every server after each decision (no delay): the deciding dispatcher's estimates
    are the truth after the event; a pull of p_hat = 1: every departure's server is known to its
    dispatcher."""
    n = system.n_servers
    for state, dispatcher_state, server in step_events(system, "l-jsq", f"push:p_hat=1:d={n}", dispatchers, 300, seed):
        if server >= 0:
            decided = dispatcher_state.last_decision_dispatcher[server]
            np.testing.assert_array_equal(dispatcher_state.estimate[decided], state.servers["queue_len"])
    for state, dispatcher_state, _ in step_events(system, "l-jsq", "pull:p_hat=1", dispatchers, 300, seed):
        served = dispatcher_state.estimate_time == state.counters[0]["now"]  # what the event just told
        for m, s in zip(*np.nonzero(served)):
            assert dispatcher_state.estimate[m, s] == state.servers["queue_len"][s]


def test_bad_inputs_are_one_line_errors():
    system = hetlb.System.from_speeds([1.0] * 4, load=0.5)
    for kwargs, field in (
        (dict(update="push:p_hat=0"), "update.push.p_hat"),
        (dict(update="teleport"), "update"),
        (dict(update="probe,pull"), "update"),
        (dict(update="increment:delay=1"), "update.increment"),
        (dict(update="pull:delay=1:mean_delay=1"), "update.pull"),
        (dict(dispatchers=0), "dispatchers"),
        (dict(dispatchers=2, dispatcher_share=[0.5, 0.6]), "dispatcher_share"),
        (dict(herd_window=-1.0), "herd_window"),
    ):
        with pytest.raises(InputError) as error:
            hetlb.simulate(system, "l-jsq", jobs=100, **kwargs)
        assert error.value.field == field
    with pytest.raises(InputError, match="parameter of the slotted model"):
        hetlb.simulate(system, "l-jsq", jobs=100, dispatchers=2, p_hat=0.5)
    with pytest.raises(InputError, match="does not decide on estimates"):
        hetlb.simulate(system, "jsq-df-ds", jobs=100, dispatchers=2)


def test_same_seed_same_results():
    system = hetlb.System.from_speeds([1.0, 0.5, 2.0], load=0.7)
    runs = [
        hetlb.simulate(system, "l-pod", dispatchers=3, update="pull:p_hat=0.5:mean_delay=0.2", jobs=2000, seed=9)
        for _ in range(2)
    ]
    assert runs[0].to_dict()["runs"][0]["mean_response_time"] == runs[1].to_dict()["runs"][0]["mean_response_time"]
    assert runs[0].runs[0].messages == runs[1].runs[0].messages


def test_scenario_keys_and_the_command_line_give_the_python_api_result(tmp_path, capsys):
    import json

    from hetlb.cli import main
    from hetlb.scenario import Scenario

    expected = hetlb.simulate(
        hetlb.System.from_speeds([1.0, 1.0, 0.5, 0.5], load=0.7),
        "l-jsq",
        dispatchers=2,
        dispatcher_share=[0.25, 0.75],
        update="piggyback,push:p_hat=0.2:d=2:mean_delay=0.1",
        herd_window=0.3,
        jobs=2000,
        seed=4,
    )
    table = {
        "system": {"speeds": "2x1.0,2x0.5", "load": 0.7, "dispatchers": 2, "dispatcher_share": [0.25, 0.75]},
        "policy": {"id": "l-jsq", "update": {"piggyback": {}, "push": {"p_hat": 0.2, "d": 2, "mean_delay": 0.1}}},
        "run": {"jobs": 2000, "seed": 4, "herd_window": 0.3},
    }
    got = Scenario.from_mapping(table).simulate()
    assert got.mean_response_time == expected.mean_response_time
    assert got.runs[0].messages == expected.runs[0].messages
    argv = ["simulate", "--speeds", "2x1.0,2x0.5", "--load", "0.7", "--policy", "l-jsq", "--dispatchers", "2"]
    argv += ["--update", "piggyback,push:p_hat=0.2:d=2:mean_delay=0.1", "--jobs", "2000", "--seed", "4"]
    assert main([*argv, "--json", "-q"]) == 0
    printed = json.loads(capsys.readouterr().out)
    equal_split = hetlb.simulate(
        hetlb.System.from_speeds([1.0, 1.0, 0.5, 0.5], load=0.7),
        "l-jsq",
        dispatchers=2,
        update="piggyback,push:p_hat=0.2:d=2:mean_delay=0.1",
        jobs=2000,
        seed=4,
    )
    assert printed["mean_response_time"] == equal_split.mean_response_time
    assert printed["messages_per_job"] == equal_split.messages_per_job
    assert main(argv) == 0
    assert "herd fraction" in capsys.readouterr().out
    assert main([*argv[:-4], "--update", "push:p_hat=2", "--jobs", "100"]) == 2
    assert capsys.readouterr().err.strip() == "hetlb: error: --update push.p_hat: must be a number in (0, 1], got 2"


def test_messages_in_flight_beyond_their_first_segment_and_their_age():
    """Snapshots every 0.1 delayed by 5: about M N 50 = 4,000 messages in flight, past the segment
    of 2 M N the kind starts with; every estimate then holds an observation at least 5 old."""
    system = hetlb.System.from_speeds([1.0] * 20, load=0.6)
    result = hetlb.simulate(
        system, "jsq", dispatchers=4, update="snapshot:tau=0.1:delay=5", jobs=5000, warmup=10.0, seed=3
    )
    run = result.runs[0]
    assert run.mean_estimate_age >= 5.0
    assert run.messages["snapshot"] % (4 * 20) == 0
    assert run.stale_messages == 0  # a constant delay delivers in the order of sending


def test_exponential_delays_overtake_as_independent_exponentials_do():
    """Exponential delays drawn per kind (an exponential time of rate P / d to the next delivery,
    one of the P in flight chosen uniformly) are, in law, an independent Exp(mean d) delay per
    message: checked by how often a message arrives after a later one (and is dropped as stale).
    One server at load rho (M/M/1): by Burke's theorem its departures, each a pull message, are
    Poisson of rate lambda, so a message of delay D is overtaken by a Poisson number of later
    ones, of mean lambda (D - d (1 - exp(-D / d))); it arrives fresh with probability
    E[exp(-lambda d (x - 1 + exp(-x)))], x = D / d ~ Exp(1). A FIFO of the messages would give 0."""
    from scipy import integrate

    arrival_rate, mean_delay = 0.5, 2.0
    a = arrival_rate * mean_delay
    fresh, _ = integrate.quad(lambda x: math.exp(-x - a * (x - 1.0 + math.exp(-x))), 0.0, math.inf)
    system = hetlb.System.from_speeds([1.0], arrival_rate=arrival_rate)
    result = hetlb.simulate(
        system,
        "l-jsq",
        dispatchers=1,
        update=f"pull:p_hat=1:mean_delay={mean_delay}",
        jobs=20_000,
        warmup=50.0,
        replications=10,
        seed=12,
    )
    samples = [1.0 - run.stale_messages / (run.stale_messages + run.delivered_messages) for run in result.runs]
    assert abs(np.mean(samples) - fresh) <= bonferroni_t_halfwidth(samples, FAMILY_ALPHA, COMPARISONS)


def test_a_counting_dispatcher_with_late_answers_holds_a_proxys_in_flight_count():
    """increment and piggyback with a constant delay L, one dispatcher (a proxy counting its
    requests in flight, each answer reaching it L after the departure): a server's estimate is its
    number in system plus its departures of the last L, never less, so its error is never
    negative; the arrivals sample the servers in turn, so by PASTA the mean error is the mean
    departure rate per server times L, lambda L / N."""
    lag = 0.3
    system = hetlb.System.from_speeds([2.0, 1.0, 1.0, 0.5, 0.5, 1.0], load=0.8)
    result = hetlb.simulate(
        system,
        "jfsq",
        dispatchers=1,
        update=f"increment,piggyback:delay={lag}",
        jobs=20_000,
        warmup=20.0,
        replications=8,
        seed=13,
    )
    for run in result.runs:
        assert run.mean_estimate_error == run.mean_estimate_bias > 0.0
    expected = system.total_arrival_rate * lag / system.n_servers
    samples = [run.mean_estimate_bias for run in result.runs]
    assert abs(np.mean(samples) - expected) <= bonferroni_t_halfwidth(samples, FAMILY_ALPHA, COMPARISONS)


@pytest.mark.parametrize(
    "update", ["piggyback:delay=0.4,push:p_hat=0.5:d=3:mean_delay=0.3", "snapshot:tau=0.2:mean_delay=3"]
)
def test_results_do_not_depend_on_the_room_messages_start_with(update, monkeypatch):
    """The segments of messages in flight grow as they fill (their rings unrolled, their pools in
    order): a run that starts them at one entry gives the same results, bit for bit."""
    system = hetlb.System.from_speeds([1.0, 0.5, 2.0, 1.0, 1.0], load=0.8)
    runs = []
    for capacity in (simulation.MIN_FLIGHT_CAPACITY, 1):
        monkeypatch.setattr(simulation, "MIN_FLIGHT_CAPACITY", capacity)
        runs.append(hetlb.simulate(system, "l-jsq", dispatchers=3, update=update, jobs=3000, seed=13))
    same_results(*runs)
    for name in ("messages", "stale_messages", "delivered_messages", "mean_estimate_error", "mean_estimate_age"):
        assert getattr(runs[0].runs[0], name) == getattr(runs[1].runs[0], name), name
