"""Real processes for the live tests, on 127.0.0.1 only, always stopped at the end (also when the
test fails)."""

from __future__ import annotations

import contextlib

from hetlb.processes import ChildProcess, hetlb_command


@contextlib.contextmanager
def backend_process(*args: str, count: int = 1):
    """A ``hetlb backend ARGS`` child announcing ``count`` backends: (child, urls)."""
    child = ChildProcess("hetlb backend", hetlb_command("backend", *args))
    try:
        lines = child.read_lines(count)
        yield child, [line.split()[0] for line in lines]
    finally:
        child.stop()
