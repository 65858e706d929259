"""Progress on standard error for long runs: a redrawn bar on a terminal, plain log lines elsewhere.

On a terminal :class:`ProgressBar` redraws one line, ``[#####     ]  45%  12.3M events  8.1M ev/s
eta 3s``, at most every 0.2 s. When standard error is a file or a pipe (a batch job, a CI log) it
writes instead one plain line every ``LOG_INTERVAL`` seconds, and a last line when it has written
any, so a log shows that a long run is alive without filling up with carriage returns. The
interval runs over the bars of a process on standard error, so that a task of many short steps
(the sweeps of a reproduction) still logs a line every ``LOG_INTERVAL`` seconds, each from the step
then running.

The estimate of time left is the rate since the first piece of work was done, applied to what is
left: (now - t_1) x (1 - f) / (f - f_1), where f_1 is the share done at t_1, the first update
with some work done (elapsed x (1 - f) / f until a second one). The first piece holds the
start-up (a compile, the first imports), which the rest does not pay again. The estimate is within
a factor of 3 once a tenth is done when the fraction done is a share of the work (not of a time
budget) and the work's pieces cost alike. :func:`working` covers a wait whose share done is not known (a solve, a compile), or
known only now and then: from START_AFTER seconds on it shows the time elapsed, from a thread.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

BAR_INTERVAL = 0.2
"""Seconds between redraws of the bar on a terminal."""

LOG_INTERVAL = 5.0
"""Seconds between log lines when standard error is not a terminal."""

START_AFTER = 2.0
"""Seconds of a wait (:func:`working`) before its progress shows."""

_last_logged: dict[str, float] = {}
"""When a bar last wrote a log line on standard error (read with ``time.perf_counter``)."""


def is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class ProgressBar:
    """Progress of one long task: ``update(fraction_done, events)`` as it goes, ``close()`` at the end.

    ``live``: redraw a bar (default: whether ``stream`` is a terminal) or write log lines every
    ``LOG_INTERVAL`` seconds. ``clock`` gives the time in seconds (for tests).
    """

    def __init__(self, label: str = "", stream=None, enabled: bool = True, live: bool | None = None, clock=None):
        self.label = label
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.live = is_terminal(self.stream) if live is None else live
        self.clock = clock or time.perf_counter
        self.started = self.clock()
        self.shared = self.stream is sys.stderr and clock is None  # the log interval runs over the process's bars
        if self.shared and enabled:
            _last_logged.setdefault("stderr", self.started)  # from the first bar's start
        self.last_draw = 0.0 if self.live else _last_logged.get("stderr", self.started) if self.shared else self.started
        self.drawn = False  # whether a bar is on screen (live) or a line was logged
        self.last: tuple = (0.0, 0, "")
        self.first_done: tuple[float, float] | None = None  # (time, fraction) of the first update with work done
        self.lock = threading.Lock()  # updates may come from a thread (working)

    def time_left(self, now: float, fraction: float) -> float:
        """Seconds left at ``fraction`` done: the rate since the first piece done (module docstring)."""
        if fraction <= 0:
            return float("nan")
        if self.first_done is not None and fraction > self.first_done[1]:
            since, done = self.first_done
            return (now - since) * (1.0 - fraction) / (fraction - done)
        return (now - self.started) * (1.0 - fraction) / fraction

    def update(self, fraction: float | None, events: int | None, force: bool = False, detail: str = "") -> None:
        """``fraction``: the share done (None: not known, the time elapsed is shown); ``events``:
        events simulated so far (None: no events)."""
        if not self.enabled:
            return
        with self.lock:
            self.last = (fraction, events, detail)
            now = self.clock()
            if self.first_done is None and fraction is not None and fraction > 0:
                self.first_done = (now, fraction)
            if self.shared and not self.live:
                self.last_draw = _last_logged.get("stderr", self.started)
            if not force and now - self.last_draw < (BAR_INTERVAL if self.live else LOG_INTERVAL):
                return
            self.last_draw = now
            if self.shared and not self.live:
                _last_logged["stderr"] = now
            self._draw(now, fraction, events, detail)

    def _draw(self, now: float, fraction: float | None, events: int | None, detail: str) -> None:
        elapsed = now - self.started
        if fraction is None or events is None:
            self._draw_wait(now, fraction, detail)
            return
        fraction = min(max(fraction, 0.0), 1.0)
        rate = events / max(elapsed, 1e-9)
        if self.live:
            eta = self.time_left(now, fraction)
            bar = "#" * int(30 * fraction)
            self.stream.write(
                f"\r{self.label}[{bar:<30}] {100 * fraction:5.1f}% {detail} {events / 1e6:8.2f}M events  "
                f"{rate / 1e6:6.2f}M ev/s  eta {eta:6.1f}s "
            )
        else:
            left = f", about {self.time_left(now, fraction):.0f} s left" if 0 < fraction < 1 else ""
            detail = f", {detail}" if detail else ""
            self.stream.write(
                f"{self.label.strip() or 'progress'}: {100 * fraction:.1f}% done{detail}, {events / 1e6:.2f}M events "
                f"in {elapsed:.0f} s ({rate / 1e6:.2f}M events/s){left}\n"
            )
        self.drawn = True
        self.stream.flush()

    def _draw_wait(self, now: float, fraction: float | None, detail: str) -> None:
        """A line without events: the share done when known (with the time left), else the time elapsed."""
        elapsed = now - self.started
        parts = [f"{100 * min(max(fraction, 0.0), 1.0):.1f}% done"] if fraction is not None else []
        parts += [detail] if detail else []
        parts.append(f"{elapsed:.0f} s")
        if fraction is not None and 0 < fraction < 1:
            parts.append(f"about {self.time_left(now, fraction):.0f} s left")
        text = ", ".join(parts)
        if self.live:
            self.stream.write(f"\r\033[K{self.label}{text} ")
        else:
            self.stream.write(f"{self.label.strip() or 'progress'}: {text}\n")
        self.drawn = True
        self.stream.flush()

    def message(self, text: str) -> None:
        """Write ``text`` as a line of its own (above the bar on a terminal)."""
        if not self.enabled:
            return
        if self.live and self.drawn:
            self.stream.write("\r\033[K")
        self.stream.write(text + "\n")
        if self.live and self.drawn:
            self._draw(self.clock(), *self.last)
        self.stream.flush()

    def close(self) -> None:
        """End the bar (a second call does nothing)."""
        if not self.enabled:
            return
        self.enabled = False
        if self.drawn:  # the bar ends at its last state; a log that showed progress also shows the end
            fraction, events, detail = self.last
            done = fraction if self.live or fraction is None else 1.0
            with self.lock:
                now = self.clock()
                if self.shared and not self.live:
                    _last_logged["stderr"] = now
                self._draw(now, done, events, detail if fraction is not None or self.live else "done")
            if self.live:
                self.stream.write("\n")
        self.stream.flush()


@contextmanager
def working(
    label: str,
    enabled: bool = True,
    stream=None,
    clock=None,
    start_after: float = START_AFTER,
    live: bool | None = None,
) -> Iterator:
    """Progress of a wait whose share done is not known, or known only now and then: a thread
    shows the time elapsed (and the last ``update`` given, if any) from ``start_after`` seconds on,
    as a bar on a terminal and a log line every LOG_INTERVAL seconds elsewhere; nothing when the
    wait ends sooner. Gives the :class:`ProgressBar`, whose ``update(fraction, None, detail=...)``
    the waiting code may call. ``live=False``: log lines on a terminal too (beside other output)."""
    bar = ProgressBar(label, stream=stream, enabled=enabled, clock=clock, live=live)
    bar.last = (None, None, "")
    stop = threading.Event()

    def beat() -> None:
        if stop.wait(start_after):
            return
        force = True  # the first line now
        while True:
            fraction, events, detail = bar.last
            bar.update(fraction, events, force=force, detail=detail)
            force = False
            if stop.wait(BAR_INTERVAL if bar.live else 1.0):
                return

    thread = threading.Thread(target=beat, name=f"progress {label.strip()}", daemon=True)
    if enabled:
        thread.start()
    try:
        yield bar
    finally:
        stop.set()
        if enabled:
            thread.join()
        bar.close()


def needs_compiling(*dispatchers) -> bool:
    """Whether one of these numba functions (hetlb.jit) has no usable compiled code
    in its cache, so that its first call compiles it (seconds, not milliseconds).

    It reads each function's cache index, which numba empties when the source file changed; an
    index with entries for another CPU or other argument types is counted as usable, so the answer
    can be a false "no". It reads numba's private cache objects: if they are not there (another
    numba version), the answer is "no".
    """
    for dispatcher in dispatchers:
        try:
            index = dispatcher._cache._cache_file._load_index()
        except Exception:  # private numba API: no notice rather than a failure
            continue
        if not index:
            return True
    return False
