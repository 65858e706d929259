"""The model's server on HTTP (``hetlb backend``): a FIFO queue that serves up to c requests at once
(its concurrency c_s, 1 by default: the papers' server), each for a service time drawn from a
job-size distribution of mean 1 scaled by ``mean_service_ms / speed`` (``speed`` is mu_r of 000,
``mean_service_ms`` the time unit): the time it takes alone in service.

Every request on any method and path is a job, except ``GET /load`` (answers
``{"queue_length": n}``) and ``GET /healthz`` (answers ``ok``), which are answered at once. Every
response carries ``X-Queue-Length`` (the number in system once this request has left),
``X-Sojourn-Ms`` (time from this request's arrival to its departure epoch, the model's sojourn)
and, for a job, ``X-Service-Ms`` (its drawn service time) and ``X-Departure`` (its departure
epoch in seconds on the host's monotonic clock, from which a dispatcher on the same host measures
how late it learns the completion).

The queue runs on the ideal timeline of the Lindley recursion, on the host's monotonic clock: a job
arriving at ``a`` departs at ``max(a, previous departure) + service``, and its response is sent
when an :class:`~hetlb.wire.runtime.EpochClock` wakes it at that epoch. asyncio's own timers would wake it up to a
millisecond late (epoll waits in whole milliseconds, rounded up); the clock's thread waits with a
resolution of microseconds, so the response leaves within a fraction of a millisecond, plus the
event loop's scheduling. Any lateness delays that one response and never the jobs behind it, so it
does not accumulate, and it is not part of the sojourn the response reports: a client sees it as
part of the way back. The number in system counts the jobs whose ideal departure is still ahead.
A job is in the queue from its arrival whatever its client does: a client that disconnects while
waiting leaves its job in the queue, served as the model's server would serve it (on a
single-slot backend its departure epoch is fixed when it arrives). Several backends run in one
process (one event loop), each with its own queue and its own random streams.

A backend of concurrency c > 1 and rate curve phi (hetlb.model.servers) is a
:class:`MultiSlotServer`: with n requests in system, b = min(n, c) are in service (the earliest
arrived), each advancing at phi(b) / b (in units of its solo speed), the others wait FIFO. A job's
departure epoch then depends on the arrivals after it, so it is not fixed at its arrival: the
server runs the model's timeline exactly (one attained-work clock and a heap of the finishing
thresholds of the jobs in service, advanced to each arrival's epoch and to each departure's
computed epoch, never to the moment a timer happened to fire) and keeps one wake-up on the
EpochClock at its next departure, moved whenever b changes. Timer lateness delays the answers as
it does on the single-slot server, never the model's epochs.

Faults, for tests: with ``error_probability`` a job is served and then answered 500; with
``stall_probability`` a request never gets an answer (it takes no service and holds only its
connection, until the client gives up or the backend stops).
A stalled request is forgotten when its client disconnects.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import json
import math
import signal
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
from aiohttp import web

from hetlb import validation
from hetlb.errors import InputError
from hetlb.model.job_sizes import JobSizes
from hetlb.model.servers import RateCurve, check_servers, concurrency_array, concurrency_text, rate_curve_tuple
from hetlb.wire.addresses import host_ports, url
from hetlb.wire.load_reports import DEPARTURE, QUEUE_LENGTH, SERVICE, SOJOURN
from hetlb.wire.runtime import EpochClock, freeze_heap, loop_factory

DEFAULT_MEAN_SERVICE_MS = 20.0
SHUTDOWN_GRACE_S = 1.0
"""Seconds a stopping backend gives the jobs in its queue to be answered before it closes them."""


LISTEN_OPTIONS = "speed=S, concurrency=C, rate_curve=CURVE and models=A|B"


@dataclass(frozen=True)
class BackendSpec:
    """Where one backend listens (port 0: a free port the system chooses), its speed, and its
    concurrency c_s (UNLIMITED_CONCURRENCY: unlimited) and rate curve phi_s (None: those the
    fleet gives every backend that names none), and, for an emulated inference engine
    (hetlb.engines.inference), the base models it serves (None: those of ``--models``)."""

    host: str
    port: int
    speed: float = 1.0
    concurrency: int | None = None
    rate_curve: RateCurve | None = None
    models: tuple[str, ...] | None = None


def parse_listen(text: str) -> list[BackendSpec]:
    """The backends of one ``--listen HOST:PORT[,speed=S][,concurrency=C][,rate_curve=CURVE][,models=A|B]``
    (or ``HOST:FIRST-LAST[,...]``, one backend per port of the range, all alike). An item without
    ``=`` continues the option before it: ``rate_curve=table:1,1.8,2.4``."""
    address, *items = text.split(",")
    host, ports = host_ports("--listen", address)
    options: dict[str, str] = {}
    key = ""
    for item in items:
        name, equals, value = item.partition("=")
        if not equals and key == "rate_curve":
            options[key] += "," + item
            continue
        if name not in ("speed", "concurrency", "rate_curve", "models") or not equals or name in options:
            raise InputError("--listen", f"options are {LISTEN_OPTIONS}, each once, got {item!r} in {text!r}")
        key = name
        options[key] = value
    speed = 1.0
    if "speed" in options:
        try:
            number = float(options["speed"])
        except ValueError:
            raise InputError("--listen speed", f"must be a number > 0, got {options['speed']!r}") from None
        speed = validation.positive_number("--listen speed", number)
    concurrency = None
    if "concurrency" in options:
        concurrency = int(concurrency_array(options["concurrency"], 1)[0])
    rate_curve = RateCurve.parse(options["rate_curve"]) if "rate_curve" in options else None
    models = model_names("--listen models", options["models"], "|") if "models" in options else None
    return [BackendSpec(host, port, speed, concurrency, rate_curve, models) for port in ports]


def model_names(field: str, text: str, separator: str = ",") -> tuple[str, ...]:
    """The model ids of a list such as ``llama-3-8b,qwen-7b``: each non-empty, printable UTF-8
    without spaces, once."""
    validation.utf8(field, text)
    names = tuple(name.strip() for name in text.split(separator))
    for name in names:
        if not name or not name.isprintable() or any(character.isspace() for character in name):
            raise InputError(
                field,
                f"model ids are non-empty, printable and without spaces, separated by {separator!r}, "
                f"got {validation.shown(text)}",
            )
    if len(set(names)) != len(names):
        raise InputError(field, f"each model id once, got {validation.shown(text)}")
    return names


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
        if kind == "hyperexponential":
            rate = self._rate1 if self.rng.random() < self._p1 else self._rate2
            return float(self.rng.exponential(self.mean_s / rate))
        return float(self.job_sizes.sample(self.rng, 1)[0]) * self.mean_s


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

    async def serve(self, now: float, service: float, clock: EpochClock) -> float:
        """A job arrives at ``now``: its departure epoch, once it has come."""
        departure = self.arrive(now, service)
        await clock.sleep_until(departure)
        return departure


class Progress:
    """The milestones of one job of a MultiSlotServer: the work (seconds alone in service, increasing,
    each below the job's service) at which the server announces its progress, such as an inference
    engine's output tokens. Its thresholds, once it enters service with attained work a: a + each
    milestone, then a + service (its departure)."""

    __slots__ = ("milestones", "service", "entered")

    def __init__(self, milestones: Iterator[float], service: float):
        self.milestones: Iterator[float] | None = milestones
        self.service = service
        self.entered = math.nan

    def threshold(self) -> float:
        """The next threshold: the next milestone's, then the departure's."""
        assert self.milestones is not None
        milestone = next(self.milestones, None)
        if milestone is None:
            self.milestones = None  # the departure's threshold is the last
            return self.entered + self.service
        return self.entered + milestone


class MultiSlotServer:
    """One server of concurrency c and rate curve phi (hetlb.model.servers) on the model's
    timeline: b = min(n, c) of its n jobs in service (the earliest arrived), each advancing at
    phi(b) / b, the others waiting FIFO. A job's ``service`` is its time alone in service, in
    seconds.

    ``attained`` is the work each job in service has received since the clock's origin (seconds
    of solo service); a job entering service when it is a, with service x, leaves when it reaches
    a + x, its threshold, kept in a heap (O(log c) per event). :meth:`advance` moves the timeline
    to an epoch, departing every job whose computed departure epoch is not after it, in order;
    ``on_departure(job, epoch)`` hears of each. :meth:`serve` (the live step) awaits a job's
    departure: the server then keeps one wake-up on the EpochClock at its next departure epoch and
    moves it whenever that changes (b changed).

    A job may also have milestones (:class:`Progress`): the heap then holds its next threshold
    (a milestone's until the last), and ``on_milestone(job, epoch)`` hears of each milestone at the
    epoch its attained work reaches it; the one wake-up is at the server's next threshold of any
    kind, so that every milestone due at a wake-up is announced by it. A job may leave before its
    departure (:meth:`leave`): its remaining work is dropped."""

    def __init__(
        self,
        concurrency: int,
        rate_curve: RateCurve,
        on_departure: Callable | None = None,
        on_milestone: Callable | None = None,
    ):
        self.concurrency = concurrency
        self.rate_curve = rate_curve
        self.on_departure = on_departure
        self.on_milestone = on_milestone
        self.attained = 0.0
        self.updated = -math.inf  # the epoch the timeline has reached
        self.in_service: list[tuple[float, int]] = []  # a heap of (threshold, job)
        self.waiting: deque[tuple[float, int]] = deque()  # (service, job), FIFO
        self.progress: dict[int, Progress] = {}  # of the jobs with milestones
        self.jobs = itertools.count()
        self._per_job_rate: list[float] = [math.nan]  # phi(b) / b at index b, grown on use
        self.clock: EpochClock | None = None  # set by serve, or by the live owner of the server
        self._waiters: dict[int, asyncio.Future] = {}  # job -> its answer's future
        self._wake: asyncio.Future | None = None
        self._wake_epoch = math.inf

    def per_job_rate(self, b: int) -> float:
        """phi(b) / b, the rate of each of b jobs in service (in units of the solo rate)."""
        rates = self._per_job_rate
        if b >= len(rates):
            more = np.arange(len(rates), max(2 * len(rates), b + 1))
            rates.extend(self.rate_curve.per_job_rate(more).tolist())
        return rates[b]

    def next_departure(self) -> float:
        """The epoch of the next threshold (a departure or a milestone) if no job arrives or leaves
        before it (inf with none in service)."""
        if not self.in_service:
            return math.inf
        rate = self.per_job_rate(len(self.in_service))
        return max(self.updated, self.updated + (self.in_service[0][0] - self.attained) / rate)

    def advance(self, now: float) -> None:
        """Move the timeline to ``now``: every job whose departure epoch is not after it departs,
        every milestone not after it is announced, in order."""
        while self.in_service and (epoch := self.next_departure()) <= now:
            threshold, job = heapq.heappop(self.in_service)
            self.attained, self.updated = threshold, epoch
            progress = self.progress.get(job)
            if progress is not None and progress.milestones is not None:  # a milestone, not the departure
                heapq.heappush(self.in_service, (progress.threshold(), job))
                if self.on_milestone is not None:
                    self.on_milestone(job, epoch)
                continue
            self.progress.pop(job, None)
            self._admit_waiting()
            self._departed(job, epoch)
        if self.in_service:
            self.attained += self.per_job_rate(len(self.in_service)) * (now - self.updated)
        self.updated = max(self.updated, now)
        self._reschedule()

    def in_system(self, now: float) -> int:
        """Jobs at the server at ``now``, in service and waiting."""
        self.advance(now)
        return len(self.in_service) + len(self.waiting)

    def arrive(self, now: float, service: float, milestones: Iterator[float] | None = None) -> int:
        """A job arrives at ``now`` needing ``service`` seconds alone in service (with
        ``milestones``, those of its :class:`Progress`): its number."""
        self.advance(now)
        job = next(self.jobs)
        if milestones is not None:
            self.progress[job] = Progress(milestones, service)
        if len(self.in_service) < self.concurrency:
            self._start(service, job)
            self._reschedule()
        else:
            self.waiting.append((service, job))
        return job

    def leave(self, job: int, now: float) -> bool:
        """Job ``job`` leaves at ``now`` before its departure (its client went away), in service or
        waiting, its remaining work dropped: whether it was still there."""
        self.advance(now)
        self.progress.pop(job, None)
        self._waiters.pop(job, None)
        for index, (_, other) in enumerate(self.in_service):
            if other == job:
                self.in_service[index] = self.in_service[-1]
                self.in_service.pop()
                heapq.heapify(self.in_service)
                self._admit_waiting()
                self._reschedule()
                return True
        for entry in self.waiting:
            if entry[1] == job:
                self.waiting.remove(entry)
                return True
        return False

    async def serve(self, now: float, service: float, clock: EpochClock) -> float:
        """A job arrives at ``now``: its departure epoch, once it has come."""
        self.clock = clock
        job = self.arrive(now, service)
        future = clock.loop.create_future()
        self._waiters[job] = future
        return await future

    def _start(self, service: float, job: int) -> None:
        """Job ``job`` enters service now (attained work ``attained``)."""
        progress = self.progress.get(job)
        if progress is None:
            threshold = self.attained + service
        else:
            progress.entered = self.attained
            threshold = progress.threshold()
        heapq.heappush(self.in_service, (threshold, job))

    def _admit_waiting(self) -> None:
        """A slot came free: the first waiting job, if any, enters service."""
        if self.waiting:
            self._start(*self.waiting.popleft())

    def _departed(self, job: int, epoch: float) -> None:
        future = self._waiters.pop(job, None)
        if future is not None and not future.done():  # done: its client went away
            future.set_result(epoch)
        if self.on_departure is not None:
            self.on_departure(job, epoch)

    def _reschedule(self) -> None:
        """Keep the one wake-up at the next threshold's epoch (live only)."""
        epoch = self.next_departure()
        if self.clock is None or epoch == self._wake_epoch:
            return
        if self._wake is not None:
            self._wake.cancel()
        self._wake, self._wake_epoch = None, epoch
        if math.isfinite(epoch):
            self._wake = self.clock.loop.create_future()
            self._wake.add_done_callback(self._woken)
            self.clock.wake_at(epoch, self._wake)

    def _woken(self, future: asyncio.Future) -> None:
        if not future.cancelled():
            self._wake, self._wake_epoch = None, math.inf
            self.advance(time.monotonic())


@dataclass
class Backend:
    """One backend: its server (a FifoServer, or a MultiSlotServer when it serves several jobs at
    once), its service times and faults, its counters."""

    spec: BackendSpec
    service_times: ServiceTimes
    fault_rng: np.random.Generator
    error_probability: float = 0.0
    stall_probability: float = 0.0
    server: FifoServer | MultiSlotServer = field(default_factory=FifoServer)
    clock: EpochClock | None = None  # set by attach, when the fleet starts
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
        self.jobs += 1
        assert self.clock is not None
        departure = await self.server.serve(arrival, service, self.clock)
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
                **self.slots(),
                "method": request.method,
                "path": request.path,
                "job_type": request.headers.get("X-Job-Type"),
                "service_ms": service * 1e3,
                "status": status,
            }
        )
        response = self.response(status, body, n, (departure - arrival) * 1e3)  # the model's sojourn
        response.headers[SERVICE] = f"{service * 1e3:.6f}"
        response.headers[DEPARTURE] = f"{departure:.6f}"  # seconds, the host's monotonic clock
        return response

    def attach(self, clock: EpochClock) -> None:
        """Serve on ``clock`` (the fleet's, once it starts)."""
        self.clock = clock

    def announcement(self) -> str:
        """``URL speed=S`` (and ``concurrency=C rate_curve=CURVE`` when it serves several jobs at once)."""
        slots = "".join(f" {key}={value}" for key, value in self.slots().items())
        return f"{self.url} speed={self.spec.speed:g}{slots}"

    def slots(self) -> dict:
        """The concurrency and rate curve of a multi-slot backend (for its answers' bodies)."""
        if not isinstance(self.server, MultiSlotServer):
            return {}
        return {"concurrency": concurrency_text(self.server.concurrency), "rate_curve": self.server.rate_curve.text}

    @staticmethod
    def response(status: int, body: str, in_system: int, sojourn_ms: float) -> web.Response:
        content_type = "application/json" if body.startswith("{") else "text/plain"
        response = web.Response(status=status, text=body, content_type=content_type)
        response.headers[QUEUE_LENGTH] = str(in_system)
        response.headers[SOJOURN] = f"{sojourn_ms:.6f}"
        return response


class Fleet:
    """Backends in this process's event loop, each with a ``spec`` (where it listens), a ``url`` (set
    once it listens), ``attach(clock)`` and an aiohttp low-level handler ``handle(request)``:
    ``await start()`` binds them all (or none), ``await stop()`` closes them; also an async context
    manager. :meth:`announcements` are the lines ``hetlb backend`` prints once all listen."""

    def __init__(self, backends: Sequence):
        self.backends = list(backends)
        self._runners: list[web.ServerRunner] = []
        self._clock: EpochClock | None = None

    @property
    def urls(self) -> list[str]:
        return [backend.url for backend in self.backends]

    def announcements(self) -> list[str]:
        """One line per backend: ``URL speed=S`` and what else describes it."""
        return [backend.announcement() for backend in self.backends]

    async def start(self) -> list[str]:
        self._clock = EpochClock(asyncio.get_running_loop())
        try:
            for backend in self.backends:
                backend.attach(self._clock)
                server = web.Server(backend.handle, handler_cancellation=True)  # a gone client's handler ends
                runner = web.ServerRunner(server, shutdown_timeout=SHUTDOWN_GRACE_S)
                await runner.setup()
                self._runners.append(runner)
                site = web.TCPSite(runner, backend.spec.host, backend.spec.port)
                await site.start()
                backend.url = url(backend.spec.host, runner.addresses[0][1])
        except (OSError, UnicodeError, ValueError, OverflowError) as error:  # UnicodeError: a name IDNA refuses
            await self.stop()
            where = validation.shorten(f"{backend.spec.host}:{backend.spec.port}")
            reason = getattr(error, "strerror", None) or error
            raise InputError("--listen", f"cannot listen on {where}: {reason}") from None
        return self.urls

    async def stop(self) -> None:
        runners, self._runners = self._runners, []
        await asyncio.gather(*(runner.cleanup() for runner in runners))
        clock, self._clock = self._clock, None
        if clock is not None:
            clock.stop()

    async def __aenter__(self) -> Fleet:
        await self.start()
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.stop()


def fleet_servers(specs: Sequence[BackendSpec], concurrency, rate_curve) -> list[tuple[int, RateCurve]]:
    """The concurrency c_s and rate curve phi_s of each backend: its spec's, else the fleet's
    ``concurrency`` (the speeds' syntax: 8, "2x8,2x32", "inf") and ``rate_curve`` (a RateCurve or
    its text, one for all, one per backend), checked together."""
    if not specs:
        raise InputError("--listen", "give at least one backend")
    slots = concurrency_array(concurrency, len(specs))
    curves = rate_curve_tuple(rate_curve, len(specs))
    slots = np.array([c if spec.concurrency is None else spec.concurrency for spec, c in zip(specs, slots)])
    curves = tuple(c if spec.rate_curve is None else spec.rate_curve for spec, c in zip(specs, curves))
    check_servers(slots, curves)
    return list(zip(slots.tolist(), curves))


class BackendFleet(Fleet):
    """The model's servers (:class:`Backend`) as a :class:`Fleet`.

    >>> async def demo():
    ...     async with BackendFleet([BackendSpec("127.0.0.1", 0, speed=2.0)], mean_service_ms=1.0) as fleet:
    ...         return fleet.urls[0].startswith("http://127.0.0.1:")
    >>> asyncio.run(demo())
    True

    ``concurrency`` and ``rate_curve`` are those of every backend whose spec names none
    (:func:`fleet_servers`); a backend of concurrency 1 is the FIFO server.
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
        concurrency=None,
        rate_curve=None,
    ):
        servers = fleet_servers(specs, concurrency, rate_curve)
        mean_service_ms = validation.positive_number("--mean-service-ms", mean_service_ms)
        error_probability = validation.probability("--error-probability", error_probability)
        stall_probability = validation.probability("--stall-probability", stall_probability)
        job_sizes = job_sizes or JobSizes()
        streams = np.random.SeedSequence(validation.seed("--seed", seed)).spawn(len(specs))
        backends = []
        for spec, stream, (c, curve) in zip(specs, streams, servers):
            service_stream, fault_stream = stream.spawn(2)
            service_times = ServiceTimes(
                job_sizes, mean_service_ms / spec.speed / 1e3, np.random.default_rng(service_stream)
            )
            server = FifoServer() if c == 1 else MultiSlotServer(c, curve)
            faults = np.random.default_rng(fault_stream)
            backends.append(Backend(spec, service_times, faults, error_probability, stall_probability, server))
        super().__init__(backends)


def run_backends(fleet: Fleet, announce: Callable[[str], None] = print) -> int:
    """Run ``fleet`` until SIGTERM or SIGINT; announce each backend once all listen (its
    :meth:`Fleet.announcements` line: ``URL speed=S``, and ``concurrency=C rate_curve=CURVE`` when
    it serves several jobs at once)."""

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signal_number in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signal_number, stop.set)
        await fleet.start()
        freeze_heap()
        try:
            for line in fleet.announcements():
                announce(line)
            sys.stdout.flush()
            await stop.wait()
        finally:
            await fleet.stop()

    with asyncio.Runner(loop_factory=loop_factory()) as runner:  # uvloop when installed
        runner.run(serve())
    return 0
