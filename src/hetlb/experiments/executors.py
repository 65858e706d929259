"""Where sweep work runs: serially, on a local process pool, on any concurrent.futures
Executor, or on a Dask distributed cluster.

Workers warm their compiled kernels once (loading numba's cache) before the first task.

The workers of a local pool (:class:`WorkerPool`) do not outlive the process that made it (its
owner), whatever ends it, SIGKILL included (hetlb.processes): on Linux the kernel kills a worker
when the thread that started it ends (``prctl(PR_SET_PDEATHSIG)``; that thread is the owner's
thread that first submitted work, or with the forkserver start method the fork server, which then
ends with the owner), and everywhere a thread in each worker ends it once its parent (fork, spawn)
or the owner (forkserver) is gone, at the latest when its current task returns. Workers ignore
SIGINT, so Ctrl-C in a terminal reaches the owner only: a sweep then stops them (:func:`stop`)
and says what it stored.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from concurrent.futures import Executor, Future, ProcessPoolExecutor

from hetlb import validation
from hetlb.errors import InputError
from hetlb.processes import die_with_parent, parent_of, stop_processes, watch_owner, watch_parent
from hetlb.validation import shown


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
        stop_processes(processes)


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
    this process with a tiny run, once per worker rather than in its first task (numba imported
    first: a worker runs many tasks, none of them as plain Python, hetlb.simulation.fast_start)."""
    from hetlb import jit
    from hetlb.model import SlottedSystem, System
    from hetlb.simulation.simulate import simulate

    jit.compile_everything()

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

    Parameters
    ----------
    executor
        One of the forms above.
    kernels
        The kernels the workers load before their first task.
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
