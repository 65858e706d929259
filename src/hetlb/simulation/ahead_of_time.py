"""The continuous-time kernel compiled ahead of time, so that a short ``hetlb simulate`` does not
pay numba's start-up.

Importing numba and loading the first cached function costs about 0.6 s of CPU, more than a
simulation of a few thousand jobs. ``hetlb compile`` (which ``make`` runs when it sets up the
environment) compiles the functions the continuous model calls from Python (the event loop
hetlb.kernels.continuous.advance, and hetlb.kernels.sampling.alias_table and
hetlb.policies.rules.selection_keys, which the packing calls) with numba's ahead-of-time compiler
into one extension module, for this CPU and for the argument types the continuous model passes.
hetlb.simulate then calls that module and never imports numba (hetlb.simulation.precompile builds it).

Safety. The module's name carries a stamp: a hash of the kernels' sources (hetlb/jit.py,
hetlb/constants.py, hetlb/kernels/, hetlb/policies/) and of the versions of Python, NumPy and
numba; a module with another stamp is never loaded, so an edited kernel runs JIT-compiled until
``hetlb compile`` is run again. Compiled code reads its arguments as the types it was compiled
for, so before each call the arguments are described (dtype, dimensions, layout and flags of each
array, type of each scalar, field by field of the named tuples) and compared with the
descriptions recorded at compile time: any difference, and the JIT-compiled function runs
instead. Results are bit for bit those of the JIT-compiled functions (tests/simulation/test_ahead_of_time.py).
Set ``HETLB_AHEAD_OF_TIME=0`` to always use the JIT.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import platform
import sys
from collections.abc import Callable
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

from hetlb import jit

PACKAGE = Path(__file__).resolve().parents[1]
SOURCES = ("jit.py", "constants.py", "kernels", "policies")
"""The parts of the package whose code goes into the compiled module (the stamp hashes them)."""

ENABLED = os.environ.get("HETLB_AHEAD_OF_TIME", "1").strip() not in ("", "0")


def stamp() -> str:
    """A hash of the compiled module's sources and of the versions it was compiled with."""
    files = [
        file
        for part in SOURCES
        for path in [PACKAGE / part]
        for file in (sorted(path.glob("*.py")) if path.is_dir() else [path])
    ]
    return jit.source_stamp(files, f"{sys.version} {np.__version__} {version('numba')} {platform.machine()}")


def module_name() -> str:
    return f"hetlb_kernels_{stamp()}"


def directories() -> list[Path]:
    """Where the compiled module is looked for, and written to (the first writable one): the
    package's __pycache__, else a directory of the user's own in the temporary directory."""
    return [PACKAGE / "__pycache__", Path(jit.private_directory("hetlb-compiled"))]


def describe(value) -> Any:
    """What compiled code assumes of an argument: for an array its dtype, dimensions, layout and
    flags; for a named tuple, its fields'; for a scalar, its type."""
    if isinstance(value, np.ndarray):
        layout = "C" if value.flags.c_contiguous else "F" if value.flags.f_contiguous else "A"
        return ["array", str(value.dtype.descr), value.dtype.isalignedstruct, value.ndim, layout, value.flags.writeable]
    if isinstance(value, tuple):
        return [type(value).__name__, *[describe(field) for field in value]]
    if isinstance(value, np.random.Generator):
        return ["Generator"]
    if isinstance(value, bool | int | float | np.bool_ | np.integer | np.floating):
        return [type(value).__name__]
    return ["unsupported", type(value).__name__]


class CompiledKernels:
    """The loaded module: its functions by exported name, and the argument descriptions each was
    compiled for."""

    def __init__(self, module, signatures: dict[str, list]):
        self.module = module
        self.signatures = signatures
        self.calls = 0  # calls given to compiled code

    def find(self, name: str, args: tuple) -> Callable | None:
        """The compiled ``name`` for these arguments, or None."""
        description = describe(args)
        for export, expected in self.signatures.items():
            if export.rsplit("_", 1)[0] == name and expected == description:
                self.calls += 1
                return getattr(self.module, export)
        return None


_loaded: CompiledKernels | None = None
_looked = False


def compiled_kernels() -> CompiledKernels | None:
    """The compiled module for the current sources, or None (none built, another stamp, the JIT
    disabled, or HETLB_AHEAD_OF_TIME=0)."""
    global _loaded, _looked
    if _looked:
        return _loaded
    _looked = True
    if jit.DISABLED or not ENABLED:
        return None
    name = module_name()
    for directory in directories():
        signatures = directory / f"{name}.json"
        if not signatures.is_file():
            continue
        for path in directory.glob(f"{name}.*.so"):
            try:
                spec = importlib.util.spec_from_file_location(
                    name, path, loader=importlib.machinery.ExtensionFileLoader(name, str(path))
                )
                assert spec is not None and spec.loader is not None
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                _loaded = CompiledKernels(module, json.loads(signatures.read_text()))
                return _loaded
            except (ImportError, OSError, ValueError, AssertionError):
                continue
    return None


_recorded: dict[str, list] | None = None


def kernel(name: str, jit_function: Callable) -> Callable:
    """``jit_function`` (a function of hetlb's kernels exported under ``name``) as called from
    Python: the compiled module's when it has one for the arguments, else the JIT's."""

    def call(*args):
        if _recorded is not None:
            _recorded.setdefault(name, []).append(args)
        compiled = compiled_kernels()
        function = compiled.find(name, args) if compiled is not None else None
        return (function or jit_function)(*args)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = jit_function.__doc__
    return call


@contextmanager
def recording():
    """Record the arguments of every call made through :func:`kernel` (for :func:`build`)."""
    global _recorded
    _recorded = {}
    try:
        yield _recorded
    finally:
        _recorded = None


def forget() -> None:
    """Look for the compiled module again at the next call (after a build)."""
    global _looked, _loaded
    _looked, _loaded = False, None
