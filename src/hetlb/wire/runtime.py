"""How hetlb's live processes run: their event loop, their heap once they are ready, and a clock
that wakes them on time (a backend's departures, a load generator's sends)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import heapq
import itertools
import sys
import threading
import time
from collections.abc import Callable, Iterator


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """For ``asyncio.Runner(loop_factory=...)``: uvloop's new_event_loop when it is installed (the
    ``serve`` extra), else None (asyncio's)."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def freeze_heap() -> None:
    """Take every object alive now out of the garbage collector's view (``gc.freeze``), once a live
    process has imported and compiled what it needs. A full collection would otherwise walk all of
    them (numba's objects, in a process that compiled a rule) in the middle of the requests: a
    pause of about 70 ms on the machine of docs/background/live-comparisons.md, every few thousand
    requests, which delays every answer and every send of that moment."""
    gc.collect()
    gc.freeze()


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """:func:`freeze_heap` for the time of a ``with`` block (a load generator's run)."""
    freeze_heap()
    try:
        yield
    finally:
        gc.unfreeze()


GIL_SWITCH_INTERVAL_S = 2e-4
"""How long the event loop's thread may keep the interpreter when the clock's thread has woken
(Python's default is 5 ms, which would make the clock that late whenever the loop is busy)."""


class EpochClock:
    """Wakes futures of an event loop at epochs of the host's monotonic clock (``time.monotonic``),
    within a fraction of a millisecond: a thread waits on a condition (a timed wait of microsecond
    resolution) until the earliest epoch, then hands the futures due to the loop. asyncio's own
    timers wake up to a millisecond late (epoll waits in whole milliseconds, rounded up). Start it
    on the loop's thread (it sets the process's switch interval to GIL_SWITCH_INTERVAL_S);
    :meth:`stop` ends the thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.due: list[tuple[float, int, asyncio.Future]] = []  # a heap of (epoch, order, future)
        self.order = itertools.count()
        self.condition = threading.Condition()
        self.stopped = False
        sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
        self.thread = threading.Thread(target=self.run, name="hetlb-epoch-clock", daemon=True)
        self.thread.start()

    def wake_at(self, epoch: float, future: asyncio.Future) -> None:
        """Set ``future``'s result (None) at ``epoch``, unless it is done by then (cancelled)."""
        with self.condition:
            heapq.heappush(self.due, (epoch, next(self.order), future))
            if self.due[0][2] is future:
                self.condition.notify()

    async def sleep_until(self, epoch: float) -> None:
        """Return at ``epoch`` (at once if it has passed)."""
        future = self.loop.create_future()
        self.wake_at(epoch, future)
        await future

    def run(self) -> None:
        with self.condition:
            while not self.stopped:
                wait = self.due[0][0] - time.monotonic() if self.due else None
                if wait is None or wait > 0:
                    self.condition.wait(wait)
                    continue
                now = time.monotonic()
                ready = []
                while self.due and self.due[0][0] <= now:
                    ready.append(heapq.heappop(self.due)[2])
                self.loop.call_soon_threadsafe(wake, ready)

    def stop(self) -> None:
        with self.condition:
            self.stopped = True
            self.condition.notify()
        self.thread.join()


def wake(futures: list[asyncio.Future]) -> None:
    for future in futures:
        if not future.done():
            future.set_result(None)


class WriteFlowControl:
    """The write side of an asyncio protocol's flow control: once the transport's buffer is over its
    high mark, :meth:`drain` waits until it is below its low mark again. A protocol sets
    ``self.loop`` and ``self.drained = None``."""

    loop: asyncio.AbstractEventLoop
    drained: asyncio.Future | None

    def pause_writing(self) -> None:
        self.drained = self.loop.create_future()

    def resume_writing(self) -> None:
        if self.drained is not None and not self.drained.done():
            self.drained.set_result(None)
        self.drained = None

    async def drain(self) -> None:
        if self.drained is not None:
            await self.drained
