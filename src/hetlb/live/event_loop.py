"""The event loop of hetlb's live processes: uvloop's when it is installed (the ``serve`` extra),
else asyncio's."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """For ``asyncio.Runner(loop_factory=...)``: uvloop's new_event_loop, or None (asyncio's)."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop
