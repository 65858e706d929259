"""What backends report of their load, read from their answers: the number in system a backend
reports in its ``X-Queue-Length`` answer header (piggybacked) or in the JSON of ``GET /load``.

A report is an integer in [0, MAX_REPORT]; anything else is no report (ignored, never an error:
a backend's answer is passed on whatever its headers say).
"""

from __future__ import annotations

QUEUE_LENGTH = "X-Queue-Length"
MAX_REPORT = 10**9


def reported_number(text: str | None) -> int | None:
    """A number in system from a header or a /load answer: an integer in [0, 10^9], else None."""
    if text is None:
        return None
    try:
        value = int(text)
    except (TypeError, ValueError):
        return None
    return value if 0 <= value <= MAX_REPORT else None
