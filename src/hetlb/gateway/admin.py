"""A dispatcher's admin listener (docs/reference/serve.md), the same for ``hetlb serve`` and
``hetlb pick``: ``GET /metrics`` (Prometheus), ``GET /status`` (JSON), ``GET /ready``, and the
routes for the fleet:

- ``GET /backends``: the backends of the fleet, each with its spec, the types it serves now, its
  state (active or draining), its requests in flight and whether it is ejected;
- ``POST /backends`` with a backend's spec as JSON (the configuration's keys url, speed, types,
  buffer): 201 and the backend;
- ``DELETE /backends?url=URL``: drains it, 202 and its state at once; with ``&wait=1``, 200 once
  it has left the fleet (its last request ended, or ``drain`` seconds passed);
- ``PATCH /backends?url=URL`` with any of speed, types, buffer as JSON: 200 and the backend.

Every bad input gets a 4xx with one line of JSON, ``{"error": "FIELD: RULE", "field": FIELD}``
(400 a bad value, 404 a URL not in the fleet, 409 a URL already in it); the server keeps serving. A
change made here is passed to the other dispatchers (:attr:`hetlb.gateway.fleet.Fleet.relay`).
"""

from __future__ import annotations

import asyncio
import json

from aiohttp import web

from hetlb.errors import InputError
from hetlb.gateway.dispatcher import RETIRED
from hetlb.gateway.fleet import Fleet, FleetError
from hetlb.gateway.metrics import Metrics, status

WAIT_STEP_S = 0.01
"""How often ``DELETE ...&wait=1`` looks whether the backend has left the fleet."""


def admin_app(fleet: Fleet, metrics: Metrics, index: int, started: float) -> web.Application:
    """The admin application of dispatcher ``index`` (running since ``started``, monotonic seconds)."""
    dispatcher = fleet.dispatcher
    app = web.Application()

    async def metrics_page(request):
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return web.Response(body=generate_latest(metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def status_page(request):
        return web.json_response(status(dispatcher, metrics, index, started))

    async def ready_page(request):
        return web.Response(text="ready\n")

    app.router.add_get("/metrics", metrics_page)
    app.router.add_get("/status", status_page)
    app.router.add_get("/ready", ready_page)
    add_fleet_routes(app, fleet)
    return app


def add_fleet_routes(app: web.Application, fleet: Fleet) -> None:
    """The routes of /backends on ``app`` (an admin listener's application)."""

    async def listed(request: web.Request) -> web.Response:
        return web.json_response(fleet.entries())

    async def added(request: web.Request) -> web.Response:
        spec = await json_body(request)
        s = change(fleet, {"op": "add", "backend": spec})
        return web.json_response(fleet.entry(s), status=201)

    async def deleted(request: web.Request) -> web.Response:
        url = query_url(request)
        wait = request.query.get("wait", "0")
        if wait not in ("0", "1"):
            raise FleetError(400, "wait", f"must be 0 or 1, got {wait[:20]!r}")
        s = change(fleet, {"op": "drain", "url": url})
        if wait == "1":
            while fleet.dispatcher.state[s] != RETIRED:
                await asyncio.sleep(WAIT_STEP_S)
            return web.json_response(fleet.entry(s))
        return web.json_response(fleet.entry(s), status=202)

    async def patched(request: web.Request) -> web.Response:
        url = query_url(request)
        changes = await json_body(request)
        s = change(fleet, {"op": "patch", "url": url, "changes": changes})
        return web.json_response(fleet.entry(s))

    for method, handler in (("GET", listed), ("POST", added), ("DELETE", deleted), ("PATCH", patched)):
        app.router.add_route(method, "/backends", answering_errors(handler))


def change(fleet: Fleet, change: dict) -> int:
    """Make a change here (one log line), then relay it to the other dispatchers."""
    s = fleet.change(change)
    fleet.log(f"admin API: {change['op']} {fleet.dispatcher.urls[s]}")
    if fleet.relay is not None:
        fleet.relay(change)
    return s


def answering_errors(handler):
    """``handler`` with its InputError and FleetError answered as one line of JSON."""

    async def answer(request: web.Request) -> web.Response:
        try:
            return await handler(request)
        except InputError as error:
            return error_answer(400, error.field, error.rule)
        except FleetError as error:
            return error_answer(error.status, error.field, error.rule)

    return answer


def error_answer(status: int, field: str, rule: str) -> web.Response:
    return web.json_response({"error": f"{field}: {rule}", "field": field}, status=status)


async def json_body(request: web.Request) -> dict:
    """The request's body, a JSON object, or FleetError 400 naming ``body``."""
    try:
        data = json.loads(await request.read())
    except ValueError as error:
        raise FleetError(400, "body", f"must be a JSON object ({error})") from None
    except web.HTTPRequestEntityTooLarge:
        raise FleetError(413, "body", "too large for a backend's spec") from None
    if not isinstance(data, dict):
        raise FleetError(400, "body", f"must be a JSON object, got {type(data).__name__}")
    return data


def query_url(request: web.Request) -> str:
    url = request.query.get("url")
    if not url:
        raise FleetError(400, "url", "give the backend's URL as ?url=... (as GET /backends lists it)")
    return url
