"""hetlb serve relays answers as they arrive and routes on a JSON body's field, with real processes
on 127.0.0.1: an event stream's first event reaches the client while the backend still holds the
rest, the request stays in flight until its last byte, a client that goes away mid-stream cancels
the upstream call and releases its count once, a backend that fails mid-answer cuts the client's
answer (never a complete-looking one) and counts as its failure; request bodies stream to the
backend within max_body_bytes; ``--type-body-field model`` routes on the body and answers in the
OpenAI error shape.

Every process is started by the ``processes`` fixture and stopped at teardown, also when a test
fails; every request has a timeout; request counts are bounded."""

from __future__ import annotations

import asyncio
import http.client
import json
import socket

import aiohttp
import pytest

from support.serve_processes import free_ports, get, status, wait_for

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


def url(port: int, path: str = "") -> str:
    return f"http://127.0.0.1:{port}{path}"


def counts(backend: int) -> dict:
    return json.loads(get(url(backend, "/admin/count"))[2])


def in_flight(admin: int) -> int:
    return sum(backend["in_flight"] for backend in status(admin)["backends"])


@pytest.fixture
def proxied(processes):
    """One echo backend behind hetlb serve: (proxy port, admin port, backend port)."""
    backend = free_ports()
    port, admin = free_ports(), free_ports()
    processes.echo_backends([backend])
    processes.serve(
        "--backend", url(backend), "--health-interval", "0", "--eject-after", "2", port=port, admin=admin
    )  # fmt: skip
    return port, admin, backend


def open_stream(port: int, path: str) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", path)
    return connection, connection.getresponse()


def read_event(answer: http.client.HTTPResponse) -> bytes:
    """One server-sent event (its lines up to the blank line that ends it)."""
    lines = []
    while (line := answer.readline()) not in (b"\n", b""):
        lines.append(line)
    return b"".join(lines)


def test_the_first_event_arrives_while_the_backend_holds_the_rest(proxied):
    """The backend sends its first event and waits: the client has it through the proxy, the request
    is still in flight; released, the other events follow and the count returns to 0."""
    port, admin, backend = proxied
    connection, answer = open_stream(port, "/stream/4")
    try:
        assert answer.status == 200 and answer.headers["Content-Type"] == "text/event-stream"
        assert answer.headers["X-Backend"] == url(backend)
        assert read_event(answer) == b'data: {"event": 0}\n'
        assert in_flight(admin) == 1  # the backend still produces: the request is in flight
        get(url(backend, "/admin/release"))
        rest = answer.read()
    finally:
        connection.close()
    assert rest == b"".join(f'data: {{"event": {k}}}\n\n'.encode() for k in range(1, 4))
    assert wait_for(lambda: in_flight(admin) == 0)
    state = status(admin)
    assert state["backends"][0]["stream_events"] == 4 and state["accounting_violations"] == 0
    metrics = get(url(admin, "/metrics"))[2].decode()
    assert "hetlb_time_to_first_byte_seconds_count" in metrics and "hetlb_stream_events_total" in metrics


def test_a_client_that_goes_away_mid_stream_cancels_the_call_once(proxied):
    port, admin, backend = proxied
    for _ in range(3):
        connection, answer = open_stream(port, "/stream/4")
        assert read_event(answer) == b'data: {"event": 0}\n'
        connection.sock.shutdown(socket.SHUT_RDWR)
        connection.close()
    assert wait_for(lambda: counts(backend)["cancelled"] == 3), counts(backend)  # every upstream call ended
    assert wait_for(lambda: in_flight(admin) == 0)
    state = status(admin)
    assert state["backends"][0]["client_gone"] == 3 and state["accounting_violations"] == 0
    assert state["backends"][0]["errors"] == 0  # a client's going is no failure of the backend
    assert get(url(port, "/e"))[0] == 200  # and the proxy serves on


@pytest.mark.parametrize("path", ["/break/2", "/short"])
def test_a_backend_that_fails_mid_answer_cuts_the_answer(proxied, path):
    """A reset after two events, or 10 bytes of an announced 100: the client's answer ends before
    its end (http.client raises IncompleteRead), the backend's failure is counted, the count is 0."""
    port, admin, backend = proxied
    connection, answer = open_stream(port, path)
    try:
        assert answer.status == 200
        with pytest.raises(http.client.IncompleteRead):
            answer.read()
    finally:
        connection.close()
    assert wait_for(lambda: in_flight(admin) == 0)
    state = status(admin)["backends"][0]
    assert state["backend_broken"] == 1 and state["errors"] == 1 and state["client_gone"] == 0
    assert get(url(port, "/e"))[0] == 200


def chunked_post(port: int, path: str, chunks: list[bytes], headers: dict | None = None):
    """A POST whose body is sent in chunks (Transfer-Encoding: chunked, no Content-Length)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("POST", path, body=iter(chunks), headers=headers or {}, encode_chunked=True)
        answer = connection.getresponse()
        return answer.status, answer.read()
    finally:
        connection.close()


def test_request_bodies_stream_to_the_backend_within_the_limit(processes):
    backend = free_ports()
    port, admin = free_ports(), free_ports()
    processes.echo_backends([backend])
    processes.serve("--backend", url(backend), "--max-body-bytes", "100000", port=port, admin=admin)
    code, body = chunked_post(port, "/up", [b"x" * 40_000, b"y" * 40_000])
    assert code == 200 and json.loads(body)["body"] == "x" * 40_000 + "y" * 40_000  # byte for byte
    code, _ = chunked_post(port, "/up", [b"x" * 60_000, b"y" * 60_000])
    assert code == 413  # streamed past max_body_bytes
    assert get(url(port, "/up"), method="POST", data=b"z" * 100_001)[0] == 413  # announced past it
    assert wait_for(lambda: in_flight(admin) == 0)
    state = status(admin)
    assert state["rejected"].get("too_large") == 2 and state["accounting_violations"] == 0


@pytest.fixture
def by_model(processes):
    """Two echo backends serving models a and b behind ``--type-body-field model``."""
    first = free_ports(2)
    port, admin = free_ports(), free_ports()
    processes.echo_backends([first, first + 1])
    processes.serve(
        "--backend", f"{url(first)},types=a", "--backend", f"{url(first + 1)},types=a|b",
        "--type-body-field", "model", "--max-body-bytes", "5000", port=port, admin=admin,
    )  # fmt: skip
    return port, admin, first


def post_json(port: int, body: bytes, headers: dict | None = None):
    code, answer_headers, answer = get(
        url(port, "/v1/chat/completions"), {"Content-Type": "application/json", **(headers or {})}, "POST", body
    )
    return code, answer_headers, answer


def test_the_body_names_the_model_and_only_its_backends_get_it(by_model):
    port, admin, first = by_model
    for _ in range(20):
        code, headers, body = post_json(port, b'{"model": "b", "messages": []}')
        assert code == 200 and headers["X-Backend"] == url(first + 1)
        assert json.loads(json.loads(body)["body"]) == {"model": "b", "messages": []}  # forwarded unchanged
    served = {post_json(port, b'{"model": "a"}')[1]["X-Backend"] for _ in range(20)}
    assert served <= {url(first), url(first + 1)} and served  # a: either backend
    # no field: the header, as without type_body_field
    assert post_json(port, b'{"messages": []}', {"X-Job-Type": "b"})[1]["X-Backend"] == url(first + 1)


@pytest.mark.parametrize(
    "body, code, error_code",
    [
        (b'{"model": "c"}', 404, "model_not_found"),
        (b"not json", 400, "invalid_json"),
        (b'["model", "a"]', 400, "invalid_json"),
        (b'{"model": 3}', 400, "invalid_type"),
        (b'{"messages": []}', 400, "bad_type"),
        (b'{"model": "a", "pad": "' + b"x" * 5000 + b'"}', 413, "too_large"),
    ],
)
def test_bad_bodies_get_the_openai_error_shape(by_model, body, code, error_code):
    port, admin, first = by_model
    before = status(admin)
    answer_code, headers, answer = post_json(port, body)
    assert answer_code == code and headers["Content-Type"].startswith("application/json")
    error = json.loads(answer)["error"]
    assert error["code"] == error_code and error["message"] and error["type"] == "invalid_request_error"
    after = status(admin)
    assert after["requests"] == before["requests"]  # nothing was forwarded
    assert sum(after["rejected"].values()) == sum(before["rejected"].values()) + 1  # counted once
    assert post_json(port, b'{"model": "a"}')[0] == 200  # and the proxy serves on


def test_a_thousand_streams_at_once_and_one_client_that_reads_nothing(processes):
    """1,000 event streams through one dispatcher at once (5 events 100 ms apart each), while one
    client holds a 64 MiB stream it never reads: every stream ends with its 5 events in order while
    the stuck one is still open (the relay waits for a slow client's socket alone), and then every
    count is 0."""
    backend = free_ports()
    port, admin = free_ports(), free_ports()
    processes.echo_backends([backend])
    processes.serve("--backend", url(backend), "--health-interval", "0", port=port, admin=admin)
    stuck = socket.create_connection(("127.0.0.1", port), timeout=10)
    stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stuck.sendall(b"GET /big/64 HTTP/1.1\r\nHost: x\r\n\r\n")

    async def one(session, k: int) -> list[bytes]:
        async with session.get(url(port, "/tick/5/100")) as answer:
            assert answer.status == 200
            return [line async for line in answer.content if line.strip()]

    async def all_of_them() -> list[list[bytes]]:
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as session:
            return await asyncio.gather(*(one(session, k) for k in range(1000)))

    try:
        streams = asyncio.run(all_of_them())
        assert all(lines == [f'data: {{"event": {k}}}\n'.encode() for k in range(5)] for lines in streams)
        assert in_flight(admin) == 1  # the stuck stream, and only it, still holds its count
    finally:
        stuck.close()
    assert wait_for(lambda: in_flight(admin) == 0, timeout=30)
    state = status(admin)
    assert state["backends"][0]["stream_events"] > 5000  # and those of the cut stream it had relayed
    assert state["backends"][0]["client_gone"] == 1 and state["accounting_violations"] == 0
