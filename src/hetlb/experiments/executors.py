"""Where sweep work runs: serially, on a local process pool, on any concurrent.futures
Executor, or on a Dask distributed cluster.

Workers warm their compiled kernels once (loading numba's cache) before the first task.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import Executor, Future, ProcessPoolExecutor

from hetlb.errors import InputError


def warm_kernels() -> None:
    """Load (or compile) the event kernel in this process with a tiny run."""
    from hetlb.model import System
    from hetlb.simulation.continuous import simulate

    simulate(System.from_speeds([1.0], arrival_rate=0.5), "jsq", jobs=20)


class SerialExecutor(Executor):
    """Runs each task at once in this process (deterministic and easy to debug)."""

    def submit(self, fn, /, *args, **kwargs):
        future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as error:  # handed to the caller through the future
            future.set_exception(error)
        return future


def resolve_executor(executor) -> tuple[Executor, int, Callable[[], object]]:
    """(executor, number of workers, close) for ``executor``.

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
            if workers < 1:
                raise InputError("executor", f"processes:N needs an integer N >= 1, got {executor!r}")
        pool = ProcessPoolExecutor(max_workers=workers, initializer=warm_kernels)
        return pool, workers, pool.shutdown
    if executor == "serial":
        warm_kernels()
        return SerialExecutor(), 1, lambda: None
    if isinstance(executor, str) and executor.startswith("dask://"):
        client = dask_client(executor.removeprefix("dask://"))
        return dask_executor(client, close=client.close)
    if type(executor).__name__ == "Client" and type(executor).__module__.startswith("distributed"):
        return dask_executor(executor, close=lambda: None)
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


def dask_executor(client, close):
    client.run(warm_kernels)
    workers = sum(client.nthreads().values()) or 1
    return client.get_executor(pure=False), workers, close
