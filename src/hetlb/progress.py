"""Progress on standard error for long runs: a redrawn bar on a terminal, plain log lines elsewhere.

On a terminal :class:`ProgressBar` redraws one line, ``[#####     ]  45%  12.3M events  8.1M ev/s
eta 3s``, at most every 0.2 s. When standard error is a file or a pipe (a batch job, a CI log) it
writes instead one plain line every ``LOG_INTERVAL`` seconds, and a last line when it has written
any, so a log shows that a long run is alive without filling up with carriage returns.
"""

from __future__ import annotations

import sys
import time

BAR_INTERVAL = 0.2
"""Seconds between redraws of the bar on a terminal."""

LOG_INTERVAL = 5.0
"""Seconds between log lines when standard error is not a terminal."""


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
        self.last_draw = self.started if not self.live else 0.0
        self.drawn = False  # whether a bar is on screen (live) or a line was logged
        self.last = (0.0, 0, "")

    def update(self, fraction: float, events: int, force: bool = False, detail: str = "") -> None:
        if not self.enabled:
            return
        self.last = (fraction, events, detail)
        now = self.clock()
        if not force and now - self.last_draw < (BAR_INTERVAL if self.live else LOG_INTERVAL):
            return
        self.last_draw = now
        self._draw(now, fraction, events, detail)

    def _draw(self, now: float, fraction: float, events: int, detail: str) -> None:
        elapsed = now - self.started
        fraction = min(max(fraction, 0.0), 1.0)
        rate = events / max(elapsed, 1e-9)
        if self.live:
            eta = elapsed * (1.0 - fraction) / fraction if fraction > 0 else float("nan")
            bar = "#" * int(30 * fraction)
            self.stream.write(
                f"\r{self.label}[{bar:<30}] {100 * fraction:5.1f}% {detail} {events / 1e6:8.2f}M events  "
                f"{rate / 1e6:6.2f}M ev/s  eta {eta:6.1f}s "
            )
        else:
            left = f", about {elapsed * (1.0 - fraction) / fraction:.0f} s left" if 0 < fraction < 1 else ""
            detail = f", {detail}" if detail else ""
            self.stream.write(
                f"{self.label.strip() or 'progress'}: {100 * fraction:.1f}% done{detail}, {events / 1e6:.2f}M events "
                f"in {elapsed:.0f} s ({rate / 1e6:.2f}M events/s){left}\n"
            )
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
            self._draw(self.clock(), fraction if self.live else 1.0, events, detail)
            if self.live:
                self.stream.write("\n")
        self.stream.flush()


def needs_compiling(*dispatchers) -> bool:
    """Whether one of these numba functions (``@njit``) has no usable compiled code
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
