"""A one-line progress bar on standard error for long runs."""

from __future__ import annotations

import sys
import time


class ProgressBar:
    """Redraws ``[#####     ]  45%  12.3M events  8.1M ev/s  eta 3s`` at most every 0.2 s."""

    def __init__(self, label: str = "", stream=None, enabled: bool = True):
        self.label = label
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.started = time.perf_counter()
        self.last_draw = 0.0

    def update(self, fraction: float, events: int, force: bool = False, detail: str = "") -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if not force and now - self.last_draw < 0.2:
            return
        self.last_draw = now
        elapsed = now - self.started
        fraction = min(max(fraction, 0.0), 1.0)
        eta = elapsed * (1.0 - fraction) / fraction if fraction > 0 else float("nan")
        bar = "#" * int(30 * fraction)
        self.stream.write(
            f"\r{self.label}[{bar:<30}] {100 * fraction:5.1f}% {detail} {events / 1e6:8.2f}M events  "
            f"{events / max(elapsed, 1e-9) / 1e6:6.2f}M ev/s  eta {eta:6.1f}s "
        )
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()
