"""A misbehaving HTTP backend for the fault tests of hetlb serve, run as its own process:
``python tests/support/broken_backend.py PORT [PORT ...]``.

It speaks HTTP/1.1 on raw asyncio streams (no HTTP library, so that it can break the protocol) and
keeps its connections alive. The last segment of a request's path picks what it does:

- ``ok`` (and every segment not named below): 200 with a JSON body ``{"port", "target", "id"}``, the
  request target as received and its ``X-Request-Id`` header;
- ``healthz``: 200;
- ``reset-early``: resets the connection (RST) without answering;
- ``reset``: a ``Content-Length`` of 1000, 100 bytes, then a reset;
- ``short``: a ``Content-Length`` of 100, 10 bytes, then the connection closed;
- ``long``: a ``Content-Length`` of 10 and then, on the same write, a whole second answer
  (``LONG_TAIL``) that no request asked for; the connection stays open;
- ``garbage``: bytes that are not HTTP, then the connection closed;
- ``stall-headers``: a status line and headers (``Content-Length: 100``), then nothing;
- ``stall``: nothing at all (the connection stays open);
- ``hold``: nothing until the process is killed (requests a test keeps in flight);
- ``bad-chunked``: a chunked answer whose second chunk size is not hexadecimal, then closed;
- ``cut-stream``: three events of a chunked ``text/event-stream``, then closed without the last chunk;
- ``stall-stream``: three such events, then nothing (the connection stays open);
- ``bad-events``: a complete chunked ``text/event-stream`` whose content is not well-formed
  server-sent events (``BAD_EVENTS``);
- ``trickle``: a ``Content-Length`` of 2000 sent 100 bytes every 50 ms.

``/admin/count`` answers ``{"count": n}``, the requests received (all but ``/admin/...`` and
``healthz``); ``/admin/seen`` the list of their ``{"target", "headers", "head"}`` (headers in
order, and the whole head as received).
"""

import asyncio
import json
import socket
import struct
import sys

LONG_TAIL = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nX-Smuggled: yes\r\n\r\nFAKE"
BAD_EVENTS = (
    b"data: \xff\xfe not utf-8\n\n"
    b"event\n"
    b": a comment\r\n\r\n"
    b"data: one\rdata: two\r\r"
    b"retry: x\nid: \x00\n\n" + b"data:" * 2000  # no end of the last event
)


def answer(status: str, body: bytes, *headers: str) -> bytes:
    head = [f"HTTP/1.1 {status}", f"Content-Length: {len(body)}", *headers]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def reset(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP reset (linger 0) instead of a FIN."""
    writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def read_request(reader: asyncio.StreamReader) -> tuple[str, list[tuple[str, str]], str] | None:
    """(target, headers, head as received) of the next request, its body read and dropped; None at
    the end of the stream."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    target = lines[0].split(" ")[1] if lines[0].count(" ") >= 2 else ""
    headers = [(name.strip(), value.strip()) for name, _, value in (line.partition(":") for line in lines[1:] if line)]
    fields = {name.lower(): value for name, value in headers}
    if "chunked" in fields.get("transfer-encoding", "").lower():
        while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
            await reader.readexactly(size + 2)
        while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers
            pass
    else:
        await reader.readexactly(int(fields.get("content-length", "0")))
    return target, headers, head.decode("latin-1")


def make_handler(port: int, state: dict):
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while request := await read_request(reader):
                target, headers, head = request
                path = target.split("?")[0]
                mode = path.rsplit("/", 1)[-1]
                if path.startswith("/admin/"):
                    body = {"count": state["count"]} if mode == "count" else state["seen"]
                    writer.write(answer("200 OK", json.dumps(body).encode(), "Content-Type: application/json"))
                    await writer.drain()
                    continue
                if mode == "healthz":
                    writer.write(answer("200 OK", b"ok"))
                    await writer.drain()
                    continue
                state["count"] += 1
                state["seen"].append({"target": target, "headers": headers, "head": head})
                outcome = await misbehave(mode, writer)
                if outcome == "closed":
                    return
                if outcome == "answered":
                    continue
                fields = {name.lower(): value for name, value in headers}
                body = json.dumps({"port": port, "target": target, "id": fields.get("x-request-id")}).encode()
                writer.write(answer("200 OK", body, "Content-Type: application/json"))
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.transport.abort()

    return handle


async def misbehave(mode: str, writer: asyncio.StreamWriter) -> str:
    """Do what ``mode`` asks: "closed" (the connection is finished with), "answered" (it waits for
    the next request) or "normal" (the normal answer is to be sent)."""
    if mode == "reset-early":
        reset(writer)
    elif mode == "reset":
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"r" * 100)
        await writer.drain()
        await asyncio.sleep(0.05)
        reset(writer)
    elif mode == "short":
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
        await writer.drain()
        writer.close()
    elif mode == "long":
        writer.write(answer("200 OK", b"0123456789") + LONG_TAIL)
        await writer.drain()
        return "answered"  # and waits for the next request on this connection
    elif mode == "garbage":
        writer.write(b"\x00\xff\xfeSSH-2.0-OpenSSH\r\nnot http at all\r\n\r\n")
        await writer.drain()
        writer.close()
    elif mode == "stall-headers":
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
        await writer.drain()
        await asyncio.Event().wait()
    elif mode in ("stall", "hold"):
        await asyncio.Event().wait()
    elif mode == "bad-chunked":
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk(b"hello") + b"zz\r\nnope\r\n")
        await writer.drain()
        writer.close()
    elif mode in ("cut-stream", "stall-stream"):
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        for k in range(3):
            writer.write(chunk(b'data: {"event": %d}\n\n' % k))
            await writer.drain()
            await asyncio.sleep(0.02)
        if mode == "stall-stream":
            await asyncio.Event().wait()
        writer.close()
    elif mode == "bad-events":
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        for start in range(0, len(BAD_EVENTS), 1000):
            writer.write(chunk(BAD_EVENTS[start : start + 1000]))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return "answered"
    elif mode == "trickle":
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2000\r\n\r\n")
        for _ in range(20):
            writer.write(b"t" * 100)
            await writer.drain()
            await asyncio.sleep(0.05)
        return "answered"
    else:
        return "normal"
    return "closed"


async def main(ports: list[int]) -> None:
    servers = []
    for port in ports:
        state: dict = {"count": 0, "seen": []}
        servers.append(await asyncio.start_server(make_handler(port, state), "127.0.0.1", port, backlog=4096))
    print("ready", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main([int(port) for port in sys.argv[1:]]))
