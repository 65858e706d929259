"""The model's server on HTTP (``hetlb backend``): a single-server FIFO queue that serves one request
at a time, each for a service time drawn from a job-size distribution of mean 1 scaled by
``mean_service_ms / speed`` (``speed`` is mu_r of 000, ``mean_service_ms`` the time unit).

Every request on any method and path is a job, except ``GET /load`` (answers
``{"queue_length": n}``) and ``GET /healthz`` (answers ``ok``), which are answered at once. Every
response carries ``X-Queue-Length`` (the number in system once this request has left),
``X-Sojourn-Ms`` (time from this request's arrival to its departure epoch, the model's sojourn)
and, for a job, ``X-Service-Ms`` (its drawn service time) and ``X-Departure`` (its departure
epoch in seconds on the host's monotonic clock, from which a dispatcher on the same host measures
how late it learns the completion).

The queue runs on the ideal timeline of the Lindley recursion, on the host's monotonic clock: a job
arriving at ``a`` departs at ``max(a, previous departure) + service``, and its response is sent
when an :class:`~hetlb.live.runtime.EpochClock` wakes it at that epoch. asyncio's own timers would wake it up to a
millisecond late (epoll waits in whole milliseconds, rounded up); the clock's thread waits with a
resolution of microseconds, so the response leaves within a fraction of a millisecond, plus the
event loop's scheduling. Any lateness delays that one response and never the jobs behind it, so it
does not accumulate, and it is not part of the sojourn the response reports: a client sees it as
part of the way back. The number in system counts the jobs whose
ideal departure is still ahead. A job is in the queue from its arrival whatever its client does: a
client that disconnects while waiting leaves its job in the queue, served as the model's server
would serve it (the job's departure epoch is fixed when it arrives). Several backends run in one
process (one event loop), each with its own queue and its own random streams.

Faults, for tests: with ``error_probability`` a job is served and then answered 500; with
``stall_probability`` a request never gets an answer (it takes no service and holds only its
connection, until the client gives up or the backend stops).
A stalled request is forgotten when its client disconnects.
"""

from __future__ import annotations

import asyncio
import json
import math
import signal
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from aiohttp import web

from hetlb import validation
from hetlb.errors import InputError
from hetlb.live.addresses import host_ports, url
from hetlb.live.runtime import EpochClock, freeze_heap, loop_factory
from hetlb.model.job_sizes import JobSizes

DEFAULT_MEAN_SERVICE_MS = 20.0
SHUTDOWN_GRACE_S = 1.0
"""Seconds a stopping backend gives the jobs in its queue to be answered before it closes them."""


@dataclass(frozen=True)
class BackendSpec:
    """Where one backend listens (port 0: a free port the system chooses) and its speed."""

    host: str
    port: int
    speed: float = 1.0


def parse_listen(text: str) -> list[BackendSpec]:
    """The backends of one ``--listen HOST:PORT[,speed=S]`` (or ``HOST:FIRST-LAST[,speed=S]``, one
    backend per port of the range, all of speed S)."""
    address, *options = text.split(",")
    host, ports = host_ports("--listen", address)
    speed = 1.0
    for option in options:
        key, equals, value = option.partition("=")
        if key != "speed" or not equals:
            raise InputError("--listen", f"options are speed=S, got {option!r} in {text!r}")
        try:
            number = float(value)
        except ValueError:
            raise InputError("--listen speed", f"must be a number > 0, got {value!r}") from None
        speed = validation.positive_number("--listen speed", number)
    return [BackendSpec(host, port, speed) for port in ports]


class ServiceTimes:
    """Service times in seconds: sizes of mean 1 (the simulator's JobSizes) times ``mean_s``."""

    def __init__(self, job_sizes: JobSizes, mean_s: float, rng: np.random.Generator):
        self.job_sizes = job_sizes
        self.mean_s = mean_s
        self.rng = rng
        self._p1, self._rate1, self._rate2 = job_sizes.phase_parameters()

    def draw(self) -> float:
        kind = self.job_sizes.kind
        if kind == "deterministic":
            return self.mean_s
        if kind == "exponential":
            return float(self.rng.exponential(self.mean_s))
        rate = self._rate1 if self.rng.random() < self._p1 else self._rate2
        return float(self.rng.exponential(self.mean_s / rate))


class FifoServer:
    """One server, first come first served, one job at a time, on the ideal timeline: departure =
    max(arrival, previous departure) + service (Lindley). Times in seconds of one clock."""

    def __init__(self) -> None:
        self._departures: deque[float] = deque()  # of the jobs in system, increasing
        self._last_departure = -math.inf

    def in_system(self, now: float) -> int:
        """Jobs whose departure is after ``now``."""
        while self._departures and self._departures[0] <= now:
            self._departures.popleft()
        return len(self._departures)

    def arrive(self, now: float, service: float) -> float:
        """A job arrives at ``now`` needing ``service``: its departure epoch."""
        departure = max(now, self._last_departure) + service
        self._last_departure = departure
        self._departures.append(departure)
        return departure


@dataclass
class Backend:
    """One backend: its FIFO server, its service times and faults, its counters."""

    spec: BackendSpec
    service_times: ServiceTimes
    fault_rng: np.random.Generator
    error_probability: float = 0.0
    stall_probability: float = 0.0
    server: FifoServer = field(default_factory=FifoServer)
    clock: EpochClock | None = None  # set by BackendFleet.start
    url: str = ""
    jobs: int = 0
    errors: int = 0
    stalled: int = 0

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        arrival = time.monotonic()
        if request.method == "GET" and request.path in ("/load", "/healthz"):
            n = self.server.in_system(arrival)
            body = json.dumps({"queue_length": n}) if request.path == "/load" else "ok"
            return self.response(200, body, n, 0.0)
        await request.read()
        stall, error = self.fault_rng.random(2)
        if stall < self.stall_probability:
            self.stalled += 1
            await asyncio.Future()  # never set: cancelled when the client or the backend goes
        service = self.service_times.draw()
        departure = self.server.arrive(arrival, service)
        self.jobs += 1
        assert self.clock is not None
        await self.clock.sleep_until(departure)
        now = time.monotonic()
        n = self.server.in_system(now)
        status = 200
        if error < self.error_probability:
            self.errors += 1
            status = 500
        body = json.dumps(
            {
                "backend": self.url,
                "speed": self.spec.speed,
                "method": request.method,
                "path": request.path,
                "job_type": request.headers.get("X-Job-Type"),
                "service_ms": service * 1e3,
                "status": status,
            }
        )
        response = self.response(status, body, n, (departure - arrival) * 1e3)  # the model's sojourn
        response.headers["X-Service-Ms"] = f"{service * 1e3:.6f}"
        response.headers["X-Departure"] = f"{departure:.6f}"  # seconds, the host's monotonic clock
        return response

    @staticmethod
    def response(status: int, body: str, in_system: int, sojourn_ms: float) -> web.Response:
        content_type = "application/json" if body.startswith("{") else "text/plain"
        response = web.Response(status=status, text=body, content_type=content_type)
        response.headers["X-Queue-Length"] = str(in_system)
        response.headers["X-Sojourn-Ms"] = f"{sojourn_ms:.6f}"
        return response


class BackendFleet:
    """Backends in this process's event loop: ``await start()`` binds them all (or none), ``await
    stop()`` closes them; also an async context manager.

    >>> async def demo():
    ...     async with BackendFleet([BackendSpec("127.0.0.1", 0, speed=2.0)], mean_service_ms=1.0) as fleet:
    ...         return fleet.urls[0].startswith("http://127.0.0.1:")
    >>> asyncio.run(demo())
    True
    """

    def __init__(
        self,
        specs: Sequence[BackendSpec],
        *,
        mean_service_ms: float = DEFAULT_MEAN_SERVICE_MS,
        job_sizes: JobSizes | None = None,
        seed: int = 0,
        error_probability: float = 0.0,
        stall_probability: float = 0.0,
    ):
        if not specs:
            raise InputError("--listen", "give at least one backend")
        mean_service_ms = validation.positive_number("--mean-service-ms", mean_service_ms)
        error_probability = validation.probability("--error-probability", error_probability)
        stall_probability = validation.probability("--stall-probability", stall_probability)
        job_sizes = job_sizes or JobSizes()
        streams = np.random.SeedSequence(validation.seed("--seed", seed)).spawn(len(specs))
        self.backends = []
        for spec, stream in zip(specs, streams):
            service_stream, fault_stream = stream.spawn(2)
            service_times = ServiceTimes(
                job_sizes, mean_service_ms / spec.speed / 1e3, np.random.default_rng(service_stream)
            )
            self.backends.append(
                Backend(spec, service_times, np.random.default_rng(fault_stream), error_probability, stall_probability)
            )
        self._runners: list[web.ServerRunner] = []
        self._clock: EpochClock | None = None

    @property
    def urls(self) -> list[str]:
        return [backend.url for backend in self.backends]

    async def start(self) -> list[str]:
        self._clock = EpochClock(asyncio.get_running_loop())
        try:
            for backend in self.backends:
                backend.clock = self._clock
                server = web.Server(backend.handle, handler_cancellation=True)  # a gone client's stall ends
                runner = web.ServerRunner(server, shutdown_timeout=SHUTDOWN_GRACE_S)
                await runner.setup()
                self._runners.append(runner)
                site = web.TCPSite(runner, backend.spec.host, backend.spec.port)
                await site.start()
                backend.url = url(backend.spec.host, runner.addresses[0][1])
        except OSError as error:
            await self.stop()
            raise InputError(
                "--listen", f"cannot listen on {backend.spec.host}:{backend.spec.port}: {error.strerror or error}"
            ) from None
        return self.urls

    async def stop(self) -> None:
        runners, self._runners = self._runners, []
        await asyncio.gather(*(runner.cleanup() for runner in runners))
        clock, self._clock = self._clock, None
        if clock is not None:
            clock.stop()

    async def __aenter__(self) -> BackendFleet:
        await self.start()
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.stop()


def run_backends(fleet: BackendFleet, announce: Callable[[str], None] = print) -> int:
    """Run ``fleet`` until SIGTERM or SIGINT; announce each backend's ``URL speed=S`` once all listen."""

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signal_number in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signal_number, stop.set)
        await fleet.start()
        freeze_heap()
        try:
            for backend in fleet.backends:
                announce(f"{backend.url} speed={backend.spec.speed:g}")
            sys.stdout.flush()
            await stop.wait()
        finally:
            await fleet.stop()

    with asyncio.Runner(loop_factory=loop_factory()) as runner:  # uvloop when installed
        runner.run(serve())
    return 0
