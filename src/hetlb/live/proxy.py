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

import math
import random
import time

import aiohttp
from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

from hetlb.live.config import ServeConfig
from hetlb.live.dispatcher import NO_BACKEND, Dispatcher
from hetlb.live.load_reports import QUEUE_LENGTH, reported_number
from hetlb.live.metrics import Metrics
from hetlb.live.probing import Prober

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


def end_to_end(headers) -> CIMultiDict:
    """The headers without the hop-by-hop ones (and those the Connection header names)."""
    named = {token.strip().lower() for value in headers.getall("Connection", []) for token in value.split(",")}
    return CIMultiDict((k, v) for k, v in headers.items() if k.lower() not in HOP_BY_HOP and k.lower() not in named)


def service_time(headers, lease) -> float | None:
    """A request's service time in seconds (speed=auto), if it shows one: the backend's
    X-Service-Ms; else, for a request that found the backend empty, its X-Sojourn-Ms or the
    response time measured here; else None."""
    for name, needs_empty in ((SERVICE, False), (SOJOURN, True)):
        text = headers.get(name)
        if text is not None and (lease.found_empty or not needs_empty):
            try:
                return float(text) / 1000.0
            except ValueError:
                return None
    return time.monotonic() - lease.started if lease.found_empty else None


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
        self.timeout = aiohttp.ClientTimeout(total=config.timeout, connect=config.connect_timeout)

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

    # --- requests --------------------------------------------------------------------------------

    def job_type(self, request: web.Request) -> int | str:
        """The job type index of a request, or the text of a 400 answer."""
        dispatcher = self.dispatcher
        name = request.headers.get(self.config.type_header)
        if name is None:
            path = request.rel_url.path
            name = next((kind for prefix, kind in self.config.type_prefixes if path.startswith(prefix)), None)
        if name is None:
            name = self.config.default_type
        if not dispatcher.typed:
            return 0  # no backend declares types: every request may go to every backend
        if name is None:
            return f"no job type: give the {self.config.type_header} header"
        k = dispatcher.type_index.get(name)
        if k is None:
            return f"no backend serves job type {name[:64]!r}"
        return k

    async def handle(self, request: web.Request) -> web.StreamResponse:
        started = time.perf_counter()
        k = self.job_type(request)
        if isinstance(k, str):
            self.metrics.rejected("bad_type")
            return web.Response(status=400, text=k + "\n")
        if self.active >= self.config.max_in_flight:
            self.metrics.rejected("overload")
            return web.Response(status=503, headers={"Retry-After": "1"}, text="overloaded\n")
        self.active += 1
        try:
            return await self.forward(request, k, started)
        finally:
            self.active -= 1

    async def forward(self, request: web.Request, k: int, started: float) -> web.StreamResponse:
        dispatcher = self.dispatcher
        body = await request.read() if request.can_read_body else None
        headers = end_to_end(request.headers)
        headers.popall("Host", None)
        headers.popall("Content-Length", None)
        forwarded_for = request.headers.get("X-Forwarded-For")
        peer = request.remote or ""
        headers["X-Forwarded-For"] = f"{forwarded_for}, {peer}" if forwarded_for else peer
        headers.setdefault("X-Forwarded-Host", request.host)
        headers.setdefault("X-Forwarded-Proto", request.scheme)
        attempts = 1 + (self.config.retries if request.method in IDEMPOTENT else 0)
        target = request.rel_url
        tried: tuple[int, ...] = ()
        for attempt in range(attempts):
            decided = time.perf_counter()
            s = dispatcher.choose(k, tried)
            self.metrics.decision(time.perf_counter() - decided)
            if s == NO_BACKEND:
                self.metrics.rejected("no_backend")
                return web.Response(status=503, headers={"Retry-After": "1"}, text="no healthy backend\n")
            if dispatcher.is_full(s):
                dispatcher.blocked[s] += 1
                return web.Response(status=503, headers={"Retry-After": "1"}, text="backend full\n")
            untried = dispatcher.indptr[k + 1] - dispatcher.indptr[k] - len(tried)
            last = attempt == attempts - 1 or untried <= 1
            response = await self.call(request, s, target, headers, body, started, last)
            if response is not None:
                return response
            tried += (s,)
        raise AssertionError("the last attempt always answers")

    async def call(self, request, s, target, headers, body, started, last) -> web.StreamResponse | None:
        """One call to backend s; None when it failed and a retry is allowed."""
        dispatcher = self.dispatcher
        assert self.session is not None
        url = self.base[s].with_path(self.base[s].raw_path.rstrip("/") + target.raw_path, encoded=True)
        url = url.with_query(target.raw_query_string) if target.raw_query_string else url
        if self.config.signals.push and self.random.random() < self.config.p_hat:
            assert self.prober is not None
            self.prober.push()
        response = None
        lease = dispatcher.start(s)  # released in the finally below, with no await in between
        try:
            async with self.session.request(
                request.method, url, headers=headers, data=body, timeout=self.timeout,
                allow_redirects=False,
            ) as upstream:  # fmt: skip
                self.on_response(lease, upstream)
                if upstream.status >= 500 and not last:
                    return None
                # the backend's work on this request ends when its answer has been read in full
                # (at once for a small one): the count drops then, not after the client has it
                small = request.method == "HEAD" or (
                    upstream.content_length is not None and upstream.content_length <= CHUNK
                )
                payload = await upstream.read() if small and request.method != "HEAD" else b""
                if small:
                    self.release(lease, upstream)
                response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
                response.headers.extend(end_to_end(upstream.headers))
                response.headers.popall("Content-Length", None)
                response.headers[BACKEND] = dispatcher.urls[s]
                if upstream.content_length is not None:
                    response.content_length = upstream.content_length
                await response.prepare(request)
                if payload:
                    await response.write(payload)
                elif not small:  # a large or streamed answer, passed on as it comes
                    async for chunk in upstream.content.iter_chunked(CHUNK):
                        await response.write(chunk)
                    self.release(lease, upstream)
                await response.write_eof()
                self.metrics.latency(s, time.perf_counter() - started)
                return response
        except TimeoutError:
            if response is not None and response.prepared:
                raise  # the answer had begun: the client's connection is cut
            self.on_failure(s)
            return self.failure(504, s, "backend timed out", last)
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, OSError) as error:
            if response is not None and response.prepared:
                raise  # the answer had begun (or the client went away while it streamed)
            self.on_failure(s)
            return self.failure(502, s, f"backend unreachable ({type(error).__name__})", last)
        finally:
            lease.release()

    def failure(self, status: int, s: int, text: str, last: bool) -> web.Response | None:
        if not last:
            return None
        return web.Response(status=status, text=text + "\n")

    def on_response(self, lease, upstream) -> None:
        """The headers of a backend's answer: its report, its service time, its health."""
        dispatcher = self.dispatcher
        s = lease.backend
        if self.config.signals.piggyback:
            reported = reported_number(upstream.headers.get(QUEUE_LENGTH))
            if reported is not None:
                dispatcher.report(s, reported, own_left=1)
        if upstream.status >= 500:
            self.on_failure(s)
            return
        dispatcher.succeeded(s)
        if dispatcher.speed_auto[s]:
            seconds = service_time(upstream.headers, lease)
            if seconds is not None and dispatcher.observe_service(s, seconds):
                dispatcher.refresh()

    def release(self, lease, upstream) -> None:
        """The backend's answer has been read in full: its in-flight count drops now. The backend's
        epochs give how long the request took from the decision to the backend (forward delay) and
        from its departure to here (answer lag)."""
        lease.release()
        forward, answer = lags(upstream.headers, lease.started, time.monotonic())
        if forward is not None:
            self.metrics.forward_delay.observe(forward)
        if answer is not None:
            self.metrics.answer_lag.observe(answer)

    def on_failure(self, s: int) -> None:
        if self.dispatcher.failed(s):
            self.metrics.ejection(s)
