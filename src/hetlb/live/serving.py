"""Run ``hetlb serve``: one dispatcher process, or M of them under a supervising parent.

:func:`serve` checks the configuration (done by :class:`ServeConfig`), compiles the decision rule,
then binds every listening socket (a port that cannot be bound is a one-line error, before any
dispatcher runs), then runs dispatcher 0 in this process, or forks M dispatcher processes that
inherit their sockets and share nothing else. SIGTERM or SIGINT stops accepting, lets the requests
in flight finish (at most ``drain`` seconds) and exits 0; the parent passes the signal on to its
children and waits for them.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import multiprocessing.connection
import os
import signal
import socket
import sys
import time
from dataclasses import dataclass

from aiohttp import web

from hetlb.errors import InputError
from hetlb.live.config import Address, ServeConfig
from hetlb.live.dispatcher import Dispatcher
from hetlb.live.metrics import Metrics, status
from hetlb.live.proxy import Proxy
from hetlb.live.runtime import freeze_heap, loop_factory
from hetlb.processes import STOP_GRACE_S, die_with_parent, stop_processes

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@dataclass
class Sockets:
    """The listening sockets of one dispatcher."""

    listen: socket.socket
    admin: socket.socket | None


def bind(name: str, address: Address) -> socket.socket:
    """A listening TCP socket on ``address``, or a one-line InputError naming ``name``."""
    try:
        infos = socket.getaddrinfo(address.host, address.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as error:
        raise InputError(name, f"cannot resolve {address.host}: {error.strerror}") from None
    family, kind, protocol, _, where = infos[0]
    sock = socket.socket(family, kind, protocol)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(where)
        sock.listen(1024)
    except OSError as error:
        sock.close()
        raise InputError(name, f"cannot listen on {address}: {error.strerror or error}") from None
    sock.setblocking(False)
    return sock


def bind_all(config: ServeConfig) -> list[Sockets]:
    """Every dispatcher's sockets; on an error none stays open."""
    bound: list[socket.socket] = []
    result = []
    try:
        for m in range(config.dispatchers):
            listen, admin = config.dispatcher_addresses(m)
            listen_socket = bind("listen", listen)
            bound.append(listen_socket)
            admin_socket = bind("admin", admin) if admin is not None else None
            if admin_socket is not None:
                bound.append(admin_socket)
            result.append(Sockets(listen_socket, admin_socket))
    except InputError:
        for sock in bound:
            sock.close()
        raise
    return result


def serve(config: ServeConfig, *, announce=None) -> int:
    """Run the dispatcher(s) of ``config`` until SIGTERM or SIGINT; the exit status (0 after a
    clean stop). ``announce`` (a function of one line) is told where each dispatcher listens."""
    say = announce or (lambda line: print(line, file=sys.stderr, flush=True))
    Dispatcher(config, config.seed).warm_up()  # compile, or load the cached rule, before listening
    sockets = bind_all(config)
    if config.dispatchers == 1:
        return run_dispatcher(config, 0, sockets[0], say)
    return supervise(config, sockets, say)


def dispatcher_seed(config: ServeConfig, m: int) -> int | None:
    return None if config.seed is None else config.seed + m


def run_dispatcher(config: ServeConfig, m: int, sockets: Sockets, say) -> int:
    """Run dispatcher m on its sockets until a stop signal (uvloop when installed)."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(dispatch(config, m, sockets, say))


async def dispatch(config: ServeConfig, m: int, sockets: Sockets, say) -> int:
    dispatcher = Dispatcher(config, dispatcher_seed(config, m))
    dispatcher.warm_up()
    metrics = Metrics(dispatcher)
    proxy = Proxy(config, dispatcher, metrics, m)
    freeze_heap()
    started = time.monotonic()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for number in STOP_SIGNALS:
        loop.add_signal_handler(number, stop.set)

    app = web.Application(client_max_size=config.max_body_bytes, handler_args=header_limits(config))
    app.router.add_route("*", "/{tail:.*}", proxy.handle)
    runner = web.AppRunner(
        app, handle_signals=False, shutdown_timeout=config.drain, handler_cancellation=True, access_log=None
    )
    await runner.setup()
    admin_runner = None
    await proxy.start()
    await web.SockSite(runner, sockets.listen).start()
    if sockets.admin is not None:
        admin_app = web.Application()

        async def metrics_page(request):
            from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

            return web.Response(body=generate_latest(metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

        async def status_page(request):
            return web.json_response(status(dispatcher, metrics, m, started))

        async def ready_page(request):
            return web.Response(text="ready\n")

        admin_app.router.add_get("/metrics", metrics_page)
        admin_app.router.add_get("/status", status_page)
        admin_app.router.add_get("/ready", ready_page)
        admin_runner = web.AppRunner(admin_app, handle_signals=False, access_log=None)
        await admin_runner.setup()
        await web.SockSite(admin_runner, sockets.admin).start()
    listen, admin = config.dispatcher_addresses(m)
    say(
        f"hetlb serve: dispatcher {m} listening on http://{listen}"
        + (f", admin http://{admin}" if admin is not None else "")
        + f"; policy {config.policy.id}, {dispatcher.n_backends} backends, signals {','.join(config.signals.names())}"
    )
    await stop.wait()
    say(f"hetlb serve: dispatcher {m} stopping (draining at most {config.drain:g} s)")
    await runner.cleanup()  # stops accepting, waits for the requests in flight, at most `drain`
    await proxy.stop()
    if admin_runner is not None:
        await admin_runner.cleanup()
    return 0


def header_limits(config: ServeConfig) -> dict:
    """The HTTP parser's limits: a request line and each header at most max_header_bytes."""
    return {"max_line_size": config.max_header_bytes, "max_field_size": config.max_header_bytes}


# --- several dispatchers ---------------------------------------------------------------------------


def child_main(config: ServeConfig, m: int, sockets: Sockets) -> None:
    die_with_parent(signal.SIGTERM)  # Linux: no orphaned dispatcher, and it drains on the way out
    for number in STOP_SIGNALS:
        signal.signal(number, signal.SIG_DFL)
    code = run_dispatcher(config, m, sockets, lambda line: print(line, file=sys.stderr, flush=True))
    sys.stdout.flush()
    os._exit(code)


def supervise(config: ServeConfig, sockets: list[Sockets], say) -> int:
    """Fork one process per dispatcher, pass stop signals on, and stop all when one dies."""
    context = multiprocessing.get_context("fork")
    stopping = False

    def on_signal(number, frame):
        nonlocal stopping
        stopping = True

    previous = {number: signal.signal(number, on_signal) for number in STOP_SIGNALS}
    children = []
    try:
        for m, own in enumerate(sockets):
            child = context.Process(target=child_main, args=(config, m, own), name=f"hetlb-dispatcher-{m}")
            child.start()
            children.append(child)
        for own in sockets:
            own.listen.close()
            if own.admin is not None:
                own.admin.close()
        while not stopping and all(child.is_alive() for child in children):
            multiprocessing.connection.wait([child.sentinel for child in children], timeout=0.2)
        failed = [child for child in children if not child.is_alive() and child.exitcode != 0]
        stop_processes(children, config.drain + STOP_GRACE_S)  # each drains, at most `drain` seconds
        if failed and not stopping:
            say(f"hetlb serve: dispatcher {children.index(failed[0])} exited with status {failed[0].exitcode}")
            return 1
        return 0 if all(child.exitcode == 0 for child in children) else 1
    finally:
        for child in children:
            if child.is_alive():
                child.kill()
        for number, handler in previous.items():
            signal.signal(number, handler)
