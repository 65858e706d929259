"""What backends report of their load and timing (the names of the headers and metrics they use), and
the reading of it from their answers: the number in system a backend
reports in its ``X-Queue-Length`` answer header or an ORCA ``endpoint-load-metrics`` header
(piggybacked), in the JSON of ``GET /load``, or in an inference engine's Prometheus metrics
(running + waiting requests, scraped).

A report is an integer in [0, MAX_REPORT]; anything else is no report (ignored, never an error:
a backend's answer is passed on whatever its headers say; a scrape that gives none is counted as
malformed by hetlb.gateway.probing).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass

QUEUE_LENGTH = "X-Queue-Length"
"""A backend's number in system after this request, on its answer (hetlb backend sends it)."""
SOJOURN = "X-Sojourn-Ms"
"""The request's time in the backend, arrival to departure, in ms (the model's sojourn)."""
SERVICE = "X-Service-Ms"
"""The request's drawn service time at the backend, in ms."""
DEPARTURE = "X-Departure"
"""A backend's departure epoch for this request, seconds on the host's monotonic clock (hetlb
backend sends it): the dispatcher measures how late it learns a completion (its answer lag)."""
EVENT_STREAM = "text/event-stream"
"""The media type of a streamed answer (server-sent events, one per output token)."""
ORCA_LOAD = "endpoint-load-metrics"
"""The ORCA load report on an answer: ``TEXT k=v, named_metrics.x=v`` or ``JSON {...}``."""
ORCA_FORMAT = "endpoint-load-metrics-format"
"""The request header that asks an engine (vLLM) for ORCA load reports in that format."""
ORCA_RUNNING, ORCA_WAITING = "num_requests_running", "num_requests_waiting"
"""The ORCA named metrics whose sum is a backend's number in system (both required)."""
MAX_REPORT = 10**9
MAX_SCRAPE_BYTES = 8 * 2**20
"""The largest metrics answer read; a longer one is malformed (a real vLLM answer is ~100 KB)."""


@dataclass(frozen=True)
class EngineMetrics:
    """Where an inference engine reports its load: the ``path`` of its Prometheus text and the
    gauges of its ``running`` and ``waiting`` requests (their sum is its number in system)."""

    path: str
    running: str
    waiting: str


ENGINE_METRICS = {
    "vllm": EngineMetrics("/metrics", "vllm:num_requests_running", "vllm:num_requests_waiting"),
    "sglang": EngineMetrics("/metrics", "sglang:num_running_reqs", "sglang:num_queue_reqs"),
}
"""The engines' metric names (docs/reference/serve.md); ``[engine_metrics.NAME]`` adds others."""

METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
SAMPLE_REST = re.compile(
    rb'(?:\{[ \t]*(?:[a-zA-Z_][a-zA-Z0-9_]*[ \t]*=[ \t]*"(?:[^"\\\n]|\\.)*"[ \t]*(?:,[ \t]*)?)*\})?'
    rb"[ \t]+([^ \t\r\n]+)(?:[ \t]+-?[0-9]+)?[ \t]*\r?"
)
"""What follows a sample's name: optional labels, the value, an optional timestamp (ms)."""
BLANKS = b" \t"
NEWLINE = ord("\n")


def reported_number(text) -> int | None:
    """A number in system from a header or a /load answer: an integer in [0, 10^9], else None."""
    if text is None:
        return None
    try:
        value = int(text)
    except (TypeError, ValueError):
        return None
    return value if 0 <= value <= MAX_REPORT else None


def count_of(value: float) -> int | None:
    """A reported count as a number of requests: finite, >= 0 and whole (a gauge is a float)."""
    if not (math.isfinite(value) and value >= 0 and value == int(value)):
        return None
    return reported_number(int(value))


def engine_load(text: bytes, engine: EngineMetrics) -> int | None:
    """running + waiting from an engine's Prometheus text, each summed over its label sets (one
    series per model an engine serves); None (no report) when either gauge is missing, a line of
    theirs is malformed, a value is not a whole number >= 0 (NaN included) or the sum exceeds
    MAX_REPORT. Only the lines of the two gauges are parsed."""
    total = 0
    for name in (engine.running, engine.waiting):
        found = False
        for rest in sample_lines(text, name.encode()):
            sample = SAMPLE_REST.fullmatch(rest)
            if sample is None:
                return None
            try:
                count = count_of(float(sample[1]))
            except ValueError:
                return None
            if count is None:
                return None
            total += count
            found = True
        if not found:
            return None
    return reported_number(total)


def sample_lines(text: bytes, name: bytes) -> Iterator[bytes]:
    """What follows ``name`` on each line of ``text`` that starts with it (blanks before it
    allowed) and goes on with labels or a blank: the samples of that metric, found by a byte
    search, not by reading every line (comments and other metrics are never parsed)."""
    at = text.find(name)
    while at >= 0:
        end = at + len(name)
        start = at
        while start > 0 and text[start - 1] in BLANKS:  # the blanks just before: linear over the text
            start -= 1
        if (start == 0 or text[start - 1] == NEWLINE) and text[end : end + 1] in (b"{", b" ", b"\t"):
            line_end = text.find(b"\n", end)
            yield text[end : line_end if line_end >= 0 else len(text)]
        at = text.find(name, end)


def orca_load(header: str) -> int | None:
    """running + waiting from an ORCA ``endpoint-load-metrics`` header: ``TEXT a=1,
    named_metrics.num_requests_running=2, named_metrics.num_requests_waiting=3``, ``JSON
    {"named_metrics": {...}}`` or ``BIN <base64 xds.data.orca.v3.OrcaLoadReport>`` (read when
    xds-protos is installed, the [pick] extra); None when either named metric is missing or the
    header is not one of these formats."""
    kind, _, body = header.strip().partition(" ")
    named: dict = {}
    if kind.upper() == "BIN":
        named = orca_binary_metrics(body) or {}
    elif kind.upper() == "TEXT":
        for pair in body.split(","):
            key, equals, value = pair.strip().partition("=")
            if equals and key.startswith("named_metrics."):
                named[key.removeprefix("named_metrics.")] = value.strip()
    elif kind.upper() == "JSON":
        try:
            report = json.loads(body)
        except ValueError:
            return None
        metrics = report.get("named_metrics") if isinstance(report, dict) else None
        named = metrics if isinstance(metrics, dict) else {}
    try:
        running, waiting = (count_of(float(named[key])) for key in (ORCA_RUNNING, ORCA_WAITING))
    except (KeyError, TypeError, ValueError):
        return None
    return None if running is None or waiting is None else reported_number(running + waiting)


def orca_binary_metrics(body: str) -> dict | None:
    """The named metrics of a base64 OrcaLoadReport (xds.data.orca.v3), None when it is not one or
    xds-protos is not installed."""
    try:
        from google.protobuf.message import DecodeError
        from xds.data.orca.v3.orca_load_report_pb2 import OrcaLoadReport
    except ImportError:
        return None
    report = OrcaLoadReport()
    try:
        report.ParseFromString(base64.b64decode(body.strip(), validate=True))
    except (binascii.Error, ValueError, DecodeError):
        return None
    return dict(report.named_metrics)


def piggybacked_report(headers) -> tuple[int, int] | None:
    """(number in system, own_left) from an answer's headers, or None: ``X-Queue-Length`` first,
    the number after this request left (own_left 1); else an ORCA header, read when the answer's
    headers are: an event stream's request is still in the engine then (own_left 0), a whole
    answer's has left (own_left 1)."""
    reported = reported_number(headers.get(QUEUE_LENGTH))
    if reported is not None:
        return reported, 1
    orca = headers.get(ORCA_LOAD)
    if orca is None:
        return None
    reported = orca_load(orca)
    if reported is None:
        return None
    streamed = headers.get("Content-Type", "").startswith(EVENT_STREAM)
    return reported, 0 if streamed else 1
