"""Building the extension module that hetlb.simulation.ahead_of_time loads: ``hetlb compile``.

numba's ahead-of-time compiler (``numba.pycc``) compiles the exported functions for the argument
types that a few small runs pass them (:func:`sample_calls`), each distinct set of types under
its own name; the descriptions of those types go beside the module, and the loader compares
every call's arguments with them.
"""

from __future__ import annotations

import json
import os
import time
import warnings
from importlib.metadata import version
from pathlib import Path

from hetlb import jit
from hetlb.simulation import ahead_of_time
from hetlb.simulation.ahead_of_time import describe, directories, module_name, recording


def sample_calls() -> dict[str, list]:
    """The arguments of the exported functions in a few small runs that take every shape of the
    model: a complete graph with infinite buffers, a sparse graph with finite buffers and
    hyperexponential sizes, a run to a horizon, traces, state distributions, key buckets, the
    tree, the scan, and the fast and slow samples of jsq-df-ds."""
    from hetlb.model.job_sizes import JobSizes
    from hetlb.model.system import System
    from hetlb.simulation.simulate import simulate

    sparse = System.from_speeds(
        [2.0, 1.0, 1.0, 0.5],
        arrival_rate=[1.0, 1.0],
        graph=[[0, 1, 2], [1, 2, 3]],
        buffer=[3, 3, 4, 2],
        job_sizes=JobSizes("hyperexponential", 4.0),
    )
    complete = System.from_speeds([2.0, 1.0, 1.0, 0.5, 0.5], load=0.7)
    with recording() as calls:
        for policy in ("jsq", "jfsq", "sed", "pod", "jsq-df-ds", "weighted-random", "jsq-lisf"):
            simulate(complete, policy, jobs=200, seed=1)
            simulate(sparse, policy, jobs=200, seed=1, trace=50, state_distribution=True)
        simulate(complete, "jiq", horizon=50.0, warmup=5.0, seed=1)
    return calls


def build(quiet: bool = False) -> Path:
    """Compile the exported functions ahead of time for the argument types of :func:`sample_calls`;
    returns the module's path. Takes a few seconds to a minute (numba compiles every kernel)."""
    from numba import typeof

    with warnings.catch_warnings():  # pending deprecation since numba 0.57, with no replacement yet
        warnings.simplefilter("ignore")
        try:
            from numba.pycc import CC
        except ImportError:
            raise RuntimeError(f"numba {version('numba')} has no ahead-of-time compiler (numba.pycc)") from None

    from hetlb.kernels import continuous
    from hetlb.kernels.sampling import alias_table
    from hetlb.policies import rules

    jit.compile_everything()
    functions = {"advance": continuous.advance, "alias_table": alias_table, "selection_keys": rules.selection_keys}
    calls = sample_calls()
    name = module_name()
    directory = next(d for d in directories() if writable(d))
    compiler = CC(name)
    compiler.output_dir = str(directory)
    compiler.target_cpu = "host"
    compiler.verbose = not quiet
    signatures: dict[str, list] = {}
    for function_name, dispatcher in functions.items():
        kinds: dict[str, tuple] = {}
        for args in calls.get(function_name, []):
            kinds.setdefault(json.dumps(describe(args)), args)
        for number, (description, args) in enumerate(kinds.items()):
            export = f"{function_name}_{number}"
            dispatcher(*args)  # numba's own compile for these types gives the return type
            argument_types = tuple(typeof(arg) for arg in args)
            return_type = dispatcher.overloads[argument_types].signature.return_type
            compiler.export(export, return_type(*argument_types))(dispatcher.py_func)
            signatures[export] = json.loads(description)
    for old in directory.glob("hetlb_kernels_*"):
        old.unlink()
    compiler.compile()
    (directory / f"{name}.json").write_text(json.dumps(signatures))
    ahead_of_time.forget()
    return next(directory.glob(f"{name}.*.so"))


def writable(directory: Path) -> bool:
    try:
        directory.mkdir(parents=True, exist_ok=True)
        return os.access(directory, os.W_OK)
    except OSError:
        return False


def compile_command(quiet: bool = False) -> str:
    """What ``hetlb compile`` prints: where the module is, built now or found up to date, and the
    many-dispatcher kernel in numba's cache (:func:`cache_dispatcher_kernel`)."""
    if jit.DISABLED:
        return "not compiled: the kernels run as plain Python (NUMBA_DISABLE_JIT)"
    started = time.process_time()
    compiled = ahead_of_time.compiled_kernels()
    if compiled is not None:
        line = f"up to date: {compiled.module.__file__}"
    else:
        try:
            path = build(quiet=quiet)
            line = f"compiled {path} in {time.process_time() - started:.1f} s of CPU"
        except RuntimeError as error:
            line = f"not compiled: {error}; simulations use numba's JIT"
    return line + "\n" + cache_dispatcher_kernel()


def cache_dispatcher_kernel() -> str:
    """Compile the many-dispatcher event loop into numba's cache with a tiny run, unless it is there
    already: ``hetlb simulate --dispatchers``, the testbed and sweeps then load it (it is JIT
    compiled, without numba's runtime, which the ahead-of-time compiler cannot do)."""
    from hetlb.kernels import dispatchers
    from hetlb.model.system import System
    from hetlb.progress import needs_compiling
    from hetlb.simulation.simulate import simulate

    if not needs_compiling(dispatchers.advance):
        return "many-dispatcher kernel: in numba's cache"
    started = time.process_time()
    simulate(System.from_speeds([1.0, 1.0], arrival_rate=0.5), "l-jsq", jobs=20, dispatchers=2)
    return f"many-dispatcher kernel: compiled into numba's cache in {time.process_time() - started:.1f} s of CPU"
