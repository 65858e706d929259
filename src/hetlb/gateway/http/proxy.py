"""The reverse proxy of one dispatcher: every request's job type, the policy's backend, the
forwarded call and its accounting (the messages off the request's path are hetlb.gateway.probing's).

Per request (as :mod:`hetlb.gateway.http.downstream` hands it over): its path with the dot segments
removed (400 when it climbs above the root), the job type (:mod:`hetlb.gateway.job_types`), one
decision (:meth:`Dispatcher.choose`), 503 with Retry-After when the chosen backend holds its buffer
or when every compatible backend is ejected, then the call to the backend with the request's
method, path, query, body and end-to-end headers, and the proxy's own X-Forwarded-* headers. The
in-flight count is taken by a :class:`hetlb.gateway.dispatcher.Lease` and given back in a ``finally``
when the call ends, whatever way (response, 5xx, connection failure, timeout, the client's
disconnect, which cancels the request's task and so the upstream call). A backend's failure that
its answer shows (5xx, refused or reset connection, timeout, an answer cut short or malformed, more
bytes than it announced) counts towards its ejection; only a complete answer counts as a success.

Two ways, one set of rules: a request with a body, or whose backend has no idle connection, is a
task of coroutines (:meth:`Proxy.handle`); a request without a body is sent from the parser's
callback and its answer, when it arrives whole, relayed from the answer's (:meth:`Proxy.answer_now`,
:class:`Exchange`): no task and no future, a tenth of the proxy's work per request. Every other turn
(an answer that streams, a failure, a retry, the client's going away) takes the task's way from
where the exchange stands, with the same lease.
"""

from __future__ import annotations

import asyncio
import random
import sys
import time

from yarl import URL

from hetlb.gateway.answers import AnswerWatch, lags, service_time
from hetlb.gateway.config import ServeConfig
from hetlb.gateway.dispatcher import NO_BACKEND, Dispatcher, Lease
from hetlb.gateway.http.downstream import (
    BodyMalformed,
    BodyTimeout,
    BodyTooLarge,
    ClientGone,
    Request,
    RequestRefused,
    http_date,
)
from hetlb.gateway.http.header_lines import HOP_BY_HOP, encoded, relayed
from hetlb.gateway.http.upstream import Answer, BackendClosed, ProtocolViolation, UpstreamPool
from hetlb.gateway.job_types import Refusal, body_type, job_type
from hetlb.gateway.metrics import Metrics
from hetlb.gateway.probing import Prober
from hetlb.wire.load_reports import ORCA_FORMAT, piggybacked_report

IDEMPOTENT = frozenset(("GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"))
BACKEND = "X-Backend"
CHUNK = 64 * 1024
"""A request body of at most this many bytes with a Content-Length is read at once (so that a
retry can send it again); a longer one, or one without a length, streams to the backend."""
FRAMING = HOP_BY_HOP | {b"content-length"}
"""Of an answer's headers, those not relayed (the proxy sets its own length, or chunks it)."""
DROPPED = HOP_BY_HOP | {b"host", b"content-length", b"expect"}
"""Of a request's headers, those not forwarded (the proxy sets Host, the backend's, and the body's
framing; a 100 Continue is the proxy's to send, since it reads the body)."""
UNTRUSTED = frozenset((b"x-forwarded-for", b"x-forwarded-host", b"x-forwarded-proto", b"forwarded"))
"""A client's own forwarding headers, dropped unless trust_forwarded (a trusted front proxy sets them)."""
PLAIN_TEXT = b"Content-Type: text/plain; charset=utf-8\r\n"
BACKEND_FULL_HEADERS = PLAIN_TEXT + b"Retry-After: 1\r\n"
BODY_TIMED_OUT = Refusal(408, "body_timeout", "the request's body stayed silent too long")
SERVER_REFUSALS = {400: "malformed", 408: "header_timeout", 414: "header_too_large", 431: "header_too_large"}
"""The reasons of the server side's own refusals (:class:`hetlb.gateway.http.downstream.RequestRefused`), by status."""
BODY_MALFORMED = Refusal(400, "malformed", "the request's body is malformed")
BAD_PATH = Refusal(400, "bad_path", "the path is not a path below the root")


def normalised_path(path: str) -> str | None:
    """A request's path with its dot segments removed (RFC 3986 section 5.2.4, also when written
    ``%2e``), or None when no backend should see it: not starting with ``/``, climbing above the
    root, or read two ways by a backend that decodes ``%2f`` or ``%5c`` (a segment it would split
    into dot segments, or one that a ``..`` removes whole here and only in part there)."""
    if not path.startswith("/"):
        return None
    if "/." not in path and "%" not in path and "\\" not in path:
        return path  # the common case: no dot segment can hide in it
    kept: list[str] = []
    segments = path.split("/")[1:]
    for i, segment in enumerate(segments):
        plain = segment.replace("%2e", ".").replace("%2E", ".")
        if plain in (".", ".."):
            if plain == "..":
                if not kept or hides_separator(kept[-1]):  # above the root, or two readings of what it removes
                    return None
                kept.pop()
            if i == len(segments) - 1:
                kept.append("")  # "/a/b/.." is "/a/"
            continue
        if hides_separator(segment) and any(part in (".", "..") for part in separated(plain)):
            return None
        kept.append(segment)
    return "/" + "/".join(kept)


def hides_separator(segment: str) -> bool:
    """Whether a backend decoding %2f or %5c, or reading a backslash as a separator, would see more
    than one segment in ``segment``."""
    lowered = segment.lower()
    return "%2f" in lowered or "%5c" in lowered or "\\" in segment


def separated(segment: str) -> list[str]:
    """The parts of ``segment`` for such a backend."""
    lowered = segment.replace("%2F", "%2f").replace("%5C", "%5c")
    return lowered.replace("%2f", "/").replace("%5c", "/").replace("\\", "/").split("/")


def target_of(request: Request, path: str) -> str:
    """The target the backend is sent: the normalised path and the query, encoded as sent."""
    return path + ("?" + request.query if request.query else "")


class Proxy:
    """One dispatcher's proxy: its state, its connections to the backends and its background tasks."""

    def __init__(self, config: ServeConfig, dispatcher: Dispatcher, metrics: Metrics, index: int = 0):
        self.config = config
        self.dispatcher = dispatcher
        self.metrics = metrics
        self.index = index
        self.base = [URL(url.rstrip("/")) for url in dispatcher.urls]
        self.prober: Prober | None = None
        self.active = 0
        self.started = time.monotonic()
        self.random = random.Random(config.seed)
        self.pools: dict[int, tuple[UpstreamPool, str, bytes]] = {}  # backend s -> upstream(s)
        # a client's X-Forwarded-For is set again (appended to, with trust_forwarded)
        self.dropped = DROPPED | {b"x-forwarded-for"} if config.trust_forwarded else DROPPED | UNTRUSTED
        self.errors_logged: set[str] = set()
        self.too_large = Refusal(413, "too_large", f"a body of at most {config.max_body_bytes} bytes")

    # --- life ------------------------------------------------------------------------------------

    async def start(self) -> None:
        self.prober = Prober(self.config, self.dispatcher, self.metrics, self.base)
        self.prober.start()

    async def stop(self) -> None:
        if self.prober is not None:
            await self.prober.stop()
        for pool, _, _ in self.pools.values():
            pool.close()

    # --- requests --------------------------------------------------------------------------------

    def on_server_error(self, error: BaseException) -> None:
        """A request the server side refused before the proxy saw it (malformed, headers too large
        or too slow), or a failure of the proxy's own code: counted, and the latter logged once per
        kind (never a traceback: a log any client could flood)."""
        if isinstance(error, RequestRefused):
            self.metrics.rejected(SERVER_REFUSALS.get(error.status, "malformed"))
            return
        self.metrics.rejected("internal_error")
        kind = type(error).__name__
        if kind not in self.errors_logged:
            self.errors_logged.add(kind)
            print(f"hetlb serve: dispatcher {self.index}: internal error {kind}: {error}", file=sys.stderr)

    def refuse(self, request: Request, refusal: Refusal) -> None:
        """Answer with the dispatcher's own refusal, counted under its reason."""
        self.metrics.rejected(refusal.reason)
        headers, body = refusal.answer(self.config)
        headers.append(("Date", http_date()))
        request.respond(refusal.status, encoded(headers), body)

    async def handle(self, request: Request) -> None:
        started = time.perf_counter()
        config = self.config
        length = request.content_length
        if length is not None and length > config.max_body_bytes:
            request.keep_alive = False  # its body is not read
            return self.refuse(request, self.too_large)
        path = self.checked_path(request)
        if path is None:
            return
        body: bytes | None = None
        named: str | None = None
        try:
            if config.type_body_field is not None and self.dispatcher.typed and request.body_exists:
                body = await request.read(config.max_body_bytes)
                found = body_type(config.type_body_field, body)
                if isinstance(found, Refusal):
                    return self.refuse(request, found)
                named = found
            elif request.body_exists and length is not None and length <= CHUNK:
                body = await request.read(config.max_body_bytes)  # small: read at once (a retry can send it again)
        except BodyTooLarge:
            return self.refuse(request, self.too_large)
        except BodyTimeout:
            return self.refuse(request, BODY_TIMED_OUT)
        except BodyMalformed:
            return self.refuse(request, BODY_MALFORMED)
        except ClientGone:
            return  # the client went away while its body was read: nobody to answer
        k = self.admitted_type(request, path, named)
        if k is None:
            return
        self.active += 1
        try:
            await self.forward(request, k, path, started, body)
        finally:
            self.active -= 1

    def answer_now(self, request: Request) -> None:
        """:meth:`handle` for a request without a body, by callbacks: when the policy's backend has
        an idle connection, the request is sent at once and its answer, if it arrives whole, is
        relayed from the answer's own parse (no task, no future: a short answer costs a tenth
        less). Unless it was answered at once (refused), the request holds its connection's task
        slot: the :class:`Exchange` under way, or the task that goes on with it (no idle
        connection: it opens one)."""
        started = time.perf_counter()
        path = self.checked_path(request)
        if path is None:
            return
        k = self.admitted_type(request, path, None)
        if k is None:
            return
        s = self.pick(request, k, ())
        if s is None:
            return
        self.active += 1
        exchange = Exchange(self, request, k, path, started, s)
        exchange.last = self.is_last(k, 0, self.attempts(request, False), ())
        pool, prefix, _ = self.upstream(s)
        self.push_maybe()
        exchange.lease = self.dispatcher.start(s)  # released by the exchange, or by call() once handed over
        try:
            upstream = pool.send_now(request.method, prefix + exchange.target, exchange.headers)
        except BaseException:
            exchange.end(None)
            raise
        if upstream is None:
            request.connection.continue_with(exchange.continuation, exchange.not_continued)
            return
        exchange.upstream = upstream
        upstream.listener = exchange.on_answer
        request.connection.hold(exchange)

    def checked_path(self, request: Request) -> str | None:
        """The request's path without dot segments, or None when it was refused (400)."""
        path = normalised_path(request.path)
        if path is None:
            self.refuse(request, BAD_PATH)
        return path

    def admitted_type(self, request: Request, path: str, named: str | None) -> int | None:
        """The request's job type index, or None when it was refused (no type, unknown, overload)."""
        k = job_type(self.config, self.dispatcher, request.headers, path, named)
        if isinstance(k, Refusal):
            self.refuse(request, k)
            return None
        if self.active >= self.config.max_in_flight:
            self.refuse(request, Refusal(503, "overload", "overloaded"))
            return None
        return k

    def forwarded_headers(self, request: Request) -> bytes:
        """The request's end-to-end header lines for the backend, with the proxy's X-Forwarded-For,
        -Host and -Proto (a client's own are dropped, or kept and appended to with
        trust_forwarded)."""
        headers: list[tuple[str, str]] = []
        peer = request.peer
        claimed = request.headers.get("X-Forwarded-For") if self.config.trust_forwarded else None
        headers.append(("X-Forwarded-For", f"{claimed}, {peer}" if claimed else peer))
        if not self.config.trust_forwarded or "X-Forwarded-Host" not in request.headers:
            headers.append(("X-Forwarded-Host", request.host))
        if not self.config.trust_forwarded or "X-Forwarded-Proto" not in request.headers:
            headers.append(("X-Forwarded-Proto", "http"))
        if self.config.signals.piggyback and ORCA_FORMAT not in request.headers:
            headers.append((ORCA_FORMAT, "TEXT"))  # an engine with ORCA reports (vLLM) then sends them
        return relayed(request.raw_headers, self.dropped) + encoded(headers)

    def attempts(self, request: Request, streamed_body: bool) -> int:
        """How many backends a request may be sent to: 1 + retries for an idempotent method whose
        body is held (a streamed body is sent once), else 1."""
        return 1 + (self.config.retries if request.method in IDEMPOTENT and not streamed_body else 0)

    def is_last(self, k: int, attempt: int, attempts: int, tried: tuple[int, ...]) -> bool:
        """Whether this attempt is the request's last: no attempt left, or no backend left to retry on."""
        return attempt == attempts - 1 or self.dispatcher.admitted_count(k) - len(tried) <= 1

    def pick(self, request: Request, k: int, tried: tuple[int, ...]) -> int | None:
        """The policy's backend for a request of type k, not one of ``tried``; None when the request
        has been answered 503 (no healthy backend, or the chosen one holds its buffer)."""
        dispatcher = self.dispatcher
        decided = time.perf_counter()
        s = dispatcher.choose(k, tried)
        self.metrics.decision(time.perf_counter() - decided)
        if s == NO_BACKEND:
            self.refuse(request, Refusal(503, "no_backend", "no healthy backend"))
            return None
        if dispatcher.is_full(s):
            dispatcher.blocked[s] += 1
            request.respond(503, BACKEND_FULL_HEADERS, b"backend full\n")
            return None
        return s

    async def forward(
        self, request: Request, k: int, path: str, started: float, body: bytes | None, first: Exchange | None = None
    ) -> None:
        """Send the request to the policy's backends until one answers (retries for idempotent
        requests); ``first``: the attempt :meth:`answer_now` began."""
        streamed_body = body is None and request.body_exists
        attempts = self.attempts(request, streamed_body)
        if first is None:
            headers = self.forwarded_headers(request)
            target = target_of(request, path)
        else:
            headers, target = first.headers, first.target
        tried: tuple[int, ...] = ()
        for attempt in range(attempts):
            if attempt == 0 and first is not None:
                s, last = first.s, first.last
            else:
                chosen = self.pick(request, k, tried)
                if chosen is None:
                    return
                s, last = chosen, self.is_last(k, attempt, attempts, tried)
            data = request.chunks(self.config.max_body_bytes) if streamed_body else body
            if await self.call(request, s, target, headers, data, started, last, first if attempt == 0 else None):
                return
            tried += (s,)
        raise AssertionError("the last attempt always answers")

    def push_maybe(self) -> None:
        """With push signals, this request tells the others its backends' counts with probability p_hat."""
        if self.config.signals.push and self.random.random() < self.config.p_hat:
            assert self.prober is not None
            self.prober.push()

    async def call(
        self, request: Request, s: int, target: str, headers, data, started: float, last: bool,
        first: Exchange | None = None,
    ) -> bool:  # fmt: skip
        """One call to backend s, its answer relayed as it arrives; False when it failed before
        answering and a retry is allowed (``first``: a call :meth:`answer_now` began, its lease
        taken and its request perhaps sent). The request is in flight (its lease held) until the
        answer's last byte has been relayed, the backend failed, or the client went away."""
        dispatcher = self.dispatcher
        pool, prefix, backend_line = self.upstream(s)
        watch = None
        if first is None:
            self.push_maybe()
            lease = dispatcher.start(s)  # released in the finally below, with no await in between
            upstream = None
        else:
            first.handed_over = True
            assert first.lease is not None
            lease, upstream = first.lease, first.upstream
        try:
            if upstream is None:
                upstream = await pool.send(request.method, prefix + target, headers, data)
            else:
                try:
                    await upstream.headers_arrived()
                except BackendClosed:
                    if upstream.received:
                        raise
                    upstream.close()  # a kept-alive connection the backend had closed: once more on a new one
                    upstream = await pool.send(request.method, prefix + target, headers, data)
            self.on_response(lease, upstream)
            if upstream.status >= 500 and not last:
                return False
            watch = AnswerWatch(upstream.content_type, bool(dispatcher.speed_auto[s]))
            if self.relayed_whole(request, lease, upstream, watch, backend_line, started):
                return True
            request.start(upstream.status, upstream.header_lines(FRAMING) + backend_line, upstream.content_length)
            async for chunk in upstream.chunks():
                watch.passed(chunk)
                await request.write(chunk)
            self.answered(lease, upstream, watch, started)
            request.end()
            return True
        except asyncio.CancelledError:  # the client went away (its task is cancelled, the call with it)
            self.metrics.aborted(s, "client_gone")
            raise
        except ClientGone:  # the client went away while its body or answer was under way
            self.metrics.aborted(s, "client_gone")
            request.abort()
            return True
        except BodyTooLarge:
            return self.refused_body(request, self.too_large)
        except BodyTimeout:
            return self.refused_body(request, BODY_TIMED_OUT)
        except BodyMalformed:
            return self.refused_body(request, BODY_MALFORMED)
        except TimeoutError:
            return self.upstream_failed(request, s, 504, "backend timed out", last)
        except ProtocolViolation:
            self.on_violation(s)
            return self.upstream_failed(request, s, 502, "backend broke the protocol", last)
        except (BackendClosed, OSError) as error:
            return self.upstream_failed(request, s, 502, f"backend failed ({type(error).__name__})", last)
        finally:
            self.ended(lease, upstream, watch)

    def relayed_whole(
        self, request: Request, lease, upstream, watch: AnswerWatch, backend_line: bytes, started: float
    ) -> bool:
        """Relay an answer that arrived with its headers (a short one) in one piece; False when its
        body is still to come (or it answers a HEAD)."""
        whole = upstream.body_so_far() if request.method != "HEAD" else None
        if whole is None:
            return False
        watch.passed(whole)
        self.answered(lease, upstream, watch, started)
        request.respond(upstream.status, upstream.header_lines(FRAMING) + backend_line, whole)
        return True

    def ended(self, lease, upstream, watch: AnswerWatch | None) -> None:
        """A call is over, whatever way: its lease given back (once), its events counted, its
        connection kept alive after a whole answer, else closed (the backend's call ends)."""
        lease.release()
        if watch is not None and watch.events:
            self.metrics.events[lease.backend] += watch.events  # relayed, also of an answer that was cut
        if upstream is not None:
            upstream.finish()

    def refused_body(self, request: Request, refusal: Refusal) -> bool:
        """The client's body failed on its way to the backend (too large, too slow): the client's
        fault, not the backend's; refused if no answer has begun, else cut."""
        if request.answer_started:
            request.abort()
        else:
            self.refuse(request, refusal)
        return True

    def upstream(self, s: int) -> tuple[UpstreamPool, str, bytes]:
        """The connections to backend s, the path prefix of its URL, and the header line that names
        it in its answers (X-Backend)."""
        known = self.pools.get(s)
        if known is None:
            base = self.base[s]
            host = base.raw_host or ""
            host_header = host if base.explicit_port is None else f"{host}:{base.port}"
            pool = UpstreamPool(
                host, base.port or 80, host_header, self.config.connect_timeout, self.config.timeout,
                tls=base.scheme == "https", on_broken=lambda: self.on_violation(s),
            )  # fmt: skip
            named = encoded(((BACKEND, self.dispatcher.urls[s]),))
            known = self.pools[s] = (pool, base.raw_path.rstrip("/"), named)
        return known

    def close_connections(self, s: int) -> None:
        """Close the kept-alive connections to backend s (it left the fleet)."""
        known = self.pools.pop(s, None)
        if known is not None:
            known[0].close()

    def upstream_failed(self, request: Request, s: int, status: int, text: str, last: bool) -> bool:
        """The backend failed: before its answer, a 502 or 504 (False when a retry may follow);
        during it, the client's connection is cut (its answer cannot be completed: no terminating
        chunk, or fewer bytes than its Content-Length)."""
        self.on_failure(s)
        if request.answer_started:
            self.metrics.aborted(s, "backend_broken")
            request.abort()
            return True
        if not last:
            return False
        request.respond(status, PLAIN_TEXT, (text + "\n").encode())
        return True

    def on_response(self, lease, upstream) -> None:
        """The headers of a backend's answer: its report, and a 5xx as a failure of its health."""
        s = lease.backend
        if self.config.signals.piggyback:
            report = piggybacked_report(upstream.headers)
            if report is not None:
                self.dispatcher.report(s, report[0], own_left=report[1])
        if upstream.status >= 500:
            self.on_failure(s)

    def answered(self, lease, upstream, watch: AnswerWatch, started: float) -> None:
        """The answer's last byte has been relayed: its in-flight count drops now, its times to
        first and last byte and its events are measured, a whole answer below 500 counts as the
        backend's success, and with speed=auto its service time is a sample of the backend's speed.
        The backend's epochs give how long the request took from the decision to the backend
        (forward delay) and from its departure to here (answer lag)."""
        lease.release()
        s = lease.backend
        dispatcher = self.dispatcher
        watch.finished()
        self.metrics.answered(s, started, watch)
        if upstream.status < 500:
            dispatcher.succeeded(s)
            if dispatcher.speed_auto[s]:
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

    def on_violation(self, s: int) -> None:
        """Backend s broke the protocol: ejected at once (an active check re-admits it), since its
        next answer on any connection may be framed as wrongly."""
        if self.dispatcher.failed(s, at_once=True):
            self.metrics.ejection(s)


class Exchange:
    """A request without a body on its way by callbacks (:meth:`Proxy.answer_now`): its job type
    ``k``, backend ``s``, lease (the in-flight count) and the answer under way. A whole answer is
    relayed from :meth:`on_answer`; anything else (an answer that streams or fails, a 5xx to retry,
    a HEAD) goes on as the request's task, in :meth:`Proxy.call`, which takes the lease over."""

    __slots__ = (
        "proxy", "request", "k", "path", "started", "s", "last", "target", "headers", "lease", "upstream",
        "handed_over",
    )  # fmt: skip

    def __init__(self, proxy: Proxy, request: Request, k: int, path: str, started: float, s: int):
        self.proxy = proxy
        self.request = request
        self.k = k
        self.path = path
        self.started = started
        self.s = s
        self.last = True
        self.target = target_of(request, path)
        self.headers = proxy.forwarded_headers(request)
        self.lease: Lease | None = None
        self.upstream: Answer | None = None
        self.handed_over = False

    def on_answer(self) -> None:
        """The answer's headers have arrived, or it failed (the upstream connection's listener)."""
        upstream, proxy, request = self.upstream, self.proxy, self.request
        assert upstream is not None
        upstream.listener = None
        whole = upstream.error is None and upstream.complete and request.method != "HEAD"
        if not (whole and (upstream.status < 500 or self.last)):
            request.connection.continue_with(self.continuation, self.not_continued)
            return
        watch = None
        try:
            proxy.on_response(self.lease, upstream)
            watch = AnswerWatch(upstream.content_type, bool(proxy.dispatcher.speed_auto[self.s]))
            proxy.relayed_whole(request, self.lease, upstream, watch, proxy.upstream(self.s)[2], self.started)
        except Exception as error:  # noqa: BLE001 (a failure of the proxy's own code: this request's 500)
            request.connection.failed(request, error)
        finally:
            self.end(watch)
        request.connection.finished(request)

    async def continuation(self) -> None:
        """The rest of the request, as its task (from the first attempt's answer on)."""
        try:
            await self.proxy.forward(self.request, self.k, self.path, self.started, None, first=self)
        finally:
            self.proxy.active -= 1

    def not_continued(self) -> None:
        """The request's task ended before its :meth:`continuation` took the lease over (the client
        went away first)."""
        if not self.handed_over:
            self.cancel()

    def cancel(self) -> None:
        """The client went away before the answer (the connection's task slot holds the exchange)."""
        if self.upstream is not None:
            self.upstream.listener = None
        self.proxy.metrics.aborted(self.s, "client_gone")
        self.end(None)

    def end(self, watch: AnswerWatch | None) -> None:
        self.handed_over = True  # (nothing is left to hand over)
        self.proxy.ended(self.lease, self.upstream, watch)
        self.proxy.active -= 1
