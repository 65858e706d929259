"""A fleet that changes under hetlb serve, with real processes on 127.0.0.1: backends added, drained,
removed and patched through the admin API, the backends file and SIGHUP under a steady open-loop
load, with no request failed or lost at the client; ``types=discover`` against a stub
``GET /v1/models``; several dispatchers that all see an admin API change.

Every answer is checked against the backends' own counts (the echo backends count the requests they
receive): the client's answers add up to them (none lost, none sent twice), a backend gets nothing
before it is added nor after it has left, and every process is stopped at teardown."""

from __future__ import annotations

import asyncio
import http.server
import json
import signal
import sys
import threading
import time
from collections import Counter

import pytest

from hetlb.load.open_loop import LoadGenerator, LoadSpec

from support.live_fleet import backend_process
from support.serve_processes import Processes, error_text, finish, free_ports, get, status, wait_for

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

LOAD_RATE = 150.0  # requests per second
LOAD_SECONDS = 5.0


def url(port: int, path: str = "") -> str:
    return f"http://127.0.0.1:{port}{path}"


def admin(method: str, port: int, path: str = "/backends", body=None):
    """(status, JSON answer) of the admin API."""
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    code, _, answer = get(url(port, path), method=method, data=data)
    return code, json.loads(answer)


def received(backend_port: int) -> int:
    """The requests an echo backend has received (its own count)."""
    return json.loads(get(url(backend_port, "/admin/count"))[2])["count"]


def fleet_urls(admin_port: int) -> dict[str, str]:
    return {entry["url"]: entry["state"] for entry in admin("GET", admin_port)[1]}


class SteadyLoad:
    """hetlb.load.open_loop's open-loop Poisson load on a target, in a thread, bounded in time."""

    def __init__(self, target: str, rate: float = LOAD_RATE, duration: float = LOAD_SECONDS):
        spec = LoadSpec(targets=(target,), rate=rate, duration=duration, seed=3, timeout=20.0, path="/work")
        self.result: dict | None = None
        self.thread = threading.Thread(target=self.run, args=(spec,), daemon=True)
        self.thread.start()

    def run(self, spec: LoadSpec) -> None:
        self.result = dict(asyncio.run(LoadGenerator(spec, progress=False).run()))

    def wait(self) -> dict:
        self.thread.join(LOAD_SECONDS + 30.0)
        assert self.result is not None, "the load did not finish"
        return self.result


def assert_none_failed_or_lost(result: dict, backend_ports: list[int]) -> None:
    """Every request sent was answered 2xx, by one of the backends, and the backends received
    exactly the requests answered (each once)."""
    assert result["requests"] > 0.5 * LOAD_RATE * LOAD_SECONDS  # the load ran
    assert result["errors"] == 0 and result["blocked"] == 0 and result["not_sent"] == 0, result
    assert result["answered"] == result["requests"]
    assert set(result["per_backend"]) <= {url(port) for port in backend_ports}
    assert sum(received(port) for port in backend_ports) == result["answered"]
    for port, count in result["per_backend"].items():
        assert received(int(port.rsplit(":", 1)[1])) == count


def assert_accounting_clean(admin_port: int) -> None:
    answer = status(admin_port)
    assert answer["accounting_violations"] == 0
    assert all(backend["in_flight"] == 0 for backend in answer["backends"])


# --- the admin API ---------------------------------------------------------------------------------


def test_admin_api_adds_drains_removes_and_patches_under_load(processes):
    a, b, c, d, dead = (free_ports(1) for _ in range(5))
    port = free_ports(2)
    processes.echo_backends([a, b, c, d])  # nothing listens on dead
    processes.serve("--backend", url(a), "--backend", url(b), "--drain", "5s", port=port, admin=port + 1)
    load = SteadyLoad(url(port))
    time.sleep(1.0)
    assert received(c) == 0  # not in the fleet yet: nothing sent to it
    code, entry = admin("POST", port + 1, body={"url": url(c), "speed": 2, "buffer": 50})
    assert code == 201 and entry["state"] == "active" and entry["speed"] == 2.0 and entry["buffer"] == 50
    time.sleep(1.0)
    code, entry = admin("DELETE", port + 1, f"/backends?url={url(a)}&wait=1")
    assert code == 200 and entry["state"] == "removed" and entry["in_flight"] == 0
    after_removal = received(a)
    code, entry = admin("PATCH", port + 1, f"/backends?url={url(b)}", {"speed": 3, "buffer": 100})
    assert code == 200 and entry["speed"] == 3.0 and entry["buffer"] == 100 and entry["state"] == "active"
    code, entry = admin("POST", port + 1, body={"url": url(d)})
    assert code == 201
    assert admin("POST", port + 1, body={"url": url(dead)})[0] == 201  # a replica not up yet
    time.sleep(0.5)
    code, entry = admin("DELETE", port + 1, f"/backends?url={url(d)}")
    assert code == 202 and entry["state"] in ("draining", "removed")
    dead_entry = next(entry for entry in admin("GET", port + 1)[1] if entry["url"] == url(dead))
    assert dead_entry["ejected"] and dead_entry["in_flight"] == 0  # never admitted: no request failed on it
    assert admin("DELETE", port + 1, f"/backends?url={url(dead)}&wait=1")[0] == 200
    result = load.wait()
    assert_none_failed_or_lost(result, [a, b, c, d])
    assert received(a) == after_removal  # nothing after it left
    assert received(c) > 0 and result["per_backend"].get(url(c), 0) == received(c)
    assert fleet_urls(port + 1) == {url(b): "active", url(c): "active"}
    assert_accounting_clean(port + 1)


@pytest.fixture(scope="module")
def one_backend():
    """(backend port, listen port) of a dispatcher of one backend, admin on port + 1 (shared: the
    tests that use it change nothing)."""
    started = Processes()
    try:
        backend, port = free_ports(1), free_ports(2)
        started.echo_backends([backend])
        started.serve("--backend", url(backend), port=port, admin=port + 1)
        yield backend, port
    finally:
        started.stop_all()


@pytest.mark.parametrize(
    "method,path,body,code,field",
    [
        ("POST", "/backends", b"not json", 400, "body"),
        ("POST", "/backends", b"[1, 2]", 400, "body"),
        ("POST", "/backends", {"speed": 2}, 400, "backend.url"),
        ("POST", "/backends", {"url": "ftp://127.0.0.1:9"}, 400, "backend.url"),
        ("POST", "/backends", {"url": "http://127.0.0.1:9", "speed": 0}, 400, "backend.speed"),
        ("POST", "/backends", {"url": "http://127.0.0.1:9", "buffer": 0}, 400, "backend.buffer"),
        ("POST", "/backends", {"url": "http://127.0.0.1:9", "types": "a"}, 400, "backend.types"),
        ("POST", "/backends", {"url": "http://127.0.0.1:9", "weight": 2}, 400, "backend.weight"),
        ("POST", "/backends", "EXISTING", 409, "url"),
        ("DELETE", "/backends", None, 400, "url"),
        ("DELETE", "/backends?url=http://127.0.0.1:9", None, 404, "url"),
        ("DELETE", "/backends?url=EXISTING&wait=yes", None, 400, "wait"),
        ("PATCH", "/backends?url=EXISTING", {"url": "http://127.0.0.1:9"}, 400, "backend.url"),
        ("PATCH", "/backends?url=EXISTING", {"speed": "fast"}, 400, "backend.speed"),
        ("PATCH", "/backends?url=EXISTING", {"types": ["a b"]}, 400, "backend.types"),
        ("PATCH", "/backends?url=http://127.0.0.1:9", {"speed": 2}, 404, "url"),
    ],
)
def test_bad_admin_input_is_a_4xx_with_one_json_line_and_changes_nothing(method, path, body, code, field, one_backend):
    backend, port = one_backend
    existing = url(backend)
    path = path.replace("EXISTING", existing)
    body = {"url": existing} if body == "EXISTING" else body
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    answer_code, _, answer = get(url(port + 1, path), method=method, data=data)
    assert answer_code == code and answer.count(b"\n") <= 1, answer
    error = json.loads(answer)
    assert error["field"] == field and error["error"].startswith(f"{field}: "), error
    assert fleet_urls(port + 1) == {existing: "active"}
    assert get(url(port, "/x"))[0] == 200  # it keeps serving


def test_a_draining_backend_finishes_its_requests_and_leaves_after_the_last_or_at_drain(processes):
    """A request held in backend a (only a serves type h) while a drains: a takes no new request,
    shows as draining, and leaves when the held request ends; drained again with a request held
    past ``drain``, it leaves at drain with the request still in flight, which then ends normally."""
    a, b = free_ports(1), free_ports(1)
    port = free_ports(2)
    processes.echo_backends([a, b])
    processes.serve(
        "--backend", f"{url(a)},types=h|x", "--backend", f"{url(b)},types=x", "--drain", "1s",
        port=port, admin=port + 1,
    )  # fmt: skip

    def held_request(results: list) -> threading.Thread:
        thread = threading.Thread(target=lambda: results.append(get(url(port, "/hold"), {"X-Job-Type": "h"})[0]))
        thread.start()
        assert wait_for(lambda: [e["in_flight"] for e in admin("GET", port + 1)[1] if e["url"] == url(a)] == [1])
        return thread

    answers: list[int] = []
    thread = held_request(answers)
    code, entry = admin("DELETE", port + 1, f"/backends?url={url(a)}")
    assert code == 202 and entry["state"] == "draining" and entry["in_flight"] == 1
    assert f'hetlb_backend_draining{{backend="{url(a)}"}} 1.0' in get(url(port + 1, "/metrics"))[2].decode()
    assert [backend["state"] for backend in status(port + 1)["backends"]] == ["draining", "active"]
    assert get(url(port, "/x"), {"X-Job-Type": "h"})[0] == 400  # h left with its only (draining) backend
    before = received(a)
    for _ in range(20):
        assert get(url(port, "/x"), {"X-Job-Type": "x"})[0] == 200
    assert received(a) == before  # no new request to the draining backend
    get(url(a, "/admin/release"))
    thread.join(10.0)
    assert answers == [200]
    assert wait_for(lambda: fleet_urls(port + 1) == {url(b): "active"})  # it left with its last request

    assert admin("POST", port + 1, body={"url": url(a), "types": ["h"]})[0] == 201
    assert wait_for(lambda: get(url(port, "/x"), {"X-Job-Type": "h"})[0] == 200)  # admitted again
    thread = held_request(answers)
    code, entry = admin("DELETE", port + 1, f"/backends?url={url(a)}&wait=1")
    assert code == 200 and entry["state"] == "removed" and entry["in_flight"] == 1  # left at drain
    assert fleet_urls(port + 1) == {url(b): "active"}
    get(url(a, "/admin/release"))
    thread.join(10.0)
    assert answers == [200, 200]  # its request in flight still ended normally
    assert_accounting_clean(port + 1)


# --- the backends file -----------------------------------------------------------------------------


def write_backends(path, backends: list[str]) -> None:
    """Write a backends file whole (a rename: the watcher never reads half a file)."""
    part = path.with_suffix(".part")
    part.write_text("backends = [" + ", ".join(f'"{spec}"' for spec in backends) + "]\n")
    part.replace(path)


def test_the_backends_file_is_applied_when_it_changes_under_load(tmp_path, processes):
    a, b, c = (free_ports(1) for _ in range(3))
    port = free_ports(2)
    processes.echo_backends([a, b, c])
    backends_file = tmp_path / "backends.toml"
    write_backends(backends_file, [url(a), url(b)])
    config = tmp_path / "serve.toml"
    config.write_text(f'backends_file = "{backends_file}"\nbackends_file_interval = 0.1\n')
    serve = processes.serve("--config", str(config), port=port, admin=port + 1)
    load = SteadyLoad(url(port))
    time.sleep(1.0)
    assert received(c) == 0  # not in the fleet yet: nothing sent to it
    write_backends(backends_file, [url(b), f"{url(c)},speed=2"])  # c added, a drained and removed
    assert wait_for(lambda: fleet_urls(port + 1) == {url(b): "active", url(c): "active"}, timeout=5.0)
    after_removal = received(a)
    time.sleep(0.5)
    backends_file.write_text("backends = [nonsense\n")  # invalid: logged, the fleet stays
    assert wait_for(lambda: "the backends file is not applied" in error_text(serve), timeout=5.0)
    write_backends(backends_file, [f"{url(b)},speed=3", f"{url(c)},speed=2"])  # b patched
    assert wait_for(lambda: {e["url"]: e["speed"] for e in admin("GET", port + 1)[1]}.get(url(b)) == 3.0, timeout=5.0)
    result = load.wait()
    assert_none_failed_or_lost(result, [a, b, c])
    assert received(a) == after_removal and received(c) > 0
    assert_accounting_clean(port + 1)
    lines = [line for line in error_text(serve).splitlines() if "backends file is not applied" in line]
    assert len(lines) == 1 and "backends_file:" in lines[0]


def test_a_bad_backends_file_at_start_is_one_line_and_exit_2(tmp_path, processes):
    bad = tmp_path / "backends.json"
    bad.write_text('{"backends": [{"url": "http://127.0.0.1:9", "speed": -1}]}')
    argv = [sys.executable, "-m", "hetlb", "serve", "--listen", "127.0.0.1:1"]
    for extra, starts in [
        (["--backends-file", str(bad)], "hetlb: error: backend 1.speed:"),
        (["--backends-file", str(tmp_path / "missing.toml")], "hetlb: error: --backends-file: cannot read"),
        (["--backends-file", str(bad), "--backend", "http://127.0.0.1:9"], "hetlb: error: --backends-file:"),
    ]:
        code, err = finish(processes.start([*argv, *extra]))
        assert code == 2 and len(err.strip().splitlines()) == 1 and err.startswith(starts), err


# --- SIGHUP ------------------------------------------------------------------------------------------


def test_sighup_reloads_the_backends_and_keeps_the_policy_until_a_restart(tmp_path, processes):
    a, b, c = (free_ports(1) for _ in range(3))
    port = free_ports(2)
    processes.echo_backends([a, b, c])
    config = tmp_path / "serve.toml"
    config.write_text(f'backends = ["{url(a)}", "{url(b)}"]\nretries = 0\n')
    serve = processes.serve("--config", str(config), port=port, admin=port + 1)
    load = SteadyLoad(url(port))
    time.sleep(1.0)
    assert received(c) == 0  # not in the fleet yet: nothing sent to it
    config.write_text(f'backends = ["{url(b)}", "{url(c)},speed=2"]\nretries = 1\npolicy = "sed"\n')
    serve.send_signal(signal.SIGHUP)
    assert wait_for(lambda: fleet_urls(port + 1) == {url(b): "active", url(c): "active"}, timeout=5.0)
    after_removal = received(a)
    result = load.wait()
    assert_none_failed_or_lost(result, [a, b, c])
    assert received(a) == after_removal and received(c) > 0
    assert_accounting_clean(port + 1)
    assert status(port + 1)["policy"] == {"id": "jsq"}  # the policy changes at a restart only
    assert "reload keeps policy as they are" in error_text(serve)
    config.write_text(f'backends = ["{url(a)},speed=0"]\n')  # invalid: logged, nothing changes
    serve.send_signal(signal.SIGHUP)
    assert wait_for(lambda: "reload refused, nothing changed: backend 1.speed:" in error_text(serve))
    assert fleet_urls(port + 1) == {url(b): "active", url(c): "active"}
    assert serve.poll() is None


# --- discover ----------------------------------------------------------------------------------------


class ModelServer:
    """A stub engine: ``GET /v1/models`` lists ``models`` (OpenAI's format); any other request is
    answered 200 and its model (a POST body's ``model``, else the ``X-Job-Type`` header) recorded
    with whether a list naming it had been served."""

    def __init__(self, models: list[str]):
        self.models = list(models)
        self.listed: set[str] = set()  # every model a served list has named
        self.requests: Counter = Counter()
        self.before_listed: Counter = Counter()  # requests for a model no served list had named
        self.lock = threading.Lock()
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self, model: str | None = None):
                with stub.lock:
                    if self.path == "/v1/models":
                        body = json.dumps(
                            {"object": "list", "data": [{"id": m, "object": "model"} for m in stub.models]}
                        )
                        stub.listed.update(stub.models)
                    else:
                        model = model or self.headers.get("X-Job-Type", "")
                        stub.requests[model] += 1
                        if model not in stub.listed:
                            stub.before_listed[model] += 1
                        body = "{}"
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                self.do_GET(request["model"])

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def model_servers():
    servers: list[ModelServer] = []
    try:
        yield lambda models: servers.append(ModelServer(models)) or servers[-1]
    finally:
        for server in servers:
            server.close()


@pytest.mark.parametrize("routing", ["header", "body"])
def test_discover_routes_a_model_only_after_a_list_names_it(routing, model_servers, processes):
    """Two engines list model base; an adapter loaded on the second gets requests after the next
    list and never before, and never on the first; unloaded, it gets none. The model is named in
    the X-Job-Type header, or in the JSON body's model field (--type-body-field model)."""
    first, second = model_servers(["base"]), model_servers(["base"])
    port = free_ports(2)
    by_body = ["--type-body-field", "model"] if routing == "body" else []
    processes.serve(
        "--backend", f"{url(first.port)},types=discover", "--backend", f"{url(second.port)},types=discover",
        "--discover-interval", "200ms", "--policy", "random", *by_body, port=port, admin=port + 1,
    )  # fmt: skip
    unknown = 404 if routing == "body" else 400

    def ask(model: str) -> int:
        if routing == "body":
            body = json.dumps({"model": model, "messages": [{"role": "user", "content": "hi"}]}).encode()
            return get(url(port, "/v1/chat/completions"), {"Content-Type": "application/json"}, "POST", body)[0]
        return get(url(port, "/v1/chat/completions"), {"X-Job-Type": model})[0]

    assert ask("base") == 200  # discovered before serving: the first request of a listed model is routed
    assert status(port + 1)["job_types"] == ["base"]
    for _ in range(20):
        assert ask("lora-1") == unknown  # no engine lists it
    second.models.append("lora-1")  # an adapter loaded on one engine
    assert wait_for(lambda: ask("lora-1") == 200, timeout=5.0)
    for _ in range(100):
        assert ask("lora-1") == 200 and ask("base") == 200
    assert first.requests["lora-1"] == 0  # never to the engine that does not list it
    assert second.requests["lora-1"] >= 101 and second.before_listed["lora-1"] == 0  # never before its list
    assert first.requests["base"] > 0 and second.requests["base"] > 0
    second.models.remove("lora-1")  # unloaded: routed nowhere after the next list
    assert wait_for(lambda: ask("lora-1") == unknown, timeout=5.0)
    entries = admin("GET", port + 1)[1]
    assert [(e["types"], e["served_types"]) for e in entries] == [("discover", ["base"])] * 2
    assert_accounting_clean(port + 1)


# --- several dispatchers -----------------------------------------------------------------------------


def test_every_dispatcher_sees_an_admin_change_and_a_sighup(tmp_path, processes):
    a, b, c = (free_ports(1) for _ in range(3))
    port, admin_port = free_ports(2), free_ports(2)
    processes.echo_backends([a, b, c])
    config = tmp_path / "serve.toml"
    config.write_text(f'backends = ["{url(a)}", "{url(b)}"]\ndispatchers = 2\npolicy = "random"\n')
    parent = processes.serve("--config", str(config), port=port, admin=admin_port)
    processes.wait_listening(parent, admin_port + 1)
    assert admin("POST", admin_port, body={"url": url(c)})[0] == 201  # on dispatcher 0
    admitted = [{"url": url(c), "ejected": False}]  # dispatcher 1 has it, past its first active check
    assert wait_for(
        lambda: (
            [{k: e[k] for k in admitted[0]} for e in admin("GET", admin_port + 1)[1] if e["url"] == url(c)] == admitted
        ),
        timeout=5.0,
    )
    assert admin("DELETE", admin_port + 1, f"/backends?url={url(a)}&wait=1")[0] == 200  # on dispatcher 1
    assert wait_for(lambda: url(a) not in fleet_urls(admin_port), timeout=5.0)
    before = received(c)
    for m in range(2):
        for _ in range(40):
            assert get(url(port + m, "/x"))[0] == 200
    assert all(backend["requests"] > 0 for m in range(2) for backend in status(admin_port + m)["backends"]
               if backend["url"] == url(c))  # fmt: skip
    assert received(c) > before and received(a) == 0
    config.write_text(f'backends = ["{url(b)}"]\ndispatchers = 2\npolicy = "random"\n')
    parent.send_signal(signal.SIGHUP)  # the parent passes it on
    for m in range(2):
        assert wait_for(lambda m=m: fleet_urls(admin_port + m) == {url(b): "active"}, timeout=5.0)
    assert parent.poll() is None


def test_discover_follows_a_lora_adapter_loaded_on_a_running_engine(processes):
    """Two emulated engines (hetlb backend --openai) hold llama; an adapter loaded on the second
    (vLLM's /v1/load_lora_adapter) is routed to after the next list, only to that engine: every
    answer names it in X-Backend (the first engine would answer 404 for a model it does not hold)."""
    with backend_process(
        "--openai", "--token-time-ms", "1", "--listen", "127.0.0.1:0,models=llama", "--listen",
        "127.0.0.1:0,models=llama", count=2,
    ) as (_, engines):  # fmt: skip
        port = free_ports(2)
        processes.serve(
            "--backend", f"{engines[0]},types=discover", "--backend", f"{engines[1]},types=discover",
            "--type-body-field", "model", "--discover-interval", "200ms", "--policy", "random",
            port=port, admin=port + 1,
        )  # fmt: skip

        def complete(model: str):
            body = json.dumps({"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
            code, headers, answer = get(
                url(port, "/v1/chat/completions"), {"Content-Type": "application/json"}, "POST", body.encode()
            )
            return code, headers.get("X-Backend"), json.loads(answer)

        code, _, answer = complete("sql")
        assert code == 404 and answer["error"]["code"] == "model_not_found"  # no engine lists it yet
        adapter = {"lora_name": "sql", "lora_path": "/adapters/sql", "base_model": "llama"}
        loaded = get(engines[1] + "/v1/load_lora_adapter", {"Content-Type": "application/json"}, "POST",
                     json.dumps(adapter).encode())  # fmt: skip
        assert loaded[0] == 200
        assert wait_for(lambda: complete("sql")[0] == 200, timeout=5.0)
        answers = [complete("sql") for _ in range(60)]
        assert {(code, backend) for code, backend, _ in answers} == {(200, engines[1])}
        assert {complete("llama")[1] for _ in range(60)} == set(engines)  # the base model on both
        assert_accounting_clean(port + 1)
