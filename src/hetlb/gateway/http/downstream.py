"""The proxy's HTTP/1.1 server side: its clients' connections, each request parsed by llhttp
(httptools) and handed to the proxy as soon as its headers are in, its body as it arrives, each
answer written with flow control.

It does what a reverse proxy's front needs and no more, at the cost of a few microseconds per
request: no routing table, no middleware, no decompression. The counterpart of
:mod:`hetlb.gateway.http.upstream` (the side towards the backends).

- **Requests, one at a time per connection**: a pipelined request waits for the answer before
  it; the connection stops reading while one waits, so a client cannot queue more than that.
- **Limits**: the request line and each header line at most ``max_header_bytes``, the whole header
  section at most :data:`HEADER_LINES_HELD` times that (else 414 or 431); a body beyond
  ``max_body_bytes`` is the proxy's to refuse (413, :attr:`Request.content_length` tells before a
  byte is read). A request llhttp refuses (malformed, or framed two ways: Content-Length with
  Transfer-Encoding, two lengths, a transfer coding that does not end in chunked) gets 400 and the
  connection is closed: nothing of it reaches a backend.
- **Timeouts**: a request's headers must arrive within ``header_timeout`` of its first byte (or of
  the connection's opening), else 408 and close (a client sending a byte a second holds nothing
  longer); its body may stay silent at most ``body_timeout`` between two reads
  (:class:`BodyTimeout`); a kept-alive connection with no request is closed after
  ``keep_alive_timeout``.
- **The client going away** (its connection lost) cancels the task that answers its request,
  which the proxy sees as :class:`asyncio.CancelledError` at its next await, once.
- **No traceback**: an exception of the handler is answered 500 (or cuts the answer when it had
  begun), counted by ``on_error`` and logged as one line per kind of error.
"""

from __future__ import annotations

import asyncio
import collections
import email.utils
import functools
import http
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Protocol

import httptools
from multidict import CIMultiDict

from hetlb.wire.runtime import WriteFlowControl

HIGH_WATER = 256 * 1024
"""Bytes of a request body held before the connection stops reading (resumed below a quarter)."""
HEADER_LINES_HELD = 8
"""The header section may hold this many times max_header_bytes in all."""
BACKLOG = 1024
"""Connections the kernel completes before the dispatcher accepts them (beyond, clients wait for a
SYN retransmission, 1 s and more)."""
REASONS = {status.value: status.phrase.encode() for status in http.HTTPStatus}
NO_BODY_STATUS = frozenset((204, 304))


class BodyTooLarge(Exception):
    """A request body passed max_body_bytes."""


class BodyTimeout(Exception):
    """A request body stayed silent longer than body_timeout."""


class BodyMalformed(Exception):
    """A request body's framing broke (a bad chunk): the proxy's 400, and the connection closes."""


class ClientGone(ConnectionError):
    """The client closed its connection."""


class Limits:
    """What the server side allows: sizes in bytes, timeouts in seconds."""

    __slots__ = ("max_header_bytes", "header_timeout", "body_timeout", "keep_alive_timeout", "check_every")

    def __init__(self, max_header_bytes: int, header_timeout: float, body_timeout: float, keep_alive_timeout: float):
        self.max_header_bytes = max_header_bytes
        self.header_timeout = header_timeout
        self.body_timeout = body_timeout
        self.keep_alive_timeout = keep_alive_timeout
        # a connection's timer fires at least this often while a deadline is set (seconds): then a
        # deadline moved earlier is never missed, and no request re-arms a timer
        self.check_every = min(header_timeout, keep_alive_timeout)


class Request:
    """One request: ``method``, ``target`` (the request line's target as sent), ``path`` and
    ``query`` (its raw parts; for an absolute-form target those of its URL), ``headers``
    (CIMultiDict of str) and ``raw_headers`` (pairs of bytes as received), ``content_length`` (None without), ``chunked``, ``peer`` (the client's
    address); its body by :meth:`read` or :meth:`chunks`; its answer by :meth:`respond`, or by
    :meth:`start`, :meth:`write` and :meth:`end`."""

    __slots__ = (
        "connection", "method", "target", "path", "query", "headers", "raw_headers", "version", "keep_alive",
        "content_length", "chunked", "body", "held", "body_complete", "error", "waiter", "continue_sent",
        "answer_started", "answer_complete", "answer_chunked", "answer_has_body",
    )  # fmt: skip

    def __init__(self, connection: ClientConnection, method: str, target: bytes, raw_headers: list, version: str):
        self.connection = connection
        self.method = method
        self.target = target.decode("latin-1")
        if target.startswith(b"/") and b"#" not in target:  # the origin form, as nearly every client sends
            self.path, _, self.query = self.target.partition("?")
        else:
            try:
                url = httptools.parse_url(target)
                self.path = (url.path or b"").decode("latin-1")
                self.query = (url.query or b"").decode("latin-1")
            except httptools.HttpParserInvalidURLError:
                self.path, self.query = self.target, ""  # refused by the proxy: no path it can forward
        self.raw_headers = raw_headers  # pairs of bytes, as received: what the proxy relays
        self.headers = headers = CIMultiDict(
            [(name.decode("latin-1"), value.decode("latin-1")) for name, value in raw_headers]
        )
        self.version = version
        self.keep_alive = True
        length = headers.get("Content-Length")
        self.content_length = int(length) if length is not None else None  # llhttp checked its digits
        self.chunked = "chunked" in headers.get("Transfer-Encoding", "").lower()
        self.body: collections.deque[bytes] = collections.deque()
        self.held = 0
        self.body_complete = not self.chunked and not self.content_length
        self.error: BaseException | None = None
        self.waiter: asyncio.Future | None = None
        self.continue_sent = False
        self.answer_started = self.answer_complete = self.answer_chunked = False
        self.answer_has_body = True

    @property
    def peer(self) -> str:
        return self.connection.peer

    @property
    def host(self) -> str:
        return self.headers.get("Host", "")

    @property
    def body_exists(self) -> bool:
        return self.chunked or bool(self.content_length)

    # --- the body ----------------------------------------------------------------------------------

    def received(self, data: bytes) -> None:
        self.body.append(data)
        self.held += len(data)
        if self.held > HIGH_WATER:
            self.connection.pause_reading()
        self.wake()

    def wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def fail(self, error: BaseException) -> None:
        if self.error is None:
            self.error = error
        self.wake()

    async def chunks(self, limit: int) -> AsyncIterator[bytes]:
        """The body's chunks as they arrive (the transfer coding removed); BodyTooLarge past
        ``limit`` bytes, BodyTimeout after body_timeout without a byte, ClientGone."""
        total = 0
        connection = self.connection
        if not self.continue_sent and not self.body_complete:
            self.continue_sent = True
            if self.headers.get("Expect", "").lower() == "100-continue":
                connection.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        while True:
            while self.body:
                chunk = self.body.popleft()
                self.held -= len(chunk)
                if self.held < HIGH_WATER // 4:
                    connection.resume_reading()
                total += len(chunk)
                if total > limit:
                    self.keep_alive = False  # the rest of the body is not read
                    raise BodyTooLarge
                yield chunk
            if self.body_complete:
                return
            if self.error is not None:
                raise self.error
            self.waiter = waiter = connection.loop.create_future()
            timer = connection.loop.call_later(connection.limits.body_timeout, self.time_out, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
                self.waiter = None

    def time_out(self, waiter: asyncio.Future) -> None:
        if not waiter.done():
            self.keep_alive = False
            self.fail(BodyTimeout())

    async def read(self, limit: int) -> bytes:
        """The whole body (at most ``limit`` bytes, else BodyTooLarge)."""
        if self.body_complete and len(self.body) <= 1:
            whole = self.body.popleft() if self.body else b""
            self.held = 0
            if len(whole) > limit:
                self.keep_alive = False
                raise BodyTooLarge
            return whole
        return b"".join([chunk async for chunk in self.chunks(limit)])

    # --- the answer --------------------------------------------------------------------------------

    def head(self, status: int, lines: bytes, framing: bytes) -> bytes:
        if not self.keep_alive or not self.connection.keep_alive:
            framing += b"Connection: close\r\n"
        return b"HTTP/1.1 %d %b\r\n%b%b\r\n" % (status, REASONS.get(status, b"Unknown"), lines, framing)

    def respond(self, status: int, lines: bytes, body: bytes = b"") -> None:
        """A whole answer, written at once (``lines``: its header lines, without the framing
        headers)."""
        self.answer_started = self.answer_complete = True
        framing = b"" if status in NO_BODY_STATUS else b"Content-Length: %d\r\n" % len(body)
        head = self.head(status, lines, framing)
        self.connection.write(head if self.method == "HEAD" or status in NO_BODY_STATUS else head + body)

    def start(self, status: int, lines: bytes, content_length: int | None) -> None:
        """The status and headers of an answer whose body follows by :meth:`write` (with its
        length, or else chunked)."""
        self.answer_started = True
        if self.method == "HEAD" or status in NO_BODY_STATUS or 100 <= status < 200:
            self.answer_has_body = False
            framing = b"" if content_length is None else b"Content-Length: %d\r\n" % content_length
        elif content_length is not None:
            framing = b"Content-Length: %d\r\n" % content_length
        elif self.version == "1.1":
            self.answer_chunked = True
            framing = b"Transfer-Encoding: chunked\r\n"
        else:  # an HTTP/1.0 client: the body ends with the connection
            self.keep_alive = False
            framing = b""
        self.connection.write(self.head(status, lines, framing))

    async def write(self, chunk: bytes) -> None:
        """A chunk of the body, after the connection's buffer drained (ClientGone if it closed)."""
        connection = self.connection
        if connection.closed:
            raise ClientGone
        if chunk and self.answer_has_body:
            connection.write(b"%x\r\n%b\r\n" % (len(chunk), chunk) if self.answer_chunked else chunk)
        await connection.drain()

    def end(self) -> None:
        """The answer is complete."""
        self.answer_complete = True
        if self.answer_chunked:
            self.connection.write(b"0\r\n\r\n")

    def abort(self) -> None:
        """Cut the client's connection: an answer that cannot be completed ends unterminated."""
        self.keep_alive = False
        self.connection.abort()


Handler = Callable[[Request], Awaitable[None]]
AnswerNow = Callable[[Request], None]
"""Answers a request without a body at once, or holds the connection's task slot with
:meth:`ClientConnection.hold` or :meth:`ClientConnection.continue_with` until it calls
:meth:`ClientConnection.finished`."""


class ClientConnection(WriteFlowControl, asyncio.Protocol):
    """One client's connection: its parser, its requests in order, the task that answers them (or,
    for a request without a body, ``answer_now``'s callbacks: no task)."""

    def __init__(
        self, handler: Handler, limits: Limits, on_error: Callable[[BaseException], None], live: set,
        answer_now: AnswerNow | None = None,
    ):  # fmt: skip
        self.handler = handler
        self.answer_now = answer_now
        self.limits = limits
        self.on_error = on_error
        self.live = live  # every open connection of the server, for its stop
        self.loop = asyncio.get_running_loop()
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.peer = ""
        self.closed = False
        self.keep_alive = True
        self.requests: collections.deque[Request] = collections.deque()
        self.task: asyncio.Task | InFlight | None = None  # the request being answered
        self.timer: asyncio.TimerHandle | None = None
        self.deadline = 0.0  # loop time
        self.on_deadline: Callable[[], None] | None = None
        self.reading_paused = False
        self.drained: asyncio.Future | None = None
        self.parsing: Request | None = None  # the request whose body the parser reads
        self.begun = False  # bytes of a request's header section have arrived, not its end
        self.url = b""
        self.raw_headers: list[tuple[bytes, bytes]] = []
        self.header_bytes = 0

    # --- the connection ------------------------------------------------------------------------------

    def connection_made(self, transport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = peer[0] if isinstance(peer, tuple) else ""
        self.live.add(self)
        self.arm(self.limits.header_timeout, self.headers_timed_out)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:  # no protocol switch: the request is answered, then the connection closes
            self.keep_alive = False
            self.pause_reading()
        except httptools.HttpParserCallbackError as error:
            cause = error.__context__
            if isinstance(cause, RequestTooLarge):
                self.refuse(cause.status, cause.text)
            else:  # a failure of this side's own callbacks
                self.on_error(cause or error)
                self.refuse(500, "internal error")
        except httptools.HttpParserError:
            self.refuse(400, "malformed request")

    def connection_lost(self, exc) -> None:
        self.closed = True
        self.disarm()
        if self.timer is not None:
            self.timer.cancel()
        self.live.discard(self)
        for request in self.requests:
            request.fail(ClientGone())
        if self.task is not None:
            self.task.cancel()  # the client went away: its request's call with it
        if self.drained is not None and not self.drained.done():
            self.drained.set_exception(ClientGone())

    def pause_reading(self) -> None:
        if not self.reading_paused and self.transport is not None and not self.closed:
            self.reading_paused = True
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self.reading_paused and self.transport is not None and not self.closed and len(self.requests) <= 1:
            self.reading_paused = False
            self.transport.resume_reading()

    def write(self, data: bytes) -> None:
        if not self.closed and self.transport is not None:
            self.transport.write(data)

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def close(self) -> None:
        """Close once what was written has been sent."""
        self.keep_alive = False
        if self.transport is not None:
            self.transport.close()

    # --- timers --------------------------------------------------------------------------------------

    def arm(self, seconds: float, callback) -> None:
        """Call ``callback`` in ``seconds`` unless disarmed or armed again before: the deadline is a
        number; the one timer of the connection checks it (no timer is made per request)."""
        self.deadline = self.loop.time() + seconds
        self.on_deadline = callback
        if self.timer is None:
            self.timer = self.loop.call_at(min(self.deadline, self.loop.time() + self.limits.check_every), self.check)

    def disarm(self) -> None:
        self.on_deadline = None

    def check(self) -> None:
        self.timer = None
        if self.closed or self.on_deadline is None:
            return
        now = self.loop.time()
        if now < self.deadline:
            self.timer = self.loop.call_at(min(self.deadline, now + self.limits.check_every), self.check)
            return
        callback, self.on_deadline = self.on_deadline, None
        callback()

    def headers_timed_out(self) -> None:
        """No complete header section within header_timeout: 408 if a request had begun."""
        if self.begun:
            self.refuse(408, "the request's headers took too long")
        else:
            self.close()

    def idle_timed_out(self) -> None:
        if self.task is None and not self.requests:
            self.close()

    def refuse(self, status: int, text: str) -> None:
        """Answer a request the parser could not take and close: the rest of the stream cannot be
        framed. A request whose body broke is the handler's to answer (:class:`BodyMalformed`)."""
        self.disarm()
        self.keep_alive = False
        if self.parsing is not None:
            self.parsing.fail(BodyMalformed())
            self.parsing = None
            self.pause_reading()
            return
        self.on_error(RequestRefused(status))
        if self.task is None:
            body = text.encode() + b"\n"
            self.write(
                b"HTTP/1.1 %d %b\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%b"
                % (status, REASONS.get(status, b"Unknown"), len(body), body)
            )
            self.close()
        else:
            self.keep_alive = False
            self.pause_reading()

    # --- the parser's callbacks ----------------------------------------------------------------------

    def on_message_begin(self) -> None:
        self.begun = True
        self.url = b""
        self.raw_headers = []
        self.header_bytes = 0
        if self.on_deadline != self.headers_timed_out:  # (a new connection's runs from its opening)
            self.arm(self.limits.header_timeout, self.headers_timed_out)

    def on_url(self, url: bytes) -> None:
        self.url += url
        if len(self.url) > self.limits.max_header_bytes:
            raise RequestTooLarge(414, "the request line is too long")

    def on_header(self, name: bytes, value: bytes) -> None:
        size = len(name) + len(value) + 4
        self.header_bytes += size
        if size > self.limits.max_header_bytes or self.header_bytes > HEADER_LINES_HELD * self.limits.max_header_bytes:
            raise RequestTooLarge(431, "a header, or the header section, is too large")
        self.raw_headers.append((name, value))

    def on_headers_complete(self) -> None:
        parser = self.parser
        request = Request(
            self, parser.get_method().decode("latin-1"), self.url, self.raw_headers, parser.get_http_version()
        )
        request.keep_alive = parser.should_keep_alive()
        self.begun = False
        self.disarm()
        self.raw_headers = []
        self.url = b""
        self.parsing = None if request.body_complete else request
        self.requests.append(request)
        if len(self.requests) > 1:
            self.pause_reading()  # a pipelined request waits for the answers before it
        if self.task is None:
            if self.answer_now is not None and request.body_complete and len(self.requests) == 1:
                self.start_now(request)
            else:
                self.task = self.loop.create_task(self.answer_all())

    def on_body(self, body: bytes) -> None:
        if self.parsing is not None:
            self.parsing.received(body)

    def on_message_complete(self) -> None:
        request = self.parsing
        if request is not None:
            request.body_complete = True
            request.wake()
            self.parsing = None

    # --- answering -----------------------------------------------------------------------------------

    async def answer_all(self, continuation: Callable[[], Awaitable[None]] | None = None) -> None:
        """Answer the connection's requests in order (the first by ``continuation``, when given);
        close the connection when one is not kept alive."""
        while self.requests:
            request = self.requests[0]
            try:
                if continuation is not None:
                    answering, continuation = continuation(), None
                else:
                    answering = self.handler(request)
                await answering
            except asyncio.CancelledError:
                return  # the connection is lost
            except Exception as error:  # noqa: BLE001 (any failure of the handler is this request's, not the server's)
                self.failed(request, error)
            if not self.done_with(request):
                return
        self.task = None
        self.wait_idle()

    def start_now(self, request: Request) -> None:
        """Give a request without a body to answer_now: answered at once, or in flight."""
        assert self.answer_now is not None
        try:
            self.answer_now(request)
        except Exception as error:  # noqa: BLE001 (as in answer_all)
            self.failed(request, error)
        if self.task is None:
            self.finished(request)

    def hold(self, in_flight: InFlight) -> None:
        """The request is in flight by callbacks; ``in_flight.cancel()`` if the client goes away."""
        self.task = in_flight

    def continue_with(self, continuation: Callable[[], Awaitable[None]], not_continued: Callable[[], None]) -> None:
        """The request goes on as a task; ``not_continued`` is called when the task ends (also if it
        was cancelled before ``continuation`` began)."""
        self.task = task = self.loop.create_task(self.answer_all(continuation))
        task.add_done_callback(lambda _: not_continued())

    def finished(self, request: Request) -> None:
        """The request in flight by callbacks has been answered: the next one, or the wait for it."""
        self.task = None
        if self.done_with(request):
            if self.requests:
                self.task = self.loop.create_task(self.answer_all())
            else:
                self.wait_idle()

    def failed(self, request: Request, error: Exception) -> None:
        """A failure of the handler's own code: counted, the request answered 500 (or its answer cut)."""
        self.on_error(error)
        if not request.answer_started:
            request.respond(500, b"Content-Type: text/plain\r\n", b"internal error\n")
        else:
            request.abort()

    def done_with(self, request: Request) -> bool:
        """The request at the head has been answered: False when the connection closes."""
        if self.closed:
            return False
        self.requests.popleft()
        if not request.answer_complete:
            request.abort()
            return False
        if not (request.keep_alive and self.keep_alive and request.body_complete and request.error is None):
            self.close()  # (a body not read to its end cannot be skipped safely)
            return False
        self.resume_reading()
        return True

    def wait_idle(self) -> None:
        """No request left: the connection waits at most keep_alive_timeout for the next."""
        if not self.closed and not self.begun:  # (a header section under way has its own timer)
            self.arm(self.limits.keep_alive_timeout, self.idle_timed_out)


class InFlight(Protocol):
    """A request answered by callbacks (the connection's task slot holds it)."""

    def cancel(self) -> None: ...


class RequestTooLarge(Exception):
    def __init__(self, status: int, text: str):
        super().__init__(text)
        self.status = status
        self.text = text


class RequestRefused(Exception):
    """A request the server side answered itself, before the handler (its status)."""

    def __init__(self, status: int):
        super().__init__(status)
        self.status = status


class Downstream:
    """The server side of one dispatcher: its listening socket's connections."""

    def __init__(
        self, handler: Handler, limits: Limits, on_error: Callable[[BaseException], None],
        answer_now: AnswerNow | None = None,
    ):  # fmt: skip
        self.handler = handler
        self.answer_now = answer_now
        self.limits = limits
        self.on_error = on_error
        self.connections: set[ClientConnection] = set()
        self.server: asyncio.Server | None = None

    async def start(self, sock) -> None:
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(
            lambda: ClientConnection(self.handler, self.limits, self.on_error, self.connections, self.answer_now),
            sock=sock,
            backlog=BACKLOG,  # (the loop listens again with its own, 100 by default)
        )

    async def stop(self, drain: float) -> None:
        """Stop accepting, close idle connections, give the requests in flight at most ``drain``
        seconds, then cut what is left."""
        if self.server is not None:
            self.server.close()
        deadline = time.monotonic() + drain
        while True:
            busy = False
            for connection in list(self.connections):
                connection.keep_alive = False
                if connection.task is None:
                    connection.close()
                else:
                    busy = True
            if not busy or time.monotonic() >= deadline:
                break
            await asyncio.sleep(0.05)
        for connection in list(self.connections):
            connection.abort()


def http_date() -> str:
    """Now, as an HTTP date (the proxy's own answers carry one)."""
    return formatted_date(int(time.time()))


@functools.lru_cache(maxsize=1)
def formatted_date(epoch: int) -> str:
    return email.utils.formatdate(epoch, usegmt=True)
