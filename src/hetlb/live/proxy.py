"""The reverse proxy of one dispatcher: every request's job type, the policy's backend, the
forwarded call and its accounting (the messages off the request's path are hetlb.live.probing's).

Per request: the job type (the type header, else a configured path prefix, else the default type;
400 when missing or served by no backend), one decision (:meth:`Dispatcher.choose`), 503 with
Retry-After when the chosen backend holds its buffer or when every compatible backend is ejected,
then the call to the backend with the request's method, path, query, body and end-to-end headers.
The in-flight count is taken by a :class:`hetlb.live.dispatcher.Lease` and given back in a
``finally`` when the call ends, whatever way (response, 5xx, connection failure, timeout, the
client's disconnect, which cancels the handler and so the upstream call).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import random
import time

import aiohttp
from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

from hetlb.live.answers import AnswerWatch
from hetlb.live.config import ServeConfig
from hetlb.live.dispatcher import NO_BACKEND, Dispatcher
from hetlb.live.load_reports import ORCA_FORMAT, piggybacked_report
from hetlb.live.metrics import Metrics
from hetlb.live.probing import Prober
from hetlb.live.upstream import BackendClosed, UpstreamPool

HOP_BY_HOP = frozenset(
    name.lower()
    for name in (
        "Connection",
        "Keep-Alive",
        "Proxy-Authenticate",
        "Proxy-Authorization",
        "Proxy-Connection",
        "TE",
        "Trailer",
        "Trailers",
        "Transfer-Encoding",
        "Upgrade",
    )
)
"""Headers of one connection (RFC 9110 section 7.6.1), never forwarded; nor those named in Connection."""

IDEMPOTENT = frozenset(("GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"))
SOJOURN = "X-Sojourn-Ms"
SERVICE = "X-Service-Ms"
BACKEND = "X-Backend"
DEPARTURE = "X-Departure"
"""A backend's departure epoch for this request, seconds on the host's monotonic clock (hetlb
backend sends it): the dispatcher measures how late it learns a completion (its answer lag)."""
CHUNK = 64 * 1024
"""A request body of at most this many bytes with a Content-Length is read at once (so that a
retry can send it again); a longer one, or one without a length, streams to the backend."""
BODY_REASONS = frozenset(("bad_type", "unknown_type", "bad_body"))
"""Refusals about the body's type field (the OpenAI error's ``param``)."""


class BodyTooLarge(Exception):
    """A streamed request body passed max_body_bytes."""


class StreamedBody:
    """A request body as it arrives, for the upstream call: it raises BodyTooLarge past ``limit``
    bytes, and says so in ``too_large`` (the HTTP client reports the failure of a body as a
    failure of the connection)."""

    def __init__(self, content, limit: int):
        self.content = content
        self.limit = limit
        self.too_large = False

    async def __aiter__(self):
        total = 0
        async for chunk in self.content.iter_any():
            total += len(chunk)
            if total > self.limit:
                self.too_large = True
                raise BodyTooLarge
            yield chunk


def end_to_end(headers) -> CIMultiDict:
    """The headers without the hop-by-hop ones (and those the Connection header names)."""
    dropped = HOP_BY_HOP
    if "Connection" in headers:
        named = {token.strip().lower() for value in headers.getall("Connection") for token in value.split(",")}
        dropped = dropped | named
    return CIMultiDict([(k, v) for k, v in headers.items() if k.lower() not in dropped])


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
    try:
        departure = float(headers[DEPARTURE])
    except (KeyError, ValueError):
        return None, None
    try:
        forward = departure - float(headers[SOJOURN]) / 1e3 - decided
    except (KeyError, ValueError):
        forward = math.nan
    return within_a_minute(forward), within_a_minute(now - departure)


def within_a_minute(seconds: float) -> float | None:
    return seconds if 0.0 <= seconds < 60.0 else None


class Proxy:
    """One dispatcher's proxy: its state, its HTTP client and its background tasks."""

    def __init__(self, config: ServeConfig, dispatcher: Dispatcher, metrics: Metrics, index: int = 0):
        self.config = config
        self.dispatcher = dispatcher
        self.metrics = metrics
        self.index = index
        self.base = [URL(url.rstrip("/")) for url in dispatcher.urls]
        self.session: aiohttp.ClientSession | None = None
        self.prober: Prober | None = None
        self.active = 0
        self.started = time.monotonic()
        self.random = random.Random(config.seed)
        self.pools: dict[int, tuple[UpstreamPool, str]] = {}  # backend -> its connections, its path prefix

    # --- life ------------------------------------------------------------------------------------

    async def start(self) -> None:
        connector = aiohttp.TCPConnector(limit=0, enable_cleanup_closed=True)
        self.session = aiohttp.ClientSession(
            connector=connector,
            auto_decompress=False,
            skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"),
            cookie_jar=aiohttp.DummyCookieJar(),
        )
        self.prober = Prober(self.config, self.dispatcher, self.metrics, self.session, self.base)
        self.prober.start()

    async def stop(self) -> None:
        if self.prober is not None:
            await self.prober.stop()
        if self.session is not None:
            await self.session.close()
        for pool, _ in self.pools.values():
            pool.close()

    # --- requests --------------------------------------------------------------------------------

    def job_type(self, request: web.Request, body_type: str | None) -> int | web.Response:
        """The job type index of a request, or its 400 or 404 answer. The type is ``body_type``
        (the body's ``type_body_field``), else the type header, else the longest matching path
        prefix, else the default type."""
        dispatcher = self.dispatcher
        name = body_type if body_type is not None else request.headers.get(self.config.type_header)
        if name is None:
            path = request.rel_url.path
            name = next((kind for prefix, kind in self.config.type_prefixes if path.startswith(prefix)), None)
        if name is None:
            name = self.config.default_type
        if not dispatcher.typed:
            return 0  # no backend declares types: every request may go to every backend
        if name is None:
            where = f"the body's {self.config.type_body_field!r} field or " if self.config.type_body_field else ""
            return self.refusal(400, "bad_type", f"no job type: give {where}the {self.config.type_header} header")
        k = dispatcher.type_index.get(name)
        if k is None:  # an OpenAI-compatible API's unknown model is a 404, as OpenAI's own
            status = 404 if self.config.type_body_field else 400
            return self.refusal(status, "unknown_type", f"no backend serves {name[:64]!r}", "model_not_found")
        return k

    def refusal(self, status: int, reason: str, text: str, code: str | None = None) -> web.Response:
        """An answer of the proxy itself, counted under ``reason``: plain text, or with
        ``type_body_field`` (an OpenAI-compatible API) the OpenAI error object
        ``{"error": {"message", "type", "param", "code"}}``; a 503 says when to retry."""
        self.metrics.rejected(reason)
        headers = {"Retry-After": "1"} if status == 503 else None
        if self.config.type_body_field is None:
            return web.Response(status=status, text=text + "\n", headers=headers)
        error = {
            "message": text,
            "type": "invalid_request_error" if status < 500 else "server_error",
            "param": self.config.type_body_field if reason in BODY_REASONS else None,
            "code": code or reason,
        }
        return web.json_response({"error": error}, status=status, headers=headers)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        started = time.perf_counter()
        length = request.content_length
        if length is not None and length > self.config.max_body_bytes:
            return self.refusal(413, "too_large", f"a body of at most {self.config.max_body_bytes} bytes")
        body: bytes | None = None
        body_type: str | None = None
        if self.config.type_body_field is not None and self.dispatcher.typed and request.body_exists:
            body = await request.read()  # at most max_body_bytes (client_max_size), else 413
            named = self.body_type(body)
            if isinstance(named, web.Response):
                return named
            body_type = named
        elif request.body_exists and length is not None and length <= CHUNK:
            body = await request.read()  # small: read at once (and a retry can send it again)
        k = self.job_type(request, body_type)
        if isinstance(k, web.Response):
            return k
        if self.active >= self.config.max_in_flight:
            return self.refusal(503, "overload", "overloaded")
        self.active += 1
        try:
            return await self.forward(request, k, started, body)
        finally:
            self.active -= 1

    def body_type(self, body: bytes) -> str | None | web.Response:
        """The job type a JSON body names in its top-level ``type_body_field`` (None: no such
        field), or the 400 answer of a body that is no JSON object or names no valid type."""
        field = self.config.type_body_field
        assert field is not None
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            return self.refusal(400, "bad_body", "the body is not JSON", "invalid_json")
        if not isinstance(data, dict):
            return self.refusal(400, "bad_body", "the body is not a JSON object", "invalid_json")
        value = data.get(field)
        if value is None:
            return None
        if not isinstance(value, str) or not value:
            return self.refusal(400, "bad_body", f"{field} must be a non-empty string", "invalid_type")
        return value

    async def forward(self, request: web.Request, k: int, started: float, body: bytes | None) -> web.StreamResponse:
        dispatcher = self.dispatcher
        headers = end_to_end(request.headers)
        headers.popall("Host", None)
        headers.popall("Content-Length", None)
        headers.popall("Expect", None)  # a 100 Continue is the proxy's to send (it reads the body)
        forwarded_for = request.headers.get("X-Forwarded-For")
        peer = request.remote or ""
        headers["X-Forwarded-For"] = f"{forwarded_for}, {peer}" if forwarded_for else peer
        headers.setdefault("X-Forwarded-Host", request.host)
        headers.setdefault("X-Forwarded-Proto", request.scheme)
        if self.config.signals.piggyback:
            headers.setdefault(ORCA_FORMAT, "TEXT")  # an engine with ORCA reports (vLLM) then sends them
        streamed_body = body is None and request.body_exists
        retry = request.method in IDEMPOTENT and not streamed_body  # a streamed body is sent once
        attempts = 1 + (self.config.retries if retry else 0)
        relative = request.rel_url  # an absolute form in the request line never picks the backend
        query = relative.raw_query_string
        target = relative.raw_path + ("?" + query if query else "")  # path and query, encoded as sent
        tried: tuple[int, ...] = ()
        for attempt in range(attempts):
            decided = time.perf_counter()
            s = dispatcher.choose(k, tried)
            self.metrics.decision(time.perf_counter() - decided)
            if s == NO_BACKEND:
                return self.refusal(503, "no_backend", "no healthy backend")
            if dispatcher.is_full(s):
                dispatcher.blocked[s] += 1
                return web.Response(status=503, headers={"Retry-After": "1"}, text="backend full\n")
            untried = dispatcher.indptr[k + 1] - dispatcher.indptr[k] - len(tried)
            last = attempt == attempts - 1 or untried <= 1
            data = StreamedBody(request.content, self.config.max_body_bytes) if streamed_body else body
            response = await self.call(request, s, target, headers, data, started, last)
            if response is not None:
                return response
            tried += (s,)
        raise AssertionError("the last attempt always answers")

    async def call(self, request, s, target, headers, data, started, last) -> web.StreamResponse | None:
        """One call to backend s, its answer relayed as it arrives; None when it failed before
        answering and a retry is allowed. The request is in flight (its lease held) until the
        answer's last byte has been relayed, the backend failed, or the client went away."""
        dispatcher = self.dispatcher
        if self.config.signals.push and self.random.random() < self.config.p_hat:
            assert self.prober is not None
            self.prober.push()
        pool, prefix = self.upstream(s)
        response = None
        upstream = None
        watch = None
        lease = dispatcher.start(s)  # released in the finally below, with no await in between
        try:
            upstream = await pool.send(request.method, prefix + target, headers.items(), data)
            self.on_response(lease, upstream)
            if upstream.status >= 500 and not last:
                return None
            answer_headers = end_to_end(upstream.headers)
            answer_headers.popall("Content-Length", None)
            answer_headers[BACKEND] = dispatcher.urls[s]
            watch = AnswerWatch(upstream.content_type, bool(dispatcher.speed_auto[s]))
            whole = upstream.body_so_far() if request.method != "HEAD" else None
            if whole is not None:  # a short answer, arrived with its headers: written in one piece
                watch.passed(whole)
                self.answered(lease, upstream, watch, started)
                return web.Response(status=upstream.status, headers=answer_headers, body=whole)
            response = web.StreamResponse(status=upstream.status, headers=answer_headers)
            if upstream.content_length is not None:
                response.content_length = upstream.content_length
            try:
                await response.prepare(request)
                async for chunk in upstream.chunks():
                    watch.passed(chunk)
                    await response.write(chunk)
            except ConnectionError:  # the client went away: its answer is cut, the call with it
                self.metrics.aborted(s, "client_gone")
                return response
            self.answered(lease, upstream, watch, started)
            with contextlib.suppress(ConnectionError):
                await response.write_eof()
            return response
        except asyncio.CancelledError:  # the client went away (its handler is cancelled, the call with it)
            self.metrics.aborted(s, "client_gone")
            raise
        except TimeoutError:
            return self.upstream_failed(request, response, s, 504, "backend timed out", last)
        except (BackendClosed, OSError, BodyTooLarge) as error:
            if isinstance(data, StreamedBody) and data.too_large and response is None:
                return self.refusal(413, "too_large", f"a body of at most {self.config.max_body_bytes} bytes")
            return self.upstream_failed(request, response, s, 502, f"backend failed ({type(error).__name__})", last)
        finally:
            lease.release()
            if watch is not None:
                self.metrics.events[s] += watch.events  # relayed, also of an answer that was cut
            if upstream is not None:
                upstream.finish()  # kept alive after a whole answer, else closed (the backend's call ends)

    def upstream(self, s: int) -> tuple[UpstreamPool, str]:
        """The connections to backend s and the path prefix of its URL."""
        known = self.pools.get(s)
        if known is None:
            base = self.base[s]
            host = base.raw_host or ""
            host_header = host if base.explicit_port is None else f"{host}:{base.port}"
            pool = UpstreamPool(
                host, base.port or 80, host_header, self.config.connect_timeout, self.config.timeout,
                tls=base.scheme == "https",
            )  # fmt: skip
            known = self.pools[s] = (pool, base.raw_path.rstrip("/"))
        return known

    def upstream_failed(self, request, response, s: int, status: int, text: str, last: bool):
        """The backend failed: before its answer, a 502 or 504 (None when a retry may follow);
        during it, the client's connection is cut (its answer cannot be completed: no terminating
        chunk, or fewer bytes than its Content-Length) and the answer returned as it stands."""
        self.on_failure(s)
        if response is not None and response.prepared:
            self.metrics.aborted(s, "backend_broken")
            if request.transport is not None:
                request.transport.abort()
            return response
        if not last:
            return None
        return web.Response(status=status, text=text + "\n")

    def on_response(self, lease, upstream) -> None:
        """The headers of a backend's answer: its report, its service time, its health."""
        dispatcher = self.dispatcher
        s = lease.backend
        if self.config.signals.piggyback:
            report = piggybacked_report(upstream.headers)
            if report is not None:
                dispatcher.report(s, report[0], own_left=report[1])
        if upstream.status >= 500:
            self.on_failure(s)
            return
        dispatcher.succeeded(s)

    def answered(self, lease, upstream, watch: AnswerWatch, started: float) -> None:
        """The answer's last byte has been relayed: its in-flight count drops now, its times to
        first and last byte and its events are measured, and with speed=auto its service time is a
        sample of the backend's speed. The backend's epochs give how long the request took from the
        decision to the backend (forward delay) and from its departure to here (answer lag)."""
        lease.release()
        s = lease.backend
        dispatcher = self.dispatcher
        watch.finished()
        self.metrics.answered(s, started, watch)
        if dispatcher.speed_auto[s] and upstream.status < 500:
            seconds = service_time(upstream.headers, lease.found_empty, watch, started)
            if seconds is not None and dispatcher.observe_service(s, seconds):
                dispatcher.refresh()
        forward, answer = lags(upstream.headers, lease.started, time.monotonic())
        if forward is not None:
            self.metrics.forward_delay.observe(forward)
        if answer is not None:
            self.metrics.answer_lag.observe(answer)

    def on_failure(self, s: int) -> None:
        if self.dispatcher.failed(s):
            self.metrics.ejection(s)
