"""What the proxy learns from a backend's answer while it relays it, byte for byte: when its first
and last bytes passed, how many server-sent events it carried, and, for an inference engine's
answer, how many output tokens it produced (for ``speed=auto`` in tokens per second).

An event of a ``text/event-stream`` body ends with a blank line (``\\n\\n``, or ``\\r\\n\\r\\n``);
the count runs over the chunks as they pass, terminators split across two chunks included. The
output tokens are the ``completion_tokens`` of an OpenAI ``usage`` object: in the last event that
carries one (a stream asked with ``stream_options: {"include_usage": true}``), or in the JSON of an
answer that is not streamed. Nothing is parsed unless ``speed=auto`` asks for tokens: the relay
only counts bytes and terminators.
"""

from __future__ import annotations

import json
import math
import re
import time

from hetlb.wire.load_reports import DEPARTURE, EVENT_STREAM, SERVICE, SOJOURN

TERMINATORS = (b"\n\n", b"\r\n\r\n")
TAIL = 3
"""Bytes of a chunk's end kept to find a terminator split across two chunks."""
USAGE = re.compile(rb'"completion_tokens"\s*:\s*([0-9]{1,9})')
MAX_PARSED_ANSWER = 64 * 1024
"""The largest non-streamed answer whose JSON is read for its usage (bytes)."""


def count_terminators(data: bytes) -> int:
    return sum(data.count(terminator) for terminator in TERMINATORS)


class AnswerWatch:
    """One answer as it passes, from its headers (``opened``) to its end: ``first_byte`` and
    ``last_byte`` of its body (perf_counter epochs; None before),
    ``events`` (server-sent events, for an event stream), ``tokens`` (its usage's
    completion_tokens, when ``tokens`` was asked for and the answer showed them; else None)."""

    __slots__ = ("stream", "want_tokens", "opened", "first_byte", "last_byte", "events", "tokens", "_tail", "_kept")

    def __init__(self, content_type: str, want_tokens: bool):
        self.stream = content_type.startswith(EVENT_STREAM)
        self.want_tokens = want_tokens
        self.opened = time.perf_counter()
        self.first_byte: float | None = None
        self.last_byte: float | None = None
        self.events = 0
        self.tokens: int | None = None
        self._tail = b""
        self._kept = bytearray() if want_tokens and not self.stream else None

    def passed(self, chunk: bytes) -> None:
        """A chunk of the body was relayed."""
        now = time.perf_counter()
        if self.first_byte is None:
            self.first_byte = now
        self.last_byte = now
        if self.stream:
            joined = self._tail + chunk
            self.events += count_terminators(joined) - count_terminators(self._tail)
            self._tail = joined[-TAIL:]
            if self.want_tokens and b"usage" in chunk:
                found = USAGE.findall(chunk)
                if found:
                    self.tokens = int(found[-1])
        elif self._kept is not None:
            if len(self._kept) + len(chunk) <= MAX_PARSED_ANSWER:
                self._kept += chunk
            else:
                self._kept = None

    def finished(self) -> None:
        """The body has been relayed in full: read a non-streamed answer's usage."""
        if self._kept is None or self.stream:
            return
        try:
            usage = json.loads(self._kept).get("usage")
            tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
        except (ValueError, AttributeError, UnicodeDecodeError):
            tokens = None
        if isinstance(tokens, int) and 0 < tokens <= 10**9:
            self.tokens = tokens
        self._kept = None

    def seconds_per_token(self, sent: float) -> float | None:
        """Seconds per output token, for speed=auto: a stream's gap from its first to its last byte
        over tokens - 1 (the first token's prefill left out); a whole answer's time since ``sent``
        (perf_counter) over its tokens; None without tokens."""
        if self.tokens is None or self.last_byte is None:
            return None
        if self.stream:
            if self.tokens < 2 or self.first_byte is None:
                return None
            return (self.last_byte - self.first_byte) / (self.tokens - 1)
        return (self.last_byte - sent) / self.tokens


def service_time(headers, found_empty: bool, watch: AnswerWatch, started: float) -> float | None:
    """A request's service time in seconds (speed=auto), if its answer shows one: the backend's
    X-Service-Ms; else, for a request that found the backend empty, its X-Sojourn-Ms, else an
    inference answer's seconds per output token (:meth:`AnswerWatch.seconds_per_token`), else the
    time from its arrival (``started``, perf_counter) to the answer's headers; else None."""
    for name, needs_empty in ((SERVICE, False), (SOJOURN, True)):
        text = headers.get(name)
        if text is not None and (found_empty or not needs_empty):
            try:
                return float(text) / 1000.0
            except ValueError:
                return None
    if not found_empty:
        return None
    per_token = watch.seconds_per_token(started)
    return per_token if per_token is not None else watch.opened - started


def lags(headers, decided: float, now: float) -> tuple[float | None, float | None]:
    """A request's forward delay (the dispatcher's decision at ``decided`` to its arrival at the
    backend, X-Departure minus X-Sojourn-Ms) and answer lag (X-Departure to ``now``), in seconds on
    the host's monotonic clock; each None unless the headers give it within the last minute."""
    departure_text = headers.get(DEPARTURE)
    if departure_text is None:  # (most backends: no exception raised per request)
        return None, None
    try:
        departure = float(departure_text)
    except ValueError:
        return None, None
    try:
        forward = departure - float(headers[SOJOURN]) / 1e3 - decided
    except (KeyError, ValueError):
        forward = math.nan
    return within_a_minute(forward), within_a_minute(now - departure)


def within_a_minute(seconds: float) -> float | None:
    return seconds if 0.0 <= seconds < 60.0 else None
