"""Limits: inputs that once crashed, hung or filled the memory give one line (or a correct result),
every run is bounded in time and memory before it starts, and results say when their measurement
window is too short to trust.

Every case here is refused before it runs, or is small: none may hang or allocate much."""

import json
import math
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import hetlb
from hetlb import InputError, validation
from hetlb.cli import main
from hetlb.cli.flags import flag_field
from hetlb.errors import one_line
from hetlb.simulation import continuous
from hetlb.simulation.options import RunOptions
from hetlb.theory import exact


def run_cli(capsys, *argv):
    """(exit status, stdout, stderr) of ``hetlb ARGV`` run in this process."""
    try:
        status = main([str(arg) for arg in argv])
    except SystemExit as stop:  # argparse's usage errors
        status = stop.code
    out, err = capsys.readouterr()
    return status, out, err


def refused(capsys, field, *argv, words=""):
    """``hetlb ARGV`` exits 2 with one short line naming ``field`` (and ``words``), nothing else:
    by the flag that set it when the user typed one (flag_field, tests/cli/test_input_errors.py)."""
    status, out, err = run_cli(capsys, *argv)
    lines = err.strip().splitlines()
    assert status == 2, err
    assert len(lines) == 1 and len(lines[0]) < 450, err
    assert lines[0].startswith(f"hetlb: error: {flag_field(field, [str(arg) for arg in argv])}: "), lines[0]
    assert words in lines[0]
    assert "Traceback" not in err and "Warning" not in err and out == ""
    return lines[0]


# --- valid input that crashed ---------------------------------------------------------------------


def test_a_horizon_before_the_first_arrival_gives_a_result_and_a_warning(capsys):
    status, out, err = run_cli(capsys, "simulate", "--speeds", "2,1", "--load", "0.5", "--horizon", "1e-9", "--json")
    assert status == 0
    result = json.loads(out)
    assert result["mean_response_time"] is None and result["littles_law_gap"] is None
    assert result["warnings"] == ["no job was measured in the window (1e-09 time units); lengthen the horizon"]
    assert err == f"hetlb: warning: {result['warnings'][0]}\n"


@pytest.mark.parametrize(
    "argv,field,words",
    [
        (["simulate", "--speeds", "1e-300", "--load", "0.5", "--jobs", "20"], "speed", "[1e-100, 1e+100]"),
        (["simulate", "--speeds", "1e300", "--load", "0.5", "--jobs", "20"], "speed", "[1e-100, 1e+100]"),
        (["exact", "--speeds", "4x1,4x0.5", "--load", "0.8", "--buffer", "3", "--policy", "l-jsq"], "policy", ""),
        (
            ["exact", "--speeds", "2000x1", "--load", "0.6", "--buffer", "2", "--policy", "jsq-lisf"],
            "buffer",
            "about 2.4e5736 states",
        ),
        (["bound", "--speeds", "2,1,0.5", "--arrival-rate", "5e-324"], "arrival_rate", "[1e-100, 1e+100]"),
        (
            ["diffusion", "--speed-distribution", "uniform:low=0.7,high=1.3", "--excess-capacity", "1e-308"],
            "excess_capacity",
            "must be 0 or of magnitude in [1e-100, 1e+100]",
        ),
        (["diffusion", "--speeds", "1,1", "--excess-capacity", "1e-100"], "excess_capacity", "steps"),
        (["exact", "--speeds", "1e-100,1e100", "--arrival-rate", "1", "--buffer", "2"], "speed", "too far apart"),
    ],
)
def test_valid_input_that_crashed_gives_one_line(capsys, argv, field, words):
    refused(capsys, field, *argv, words=words)


def test_the_speed_bound_of_the_smallest_and_largest_rates_is_exact():
    from hetlb.theory import speed_lower_bound_arrays

    assert speed_lower_bound_arrays([2.0, 1.0, 0.5], 1e-100).lower_bound == 0.5  # C*/lambda -> 1 / fastest speed
    assert speed_lower_bound_arrays([1e-100] * 3, 1e-100).lower_bound == pytest.approx(1e100)
    with pytest.raises(InputError, match="total_arrival_rate"):
        speed_lower_bound_arrays([2.0, 1.0, 0.5], 5e-324)


# --- huge and tiny numbers ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv,field,words",
    [
        (["simulate", "--speeds", "1", "--load", "0.5", "--jobs", 2**64], "run.jobs", "<= 2^62"),  # the scenario's
        (["simulate", "--speeds", "1", "--load", "0.5", "--buffer", 2**63], "buffer", "<= 2^62"),
        (["exact", "--speeds", "1", "--load", "0.5", "--buffer", 2**63], "buffer", "<= 2^62"),
        (["simulate", "--speeds", "99999999999999999999x1", "--load", "0.5"], "speeds", "<= 2^62"),
        (["simulate", "--speeds", "1", "--load", "0.5", "--replications", 10**20], "run.replications", "<= 2^62"),
        (
            ["simulate", "--speeds", "1", "--load", "0.5", "--jobs", 20, "--replications", 10**12],
            "replications",
            "memory",
        ),
        (["simulate", "--speeds", "1", "--load", "0.5", "--speed-bins", 10**12], "speed_bins", "memory"),
        (["simulate", "--speeds", "1", "--load", "0.5", "--jobs", 10**15], "jobs", "events"),
        (["simulate", "--speeds", "1", "--load", "0.5", "--horizon", "1e15"], "horizon", "events"),
        (["simulate", "--speeds", "1", "--load", "0.5", "--warmup", "1e300"], "warmup", "events"),
        (["simulate", "--speeds", "1", "--arrival-rate", "1e-90", "--jobs", "50"], "jobs", "float64 times"),
        (["simulate", "--speeds", "1", "--load", "5e-324", "--jobs", "50"], "arrival_rate", "[1e-100, 1e+100]"),
        (["simulate", "--speeds", "10", "--load", "1e308", "--buffer", "1"], "arrival_rate", "finite"),
        (
            ["simulate", "--speeds", "2,1", "--load", "0.5", "--graph", "random:p=0.1,ports=100000000000"],
            "system.graph.ports",
            "1e+11 ports needs",
        ),
        (
            ["simulate", "--speeds", "2,1", "--load", "0.5", "--graph", "fig3:ports_exponent=50"],
            "system.graph.ports_exponent",
            "1.1e+15 ports needs",
        ),
        (
            ["graph", "--speeds", "1000x1", "--load", "0.5", "--graph", "fig3:ports_exponent=5000"],
            "system.graph.ports_exponent",
            "memory",
        ),
        (
            ["simulate", "--speeds", "1", "--load", "0.5", "--job-sizes", "hyperexponential", "--scv", "1e300"],
            "job_sizes.scv",
            "(1, 1e+08]",
        ),
        (["simulate", "--model", "slotted", "--speeds", "10x1", "--load", "0.5", "--slots", 10**14], "slots", "events"),
        (["simulate", "--model", "slotted", "--speeds", "1e12", "--load", "0.5"], "speed", "[1e-100, 1e+09]"),
        (
            ["simulate", "--model", "slotted", "--speeds", "4x1", "--load", "0.5", "--arrivals", f"binomial:{10**20}"],
            "trials",
            "[1, 1000000000]",
        ),
        (["diffusion", "--speeds", "1,2", "--paths", 10**14], "paths", "steps of work"),
        (["diffusion", "--speeds", "1,2", "--buffer", 10**20], "buffer", "<= 2^62"),
        (["simulate", "--speeds", "2,1", "--load", "0.5", "--policy", "pod", "--d", 10**20], "policy pod.d", "2^62"),
        (["tune", "--speeds", "2,1", "--load", "0.5", "--d-fast", 10**20], "policy jsq-df-ds.d_fast", "2^62"),
    ],
)
def test_huge_and_tiny_numbers_give_one_line(capsys, argv, field, words):
    refused(capsys, field, *argv, words=words)


def test_a_graph_beyond_the_memory_limit_is_refused_before_sampling(capsys, monkeypatch):
    monkeypatch.setattr(validation, "memory_limit", lambda: 2**30)
    argv = ["graph", "--speeds", "1000x1", "--load", "0.5", "--graph", "random:p=0.5,ports=1000000"]
    refused(capsys, "system.graph", *argv, words="a graph of about 5e+08 edges needs about 11.2 GiB")


@pytest.mark.parametrize(
    "argv",
    [
        ["simulate", "--speeds", "2,1", "--load", "0.5", "--jobs", "100", "--policy", "pod", "--d", 2**62],
        [
            "simulate",
            "--speeds",
            "2,1",
            "--load",
            "0.5",
            "--jobs",
            "100",
            "--policy",
            "jsq-df-ds",
            "--set",
            "d_fast=1e24",
        ],
        ["simulate", "--speeds", "2,1", "--load", "0.5", "--buffer", 2**62, "--jobs", "100"],
        [
            "simulate",
            "--model",
            "slotted",
            "--speeds",
            "2,1",
            "--load",
            "0.5",
            "--slots",
            "100",
            "--policy",
            "pod",
            "--d",
            2**62,
        ],
        [
            "simulate",
            "--model",
            "slotted",
            "--speeds",
            "2,1",
            "--load",
            "0.5",
            "--slots",
            "100",
            "--policy",
            "l-pod",
            "--push-d",
            2**62,
        ],
    ],
)
def test_huge_sample_sizes_and_buffers_are_valid(capsys, argv):
    argv = [str(arg) for arg in argv]
    if "d_fast=1e24" in argv:
        argv[argv.index("d_fast=1e24")] = f"d_fast={2**62}"
    status, out, err = run_cli(capsys, *argv, "--quiet", "--json")
    assert status == 0, err
    assert json.loads(out)["replications"] == 1


def test_no_numpy_warning_comes_before_the_error(capsys, recwarn):
    refused(capsys, "arrival_rate", "simulate", "--speeds", "10", "--load", "1e308", "--buffer", "1")
    assert not [warning for warning in recwarn if issubclass(warning.category, RuntimeWarning)]


def test_a_system_beyond_the_memory_limit_is_refused_before_it_is_built(monkeypatch):
    monkeypatch.setattr(validation, "memory_limit", lambda: 2**20)
    with pytest.raises(InputError, match=r"^speeds: a system of 20,000 servers needs about 1.2 MiB") as error:
        hetlb.System.from_speeds("20000x1", load=0.5)
    assert "use fewer servers" in error.value.rule
    with pytest.raises(InputError) as error:
        hetlb.System.from_speeds([1.0, 2.0], load=0.5, n_types=10**6)
    assert error.value.field == "n_types" and "the complete graph of 1,000,000 job types" in error.value.rule


def test_a_file_of_speeds_that_is_no_text_file_is_one_line(capsys, tmp_path):
    utf16 = tmp_path / "speeds.txt"
    utf16.write_text("1\n2\n", encoding="utf-16")
    for path, words in ((utf16, "as text"), ("/dev/zero", "is not a file"), (tmp_path, "is not a file")):
        refused(
            capsys,
            "system.speed_distribution.file",
            *("bound", "--n-servers", "4", "--load", "0.7", "--speed-distribution", f"empirical:file={path}"),
            words=words,
        )


def test_memory_limit_is_a_fraction_of_the_machine():
    limit = validation.memory_limit()
    assert 0 < limit < math.inf
    import os

    assert limit <= validation.MEMORY_FRACTION * os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def test_quantities_and_sizes_read_in_a_few_characters():
    assert validation.quantity(12345) == "12,345"
    assert validation.quantity(3.6e10) == "3.6e+10"
    assert validation.quantity(6**5000) == "5.7e+3890"  # beyond a float, and beyond str() of an int
    assert validation.quantity(math.inf) == "inf"
    assert validation.byte_size(512) == "512 B"
    assert validation.byte_size(3 * 2**30) == "3.0 GiB"
    assert validation.byte_size(7450 * 2**30) == "7,450 GiB"
    assert validation.byte_size(10**5000) == "9.3e+4990 GiB"


def test_counts_stop_at_two_to_the_62():
    assert validation.count("jobs", 2**62) == 2**62
    with pytest.raises(InputError, match=r"jobs: must be an integer <= 2\^62"):
        validation.count("jobs", 2**62 + 1)
    with pytest.raises(InputError, match="jobs: must be an integer >= 1, got 0"):
        validation.count("jobs", 0)


# --- runs that hung or filled the memory ----------------------------------------------------------


@pytest.mark.parametrize(
    "argv,field,words",
    [
        (["simulate", "--speeds", "3", "--arrival-rate", "1e300", "--buffer", "1", "--jobs", "50"], "arrival_rate", ""),
        (
            ["simulate", "--speeds", "3", "--arrival-rate", "2147483648", "--buffer", "1", "--jobs", "50"],
            "arrival_rate",
            "3.6e+10 arrivals",
        ),
        (["simulate", "--speeds", "1", "--arrival-rate", "1e-320", "--jobs", "50"], "arrival_rate", ""),
        (["simulate", "--speeds", "1,1e-12", "--load", "0.5"], "speed", "[2^-30, 2^20]"),
        (["simulate", "--speeds", "1,1e-9", "--load", "0.5"], "speed", "the slowest server"),
        (["diffusion", "--speeds", "20000x1e-3", "--buffer", "1"], "excess_capacity", "6e+09 steps"),
        (
            ["diffusion", "--speed-distribution", "uniform:low=0.7,high=1.3", "--excess-capacity", "0.05"],
            "excess_capacity",
            "6.2e+06 steps",
        ),
        (
            ["exact", "--speeds", "9x1,8x0.5", "--load", "0.8", "--buffer", "1", "--policy", "pod", "--d", "8"],
            "policy",
            "",
        ),
        (["tune", "--speeds", "2,1", "--load", "0.5", "--grid", 10**12], "--grid", "memory"),
        (
            ["graph", "--speeds", "100000x1", "--load", "0.5", "--buffer", "2", "--assumption2"],
            "--assumption2",
            "5e+10 steps",
        ),
        (["tune", "--speeds", "2,1", "--load", "0.5", "--grid", "3000", "--jobs", "10000000"], "jobs", "events"),
    ],
)
def test_former_hangs_are_refused_before_they_run(capsys, argv, field, words):
    refused(capsys, field, *argv, words=words)


def test_blocked_arrivals_within_proportion_still_run():
    system = hetlb.System.from_speeds([3.0], arrival_rate=300.0, buffer=1)
    result = hetlb.simulate(system, "jsq", jobs=200, seed=1)
    assert result.blocking_probability > 0.95 and result.runs[0].counters["arrivals"] > 10_000


def test_run_cost_counts_lost_arrivals_and_the_slowest_server():
    system = hetlb.System.from_speeds([3.0], arrival_rate=3e6, buffer=1)
    cost = continuous.run_cost(system, 50, math.inf, 0.0)
    assert cost.admitted_rate == 3.0 and cost.lost == pytest.approx(50 * (1e6 - 1))
    slow = hetlb.System.from_speeds([1.0, 1e-6], load=0.5)
    largest = math.log(100) + 0.58  # about the largest of 100 exponential sizes
    assert continuous.run_cost(slow, 100, math.inf, 0.0).drain == pytest.approx(2 * 0.5 * (1 + 1e-6) * largest / 1e-6)
    heavy = hetlb.System.from_speeds([1.0], load=0.5, job_sizes=hetlb.JobSizes("hyperexponential", 1e8))
    assert continuous.run_cost(heavy, 10**9, math.inf, 0.0).drain > 1e8  # a size of 1e8 means is expected
    # a job type limited to one slow server admits no more than that server serves
    graph = hetlb.System.from_speeds([1.0, 1.0], arrival_rate=[100.0, 0.5], graph=[[0], [1]], buffer=2)
    assert continuous.run_cost(graph, 100, math.inf, 0.0).admitted_rate == 1.5


def test_a_job_pool_that_would_outgrow_the_memory_is_an_input_error(monkeypatch):
    # arrivals at 5 per time unit to one server of speed 1 with a buffer of a million: the waiting
    # jobs pass the 4,098 slots of the first pool, then the 8,196 of the second, at 72 bytes each
    monkeypatch.setattr(validation, "memory_limit", lambda: 500_000)
    system = hetlb.System.from_speeds([1.0], arrival_rate=5.0, buffer=10**6)
    with pytest.raises(InputError) as error:
        hetlb.simulate(system, "jsq", jobs=20_000, seed=1)
    assert error.value.field == "arrival_rate"
    assert "more than 8,196 jobs waiting at once" in error.value.rule


def test_the_memory_limit_names_the_argument_that_weighs_most(monkeypatch):
    system = hetlb.System.from_speeds([2.0, 1.0], load=0.5)
    monkeypatch.setattr(validation, "memory_limit", lambda: 10**7)
    for keyword, field in (
        (dict(trace=10**6), "trace"),
        (dict(replications=200), "replications"),
        (dict(occupancy_levels=10**6), "occupancy_levels"),
        (dict(batches=100_000), "batches"),
    ):
        with pytest.raises(InputError) as error:
            hetlb.simulate(system, "jsq", jobs=100_000, **keyword)
        assert error.value.field == field, error.value


@pytest.mark.parametrize(
    "speeds,policy,options",
    [
        (np.repeat([1.0, 0.5], [512, 513]), "jsq", {}),  # 1,025 servers: the trees' widest case, 4^5 + 1
        (np.repeat([1.0, 0.5], [512, 513]), "jfsq", dict(state_distribution=True, trace=3000)),  # key buckets
        (np.linspace(0.5, 1.5, 3000), "pod", dict(speed_bins=40, replications=2)),  # a class per server
        (np.linspace(0.5, 1.5, 3000), "jsq-lisf", dict(buffer=2)),
    ],
)
def test_a_simulation_stays_within_its_memory_estimate(speeds, policy, options):
    buffer = options.pop("buffer", None)
    system = hetlb.System.from_speeds(speeds, load=0.8, buffer=buffer)
    hetlb.simulate(system, policy, jobs=100)  # compiled and cached before measuring
    parts = continuous.run_memory(system, hetlb.make_policy(policy), RunOptions(jobs=3000, **options))
    tracemalloc.start()
    try:
        hetlb.simulate(system, policy, jobs=3000, **options)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= sum(parts.values())


def test_jsq_lisf_chains_where_the_iterative_solver_breaks_down_are_solved_without_lu(monkeypatch):
    # 6 servers with buffers of 3: 13,977 (q, idle order) states, where BiCGSTAB from zero breaks
    # down; a sparse LU of this chain took 36 s and its fill grows fast with the states
    def no_lu(*args, **kwargs):
        raise AssertionError("the direct solver was called")

    estimates = []

    def estimate(field, needed, what, advice=""):
        estimates.append(needed)

    monkeypatch.setattr(exact, "spsolve", no_lu)
    monkeypatch.setattr(validation, "check_memory", estimate)
    system = hetlb.System.from_speeds([1.0, 1.0, 1.0, 0.5, 0.5, 0.5], load=0.8, buffer=3)
    tracemalloc.start()
    try:
        solution = hetlb.theory.solve_exact(system, "jsq-lisf")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert solution.n_states == 13_977 and solution.residual <= 1e-9
    assert solution.stationary.sum() == pytest.approx(1.0)
    assert peak <= estimates[-1]  # the chain stays within its memory estimate (the last check)


def test_the_exact_solver_refuses_chains_beyond_its_memory_and_work(monkeypatch):
    system = hetlb.System.from_speeds([1.0] * 9 + [0.5] * 8, load=0.8, buffer=1)
    with pytest.raises(InputError) as error:
        hetlb.theory.solve_exact(system, "pod", d=8)
    assert error.value.field == "policy" and "2e+09" in error.value.rule
    monkeypatch.setattr(validation, "memory_limit", lambda: 10**8)
    with pytest.raises(InputError) as error:
        hetlb.theory.solve_exact(system, "jsq")
    assert error.value.field == "buffer" and "131,072 states" in error.value.rule


def test_a_large_chain_the_iterative_solver_cannot_solve_is_refused_not_factorised(monkeypatch):
    def fails(*args, **kwargs):
        return np.zeros(args[1].shape), 1  # not converged

    monkeypatch.setattr(exact, "bicgstab", fails)
    monkeypatch.setattr(exact, "spsolve", lambda *args, **kwargs: pytest.fail("factorised"))
    system = hetlb.System.from_speeds([1.0] * 7, load=0.8, buffer=4)  # 5^7 = 78,125 states
    with pytest.raises(InputError, match="did not converge"):
        hetlb.theory.solve_exact(system, "jsq")


def test_bounding_and_slotted_runs_are_bounded_before_they_start(monkeypatch):
    from hetlb.simulation.bounding import check_sandwich_arrays, simulate_bounding_system_arrays

    with pytest.raises(InputError, match="^horizon: the runs? would take about"):
        simulate_bounding_system_arrays([1.0, 2.0], 2.0, kind="fsl", buffer=3, horizon=1e15)
    with pytest.raises(InputError, match="^arrival_rate: every value must lie in"):
        check_sandwich_arrays([1.0, 2.0], 1e-320, buffer=3)
    monkeypatch.setattr(validation, "memory_limit", lambda: 10**7)
    system = hetlb.SlottedSystem.from_speeds([1.0] * 100, dispatchers=20_000, load=0.5)
    with pytest.raises(InputError) as error:
        hetlb.simulate_slotted(system, "l-jsq", slots=100, p_hat=0.5)
    assert error.value.field == "system" and "20,000 dispatchers" in error.value.rule


def test_diffusion_seeds_and_paths_are_checked():
    from hetlb.theory.diffusion import policy_diffusion, speed_pools, stationary_diffusion

    limit = policy_diffusion("jfsq", speed_pools([1.0, 2.0]), 1.0)
    with pytest.raises(InputError, match="^seed: must be an integer >= 0"):
        stationary_diffusion(limit, n_paths=4, seed=-1)
    with pytest.raises(InputError, match="^paths: "):
        stationary_diffusion(limit, n_paths=10**9)
    with pytest.raises(InputError, match="^speeds: jsq has one coordinate of xi_2 per distinct speed"):
        policy_diffusion("jsq", speed_pools(np.linspace(0.5, 1.5, 3000)), 1.0)


# --- exit 0 on nonsense ---------------------------------------------------------------------------


def test_graph_seed_must_be_a_seed_and_seed_something(capsys):
    # the flag fills the scenario's run.seed, which the scenario checks first
    refused(capsys, "run.seed", "graph", "--speeds", "2,1", "--load", "0.5", "--seed", "-1", words=">= 0")
    refused(capsys, "--seed", "graph", "--speeds", "2,1", "--load", "0.5", "--seed", "3", words="--assumption2")
    status, out, _ = run_cli(
        capsys, "graph", "--speeds", "2,1", "--load", "0.5", "--buffer", "3", "--assumption2", "--seed", "3"
    )
    assert status == 0 and "Assumption 2" in out


def test_tune_max_blocking_is_a_probability(capsys):
    refused(capsys, "max_blocking", "tune", "--speeds", "2,1", "--load", "0.5", "--max-blocking", "2", words="[0, 1]")


# --- one line of reasonable length ----------------------------------------------------------------


@pytest.mark.parametrize(
    "argv,field",
    [
        (["simulate", "--speeds", "x" * 5000, "--load", "0.5"], "speeds"),
        (["simulate", "--speeds", "1", "--load", "0.5", "--policy", "x" * 5000], "policy"),
        (["simulate", "--speeds", "1", "--load", "0.5", "--graph", "random:" + "x" * 5000 + "=1"], "system.graph."),
        (["simulate", "--speeds", "1", "--load", "0.5", "--set", "y" * 5000 + "=1"], "policy jsq"),
        (["diffusion", "--speed-distribution", "x" * 5000], "--speed-distribution"),
        (["exact", "--speeds", "1,1", "--load", "0.5", "--buffer", "2", "--policy", "x" * 5000], "policy"),
        (["simulate", "--model", "slotted", "--speeds", "1", "--load", "0.5", "--routing", "x" * 5000], "routing"),
    ],
)
def test_errors_echo_long_input_in_short(capsys, argv, field):
    status, _, err = run_cli(capsys, *argv)
    assert status == 2 and len(err.splitlines()) == 1
    assert err.startswith(f"hetlb: error: {flag_field(field, argv)}") and len(err) < 400 and "(5,0" in err


def test_usage_errors_echo_long_input_in_short(capsys):
    status, _, err = run_cli(capsys, "simulate", "--speeds", "1", "--jobs", "9" * 3000 + "x")
    assert status == 2 and len(err.splitlines()) == 1 and len(err) < 300


def test_one_line_keeps_the_start_and_the_advice():
    text = one_line("is not a column; columns: " + ", ".join(f"c{i}" for i in range(1000)) + "; pick one")
    assert len(text) <= 400 and text.startswith("is not a column; columns: c0, c1") and text.endswith("; pick one")
    columns = ", ".join(f"column_{i}" for i in range(500))
    for field in ("nope", "x" * 5000):
        error = InputError(field, f"is not a column; columns: {columns}; pick one")
        assert len(f"hetlb: error: {error}") <= 400 and str(error).endswith("; pick one")
    word = one_line("got '" + "y" * 5000 + "'; do z")
    assert word == "got '" + "y" * 76 + "... (5,001 characters)'; do z"
    assert one_line("two\nlines") == "two lines"


# --- runs too short to trust ----------------------------------------------------------------------


def test_a_window_short_against_the_warm_up_to_steady_state_warns(capsys):
    # 1,000 servers from empty, 1,000 jobs: the window closes at t = 1.1, about one response time
    status, out, err = run_cli(
        capsys, "simulate", "--speeds", "1000x1", "--load", "0.9", "--jobs", "1000", "--json", "--quiet"
    )
    result = json.loads(out)
    assert status == 0 and len(result["warnings"]) == 2
    gap, growth = result["warnings"]
    assert gap.startswith("Little's law gap -") and "measure more jobs or give a warm-up (--warmup)" in gap
    assert growth.startswith("the mean number in system grew by") and "had not settled" in growth
    assert err.splitlines() == [f"hetlb: warning: {warning}" for warning in result["warnings"]]
    assert abs(result["littles_law_gap"]) > 0.5


def test_a_settled_window_does_not_warn(capsys):
    status, out, err = run_cli(
        capsys, "simulate", "--speeds", "2,1,0.5", "--load", "0.8", "--jobs", "20000", "--warmup", "200", "--json", "-q"
    )
    assert status == 0 and json.loads(out)["warnings"] == [] and err == ""


def test_warnings_are_in_the_result_and_name_the_warm_up_once_there_is_one():
    system = hetlb.System.from_speeds(np.ones(1000), load=0.9)
    result = hetlb.simulate(system, "jsq", jobs=1000, warmup=0.2, seed=3)
    assert result.warnings == result.summary["warnings"] and result.warnings
    assert all("lengthen the warm-up" in warning for warning in result.warnings)
    assert result.to_dict()["warnings"] == result.warnings


@pytest.mark.parametrize(
    "executor, words",
    [("processes:99999999999999999999", "[1, 1024]"), ("processes:0", "[1, 1024]"), ("processes:1000", "memory")],
)
def test_a_sweep_refuses_a_pool_it_cannot_start(executor, words, tmp_path, capsys, monkeypatch):
    from hetlb import validation

    monkeypatch.setattr(validation, "memory_limit", lambda: 16.0 * 2**30)  # as on a 32 GiB machine
    spec = Path(__file__).resolve().parents[2] / "examples" / "jsq-family.toml"
    argv = ["sweep", str(spec), "--executor", executor, "--store", str(tmp_path / "s.sqlite")]
    refused(capsys, "executor", *argv, words=words)


def test_what_the_fuzz_campaign_found_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    refused(capsys, "--out", "demo", "--out", "loop", "--jobs", "200", words="leads nowhere")
    (tmp_path / "empty.sqlite").touch()  # an empty file is a new store
    refused(capsys, "name", "store", "\udcff\udcfetiny", "--store", str(tmp_path / "empty.sqlite"), words="UTF-8")
    config = tmp_path / "scenario.toml"
    config.write_text("[system]\nn_servers = 9223372036854775808\nspeed_mix = [[1.0, 1.0]]\nload = 0.5\n")
    refused(capsys, "system.n_servers", "simulate", "--config", str(config), words="2^62")
    argv = ["simulate", "--model", "slotted", "--arrivals", "binomial:", "--speeds", "1,0.5", "--load", "0.5"]
    refused(capsys, "trials", *argv, "--policy", "jiq", "--slots", "500", words="binomial:K")
    argv = ["reproduce", "weng-fig4", "--set", "n_max=0", "--executor", "serial", "--store", "s.sqlite"]
    refused(capsys, "n_max", *argv, "--out", "repro", "-q", words="[16, ")
