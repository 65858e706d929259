"""Command-line conventions: the flags each command takes, help, usage, --json, --quiet and
--verbose, progress and notices on standard error, and text output that a person can read."""

import argparse
import io
import json
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import hetlb
import hetlb.cli
from hetlb.cli import build_parser, main
from hetlb.progress import ProgressBar, needs_compiling


def run(capsys, argv):
    """Run the command line in-process: (exit status, standard output, standard error)."""
    status = main(argv)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def subparsers():
    parser = build_parser()
    (commands,) = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    return parser, commands


# --- flags, help, usage --------------------------------------------------------------------------


def test_every_flag_of_every_command_has_help():
    parser, commands = subparsers()
    assert set(commands.choices) == {
        "simulate",
        "exact",
        "bound",
        "policies",
        "sweep",
        "store",
        "plot",
        "reproduce",
        "graph",
        "tune",
        "diffusion",
        "demo",
        "backend",
        "loadgen",
        "meanfield",
        "place",
        "serve",
        "pick",
        "envoy-config",
        "testbed",
        "compile",
    }
    missing = []
    for name, command in [("hetlb", parser), *commands.choices.items()]:
        for action in command._actions:
            if isinstance(action, argparse._SubParsersAction):
                missing += [f"hetlb {choice.dest}" for choice in action._choices_actions if not choice.help]
            elif not action.help or action.help == argparse.SUPPRESS:
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
    assert missing == []


@pytest.mark.parametrize(
    "argv,flag",
    [
        (["bound", "--speeds", "2,1", "--load", "0.5", "--policy", "jiq"], "--policy"),
        (["bound", "--speeds", "2,1", "--load", "0.5", "--buffer", "3"], "--buffer"),
        (["bound", "--speeds", "2,1", "--load", "0.5", "--graph", "complete"], "--graph"),
        (["graph", "--speeds", "2,1", "--load", "0.5", "--policy", "jsq"], "--policy"),
        (["graph", "--speeds", "2,1", "--load", "0.5", "--buffer", "3", "--b", "3"], "--b"),
        (["exact", "--speeds", "2,1", "--load", "0.5", "--buffer", "3", "--job-sizes", "deterministic"], "--job-sizes"),
        (["tune", "--speeds", "2,1", "--load", "0.5", "--policy", "jsq-df-ds"], "--policy"),
        (["simulate", "--speeds", "2,1", "--load", "0.5", "--param", "d=2"], "--param"),
        (["reproduce", "weng-fig3", "--param", "load=0.9"], "--param"),
        (["diffusion", "--speeds", "2x1", "--uniform", "0.7,1.3"], "--uniform"),
        (["policies", "--quiet"], "--quiet"),
        (["bound", "--speeds", "2,1", "--load", "0.5", "--verbose"], "--verbose"),
    ],
)
def test_a_command_refuses_the_flags_it_does_not_use(capsys, argv, flag):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "unrecognized arguments" in error[0] and flag in error[0]


def test_bare_hetlb_prints_the_usage_and_exits_2(capsys):
    status, out, err = run(capsys, [])
    assert status == 2 and out == ""
    assert err.startswith("usage: hetlb")
    for command in ("simulate", "exact", "bound", "policies", "reproduce", "demo"):
        assert command in err


def test_the_package_docstring_lists_every_command_in_the_order_of_the_help():
    import hetlb.cli

    listed = re.search(r"``hetlb (.*?)``", hetlb.cli.__doc__, re.S).group(1)
    _, commands = subparsers()
    assert [name.strip() for name in listed.split("|")] == list(hetlb.cli.COMMANDS) == list(commands.choices)


@pytest.mark.parametrize("name", sorted(hetlb.cli.COMMANDS))
def test_a_parser_with_the_flags_of_one_command_helps_as_the_whole_parser(name):
    whole, alone = build_parser(), build_parser(flags_of=(name,))
    assert alone.format_help() == whole.format_help()
    (of_whole,) = [a for a in whole._actions if isinstance(a, argparse._SubParsersAction)]
    (of_alone,) = [a for a in alone._actions if isinstance(a, argparse._SubParsersAction)]
    assert of_alone.choices[name].format_help() == of_whole.choices[name].format_help()
    others = [other for other in of_alone.choices.values() if other.prog != f"hetlb {name}"]
    assert all(len(other._actions) == 1 for other in others)  # --help alone: no flags, not imported


@pytest.mark.parametrize(
    "argv, imported",
    [(["--help"], []), (["simulate", "--help"], ["simulate"]), (["policies", "--json"], ["policies"])],
)
def test_hetlb_imports_the_module_of_the_command_it_runs_and_no_other(argv, imported):
    code = (
        "import contextlib, io, sys\n"
        "from hetlb.cli import main\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        f"    main({argv!r})\n"
        "print(sorted(m for m in sys.modules if m.startswith('hetlb.cli.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    shared = ["hetlb.cli.flags", "hetlb.cli.text"]
    assert out.strip() == repr(sorted(shared + [f"hetlb.cli.{name}" for name in imported]))


def test_version(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"hetlb {hetlb.__version__}"


def test_reproduce_help_lists_every_registered_reproduction(capsys):
    from hetlb.experiments import REPRODUCTIONS

    with pytest.raises(SystemExit) as stop:
        main(["reproduce", "--help"])
    assert stop.value.code == 0
    listed = capsys.readouterr().out.split("reproductions:")[1].split("\n\n")[0]  # the documentation line follows
    lines = listed.strip().splitlines()
    assert [line.split()[0] for line in lines] == list(REPRODUCTIONS) and len(lines) >= 10
    for line, reproduction in zip(lines, REPRODUCTIONS.values()):
        assert line.strip() == f"{reproduction.name}{line.strip()[len(reproduction.name) :].rstrip()}"
        assert line.endswith(reproduction.title)


# --- --json everywhere ---------------------------------------------------------------------------


def test_policies_json_is_the_registry(capsys):
    from hetlb.policies import POLICIES

    status, out, _ = run(capsys, ["policies", "--json"])
    listed = json.loads(out)
    assert status == 0 and [entry["id"] for entry in listed] == list(POLICIES)
    for entry in listed:
        spec = POLICIES[entry["id"]]
        assert entry["definition"] == spec.definition and entry["models"] == list(spec.models)
        assert {name: value["default"] for name, value in entry["parameters"].items()} == {
            name: default for name, (default, _, _) in spec.parameters.items()
        }


def test_sweep_and_store_json(tmp_path, capsys):
    spec = tmp_path / "spec.toml"
    spec.write_text(
        textwrap.dedent("""
        name = "json"
        replications = 2
        seed = 4
        [base.system]
        speeds = "3x1.0,3x0.5"
        load = 0.5
        [base.run]
        jobs = 500
        [axes]
        "policy.id" = ["jsq", "jfsq"]
    """)
    )
    store = str(tmp_path / "s.sqlite")
    common = ["--executor", "serial", "--store", store, "--out", str(tmp_path / "out"), "--json"]
    status, out, _ = run(capsys, ["sweep", str(spec), *common])
    swept = json.loads(out)
    assert status == 0 and (swept["computed"], swept["reused"]) == (4, 0)
    assert [row["policy.id"] for row in swept["summary"]] == ["jsq", "jfsq"]

    status, out, _ = run(capsys, ["store", "--store", store, "--json"])
    assert status == 0 and json.loads(out) == [
        {"name": "json", "runs": 4, "finished": 4, "source": str(spec.resolve())}
    ]
    status, out, _ = run(capsys, ["store", "json", "--store", store, "--json"])
    rows = json.loads(out)
    assert status == 0 and len(rows) == 4
    # two replications per point: the mean of the points' means is the mean of the stored runs
    means = [summary["mean_response_time"] for summary in swept["summary"]]
    assert np.mean(means) == pytest.approx(np.mean([row["mean_response_time"] for row in rows]), rel=1e-12)


def test_demo_json_and_verbose_lines(tmp_path, capsys):
    from hetlb.theory import speed_lower_bound_arrays

    argv = ["demo", "--out", str(tmp_path), "--jobs", "200", "--replications", "2", "--json", "-v"]
    status, out, err = run(capsys, argv)
    rows = json.loads(out)["rows"]
    assert status == 0 and len(rows) == 30
    lines = [line for line in err.splitlines() if line.startswith("hetlb: run ")]
    assert len(lines) == 30
    for i, (line, row) in enumerate(zip(lines, rows)):
        assert line.startswith(f"hetlb: run {i + 1} of 30, {row['policy.id']} at load {row['system.load']:g}: ")
        assert f"mean response time {row['mean_response_time']:.6g}," in line
    speeds = np.repeat([1.0, 0.5, 0.25, 0.125], 25)
    for row in rows:
        rate = row["system.load"] * speeds.sum()
        assert row["speed_lower_bound"] == pytest.approx(speed_lower_bound_arrays(speeds, rate).lower_bound, rel=1e-12)
        exact = 100 / ((1 - row["system.load"]) * speeds.sum())
        assert row["weighted_random_exact"] == pytest.approx(exact, rel=1e-12)
        assert row["mean_response_time_ci_low"] <= row["mean_response_time"] <= row["mean_response_time_ci_high"]


def test_reproduce_json_is_claims_json(tmp_path, capsys):
    settings = {"n_min": 16, "n_max": 32, "jobs": 4000, "warmup": 20.0, "replications": 2}
    argv = ["reproduce", "weng-fig4", "--out", str(tmp_path), "--store", str(tmp_path / "s.sqlite")]
    argv += ["--executor", "serial", "--json", *(f"--set={key}={value}" for key, value in settings.items())]
    status, out, _ = run(capsys, argv)
    report = json.loads(out)
    written = json.loads((tmp_path / "claims.json").read_text())
    assert status == (0 if written["all_claims_hold"] else 1)
    assert report["claims"] == written["claims"] and report["parameters"] == written["parameters"]


def test_graph_text_and_json_agree(capsys):
    argv = ["graph", "--speeds", "8x1,8x0.5", "--load", "0.9", "--buffer", "5", "--graph", "random:p=0.5,ports=12"]
    status, out, _ = run(capsys, [*argv, "--assumption2", "--json"])
    values = json.loads(out)
    status, text, _ = run(capsys, [*argv, "--assumption2"])
    assert status == 0 and not text.lstrip().startswith("{")
    stats = values["construction"]["statistics"]
    assert f"12 job types, 16 servers, {stats['edges']} edges" in text
    verdict = "carries" if values["routable"]["can_carry_offered_load"] else "cannot carry"
    assert f"the graph {verdict} the offered load 0.9 of the total speed" in text
    for group in values["assumption2"]["groups"]:
        assert f"condition {group['condition']} (servers of {group['servers']}" in text


def test_assumption2_without_a_buffer_asks_for_one(capsys):
    argv = ["graph", "--speeds", "8x1,8x0.5", "--load", "0.9", "--graph", "random:p=0.5,ports=12", "--assumption2"]
    status, out, err = run(capsys, argv)
    assert status == 2 and out == ""
    assert err.strip() == (
        "hetlb: error: --buffer: the Assumption 2 search needs the buffer size b of paper 000: give --buffer B, e.g. 5"
    )


# --- feedback on standard error ------------------------------------------------------------------


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_progress_is_a_log_line_every_few_seconds_when_not_a_terminal():
    from hetlb.progress import LOG_INTERVAL

    stream, clock = io.StringIO(), FakeClock()
    bar = ProgressBar("jsq ", stream=stream, clock=clock)
    assert not bar.live  # a StringIO is not a terminal
    for step in range(1, 25):  # one update every half interval: a line every second update
        clock.now += LOG_INTERVAL / 2
        bar.update(step / 25, step * 1_000_000)
    assert stream.getvalue().count("\n") == 12
    bar.close()
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue() and len(lines) == 13
    assert lines[0].startswith("jsq: 8.0% done, 2.00M events in 5 s")
    assert lines[-1].startswith("jsq: 100.0% done, 24.00M events")

    quiet = io.StringIO()
    short = ProgressBar("jsq ", stream=quiet, clock=FakeClock())
    short.update(1.0, 10)
    short.close()
    assert quiet.getvalue() == ""  # a run shorter than the interval logs nothing


def test_progress_bar_on_a_terminal_and_messages_above_it():
    stream, clock = io.StringIO(), FakeClock()
    bar = ProgressBar("demo ", stream=stream, live=True, clock=clock)
    clock.now += 1
    bar.update(0.5, 1000, detail="1/2 runs")
    bar.message("hetlb: run 1 of 2")
    bar.close()
    text = stream.getvalue()
    assert text.startswith("\rdemo [###############               ]  50.0% 1/2 runs")
    assert "\r\033[Khetlb: run 1 of 2\n\rdemo [" in text and text.endswith("\n")


def test_needs_compiling_reads_numba_cache(tmp_path, monkeypatch):
    import importlib
    import sys

    (tmp_path / "fresh_kernel.py").write_text(
        "from numba import njit\n\n@njit(cache=True)\ndef twice(x):\n    return 2 * x\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("fresh_kernel")
    try:
        assert needs_compiling(module.twice)
        assert module.twice(21) == 42
        assert not needs_compiling(module.twice)
        assert not needs_compiling(object())  # not a numba function: no notice
    finally:
        sys.modules.pop("fresh_kernel", None)


SMALL = ["simulate", "--speeds", "3x1,2x0.5", "--load", "0.6", "--jobs", "3000", "--seed", "5"]


def test_compile_notice_and_quiet(capsys, monkeypatch):
    """The notice precedes a run of numba's kernels, not one run as plain Python (fast_start)."""
    import hetlb.progress
    from hetlb import jit
    from hetlb.simulation import fast_start

    monkeypatch.setattr(hetlb.progress, "needs_compiling", lambda *kernels: True)
    monkeypatch.setattr(jit, "numba_loaded", lambda: False)
    monkeypatch.setattr(fast_start, "_plain_events", 0.0)
    status, _, err = run(capsys, ["simulate", "--speeds", "2,1", "--load", "0.5", "--jobs", "100"])
    assert status == 0 and err == ""
    monkeypatch.setattr(fast_start, "PLAIN_PYTHON_EVENTS", 0.0)
    status, _, err = run(capsys, SMALL)
    assert status == 0 and err.startswith("hetlb: compiling the simulation kernels") and err.count("\n") == 1
    status, _, err = run(capsys, [*SMALL, "--quiet"])
    assert status == 0 and err == ""
    monkeypatch.setattr(hetlb.progress, "needs_compiling", lambda *kernels: False)
    status, _, err = run(capsys, SMALL)
    assert status == 0 and err == ""


def test_verbose_prints_one_line_per_replication(capsys):
    status, out, err = run(capsys, [*SMALL, "--replications", "3", "--json", "--verbose"])
    result = json.loads(out)
    lines = err.strip().splitlines()
    assert status == 0 and len(lines) == 3
    for i, (line, replication) in enumerate(zip(lines, result["runs"])):
        assert line.startswith(
            f"hetlb: replication {i + 1} of 3: mean response time {replication['mean_response_time']:.6g}, "
        )
        assert f"{replication['events']:,} events" in line


def test_tune_reports_each_grid_point(capsys):
    argv = ["tune", "--speeds", "3x2,3x0.5", "--load", "0.5", "--grid", "2", "--jobs", "1000", "--json", "-v"]
    status, out, err = run(capsys, argv)
    table = json.loads(out)["table"]
    lines = [line for line in err.splitlines() if line.startswith("hetlb: grid point")]
    assert status == 0 and len(lines) == len(table) == 4
    for line, row in zip(lines, table):
        assert f"p_fast {row['p_fast']:g}, p_slow {row['p_slow']:g}: mean response time " in line
        assert f"{row['mean_response_time']:.6g}" in line


# --- text output ---------------------------------------------------------------------------------


def test_many_speeds_show_speed_bins_not_one_line_per_server(capsys):
    argv = ["simulate", "--n-servers", "200", "--speed-distribution", "uniform:low=0.7,high=1.3,seed=3"]
    argv += ["--excess-capacity", "1", "--policy", "jsq-lisf", "--horizon", "60", "--warmup", "10"]
    argv += ["--speed-bins", "4", "--seed", "2"]
    status, text, _ = run(capsys, argv)
    assert status == 0 and len(text.splitlines()) < 40
    assert "200 speed classes, not listed" in text and "speeds 0.7" in text

    status, out, _ = run(capsys, [*argv, "--json"])
    result = json.loads(out)
    speeds = np.array([c["speed"] for c in result["metadata"]["system"]["speed_classes"]])
    counts = np.array([c["count"] for c in result["metadata"]["system"]["speed_classes"]])
    edges = np.linspace(speeds.min(), speeds.max(), 5)
    bins = np.clip(np.searchsorted(edges, speeds, side="right") - 1, 0, 3)
    servers = np.bincount(bins, weights=counts, minlength=4)
    mass = np.bincount(bins, weights=counts * speeds, minlength=4) / (counts * speeds).sum()
    profile = result["runs"][0]["speed_profile"]
    rows = text.split("xi_2\n")[-1].strip().splitlines()[:4]
    assert len(rows) == 4
    for i, row in enumerate(rows):
        span, numbers = row.rsplit("]", 1) if i == 3 else row.rsplit(")", 1)
        n, eta, tb_eta, xi2 = numbers.split()
        assert int(n) == servers[i]
        assert float(tb_eta) == pytest.approx(mass[i], abs=6e-5)
        assert float(eta) == pytest.approx(profile["eta"][i], abs=6e-5)
        assert float(xi2) == pytest.approx(profile["xi2"][i], abs=6e-5)
    assert servers.sum() == 200 and sum(profile["eta"]) == pytest.approx(1.0)


def test_per_server_rows_on_request(capsys):
    argv = ["simulate", "--speeds", "2,1,0.5", "--load", "0.7", "--buffer", "6", "--jobs", "20000", "--seed", "1"]
    status, text, _ = run(capsys, argv)
    assert status == 0 and "per server" not in text
    status, text, _ = run(capsys, [*argv, "--per-server"])
    rows = text.split("mean queue\n")[1].strip().splitlines()
    assert status == 0 and len(rows) == 3
    status, out, _ = run(capsys, [*argv, "--json"])
    result = json.loads(out)
    speed = np.array([2.0, 1.0, 0.5])
    utilisation = np.array([float(row.split()[2]) for row in rows])
    assert [float(row.split()[1]) for row in rows] == speed.tolist()
    assert utilisation == pytest.approx(result["runs"][0]["utilisation"], abs=6e-5)
    # conservation: the work the servers did is the work of the admitted jobs, mean size 1
    # (about 1 / sqrt(20000) = 0.7% of noise in the total work; the tolerance is several times that)
    admitted = 0.7 * speed.sum() * (1 - result["blocking_probability"])
    assert (speed * utilisation).sum() == pytest.approx(admitted, rel=0.04)


def test_slotted_text_has_no_raw_dicts_or_long_floats(capsys):
    argv = ["simulate", "--model", "slotted", "--speeds", "4x1,4x0.5", "--dispatchers", "3", "--load", "0.8"]
    argv += ["--policy", "l-jba", "--p-hat", "0.3", "--slots", "2000", "--preference", "--per-server"]
    status, text, _ = run(capsys, argv)
    assert status == 0
    assert "{" not in text and "}" not in text
    assert not re.search(r"\d\.\d{7,}", text)
    assert "policy l-jba (update=push, p_hat=0.3, " in text
    assert "8 servers (4x1, 4x0.5), arrival rate 4.8 per slot, load 0.8" in text  # 0.8 x 6
    assert "dispatchers 3" in text
    assert re.search(r"messages +probes [\d,]+, replies [\d,]+, reports 0, tokens 0", text)
    assert len(text.split("mean queue\n")[1].strip().splitlines()) == 8


def test_exact_state_limit_is_a_short_number(capsys):
    status, out, err = run(capsys, ["exact", "--speeds", "100x1", "--load", "0.5", "--buffer", "5"])
    assert status == 2 and out == ""
    line = err.strip()
    mantissa, exponent = f"{6**100:.1e}".split("e+")  # 6^100 states
    assert f"= about {mantissa}e{int(exponent)} states, more than the limit max_states = 250,000" in line
    assert len(line) < 200 and "\n" not in line
    status, _, err = run(capsys, ["exact", "--speeds", "2,1", "--load", "0.5", "--buffer", "600"])
    assert status == 2 and f"= {601**2:,} states" in err


# --- one name for one thing ----------------------------------------------------------------------


def test_diffusion_takes_the_speed_distribution_syntax_of_simulate(capsys):
    from hetlb.theory.diffusion import policy_diffusion, speed_pools, stationary_mean_x1

    argv = ["diffusion", "--policy", "jsq", "--paths", "64", "--json"]
    status, out, _ = run(capsys, [*argv, "--speed-distribution", "discrete:speeds=[0.8,1.2],probabilities=[0.5,0.5]"])
    x1 = json.loads(out)["stationary"]["x1"]
    exact = stationary_mean_x1(policy_diffusion("jsq", speed_pools([0.8, 1.2], [0.5, 0.5]), 1.0))
    assert status == 0 and abs(x1["mean"] - exact) <= 4 * x1["standard_error"]
    for law, words in [
        ("lognormal:mean=1,cv=0.5", "got kind 'lognormal'"),
        ("uniform:low=0.7,high=1.3,seed=2", "seed: unknown key for uniform"),
        ("uniform:low=0.7", "uniform needs high"),
    ]:
        status, _, err = run(capsys, ["diffusion", "--speed-distribution", law])
        assert status == 2 and err.startswith("hetlb: error: --speed-distribution: ") and words in err
    with pytest.raises(SystemExit):
        main(["diffusion", "--speeds", "2x1", "--speed-distribution", "uniform:low=0.7,high=1.3"])
    assert "not allowed with argument" in capsys.readouterr().err


def test_set_sets_policy_parameters(capsys):
    status, out, _ = run(capsys, [*SMALL, "--policy", "pod", "--set", "d=3", "--json"])
    assert status == 0 and json.loads(out)["metadata"]["policy"] == {"id": "pod", "d": 3}
    status, _, err = run(capsys, [*SMALL, "--set", "d"])
    assert status == 2 and err.strip() == "hetlb: error: --set: must be NAME=VALUE, got 'd'"


def test_tune_takes_the_sample_sizes_as_flags(capsys):
    argv = ["tune", "--speeds", "3x2,3x0.5", "--load", "0.5", "--grid", "2", "--jobs", "1000", "--d-fast", "3"]
    status, out, _ = run(capsys, [*argv, "--d-slow", "1", "--json"])
    tuned = json.loads(out)
    best = hetlb.simulate(
        hetlb.System.from_speeds("3x2,3x0.5", load=0.5),
        hetlb.make_policy("jsq-df-ds", d_fast=3, d_slow=1, p_fast=tuned["p_fast"], p_slow=tuned["p_slow"]),
        jobs=1000,
    )
    assert status == 0 and best.mean_response_time == tuned["mean_response_time"]  # same seed, same runs


# --- the command lines of the README and the docs ------------------------------------------------

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]

SHRINK = {"--jobs": "2000", "--horizon": "40", "--warmup": "5", "--slots": "2000", "--paths": "16"}
"""Smaller runs of the documented commands (their flags and their meaning unchanged)."""

PARSE_ONLY = {"sweep", "plot", "reproduce", "demo", "backend", "loadgen", "testbed", "serve", "pick", "place"}
"""Commands too long for the test suite (or that serve until stopped): their command lines are
parsed, and their inputs checked (the sweep spec exists, the reproduction is registered); the live
ones run as real processes in tests/gateway/, tests/engines/, tests/load/ and tests/testbed/."""


def documented_commands(pages=PAGES):
    """(page, argv) of every hetlb command line in a bash block of ``pages``; a synopsis line
    (``[--scale quick|paper]``) is not a command."""
    commands = []
    for page in pages:
        for block in re.findall(r"```bash\n(.*?)```", page.read_text(), flags=re.S):
            for line in block.replace("\\\n", " ").splitlines():
                line = line.split("#")[0].strip()
                words = line.removesuffix("&").split()  # a command sent to the background
                if words[:1] in (["hetlb"], [".venv/bin/hetlb"]) and " [--" not in line:
                    commands.append((page.relative_to(ROOT).as_posix(), words[1:]))
    return commands


def readme_commands():
    return [argv for _, argv in documented_commands([README])]


def test_the_readme_has_its_commands():
    assert len(readme_commands()) >= 14
    assert len(documented_commands()) >= len(readme_commands()) + 15


@pytest.mark.parametrize(
    "page, argv", documented_commands(), ids=lambda value: value if isinstance(value, str) else " ".join(value)[:60]
)
def test_every_documented_command_line_runs(page, argv, tmp_path, monkeypatch, capsys, restore_registry):
    from hetlb.experiments import REPRODUCTIONS

    build_parser().parse_args(argv)  # a usage error raises SystemExit
    if argv[0] in PARSE_ONLY:
        if argv[0] == "reproduce":
            assert argv[1] in REPRODUCTIONS
        if argv[0] == "sweep":
            assert (ROOT / argv[1]).exists()
        return
    argv = [SHRINK.get(previous, value) if previous in SHRINK else value for previous, value in zip([""] + argv, argv)]
    if argv[0] == "simulate" and not {"--jobs", "--horizon", "--slots"} & set(argv):
        argv += ["--jobs", "2000"]
    if argv[0] == "tune":
        argv += ["--jobs", "1000"]
    if argv[0] == "diffusion" and "--paths" not in argv:
        argv += ["--paths", "16"]
    if argv[0] == "graph":  # the same construction on 16 times fewer servers and ports
        argv = [re.sub(r"^64x", "4x", value).replace(",64x", ",4x").replace("ports=1024", "ports=64") for value in argv]
    # run from the repository root, as the docs do, but write into tmp_path
    argv = [str(ROOT / value) if "/" in value and (ROOT / value).exists() else value for value in argv]
    argv = [
        re.sub(r"file=([\w./-]+)", lambda m: f"file={ROOT / m[1]}" if (ROOT / m[1]).exists() else m[0], value)
        for value in argv
    ]
    monkeypatch.chdir(tmp_path)
    status = main(argv)
    out = capsys.readouterr().out
    assert status == 0 and out.strip()
    if "--json" in argv:
        json.loads(out)


@pytest.mark.parametrize("command", ["policies", "exact", "bound", "graph", "diffusion", "store", "simulate", "demo"])
def test_help_of_every_command_prints(command, capsys):
    with pytest.raises(SystemExit) as leaving:
        main([command, "-h"])
    assert leaving.value.code == 0 and capsys.readouterr().out.startswith(f"usage: hetlb {command}")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["demo", "--out", "/dev/null"], "--out: /dev/null is a file, not a folder"),
        (["demo", "--replications", "99999999999999999999"], "--replications: must be an integer in [1, 100]"),
        (["demo", "--jobs", "5"], "--jobs: must be an integer in [100, 100000000]"),
    ],
)
def test_demo_checks_its_inputs_before_running(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hetlb: error: {message}") and err.count("\n") == 1


def test_a_config_whose_tables_are_not_tables_is_one_line(tmp_path, capsys):
    config = tmp_path / "scenario.toml"
    config.write_text("system = 3\n")
    assert main(["exact", "--config", str(config)]) == 2
    assert capsys.readouterr().err.strip() == "hetlb: error: system: must be a table, got 3"
