"""The proxy's client to its backends (hetlb.gateway.http.upstream) against raw HTTP/1.1 servers written
here byte for byte, on 127.0.0.1: kept-alive connections reused, a connection the backend closed
while idle replaced without failing the request, chunked and close-delimited bodies, a 100
Continue before the answer, HEAD, the read timeout, a refused connection, and an answer cut short."""

from __future__ import annotations

import asyncio

import pytest

from hetlb.gateway.http.upstream import BackendClosed, BackendUnreachable, UpstreamPool

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Queue-Length: 0\r\n\r\nok"


class RawServer:
    """A server that reads one request head at a time and answers each with ``answers[i]`` (the
    i-th request of the server, bytes as given; None: no answer); ``close_after``: it closes the
    connection after each answer, without saying so."""

    def __init__(self, answers, close_after: bool = False):
        self.answers = list(answers)
        self.close_after = close_after
        self.connections = 0
        self.requests: list[bytes] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                self.requests.append(head)
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")
                    ),
                    0,
                )
                if length:
                    await reader.readexactly(length)
                answer = self.answers[len(self.requests) - 1]
                if answer is None:
                    await asyncio.sleep(3600)
                for part in answer if isinstance(answer, list) else [answer]:
                    writer.write(part)
                    await writer.drain()
                    await asyncio.sleep(0.01)
                if self.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def __aenter__(self) -> int:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def __aexit__(self, *exc_info) -> None:
        self.server.close()


def pool_of(port: int, read_timeout: float = 5.0) -> UpstreamPool:
    return UpstreamPool("127.0.0.1", port, f"127.0.0.1:{port}", connect_timeout=1.0, read_timeout=read_timeout)


async def body_of(answer) -> bytes:
    return b"".join([chunk async for chunk in answer.chunks()])


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 20))


def test_a_kept_alive_connection_is_reused_and_the_request_is_sent_as_given():
    async def scenario():
        server = RawServer([OK, OK, OK])
        async with server as port:
            pool = pool_of(port)
            for body in (None, b"abc", None):
                answer = await pool.send("POST" if body else "GET", "/a%2Fb?x=%2F", b"X-Job-Type: a\r\n", body)
                assert answer.status == 200 and answer.headers["X-Queue-Length"] == "0"
                assert await body_of(answer) == b"ok"
                answer.finish()
            pool.close()
        return server

    server = run(scenario())
    assert server.connections == 1  # one connection for the three
    host = server.requests[0].split(b"\r\n")[1]
    assert server.requests[0] == b"GET /a%2Fb?x=%2F HTTP/1.1\r\n" + host + b"\r\nX-Job-Type: a\r\n\r\n"
    assert host.startswith(b"Host: 127.0.0.1:") and b"Content-Length: 3\r\n" in server.requests[1]


def test_a_connection_the_backend_closed_while_idle_is_replaced():
    async def scenario():
        server = RawServer([OK, OK], close_after=True)
        async with server as port:
            pool = pool_of(port)
            for _ in range(2):
                answer = await pool.send("GET", "/", b"", None)
                assert await body_of(answer) == b"ok"
                answer.finish()
                await asyncio.sleep(0.05)  # the backend has closed it meanwhile
            pool.close()
        return server

    assert run(scenario()).connections == 2


def test_chunked_close_delimited_and_informational_answers():
    chunked = [
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/event-stream\r\n\r\n",
        b"5\r\nhello\r\n",
        b"6\r\n world\r\n0\r\n\r\n",
    ]
    close_delimited = [b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", b"until ", b"the end"]
    continued = b"HTTP/1.1 100 Continue\r\n\r\n" + OK

    async def scenario():
        results = []
        for answers, close_after in (([chunked], False), ([close_delimited], True), ([continued], False)):
            async with RawServer(answers, close_after) as port:
                pool = pool_of(port)
                answer = await pool.send("GET", "/", b"", None)
                results.append((answer.status, answer.content_type, await body_of(answer)))
                answer.finish()
                pool.close()
        return results

    assert run(scenario()) == [
        (200, "text/event-stream", b"hello world"),
        (200, "", b"until the end"),
        (200, "", b"ok"),
    ]


def test_head_the_read_timeout_a_refusal_and_a_cut_answer():
    async def scenario():
        async with RawServer([b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", None]) as port:
            pool = pool_of(port, read_timeout=0.2)
            answer = await pool.send("HEAD", "/", b"", None)
            assert answer.content_length == 10 and await body_of(answer) == b""
            answer.finish()
            with pytest.raises(TimeoutError):
                await pool.send("GET", "/", b"", None)  # no answer: silent past the read timeout
            pool.close()
        async with RawServer([[b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", b"short"]], close_after=True) as port:
            pool = pool_of(port)
            answer = await pool.send("GET", "/", b"", None)
            with pytest.raises(BackendClosed):
                await body_of(answer)
            answer.finish()
            pool.close()
        refused = pool_of(port)
        with pytest.raises(BackendUnreachable):
            await refused.send("GET", "/", b"", None)

    run(scenario())
