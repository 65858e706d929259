"""Hostile and absurd input to the newer commands: one line and exit 2 before anything runs, never a
traceback, a silent fix or a run that cannot end; and the estimate of a run's cost, refused with the
estimate when it is out of bounds (hetlb.validation.check_cost)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import hetlb
from hetlb import validation
from hetlb.cli import main
from hetlb.errors import InputError
from hetlb.gateway.config import load_config
from hetlb.gateway.serving import bind
from hetlb.load.open_loop import LoadSpec, normalised
from hetlb.theory.meanfield import mean_field
from hetlb.wire.addresses import Address, host_ports

LONG_HOST = "a" * 300


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# --- addresses -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["backend", "--listen", f"{LONG_HOST}:8000"],
        ["serve", "--listen", f"{LONG_HOST}:8000", "--backend", "http://127.0.0.1:9"],
        ["backend", "--listen", "127.0.0.1:\uff10"],  # a full-width 0
        ["backend", "--listen", "127.0.0.1:\uff18\uff10\uff10\uff10"],
        ["serve", "--listen", "127.0.0.1:\uff18\uff10\uff10\uff10", "--backend", "http://127.0.0.1:9"],
        ["serve", "--listen", "127.0.0.1:8000", "--backend", f"http://{LONG_HOST}:9"],
        ["backend", "--listen", "a..b:8000"],
        ["backend", "--listen", "a b:8000"],
    ],
)
def test_a_host_or_port_that_cannot_be_bound_is_one_line(argv, capsys):
    assert main(argv) == 2
    line = one_error_line(capsys)
    assert line.startswith(("hetlb: error: --listen:", "hetlb: error: listen:", "hetlb: error: --backend 1.url:"))


def test_only_ascii_digits_make_a_port():
    assert host_ports("--listen", "127.0.0.1:8000") == ("127.0.0.1", [8000])
    assert "\uff10".isdigit()  # what str.isdigit takes, and the parser must not
    with pytest.raises(InputError, match="the port must be an integer"):
        host_ports("--listen", "127.0.0.1:\uff10")


@pytest.mark.parametrize(
    "address", [Address(LONG_HOST, 8000), Address("a" * 64 + ".example", 8000), Address("a\0b", 8000)]
)
def test_bind_turns_every_address_error_into_one_line(address):
    """The listener's own check, behind the configuration's: a name the IDNA codec refuses
    (UnicodeError), a NUL character (ValueError)."""
    with pytest.raises(InputError) as error:
        bind("listen", address)
    assert error.value.field == "listen" and "\n" not in str(error.value)


def test_a_policy_id_that_is_not_a_text_is_refused(tmp_path):
    config = tmp_path / "serve.toml"
    config.write_text('listen = "127.0.0.1:8000"\nbackends = ["http://127.0.0.1:9001"]\n[policy]\nid = [1]\n')
    with pytest.raises(InputError, match="must be a non-empty text") as error:
        load_config(config)
    assert error.value.field == "policy.id"


# --- loadgen ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--target", "http:///"], "--target: must be an http:// or https:// URL with a host"),
        (["--target", "http://127.0.0.1:abc"], "--target: not a URL"),
        (["--target", "http://[::1"], "--target: not a URL"),
        (["--target", "http://127.0.0.1:0"], "--target: port 0"),
        (["--target", "http://127.0.0.1:9\r\nX: y"], "--target: must be a URL of printable ASCII"),
        (["--target", f"http://{LONG_HOST}/"], "--target: each dot-separated label"),
        (["--job-types", "a\r\nX-Evil: 1=1"], "--job-types: a job type is 1 to 64"),
        (["--job-types", "a b=1"], "--job-types: a job type is 1 to 64"),
        (["--path", "/a\r\nHost: evil"], "--path: must start with / and be printable ASCII"),
        (["--path", "/a b"], "--path: must start with / and be printable ASCII"),
        (["--method", "CONNECT"], "--method: CONNECT asks for a tunnel"),
        (["--method", "connect"], "--method: CONNECT asks for a tunnel"),
        (["--rate", "1e9", "--duration", "0.5"], "--rate: 5e+08 requests in 0.5 s would take at least 50 s"),
        (["--rate", "1e308", "--duration", "1"], "--rate: 1e+308 requests in 1 s needs about inf GiB"),
        (["--rate", "1", "--duration", "1e308"], "--duration: a load of 1e+308 s would take at least"),
    ],
)
def test_loadgen_refuses_what_no_request_can_carry(argv, message, capsys):
    defaults = {"--target": "http://127.0.0.1:9", "--rate": "10", "--duration": "1"}
    for flag, value in defaults.items():
        if flag not in argv:
            argv = [flag, value, *argv]
    assert main(["loadgen", *argv]) == 2
    assert one_error_line(capsys).startswith(f"hetlb: error: {message}")


def test_shares_and_proportions_of_any_finite_size_are_normalised():
    """1e308 + 1e308 overflows; scaled by the largest first, the probabilities are exact."""
    np.testing.assert_array_equal(normalised(np.array([1e308, 1e308])), [0.5, 0.5])
    np.testing.assert_array_equal(normalised(np.array([3e-320, 1e-320])), [0.75, 0.25])
    spec = LoadSpec(("http://127.0.0.1:9", "http://127.0.0.1:10"), 10.0, 1.0, shares=(1e308, 1e308))
    np.testing.assert_array_equal(spec.target_probabilities(), [0.5, 0.5])
    spec = LoadSpec(("http://127.0.0.1:9",), 10.0, 1.0, job_types={"a": 1e308, "b": 1e308})
    assert spec.type_probabilities()[0] == ["a", "b"]
    np.testing.assert_array_equal(spec.type_probabilities()[1], [0.5, 0.5])


# --- the cost estimate -----------------------------------------------------------------------------


def test_check_cost_refuses_with_the_estimate_and_the_bound():
    validation.check_cost("n", "a run", memory=1, seconds=10.0, time_limit=10.0)  # at the bound: fine
    with pytest.raises(InputError) as error:
        validation.check_cost("n", "a run", seconds=7200.0, time_limit=3600.0, advice="use less")
    assert str(error.value) == "n: a run would take at least 2.0 h, more than 60 min; use less"
    with pytest.raises(InputError, match=r"^n: a run needs about 8\.0 EiB|^n: a run needs about .* of memory"):
        validation.check_cost("n", "a run", memory=2**63)
    with pytest.raises(InputError, match="days"):
        validation.check_cost("n", "a run", seconds=math.inf)


def test_meanfield_compare_is_estimated_before_the_fleet_is_built(capsys):
    assert main(["meanfield", "--speeds", "1,0.5", "--load", "0.5", "--compare", "2147483648", "-q"]) == 2
    line = one_error_line(capsys)
    assert line.startswith("hetlb: error: --compare: a simulation of 2.1e+09 servers")
    # at least 2 x 5 replications x 10^12 jobs = 10^13 events: beyond a day at 1e8 events/s
    argv = ["meanfield", "--speeds", "1,0.5", "--load", "0.5", "--compare", "1000", "--jobs", str(10**12), "-q"]
    assert main(argv) == 2
    assert "(1e+13 events) would take at least" in one_error_line(capsys)


# --- meanfield -------------------------------------------------------------------------------------


def test_jsq_df_ds_with_its_fast_servers_at_capacity_has_no_stable_limit():
    """Speeds 1,0.5,0.5,0.5 at load 0.8: lambda = 0.5 per server; the fast quarter gets every job
    that finds it idle and half of the others (p_F = 1 - p_S = 1/2), so at least lambda / 2 = 0.25 =
    its capacity f_F mu_F: critical, its queues grow without bound."""
    limit = mean_field(hetlb.System.from_speeds([1.0, 0.5, 0.5, 0.5], load=0.8), "jsq-df-ds")
    assert not limit.stable and limit.mean_response_time == math.inf
    below = mean_field(hetlb.System.from_speeds([1.0, 0.5, 0.5, 0.5], load=0.79), "jsq-df-ds")
    assert below.stable
    # the same bound below capacity: the fast servers are busy at least lambda / 2 / (f_F mu_F) of the time
    assert below.utilisation[0] >= below.arrival_rate / 2 / 0.25 - 1e-9
    assert below.throughput == pytest.approx(below.arrival_rate, rel=1e-9)  # nothing lost, infinite buffers


def test_meanfield_jsq_df_ds_at_capacity_prints_unstable(capsys):
    assert main(["meanfield", "--speeds", "1,0.5,0.5,0.5", "--load", "0.8", "--policy", "jsq-df-ds", "--json"]) == 0
    assert '"stable": false' in capsys.readouterr().out


def test_meanfield_refuses_an_empty_policy(capsys):
    assert main(["meanfield", "--speeds", "1,0.5", "--load", "0.5", "--policy", ""]) == 2
    assert one_error_line(capsys).startswith("hetlb: error: --policy: must be a non-empty text")


def test_meanfield_reads_the_policy_of_its_config(tmp_path, capsys):
    config = tmp_path / "scenario.toml"
    config.write_text('[system]\nspeeds = "1,0.5"\nload = 0.7\n[policy]\nid = "pod"\nd = 3\n')
    assert main(["meanfield", "--config", str(config), "--json"]) == 0
    from_config = capsys.readouterr().out
    assert main(["meanfield", "--speeds", "1,0.5", "--load", "0.7", "--policy", "pod", "--d", "3", "--json"]) == 0
    assert from_config == capsys.readouterr().out
    assert main(["meanfield", "--config", str(config), "--policy", "jsq", "--json"]) == 0
    assert '"policy": "jsq"' in capsys.readouterr().out  # the flag over the file


# --- simulate, testbed -----------------------------------------------------------------------------


def test_dispatchers_refuse_a_policy_parameter_named_update(capsys):
    argv = ["simulate", "--speeds", "2,1,1", "--load", "0.5", "--dispatchers", "3", "--policy", "l-jba"]
    assert main([*argv, "--set", "update=push", "--jobs", "300"]) == 2
    assert one_error_line(capsys).startswith("hetlb: error: --set update: the updates of dispatchers")


def test_testbed_checks_its_output_folder_before_the_run(monkeypatch, tmp_path, capsys):
    from hetlb import testbed

    def never(*args, **kwargs):
        raise AssertionError("the testbed ran")

    monkeypatch.setattr(testbed, "run_testbed", never)
    assert main(["testbed", str(tmp_path / "tb.toml"), "--out", "/proc/nope"]) == 2
    assert one_error_line(capsys).startswith("hetlb: error: --out: cannot use /proc/nope")
    checked = validation.output_folder("--out", tmp_path / "a" / "b", make=True)
    assert checked == tmp_path / "a" / "b" and not (tmp_path / "a").exists()  # tried, and left as it was


def test_snapshots_to_many_dispatchers_are_estimated_first():
    """100 servers x 10,000 dispatchers / tau = 1e-4: 1e10 messages a time unit over the 2e3 time
    units of 1e5 jobs at arrival rate 50: 2e13 messages, beyond a day at 1e8 a second."""
    import hetlb

    system = hetlb.System.from_speeds([1.0] * 100, load=0.5)
    with pytest.raises(InputError, match=r"\(2e\+13 messages\) would take at least") as error:
        hetlb.simulate(system, "jsq", dispatchers=10_000, update="snapshot:tau=0.0001", jobs=100_000)
    assert error.value.field == "update"


def test_loadgen_refuses_a_run_longer_than_a_day(capsys):
    argv = ["loadgen", "--target", "http://127.0.0.1:9", "--rate", "1", "--duration", "90000"]
    assert main(argv) == 2
    assert one_error_line(capsys).startswith(
        "hetlb: error: --duration: a load of 90000 s would take at least 25.0 h, more than 24.0 h"
    )


@pytest.mark.parametrize("kind", ["loop", "fifo", "/dev/zero"])
def test_a_backends_file_that_is_no_regular_file_is_refused_without_reading(kind, tmp_path, monkeypatch, capsys):
    """A loop of symbolic links (RuntimeError of Path.resolve), a FIFO (open blocks) and /dev/zero
    (reading never ends): one line each, before anything listens."""
    import os

    monkeypatch.chdir(tmp_path)
    path = kind
    if kind == "loop":
        os.symlink("loop", "loop")
    elif kind == "fifo":
        os.mkfifo("fifo")
    assert main(["serve", "--listen", "127.0.0.1:8000", "--backends-file", path]) == 2
    assert one_error_line(capsys).startswith("hetlb: error: --backends-file: ")


def test_a_scenario_file_that_is_a_fifo_or_a_device_is_refused_without_reading(tmp_path, capsys):
    import os

    fifo = tmp_path / "scenario.toml"
    os.mkfifo(fifo)
    for path in (str(fifo), "/dev/zero"):
        assert main(["simulate", "--config", path]) == 2
        assert one_error_line(capsys).endswith("is not a regular file")


def test_a_testbed_value_json_cannot_write_is_refused_by_the_scenario_check(tmp_path, capsys):
    bed = tmp_path / "bed.toml"
    bed.write_text('[system]\nspeeds = "2x1"\n[testbed]\nloads = [0.3]\nduration = 0.5\n[run]\njobs = 1979-05-27\n')
    assert main(["testbed", str(bed), "--out", str(tmp_path / "out"), "-q"]) == 2
    assert one_error_line(capsys).startswith("hetlb: error: run.jobs: ")


def test_an_engine_context_beyond_a_count_is_refused(capsys):
    argv = ["backend", "--listen", "127.0.0.1:0", "--openai", "--models", "a", "--max-model-len", str(2**64)]
    assert main(argv) == 2
    assert one_error_line(capsys).startswith("hetlb: error: --max-model-len: must be an integer <= 2^62")


def test_model_ids_are_printable_utf8(capsys):
    for models in ["a,\udcff\udcfe", "a,b\x07"]:  # bytes that are not UTF-8 (as argv gives them), a control
        assert main(["backend", "--listen", "127.0.0.1:0", "--openai", "--models", models]) == 2
        assert one_error_line(capsys).startswith("hetlb: error: --models: ")


def test_an_mmpp_of_a_tiny_rate_ends_at_the_run_s_horizon():
    """At 1e-300 a second no phase draws an arrival: the generator stops once a phase starts
    past the horizon (it looped for ever), and what it yields before is what the unbounded one yields."""
    import itertools

    from hetlb.load.open_loop import LoadGenerator

    tiny = LoadSpec(("http://127.0.0.1:9",), 1e-300, 0.5, arrivals="mmpp:ratio=2,on=5,off=5")
    assert list(LoadGenerator(tiny, progress=False).arrivals(np.random.default_rng(0), horizon=0.5)) == []
    spec = LoadSpec(("http://127.0.0.1:9",), 200.0, 2.0, seed=3, arrivals="mmpp:ratio=4,on=5,off=10")
    bounded = list(LoadGenerator(spec, progress=False).arrivals(np.random.default_rng(3), horizon=2.0))
    unbounded = LoadGenerator(spec, progress=False).arrivals(np.random.default_rng(3))
    assert bounded and [a[:2] for a in bounded] == [a[:2] for a in itertools.islice(unbounded, len(bounded))]


def test_loadgen_and_speed_laws_refuse_values_beyond_their_type(capsys):
    argv = ["loadgen", "--target", "http://127.0.0.1:9", "--rate", "1", "--duration", "1"]
    assert main([*argv, "--max-in-flight", "99999999999999999999"]) == 2
    assert one_error_line(capsys).startswith("hetlb: error: --max-in-flight: must be an integer <= 2^62")
    law = "discrete:speeds=[1,2],probabilities=[0.5,0.5]\udcff"
    assert main(["simulate", "--n-servers", "3", "--speed-distribution", law, "--load", "0.5"]) == 2
    assert one_error_line(capsys).startswith("hetlb: error: --speed-distribution probabilities: must be numbers")


def test_ten_million_dispatchers_count_their_python_results_in_the_estimate(monkeypatch):
    """Their rates and per-dispatcher results as Python lists: 10^7 x (2 x 32 + 4 x 32) bytes
    at least, refused under a memory limit of 1 GiB (it was a MemoryError under a capped address space)."""
    import hetlb

    monkeypatch.setattr(validation, "memory_limit", lambda: float(2**30))
    with pytest.raises(InputError, match="10,000,000 dispatchers") as error:
        hetlb.simulate(hetlb.System.from_speeds([1.0, 1.0, 1.0], load=0.3), "sed", dispatchers=10**7, jobs=200)
    assert error.value.field in ("dispatchers", "--dispatchers")
