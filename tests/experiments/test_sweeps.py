"""Sweeps: identical tables on every executor, resumption, per-point seeds, common random numbers."""

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

from hetlb import InputError
from hetlb.cli import main
from hetlb.experiments import ResultStore, SweepSpec, comparable, paired_differences, sweep

BASE = {
    "system": {"n_servers": 6, "speed_mix": [[2.0, 0.5], [0.5, 0.5]], "load": 0.7},
    "policy": {"id": "jsq"},
    "run": {"jobs": 600, "warmup": 5.0},
}


def spec_200_runs():
    return SweepSpec(
        base=BASE,
        axes={"system.load": [0.3, 0.5, 0.7, 0.9], "policy.id": ["jsq", "jfsq", "jiq", "jfiq", "sed"]},
        replications=10,
        seed=7,
        name="two-hundred",
    )


@pytest.mark.slow
def test_200_runs_identical_serial_process_pool_and_dask_cluster():
    distributed = pytest.importorskip("distributed")
    spec = spec_200_runs()
    serial = sweep(spec, executor="serial", store=None)
    pool = sweep(spec, executor="processes:2", store=None, events_per_task=20_000)
    assert len(serial.runs) == 200 and serial.computed == 200
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):
        on_dask = sweep(spec, executor=client, store=None, events_per_task=20_000)
    for other in (pool, on_dask):
        assert comparable(other.runs).equals(comparable(serial.runs))
        assert comparable(other.summary).equals(comparable(serial.summary))


def test_adding_points_or_reordering_leaves_a_point_unchanged():
    first = sweep(
        SweepSpec(base=BASE, axes={"system.load": [0.5, 0.7]}, replications=2, seed=3), executor="serial", store=None
    )
    second = sweep(
        SweepSpec(base=BASE, axes={"system.load": [0.9, 0.7, 0.6, 0.5]}, replications=2, seed=3),
        executor="serial",
        store=None,
    )
    for load in (0.5, 0.7):
        a = comparable(first.runs[first.runs["system.load"] == load]).drop(columns=["point"]).reset_index(drop=True)
        b = comparable(second.runs[second.runs["system.load"] == load]).drop(columns=["point"]).reset_index(drop=True)
        assert a.equals(b)


def test_common_random_numbers_pair_policies_and_narrow_differences():
    axes = {"policy.id": ["jsq", "jfsq"]}
    with_crn = SweepSpec(base=BASE, axes=axes, replications=12, seed=5, common_random_numbers=True)
    without = SweepSpec(base=BASE, axes=axes, replications=12, seed=5, common_random_numbers=False)
    crn_units = with_crn.units()
    assert crn_units[0].seed_key == crn_units[12].seed_key  # jsq and jfsq, replication 0
    assert without.units()[0].seed_key != without.units()[12].seed_key
    widths = []
    for spec in (with_crn, without):
        runs = sweep(spec, executor="serial", store=None).runs
        difference = paired_differences(runs, "mean_response_time", "policy.id", "jfsq", "jsq")
        widths.append(float(difference["ci_high"].iloc[0] - difference["ci_low"].iloc[0]))
    assert widths[0] < widths[1]


def test_store_reuses_and_force_recomputes(tmp_path):
    store = tmp_path / "store.sqlite"
    spec = SweepSpec(base=BASE, axes={"policy.id": ["jsq", "pod"]}, replications=3, seed=1, name="small")
    first = sweep(spec, executor="serial", store=store, out=tmp_path / "out")
    again = sweep(spec, executor="serial", store=store)
    assert (first.computed, first.reused) == (6, 0)
    assert (again.computed, again.reused) == (0, 6)
    assert comparable(again.runs).equals(comparable(first.runs))
    forced = sweep(spec, executor="serial", store=store, force=True)
    assert forced.computed == 6
    with ResultStore(store) as opened:
        assert opened.sweeps() == [{"name": "small", "runs": 6, "finished": 6, "source": None}]
        assert len(opened.load("small")) == 6
        assert SweepSpec.from_mapping(opened.spec("small")) == spec
    for name in ("runs.csv", "runs.parquet", "summary.csv", "summary.parquet"):
        assert (tmp_path / "out" / name).stat().st_size > 0


@pytest.mark.slow
def test_killed_sweep_resumes_with_only_the_missing_runs(tmp_path):
    store = tmp_path / "store.sqlite"
    script = tmp_path / "run_sweep.py"
    script.write_text(
        textwrap.dedent(f"""
        from hetlb.experiments import SweepSpec, sweep
        base = {BASE!r}
        base["run"] = {{"jobs": 1000000, "warmup": 5.0}}
        spec = SweepSpec(base=base, axes={{"system.load": [0.5, 0.6, 0.7, 0.8, 0.9]}}, replications=4, seed=2,
                         name="killed")
        sweep(spec, executor="serial", store={str(store)!r}, events_per_task=1)
    """)
    )
    process = subprocess.Popen([sys.executable, str(script)])
    finished_before_kill = 0
    deadline = time.time() + 300
    while time.time() < deadline and process.poll() is None:
        time.sleep(0.2)
        if store.exists():
            with sqlite3.connect(store) as connection:
                finished_before_kill = connection.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
            if finished_before_kill >= 3:
                break
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    with sqlite3.connect(store) as connection:
        stored = connection.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    assert 0 < stored < 20
    with ResultStore(store) as opened:  # the killed sweep is listed with its progress
        assert opened.sweeps() == [{"name": "killed", "runs": 20, "finished": stored, "source": None}]
    base = {**BASE, "run": {"jobs": 1000000, "warmup": 5.0}}
    spec = SweepSpec(base=base, axes={"system.load": [0.5, 0.6, 0.7, 0.8, 0.9]}, replications=4, seed=2, name="killed")
    resumed = sweep(spec, executor="serial", store=store)
    assert (resumed.computed, resumed.reused) == (20 - stored, stored)
    fresh = sweep(spec, executor="serial", store=None)
    assert comparable(resumed.runs).equals(comparable(fresh.runs))


@pytest.mark.parametrize(
    "axes,field",
    [
        ({"load": [0.5]}, "axes.load"),
        ({"system.load": []}, "axes.system.load"),
        ({"system.load": [0.5, 1.5]}, "point {'system.load': 1.5}: arrival_rate"),
        ({"policy.id": ["jsq", "nope"]}, "point {'policy.id': 'nope'}: policy"),
    ],
)
def test_bad_specs_fail_before_any_simulation(axes, field):
    with pytest.raises(InputError) as error:
        sweep(SweepSpec(base=BASE, axes=axes), executor="serial", store=None)
    assert error.value.field == field


def test_cli_sweep_store_and_plot(tmp_path, capsys):
    spec = tmp_path / "spec.toml"
    spec.write_text(
        textwrap.dedent("""
        name = "cli"
        replications = 2
        seed = 4
        [base.system]
        speeds = "3x1.0,3x0.5"
        load = 0.5
        [base.run]
        jobs = 1000
        [axes]
        "system.load" = [0.4, 0.8]
        "policy.id" = ["jsq", "jfsq"]
    """)
    )
    store, out = tmp_path / "s.sqlite", tmp_path / "out"
    assert main(["sweep", str(spec), "--executor", "serial", "--store", str(store), "--out", str(out)]) == 0
    assert "8 runs computed" in capsys.readouterr().out
    assert main(["store", "--store", str(store)]) == 0
    assert "cli" in capsys.readouterr().out
    assert main(["store", "cli", "--store", str(store)]) == 0
    printed = capsys.readouterr().out
    assert len(printed.strip().splitlines()) == 1 + 8
    assert printed.splitlines()[0].startswith("point,system.load,policy.id,replication,mean_response_time,")
    assert printed == (out / "runs.csv").read_text()  # the sweep's own runs table, column for column
    assert main(["plot", str(out), "--x", "system.load", "--bound"]) == 0
    assert (out / "mean_response_time.png").stat().st_size > 10_000
    assert main(["plot", str(out), "--x", "system.speed"]) == 2


CLI_SPEC = """
name = "cut-short"
replications = 3
seed = 6
[base.system]
speeds = "2x1.0,2x0.5"
load = 0.5
[base.run]
jobs = 800
[axes]
"system.load" = [0.4, 0.8]
"policy.id" = ["jsq", "jiq"]
"""


def test_an_interrupted_sweep_is_listed_with_its_progress_and_resumes(tmp_path, capsys):
    """Interrupted = some of its runs are not in the store: here 5 of 12 runs are deleted."""
    spec, store = tmp_path / "spec.toml", tmp_path / "s.sqlite"
    spec.write_text(CLI_SPEC)
    complete = sweep(spec, executor="serial", store=store)
    keys = complete.runs["key"].tolist()
    with sqlite3.connect(store) as connection:
        connection.executemany("DELETE FROM runs WHERE key = ?", [(key,) for key in keys[1::2][:5]])
    with ResultStore(store) as opened:
        assert opened.sweeps() == [{"name": "cut-short", "runs": 12, "finished": 7, "source": str(spec.resolve())}]
        rows = opened.load("cut-short")
    assert [row["key"] for row in rows] == [key for key in keys if key not in keys[1::2][:5]]
    finished = complete.runs[complete.runs["key"].isin([row["key"] for row in rows])]
    assert [(r["point"], r["system.load"], r["policy.id"], r["replication"]) for r in rows] == list(
        finished[["point", "system.load", "policy.id", "replication"]].itertuples(index=False, name=None)
    )
    assert main(["store", "--store", str(store)]) == 0
    listed = capsys.readouterr().out
    assert listed.splitlines() == [
        f"{'cut-short':<32}{7:>8} of 12 runs finished  (interrupted: `hetlb sweep {spec.resolve()}` resumes it)"
    ]
    assert main(["sweep", str(spec), "--executor", "serial", "--store", str(store), "--out", str(tmp_path / "o")]) == 0
    assert "5 runs computed, 7 reused" in capsys.readouterr().out
    assert main(["store", "--store", str(store)]) == 0
    assert capsys.readouterr().out.splitlines() == [f"{'cut-short':<32}{12:>8} of 12 runs finished"]


def test_a_store_of_the_earlier_layout_opens_and_lists_its_sweeps(tmp_path):
    """Stores written before the sweeps table had point columns: opened, listed and loaded as before."""
    store = tmp_path / "old.sqlite"
    with sqlite3.connect(store) as connection:
        connection.executescript(
            """CREATE TABLE runs (key TEXT PRIMARY KEY, row TEXT NOT NULL, created REAL NOT NULL);
               CREATE TABLE sweeps (name TEXT NOT NULL, key TEXT NOT NULL, position INTEGER NOT NULL,
                                    PRIMARY KEY (name, key));
               INSERT INTO runs VALUES ('a', '{"mean_response_time": 1.5}', 0), ('b', '{"mean_response_time": 2.5}', 0);
               INSERT INTO sweeps VALUES ('old', 'b', 0), ('old', 'a', 1), ('old', 'c', 2);"""
        )
    with ResultStore(store) as opened:
        assert opened.sweeps() == [{"name": "old", "runs": 3, "finished": 2, "source": None}]
        assert opened.load("old") == [{"mean_response_time": 2.5, "key": "b"}, {"mean_response_time": 1.5, "key": "a"}]
        assert opened.spec("old") is None


def test_tasks_are_longest_first_and_finer_at_the_end():
    from hetlb.experiments.sweep import estimated_events, group_units
    from hetlb.scenario import Scenario

    spec = SweepSpec(
        base={"system": {"speeds": "2,1", "load": 0.5}, "run": {"jobs": 1000}},
        axes={"run.jobs": [1000, 200_000, 5000, 50_000]},
        replications=20,
        seed=1,
    )
    points = spec.points()
    units = spec.units(points)
    tasks = group_units(units, points, 4_000_000, 4)
    assert sorted(unit.key for task in tasks for unit in task) == sorted(unit.key for unit in units)
    sizes = [sum(estimated_events(Scenario.from_mapping(points[u.point_index].scenario)) for u in t) for t in tasks]
    assert len(tasks) >= 4
    assert sizes[0] == max(sizes) and sizes[-1] <= sizes[0] / 10  # long tasks first, short ones last


def test_importing_experiments_leaves_out_pandas_matplotlib_and_the_papers():
    code = (
        "import sys, hetlb, hetlb.experiments\n"
        "heavy = [m for m in ('pandas', 'matplotlib', 'scipy.stats', 'hetlb.experiments.weng') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "from hetlb.experiments import REPRODUCTIONS, reproduce\n"
        "assert callable(reproduce) and 'hetlb.experiments.weng' not in sys.modules\n"
        "assert len(REPRODUCTIONS) >= 10 and 'hetlb.experiments.weng' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
