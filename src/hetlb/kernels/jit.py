"""What lets the kernels run both compiled and as plain Python (``NUMBA_DISABLE_JIT=1``).

With the JIT disabled, numba's decorators return the Python functions unchanged and the kernels
run on NumPy (slowly, but line by line in a debugger or under coverage, with the same results).
Two things of compiled code have no plain-Python equivalent, and this module gives each one a
definition per mode, chosen once at import, so that the compiled path is what it would be
without them:

* attribute access to the fields of a structured array (``servers[s].queue_len``,
  ``servers.queue_len``): numba gives it to every record array, NumPy only to a ``np.recarray``
  view, which :func:`records` makes (and which writes through to the array). The event loops
  wrap their record arrays once, on entry; compiled, ``records`` is inlined and the loops are
  the same machine code as without it;
* ``prefetch``, an LLVM intrinsic: in plain Python it does nothing, which is all it ever does to
  results.

It also makes sure numba has somewhere to cache the compiled functions (:func:`cache_somewhere`);
hetlb imports it first, before any module that defines one.
"""

import atexit
import os
import shutil
import tempfile
from typing import Any

import numpy as np
from numba import config, njit
from numba.core.caching import FunctionCache

CACHE_LINE = 64  # bytes

numba_config: Any = config  # numba sets the attributes of its configuration at import


def cache_somewhere() -> None:
    """Give numba a writable directory for its cache of compiled functions if it finds none.

    numba caches a function (``cache=True``) in the __pycache__ next to its module, else in the
    user's cache directory (~/.cache/numba). When neither is writable (a read-only install and home,
    as in some containers) it refuses to define the function, and hetlb would not import. Then the
    cache goes to hetlb-numba-cache-UID in the temporary directory, or, if that directory is not
    the user's alone, to a new temporary directory removed at exit (the kernels compile once per
    process). numba takes this directory for every cached function of the process."""
    if numba_config.DISABLE_JIT or numba_config.CACHE_DIR:
        return
    try:
        FunctionCache(cache_somewhere)  # what numba does for a cached function of this package
        return
    except RuntimeError:
        pass
    uid = os.getuid() if hasattr(os, "getuid") else None
    directory = os.path.join(tempfile.gettempdir(), f"hetlb-numba-cache-{uid if uid is not None else 'user'}")
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        status = os.stat(directory)
        private = uid is None or (status.st_uid == uid and not status.st_mode & 0o022)
    except OSError:
        private = False
    if not private:
        directory = tempfile.mkdtemp(prefix="hetlb-numba-cache-")
        atexit.register(shutil.rmtree, directory, ignore_errors=True)
    numba_config.CACHE_DIR = directory


cache_somewhere()


if numba_config.DISABLE_JIT:

    def records(array):
        """``array`` (a structured array) as a np.recarray view: its elements and columns are read
        and written by attribute, as in compiled code."""
        return array.view(np.recarray)

    def prefetch(array, index):
        """Nothing: prefetching only changes when memory is read, never what is read."""

else:
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic

    @njit(cache=True, inline="always")
    def records(array):
        """``array`` itself: compiled code reads the fields of a record array by attribute."""
        return array

    @intrinsic
    def prefetch(typingctx, array, index):
        """Ask the CPU to start loading ``array[index]`` into cache, without waiting for it; no effect
        on results. Lets the memory reads of a large system overlap. Covers the element when it
        starts a cache line (see hetlb.kernels.trees.cache_aligned_zeros)."""

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
