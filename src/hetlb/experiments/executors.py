"""Where sweep work runs: serially, on a local process pool, on any concurrent.futures
Executor, or on a Dask distributed cluster.

Workers warm their compiled kernels once (loading numba's cache) before the first task.

The workers of a local pool (:class:`WorkerPool`) do not outlive the process that made it (its
owner), whatever ends it, SIGKILL included: on Linux the kernel kills a worker when the thread
that started it ends (``prctl(PR_SET_PDEATHSIG)``; that thread is the owner's thread that first
submitted work, or with the forkserver start method the fork server, which then ends with the
owner), and everywhere a thread in each worker ends it once its parent (fork, spawn) or the owner
(forkserver) is gone, at the latest when its current task returns. Workers ignore SIGINT, so
Ctrl-C in a terminal reaches the owner only: a sweep then stops them (:func:`stop`) and says what
it stored.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future, ProcessPoolExecutor

from hetlb import validation
from hetlb.errors import InputError
from hetlb.validation import shown

PARENT_POLL_SECONDS = 0.5
"""How often a worker's watch thread looks whether its parent is still there."""

PR_SET_PDEATHSIG = 1
"""prctl option (linux/prctl.h): the signal this process gets when its parent thread dies."""


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM stopped the work: ``signal_number`` is the signal, ``exit_status`` the
    conventional status of a command it stopped (128 + the signal: 130, 143); the message says
    what was kept."""

    def __init__(self, message: str = "interrupted", signal_number: int = signal.SIGINT):
        super().__init__(message)
        self.signal_number = int(signal_number)
        self.exit_status = 128 + self.signal_number


@contextlib.contextmanager
def signals_interrupt():
    """While the block runs, SIGINT and SIGTERM raise :class:`Interrupted` in this process.

    Only in the main thread, and only for a signal whose handler is Python's default (an
    application's own handler is left alone); the handlers are restored at the end. A worker
    forked inside the block, before its initializer resets them, ignores SIGINT and dies of
    SIGTERM, as it does afterwards.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    owner = os.getpid()

    def handler(signum, frame):
        if os.getpid() != owner:  # a worker forked from this process, not yet initialized
            if signum == signal.SIGTERM:
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)
            return
        raise Interrupted(signal_number=signum)

    previous = {}
    for signum, default in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, signal.SIG_DFL)):
        if signal.getsignal(signum) is default:
            previous[signum] = signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, handler_before in previous.items():
            signal.signal(signum, handler_before)


def die_with_parent() -> bool:
    """Linux: ask the kernel to SIGKILL this process when the thread that started it ends (its
    process's death included). Whether that was set (False on other systems)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


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


def leave_fork_server() -> None:
    """In a child of multiprocessing's fork server: close this process's copy of the pipe whose
    end tells the server that its clients are gone, so that the server ends with the process
    that started the pool, and this worker with the server (:func:`die_with_parent`). The pipe
    is private to multiprocessing: where it is not found, nothing is done."""
    server = getattr(sys.modules.get("multiprocessing.forkserver"), "_forkserver", None)
    alive_fd = getattr(server, "_forkserver_alive_fd", None)
    if server is not None and isinstance(alive_fd, int):
        try:
            os.close(alive_fd)
        except OSError:
            pass
        server._forkserver_alive_fd = None


def init_worker(owner: int, kernels: tuple[str, ...]) -> None:
    """Initializer of a :class:`WorkerPool` worker; ``owner`` is the pid of the process that made
    the pool. With the fork and spawn start methods the owner is the worker's parent, which it
    watches; with forkserver the parent is the fork server, and the worker watches the owner.
    It loads the kernels of ``kernels`` before its first task."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group: the owner handles it
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # how the owner stops a worker (a fork inherits its handler)
    die_with_parent()
    parent = os.getppid()
    if parent == owner:
        watch_parent(parent)
    else:  # the fork server's child, or an orphan already (the owner died before die_with_parent)
        if parent_of(parent) == owner:
            leave_fork_server()
        watch_owner(owner)
    warm_kernels(kernels)


class WorkerPool(ProcessPoolExecutor):
    """The local process pool of sweeps: ``workers`` processes (``mp_context``: a
    multiprocessing context, default the platform's start method) made with :func:`init_worker`."""

    def __init__(self, workers: int, mp_context=None, kernels: tuple[str, ...] = ("continuous",)):
        super().__init__(
            max_workers=workers, mp_context=mp_context, initializer=init_worker, initargs=(os.getpid(), kernels)
        )

    def stop(self) -> None:
        """End now: drop the queued tasks and terminate the workers (their running tasks are
        lost). The pool cannot be used afterwards; a later ``shutdown()`` returns at once."""
        processes = list((self._processes or {}).values())
        self.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            process.terminate()
        for process in processes:
            process.join(5.0)
            if process.is_alive():
                process.kill()
                process.join(5.0)


def stop(executor, futures=()) -> None:
    """Stop work at once after an interrupt: cancel ``futures`` not yet started and, for a
    :class:`WorkerPool`, terminate its workers. Another executor keeps its running tasks (it
    belongs to the caller, or is a Dask cluster where cancelling is all there is to do)."""
    for future in futures:
        future.cancel()
    if isinstance(executor, WorkerPool):
        executor.stop()


def warm_kernels(kernels: tuple[str, ...] = ("continuous",)) -> None:
    """Load (or compile) each event loop of ``kernels`` ("continuous", "dispatchers", "slotted") in
    this process with a tiny run, once per worker rather than in its first task."""
    from hetlb.model import SlottedSystem, System
    from hetlb.simulation.simulate import simulate

    if "continuous" in kernels:
        simulate(System.from_speeds([1.0], arrival_rate=0.5), "jsq", jobs=20)
    if "dispatchers" in kernels:
        simulate(System.from_speeds([1.0, 1.0], arrival_rate=0.5), "l-jsq", jobs=20, dispatchers=2)
    if "slotted" in kernels:
        from hetlb.simulation.slotted import simulate_slotted

        simulate_slotted(SlottedSystem.from_speeds([1.0], dispatchers=1, load=0.5), "jsq", slots=20)


class SerialExecutor(Executor):
    """Runs each task at once in this process (deterministic and easy to debug)."""

    def submit(self, fn, /, *args, **kwargs):
        future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as error:  # handed to the caller through the future (not an interrupt)
            future.set_exception(error)
        return future


MAX_WORKERS = 1024
"""The most local worker processes a sweep starts (each is a whole Python process)."""
WORKER_BYTES = 250 * 2**20
"""Memory of one worker: Python, numpy, scipy and the loaded kernels (about 213 MiB measured)."""


def resolve_executor(
    executor, kernels: tuple[str, ...] = ("continuous",)
) -> tuple[Executor, int, Callable[[], object]]:
    """(executor, number of workers, close) for ``executor``, whose workers load the kernels of
    ``kernels`` (see :func:`warm_kernels`) before their first task.

    None or "processes": a process pool on all cores; "processes:N"; "serial"; "dask://host:port"
    (Dask distributed, installed with the ``dask`` extra); a ``dask.distributed.Client``; or any
    ``concurrent.futures.Executor`` (not closed here).
    """
    if executor is None or executor == "processes" or (isinstance(executor, str) and executor.startswith("processes:")):
        workers = os.cpu_count() or 1
        if isinstance(executor, str) and ":" in executor:
            try:
                workers = int(executor.split(":", 1)[1])
            except ValueError:
                workers = 0
            if not 1 <= workers <= MAX_WORKERS:
                raise InputError(
                    "executor", f"processes:N needs an integer N in [1, {MAX_WORKERS}], got {shown(executor)}"
                )
            validation.check_memory(
                "executor", WORKER_BYTES * workers, f"{workers:,} worker processes", "use fewer workers"
            )
        pool = WorkerPool(workers, kernels=kernels)
        return pool, workers, pool.shutdown
    if executor == "serial":
        warm_kernels(kernels)
        return SerialExecutor(), 1, lambda: None
    if isinstance(executor, str) and executor.startswith("dask://"):
        client = dask_client(executor.removeprefix("dask://"))
        return dask_executor(client, kernels, close=client.close)
    if type(executor).__name__ == "Client" and type(executor).__module__.startswith("distributed"):
        return dask_executor(executor, kernels, close=lambda: None)
    if isinstance(executor, Executor):
        return executor, getattr(executor, "_max_workers", None) or os.cpu_count() or 1, lambda: None
    raise InputError(
        "executor",
        "must be 'processes', 'processes:N', 'serial', 'dask://host:port', "
        f"a dask.distributed.Client or a concurrent.futures.Executor, got {executor!r}",
    )


def dask_client(address: str):
    try:
        from distributed import Client
    except ImportError:
        raise InputError("executor", "dask:// needs Dask: pip install 'hetlb[dask]'") from None
    try:
        return Client(address, timeout=10)
    except OSError as error:
        raise InputError("executor", f"cannot reach the Dask scheduler at {address}: {error}") from None


def dask_executor(client, kernels: tuple[str, ...], close):
    client.run(warm_kernels, kernels)
    workers = sum(client.nthreads().values()) or 1
    return client.get_executor(pure=False), workers, close
