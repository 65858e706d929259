"""A small HTTP backend for the tests of hetlb serve, run as its own process:
``python tests/support/echo_backend.py PORT [PORT ...]``.

Every path answers with a JSON echo of the request (method, path, query, body, headers) and
``X-Queue-Length`` (the requests it holds after this one), except:

- ``/healthz``: 200, or 503 after ``/admin/unhealthy`` (until ``/admin/healthy``);
- ``/load``: ``{"queue_length": n}``;
- ``/status/CODE``: an answer with that status;
- ``/sleep/MS``: answers after MS milliseconds (a stall the proxy times out on);
- ``/hold``: answers when ``/admin/release`` is called (requests a test keeps in a backend);
- ``/stream/N``: a ``text/event-stream`` of N events ``data: {"event": k}`` (chunked): the first
  at once, the others after ``/admin/release``;
- ``/tick/N/MS``: a ``text/event-stream`` of N events, one every MS milliseconds;
- ``/big/MB``: MB mebibytes of one event stream, as fast as the client takes them;
- ``/break/N``: N events of such a stream at once, then the connection reset (a backend that
  fails mid-answer); ``/short``: a ``Content-Length`` of 100 and 10 bytes, then the connection
  closed;
- ``/admin/count``: ``{"count": n, "cancelled": c}``, the requests it received (all but these
  admin paths, ``/healthz`` and ``/load``) and those of them whose client went away before their
  answer's end.
"""

import asyncio
import json
import sys

from aiohttp import web


def make_app(port: int) -> web.Application:
    state = {"held": 0, "count": 0, "cancelled": 0, "healthy": True, "release": asyncio.Event()}

    async def stream(request: web.Request, path: str) -> web.StreamResponse:
        kind, *numbers = path.strip("/").split("/")
        answer = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await answer.prepare(request)
        if kind == "big":
            event = b"data: " + b"x" * (2**16 - 8) + b"\n\n"
            for _ in range(16 * int(numbers[0])):
                await answer.write(event)
            await answer.write_eof()
            return answer
        for k in range(int(numbers[0])):
            if kind == "stream" and k == 1:
                await state["release"].wait()
            if kind == "tick" and k > 0:
                await asyncio.sleep(float(numbers[1]) / 1000.0)
            await answer.write(f'data: {{"event": {k}}}\n\n'.encode())
        if kind == "break":
            request.transport.abort()
            return answer
        await answer.write_eof()
        return answer

    async def handle(request: web.Request) -> web.StreamResponse:
        path = request.path
        if path == "/healthz":
            return web.Response(status=200 if state["healthy"] else 503, text="ok")
        if path == "/load":
            return web.json_response({"queue_length": state["held"]})
        if path.startswith("/admin/"):
            action = path.removeprefix("/admin/")
            if action == "count":
                return web.json_response({"count": state["count"], "cancelled": state["cancelled"]})
            if action == "release":
                state["release"].set()
                state["release"] = asyncio.Event()
            else:
                state["healthy"] = action == "healthy"
            return web.Response(text=action)
        state["held"] += 1
        state["count"] += 1
        try:
            if path.startswith(("/stream/", "/break/", "/tick/", "/big/")):
                return await stream(request, path)
            if path == "/short":
                answer = web.StreamResponse(headers={"Content-Length": "100"})
                await answer.prepare(request)
                await answer.write(b"0123456789")
                request.transport.close()
                return answer
            body = await request.read()
            if path.startswith("/sleep/"):
                await asyncio.sleep(float(path.removeprefix("/sleep/")) / 1000.0)
            if path == "/hold":
                await state["release"].wait()
            status = int(path.removeprefix("/status/")) if path.startswith("/status/") else 200
            echo = {
                "port": port,
                "method": request.method,
                "path": request.path,
                "query": request.rel_url.raw_query_string,  # as received, undecoded
                "body": body.decode("latin-1"),
                "headers": [[name, value] for name, value in request.headers.items()],
            }
        except (asyncio.CancelledError, ConnectionError):
            state["cancelled"] += 1
            raise
        finally:
            state["held"] -= 1
        return web.Response(
            status=status,
            text=json.dumps(echo),
            content_type="application/json",
            headers={"X-Queue-Length": str(state["held"]), "X-Custom-Answer": "yes", "Set-Cookie": "a=1"},
        )

    app = web.Application(client_max_size=64 * 2**20)
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


async def main(ports: list[int]) -> None:
    runners = []
    for port in ports:
        runner = web.AppRunner(make_app(port), access_log=None, handler_cancellation=True)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port, backlog=4096).start()  # bursts of new connections
        runners.append(runner)
    print("ready", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main([int(port) for port in sys.argv[1:]]))
