"""A request's job type k, the row of the compatibility graph its backends come from: from a JSON
body's field (``type_body_field``, the model of an OpenAI-compatible API), else the type header,
else the longest matching path prefix, else the default type; or the refusal that says why none.

One reading for every front of the dispatcher (``hetlb serve``'s proxy, ``hetlb pick``'s
external processor): the refusals are values (:class:`Refusal`), answered in each front's own way.
"""

from __future__ import annotations

import json
from typing import NamedTuple

from hetlb.gateway.config import ServeConfig
from hetlb.gateway.dispatcher import Dispatcher

BODY_REASONS = frozenset(("bad_type", "unknown_type", "bad_body"))
"""Refusals about the body's type field (the OpenAI error's ``param``)."""


class Refusal(NamedTuple):
    """An answer of the dispatcher itself: its HTTP ``status``, the ``reason`` it is counted under
    (hetlb_rejected_total), the message, and the OpenAI error ``code`` (default: the reason)."""

    status: int
    reason: str
    text: str
    code: str | None = None

    def answer(self, config: ServeConfig) -> tuple[list[tuple[str, str]], bytes]:
        """Its headers and body: plain text, or with ``type_body_field`` (an OpenAI-compatible API)
        the OpenAI error object ``{"error": {"message", "type", "param", "code"}}``; a 503 says when
        to retry."""
        headers = [("Retry-After", "1")] if self.status == 503 else []
        if config.type_body_field is None:
            headers.append(("Content-Type", "text/plain; charset=utf-8"))
            return headers, (self.text + "\n").encode()
        error = {
            "message": self.text,
            "type": "invalid_request_error" if self.status < 500 else "server_error",
            "param": config.type_body_field if self.reason in BODY_REASONS else None,
            "code": self.code or self.reason,
        }
        headers.append(("Content-Type", "application/json"))
        return headers, json.dumps({"error": error}).encode()


def body_type(field: str, body: bytes) -> str | None | Refusal:
    """The job type a JSON body names in its top-level ``field`` (None: no such field), or the 400
    of a body that is no JSON object or names no valid type."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return Refusal(400, "bad_body", "the body is not JSON", "invalid_json")
    if not isinstance(data, dict):
        return Refusal(400, "bad_body", "the body is not a JSON object", "invalid_json")
    value = data.get(field)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        return Refusal(400, "bad_body", f"{field} must be a non-empty string", "invalid_type")
    return value


def job_type(config: ServeConfig, dispatcher: Dispatcher, headers, path: str, named: str | None) -> int | Refusal:
    """The job type index of a request (``headers``: a case-insensitive mapping; ``named``: the
    body's type, :func:`body_type`), or its 400 or 404."""
    name = named if named is not None else headers.get(config.type_header)
    if name is None:
        name = next((kind for prefix, kind in config.type_prefixes if path.startswith(prefix)), None)
    if name is None:
        name = config.default_type
    if not dispatcher.typed:
        return 0  # no backend declares types: every request may go to every backend
    if name is None:
        where = f"the body's {config.type_body_field!r} field or " if config.type_body_field else ""
        return Refusal(400, "bad_type", f"no job type: give {where}the {config.type_header} header")
    k = dispatcher.type_index.get(name)
    if k is None:  # an OpenAI-compatible API's unknown model is a 404, as OpenAI's own
        status = 404 if config.type_body_field else 400
        return Refusal(status, "unknown_type", f"no backend serves {name[:64]!r}", "model_not_found")
    return k
