"""hetlb.processes: children end with their parent, stopping escalates from SIGTERM to SIGKILL,
and SIGINT / SIGTERM become an Interrupted with the command's exit status.

Every test starts real processes (Python sleeping), waits with a deadline and kills what it
started when it ends."""

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hetlb.processes import (
    ChildProcess,
    Interrupted,
    child_environment,
    proc_stat,
    running,
    signals_interrupt,
    stop_processes,
)

GONE_SECONDS = 30.0
SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]
DEAF = [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); time.sleep(600)"]  # fmt: skip
"""A child that ignores SIGTERM (it says so once it does)."""


def wait_until(condition, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError(f"not within {seconds:.0f} s: {what}")


def gone(pid: int) -> bool:
    fields = proc_stat(pid)
    return fields is None or fields[0] in ("Z", "X")


PARENT_SCRIPT = """
import sys, time
from hetlb.processes import ChildProcess
child = ChildProcess("sleeper", [sys.executable, "-c", "import time; time.sleep(600)"])
print(child.process.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_child_process_ends_when_its_parent_is_killed(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(PARENT_SCRIPT)
    parent = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, env=child_environment(), start_new_session=True
    )
    child = None
    try:
        child = int(parent.stdout.readline())
        assert not gone(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait(GONE_SECONDS)
        wait_until(lambda: gone(child), GONE_SECONDS, f"the orphan {child} ended")
    finally:
        parent.kill()
        parent.wait()
        if child is not None and not gone(child):
            os.kill(child, signal.SIGKILL)


def test_stop_escalates_to_sigkill_after_the_grace_period():
    deaf = subprocess.Popen(DEAF, stdout=subprocess.PIPE)
    polite = subprocess.Popen(SLEEPER)
    try:
        assert deaf.stdout.readline().strip() == b"1"
        started = time.monotonic()
        stop_processes([deaf, polite], grace=0.5)
        assert time.monotonic() - started >= 0.5
        assert (polite.returncode, deaf.returncode) == (-signal.SIGTERM, -signal.SIGKILL)
    finally:
        for process in (deaf, polite):
            process.kill()
            process.wait()


def sleep_forever() -> None:
    time.sleep(600)


def test_stop_takes_multiprocessing_processes_and_skips_ended_ones():
    context = multiprocessing.get_context("spawn")
    process = context.Process(target=sleep_forever)
    process.start()
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    try:
        assert running(process) and not running(ended)
        stop_processes([process, ended], grace=GONE_SECONDS)
        assert not running(process) and process.exitcode == -signal.SIGTERM
        assert ended.returncode == 0
    finally:
        if process.is_alive():
            process.kill()
        process.join()


def test_a_child_process_stops_with_sigterm_and_gives_its_status():
    child = ChildProcess("sleeper", SLEEPER)
    assert child.stop() == -signal.SIGTERM


@pytest.mark.parametrize(
    "signal_number,message", [(signal.SIGTERM, "stopped by SIGTERM"), (signal.SIGINT, "interrupted")]
)
def test_signals_interrupt_raises_interrupted_with_the_exit_status(signal_number, message):
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with pytest.raises(Interrupted) as raised, signals_interrupt():
        os.kill(os.getpid(), signal_number)
        time.sleep(5)  # the handler runs at the next bytecode
    assert (str(raised.value), raised.value.exit_status) == (message, 128 + signal_number)
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_the_module_imports_nothing_of_hetlb():
    source = (Path(__file__).resolve().parents[1] / "src" / "hetlb" / "processes.py").read_text()
    assert "from hetlb" not in source and "import hetlb" not in source
