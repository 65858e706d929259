"""The fault suite of hetlb serve: backends that reset, stall, lie about lengths, send garbage or die
with requests in flight; hostile clients (malformed and smuggled requests, oversize, slow and idle
clients, aborts, path traversal, forged forwarded headers); streams; a fleet changing during a
fault; and a soak with client aborts. After each case a normal request is served by every backend,
every in-flight count is 0, the accounting-violation counter is 0, no process wrote a traceback,
and a backend whose answer showed a failure was ejected (docs/reference/serve.md)."""

from __future__ import annotations

import json
import signal
import socket
import threading
import time

import pytest

from support.broken_backend import BAD_EVENTS
from support.serve_faults import (
    PREFIX,
    TIMEOUTS,
    Answer,
    Fleet,
    abort,
    check_recovered,
    closed_by_peer,
    exchange,
    raw_request,
    read_answer,
    resolved_path,
    seen,
    serve_normal_requests,
    slow_clients,
    soak,
    start_broken_backends,
    url,
)
from support.serve_processes import Processes, free_ports, get, wait_for

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

MAX_BODY_BYTES = 1_000_000
MAX_HEADER_BYTES = 4096
BACKEND_TIMEOUT = 0.5
"""``--timeout`` of the shared dispatcher, in seconds: a stalled backend is cut after it."""
EJECT_AFTER = 3
"""The default ``eject_after``: each backend fault is repeated this many times, so that a failure
that is not counted (or a count that an answer's start resets) leaves the backend in the fleet."""


def timeout_flags() -> list[str]:
    return [part for flag, value in TIMEOUTS.items() for part in (flag, value)]


@pytest.fixture(scope="module")
def fleet():
    """One dispatcher in front of a broken backend (job type ``broken``, under ``/prefix``) and an
    echo backend (``ok``); ``EJECT_AFTER`` failures in a row eject, and the active checks re-admit
    within 0.1 s, so that the cases that follow find both in the fleet."""
    yield from running_fleet("0.1s")


@pytest.fixture(scope="module")
def soak_fleet():
    """The same with the default active checks (0.5 s, each with a timeout of 0.5 s): a check of a
    backend saturated by the soak may well take more than 0.1 s, which would eject it."""
    yield from running_fleet("0.5s")


def running_fleet(health_interval: str):
    processes = Processes()
    try:
        broken, echo = free_ports(1), free_ports(1)
        port = free_ports(2)
        broken_process = start_broken_backends(processes, [broken])
        echo_process = processes.echo_backends([echo])
        serve = processes.serve(
            "--backend", f"{url(broken, PREFIX)},types=broken", "--backend", f"{url(echo)},types=ok",
            "--policy", "jsq", "--timeout", f"{BACKEND_TIMEOUT}s", "--health-interval", health_interval,
            "--max-body-bytes", str(MAX_BODY_BYTES), "--max-header-bytes", str(MAX_HEADER_BYTES), *timeout_flags(),
            port=port, admin=port + 1,
        )  # fmt: skip
        yield Fleet(processes, port, [url(broken, PREFIX), url(echo)], [serve, broken_process, echo_process])
    finally:
        processes.stop_all()


@pytest.fixture(autouse=True)
def settled(request):
    """Each case on the shared fleet starts with both backends in it and no run of failures."""
    for name in ("fleet", "soak_fleet"):
        if name in request.fixturenames:
            serve_normal_requests(request.getfixturevalue(name))


def broken_port(fleet: Fleet) -> int:
    return int(fleet.urls[0].removeprefix("http://127.0.0.1:").removesuffix(PREFIX))


def echo_port(fleet: Fleet) -> int:
    return int(fleet.urls[1].removeprefix("http://127.0.0.1:"))


def echo_count(fleet: Fleet) -> dict:
    return json.loads(get(url(echo_port(fleet), "/admin/count"))[2])


def forwarded_targets(fleet: Fleet, since: int) -> list[str]:
    return [request["target"] for request in seen(broken_port(fleet))[since:]]


# --- backends that fail ---------------------------------------------------------------------------------


BACKEND_FAULTS = {
    "reset-early": (502, False),
    "reset": (502, True),
    "short": (502, True),
    "garbage": (502, False),
    "stall-headers": (504, True),
    "stall": (504, False),
    "bad-chunked": (502, True),
    "cut-stream": (502, True),
    "stall-stream": (504, True),
}
"""What a client may see of each fault: the proxy's whole answer of this status and, when the
backend's answer may have begun before it failed, that answer cut (fewer bytes than announced, or
no terminating chunk)."""
PROTOCOL_VIOLATIONS = frozenset(("garbage", "bad-chunked"))
"""Faults that are no HTTP at all: one ejects the backend at once (docs/reference/serve.md)."""


def cut_or(answer: Answer, status: int, may_cut: bool = True) -> bool:
    return (answer.status == status and answer.complete) or (may_cut and answer.status == 200 and not answer.complete)


@pytest.mark.parametrize("mode", BACKEND_FAULTS)
def test_a_failing_backend_is_answered_502_504_or_cut_and_ejected(fleet, mode):
    marks, before = fleet.marks(), fleet.backend(fleet.urls[0])["ejections"]
    for _ in range(1 if mode in PROTOCOL_VIOLATIONS else EJECT_AFTER):
        answer = exchange(fleet.port, raw_request(f"/fault/{mode}"), timeout=BACKEND_TIMEOUT + 5)
        assert not answer.hung and cut_or(answer, *BACKEND_FAULTS[mode]), answer
    check_recovered(fleet, marks, ejected={fleet.urls[0]: before})


def test_more_bytes_than_the_content_length_never_reach_a_client(fleet):
    """The backend's extra bytes are a whole answer no request asked for: neither this client nor the
    next request to that backend may get it."""
    marks, before = fleet.marks(), fleet.backend(fleet.urls[0])["ejections"]
    answer = exchange(fleet.port, raw_request("/fault/long"), timeout=BACKEND_TIMEOUT + 5)
    assert not answer.hung and b"FAKE" not in answer.body
    whole = (answer.status, answer.complete, answer.body) == (200, True, b"0123456789")
    assert whole or cut_or(answer, 502), answer  # and the protocol violation ejects the backend at once
    assert wait_for(lambda: not fleet.backend(fleet.urls[0])["ejected"], timeout=5)
    for _ in range(3):
        code, headers, body = get(url(fleet.port, "/next/ok"), {"X-Job-Type": "broken"})
        assert code == 200 and "X-Smuggled" not in headers and json.loads(body)["target"] == PREFIX + "/next/ok"
    check_recovered(fleet, marks, ejected={fleet.urls[0]: before})


def test_a_stream_cut_by_its_backend_reaches_the_client_incomplete_and_ejects_it(fleet):
    marks, before = fleet.marks(), fleet.backend(fleet.urls[1])
    for _ in range(EJECT_AFTER):
        answer = exchange(fleet.port, raw_request("/break/3", "ok"))
        assert answer.status == 200 and not answer.complete and not answer.hung
    after = fleet.backend(fleet.urls[1])
    assert after["backend_broken"] == before["backend_broken"] + EJECT_AFTER
    check_recovered(fleet, marks, ejected={fleet.urls[1]: before["ejections"]})


def test_a_malformed_event_stream_is_relayed_byte_for_byte(fleet):
    """Its HTTP framing is whole, so it is no failure of the backend: passed on unchanged."""
    marks, before = fleet.marks(), fleet.backend(fleet.urls[0])
    answer = exchange(fleet.port, raw_request("/fault/bad-events"))
    assert (answer.status, answer.complete, answer.body) == (200, True, BAD_EVENTS)
    after = fleet.backend(fleet.urls[0])
    assert (after["ejections"], after["errors"]) == (before["ejections"], before["errors"])
    check_recovered(fleet, marks)


# --- hostile clients: malformed and smuggled requests -------------------------------------------------------


SMUGGLED = b"GET /smuggled HTTP/1.1\r\nHost: proxy.test\r\nX-Job-Type: broken\r\n\r\n"
HEAD = b"POST /ok HTTP/1.1\r\nHost: proxy.test\r\nX-Job-Type: broken\r\n"
MALFORMED = {
    "not http": b"GARBAGE\r\n\r\n",
    "no target": b"GET\r\n\r\n",
    "space in a name": b"GET /ok HTTP/1.1\r\nHost: proxy.test\r\nX-Job-Type: broken\r\nBad Name: v\r\n\r\n",
    "empty name": b"GET /ok HTTP/1.1\r\nHost: proxy.test\r\nX-Job-Type: broken\r\n: v\r\n\r\n",
    "NUL in a value": b"GET /ok HTTP/1.1\r\nHost: proxy.test\r\nX-Job-Type: broken\r\nX-A: a\x00b\r\n\r\n",
    "negative length": HEAD + b"Content-Length: -1\r\n\r\n",
    "length not a number": HEAD + b"Content-Length: 1x\r\n\r\n",
    "bad chunk size": HEAD + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n",
    "chunk size overflow": HEAD + b"Transfer-Encoding: chunked\r\n\r\nfffffffffffffffffffff1\r\n",
    "TLS handshake": b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 40,
}
SMUGGLING = {
    "CL and TE": HEAD + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + SMUGGLED,
    "TE and CL": HEAD + b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n" + SMUGGLED,
    "two lengths": HEAD + b"Content-Length: 0\r\nContent-Length: %d\r\n\r\n" % len(SMUGGLED) + SMUGGLED,
    "a length list": HEAD + b"Content-Length: 0, %d\r\n\r\n" % len(SMUGGLED) + SMUGGLED,
    "a signed length": HEAD + b"Content-Length: +%d\r\n\r\n" % len(SMUGGLED) + SMUGGLED,
    "space before the colon": HEAD + b"Content-Length: 5\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n" + SMUGGLED,
    "xchunked": HEAD + b"Content-Length: 5\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n" + SMUGGLED,
    "chunked, identity": HEAD + b"Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n" + SMUGGLED,
    "two TE fields": HEAD + b"Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n0\r\n\r\n" + SMUGGLED,
    "TE with a vertical tab": HEAD + b"Content-Length: 5\r\nTransfer-Encoding:\x0bchunked\r\n\r\n0\r\n\r\n" + SMUGGLED,
    "folded TE": HEAD + b"Content-Length: 5\r\nTransfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n" + SMUGGLED,
    "bare LF before TE": HEAD + b"X-A: a\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n" + SMUGGLED,
}
LENIENT = {
    "bare LF line ends": b"GET /ok HTTP/1.1\nHost: proxy.test\nX-Job-Type: broken\nX-A: 1\n\n",
    "a folded header": b"GET /ok HTTP/1.1\r\nHost: proxy.test\r\nX-Job-Type: broken\r\nX-A: one\r\n two\r\n\r\n",
}
"""Requests RFC 9112 lets a server refuse (400) or read leniently; read, they must reach the backend
as one request with no field that holds a line end or starts with white space."""


def send_hostile(fleet: Fleet, data: bytes):
    marks, forwarded = fleet.marks(), len(seen(broken_port(fleet)))
    answer = exchange(fleet.port, data)
    assert not answer.hung, "the request was neither answered nor closed"
    return marks, answer, forwarded_targets(fleet, forwarded)


@pytest.mark.parametrize("name", MALFORMED)
def test_a_malformed_request_gets_400_and_reaches_no_backend(fleet, name):
    marks, answer, forwarded = send_hostile(fleet, MALFORMED[name])
    assert answer.status == 400 and forwarded == [], (answer.status, forwarded)
    check_recovered(fleet, marks)


def test_an_unknown_http_version_gets_400_or_505(fleet):
    marks, answer, forwarded = send_hostile(
        fleet, b"GET /ok HTTP/9.9\r\nHost: proxy.test\r\nX-Job-Type: broken\r\n\r\n"
    )
    assert answer.status in (400, 505) and forwarded == []
    check_recovered(fleet, marks)


@pytest.mark.parametrize("name", SMUGGLING)
def test_a_smuggling_variant_gets_400_and_nothing_is_forwarded(fleet, name):
    marks, answer, forwarded = send_hostile(fleet, SMUGGLING[name])
    assert answer.status == 400 and forwarded == [], (answer.status, forwarded)
    check_recovered(fleet, marks)


@pytest.mark.parametrize("name", LENIENT)
def test_bare_lf_and_folded_headers_are_refused_or_forwarded_clean(fleet, name):
    before = len(seen(broken_port(fleet)))
    marks, answer, forwarded = send_hostile(fleet, LENIENT[name])
    assert answer.status in (200, 400), answer
    if answer.status == 200:
        [request] = seen(broken_port(fleet))[before:]
        lines = request["head"].removesuffix("\r\n\r\n").split("\r\n")
        assert all("\n" not in line and not line[:1].isspace() for line in lines), request["head"]
    else:
        assert forwarded == []
    check_recovered(fleet, marks)


# --- hostile clients: size and time -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        raw_request("/ok", extra=f"X-Big: {'y' * (MAX_HEADER_BYTES + 100)}\r\n"),
        raw_request("/" + "a" * (MAX_HEADER_BYTES + 100)),
    ],
    ids=["a long header", "a long request line"],
)
def test_an_oversize_header_or_request_line_gets_4xx(fleet, data):
    marks, answer, forwarded = send_hostile(fleet, data)
    assert answer.status in (400, 414, 431) and forwarded == []
    check_recovered(fleet, marks)


@pytest.mark.parametrize(
    "data",
    [
        raw_request("/ok", method="POST", extra=f"Content-Length: {MAX_BODY_BYTES + 1}\r\n") + b"x" * 1000,
        raw_request("/ok", method="POST", extra=f"Content-Length: {10**12}\r\n") + b"x" * 1000,
        raw_request("/ok", method="POST", extra="Transfer-Encoding: chunked\r\n")
        + b"%x\r\n%s\r\n" % (MAX_BODY_BYTES // 2, b"z" * (MAX_BODY_BYTES // 2)) * 3
        + b"0\r\n\r\n",
    ],
    ids=["announced", "10^12 announced, a short body", "streamed past the limit"],
)
def test_an_oversize_body_gets_413(fleet, data):
    marks = fleet.marks()
    with socket.create_connection(("127.0.0.1", fleet.port), timeout=5) as connection:
        try:
            connection.sendall(data)
        except ConnectionError:  # the proxy may answer and close before the whole body is sent
            pass
        answer = read_answer(connection)
    assert answer.status == 413 and not answer.hung, answer
    check_recovered(fleet, marks)


def test_a_body_that_stops_is_closed_by_the_body_timeout(fleet):
    marks, forwarded = fleet.marks(), len(seen(broken_port(fleet)))
    body_timeout = float(TIMEOUTS["--body-timeout"].removesuffix("s"))
    with socket.create_connection(("127.0.0.1", fleet.port), timeout=5) as connection:
        connection.sendall(raw_request("/ok", method="POST", extra="Content-Length: 100\r\n") + b"0123456789")
        assert closed_by_peer(connection, body_timeout + 3)
    assert forwarded_targets(fleet, forwarded) == []  # a body of at most 64 KiB is read before it is sent
    check_recovered(fleet, marks)


def test_500_slow_clients_are_closed_by_the_header_timeout_and_others_are_served(fleet):
    marks, forwarded = fleet.marks(), len(seen(broken_port(fleet)))
    header_timeout = float(TIMEOUTS["--header-timeout"].removesuffix("s"))
    served: list[int] = []

    def meanwhile() -> None:
        time.sleep(header_timeout / 2)
        served.append(get(url(fleet.port, "/meanwhile"), {"X-Job-Type": "ok"})[0])

    other = threading.Thread(target=meanwhile)
    other.start()
    closed = slow_clients(fleet.port, 500, raw_request("/ok"), seconds_per_byte=1.0, timeout=header_timeout + 4)
    other.join()
    assert len(closed) == 500, f"{500 - len(closed)} of 500 slow clients still open after {header_timeout + 4} s"
    assert served == [200]
    assert forwarded_targets(fleet, forwarded) == []
    check_recovered(fleet, marks)


def test_an_idle_keep_alive_connection_is_kept_then_closed(fleet):
    marks = fleet.marks()
    keep_alive = float(TIMEOUTS["--keep-alive-timeout"].removesuffix("s"))
    with socket.create_connection(("127.0.0.1", fleet.port), timeout=5) as connection:
        for _ in range(2):
            connection.sendall(raw_request("/idle", "ok"))
            assert read_answer(connection).status == 200
            time.sleep(keep_alive / 4)
        assert closed_by_peer(connection, keep_alive + 3)
    check_recovered(fleet, marks)


# --- hostile clients: aborts --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path,job_type,backend",
    [("/fault/trickle", "broken", 0), ("/tick/50/20", "ok", 1), ("/big/64", "ok", 1)],
    ids=["mid-answer", "mid-stream", "a large stream, read slowly"],
)
def test_a_client_that_aborts_releases_its_count_once_and_cancels_the_upstream_call(fleet, path, job_type, backend):
    marks = fleet.marks()
    before, count = fleet.backend(fleet.urls[backend]), echo_count(fleet)
    with socket.create_connection(("127.0.0.1", fleet.port), timeout=5) as connection:
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        connection.sendall(raw_request(path, job_type))
        assert connection.recv(100).startswith(b"HTTP/1.1 200")
        time.sleep(0.2)
        abort(connection)
    gone = wait_for(lambda: fleet.backend(fleet.urls[backend])["client_gone"] == before["client_gone"] + 1, timeout=5)
    assert gone, fleet.backend(fleet.urls[backend])
    if backend == 1:  # the echo backend saw its request's client go away
        assert wait_for(lambda: echo_count(fleet)["cancelled"] == count["cancelled"] + 1, timeout=5)
    assert fleet.backend(fleet.urls[backend])["ejections"] == before["ejections"]  # the client's fault, not its
    check_recovered(fleet, marks)


def test_a_client_that_aborts_before_its_answer_releases_its_count_once_and_cancels_the_upstream_call(fleet):
    """A request without a body is on its way by callbacks, not a task, until its answer arrives: a
    client gone before any answer byte still releases its count once and closes the backend's call."""
    marks = fleet.marks()
    before, count = fleet.backend(fleet.urls[1]), echo_count(fleet)
    with socket.create_connection(("127.0.0.1", fleet.port), timeout=5) as connection:
        connection.sendall(raw_request("/sleep/3000", "ok"))
        assert wait_for(lambda: fleet.backend(fleet.urls[1])["in_flight"] == 1, timeout=5)
        abort(connection)
    assert wait_for(lambda: fleet.backend(fleet.urls[1])["client_gone"] == before["client_gone"] + 1, timeout=5)
    assert wait_for(lambda: echo_count(fleet)["cancelled"] == count["cancelled"] + 1, timeout=5)
    after = fleet.backend(fleet.urls[1])
    assert after["requests"] - before["requests"] == 1 and after["ejections"] == before["ejections"]
    check_recovered(fleet, marks)


# --- paths and forwarded headers -----------------------------------------------------------------------------


TRAVERSALS = [
    "/../../etc/passwd",
    "/a/../../../etc/passwd",
    "/%2e%2e/%2e%2e/etc/passwd",
    "/%2E%2E%2F%2E%2E%2Fetc/passwd",
    "/..%2f..%2fetc/passwd",
    "/.%2e/.%2e/etc/passwd",
    "http://proxy.test/../../etc/passwd",
]


@pytest.mark.parametrize("target", TRAVERSALS)
def test_a_path_never_leaves_the_backend_prefix(fleet, target):
    marks, forwarded = fleet.marks(), len(seen(broken_port(fleet)))
    answer = exchange(fleet.port, raw_request(target))
    assert answer.status in (200, 400), answer
    targets = forwarded_targets(fleet, forwarded)
    assert len(targets) == (answer.status == 200)
    for sent in targets:
        assert resolved_path(sent).startswith(PREFIX + "/"), sent
    check_recovered(fleet, marks)


FORGED = "X-Forwarded-For: 203.0.113.9\r\nX-Forwarded-Host: evil.example\r\nX-Forwarded-Proto: https\r\n"


def forwarded_fields(fleet: Fleet) -> dict[str, list[str]]:
    """The X-Forwarded-* values the broken backend got with a request that forged them, each split at commas."""
    before = len(seen(broken_port(fleet)))
    assert exchange(fleet.port, raw_request("/forwarded", extra=FORGED)).status == 200
    [request] = seen(broken_port(fleet))[before:]
    fields: dict[str, list[str]] = {}
    for name, value in request["headers"]:
        if name.lower().startswith("x-forwarded-"):
            fields.setdefault(name.lower(), []).extend(part.strip() for part in value.split(","))
    return fields


def test_the_client_cannot_forge_forwarded_headers(fleet):
    marks = fleet.marks()
    fields = forwarded_fields(fleet)
    assert fields["x-forwarded-proto"] == ["http"] and fields["x-forwarded-host"] == ["proxy.test"], fields
    assert fields["x-forwarded-for"][-1] == "127.0.0.1"
    check_recovered(fleet, marks)


def test_behind_a_trusted_front_proxy_its_forwarded_headers_are_kept_and_for_appended(processes):
    broken = free_ports(1)
    port = free_ports(2)
    backend = start_broken_backends(processes, [broken])
    serve = processes.serve(
        "--backend", f"{url(broken, PREFIX)},types=broken", "--trust-forwarded", *timeout_flags(),
        port=port, admin=port + 1,
    )  # fmt: skip
    trusted = Fleet(processes, port, [url(broken, PREFIX)], [serve, backend])
    marks = trusted.marks()
    fields = forwarded_fields(trusted)
    assert fields["x-forwarded-for"] == ["203.0.113.9", "127.0.0.1"], fields
    assert fields["x-forwarded-proto"] == ["https"] and fields["x-forwarded-host"] == ["evil.example"], fields
    check_recovered(trusted, marks)


# --- a backend dies, the fleet changes during a fault ------------------------------------------------------


def request_in_thread(port: int, path: str, job_type: str, answers: list) -> threading.Thread:
    def run() -> None:
        answers.append(exchange(port, raw_request(path, job_type), timeout=10))

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_backend_that_dies_and_a_fleet_that_changes_during_faults(processes):
    ports = free_ports(3)
    doomed, kept, added = (url(ports + i, PREFIX) for i in range(3))
    echo = free_ports(1)
    port = free_ports(2)
    dying = start_broken_backends(processes, [ports])
    living = start_broken_backends(processes, [ports + 1, ports + 2])
    echo_process = processes.echo_backends([echo])
    serve = processes.serve(
        "--backend", f"{doomed},types=broken|doomed", "--backend", f"{kept},types=broken", "--backend",
        f"{url(echo)},types=ok", "--policy", "jsq", "--timeout", "1s", "--health-interval",
        "0.1s", *timeout_flags(), port=port, admin=port + 1,
    )  # fmt: skip
    fleet = Fleet(processes, port, [kept, url(echo)], [serve, living, echo_process])
    marks = fleet.marks()

    # four requests in flight at a backend that is killed
    held: list = []
    threads = [request_in_thread(port, "/die/hold", "doomed", held) for _ in range(4)]
    assert wait_for(lambda: fleet.backend(doomed)["in_flight"] == 4)
    dying.send_signal(signal.SIGKILL)
    dying.wait()
    for thread in threads:
        thread.join()
    assert all(answer.status == 502 and not answer.hung for answer in held), held
    assert wait_for(lambda: fleet.backend(doomed)["ejected"]) and fleet.backend(doomed)["ejections"] >= 1
    for _ in range(10):
        assert get(url(port, "/ok"), {"X-Job-Type": "broken"})[1]["X-Backend"] == kept

    # while three requests stall at a backend, it is drained, another added, the echo backend patched
    stalled: list = []
    threads = [request_in_thread(port, "/fleet/stall", "broken", stalled) for _ in range(3)]
    assert wait_for(lambda: fleet.backend(kept)["in_flight"] == 3)
    streamed: list = []
    threads.append(request_in_thread(port, "/tick/10/50", "ok", streamed))
    admin = url(port + 1, "/backends")
    assert get(f"{admin}?url={doomed}", method="DELETE")[0] == 202
    code, _, body = get(f"{admin}?url={kept}", method="DELETE")
    assert code == 202 and json.loads(body)["state"] == "draining"
    assert get(admin, method="POST", data=json.dumps({"url": added, "types": ["broken"]}).encode())[0] == 201
    assert get(f"{admin}?url={url(echo)}", method="PATCH", data=b'{"speed": 2}')[0] == 200
    assert wait_for(lambda: not fleet.backend(added)["ejected"])  # admitted at its first good active check
    for _ in range(5):
        code, headers, _ = get(url(port, "/ok"), {"X-Job-Type": "broken"})
        assert code == 200 and headers["X-Backend"] == added
    for thread in threads:
        thread.join()
    assert [answer.status for answer in stalled] == [504] * 3
    [stream] = streamed
    assert stream.complete and stream.body.count(b"data: ") == 10
    assert wait_for(lambda: sorted(b["url"] for b in json.loads(get(admin)[2])) == sorted([url(echo), added]), 5)
    fleet.urls = [added, url(echo)]
    check_recovered(fleet, marks)


# --- soak ------------------------------------------------------------------------------------------------------


def soak_checks(fleet: Fleet, requests: int, abort_every: int) -> list[int]:
    """Run the soak on the shared fleet and check that nothing was lost or duplicated: the resident
    memory of the dispatcher after each tenth."""
    marks, before, count = fleet.marks(), fleet.backend(fleet.urls[1]), echo_count(fleet)
    serve = fleet.watched[0]
    result = soak(fleet.port, serve.pid, requests, abort_every)
    aborted = requests // abort_every
    assert (result.sent, result.aborted, result.failed, result.mismatched) == (requests, aborted, 0, 0), result.failures
    assert result.answered == requests - aborted
    # every request reached the echo backend exactly once, and every abort cancelled its upstream call
    expected = {"count": count["count"] + requests, "cancelled": count["cancelled"] + aborted}
    assert wait_for(lambda: echo_count(fleet) == expected), (echo_count(fleet), expected)
    after = fleet.backend(fleet.urls[1])
    assert after["requests"] - before["requests"] == requests
    assert after["client_gone"] - before["client_gone"] == aborted
    assert after["ejections"] == before["ejections"]
    check_recovered(fleet, marks)
    return result.rss_bytes


LEAK_BYTES_PER_REQUEST = 1024
"""The smallest leak the short soak must see: 1 KiB per request grows the memory by 4 MiB over its
last 4,000 requests, well above the few hundred KiB the allocator's arenas move by."""


def test_a_soak_with_client_aborts_loses_and_duplicates_nothing(soak_fleet):
    rss = soak_checks(soak_fleet, 5000, abort_every=33)
    growth = max(rss[2:]) - rss[1]  # from the second tenth on, the first warms the caches
    assert growth < LEAK_BYTES_PER_REQUEST * 4000, [round(r / 2**20, 2) for r in rss]


@pytest.mark.soak  # python -m pytest -m soak tests/gateway/test_serve_faults.py
def test_200000_requests_with_3_percent_aborts_keep_memory_within_5_percent(soak_fleet):
    rss = soak_checks(soak_fleet, 200_000, abort_every=33)
    assert max(rss[1:]) <= 1.05 * rss[0], [round(r / 2**20, 1) for r in rss]
