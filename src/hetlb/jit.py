"""Compiling hetlb's kernels: numba functions compiled when first called, and what lets the kernels
run as plain Python (``NUMBA_DISABLE_JIT=1``).

**When numba is imported.** hetlb defines its compiled functions with :func:`njit` below rather
than with numba's decorator. Ours records the function and returns a stand-in
(:class:`LazyFunction`); the first time any stand-in is called, or asked for an attribute only a
numba function has (``signatures``, ``_cache``), :func:`compile_everything` imports numba, makes
every recorded function a numba dispatcher, and puts the dispatchers in place of the stand-ins in
every hetlb module, where compiled callers look them up. Importing numba and loading the first
cached function costs about 0.5 s of CPU (numba sets up its typing and lowering registries then):
a command that runs no kernel, or only short runs as plain Python (below), never pays it.
``py_func`` is the plain function, without compiling anything.

**Plain Python in a compiling process.** Inside :func:`plain_python` the stand-ins, until numba
is imported, call their plain functions (``records`` and ``prefetch`` their plain-Python
definitions below), so a run too short to be worth numba's start-up runs without it, with the same
results bit for bit (hetlb.simulation.fast_start decides when; tests/kernels/test_jit_off.py
holds the plain functions to the compiled ones).

**Plain Python.** With the JIT disabled (the environment variable ``NUMBA_DISABLE_JIT`` set to a
non-zero integer, as numba reads it), :func:`njit` returns the function unchanged and the kernels
run on NumPy, line by line in a debugger or under coverage, with the same results. Two things of
compiled code have no plain-Python equivalent, and this module gives each one a definition per
mode, so that the compiled path is what it would be without them:

* attribute access to the fields of a structured array (``servers[s].queue_len``,
  ``servers.queue_len``): numba gives it to every record array, NumPy only to a ``np.recarray``
  view, which :func:`records` makes (and which writes through to the array). The event loops
  wrap their record arrays once, on entry; compiled, ``records`` is inlined and the loops are
  the same machine code as without it;
* ``prefetch``, an LLVM intrinsic: in plain Python it does nothing, which is all it ever does to
  results.

It also makes sure numba has somewhere to cache the compiled functions, and that a cached function
is never one compiled from other sources (:func:`cache_somewhere`).
"""

from __future__ import annotations

import atexit
import hashlib
import importlib
import os
import shutil
import sys
import tempfile
import types
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

CACHE_LINE = 64  # bytes

DISABLED = os.environ.get("NUMBA_DISABLE_JIT", "0").strip() not in ("", "0")
"""Whether the kernels run as plain Python (numba's own reading of NUMBA_DISABLE_JIT)."""


class LazyFunction:
    """A numba function before numba is imported: it makes itself (and every other one) a numba
    dispatcher when first called or asked for a dispatcher's attribute (module docstring)."""

    def __init__(self, py_func: Callable | None, make: Callable[[], Any], plain: Callable | None = None):
        self.py_func = py_func
        self.make = make
        self.plain = plain or py_func
        """What a call runs inside :func:`plain_python` (the plain function by default)."""
        self.dispatcher: Any = None
        if py_func is not None:
            self.__name__, self.__qualname__ = py_func.__name__, py_func.__qualname__
            self.__module__, self.__doc__ = py_func.__module__, py_func.__doc__

    def compiled(self):
        """The numba dispatcher (or intrinsic) this stands for."""
        if self.dispatcher is None:
            compile_everything()
        return self.dispatcher

    def __call__(self, *args, **kwargs):
        if _plain and self.dispatcher is None:
            return self.plain(*args, **kwargs)
        return self.compiled()(*args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self.compiled(), name)


_waiting: list[LazyFunction] = []
_numba_loaded = False
_plain = False


def numba_loaded() -> bool:
    """Whether the stand-ins have been made numba functions (numba imported) in this process."""
    return _numba_loaded


def running_plain() -> bool:
    """Whether hetlb's kernels run as plain Python here and now: with the JIT disabled, or inside
    :func:`plain_python` before numba is imported."""
    return DISABLED or (_plain and not _numba_loaded)


@contextmanager
def plain_python(enabled: bool = True):
    """With ``enabled``, the stand-ins call their plain functions while inside (until numba is
    imported: then they are numba functions, compiled or loaded from the cache). The plain
    functions are put in their place in every loaded hetlb module meanwhile, so that a call costs
    no stand-in's dispatch (about a tenth of a short run); the stand-ins, or the numba functions
    made of them in between, are put back on the way out."""
    global _plain
    if not enabled or _plain or _numba_loaded:
        yield
        return
    _plain = True
    swapped = []
    for name, module in list(sys.modules.items()):
        if module is not None and (name == "hetlb" or name.startswith("hetlb.")):
            namespace = vars(module)
            for key, value in list(namespace.items()):
                if type(value) is LazyFunction and value.plain is not None:
                    namespace[key] = value.plain
                    swapped.append((namespace, key, value))
    try:
        yield
    finally:
        _plain = False
        for namespace, key, lazy in swapped:
            if namespace.get(key) is lazy.plain:
                namespace[key] = lazy if lazy.dispatcher is None else lazy.dispatcher


def njit(function: Callable | None = None, **options) -> Any:
    """numba's ``njit(cache=True, **options)``, applied when the first compiled function is used;
    ``@njit`` or ``@njit(inline="always")``. With the JIT disabled, the function itself. ``plain``
    (an option of ours): what :func:`plain_python` runs instead of the function."""
    plain = options.pop("plain", None)

    def decorate(py_func: Callable):
        if DISABLED:
            return py_func
        if _numba_loaded:
            return make_dispatcher(py_func, options)
        lazy = LazyFunction(py_func, lambda: make_dispatcher(py_func, options), plain)
        _waiting.append(lazy)
        return lazy

    return decorate if function is None else decorate(function)


def by_types(plain: Callable, choose: Callable) -> Any:
    """A function that compiled code calls like an @njit function, whose implementation numba
    picks by the types of its arguments when it compiles the caller: ``choose(*types)`` returns a
    plain Python function of the same parameters, which numba compiles inlined into the caller
    (numba's ``overload`` with ``inline="always"``). Outside compiled code, in :func:`plain_python`
    and with the JIT disabled, ``plain(*args)`` runs, choosing by the values. So one loop compiles
    to different code for arguments of different types (hetlb.kernels.server_state: a run without
    caches gets the loop it had, a run with caches the same loop with them); ``choose`` should be
    ``functools.wraps`` of an implementation, so that numba sees their common parameters."""
    if DISABLED:
        return plain

    def make():
        from numba.extending import overload

        overload(plain, inline="always")(choose)
        return plain

    if _numba_loaded:
        return make()
    lazy = LazyFunction(None, make, plain)
    lazy.__name__ = lazy.__qualname__ = plain.__name__
    lazy.__module__, lazy.__doc__ = plain.__module__, plain.__doc__
    _waiting.append(lazy)
    return lazy


def make_dispatcher(py_func: Callable, options: dict):
    import numba

    return numba.njit(cache=True, **options)(py_func)


def compile_everything() -> None:
    """Import numba, make every waiting function a numba dispatcher, and put the dispatchers in
    place of the stand-ins in every loaded hetlb module (compiled code finds its callees there)."""
    global _numba_loaded
    if _numba_loaded:
        return
    import numba  # noqa: F401

    cache_somewhere()
    _numba_loaded = True
    for lazy in _waiting:
        lazy.dispatcher = lazy.make()
    for name, module in list(sys.modules.items()):
        if module is not None and (name == "hetlb" or name.startswith("hetlb.")):
            namespace = vars(module)
            for key, value in list(namespace.items()):
                if type(value) is LazyFunction:
                    namespace[key] = value.dispatcher
    _waiting.clear()


def entry_point(function, arguments: tuple) -> Callable | None:
    """The compiled code of numba ``function`` for the types of ``arguments``, called without
    numba's dispatch on the arguments' types: that costs about 2 us per call of many arguments,
    more than a decision. Only for calls whose arguments have exactly these types (numba would not
    check them). None when it has not been compiled (or loaded) for them, or with the JIT disabled."""
    if DISABLED:
        return None
    dispatcher = function.compiled() if type(function) is LazyFunction else function
    signature = tuple(dispatcher.typeof_pyval(argument) for argument in arguments)
    compiled = dispatcher.overloads.get(signature)
    return None if compiled is None else compiled.entry_point


PACKAGE = Path(__file__).resolve().parent


def source_stamp(files: Iterable[Path], extra: str = "", package: Path = PACKAGE) -> str:
    """16 hex digits of a hash of ``files`` (their paths in ``package`` and their contents, in the
    order given) and ``extra``."""
    digest = hashlib.sha256()
    for file in files:
        digest.update(file.relative_to(package).as_posix().encode())
        digest.update(file.read_bytes())
    digest.update(extra.encode())
    return digest.hexdigest()[:16]


def compiled_sources() -> list[Path]:
    """The package's modules that define compiled functions (those that name ``njit``)."""
    return [file for file in sorted(PACKAGE.rglob("*.py")) if b"njit" in file.read_bytes()]


def cache_somewhere() -> None:
    """Give numba a cache directory of compiled functions that only these sources use.

    numba caches a function (``cache=True``) under a key of its own file's time stamp and size, so
    a function whose callee in another module changed would be loaded as compiled before the
    change (a stale ``selection_key`` inside ``choose_server``, say, after an upgrade or an
    edit). hetlb therefore gives numba a directory named by a hash of every module that defines
    compiled functions, and of numba's and numpy's versions: the package's __pycache__/numba-STAMP
    (older stamps there are removed), or, when the package is read-only (installed for all users),
    the user's cache directory, $XDG_CACHE_HOME/hetlb/numba-STAMP (default ~/.cache), or, when that
    cannot be written, hetlb-numba-cache-UID/STAMP in the temporary directory, or, if that directory
    is not the user's alone, a new temporary directory removed at exit (the kernels then compile
    once per process). A CACHE_DIR the user set (NUMBA_CACHE_DIR) is left alone."""
    numba = importlib.import_module("numba")
    config: Any = numba.config  # numba sets its attributes at import
    if config.DISABLE_JIT or config.CACHE_DIR:
        return
    stamp = source_stamp(compiled_sources(), f"{sys.version} {np.__version__} {numba.__version__}")
    cache = PACKAGE / "__pycache__"
    try:
        (cache / f"numba-{stamp}").mkdir(parents=True, exist_ok=True)
        writable = os.access(cache / f"numba-{stamp}", os.W_OK)
    except OSError:
        writable = False
    if not writable:
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hetlb"
        try:
            (cache / f"numba-{stamp}").mkdir(parents=True, exist_ok=True)
            writable = os.access(cache / f"numba-{stamp}", os.W_OK)
        except (OSError, RuntimeError):  # RuntimeError: no home directory
            writable = False
    if writable:
        for old in cache.glob("numba-*"):
            if old.name != f"numba-{stamp}":
                shutil.rmtree(old, ignore_errors=True)
        config.CACHE_DIR = str(cache / f"numba-{stamp}")
        return
    directory = os.path.join(private_directory("hetlb-numba-cache"), stamp)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    config.CACHE_DIR = directory


def cache_directory() -> str:
    """numba's cache directory (after :func:`cache_somewhere`)."""
    return importlib.import_module("numba").config.CACHE_DIR


def private_directory(prefix: str) -> str:
    """``prefix-UID`` in the temporary directory, made if needed, when it is the user's alone;
    otherwise a new temporary directory, removed at exit."""
    uid = os.getuid() if hasattr(os, "getuid") else None
    directory = os.path.join(tempfile.gettempdir(), f"{prefix}-{uid if uid is not None else 'user'}")
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        status = os.stat(directory)
        private = uid is None or (status.st_uid == uid and not status.st_mode & 0o022)
    except OSError:
        private = False
    if not private:
        directory = tempfile.mkdtemp(prefix=f"{prefix}-")
        atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return directory


class PlainRecords:
    """A structured array whose elements and columns are read and written by attribute, as in
    compiled code (``servers[s].queue_len``, ``servers.queue_len``), writing through to the array.
    A np.recarray view does that too, at several times the cost of an access (its records look a
    name up among their methods first); here each column is a view made once."""

    __slots__ = ("array", "columns")

    def __init__(self, array: np.ndarray):
        object.__setattr__(self, "array", array)
        object.__setattr__(self, "columns", {name: array[name] for name in array.dtype.names or ()})

    def __getitem__(self, index):
        if isinstance(index, str):
            return self.columns[index]
        if isinstance(index, int | np.integer):
            return PlainRecord(self.columns, index)
        return PlainRecords(self.array[index])

    def __setitem__(self, index, value):
        self.array[index] = value

    def __getattr__(self, name: str):
        columns = self.columns
        return columns[name] if name in columns else getattr(self.array, name)

    def __setattr__(self, name: str, value) -> None:
        self.columns[name][...] = value

    def __len__(self) -> int:
        return len(self.array)

    def __iter__(self):
        return (PlainRecord(self.columns, index) for index in range(len(self.array)))


class PlainRecord:
    """Element ``index`` of a structured array (given by its ``columns``), its fields read and
    written by attribute (or by name)."""

    __slots__ = ("columns", "index")

    def __init__(self, columns: dict, index):
        object.__setattr__(self, "columns", columns)
        object.__setattr__(self, "index", index)

    def __getattr__(self, name: str):
        return self.columns[name][self.index]

    def __setattr__(self, name: str, value) -> None:
        self.columns[name][self.index] = value

    __getitem__ = __getattr__
    __setitem__ = __setattr__


def plain_records(array):
    """``array`` (a structured array) as :class:`PlainRecords`: its elements and columns are read
    and written by attribute, as in compiled code."""
    return PlainRecords(array)


def plain_prefetch(array, index):
    """Nothing: prefetching only changes when memory is read, never what is read."""


if DISABLED:
    records = plain_records
    prefetch = plain_prefetch

else:

    @njit(inline="always", plain=plain_records)
    def records(array):
        """``array`` itself: compiled code reads the fields of a record array by attribute."""
        return array

    def make_prefetch():
        """``prefetch(array, index)``: ask the CPU to start loading ``array[index]`` into cache,
        without waiting for it; no effect on results. Lets the memory reads of a large system
        overlap. Covers the element when it starts a cache line (see
        hetlb.kernels.trees.cache_aligned_zeros)."""
        from llvmlite import ir
        from numba import types
        from numba.core import cgutils
        from numba.extending import intrinsic

        @intrinsic
        def prefetch(typingctx, array, index):
            def codegen(context, builder, signature, args):
                array_type = signature.args[0]
                data = context.make_array(array_type)(context, builder, args[0])
                pointer = cgutils.get_item_pointer(context, builder, array_type, data, [args[1]], wraparound=False)
                byte_pointer = ir.PointerType(ir.IntType(8))
                llvm_prefetch = cgutils.get_or_insert_function(
                    builder.module,
                    ir.FunctionType(ir.VoidType(), [byte_pointer] + 3 * [ir.IntType(32)]),
                    "llvm.prefetch.p0",
                )
                itemsize = context.get_abi_sizeof(context.get_data_type(array_type.dtype))
                for offset in range(0, itemsize, CACHE_LINE):
                    line = builder.gep(builder.bitcast(pointer, byte_pointer), [ir.Constant(ir.IntType(64), offset)])
                    # read, keep in all cache levels, data
                    builder.call(llvm_prefetch, [line] + [ir.Constant(ir.IntType(32), v) for v in (0, 3, 1)])
                return context.get_dummy_value()

            return types.void(array, index), codegen

        return prefetch

    prefetch = LazyFunction(None, make_prefetch, plain_prefetch)
    _waiting.append(prefetch)


@njit(inline="always")
def at(index):
    """An array index known to be >= 0, as an unsigned integer. numba indexes with a signed
    integer by adding the array's length to a negative index: a few instructions per access, and
    the length kept at hand for the whole loop, where registers are short. With an unsigned index
    it adds nothing (the key buckets' accesses so made the continuous loop about 10% faster at
    N = 10). Only the index is converted: the arithmetic stays on signed integers, since numba makes
    a float of a signed and an unsigned one."""
    return np.uint64(index)


def renamed(function, name: str, names: dict | None = None):
    """The plain Python function of ``function`` under another name (so that numba caches its
    compiled code apart), its global names looked up in ``names`` first."""
    plain = getattr(function, "py_func", function)
    scope = plain.__globals__ if names is None else {**plain.__globals__, **names}
    copy = types.FunctionType(plain.__code__, scope, name, plain.__defaults__, plain.__closure__)
    copy.__qualname__ = name
    copy.__module__ = plain.__module__
    copy.__doc__ = plain.__doc__
    return copy
