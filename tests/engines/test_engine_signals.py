"""hetlb serve with the engines' own load signals, real processes on 127.0.0.1: a scrape of each
backend's Prometheus metrics every tau (``--signals metrics:vllm:tau=50ms``) in front of stub
engines (small aiohttp servers run by the test, answering /metrics with the numbers the test sets),
the ORCA endpoint-load-metrics header on answers (piggyback), the scrapes' counts and delay on the
admin listener, and the configuration's one-line errors.

Every process is started by the ``processes`` fixture and stopped at teardown, also when a test
fails; every stub engine is stopped the same way; request counts are bounded."""

from __future__ import annotations

import asyncio
import statistics
import threading
import time

import pytest
from aiohttp import web

from hetlb.cli import main

from support.serve_processes import Processes, free_ports, get, status, wait_for

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

TAU_S = 0.05


class StubEngine:
    """An engine's load signals only: ``GET /metrics`` in vLLM's text format with ``running`` and
    ``waiting`` split over two models (or ``metrics_text`` as set, with ``metrics_status``), the
    arrival time and numbers of each scrape in ``scrapes``; any other request is answered with
    ``answer_headers`` (an event stream with ``stream``), its request headers kept in ``asked``;
    ``/hold`` waits until :meth:`release`."""

    def __init__(self, port: int):
        self.port = port
        self.running, self.waiting = 0, 0
        self.metrics_text: bytes | None = None
        self.metrics_status = 200
        self.scrapes: list[tuple[float, int]] = []
        self.answer_headers: dict = {}
        self.stream = False
        self.asked: list[dict] = []
        self.loop = asyncio.new_event_loop()
        self.held: asyncio.Event | None = None
        self.started = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def set_load(self, running: int, waiting: int) -> float:
        """Set the numbers the next scrapes answer; the time of the change."""
        self.running, self.waiting = running, waiting
        return time.monotonic()

    def run(self) -> None:
        asyncio.set_event_loop(self.loop)
        app = web.Application()
        app.router.add_get("/metrics", self.metrics)
        app.router.add_route("*", "/{tail:.*}", self.answer)
        self.runner = web.AppRunner(app, access_log=None)
        self.loop.run_until_complete(self.runner.setup())
        self.loop.run_until_complete(web.TCPSite(self.runner, "127.0.0.1", self.port).start())
        self.held = asyncio.Event()
        self.started.set()
        self.loop.run_forever()
        self.loop.run_until_complete(self.runner.cleanup())
        self.loop.close()

    async def metrics(self, request: web.Request) -> web.Response:
        running, waiting = self.running, self.waiting
        self.scrapes.append((time.monotonic(), running + waiting))
        text = self.metrics_text if self.metrics_text is not None else vllm_text(running, waiting)
        return web.Response(body=text, status=self.metrics_status, content_type="text/plain")

    async def answer(self, request: web.Request) -> web.StreamResponse:
        self.asked.append(dict(request.headers))
        await request.read()
        if request.path == "/hold":
            assert self.held is not None
            await self.held.wait()
        if not self.stream:
            return web.json_response({"ok": True}, headers=self.answer_headers)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", **self.answer_headers})
        await response.prepare(request)
        for event in (b'data: {"token": 1}\n\n', b"data: [DONE]\n\n"):
            await response.write(event)
        await response.write_eof()
        return response

    def release(self) -> None:
        assert self.held is not None
        self.loop.call_soon_threadsafe(self.held.set)

    def start(self) -> StubEngine:
        self.thread.start()
        assert self.started.wait(10)
        return self

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def vllm_text(running: int, waiting: int) -> bytes:
    """vLLM's /metrics with the two gauges of two models (the sums are ``running`` and ``waiting``),
    comments and a NaN gauge between them."""
    first, second = running - running // 2, running // 2
    return (
        "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
        "# TYPE vllm:num_requests_running gauge\n"
        f'vllm:num_requests_running{{engine="0",model_name="llama"}} {first:.1f}\n'
        f'vllm:num_requests_running{{engine="0",model_name="llama-lora"}} {second:.1f}\n'
        "# HELP vllm:kv_cache_usage_perc KV-cache usage.\n# TYPE vllm:kv_cache_usage_perc gauge\n"
        'vllm:kv_cache_usage_perc{engine="0",model_name="llama"} NaN\n'
        "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n"
        "# TYPE vllm:num_requests_waiting gauge\n"
        f'vllm:num_requests_waiting{{engine="0",model_name="llama"}} {waiting:.1f}\n'
        'vllm:num_requests_waiting{engine="0",model_name="llama-lora"} 0.0\n'
    ).encode()


@pytest.fixture
def engines():
    started: list[StubEngine] = []

    def start(count: int) -> list[StubEngine]:
        base = free_ports(count)
        started.extend(StubEngine(base + i).start() for i in range(count))
        return started[-count:]

    try:
        yield start
    finally:
        for engine in started:
            engine.release()
            engine.stop()


def url(port: int, path: str = "") -> str:
    return f"http://127.0.0.1:{port}{path}"


def serve(processes: Processes, engines: list[StubEngine], *args: str) -> int:
    """hetlb serve in front of ``engines``; its admin port."""
    port = free_ports(2)
    backends = [arg for engine in engines for arg in ("--backend", url(engine.port))]
    processes.serve(*backends, "--health-interval", "0", *args, port=port, admin=port + 1)
    return port


def estimates(admin: int) -> list[int]:
    return [backend["estimate"] for backend in status(admin)["backends"]]


# --- scrapes ---------------------------------------------------------------------------------------


def test_the_scraped_numbers_are_the_estimates_within_one_tau_of_a_change(processes, engines):
    """jsq on metrics alone: each estimate is its engine's running + waiting as last scraped. After
    each change the first scrape that the engine answers carries the new number, which /status
    shows; the engine sees a scrape at most every tau, and the first after a change within tau
    of it, at the median of five changes (tau + 0.5 s at most, for a loaded machine)."""
    first, second = engines(2)
    port = serve(processes, [first, second], "--signals", f"metrics:vllm:tau={TAU_S * 1000:g}ms", "--policy", "jsq")
    admin = port + 1
    assert status(admin)["signals"] == ["metrics:vllm:tau=50ms"]
    gaps = []
    for running, waiting in [(2, 3), (7, 1), (0, 0), (4, 4), (1, 0)]:
        changed = first.set_load(running, waiting)
        second.set_load(waiting, 0)
        assert wait_for(lambda: estimates(admin) == [running + waiting, waiting], timeout=10)  # noqa: B023
        answered = next(at for at, number in first.scrapes if at >= changed and number == running + waiting)
        gaps.append(answered - changed)
    assert statistics.median(gaps) <= TAU_S and max(gaps) <= TAU_S + 0.5, gaps
    times = [at for at, _ in first.scrapes]
    assert (
        min(later - earlier for earlier, later in zip(times, times[1:])) >= 0.5 * TAU_S
    )  # never faster (up to the jitter of sending)
    seen = status(admin)
    assert seen["messages"]["metrics_scrapes"] >= len(first.scrapes) + len(second.scrapes) - 2  # two may be on the way
    assert seen["messages"]["scrapes_failed"] == seen["messages"]["scrapes_malformed"] == 0
    assert seen["scrape_delay"]["count"] > 0 and 0 < seen["scrape_delay"]["mean_ms"] < 1000 * TAU_S * 20
    code, _, text = get(url(admin, "/metrics"))
    assert code == 200 and b'hetlb_scrape_failures_total{reason="malformed"} 0.0' in text
    assert b"hetlb_scrape_delay_seconds_count" in text and b'hetlb_probes_total{signal="metrics"}' in text


def test_a_scrape_combines_with_the_own_in_flight_requests(processes, engines):
    """inflight,metrics: with k own requests held at an engine that reports n, the estimate is
    k + max(0, n - k) (docs/reference/serve.md), and k again when the engine reports fewer."""
    (engine,) = engines(1)
    port = serve(processes, [engine], "--signals", "inflight,metrics:vllm:tau=50ms")
    admin = port + 1
    threads = [threading.Thread(target=get, args=(url(port, "/hold"),), kwargs={"timeout": 20}) for _ in range(2)]
    for thread in threads:
        thread.start()
    assert wait_for(lambda: len(engine.asked) == 2)
    engine.set_load(3, 2)  # 5 in system: 2 of them this dispatcher's
    assert wait_for(lambda: status(admin)["backends"][0]["others"] == 3)
    assert estimates(admin) == [5]
    engine.set_load(1, 0)  # fewer than its own
    assert wait_for(lambda: status(admin)["backends"][0]["others"] == 0)
    assert estimates(admin) == [2]
    engine.release()
    for thread in threads:
        thread.join(20)
    engine.set_load(0, 0)
    assert wait_for(lambda: estimates(admin) == [0] and status(admin)["backends"][0]["in_flight"] == 0)


def test_malformed_and_failed_scrapes_are_counted_and_are_no_report(processes, engines):
    (engine,) = engines(1)
    port = serve(processes, [engine], "--signals", "metrics:vllm:tau=20ms")
    admin = port + 1
    engine.set_load(2, 1)
    assert wait_for(lambda: estimates(admin) == [3])
    engine.metrics_text = b"vllm:num_requests_running{model_name=llama} 9\nvllm:num_requests_waiting 1\n"
    assert wait_for(lambda: status(admin)["messages"]["scrapes_malformed"] >= 3)
    engine.metrics_status = 500
    assert wait_for(lambda: status(admin)["messages"]["scrapes_failed"] >= 3)
    assert estimates(admin) == [3]  # neither changed the estimate
    code, _, body = get(url(port, "/x"))
    assert code == 200  # and the dispatcher still serves
    engine.metrics_text, engine.metrics_status = None, 200
    engine.set_load(0, 4)
    assert wait_for(lambda: estimates(admin) == [4])


def test_a_configured_engine_is_scraped_at_its_path(processes, engines, tmp_path):
    (engine,) = engines(1)
    config = tmp_path / "serve.toml"
    config.write_text(
        'signals = "metrics:stub:tau=20ms"\n'
        "[engine_metrics.stub]\n"
        'path = "/metrics"\nrunning = "stub_running"\nwaiting = "stub_waiting"\n'
    )
    port = serve(processes, [engine], "--config", str(config))
    engine.metrics_text = b'# TYPE stub_running gauge\nstub_running 4\nstub_waiting{queue="a"} 2\nstub_waiting 1\n'
    assert wait_for(lambda: estimates(port + 1) == [7])


# --- ORCA ------------------------------------------------------------------------------------------

ORCA_6 = "TEXT named_metrics.num_requests_running=4, named_metrics.num_requests_waiting=2"


@pytest.mark.parametrize(
    "stream, header, estimate",
    [
        (False, ORCA_6, 6),  # a whole answer: the report no longer counts the request it is on
        (True, ORCA_6, 5),  # an event stream's headers: the request is still running, one of the 6
        (False, 'JSON {"named_metrics": {"num_requests_running": 1, "num_requests_waiting": 3}}', 4),
    ],
)
def test_an_orca_header_sets_the_estimate(processes, engines, stream, header, estimate):
    """inflight,piggyback: one request answered with an ORCA report n leaves the others' count at
    n (whole answer) or n - 1 (event stream) and so the estimate, with nothing in flight."""
    (engine,) = engines(1)
    engine.stream = stream
    engine.answer_headers = {"endpoint-load-metrics": header}
    port = serve(processes, [engine], "--signals", "inflight,piggyback")
    code, headers, body = get(url(port, "/v1/chat/completions"), method="POST", data=b"{}")
    assert code == 200 and headers["endpoint-load-metrics"] == header
    assert (b"[DONE]" in body) == stream
    assert engine.asked[0]["endpoint-load-metrics-format"] == "TEXT"  # the proxy asked for the reports
    backend = status(port + 1)["backends"][0]
    assert (backend["estimate"], backend["others"], backend["in_flight"]) == (estimate, estimate, 0)


def test_x_queue_length_comes_before_the_orca_header(processes, engines):
    (engine,) = engines(1)
    engine.answer_headers = {"endpoint-load-metrics": ORCA_6, "X-Queue-Length": "2"}
    port = serve(processes, [engine], "--signals", "piggyback", "--policy", "jsq")
    assert get(url(port, "/x"))[0] == 200
    assert estimates(port + 1) == [2]


# --- configuration ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, key",
    [
        (["--signals", "metrics:vllm:tau=fast"], "--signals metrics tau"),
        (["--signals", "metrics:vllm:every=50ms"], "--signals"),
        (["--signals", "metrics:no such"], "--signals metrics"),
        (["--signals", "metrics:tgi"], "--signals"),  # no [engine_metrics.tgi]
        (["--signals", "poll,metrics"], "--signals"),  # two snapshots
        (["--signals", "metrics,metrics:sglang"], "--signals"),
        (["--signals", "inflight:vllm"], "--signals"),
    ],
)
def test_bad_engine_signals_are_one_line_errors(args, key, capsys):
    assert main(["serve", "--listen", "127.0.0.1:1", "--backend", "http://127.0.0.1:9", *args]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"hetlb: error: {key}:"), lines


@pytest.mark.parametrize(
    "table, key",
    [
        ('[engine_metrics.vllm]\npath = "/m"\nrunning = "a"\nwaiting = "b"\n', "engine_metrics.vllm"),
        ('[engine_metrics.x]\npath = "/m"\nrunning = "a"\n', "engine_metrics.x.waiting"),
        ('[engine_metrics.x]\npath = "m"\nrunning = "a"\nwaiting = "b"\n', "engine_metrics.x.path"),
        ('[engine_metrics.x]\npath = "/m"\nrunning = "a b"\nwaiting = "b"\n', "engine_metrics.x.running"),
        ('[engine_metrics.x]\npath = "/m"\nrunning = "a"\nwaiting = "a"\n', "engine_metrics.x.waiting"),
        ('[engine_metrics.x]\npath = "/m"\nrunning = "a"\nwaiting = "b"\nport = 1\n', "engine_metrics.x.port"),
        ('engine_metrics = "vllm"\n', "engine_metrics"),
    ],
)
def test_bad_engine_metrics_tables_are_one_line_errors(table, key, tmp_path, capsys):
    config = tmp_path / "serve.toml"
    config.write_text(table)
    assert main(["serve", "--config", str(config), "--listen", "127.0.0.1:1", "--backend", "http://127.0.0.1:9"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"hetlb: error: {key}:"), lines
