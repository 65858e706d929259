"""Child processes: that they end with their parent, how signals stop the work, and how they are
stopped and cleaned up. The sweeps' worker pool (hetlb.experiments.executors), the dispatcher
processes of ``hetlb serve`` (hetlb.gateway.serving) and the testbed's children (backends,
dispatchers, HAProxy, nginx: :class:`ChildProcess`) all use this module.

- **Ending with the parent.** On Linux a child asks the kernel for a signal when the thread that
  started it ends, its process's death included (:func:`die_with_parent`, ``prctl(PR_SET_PDEATHSIG)``);
  a sweep's workers also keep a watch thread, the way out where the kernel does not do it
  (:func:`watch_parent`, :func:`watch_owner`). A :class:`ChildProcess` gets SIGTERM when the thread
  that started it ends: start one from a thread that lives as long as the child should.
- **Signals.** :func:`signals_interrupt` turns SIGINT and SIGTERM into :class:`Interrupted` (a
  KeyboardInterrupt with the command's exit status, 128 + the signal), so that a command cleans up
  on the way out, whichever of the two stopped it.
- **Stopping.** :func:`stop_processes` sends SIGTERM, and SIGKILL to whatever still runs after a
  grace period, and reaps every process.

It imports nothing of hetlb, so that it sits below ``experiments`` and ``live``.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

PR_SET_PDEATHSIG = 1
"""prctl option (linux/prctl.h): the signal this process gets when its parent thread dies."""
PARENT_POLL_SECONDS = 0.5
"""How often a watch thread looks whether the parent (or the owner) is still there."""
STOP_GRACE_S = 5.0
"""Seconds a child has to exit after SIGTERM before it is killed."""
START_TIMEOUT_S = 30.0
"""Seconds a child has to announce itself (importing hetlb's kernels can take a few seconds)."""


# --- signals ---------------------------------------------------------------------------------------


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM stopped the work: ``signal_number`` is the signal, ``exit_status`` the
    conventional status of a command it stopped (128 + the signal: 130, 143); the message says
    what was kept."""

    def __init__(self, message: str = "interrupted", signal_number: int = signal.SIGINT):
        super().__init__(message)
        self.signal_number = int(signal_number)
        self.exit_status = 128 + self.signal_number


def interrupt_message(signal_number: int) -> str:
    """What :class:`Interrupted` says when nothing more is known: "interrupted" for SIGINT (Ctrl-C),
    "stopped by SIGTERM" for SIGTERM."""
    return "interrupted" if signal_number == signal.SIGINT else f"stopped by {signal.Signals(signal_number).name}"


@contextlib.contextmanager
def signals_interrupt():
    """While the block runs, SIGINT and SIGTERM raise :class:`Interrupted` in this process.

    Only in the main thread, and only for a signal whose handler is Python's default (an
    application's own handler is left alone); the handlers are restored at the end. A child
    forked inside the block, before it resets them, ignores SIGINT and dies of SIGTERM, as it
    does afterwards.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    owner = os.getpid()

    def handler(signum, frame):
        if os.getpid() != owner:  # a child forked from this process, not yet initialized
            if signum == signal.SIGTERM:
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)
            return
        raise Interrupted(interrupt_message(signum), signum)

    previous = {}
    for signum, default in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, signal.SIG_DFL)):
        if signal.getsignal(signum) is default:
            previous[signum] = signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, handler_before in previous.items():
            signal.signal(signum, handler_before)


# --- ending with the parent ------------------------------------------------------------------------


def parent_death_request() -> Callable[[int], bool] | None:
    """``prctl`` of the C library, looked up now (in the parent, before any fork), or None where
    there is none (not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return lambda signal_number: prctl(PR_SET_PDEATHSIG, int(signal_number), 0, 0, 0) == 0


def die_with_parent(signal_number: int = signal.SIGKILL) -> bool:
    """Linux: ask the kernel to send ``signal_number`` to this process when the thread that started
    it ends (its process's death included). Whether that was set (False on other systems)."""
    request = parent_death_request()
    return request is not None and request(signal_number)


def exit_unless(still_there, interval: float = PARENT_POLL_SECONDS) -> threading.Thread:
    """Start a daemon thread that ends this process (exit status 1) as soon as ``still_there()``
    is false. It runs when the GIL is free: between tasks, or during one that releases it."""

    def watch():
        while still_there():
            time.sleep(interval)
        os._exit(1)

    thread = threading.Thread(target=watch, name="hetlb-parent-watch", daemon=True)
    thread.start()
    return thread


def watch_parent(parent: int, interval: float = PARENT_POLL_SECONDS) -> threading.Thread:
    """End this process when its parent is no longer ``parent`` (an orphan is adopted by init or
    a subreaper): the way out where the kernel does not end it (:func:`die_with_parent`)."""
    return exit_unless(lambda: os.getppid() == parent, interval)


def proc_stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state, parent, ...), or None where
    that cannot be read (no such process, or no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].decode().split()
    except (OSError, IndexError, UnicodeDecodeError):
        return None


def parent_of(pid: int) -> int | None:
    """The parent pid of process ``pid`` from /proc, or None where that cannot be read."""
    fields = proc_stat(pid)
    return None if fields is None else int(fields[1])


def process_alive(pid: int, start_time: str | None) -> bool:
    """Whether process ``pid`` runs (not a zombie) and, where /proc tells, is still the one that
    started at ``start_time`` (/proc/PID/stat field 22: not a later process given the same pid)."""
    if start_time is None:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True
    fields = proc_stat(pid)
    return fields is not None and fields[0] not in ("Z", "X") and fields[19] == start_time


def watch_owner(owner: int, interval: float = PARENT_POLL_SECONDS) -> threading.Thread:
    """End this process when process ``owner`` ends (at once if it already has)."""
    fields = proc_stat(owner)
    start_time = None if fields is None else fields[19]
    if not process_alive(owner, start_time):
        os._exit(1)
    return exit_unless(lambda: process_alive(owner, start_time), interval)


# --- stopping --------------------------------------------------------------------------------------


def running(process) -> bool:
    """Whether ``process`` (a subprocess.Popen or a multiprocessing.Process) has not ended."""
    return process.poll() is None if isinstance(process, subprocess.Popen) else process.is_alive()


def reap(process, timeout: float | None) -> None:
    """Wait at most ``timeout`` seconds (None: for as long as it takes) for ``process`` to end."""
    if isinstance(process, subprocess.Popen):
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout)
    else:
        process.join(timeout)


def stop_processes(processes: Iterable, grace: float = STOP_GRACE_S) -> None:
    """Stop ``processes`` (subprocess.Popen or multiprocessing.Process objects): SIGTERM to each that
    runs, then SIGKILL to each that still runs ``grace`` seconds later; every one is reaped."""
    processes = [process for process in processes if running(process)]
    for process in processes:
        process.terminate()
    deadline = time.monotonic() + grace
    for process in processes:
        reap(process, max(0.0, deadline - time.monotonic()))
        if running(process):
            process.kill()
            reap(process, None)


# --- children with captured output -----------------------------------------------------------------


def program_path(program: str) -> str | None:
    """Where ``program`` is installed (on PATH, beside this Python, or Debian's /usr/sbin), or None."""
    beside = str(Path(sys.executable).parent)
    return shutil.which(program) or shutil.which(program, path=f"{beside}:/usr/sbin:/usr/local/sbin")


def hetlb_command(*args: str) -> list[str]:
    """The command line of ``hetlb ARGS`` with this Python and this copy of hetlb."""
    return [sys.executable, "-m", "hetlb", *args]


def child_environment() -> dict[str, str]:
    """This environment, with this copy of hetlb first on PYTHONPATH (so a child runs the same code)."""
    source = str(Path(__file__).resolve().parents[1])
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [source, environment.get("PYTHONPATH")]))
    return environment


class ChildFailed(RuntimeError):
    """A child process that could not start, exited or stayed silent when it should have served."""


def ending_with_this_thread(signal_number: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A ``preexec_fn`` for subprocess.Popen: the child asks for ``signal_number`` when the thread
    that starts it ends (:func:`die_with_parent`), and exits at once if that thread's process is
    already gone; None where the kernel offers no such request. The C function is looked up here,
    before the fork, so that the child only calls it."""
    request = parent_death_request()
    if request is None:
        return None
    parent = os.getpid()

    def in_the_child() -> None:
        request(signal_number)
        if os.getppid() != parent:  # the parent died before the request: it would never come
            os._exit(1)

    return in_the_child


class ChildProcess:
    """One child: standard output read line by line (``read_lines``), standard error kept in a
    temporary file for the error message if it fails. It runs in a session of its own (a Ctrl-C
    of the terminal reaches the parent, which stops it), gets SIGTERM when the thread that started
    it ends (SIGKILL included), and :meth:`stop` stops it (SIGTERM, then SIGKILL)."""

    def __init__(self, name: str, command: Sequence[str], cwd: str | None = None):
        self.name = name
        self.command = list(command)
        self._stderr = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            self.command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            bufsize=0,  # unbuffered: a line read never pulls the next ones out of the selector's sight
            stderr=self._stderr,
            env=child_environment(),
            cwd=cwd,
            start_new_session=True,
            preexec_fn=ending_with_this_thread(),
        )

    def stderr_text(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace").strip()

    def failure(self, what: str) -> ChildFailed:
        return ChildFailed(f"{self.name} {what}: {self.stderr_text()[-2000:] or '(nothing on standard error)'}")

    def read_lines(self, count: int, timeout: float = START_TIMEOUT_S) -> list[str]:
        """The first ``count`` lines of standard output, or ChildFailed if the child exits or stays
        silent for ``timeout`` seconds."""
        assert self.process.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            while len(lines) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self.failure(f"did not start within {timeout:g} s")
                if selector.select(left):
                    line = self.process.stdout.readline()
                    if not line:
                        self.process.wait()
                        raise self.failure(f"exited with status {self.process.returncode}")
                    lines.append(line.decode().strip())
        return lines

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after STOP_GRACE_S (:func:`stop_processes`); the exit status."""
        stop_processes([self.process])
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._stderr.close()
        return self.process.returncode


def wait_listening(host: str, port: int, child: ChildProcess, timeout: float = START_TIMEOUT_S) -> None:
    """Wait until something accepts connections on host:port (or ChildFailed if ``child`` exits)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            if child.process.poll() is not None:
                raise child.failure(f"exited with status {child.process.returncode}") from None
            if time.monotonic() > deadline:
                raise child.failure(f"does not listen on {host}:{port} after {timeout:g} s") from None
            time.sleep(0.05)
