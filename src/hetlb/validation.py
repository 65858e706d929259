"""The checks every user value passes: numbers, integers, arrays, choices, seeds, texts and paths.

Each check returns the value in its canonical type or raises :class:`hetlb.errors.InputError`
naming the field and the rule it breaks, so that the command line prints one line and exits 2.
Its limits (MAX_COUNT, RATE_RANGE, and check_memory against the machine's memory) bound what any
computation may be asked for, so that none overflows, hangs or runs out of memory unannounced.
This module is the bottom layer of hetlb: model, simulation, theory, experiments and the CLI
all check their input with it, and it imports nothing of hetlb but the error type.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from hetlb.errors import InputError

REAL_TYPES = (int, float, np.integer, np.floating)
INTEGER_TYPES = (int, np.integer)
MESSAGE_WIDTH = 80
"""Characters of a user value that an error message repeats (:func:`shorten`)."""
NAME_MAX = 255
"""Bytes of one name in a path (a file or folder name), the limit of common file systems."""
PATH_MAX = 4096
"""Bytes of a whole path."""


def shorten(text: str, limit: int = MESSAGE_WIDTH) -> str:
    """``text`` on one line and cut to about ``limit`` characters, saying how long it was, so that
    an error message stays one line of reasonable length whatever the input."""
    text = " ".join(str(text).splitlines())
    if len(text) <= limit:
        return text
    return f"{text[: max(limit - 3, 1)]}... ({len(text):,} characters)"


def shown(value, limit: int = MESSAGE_WIDTH) -> str:
    """A user value as an error message repeats it: its repr, shortened (:func:`shorten`)."""
    return shorten(repr(value), limit)


def is_integer(value) -> bool:
    """An int (or numpy integer), never a bool."""
    return isinstance(value, INTEGER_TYPES) and not isinstance(value, bool)


def is_real(value) -> bool:
    """An int or float (or their numpy types), never a bool."""
    return isinstance(value, REAL_TYPES) and not isinstance(value, bool)


def integer(name: str, value, low: int = 1, high: int | None = None) -> int:
    """An integer in [low, high] (high None: no upper bound), as an int."""
    if not is_integer(value) or value < low or (high is not None and value > high):
        rule = f"an integer >= {low}" if high is None else f"an integer in [{low}, {high}]"
        raise InputError(name, f"must be {rule}, got {shown(value)}")
    return int(value)


def number(name: str, value, low: float | None = None, *, strict: bool = False, high: float | None = None) -> float:
    """A finite number >= low (> low when ``strict``) and <= high, as a float; None bounds are open."""
    if not is_real(value) or not math.isfinite(value):
        raise InputError(name, f"must be a finite number, got {shown(value)}")
    below = low is not None and (value <= low if strict else value < low)
    if below or (high is not None and value > high):
        parts = [f"{'>' if strict else '>='} {low:g}"] if low is not None else []
        parts += [f"<= {high:g}"] if high is not None else []
        raise InputError(name, f"must be a finite number {' and '.join(parts)}, got {shown(value)}")
    return float(value)


def positive_number(name: str, value) -> float:
    """A finite number > 0 (a rate, a time, a speed), as a float."""
    return number(name, value, 0.0, strict=True)


def probability(name: str, value, *, positive: bool = False) -> float:
    """A number in [0, 1], or in (0, 1] when ``positive``."""
    if not is_real(value) or not (0.0 < value <= 1.0 if positive else 0.0 <= value <= 1.0):
        raise InputError(name, f"must be a number in {'(0, 1]' if positive else '[0, 1]'}, got {shown(value)}")
    return float(value)


def positive_finite_array(name: str, values, within: tuple[float, float] | None = None, why: str = "") -> np.ndarray:
    """A non-empty 1-d float64 array of finite numbers > 0 (a scalar becomes one element), each in
    the closed range ``within`` when given (e.g. RATE_RANGE; ``why`` tells the user why)."""
    try:
        array = np.atleast_1d(np.asarray(values, dtype=np.float64))
    except (TypeError, ValueError, OverflowError):
        raise InputError(name, "must be numbers") from None
    if array.ndim != 1 or len(array) == 0:
        raise InputError(name, "must be a non-empty list of numbers")
    bad = array[~(np.isfinite(array) & (array > 0))]
    if len(bad):
        raise InputError(name, f"every value must be finite and > 0, got {bad[0]}")
    if within is not None:
        outside = array[(array < within[0]) | (array > within[1])]
        if len(outside):
            rule = f"every value must lie in [{within[0]:g}, {within[1]:g}]{f' ({why})' if why else ''}"
            raise InputError(name, f"{rule}, got {outside[0]:g}")
    return array


# Limits: how large a count may be, and how much memory one computation may plan to use.

MAX_COUNT = 2**62
"""The largest count a user gives (jobs, slots, replications, buffer sizes): the kernels keep
counts in 64-bit integers, and this leaves them room to run past it (arrivals beyond the jobs
counted, events)."""

RATE_RANGE = (1e-100, 1e100)
"""Rates (jobs per time unit: speeds, arrival rates) a model takes. Within it, rates, the times
they give, and their products, squares and sums over any count stay far inside the range of
float64 (about 1e-308 to 1e308); a time unit can always be chosen to bring a model into it."""

MEMORY_FRACTION = 0.5
"""The share of the machine's memory one computation may plan to use: the rest is left to the
process itself (Python, numpy, compiled kernels) and to whatever else runs on the machine."""

TIME_LIMIT_S = 24 * 3600.0
"""Seconds one computation may be estimated to take (a day); an estimate is a lower bound of the
true time (the fastest rate any machine reaches), so what it refuses could not have finished sooner."""


def count(name: str, value, low: int = 1) -> int:
    """A count: an integer in [low, MAX_COUNT], as an int."""
    value = integer(name, value, low)
    if value > MAX_COUNT:
        raise InputError(name, f"must be an integer <= 2^62 = {MAX_COUNT}, got {shown(value)}")
    return value


def memory_limit() -> float:
    """Bytes one computation may allocate: MEMORY_FRACTION of the machine's physical memory, or of
    what its address-space limit (``ulimit -v``) leaves this process if that is less; infinite when
    neither can be read."""
    import contextlib
    import os

    available = []
    with contextlib.suppress(AttributeError, ValueError, OSError):
        available.append(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    with contextlib.suppress(ImportError, AttributeError, ValueError, OSError):
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            available.append(soft - address_space_in_use())
    return MEMORY_FRACTION * max(min(available), 0) if available else math.inf


def address_space_in_use() -> int:
    """Bytes of address space this process holds (0 where the system does not say)."""
    import contextlib
    import os

    with contextlib.suppress(AttributeError, ValueError, OSError, IndexError):
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    return 0


def quantity(value) -> str:
    """A count or size in a few characters: 1234 as "1,234", 3.6e10 as "3.6e+10", a Python int of
    any size in the same form (6^5000 as "5.7e+3890"), infinity as "inf"."""
    if is_integer(value) and abs(int(value)) < 10**7:
        return f"{int(value):,}"
    if is_integer(value) and abs(int(value)) > 10**300:  # beyond a float: its power of ten
        magnitude = abs(int(value))
        exponent = math.floor(math.log10(magnitude))  # log10 takes ints of any size, maybe off by one
        exponent += (10 ** (exponent + 1) <= magnitude) - (10**exponent > magnitude)
        mantissa = magnitude // 10 ** (exponent - 1) / 10  # two significant digits, rounded down
        return f"{'-' if value < 0 else ''}{mantissa:.1f}e+{exponent}"
    return f"{float(value):.2g}"


def byte_size(value) -> str:
    """Bytes as "512 B", "1.5 GiB", "8.4e+15 GiB"."""
    if isinstance(value, INTEGER_TYPES) and value < 1024:
        return f"{int(value)} B"
    for unit, scale in (("KiB", 2**10), ("MiB", 2**20)):
        if value < 1024 * scale:
            return f"{value / scale:.1f} {unit}"
    gib = value / 2**30 if isinstance(value, float) else value // 2**30
    if gib < 100:
        return f"{gib:.1f} GiB"
    return f"{gib:,.0f} GiB" if gib < 10**7 else f"{quantity(gib)} GiB"


def check_memory(name: str, needed, what: str, advice: str = "") -> None:
    """Refuse, before allocating, ``what`` when its estimate ``needed`` (bytes; any int or float)
    is more than :func:`memory_limit`; ``advice`` says what to change."""
    check_cost(name, what, memory=needed, advice=advice)


def check_cost(
    name: str, what: str, *, memory=0, seconds=0.0, time_limit: float = TIME_LIMIT_S, advice: str = ""
) -> None:
    """Refuse, before starting, ``what`` when its estimates are out of bounds: ``memory`` (bytes)
    more than :func:`memory_limit`, or ``seconds`` (a lower bound of its run time) more than
    ``time_limit``; the one-line error gives the estimate, the bound and ``advice`` (what to change).
    Every command whose cost grows with an input (servers, dispatchers, rate x duration, --compare N)
    calls it with its estimates before it allocates or runs anything of that size."""
    tail = f"; {advice}" if advice else ""
    limit = memory_limit()
    if memory > limit:
        raise InputError(
            name,
            f"{what} needs about {byte_size(memory)} of memory, more than the {byte_size(limit)} a "
            f"computation may use here ({MEMORY_FRACTION:.0%} of the memory available to it){tail}",
        )
    if seconds > time_limit:
        raise InputError(
            name, f"{what} would take at least {duration_text(seconds)}, more than {duration_text(time_limit)}{tail}"
        )


def duration_text(seconds: float) -> str:
    """Seconds as "0.5 s", "12 min", "3.2 h", "41 days", "1.2e+08 days"."""
    if seconds < 120:
        return f"{seconds:.2g} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{quantity(seconds / 86400)} days"


def choice(name: str, value, choices) -> Any:
    """One of ``choices`` (a sequence of allowed values)."""
    if value not in choices:
        raise InputError(name, f"must be one of {', '.join(map(str, choices))}, got {shown(value)}")
    return value


def flag(name: str, value) -> bool:
    """True or false, never a number standing for one."""
    if not isinstance(value, bool):
        raise InputError(name, f"must be true or false, got {shown(value)}")
    return value


def seed(name: str, value) -> int:
    """A seed: an integer >= 0."""
    return integer(name, value, low=0)


JOB_TYPE_NAME = re.compile(r"^[A-Za-z0-9_.:/-]{1,64}$")
"""A job type's name (a model's, an adapter's): 1 to 64 letters, digits or ``_.:/-``."""


def job_type_name(name: str, value) -> str:
    """A job type's name (JOB_TYPE_NAME): the gateway's types, the load generator's, an engine's models."""
    checked = text(name, value)
    if not JOB_TYPE_NAME.match(checked):
        raise InputError(name, f"a job type is 1 to 64 letters, digits or _.:/-, got {shown(checked)}")
    return checked


def text(name: str, value) -> str:
    """A non-empty string."""
    if not isinstance(value, str) or not value:
        raise InputError(name, f"must be a non-empty text, got {shown(value)}")
    utf8(name, value)
    return value


def utf8(name: str, value: str) -> None:
    """Refuse a text that UTF-8 cannot write (bytes of another encoding, read as surrogates)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(name, f"must be UTF-8 text, got {shown(value)}") from None


def table(name: str, value) -> dict:
    """A table (a TOML table, a mapping with text keys)."""
    if not isinstance(value, dict) or not all(isinstance(key, str) for key in value):
        raise InputError(name, f"must be a table, got {shown(value)}")
    return value


def path(name: str, value) -> Path:
    """A file system path: a non-empty text (or os.PathLike) without NUL characters, each name in
    it at most NAME_MAX bytes and the whole at most PATH_MAX bytes."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value.strip() or "\0" in value:
        raise InputError(name, f"must be a file path, got {shown(value)}")
    utf8(name, value)
    if len(os.fsencode(value)) > PATH_MAX:
        raise InputError(name, f"the path is longer than {PATH_MAX} bytes: {shorten(value)}")
    for part in Path(value).parts:
        if len(os.fsencode(part)) > NAME_MAX:
            raise InputError(name, f"a name in the path is longer than {NAME_MAX} bytes: {shorten(part)}")
    return Path(value)


def input_file(name: str, value) -> Path:
    """The path of a file to read: it exists and is not a folder."""
    found = path(name, value)
    with os_errors(name, found):
        if found.is_dir():
            raise InputError(name, f"is a folder, not a file: {shorten(str(found))}")
        if not found.exists():
            raise InputError(name, f"no such file: {shorten(str(found))}")
    return found


def output_file(name: str, value, *, suffixes=None, regular: bool = False, parents: bool = False) -> Path:
    """The path of a file to write: not a folder, its folder exists and is writable (with
    ``parents``: the folders missing on the way can be made), its extension one of ``suffixes``
    (without dots) when given; with ``regular``, an existing file must be a regular file (not a
    device such as /dev/null)."""
    found = path(name, value)
    with os_errors(name, found):
        if found.is_dir():
            raise InputError(name, f"is a folder, not a file: {shorten(str(found))}")
        if suffixes is not None and found.suffix.lower().removeprefix(".") not in suffixes:
            allowed = ", ".join(f".{suffix}" for suffix in suffixes)
            raise InputError(name, f"must end in one of {allowed}, got {shorten(str(found))}")
        if regular and found.exists() and not found.is_file():
            raise InputError(name, f"must be a regular file, got {shorten(str(found))}")
        if found.exists():
            if not os.access(found, os.W_OK):
                raise InputError(name, f"cannot write {shorten(str(found))}: permission denied")
        elif parents:
            writable_folder(name, found.parent)
        elif not found.parent.is_dir():
            raise InputError(name, f"no such folder: {shorten(str(found.parent))}")
        elif not os.access(found.parent, os.W_OK):
            raise InputError(name, f"cannot write in {shorten(str(found.parent))}: permission denied")
    return found


def output_folder(name: str, value, *, make: bool = False) -> Path:
    """The path of a folder to write in: a folder, or a path where one can be made (no file on
    the way, the nearest existing folder writable). With ``make`` (for a long run that writes at
    its end) the folder is made now and a file written in it and removed, so that a folder the
    permissions allow but the file system refuses (/proc, a read-only mount) is refused first; the
    folders made for the trial are removed again (the run makes them when it writes)."""
    found = path(name, value)
    with os_errors(name, found):
        writable_folder(name, found)
        if make:
            missing = [folder for folder in (found, *found.parents) if not folder.exists()]
            found.mkdir(parents=True, exist_ok=True)
            try:
                with tempfile.TemporaryFile(dir=found):
                    pass
            finally:
                for folder in missing:  # the deepest first
                    folder.rmdir()
    return found


@contextlib.contextmanager
def os_errors(name: str, where):
    """Turn an OSError met while looking at ``where`` into an InputError naming ``name``."""
    try:
        yield
    except OSError as error:
        raise InputError(name, f"cannot use {shorten(str(where))}: {error.strerror or error}") from None


def writable_folder(name: str, folder: Path) -> None:
    """Raise unless ``folder`` is, or can be made as, a writable folder."""
    existing = folder
    if existing.is_symlink() and not existing.exists():
        raise InputError(name, f"{shorten(str(existing))} is a link that leads nowhere")
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise InputError(name, f"{shorten(str(existing))} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InputError(name, f"cannot write in {shorten(str(existing))}: permission denied")


# Kinds of parameter values: a policy's (hetlb.policies.registry) and an update signal's
# (hetlb.signals) parameters each name one; a tuple of strings is a choice among them.

COUNT = "an integer >= 1 (at most 2^62)"
PROBABILITY = "a number in [0, 1]"
POSITIVE_PROBABILITY = "a number in (0, 1]"
FLAG = "true or false"
POSITIVE_TIME = "a time > 0"
NONNEGATIVE = "a number >= 0"
AT_LEAST_ONE = "a number >= 1"


def of_kind(name: str, kind, value):
    """``value`` checked against its ``kind`` (one of the kinds above, or a tuple of choices), as
    its canonical type."""
    if isinstance(kind, tuple):
        return choice(name, value, kind)
    if kind == FLAG:
        return flag(name, value)
    if kind == COUNT:
        return count(name, value)
    if kind == POSITIVE_TIME:
        if not is_real(value) or not math.isfinite(value) or value <= 0:
            raise InputError(name, f"must be a time > 0, got {shown(value)}")
        return float(value)
    if kind in (NONNEGATIVE, AT_LEAST_ONE):
        low = 0.0 if kind == NONNEGATIVE else 1.0
        if not is_real(value) or not math.isfinite(value) or value < low:
            raise InputError(name, f"must be {kind}, got {shown(value)}")
        return float(value)
    return probability(name, value, positive=kind == POSITIVE_PROBABILITY)


def describe_kind(kind) -> str:
    """A kind as a help text says it."""
    return f"one of {', '.join(kind)}" if isinstance(kind, tuple) else kind
