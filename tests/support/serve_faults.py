"""Helpers of the fault tests of hetlb serve: raw-socket clients, a fleet of one broken and one echo
backend behind one dispatcher, the checks made after every fault, and the soak with client aborts."""

from __future__ import annotations

import collections
import dataclasses
import http.client
import json
import re
import selectors
import socket
import struct
import sys
import threading
import time
from pathlib import Path

from support.serve_processes import Processes, error_text, get, status, wait_for

BROKEN_BACKEND = Path(__file__).with_name("broken_backend.py")
TRACEBACK = "Traceback (most recent call last)"
PREFIX = "/prefix"
"""The path prefix of the broken backend's URL: no request may reach it outside this prefix."""

TIMEOUTS = {"--header-timeout": "1.5s", "--body-timeout": "1s", "--keep-alive-timeout": "1s"}
"""Small values of the client timeouts, so that the tests of slow and idle clients run fast."""


def url(port: int, path: str = "") -> str:
    return f"http://127.0.0.1:{port}{path}"


# --- raw clients --------------------------------------------------------------------------------------


@dataclasses.dataclass
class Answer:
    """What a raw client got: ``status`` None when no status line came; ``complete`` False when the
    body ended before its announced end (or its terminating chunk); ``hung`` when the client gave
    up waiting."""

    status: int | None
    headers: http.client.HTTPMessage | None
    body: bytes
    complete: bool
    hung: bool = False


def raw_request(path: str, job_type: str = "broken", method: str = "GET", extra: str = "", body: bytes = b"") -> bytes:
    """The bytes of one request, its headers exactly as given (``extra``: more header lines, CRLF-ended)."""
    length = f"Content-Length: {len(body)}\r\n" if body else ""
    head = f"{method} {path} HTTP/1.1\r\nHost: proxy.test\r\nX-Job-Type: {job_type}\r\n{length}{extra}\r\n"
    return head.encode("latin-1") + body


def read_answer(connection: socket.socket) -> Answer:
    """One answer read from ``connection`` (its timeout bounds every read)."""
    response = http.client.HTTPResponse(connection)
    try:
        response.begin()
    except TimeoutError:
        return Answer(None, None, b"", False, hung=True)
    except (http.client.HTTPException, ConnectionError):
        return Answer(None, None, b"", False)
    try:
        return Answer(response.status, response.headers, response.read(), True)
    except http.client.IncompleteRead as cut:
        return Answer(response.status, response.headers, cut.partial, False)
    except TimeoutError:
        return Answer(response.status, response.headers, b"", False, hung=True)
    except (http.client.HTTPException, ConnectionError):
        return Answer(response.status, response.headers, b"", False)


def exchange(port: int, data: bytes, timeout: float = 5.0) -> Answer:
    """Send ``data`` on a new connection and read one answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as connection:
        connection.sendall(data)
        return read_answer(connection)


def abort(connection: socket.socket) -> None:
    """Close with a TCP reset, as a client that goes away mid-answer."""
    connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    connection.close()


def closed_by_peer(connection: socket.socket, timeout: float) -> bool:
    """Whether the other end closes ``connection`` within ``timeout`` (what it sends first is read and dropped)."""
    connection.settimeout(timeout)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            connection.settimeout(max(0.01, deadline - time.monotonic()))
            if not connection.recv(65536):
                return True
    except TimeoutError:
        return False
    except ConnectionError:
        return True
    return False


def slow_clients(port: int, count: int, request: bytes, seconds_per_byte: float, timeout: float) -> list[float]:
    """Open ``count`` connections, each sending ``request`` one byte every ``seconds_per_byte``, until
    the other end closes each or ``timeout`` passes: the times (s after the start) at which they
    were closed (fewer than ``count`` when some stayed open)."""
    selector = selectors.DefaultSelector()
    start = time.monotonic()
    sent: dict[socket.socket, int] = {}
    for _ in range(count):
        connection = socket.create_connection(("127.0.0.1", port), timeout=10)
        connection.setblocking(False)
        selector.register(connection, selectors.EVENT_READ)
        sent[connection] = 0
    closed_at: list[float] = []

    def close(connection: socket.socket) -> None:
        selector.unregister(connection)
        connection.close()
        del sent[connection]
        closed_at.append(time.monotonic() - start)

    next_byte = start
    try:
        while sent and time.monotonic() - start < timeout:
            if time.monotonic() >= next_byte:
                for connection in list(sent):
                    try:
                        connection.send(request[sent[connection] : sent[connection] + 1])
                        sent[connection] = min(sent[connection] + 1, len(request) - 1)
                    except (BlockingIOError, InterruptedError):
                        pass
                    except OSError:
                        close(connection)
                next_byte += seconds_per_byte
            for key, _ in selector.select(timeout=0.05):
                try:
                    if not key.fileobj.recv(65536):  # type: ignore[union-attr]
                        close(key.fileobj)  # type: ignore[arg-type]
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError:
                    close(key.fileobj)  # type: ignore[arg-type]
    finally:
        for connection in list(sent):
            connection.close()
        selector.close()
    return closed_at


# --- paths -----------------------------------------------------------------------------------------


def resolved_path(target: str) -> str:
    """The path a backend that decodes ``%2e`` and ``%2f`` and removes dot segments (RFC 3986,
    5.2.4) would serve for ``target``.

    >>> resolved_path("/prefix/..%2f..%2Fetc/passwd"), resolved_path("/prefix/a/%2E/../b/?q=/../")
    ('/etc/passwd', '/prefix/b/')
    """
    path = target.split("?", 1)[0]
    for encoded, plain in (("%2e", "."), ("%2f", "/")):
        path = re.sub(re.escape(encoded), plain, path, flags=re.IGNORECASE)
    segments: list[str] = []
    for segment in path.split("/")[1:]:
        if segment == "..":
            if segments:
                segments.pop()
        elif segment != ".":
            segments.append(segment)
    return "/" + "/".join(segments)


# --- a fleet behind one dispatcher -----------------------------------------------------------------------


@dataclasses.dataclass
class Fleet:
    """A dispatcher (``port``, admin ``port + 1``) in front of the backends ``urls`` (in the order
    of its ``/status``), and the processes whose standard error must hold no traceback."""

    processes: Processes
    port: int
    urls: list[str]
    watched: list = dataclasses.field(default_factory=list)

    @property
    def admin(self) -> int:
        return self.port + 1

    def backend(self, backend_url: str) -> dict:
        return next(backend for backend in status(self.admin)["backends"] if backend["url"] == backend_url)

    def marks(self) -> list[int]:
        """Where each watched process's standard error ends now."""
        return [len(error_text(process)) for process in self.watched]

    def tracebacks_since(self, marks: list[int]) -> list[str]:
        return [
            error_text(process)[mark:][-3000:]
            for process, mark in zip(self.watched, marks, strict=True)
            if TRACEBACK in error_text(process)[mark:]
        ]


def start_broken_backends(processes: Processes, ports: list[int]):
    process = processes.start([sys.executable, str(BROKEN_BACKEND), *map(str, ports)])
    for port in ports:
        processes.wait_listening(process, port)
    return process


def seen(port: int) -> list[dict]:
    """The requests the broken backend on ``port`` received: ``{"target", "headers", "head"}``."""
    return json.loads(get(url(port, "/admin/seen"))[2])


def serve_normal_requests(fleet: Fleet) -> None:
    """Each backend of the fleet, once back in it, serves a normal request (which also ends any run
    of failures that its ejection counts)."""
    for backend_url, job_type in zip(fleet.urls, ("broken", "ok"), strict=False):
        assert wait_for(lambda u=backend_url: not fleet.backend(u)["ejected"], timeout=5), f"{backend_url} stays out"
        code, headers, body = get(url(fleet.port, "/after/ok"), {"X-Job-Type": job_type, "X-Request-Id": "after"})
        assert code == 200 and headers["X-Backend"] == backend_url, (code, body[:200])
        if job_type == "broken":
            assert json.loads(body)["target"] == PREFIX + "/after/ok"


def check_recovered(fleet: Fleet, marks: list[int], ejected: dict[str, int] | None = None) -> None:
    """The checks after every fault: for each URL of ``ejected`` (its ejection count before the
    fault), at least one more ejection; each backend serves a normal request again; every in-flight
    count is 0; no accounting violation; no traceback on any watched process's standard error."""
    for backend_url, before in (ejected or {}).items():
        assert fleet.backend(backend_url)["ejections"] > before, f"{backend_url} was not ejected"
    serve_normal_requests(fleet)
    assert wait_for(lambda: all(b["in_flight"] == 0 for b in status(fleet.admin)["backends"]), timeout=5), status(
        fleet.admin
    )["backends"]
    assert status(fleet.admin)["accounting_violations"] == 0
    metrics = get(url(fleet.admin, "/metrics"))[2].decode()
    assert "hetlb_accounting_violations_total 0.0" in metrics.splitlines()
    tracebacks = fleet.tracebacks_since(marks)
    assert not tracebacks, tracebacks[0]


# --- soak ----------------------------------------------------------------------------------------------


@dataclasses.dataclass
class SoakResult:
    sent: int = 0
    answered: int = 0
    aborted: int = 0
    mismatched: int = 0
    failed: int = 0
    failures: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    """The failed answers by (status, complete, hung): what went wrong, for the assertion's message."""
    rss_bytes: list[int] = dataclasses.field(default_factory=list)
    """The dispatcher's resident memory after each tenth of the requests."""


def resident_bytes(pid: int) -> int:
    """The resident memory of process ``pid`` and its children (the dispatchers a parent forked), in bytes."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    total = 0
    for process in [pid, *map(int, children)]:
        for line in Path(f"/proc/{process}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1]) * 1024
    return total


def soak(port: int, serve_pid: int, requests: int, abort_every: int, workers: int = 8) -> SoakResult:
    """``requests`` requests of job type ``ok`` from ``workers`` threads on kept-alive connections,
    each carrying its own ``X-Request-Id`` that the echo backend must send back; every
    ``abort_every``-th is an event stream that the client resets after its first event."""
    result = SoakResult()
    lock = threading.Lock()
    counter = iter(range(requests))
    checkpoints = {requests * k // 10 for k in range(1, 11)}

    def work() -> None:
        connection: socket.socket | None = None
        while True:
            with lock:
                n = next(counter, None)
            if n is None:
                break
            if connection is None:
                connection = socket.create_connection(("127.0.0.1", port), timeout=10)
            streamed = n % abort_every == abort_every - 1
            path = "/tick/200/10" if streamed else f"/soak/{n}"
            connection.sendall(raw_request(path, "ok", extra=f"X-Request-Id: {n}\r\n"))
            with lock:
                result.sent += 1
            if streamed:
                response = http.client.HTTPResponse(connection)
                response.begin()
                response.read1(1)  # the stream has begun
                abort(connection)
                connection = None
                with lock:
                    result.aborted += 1
            else:
                answer = read_answer(connection)
                echo = json.loads(answer.body) if answer.status == 200 and answer.complete else None
                if echo is None:
                    connection.close()
                    connection = None
                sent_id = echo and {name.lower(): value for name, value in echo["headers"]}.get("x-request-id")
                with lock:
                    if echo is None:
                        result.failed += 1
                        result.failures[answer.status, answer.complete, answer.hung] += 1
                    elif echo["path"] != path or sent_id != str(n):
                        result.mismatched += 1
                    else:
                        result.answered += 1
            if n + 1 in checkpoints:
                result.rss_bytes.append(resident_bytes(serve_pid))
        if connection is not None:
            connection.close()

    threads = [threading.Thread(target=work) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return result
