"""The proxy's HTTP/1.1 client to its backends: kept-alive connections per backend, a request
written in one piece, the answer's status and headers parsed by llhttp (httptools) and its body
handed on chunk by chunk as it arrives, with flow control.

It does less than a general client on purpose: one request at a time per connection, no
redirects, no cookies, no decompression, no proxy; the request's path, query and end-to-end
headers are the proxy's, bytes as given. What it does, it does at the cost of a few
microseconds: :meth:`UpstreamPool.send` takes an idle connection of the backend (or opens one,
within ``connect_timeout``), writes the request and waits for the answer's headers; the body's
chunks are read with :meth:`Answer.chunks`. A connection goes back to its pool when its answer
has been read to its end and both sides keep it alive; any other end closes it (a client that
goes away closes the connection to the backend, which an inference engine takes as an abort).

Timeouts: the backend may stay silent at most ``read_timeout`` seconds while an answer is awaited:
before its headers and between two chunks of its body (TimeoutError). A request sent on a
kept-alive connection that the backend had closed meanwhile (no byte of an answer came) is sent
again once on a new connection when its body is held in full.
"""

from __future__ import annotations

import asyncio
import collections
import ssl
from collections.abc import AsyncIterator, Callable

import httptools
from multidict import CIMultiDict

from hetlb.gateway.http.header_lines import relayed
from hetlb.wire.runtime import WriteFlowControl

HIGH_WATER = 256 * 1024
"""Bytes of an answer's body held before the connection stops reading (resumed below a quarter)."""
MAX_IDLE_PER_BACKEND = 1024
BODILESS = frozenset(("GET", "HEAD", "DELETE", "OPTIONS", "TRACE"))
"""Methods whose empty body gets no Content-Length."""


class BackendClosed(Exception):
    """The backend closed the connection (or broke the protocol) before the answer's end."""


class ProtocolViolation(BackendClosed):
    """The backend's bytes are no HTTP/1.1 answer (malformed, an upgrade nobody asked for, bytes
    beyond the end the answer announced): the connection cannot be framed any more."""


class BackendUnreachable(OSError):
    """No connection to the backend within connect_timeout, or refused."""


class Answer(WriteFlowControl, asyncio.Protocol):
    """One kept-alive connection to a backend, and the answer it is reading: ``status``,
    ``headers`` (a CIMultiDict of str), ``content_length`` (None without),
    ``content_type``; the body by :meth:`chunks`."""

    def __init__(self, pool: UpstreamPool):
        self.pool = pool
        self.loop = pool.loop
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.raw_headers: list[tuple[bytes, bytes]] = []
        self.status = 0
        self.headers: CIMultiDict = CIMultiDict()
        self.content_length: int | None = None
        self.content_type = ""
        self.body: collections.deque[bytes] = collections.deque()
        self.held = 0
        self.paused = False
        self.complete = False
        self.received = False  # any byte of the current answer
        self.error: BaseException | None = None
        self.waiter: asyncio.Future | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.deadline = 0.0  # of the wait under way, loop time
        self.headers_done = False
        self.informational = False
        self.expects_body = True
        self.chunked = False
        self.reusable = False
        self.exchanging = False  # between a request's sending and the end of its answer's reading
        self.drained: asyncio.Future | None = None
        self.listener: Callable[[], None] | None = None
        """Told, instead of a waiting task, when the answer's headers are in or it failed
        (:meth:`UpstreamPool.send_now`)."""

    # --- the connection --------------------------------------------------------------------------

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self.complete or not self.exchanging:  # more than the answer announced, or bytes unasked
            self.broken()
            return
        self.received = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self.fail(ProtocolViolation("the backend upgraded the connection"))
        except httptools.HttpParserError as error:
            self.fail(ProtocolViolation(f"malformed answer ({error})"))
        if self.listener is not None and self.headers_done:
            self.listener()  # (after the parse: a short answer's body is in by now)

    def connection_lost(self, exc) -> None:
        self.reusable = False
        if self.headers_done and not self.complete and self.content_length is None and not self.chunked:
            self.on_message_complete()  # a body delimited by the connection's close
        elif not self.complete:
            self.fail(BackendClosed("the backend closed the connection"))
        self.pool.forget(self)
        if self.listener is not None and self.headers_done:
            self.listener()

    def broken(self) -> None:
        """The backend sent bytes outside an answer (a protocol violation): the connection cannot be
        framed any more; it is closed and the pool told (though the answer was whole)."""
        self.reusable = False
        if self.transport is not None:
            self.transport.abort()
        if self.pool.on_broken is not None:
            self.pool.on_broken()

    # --- the parser's callbacks ----------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self.complete:
            raise ProtocolViolation("bytes beyond the answer")  # (the parser's caller takes it as malformed)

    def on_header(self, name: bytes, value: bytes) -> None:
        self.raw_headers.append((name, value))

    def on_headers_complete(self) -> None:
        parser = self.parser
        self.status = parser.get_status_code()
        if self.status < 200:  # 100 Continue and the like: the answer follows
            self.raw_headers = []
            self.informational = True
            return
        self.headers = CIMultiDict(
            [(name.decode("latin-1"), value.decode("latin-1")) for name, value in self.raw_headers]
        )
        length = self.headers.get("Content-Length")
        self.content_length = int(length) if length is not None and length.isdigit() else None
        self.chunked = "chunked" in self.headers.get("Transfer-Encoding", "").lower()
        content_type = self.headers.get("Content-Type", "")
        self.content_type = content_type.split(";", 1)[0].strip().lower() if content_type else ""
        self.headers_done = True
        if not self.expects_body:  # the answer to a HEAD: headers only (the connection is not kept)
            self.complete = True
        self.wake()

    def header_lines(self, dropped: frozenset[bytes]) -> bytes:
        """The answer's header lines as received, but those named in ``dropped`` (lower case) and
        in its Connection header."""
        return relayed(self.raw_headers, dropped)

    def on_body(self, body: bytes) -> None:
        self.body.append(body)
        self.held += len(body)
        if self.held > HIGH_WATER and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()
        self.wake()

    def on_message_complete(self) -> None:
        if self.informational:
            self.informational = False
            return
        if self.complete:
            return
        self.complete = True
        self.reusable = self.parser.should_keep_alive() and self.status >= 200
        self.wake()

    # --- waiting -----------------------------------------------------------------------------------

    def wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def fail(self, error: BaseException) -> None:
        if self.complete:
            self.broken()
            return
        if self.error is None:
            self.error = error
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)
        if self.transport is not None:
            self.transport.abort()
        if self.listener is not None:
            self.listener()

    async def wait(self) -> None:
        """Until the parser has more (headers, a chunk, the end), at most the pool's read timeout:
        the wait's deadline is a number, which the connection's one timer checks (no timer is made
        per wait)."""
        if self.error is not None:
            raise self.error
        self.waiter = waiter = self.loop.create_future()
        self.expect()
        try:
            await waiter
        finally:
            self.waiter = None

    async def headers_arrived(self) -> None:
        """Until the answer's headers are in (or it failed)."""
        while not self.headers_done:
            await self.wait()

    def expect(self) -> None:
        """The backend has read_timeout seconds to send more."""
        self.deadline = self.loop.time() + self.pool.read_timeout
        if self.timer is None:
            self.timer = self.loop.call_at(self.deadline, self.check)

    def check(self) -> None:
        """The timer: a wait past its deadline fails; one under way is checked again at its deadline."""
        self.timer = None
        waiting = self.listener is not None or (self.waiter is not None and not self.waiter.done())
        if not waiting or self.transport is None:
            return
        if self.loop.time() < self.deadline:
            self.timer = self.loop.call_at(self.deadline, self.check)
        else:
            self.fail(TimeoutError("the backend stayed silent"))

    # --- one exchange ------------------------------------------------------------------------------

    def reset(self) -> None:
        """Ready for the next request on this connection."""
        self.raw_headers = []
        self.status = 0
        self.headers_done = self.complete = self.received = self.reusable = False
        self.content_length = None
        self.chunked = False
        self.body.clear()
        self.held = 0
        self.error = None

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body's chunks as they arrive (bytes as sent, the transfer coding removed), then the
        connection goes back to its pool (or is closed)."""
        while True:
            while self.body:
                chunk = self.body.popleft()
                self.held -= len(chunk)
                if self.paused and self.held < HIGH_WATER // 4 and self.transport is not None:
                    self.paused = False
                    self.transport.resume_reading()
                yield chunk
            if self.complete:
                return
            await self.wait()

    def body_so_far(self) -> bytes | None:
        """The whole body when it has arrived with the headers (a short answer), else None."""
        if not self.complete:
            return None
        body = b"".join(self.body)
        self.body.clear()
        self.held = 0
        return body

    def finish(self) -> None:
        """The exchange is over: back to the pool if the answer was read to its end and both sides
        keep the connection alive, else closed."""
        if self.complete and self.reusable and not self.body and self.transport is not None:
            self.pool.give_back(self)
        else:
            self.close()

    def close(self) -> None:
        self.reusable = False
        if self.transport is not None:
            self.transport.abort()


class UpstreamPool:
    """The kept-alive connections to one backend (``host``, ``port``, ``host_header``)."""

    def __init__(
        self,
        host: str,
        port: int,
        host_header: str,
        connect_timeout: float,
        read_timeout: float,
        tls: bool = False,
        on_broken: Callable[[], None] | None = None,
    ):
        self.loop = asyncio.get_running_loop()
        self.ssl = ssl.create_default_context() if tls else None
        self.server_hostname = host if tls else None
        self.host = host
        self.port = port
        self.host_header = host_header
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.on_broken = on_broken  # told when a connection breaks the protocol after an answer's end
        self.idle: list[Answer] = []
        self.busy: set[Answer] = set()

    def give_back(self, answer: Answer) -> None:
        self.busy.discard(answer)
        if len(self.idle) < MAX_IDLE_PER_BACKEND:
            answer.reset()
            answer.exchanging = False
            self.idle.append(answer)
        else:
            answer.close()

    def forget(self, answer: Answer) -> None:
        self.busy.discard(answer)
        if answer in self.idle:
            self.idle.remove(answer)

    def idle_connection(self) -> Answer | None:
        """A kept-alive connection that is still open, or None."""
        while self.idle:
            answer = self.idle.pop()
            if answer.transport is not None and not answer.transport.is_closing():
                self.busy.add(answer)
                return answer
        return None

    async def new_connection(self) -> Answer:
        try:
            async with asyncio.timeout(self.connect_timeout):
                _, answer = await self.loop.create_connection(
                    lambda: Answer(self), self.host, self.port, ssl=self.ssl, server_hostname=self.server_hostname
                )
        except TimeoutError:
            raise BackendUnreachable(f"no connection within {self.connect_timeout:g} s") from None
        except OSError as error:
            raise BackendUnreachable(f"cannot connect: {error.strerror or error}") from None
        self.busy.add(answer)
        return answer

    def send_now(self, method: str, target: str, lines: bytes) -> Answer | None:
        """Send a request without a body on a kept-alive connection, if one is idle (else None:
        :meth:`send` opens one); its :attr:`Answer.listener` is told when the answer's headers are
        in or it failed, within read_timeout."""
        answer = self.idle_connection()
        if answer is None:
            return None
        answer.exchanging = True
        answer.expects_body = method != "HEAD"
        assert answer.transport is not None
        answer.transport.write(self.head(method, target, lines, None, True))
        answer.expect()
        return answer

    async def send(self, method: str, target: str, lines: bytes, body) -> Answer:
        """Send a request (``target``: path and query as sent; ``lines``: its header lines, without
        Host and the framing headers; ``body``: bytes, None, or an async iterator of chunks, sent
        chunked) and await its answer's headers: the :class:`Answer` to read the body from, then
        to :meth:`Answer.finish`."""
        whole = body is None or type(body) is bytes  # else an async iterator of chunks
        head = self.head(method, target, lines, body, whole)
        for attempt in (0, 1):
            answer = self.idle_connection() if attempt == 0 else None
            reused = answer is not None
            if answer is None:
                answer = await self.new_connection()
            answer.exchanging = True  # (an idle connection was reset when given back; a new one is fresh)
            answer.expects_body = method != "HEAD"
            assert answer.transport is not None
            try:
                if whole:
                    answer.transport.write(head + body if body else head)
                else:
                    answer.transport.write(head)
                    async for chunk in body:
                        if chunk:
                            answer.transport.write(b"%x\r\n%b\r\n" % (len(chunk), chunk))
                            await answer.drain()
                    answer.transport.write(b"0\r\n\r\n")
                while not answer.headers_done:
                    await answer.wait()
                return answer
            except BackendClosed:
                answer.close()
                if not (reused and whole and not answer.received):  # else: a stale kept-alive connection
                    raise
            except BaseException:
                answer.close()
                raise
        raise AssertionError("the second attempt returns or raises")

    def head(self, method: str, target: str, lines: bytes, body, whole: bool) -> bytes:
        """The request line and headers, with Host and the body's framing (``whole``: the body is
        bytes or None, else it streams, chunked)."""
        if not whole:
            framing = b"Transfer-Encoding: chunked\r\n"
        elif body or (body is not None and method not in BODILESS):
            framing = b"Content-Length: %d\r\n" % len(body)
        else:
            framing = b""
        start = f"{method} {target} HTTP/1.1\r\nHost: {self.host_header}\r\n".encode("latin-1")
        return start + lines + framing + b"\r\n"

    def close(self) -> None:
        for answer in [*self.idle, *self.busy]:
            answer.close()
        self.idle.clear()
        self.busy.clear()
