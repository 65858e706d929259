"""Run ``hetlb serve``: one dispatcher process, or M of them under a supervising parent.

:func:`serve` checks the configuration (done by :class:`ServeConfig`), compiles the decision rule,
then binds every listening socket (a port that cannot be bound is a one-line error, before any
dispatcher runs), then runs dispatcher 0 in this process, or forks M dispatcher processes that
inherit their sockets and share nothing else. SIGTERM or SIGINT stops accepting, lets the requests
in flight finish (at most ``drain`` seconds) and exits 0; the parent passes the signal on to its
children and waits for them. SIGHUP reloads the configuration (hetlb.gateway.fleet); the parent passes
it on too, and relays each admin API change that one dispatcher made to the others over a pipe per
dispatcher (the parent is what they share; a change reaches every dispatcher with no port or peer
list to keep, and a dispatcher that is gone is simply not written to).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing
import multiprocessing.connection
import os
import signal
import socket
import sys
import time
from dataclasses import dataclass

from aiohttp import web

from hetlb import validation
from hetlb.errors import InputError
from hetlb.gateway.admin import admin_app
from hetlb.gateway.config import ServeConfig
from hetlb.gateway.dispatcher import Dispatcher
from hetlb.gateway.fleet import ConfigSource, Fleet
from hetlb.gateway.http.downstream import BACKLOG, Downstream, Limits
from hetlb.gateway.http.proxy import Proxy
from hetlb.gateway.metrics import Metrics
from hetlb.processes import STOP_GRACE_S, die_with_parent, stop_processes
from hetlb.wire.addresses import Address
from hetlb.wire.runtime import freeze_heap, loop_factory

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
        raise InputError(name, f"cannot resolve {validation.shorten(address.host)}: {error.strerror}") from None
    except (UnicodeError, ValueError, OverflowError) as error:  # a name IDNA refuses, a port out of range
        raise InputError(name, f"cannot resolve {validation.shorten(address.host)}: {error}") from None
    family, kind, protocol, _, where = infos[0]
    sock = socket.socket(family, kind, protocol)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(where)
        sock.listen(BACKLOG)
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


def serve(config: ServeConfig, *, announce=None, source: ConfigSource | None = None) -> int:
    """Run the dispatcher(s) of ``config`` until SIGTERM or SIGINT; the exit status (0 after a
    clean stop). ``announce`` (a function of one line) is told where each dispatcher listens and
    of the fleet's changes; ``source`` is read again at SIGHUP (None: only the backends file)."""
    say = announce or (lambda line: print(line, file=sys.stderr, flush=True))
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # until a dispatcher (or the parent) takes it
    Dispatcher(config, config.seed).warm_up()  # compile, or load the cached rule, before listening
    sockets = bind_all(config)
    if config.dispatchers == 1:
        return run_dispatcher(config, 0, sockets[0], say, source)
    return supervise(config, sockets, say, source)


def dispatcher_seed(config: ServeConfig, m: int) -> int | None:
    return None if config.seed is None else config.seed + m


def run_dispatcher(config: ServeConfig, m: int, sockets: Sockets, say, source=None, pipe=None) -> int:
    """Run dispatcher m on its sockets until a stop signal (uvloop when installed); ``pipe``: its
    connection to the parent, which relays admin API changes between dispatchers."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(dispatch(config, m, sockets, say, source, pipe))


async def dispatch(config: ServeConfig, m: int, sockets: Sockets, say, source=None, pipe=None) -> int:
    dispatcher = Dispatcher(config, dispatcher_seed(config, m))
    dispatcher.warm_up()
    metrics = Metrics(dispatcher)
    proxy = Proxy(config, dispatcher, metrics, m)
    fleet = Fleet(proxy, m, source, say)
    freeze_heap()
    started = time.monotonic()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for number in STOP_SIGNALS:
        loop.add_signal_handler(number, stop.set)
    loop.add_signal_handler(signal.SIGHUP, fleet.reload)
    if pipe is not None:
        relay_through(pipe, fleet, loop)

    downstream = Downstream(proxy.handle, limits(config), proxy.on_server_error, proxy.answer_now)
    admin_runner = None
    await proxy.start()
    await fleet.start()  # the discovered types known before the first request
    await downstream.start(sockets.listen)
    if sockets.admin is not None:
        admin_application = admin_app(fleet, metrics, m, started)
        admin_runner = web.AppRunner(admin_application, handle_signals=False, access_log=None)
        await admin_runner.setup()
        await web.SockSite(admin_runner, sockets.admin).start()
    listen, admin = config.dispatcher_addresses(m)
    say(
        f"hetlb serve: dispatcher {m} listening on http://{listen}"
        + (f", admin http://{admin}" if admin is not None else "")
        + f"; policy {config.policy.id}, {len(dispatcher.current())} backends, signals {','.join(config.signals.names())}"
    )
    await stop.wait()
    say(f"hetlb serve: dispatcher {m} stopping (draining at most {config.drain:g} s)")
    await downstream.stop(config.drain)  # stops accepting, waits for the requests in flight, at most `drain`
    await fleet.stop()
    await proxy.stop()
    if admin_runner is not None:
        await admin_runner.cleanup()
    return 0


def limits(config: ServeConfig) -> Limits:
    """What the proxy's server side allows its clients."""
    return Limits(config.max_header_bytes, config.header_timeout, config.body_timeout, config.keep_alive_timeout)


def relay_through(pipe, fleet: Fleet, loop) -> None:
    """Admin API changes go to the parent over ``pipe``, and those of the other dispatchers come
    back on it (one JSON message each)."""
    fleet.relay = lambda change: pipe.send_bytes(json.dumps(change).encode())

    def receive() -> None:
        try:
            message = pipe.recv_bytes()
        except (EOFError, OSError):
            loop.remove_reader(pipe.fileno())
            return
        fleet.relayed(message)

    loop.add_reader(pipe.fileno(), receive)


# --- several dispatchers ---------------------------------------------------------------------------


def stop_before_serving(number, frame):
    """A stop signal before the dispatcher's loop takes it: the child has served nothing, it ends
    at once with status 0 (a stop, not a failure). By os._exit, not by an exception: raised between
    two steps of the event loop's own start (uvloop's), SystemExit left the loop half started, and
    the child failed on its way out (status 1, or a crash)."""
    os._exit(0)


def child_main(config: ServeConfig, m: int, sockets: Sockets, source, pipe) -> None:
    die_with_parent(signal.SIGTERM)  # Linux: no orphaned dispatcher, and it drains on the way out
    for number in STOP_SIGNALS:
        signal.signal(number, stop_before_serving)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # blocked by the parent across the fork
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # until the dispatcher's loop reloads on it
    code = run_dispatcher(config, m, sockets, lambda line: print(line, file=sys.stderr, flush=True), source, pipe)
    sys.stdout.flush()
    os._exit(code)


def supervise(config: ServeConfig, sockets: list[Sockets], say, source=None) -> int:
    """Fork one process per dispatcher, pass stop signals and SIGHUP on, relay admin API changes
    between them, and stop all when one dies."""
    context = multiprocessing.get_context("fork")
    stopping = False
    children: list = []

    def on_signal(number, frame):
        nonlocal stopping
        stopping = True

    def on_hangup(number, frame):
        for child in children:
            with contextlib.suppress(ProcessLookupError, TypeError):
                os.kill(child.pid, signal.SIGHUP)

    previous = {number: signal.signal(number, on_signal) for number in STOP_SIGNALS}
    previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, on_hangup)
    pipes = [context.Pipe() for _ in sockets]  # (the parent's end, the child's end)
    try:
        # a stop signal while the children start waits until each has its handler (and the parent its loop)
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            for m, own in enumerate(sockets):
                child = context.Process(
                    target=child_main, args=(config, m, own, source, pipes[m][1]), name=f"hetlb-dispatcher-{m}"
                )
                child.start()
                children.append(child)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        for own in sockets:
            own.listen.close()
            if own.admin is not None:
                own.admin.close()
        ends = [parent for parent, _ in pipes]
        while not stopping and all(child.is_alive() for child in children):
            for ready in multiprocessing.connection.wait([*ends, *(child.sentinel for child in children)], timeout=0.2):
                if ready in ends:
                    relay(ready, ends)
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
        for parent, child_end in pipes:
            parent.close()
            child_end.close()


def relay(source, ends: list) -> None:
    """Pass one dispatcher's admin API change (from its pipe ``source``) on to every other one."""
    try:
        message = source.recv_bytes()
    except (EOFError, OSError):
        ends.remove(source)  # its dispatcher is gone (the loop sees its sentinel)
        return
    for end in ends:
        if end is not source:
            with contextlib.suppress(OSError):
                end.send_bytes(message)
