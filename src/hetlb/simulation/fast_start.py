"""Fast starts: a short run's kernels as plain Python, so that it does not pay numba's start-up.

Importing numba and loading the first kernel from its cache costs about 0.5 s of CPU, more than a
simulation of a few thousand jobs takes with the kernels run as plain Python (about 75 us an event
on NumPy scalars, against tens of nanoseconds compiled). :func:`kernels_for` therefore runs a run
of the simulator as plain Python (hetlb.jit.plain_python) while numba is not loaded and the plain
events of the process, this run's included, stay within PLAIN_PYTHON_EVENTS: about what numba's
start-up costs. A process of many short runs (a sweep) so pays at most that much before it loads
numba, and one short run never loads it. The plain functions give the compiled kernels' results bit
for bit (tests/kernels/test_jit_off.py, tests/simulation/test_fast_start.py). Every longer run, and
every run once numba is loaded, uses numba's compiled kernels from its on-disk cache, which
``hetlb compile`` (hetlb.simulation.precompile) fills at set-up. Set ``HETLB_FAST_START=0`` to
always compile.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from hetlb import jit

PLAIN_PYTHON_EVENTS = 6000.0
"""Expected events (over every replication) that a process runs as plain Python, at most, before it
loads numba: 6000 events of about 75 us each take about 0.45 s of CPU, numba's start-up."""

ENABLED = os.environ.get("HETLB_FAST_START", "1").strip() not in ("", "0")

_plain_events = 0.0
_before_compiled: tuple[int, Callable[[], None]] | None = None


def before_compiled_run(notice: Callable[[], None] | None) -> None:
    """Call ``notice`` once, before the first run in this process that uses numba's kernels (none:
    never called; a worker process forked from this one does not call it); None: no notice."""
    global _before_compiled
    _before_compiled = None if notice is None else (os.getpid(), notice)


@contextmanager
def kernels_for(events: float) -> Iterator[bool]:
    """Run what is inside (a run of about ``events`` expected events) as plain Python when numba is
    not loaded and the process's plain events stay within PLAIN_PYTHON_EVENTS; gives whether it does."""
    global _plain_events, _before_compiled
    plain = ENABLED and not jit.DISABLED and not jit.numba_loaded() and _plain_events + events <= PLAIN_PYTHON_EVENTS
    if plain:
        _plain_events += events
    elif _before_compiled is not None:
        (pid, notice), _before_compiled = _before_compiled, None
        if pid == os.getpid():
            notice()
    with jit.plain_python(plain):
        yield plain
