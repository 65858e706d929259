"""A request's job type, as ``hetlb serve`` and ``hetlb pick`` read it: the body's
``type_body_field`` (a JSON body's top-level field, ``model`` for OpenAI APIs), else the
``type_header``, else the longest configured path prefix, else ``default_type``.

The functions here see only the request's parts (its headers, path and body), so that a reverse
proxy and an ext_proc endpoint picker read types by the same rules; a request they cannot type is a
:class:`Refusal`, which each answers in its own protocol (an HTTP answer, an ImmediateResponse).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from hetlb.live.config import ServeConfig
from hetlb.live.dispatcher import Dispatcher


@dataclass(frozen=True)
class Refusal:
    """A request answered without a backend: its HTTP ``status``, the metric's ``reason``
    (hetlb.live.metrics.REJECTIONS), a one-line ``text`` and an OpenAI error ``code``."""

    status: int
    reason: str
    text: str
    code: str


def body_type(config: ServeConfig, body: bytes) -> str | None | Refusal:
    """The job type a JSON body names in its top-level ``type_body_field`` (None: no such field),
    or the 400 refusal of a body that is no JSON object or names no valid type."""
    field = config.type_body_field
    assert field is not None
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


def type_name(config: ServeConfig, header: str | None, path: str, from_body: str | None) -> str | None:
    """The job type's name: ``from_body``, else ``header`` (the type header's value), else the
    longest matching path prefix of ``path``, else the default type (None: no type)."""
    name = from_body if from_body is not None else header
    if name is None:
        name = next((kind for prefix, kind in config.type_prefixes if path.startswith(prefix)), None)
    return name if name is not None else config.default_type


def type_index(config: ServeConfig, dispatcher: Dispatcher, name: str | None) -> int | Refusal:
    """The dispatcher's index k of job type ``name``, or the refusal of a request without a type
    (400) or of a type no backend serves (404 for an OpenAI-compatible API, as OpenAI's own, else
    400). Every request of a fleet where no backend declares types is of type 0."""
    if not dispatcher.typed:
        return 0
    if name is None:
        where = f"the body's {config.type_body_field!r} field or " if config.type_body_field else ""
        return Refusal(400, "bad_type", f"no job type: give {where}the {config.type_header} header", "bad_type")
    k = dispatcher.type_index.get(name)
    if k is None:
        status = 404 if config.type_body_field else 400
        return Refusal(status, "unknown_type", f"no backend serves {name[:64]!r}", "model_not_found")
    return k
