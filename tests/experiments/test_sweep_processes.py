"""A sweep's worker processes end with it: killed (SIGKILL), terminated (SIGTERM) or interrupted
(SIGINT, also sent to the whole process group as Ctrl-C in a terminal does). A stopped sweep says
in one line how many runs it stored, exits with 128 + the signal, and a resume computes exactly
the missing runs.

Every test starts real processes, waits for conditions with a deadline, and kills whatever it
started (by process group and by pid) when it ends, also when it fails.
"""

import contextlib
import importlib
import json
import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hetlb.experiments import SweepSpec, sweep
from hetlb.processes import Interrupted, parent_of

sweep_module = importlib.import_module("hetlb.experiments.sweep")  # the package exports the function

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc")

SRC = Path(__file__).resolve().parents[2] / "src"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))}

RUNS = 12
SPEC = """
name = "processes"
replications = 4
seed = 5
[base.system]
speeds = "2x1.0,2x0.5"
load = 0.7
[base.run]
jobs = 2000000
[axes]
"policy.id" = ["jsq", "jiq", "sed"]
"""
"""12 runs of about 4M events: one run per task, a few seconds on two workers."""

STARTUP_SECONDS = 240.0
"""Deadline for a sweep to store its first runs (its workers may have to compile the kernels)."""

GONE_SECONDS = 30.0
"""Deadline for processes to end once they have to."""


# --- processes, from /proc -------------------------------------------------------------------------


def stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].decode().split()
    except (OSError, IndexError):
        return None


def identity(pid: int) -> tuple[int, str] | None:
    """(pid, start time): a process, told apart from a later one given the same pid."""
    fields = stat_fields(pid)
    return None if fields is None else (pid, fields[19])


def descendants(pid: int) -> set[tuple[int, str]]:
    """The identities of the living processes descended from ``pid``."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = stat_fields(int(entry))
            if fields is not None and fields[0] != "Z":
                children.setdefault(int(fields[1]), []).append((int(entry), fields[19]))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child[0])
    return found


def alive(process: tuple[int, str]) -> bool:
    """Whether that process still runs (a zombie has ended: it holds no memory)."""
    fields = stat_fields(process[0])
    return fields is not None and fields[19] == process[1] and fields[0] != "Z"


def wait_until(condition, seconds: float, what: str, poll: float = 0.05):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"not within {seconds:.0f} s: {what}")


class Started:
    """A command started in a session of its own; ``end()`` kills its process group and every
    process of it seen by ``seen()``, and reaps it."""

    def __init__(self, command, **kwargs):
        self.process = subprocess.Popen(
            command, env=ENV, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs
        )
        self.known: set[tuple[int, str]] = set()

    def seen(self) -> set[tuple[int, str]]:
        """The descendants now, remembered for ``end()``."""
        now = descendants(self.process.pid)
        self.known |= now
        return now

    def end(self) -> None:
        for kill in (lambda: os.killpg(self.process.pid, signal.SIGKILL), lambda: self.process.kill()):
            try:
                kill()
            except (ProcessLookupError, PermissionError):
                pass
        for process in self.known:
            if alive(process):
                try:
                    os.kill(process[0], signal.SIGKILL)
                except ProcessLookupError:
                    pass
        try:
            self.process.communicate(timeout=GONE_SECONDS)
        except subprocess.TimeoutExpired:
            pass


def stored_runs(store: Path) -> int:
    if not store.exists():
        return 0
    try:
        with contextlib.closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=10)) as connection:
            return connection.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    except sqlite3.OperationalError:  # the tables are not there yet
        return 0


def start_sweep(tmp_path: Path) -> tuple[Started, Path, Path]:
    spec, store = tmp_path / "spec.toml", tmp_path / "store.sqlite"
    spec.write_text(SPEC)
    command = [sys.executable, "-m", "hetlb", "sweep", str(spec), "--executor", "processes:2"]
    command += ["--store", str(store), "--out", str(tmp_path / "out"), "--quiet"]
    return Started(command, cwd=tmp_path), spec, store


def workers_once_runs_are_stored(sweep_process: Started, store: Path) -> set[tuple[int, str]]:
    """Wait until the sweep has stored a run, then return its two workers (and any helper)."""
    wait_until(
        lambda: stored_runs(store) >= 1 or sweep_process.process.poll() is not None,
        STARTUP_SECONDS,
        "a run stored",
    )
    assert sweep_process.process.poll() is None, "the sweep ended before it could be stopped"
    workers = sweep_process.seen()
    assert len(workers) >= 2
    return workers


# --- the sweep command ------------------------------------------------------------------------------


def test_killed_sweep_leaves_no_worker(tmp_path):
    started, _, store = start_sweep(tmp_path)
    try:
        workers = workers_once_runs_are_stored(started, store)
        os.kill(started.process.pid, signal.SIGKILL)
        started.process.wait(timeout=GONE_SECONDS)
        wait_until(lambda: not any(alive(worker) for worker in workers), GONE_SECONDS, f"workers {workers} ended")
        assert 1 <= stored_runs(store) < RUNS
    finally:
        started.end()


@pytest.mark.parametrize(
    "signal_number,to_group",
    [(signal.SIGTERM, False), (signal.SIGINT, False), (signal.SIGINT, True)],
    ids=["SIGTERM", "SIGINT", "SIGINT-to-the-process-group"],
)
def test_stopped_sweep_says_what_it_stored_and_resumes_with_the_missing_runs(tmp_path, signal_number, to_group):
    started, spec, store = start_sweep(tmp_path)
    try:
        workers = workers_once_runs_are_stored(started, store)
        if to_group:  # as Ctrl-C in a terminal: the sweep and its workers get it
            os.killpg(started.process.pid, signal_number)
        else:
            os.kill(started.process.pid, signal_number)
        _, stderr = started.process.communicate(timeout=GONE_SECONDS)
        assert started.process.returncode == 128 + signal_number
        wait_until(lambda: not any(alive(worker) for worker in workers), GONE_SECONDS, f"workers {workers} ended")
        stored = stored_runs(store)
        assert 1 <= stored < RUNS
        assert stderr.decode().splitlines() == [
            f"hetlb: interrupted: {stored} of {RUNS} runs stored; `hetlb sweep {spec.resolve()}` resumes"
        ]
    finally:
        started.end()

    resumed = subprocess.run(
        [sys.executable, "-m", "hetlb", "sweep", str(spec), "--executor", "processes:2", "--store", str(store)]
        + ["--out", str(tmp_path / "out"), "--quiet", "--json"],
        env=ENV,
        cwd=tmp_path,
        capture_output=True,
        timeout=STARTUP_SECONDS,
    )
    assert resumed.returncode == 0, resumed.stderr.decode()
    report = json.loads(resumed.stdout)
    assert (report["computed"], report["reused"]) == (RUNS - stored, stored)
    assert stored_runs(store) == RUNS


# --- the worker pool -------------------------------------------------------------------------------

POOL_SCRIPT = """
import os, sys, time
import multiprocessing
from pathlib import Path
from hetlb.experiments.executors import WorkerPool

def hold(folder):
    (Path(folder) / str(os.getpid())).write_text("")
    time.sleep(600)

if __name__ == "__main__":
    pool = WorkerPool(2, multiprocessing.get_context(sys.argv[1]))
    futures = [pool.submit(hold, sys.argv[2]) for _ in range(2)]
    time.sleep(600)
"""


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_pool_workers_end_with_the_process_that_started_them(tmp_path, method):
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"no {method} start method here")
    script, ready = tmp_path / "pool.py", tmp_path / "ready"
    script.write_text(POOL_SCRIPT)
    ready.mkdir()
    started = Started([sys.executable, str(script), method, str(ready)], cwd=tmp_path)
    try:
        pids = wait_until(lambda: len(os.listdir(ready)) >= 2 and os.listdir(ready), STARTUP_SECONDS, "2 busy workers")
        workers = {identity(int(pid)) for pid in pids}
        assert None not in workers
        assert workers <= started.seen()  # with forkserver, also the fork server
        os.kill(started.process.pid, signal.SIGKILL)
        started.process.wait(timeout=GONE_SECONDS)
        helpers = started.known
        wait_until(lambda: not any(alive(p) for p in helpers), GONE_SECONDS, f"{helpers} ended")
    finally:
        started.end()


WATCH_SCRIPT = """
import os, sys, time
from hetlb import processes

parent = os.getpid()  # before the fork: the test may kill the parent before the child first runs
child = os.fork()
if child == 0:
    getattr(processes, sys.argv[1])(parent, interval=0.05)
    time.sleep(600)
    os._exit(0)
print(child, flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("watch", ["watch_parent", "watch_owner"])
def test_the_watch_thread_ends_an_orphan_without_help_from_the_kernel(tmp_path, watch):
    """The way out on systems without PR_SET_PDEATHSIG (the child here did not ask for it):
    watch_parent for the fork and spawn start methods, watch_owner for forkserver."""
    script = tmp_path / "watch.py"
    script.write_text(WATCH_SCRIPT)
    started = Started([sys.executable, str(script), watch], cwd=tmp_path)
    try:
        child = identity(int(started.process.stdout.readline()))
        assert child in started.seen()
        os.kill(started.process.pid, signal.SIGKILL)
        wait_until(lambda: not alive(child), GONE_SECONDS, f"the orphan {child} ended")
        started.process.wait(timeout=GONE_SECONDS)
    finally:
        started.end()


def test_parent_of_reads_proc():
    assert parent_of(os.getpid()) == os.getppid()
    assert parent_of(2**22 + 12345) is None


# --- in this process --------------------------------------------------------------------------------


def test_an_interrupt_in_a_serial_sweep_keeps_the_finished_runs(tmp_path, monkeypatch):
    """Ctrl-C during the second task of a serial sweep: the first task's runs are stored, the
    message counts them, and a resume computes the others."""
    spec = SweepSpec(
        base={"system": {"speeds": "2,1", "load": 0.5}, "run": {"jobs": 2000}},
        axes={"policy.id": ["jsq", "jfsq", "sed"]},
        replications=2,
        seed=3,
        name="cut",
    )
    store = tmp_path / "store.sqlite"
    run_units, calls = sweep_module.run_units, []

    def interrupted_second_time(units):
        calls.append(len(units))
        if len(calls) == 2:
            raise KeyboardInterrupt
        return run_units(units)

    monkeypatch.setattr(sweep_module, "run_units", interrupted_second_time)
    with pytest.raises(Interrupted) as raised:
        sweep(spec, executor="serial", store=store, events_per_task=1)
    assert calls == [1, 1]  # nothing ran after the interrupt
    assert stored_runs(store) == 1
    assert str(raised.value) == "interrupted: 1 of 6 runs stored; running sweep 'cut' again on the same store resumes"
    assert (raised.value.signal_number, raised.value.exit_status) == (signal.SIGINT, 130)
    monkeypatch.setattr(sweep_module, "run_units", run_units)
    resumed = sweep(spec, executor="serial", store=store)
    assert (resumed.computed, resumed.reused) == (5, 1)


def test_the_sweeps_signal_handlers_are_restored():
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    spec = SweepSpec(base={"system": {"speeds": "2,1", "load": 0.5}, "run": {"jobs": 500}}, axes={}, name="one")
    sweep(spec, executor="serial", store=None)
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_the_message_without_a_store(tmp_path):
    spec = SweepSpec(base={"system": {"speeds": "2,1", "load": 0.5}}, axes={}, name="none")
    message = sweep_module.interrupted(spec, 4, None, 3, Interrupted(signal_number=signal.SIGTERM))
    assert str(message) == "interrupted: 3 of 4 runs finished, none stored (no result store)"
    assert message.exit_status == 143


def loaded_kernels() -> dict:
    """Which event kernels this process has loaded by the JIT (compiled or from its cache)."""
    from hetlb.kernels import continuous, dispatchers, slotted

    return {
        "continuous": bool(continuous.advance.signatures),
        "dispatchers": bool(dispatchers.advance.signatures),
        "slotted": bool(slotted.advance.signatures),
    }


@pytest.mark.parametrize("kernels", [("continuous",), ("slotted",), ("continuous", "dispatchers", "slotted")])
def test_a_pool_worker_loads_the_kernels_of_the_sweep_before_its_first_task(kernels):
    from hetlb.experiments.executors import WorkerPool

    pool = WorkerPool(1, mp_context=multiprocessing.get_context("spawn"), kernels=kernels)
    try:
        loaded = pool.submit(loaded_kernels).result(timeout=120)
    finally:
        pool.stop()
    assert loaded == {kernel: kernel in kernels for kernel in ("continuous", "dispatchers", "slotted")}


def test_a_sweep_point_knows_its_model():
    from hetlb.experiments.spec import Point

    assert Point({}, {"system": {"speeds": "1,1"}}).model == "continuous"
    assert Point({}, {"system": {"model": "slotted", "speeds": "1,1"}}).model == "slotted"
    assert Point({}, {"system": {"speeds": "1,1", "dispatchers": 3}}).kernel == "dispatchers"
    assert Point({}, {"system": {"model": "slotted", "speeds": "1,1", "dispatchers": 3}}).kernel == "slotted"
