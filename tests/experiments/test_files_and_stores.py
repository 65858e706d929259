"""Files, paths, stores and sweep tables: every bad one gives one line naming the field (and the
file), exit status 2, never a traceback; valid input that used to fail gives its result; a result
store is never left damaged by a sweep, and a damaged one is reported, never used."""

import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hetlb import InputError, validation
from hetlb.cli import main
from hetlb.experiments import ResultStore, SweepSpec, comparable, sweep
from hetlb.scenario import Scenario

ROOT = Path(__file__).resolve().parents[2]
MAX_ERROR_LENGTH = 300

BASE = {
    "system": {"speeds": "2x1.0,2x0.5", "load": 0.5},
    "policy": {"id": "jsq"},
    "run": {"jobs": 300},
}


def error_line(capsys, argv) -> str:
    """Run ``hetlb ARGV`` in this process; it must fail with exit status 2 and print one short
    line on standard error, which is returned without its ``hetlb: error: `` head."""
    assert main([str(arg) for arg in argv]) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("hetlb: error: ") and len(lines[0]) <= MAX_ERROR_LENGTH, lines[0]
    return lines[0].removeprefix("hetlb: error: ")


def spec_file(tmp_path, text: str, name: str = "spec.toml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


CONTINUOUS_SPEC = """
name = "two-axes"
replications = 2
seed = 3
[base.system]
speeds = "2x1.0,2x0.5"
load = 0.5
[base.run]
jobs = 300
[axes]
"system.load" = [0.4, 0.7]
"policy.id" = ["jsq", "jfsq"]
"""


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished two-axis sweep (system.load x policy.id) and a one-axis one: (folder, store, out
    of the two-axis sweep, out of the one-axis sweep)."""
    folder = tmp_path_factory.mktemp("finished")
    store = folder / "store.sqlite"
    spec = SweepSpec.from_toml(spec_file(folder, CONTINUOUS_SPEC))
    sweep(spec, executor="serial", store=store, out=folder / "two")
    one = SweepSpec(base=BASE, axes={"system.load": [0.3, 0.5, 0.7]}, replications=2, seed=1, name="one-axis")
    sweep(one, executor="serial", store=store, out=folder / "one")
    return folder, store, folder / "two", folder / "one"


@pytest.fixture
def drawn(monkeypatch):
    """What hetlb plot would draw: the arguments of each plot_metric call (the PNG is still written)."""
    import hetlb.plots.sweeps

    calls = []
    real = hetlb.plots.sweeps.plot_metric

    def spy(x, series, path, **options):
        calls.append({"x": list(x), "series": series, "path": Path(path), **options})
        return real(x, series, path, **options)

    monkeypatch.setattr(hetlb.plots.sweeps, "plot_metric", spy)
    return calls


# --- hetlb plot -----------------------------------------------------------------------------------


def test_plot_by_nothing_draws_one_line_of_a_one_axis_sweep(finished, capsys, drawn):
    _, _, _, one = finished
    summary = pd.read_parquet(one / "summary.parquet").sort_values("system.load")
    for by in ([], ["--by", ""]):  # the default: one line, as the sweep does not vary the policy
        assert main(["plot", str(one), "--x", "system.load", *by]) == 0
        (call,) = drawn[-1:]
        assert call["x"] == [0.3, 0.5, 0.7]
        ((mean, low, high),) = call["series"].values()
        assert np.array_equal(mean, summary["mean_response_time"].to_numpy())
        assert np.array_equal(low, summary["mean_response_time_ci_low"].to_numpy())
        assert np.array_equal(high, summary["mean_response_time_ci_high"].to_numpy())
    assert (one / "mean_response_time.png").stat().st_size > 10_000
    assert "wrote" in capsys.readouterr().out


def test_plot_by_nothing_of_a_two_axis_sweep_names_the_other_axis(finished, capsys):
    _, _, two, _ = finished
    message = error_line(capsys, ["plot", two, "--x", "system.load", "--by", ""])
    assert (
        message.startswith("--by: ") and "policy.id varies too: draw a line per value of it (by policy.id)" in message
    )


def test_plot_x_must_be_an_axis(finished, capsys):
    _, _, two, _ = finished
    message = error_line(capsys, ["plot", two, "--x", "replications"])
    assert message == "--x: must be an axis of the sweep (system.load, policy.id), got 'replications'"
    message = error_line(capsys, ["plot", two, "--x", "system.load", "--by", "system.load"])
    assert message.startswith("--by: must be another axis of the sweep (policy.id)")


def test_plot_a_column_without_interval(finished, capsys, drawn):
    """--metric events: a figure with no _ci_low/_ci_high columns is drawn without a band."""
    _, _, two, _ = finished
    assert main(["plot", str(two), "--x", "system.load", "--metric", "events"]) == 0
    summary = pd.read_parquet(two / "summary.parquet")
    series = drawn[-1]["series"]
    assert sorted(series) == ["jfsq", "jsq"]
    for policy, (mean, low, high) in series.items():
        rows = summary[summary["policy.id"] == policy].sort_values("system.load")
        assert np.array_equal(mean, rows["events"].to_numpy(dtype=float))
        assert np.isnan(low).all() and np.isnan(high).all()
    assert (two / "events.png").stat().st_size > 10_000
    message = error_line(capsys, ["plot", two, "--x", "system.load", "--metric", "policy.id"])
    assert message.startswith("--metric: must be a figure of the sweep such as mean_response_time, ")


def test_plot_lines_are_aligned_on_the_x_values(finished, tmp_path, capsys, drawn):
    """A line that lacks a point (a sweep stopped midway) has a gap there, the others are whole."""
    _, _, two, _ = finished
    summary = pd.read_parquet(two / "summary.parquet")
    gap = summary[~((summary["policy.id"] == "jfsq") & (summary["system.load"] == 0.4))]
    (tmp_path / "gap").mkdir()
    gap.to_parquet(tmp_path / "gap" / "summary.parquet", index=False)
    assert main(["plot", str(tmp_path / "gap"), "--x", "system.load", "--bound"]) == 0
    call = drawn[-1]
    assert call["x"] == [0.4, 0.7]
    jfsq, jsq = call["series"]["jfsq"][0], call["series"]["jsq"][0]
    assert (
        np.isnan(jfsq[0])
        and jfsq[1] == summary.query("`policy.id` == 'jfsq' and `system.load` == 0.7")["mean_response_time"].item()
    )
    assert np.isfinite(jsq).all()
    assert len(call["bound"]) == 2


@pytest.mark.parametrize(
    "output,words",
    [
        ("x.bin", "--output: must end in one of .avif, "),
        ("no-such-folder/x.png", "--output: no such folder: "),
        ("a" * 300 + ".png", "--output: a name in the path is longer than 255 bytes: aaa"),
        (".", "--output: is a folder, not a file: "),
    ],
)
def test_plot_output_is_checked_before_drawing(finished, capsys, monkeypatch, output, words):
    _, _, two, _ = finished
    monkeypatch.chdir(two)
    assert error_line(capsys, ["plot", two, "--x", "system.load", "--output", output]).startswith(words)


def test_plot_writes_other_formats(finished, tmp_path, capsys):
    _, _, two, _ = finished
    assert main(["plot", str(two), "--x", "system.load", "--output", str(tmp_path / "figure.pdf")]) == 0
    assert (tmp_path / "figure.pdf").read_bytes().startswith(b"%PDF")


@pytest.mark.parametrize("content", [b"", b"PAR1 but nothing else", b"\x00" * 1000])
def test_a_corrupt_summary_is_named(short_tmp_path, capsys, content):
    (short_tmp_path / "summary.parquet").write_bytes(content)
    message = error_line(capsys, ["plot", short_tmp_path, "--x", "system.load"])
    assert message.startswith(f"sweep_dir: {short_tmp_path / 'summary.parquet'} is not a readable Parquet table (")


def test_a_summary_that_is_not_a_sweeps(tmp_path, capsys):
    pd.DataFrame({"a": [1, 2]}).to_parquet(tmp_path / "summary.parquet")
    assert error_line(capsys, ["plot", tmp_path, "--x", "system.load"]).startswith("--x: must be an axis")
    pd.DataFrame({"a": []}).to_parquet(tmp_path / "summary.parquet")
    assert error_line(capsys, ["plot", tmp_path, "--x", "a"]).endswith("is not the summary table of a sweep")
    assert error_line(capsys, ["plot", tmp_path / "none", "--x", "a"]).startswith("sweep_dir: no summary.parquet in")
    assert error_line(capsys, ["plot", "", "--x", "a"]) == "sweep_dir: must be a file path, got ''"


# --- hetlb sweep: specs, --config, --out ---------------------------------------------------------------


def test_the_slotted_sweep_of_the_docs_runs(tmp_path, capsys):
    """The LED example of docs/how-to/sweeps.md (with fewer slots and servers) prints its table."""
    text = (ROOT / "docs" / "how-to" / "sweeps.md").read_text()
    (block,) = [b for b in re.findall(r"```toml\n(.*?)```", text, flags=re.S) if 'model = "slotted"' in b]
    spec = tomllib.loads(block)
    spec["base"]["system"]["speeds"] = "5x1.0,5x0.1"
    spec["base"]["system"]["dispatchers"] = 2
    spec["base"]["run"]["slots"] = 400
    spec["replications"] = 2
    path = tmp_path / "led.toml"
    path.write_text(toml_text(spec))
    store, out = tmp_path / "s.sqlite", tmp_path / "out"
    assert main(["sweep", str(path), "--executor", "serial", "--store", str(store), "--out", str(out), "-q"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].split() == [
        "policy.id",
        "replications",
        "mean_delay",
        "mean_delay_ci_low",
        "mean_delay_ci_high",
        "messages_per_arrival",
    ]
    assert [line.split()[0] for line in printed[1:4]] == ["l-jsq", "l-jba", "l-pod"]
    assert printed[-1].startswith("6 runs computed, 0 reused")
    assert len(pd.read_parquet(out / "runs.parquet")) == 6


def toml_text(spec: dict) -> str:
    """A spec mapping as TOML (the few shapes the tests use)."""
    lines = [f"{key} = {json.dumps(value)}" for key, value in spec.items() if not isinstance(value, dict)]
    for table in ("base", "axes"):
        for key, value in spec.get(table, {}).items():
            if isinstance(value, dict):
                lines.append(f"[{table}.{key}]")
                lines += [f"{k} = {json.dumps(v)}" for k, v in value.items()]
            else:
                lines += [f"[{table}]", f"{json.dumps(key)} = {json.dumps(value)}"]
    return "\n".join(lines) + "\n"


WRONG_TYPES = [
    ('[base]\npolicy = -1\n[base.system]\nspeeds = "1,1"\nload = 0.5\n', "base.policy: must be a table, got -1"),
    ('axes = 0.999\n[base.system]\nspeeds = "1,1"\nload = 0.5\n', "axes: must be a table, got 0.999"),
    (
        '[base.system]\nmodel = "slotted"\nspeeds = "2x1.0"\nload = 0.5\n[base.policy]\nid = "l-jsq"\n'
        '[base.run]\nslots = 100\nwarmup = "x"\n',
        "point {}: run.warmup: must be an integer >= 0, got 'x'",
    ),
    (
        '[base.system]\nspeeds = "1,1"\nload = 0.5\njob_sizes = "hyperexponential"\nscv = [0.5, "x"]\n',
        "point {}: system.scv: must be a finite number, got [0.5, 'x']",
    ),
    ('[base.system]\nspeeds = "1,1"\nload = 0.5\n[base.run]\njobs = "x"\n', "point {}: run.jobs: must be an integer"),
    ('[base.system]\nspeeds = [1, "x"]\nload = 0.5\n', "point {}: system.speeds: must be a text such as"),
    ('[base.system]\nspeeds = "1,1"\nload = 0.5\ngraph = 3\n', "point {}: system.graph: must be one list of"),
    (
        '[base.system]\nspeeds = "1,1"\nload = 0.5\n[base.policy]\nid = [1]\n',
        "point {}: policy.id: must be a non-empty",
    ),
    ('[base.system]\nspeeds = "1,1"\nload = 0.5\njob_sizes = {}\n', "point {}: system.job_sizes: must be a non-empty"),
    ('[base.system]\nmodel = 1\nspeeds = "1,1"\nload = 0.5\n', "point {}: system.model: must be one of continuous"),
    ('name = 5\n[base.system]\nspeeds = "1,1"\nload = 0.5\n', "name: must be a non-empty text, got 5"),
    ('common_random_numbers = 1\n[base]\nsystem = {speeds = "1"}\n', "common_random_numbers: must be true or false"),
    ("base = 1\n", "base: must be a table, got 1"),
    (
        '[base.system]\nspeeds = "1,1"\nload = 0.5\n[axes]\n"system.load" = 0.5\n',
        "axes.system.load: must be a non-empty",
    ),
    (
        '[base.system]\nspeeds = "1,1"\nload = 0.5\n[axes]\n"system.load" = [0.5, 0.6, 0.5]\n',
        "axes.system.load: repeats the value 0.5: each point once",
    ),
    ('[base.system]\nspeeds = "1,1"\nload = 0.5\n[axes]\n"system.load.x" = [1]\n', "axes.system.load.x: load is not a"),
    ('[base.system]\nspeeds = "1,1"\nload = 0.5\n[axes]\n"run.seed" = [1, 2]\n', "axes.run.seed: is set for the whole"),
    ('[base.system]\nspeeds = "1,1"\nload = 0.5\n[base.run]\nseed = 1\n', "base.run.seed: is set for the whole"),
    (
        'replications = 1000\n[base.system]\nspeeds = "1,1"\nload = 0.5\n[axes]\n"system.buffer" = '
        + str(list(range(1, 1002))),
        "axes: the sweep has 1,001,000 runs (points x replications); at most 1,000,000",
    ),
]


@pytest.mark.parametrize("text,message", WRONG_TYPES)
def test_wrong_types_in_a_spec_are_named(tmp_path, capsys, text, message):
    store = tmp_path / "s.sqlite"
    got = error_line(capsys, ["sweep", spec_file(tmp_path, text), "--executor", "serial", "--store", store, "-q"])
    assert got.startswith(message)
    assert not store.exists()  # refused before the store is opened, let alone a run


def test_wrong_types_in_a_scenario_file_are_named(tmp_path, capsys):
    config = spec_file(tmp_path, '[system]\nspeeds = "1,1"\nload = 0.5\njob_sizes = "hyperexponential"\nscv = "x"\n')
    assert error_line(capsys, ["simulate", "--config", config]) == "system.scv: must be a finite number, got 'x'"
    with pytest.raises(InputError, match="^run: must be a table"):
        Scenario.from_mapping({"system": {"speeds": "1"}, "run": [1]})


def unreadable_files(tmp_path) -> list:
    (tmp_path / "folder").mkdir()
    (tmp_path / "binary.toml").write_bytes(bytes(range(256)))
    (tmp_path / "utf16.toml").write_text('name = "x"\n', encoding="utf-16")
    (tmp_path / "bad.toml").write_text("name = \n")
    return [
        (tmp_path / "folder", f"is a folder, not a file: {tmp_path / 'folder'}"),
        (tmp_path / "binary.toml", f"{tmp_path / 'binary.toml'} is not UTF-8 text (byte 128): TOML files are UTF-8"),
        (tmp_path / "utf16.toml", f"{tmp_path / 'utf16.toml'} is not UTF-8 text (byte 0): TOML files are UTF-8"),
        (tmp_path / "bad.toml", f"{tmp_path / 'bad.toml'} is not valid TOML: Invalid value (at line 1, column 8)"),
        (tmp_path / "missing.toml", f"no such file: {tmp_path / 'missing.toml'}"),
        ("", "must be a file path, got ''"),
        ("x" * 300, "a name in the path is longer than 255 bytes: xxx"),
    ]


def test_unreadable_spec_and_config_files(short_tmp_path, capsys):
    for path, rule in unreadable_files(short_tmp_path):
        assert error_line(capsys, ["sweep", path, "-q"]).startswith(f"spec: {rule}")
        assert error_line(capsys, ["simulate", "--config", path]).startswith(f"--config: {rule}")


def test_an_oversized_config_is_refused_unread(tmp_path, capsys, monkeypatch):
    import hetlb.scenario

    monkeypatch.setattr(hetlb.scenario, "MAX_TOML_BYTES", 2**20)
    big = tmp_path / "big.toml"
    big.write_text("# padding\n" * 200_000)
    assert (
        error_line(capsys, ["simulate", "--config", big])
        == f"--config: {big} is larger than 1 MiB: not a scenario or spec file"
    )


@pytest.mark.parametrize(
    "out,words",
    [
        ("file", "--out: {tmp}/file is a file, not a folder"),
        ("file/below", "--out: {tmp}/file is a file, not a folder"),
        ("b" * 300, "--out: a name in the path is longer than 255 bytes: bbb"),
        ("", "--out: must be a file path, got ''"),
    ],
)
def test_sweep_and_reproduce_out_are_checked_before_any_run(tmp_path, capsys, out, words):
    (tmp_path / "file").write_text("not a folder")
    spec, store = spec_file(tmp_path, CONTINUOUS_SPEC), tmp_path / "s.sqlite"
    out = str(tmp_path / out) if out and not out.startswith("b") else out
    words = words.format(tmp=tmp_path)
    assert error_line(capsys, ["sweep", spec, "--executor", "serial", "--store", store, "--out", out]).startswith(words)
    assert not store.exists()
    argv = ["reproduce", "weng-fig2", "--executor", "serial", "--store", store, "--out", out]
    assert error_line(capsys, argv).startswith(words)
    assert not store.exists()


def test_sweep_out_makes_missing_folders(tmp_path, capsys):
    spec = spec_file(tmp_path, CONTINUOUS_SPEC.replace('["jsq", "jfsq"]', '["jsq"]'))
    out = tmp_path / "a" / "b"
    assert main(["sweep", str(spec), "--executor", "serial", "--store", str(tmp_path / "s"), "--out", str(out)]) == 0
    assert len(pd.read_csv(out / "runs.csv")) == 4


def test_config_empty_is_an_error_not_no_config(capsys):
    assert error_line(capsys, ["simulate", "--config", "", "--speeds", "1", "--load", "0.5"]) == (
        "--config: must be a file path, got ''"
    )


def test_long_values_are_cut_in_messages(tmp_path, capsys):
    long = "y" * 5000
    pd.DataFrame({"system.load": [0.5], "m": [1.0]}).to_parquet(tmp_path / "summary.parquet")
    assert error_line(capsys, ["plot", tmp_path, "--x", long]).endswith("... (5,002 characters)")
    spec = spec_file(tmp_path, f'{long} = 1\n[base.system]\nspeeds = "1"\nload = 0.5\n')
    assert error_line(capsys, ["sweep", spec]).startswith("yyy")
    speeds = json.dumps([1] + ["x"] * 2000)
    spec = spec_file(tmp_path, f'[base.system]\nspeeds = "1"\nload = 0.5\n[axes]\n"system.speeds" = [{speeds}]\n')
    message = error_line(capsys, ["sweep", spec])
    assert message.startswith("point {'system.speeds': [1, 'x', ") and message.endswith(" characters)")
    assert validation.shorten("a\nb") == "a b"


# --- result stores ---------------------------------------------------------------------------------


def damaged_stores(tmp_path, store: Path) -> list:
    """(path, what the message says) of stores that are not stores or are damaged, each made from a copy
    of ``store``."""
    data = store.read_bytes()
    cases = []

    def make(name, content):
        path = tmp_path / name
        path.write_bytes(content)
        return path

    cases.append((make("notes.txt", b"my notes\n"), "is not a hetlb result store (not an SQLite database)"))
    cases.append((make("truncated.sqlite", data[: len(data) // 2]), "is damaged (database disk image is malformed)"))
    cases.append(
        (make("header.sqlite", bytes(100) + data[100:]), "is not a hetlb result store (not an SQLite database)")
    )
    cases.append((make("first-page.sqlite", data[:100] + b"\xff" * 3000 + data[3100:]), "is damaged ("))
    cases.append((make("tail.sqlite", data[: len(data) - 4096] + b"\x07" * 4096), "is damaged ("))
    row = make("row.sqlite", data)
    with sqlite3.connect(row) as connection:
        connection.execute("UPDATE runs SET row = '{\"mean_response_time\": 1.' WHERE rowid = 1")
    connection.close()
    cases.append((row, "is damaged (the run "))  # only what reads the row finds it
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as connection:
        connection.execute("CREATE TABLE notes (text TEXT)")
    connection.close()
    cases.append((foreign, "is an SQLite database but not a hetlb result store (no runs table)"))
    columns = tmp_path / "columns.sqlite"
    with sqlite3.connect(columns) as connection:
        connection.execute("CREATE TABLE runs (key TEXT)")
    connection.close()
    cases.append((columns, "is damaged (its runs table has no column row)"))
    return cases


def test_damaged_stores_are_named_in_one_line_and_left_as_they_are(finished, short_tmp_path, capsys):
    tmp_path = short_tmp_path
    _, store, _, _ = finished
    spec = spec_file(tmp_path, CONTINUOUS_SPEC)
    for path, words in damaged_stores(tmp_path, store):
        before = path.read_bytes()
        commands = [
            ["store", "two-axes", "--store", path],
            ["sweep", spec, "--executor", "serial", "--store", path, "--out", tmp_path / "out", "-q"],
        ]
        if path.name != "row.sqlite":  # listing and the reproduction's runs do not read the damaged row
            commands += [
                ["store", "--store", path],
                ["reproduce", "weng-fig2", "--executor", "serial", "--store", path, "--out", tmp_path / "r", "-q"],
            ]
        for argv in commands:
            message = error_line(capsys, argv)
            assert message.startswith(f"--store: {path} ") and words in message, (argv, message)
        assert path.read_bytes() == before
        assert not (tmp_path / "out").exists()


def test_stores_that_are_no_files(tmp_path, capsys):
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("x")
    spec = spec_file(tmp_path, CONTINUOUS_SPEC)
    for store, rule in [
        ("", "must be a file path, got ''"),
        ("/dev/null", "must be a regular file, got /dev/null"),
        (tmp_path / "folder", f"is a folder, not a file: {tmp_path / 'folder'}"),
        (tmp_path / "file" / "s.sqlite", f"{tmp_path / 'file'} is a file, not a folder"),
        ("s" * 300, "a name in the path is longer than 255 bytes"),
    ]:
        assert error_line(capsys, ["sweep", spec, "--store", store, "-q"]).startswith(f"--store: {rule}")
    assert error_line(capsys, ["store", "--store", tmp_path / "none"]) == f"--store: no such file: {tmp_path / 'none'}"
    assert error_line(capsys, ["store", "--store", "/dev/null"]) == "--store: must be a regular file, got /dev/null"


def test_an_empty_file_is_an_empty_store_but_not_one_to_list(tmp_path, capsys):
    path = tmp_path / "empty.sqlite"
    path.write_bytes(b"")
    with pytest.raises(InputError, match="it is empty"):
        ResultStore(path, readonly=True)
    with ResultStore(path) as store:  # the file a sweep killed before its first write leaves
        assert store.sweeps() == []
    assert path.read_bytes().startswith(b"SQLite format 3\x00")


def test_random_damage_never_gives_anything_but_one_line(finished, tmp_path):
    """Truncations and overwrites anywhere: opening, listing, loading and looking up either work
    (the damage missed what was read) or raise InputError naming the store."""
    _, store, _, _ = finished
    data = store.read_bytes()
    rng = random.Random(12)
    contents = [data[:n] for n in (1, 15, 16, 99, 100, 101, 1024, 4095, 4096, 4097, len(data) - 4097)]
    for _ in range(150):
        start, length = rng.randrange(len(data)), rng.choice([1, 8, 64, 512, 4096])
        chunk = bytes(rng.randrange(256) for _ in range(length)) if rng.random() < 0.5 else bytes(length)
        contents.append((data[:start] + chunk + data[start + length :])[: len(data)])
    outcomes = {"ok": 0, "error": 0}
    path = tmp_path / "s.sqlite"
    for content in contents:
        path.write_bytes(content)
        for readonly in (True, False):
            try:
                with ResultStore(path, readonly=readonly) as opened:
                    for entry in opened.sweeps():
                        opened.load(entry["name"])
                        opened.spec(entry["name"])
                    opened.existing([f"{i:064x}" for i in range(3)] + [r["key"] for r in opened.load("two-axes")])
                outcomes["ok"] += 1
            except InputError as error:
                assert error.field == "store" and str(path) in error.rule and len(str(error)) <= MAX_ERROR_LENGTH
                outcomes["error"] += 1
    assert outcomes["ok"] > 0 and outcomes["error"] > 0


def test_a_store_of_an_earlier_layout_read_only_asks_to_be_opened_writable(tmp_path):
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as connection:
        connection.executescript(
            """CREATE TABLE runs (key TEXT PRIMARY KEY, row TEXT NOT NULL, created REAL NOT NULL);
               CREATE TABLE sweeps (name TEXT NOT NULL, key TEXT NOT NULL, position INTEGER NOT NULL,
                                    PRIMARY KEY (name, key));"""
        )
    connection.close()
    before = path.read_bytes()
    with pytest.raises(InputError, match="layout of an earlier hetlb; open it writable once"):
        ResultStore(path, readonly=True)
    assert path.read_bytes() == before
    with ResultStore(path) as opened:  # upgraded in one transaction
        assert opened.sweeps() == []
    with ResultStore(path, readonly=True) as opened:
        assert opened.tables()["sweeps"] >= {"point", "replication", "point_values"}
        assert "sweep_specs" in opened.tables()


def test_a_damaged_row_is_rewritten_by_force(finished, tmp_path):
    _, store, _, _ = finished
    path = tmp_path / "s.sqlite"
    path.write_bytes(store.read_bytes())
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE runs SET row = '[1, 2]'")
    connection.close()
    spec = SweepSpec.from_toml(spec_file(tmp_path, CONTINUOUS_SPEC))
    with pytest.raises(
        InputError, match=r"is damaged \(the run [0-9a-f]{12} is not a JSON table\); `hetlb sweep --force`"
    ):
        sweep(spec, executor="serial", store=path)
    forced = sweep(spec, executor="serial", store=path, force=True)
    again = sweep(spec, executor="serial", store=path)
    assert (again.computed, again.reused) == (0, 8)
    assert comparable(again.runs).equals(comparable(forced.runs))


# --- a sweep killed at any moment ------------------------------------------------------------------

KILLED_SPEC = dict(
    base={"system": {"speeds": "2x1.0,2x0.5", "load": 0.5}, "policy": {"id": "jsq"}, "run": {"jobs": 400}},
    axes={"system.load": [0.3, 0.4, 0.5, 0.6, 0.7, 0.8], "policy.id": ["jsq", "jfsq", "sed"]},
    replications=5,
    seed=11,
    name="killed",
)
KILLED_RUNS = 6 * 3 * 5


KILLED_SCRIPT = """
import os, signal, sys
from hetlb.experiments import SweepSpec, sweep
from hetlb.experiments.store import ResultStore

mode, count, store = sys.argv[1], int(sys.argv[2]), sys.argv[3]
put, calls = ResultStore.put, []


class Dying:
    \"\"\"The store's connection, killing this process (SIGKILL) when the write's transaction would commit.\"\"\"

    def __init__(self, connection):
        self.connection = connection

    def __getattr__(self, name):
        return getattr(self.connection, name)

    def __enter__(self):
        return self.connection.__enter__()

    def __exit__(self, *exc):
        os.kill(os.getpid(), signal.SIGKILL)


def announcing_put(self, rows):
    calls.append(rows)
    if mode == "die-in-write" and len(calls) == count:
        self.connection = Dying(self.connection)
    put(self, rows)
    print("stored", flush=True)


ResultStore.put = announcing_put
sweep(SweepSpec(**SPEC), executor="serial", store=store, events_per_task=1)
"""


def run_until_killed(tmp_path, store: Path, mode: str, count: int) -> None:
    """Run the killed sweep in a new process: ``die-in-write`` kills itself (SIGKILL) inside its
    ``count``-th write, after the rows are inserted and before they are committed; ``announce``
    is killed here as soon as it has written ``count`` times (at whatever it is doing then)."""
    script = tmp_path / "run_sweep.py"
    script.write_text(KILLED_SCRIPT.replace("SPEC)", f"{KILLED_SPEC!r})"))
    environment = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    command = [sys.executable, str(script), mode, str(count), str(store)]
    with subprocess.Popen(command, env=environment, stdout=subprocess.PIPE, text=True) as process:
        if mode == "announce":
            for _ in range(count):
                assert process.stdout.readline() == "stored\n"
            process.send_signal(signal.SIGKILL)
        assert process.wait(timeout=600) == -signal.SIGKILL


def finished_runs(store: Path) -> int:
    """The killed sweep's finished runs, once its store has passed SQLite's integrity check."""
    with ResultStore(store) as opened:
        assert opened.connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        (entry,) = opened.sweeps()
        assert entry["runs"] == KILLED_RUNS
        return entry["finished"]


def test_a_sweep_killed_at_any_moment_leaves_a_store_that_resumes_exactly(tmp_path):
    """Tiny runs, each written on its own, so that a process spends much of its time writing:
    killed inside a write, the store has exactly the runs written before; killed twice more at
    whatever moment follows a write, it keeps at least those; each time it opens and passes
    SQLite's integrity check, and the last resume computes just the missing runs, with the
    tables of a sweep never stopped."""
    store = tmp_path / "store.sqlite"
    run_until_killed(tmp_path, store, "die-in-write", 4)
    assert finished_runs(store) == 3
    written = 3
    for count in (10, 20):
        run_until_killed(tmp_path, store, "announce", count)
        now = finished_runs(store)
        assert now >= written + count
        written = now
    assert written < KILLED_RUNS
    resumed = sweep(SweepSpec(**KILLED_SPEC), executor="serial", store=store)
    assert (resumed.computed, resumed.reused) == (KILLED_RUNS - written, written)
    fresh = sweep(SweepSpec(**KILLED_SPEC), executor="serial", store=None)
    assert comparable(resumed.runs).equals(comparable(fresh.runs))
    assert comparable(resumed.summary).equals(comparable(fresh.summary))
