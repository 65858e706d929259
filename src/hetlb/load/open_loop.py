"""An open-loop load generator (``hetlb loadgen``): arrivals at a given rate, sent whether or not
earlier requests have been answered (never closed-loop, so no coordinated omission), spread over
one or several target URLs and job types, with a warm-up and a measured window.

The arrivals are the model's process (hetlb.model.arrivals) of long-run rate ``rate``: Poisson;
batches (``batch:mean=B``) at Poisson epochs of rate ``rate / B`` with geometric sizes of mean B,
the requests of a batch sent at the same instant; or a two-phase MMPP
(``mmpp:ratio=R,on=T1,off=T2``) whose phase sojourns have means T1 and T2 in units of
``time_unit_ms`` (the mean service time at speed 1, as the backends' ``mean_service_ms``).

Each request goes to target m with probability ``shares[m]`` (equal by default) and has job type
k with probability ``job_types[k]``, independently (a batch's requests too, as each job of a batch
draws its dispatcher and its type in the model): with Poisson
arrivals target m sees a Poisson stream of rate ``rate * shares[m]``, as the m-th of M
dispatchers sees its own arrivals in the model. Arrival
epochs are drawn in advance (a seeded generator) on the host's monotonic clock; the sender sleeps
until each one (an :class:`~hetlb.wire.runtime.EpochClock`, within a fraction of a millisecond,
where asyncio's timers wake up to a millisecond late) and sends it, so any lateness (the event
loop's scheduling) delays a request without shifting the ones after it. That lateness is measured
and reported (``send_lag_ms``). A response time runs from the actual send to the end of the
response body. The objects alive when the run starts are kept out of the garbage collector's view
for its duration (:func:`~hetlb.wire.runtime.frozen_heap`), so that no full collection pauses the
sends.

Requests sent during the warm-up are answered but not measured; the measured requests are those
sent in the ``duration`` seconds after it. After the last send the generator waits for the
answers, each at most ``timeout`` seconds. Memory stays bounded: at most ``max_in_flight``
requests are outstanding (an arrival beyond it is not sent and is counted in ``not_sent``, never
queued on the client), and each measured request keeps three floats (24 bytes).

The result (a :class:`~hetlb.results.load.LoadResult`: a mapping of the figures, with the spec and
the versions as ``metadata``) has the simulator's keys (``mean_response_time`` and
``mean_response_time_ci`` (on the log scale, above zero) from the means of ``batches`` batches of equal numbers of the measured
requests in the order sent (as the simulator's batches of jobs; bursts fill slices of time unevenly),
``response_time_p50/p95/p99``, ``blocking_probability``: the share of 503 answers), in
milliseconds, with the counts of requests, errors and per-backend answers (from ``X-Backend``, or
the target's URL when the answer has none), the achieved rate, and the backends' own share of the
response time (``X-Sojourn-Ms``) when they report it. A figure that cannot be computed (no answer,
no report) is None (null in JSON).

The open-loop machinery (the arrivals, the clock, the window, the in-flight bound, the send lag and
the progress line) is :class:`OpenLoopGenerator`; :class:`LoadGenerator` sends plain requests with
it, and hetlb.load.inference streamed chat completions.
"""

from __future__ import annotations

import asyncio
import math
import re
import sys
import time
from array import array
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import aiohttp
import numpy as np

from hetlb import validation
from hetlb.errors import InputError
from hetlb.model.arrivals import ArrivalProcess
from hetlb.progress import LOG_INTERVAL, is_terminal
from hetlb.results.base import finite_or_null, versions
from hetlb.results.load import LoadResult
from hetlb.stats.intervals import positive_interval
from hetlb.wire.addresses import http_url
from hetlb.wire.load_reports import SOJOURN
from hetlb.wire.runtime import EpochClock, frozen_heap

ARRIVAL_CHUNK = 4096
"""Arrival epochs drawn at a time (the generator never holds the whole run's arrivals)."""
START_DELAY_S = 0.05
"""Seconds between starting and the first possible arrival (the session and its connector ready)."""
PROGRESS_INTERVAL_S = 1.0
ARRIVALS_PER_S_AT_MOST = 1e7
"""More arrivals than one process can draw, schedule and count in a second (about 4e6 measured
with none of them sent, --max-in-flight 1); a rate above it cannot be the rate of the run."""
MEASURED_BYTES = 24
"""Bytes kept per measured request (three floats)."""
DEFAULT_TIME_UNIT_MS = 20.0
"""The time unit of an MMPP's phase means: the mean service time at speed 1 (hetlb backend's
default --mean-service-ms)."""


@dataclass(frozen=True)
class OpenLoopSpec:
    """What every open-loop load has: where it goes and when. Times in seconds, ``rate`` in requests
    per second (in total, long-run), ``arrivals`` the process (an ArrivalProcess or its text),
    ``time_unit_ms`` the unit of an MMPP's phase means."""

    targets: tuple[str, ...]
    rate: float
    duration: float
    warmup: float = 0.0
    seed: int = 0
    shares: tuple[float, ...] | None = None
    timeout: float = 30.0
    max_in_flight: int = 10_000
    batches: int = 20
    arrivals: ArrivalProcess = field(default_factory=ArrivalProcess)
    time_unit_ms: float = DEFAULT_TIME_UNIT_MS

    def __post_init__(self):
        object.__setattr__(self, "arrivals", ArrivalProcess.parse(self.arrivals))
        validation.positive_number("--time-unit-ms", self.time_unit_ms)
        if not self.targets:
            raise InputError("--target", "give at least one target URL")
        for target in self.targets:
            http_url("--target", target)
        validation.positive_number("--rate", self.rate)
        validation.positive_number("--duration", self.duration)
        validation.number("--warmup", self.warmup, 0.0)
        self.check_cost()
        validation.seed("--seed", self.seed)
        validation.positive_number("--timeout", self.timeout)
        validation.count("--max-in-flight", self.max_in_flight)
        validation.integer("--batches", self.batches, 2, 128)
        if self.shares is not None:
            if len(self.shares) != len(self.targets):
                raise InputError("--shares", f"give one share per target ({len(self.targets)}), got {len(self.shares)}")
            validation.positive_finite_array("--shares", self.shares)

    def check_cost(self) -> None:
        """Refuse a load longer than a day (validation.TIME_LIMIT_S), one whose arrivals one process
        cannot draw in the run's time (at most ARRIVALS_PER_S_AT_MOST a second), or one whose
        measurements do not fit in memory."""
        total = self.warmup + self.duration
        arrivals = self.rate * total
        validation.check_cost("--duration", f"a load of {total:g} s", seconds=total, advice="run it in parts")
        validation.check_cost(
            "--rate",
            f"{validation.quantity(arrivals)} requests in {total:g} s",
            memory=MEASURED_BYTES * self.rate * self.duration,
            seconds=arrivals / ARRIVALS_PER_S_AT_MOST,
            time_limit=total,
            advice=f"one loadgen sends at most {ARRIVALS_PER_S_AT_MOST:.0e} a second: lower --rate or run several",
        )

    def to_dict(self) -> dict:
        """The spec as JSON-ready values (a result's metadata)."""
        values = {name: getattr(self, name) for name in self.__dataclass_fields__}
        return {**values, "arrivals": self.arrivals.text}

    def target_probabilities(self) -> np.ndarray:
        shares = np.ones(len(self.targets)) if self.shares is None else np.asarray(self.shares, float)
        return normalised(shares)


@dataclass(frozen=True)
class LoadSpec(OpenLoopSpec):
    """An open-loop load of plain HTTP requests: ``method`` on ``path`` of each target, with the
    ``X-Job-Type`` header drawn from ``job_types`` (proportions) when given."""

    job_types: Mapping[str, float] | None = None
    path: str = "/"
    method: str = "GET"

    def __post_init__(self):
        super().__post_init__()
        if not re.fullmatch(r"[A-Za-z]{1,20}", self.method):
            raise InputError(
                "--method", f"must be an HTTP method such as GET or POST, got {validation.shown(self.method)}"
            )
        if self.method.upper() == "CONNECT":
            raise InputError(
                "--method", "CONNECT asks for a tunnel (RFC 9110 9.3.6), not an answer: use another method"
            )
        if not re.fullmatch(r"/[!-~]*", self.path):
            raise InputError("--path", f"must start with / and be printable ASCII, got {validation.shown(self.path)}")
        if self.job_types is not None:
            if not self.job_types:
                raise InputError("--job-types", "give at least one TYPE=PROPORTION")
            for name in self.job_types:
                validation.job_type_name("--job-types", name)
            validation.positive_finite_array("--job-types", list(self.job_types.values()))

    def to_dict(self) -> dict:
        job_types = None if self.job_types is None else dict(self.job_types)
        return {**super().to_dict(), "job_types": job_types}

    def type_probabilities(self) -> tuple[list[str | None], np.ndarray]:
        if not self.job_types:
            return [None], np.ones(1)
        names, probabilities = proportions_of(self.job_types)
        labels: list[str | None] = [*names]
        return labels, probabilities


def proportions_of(weights: Mapping[str, float]) -> tuple[list[str], np.ndarray]:
    """The names of ``weights`` and their probabilities (the weights normalised)."""
    return list(weights), normalised(np.asarray(list(weights.values()), float))


def normalised(weights: np.ndarray) -> np.ndarray:
    """Positive finite ``weights`` as probabilities, scaled by their largest first so that their
    sum cannot overflow (1e308 twice)."""
    scaled = weights / weights.max()
    return scaled / scaled.sum()


def parse_proportions(field: str, items: Sequence[str]) -> dict[str, float]:
    """``TYPE=PROPORTION`` items (e.g. ``a=3`` ``b=1``) as a mapping; a bare ``TYPE`` has proportion 1."""
    proportions: dict[str, float] = {}
    for item in items:
        name, equals, value = item.partition("=")
        if not name or name in proportions:
            raise InputError(field, f"each item is a new TYPE=PROPORTION, got {item!r}")
        try:
            proportions[name] = float(value) if equals else 1.0
        except ValueError:
            raise InputError(field, f"the proportion of {name!r} must be a number, got {value!r}") from None
    return proportions


def mean_and_interval(values: np.ndarray, batches: int) -> tuple[float, list[float]]:
    """The mean of ``values`` (in the order the requests were sent) and its 95% interval over the
    means of ``batches`` batches of equal numbers of them, on the log scale (Cox's, above zero:
    hetlb.stats.intervals.positive_interval); nan and [nan, nan] without values."""
    if not len(values):
        return math.nan, [math.nan, math.nan]
    batch_means = [part.mean() if len(part) else math.nan for part in np.array_split(values, batches)]
    return float(values.mean()), positive_interval(batch_means)


def percentiles(values: np.ndarray, levels: Sequence[float]) -> list[float]:
    """The ``levels`` percentiles of ``values`` (numpy's linear interpolation); nan without values."""
    return [float(np.percentile(values, q)) if len(values) else math.nan for q in levels]


@dataclass
class WindowCounts:
    """What every open-loop run counts: requests sent, in flight and not sent, and of the measured
    window's requests their number, targets, send lags, 503s and errors by kind."""

    spec: OpenLoopSpec
    sent: int = 0  # every request sent, warm-up included
    measured: int = 0  # sent in the measured window
    blocked: int = 0  # answered 503
    errors: Counter = field(default_factory=Counter)
    targets: Counter = field(default_factory=Counter)
    not_sent: int = 0
    in_flight: int = 0
    send_lag: array = field(default_factory=lambda: array("d"))  # s, of the measured requests
    window: float = 0.0  # seconds the measured window lasted

    def count_measured(self, target: str, lag: float) -> None:
        """A request sent in the window has ended (answered or not)."""
        self.measured += 1
        self.targets[target] += 1
        self.send_lag.append(lag)

    def window_figures(self) -> dict:
        """The figures of the run as a whole (unrounded; nan where not computed)."""
        lag = np.frombuffer(self.send_lag, dtype=np.float64) * 1e3
        return {
            "blocking_probability": self.blocked / self.measured if self.measured else math.nan,
            "requests": self.measured,
            "blocked": self.blocked,
            "errors": sum(self.errors.values()),
            "errors_by_kind": dict(sorted(self.errors.items())),
            "not_sent": self.not_sent,
            "offered_rate": self.spec.rate,
            "achieved_rate": self.measured / self.window if self.window > 0 else math.nan,
            "duration": self.window,
            "warmup": self.spec.warmup,
            "send_lag_ms": {
                "mean": float(lag.mean()) if len(lag) else math.nan,
                "p99": float(np.percentile(lag, 99)) if len(lag) else math.nan,
                "max": float(lag.max()) if len(lag) else math.nan,
            },
        }

    def record(self, answer, target: str, mark, offset: float) -> None:
        """What :meth:`OpenLoopGenerator.exchange` measured of a request to ``target`` sent ``offset``
        s after the window's start (already counted by :meth:`count_measured`)."""
        raise NotImplementedError

    def result(self):
        """The run's result (a member of hetlb.results)."""
        raise NotImplementedError

    def progress_text(self) -> str:
        """The run's figures so far, for the progress line."""
        return f"{self.blocked} blocked, {sum(self.errors.values())} errors"


@dataclass
class Measurements(WindowCounts):
    """What a plain HTTP load saw: the measured requests' (send offset, response time, backend's
    sojourn) in three float arrays."""

    send_offset: array = field(default_factory=lambda: array("d"))  # s from the window's start
    response_time: array = field(default_factory=lambda: array("d"))  # s, answered 2xx
    sojourn: array = field(default_factory=lambda: array("d"))  # ms, X-Sojourn-Ms (nan if none)
    backends: Counter = field(default_factory=Counter)  # answered 2xx, by X-Backend (else the target)
    job_types: Counter = field(default_factory=Counter)

    def record(self, answer: tuple, target: str, job_type: str | None, offset: float) -> None:
        """The ``answer`` (outcome, backend, response time in s, sojourn in ms) of a request sent
        ``offset`` s after the window's start."""
        outcome, backend, response_time, sojourn = answer
        if job_type is not None:
            self.job_types[job_type] += 1
        if outcome == "ok":
            self.backends[backend] += 1
            self.send_offset.append(offset)
            self.response_time.append(response_time)
            self.sojourn.append(sojourn)
        elif outcome == "blocked":
            self.blocked += 1
        else:
            self.errors[outcome] += 1

    def result(self) -> LoadResult:
        spec = self.spec
        times = np.frombuffer(self.response_time, dtype=np.float64) * 1e3
        offsets = np.frombuffer(self.send_offset, dtype=np.float64)
        sojourn = np.frombuffer(self.sojourn, dtype=np.float64)
        mean, mean_ci = mean_and_interval(times[np.argsort(offsets, kind="stable")], spec.batches)
        answered = len(times)
        has_sojourn = answered > 0 and bool(np.isfinite(sojourn).all())
        p50, p95, p99 = percentiles(times, (50, 95, 99))
        window = self.window_figures()
        figures = finite_or_null(
            {
                "time_unit": "ms",
                "mean_response_time": mean,
                "mean_response_time_ci": mean_ci,
                "response_time_p50": p50,
                "response_time_p95": p95,
                "response_time_p99": p99,
                "blocking_probability": window.pop("blocking_probability"),
                "requests": window.pop("requests"),
                "answered": answered,
                **window,
                "mean_backend_sojourn": float(sojourn.mean()) if has_sojourn else math.nan,
                "mean_overhead": float(times.mean() - sojourn.mean()) if has_sojourn else math.nan,
                "per_backend": dict(sorted(self.backends.items())),
                "per_target": dict(sorted(self.targets.items())),
                "per_job_type": dict(sorted(self.job_types.items())),
            }
        )
        return LoadResult(figures, {"load": spec.to_dict(), "versions": versions()})

    def progress_text(self) -> str:
        mean = 1e3 * sum(self.response_time) / len(self.response_time) if self.response_time else math.nan
        return f"mean {mean:.1f} ms, {super().progress_text()}"


class OpenLoopGenerator:
    """The open-loop machinery every load shares: arrival epochs drawn from the spec's process, sent
    on time by an EpochClock, a warm-up and a measured window, at most ``max_in_flight``
    outstanding, the send lag and the progress line. A subclass says what one request is:
    :meth:`marks` draws what each request carries besides its epoch and target, :meth:`exchange`
    sends one and returns what it measured, and its ``measurements`` record that
    (``measurements.record(answer, target, mark, offset)``) and give the result.
    ``on_send(sent, target, mark)`` is told of every request as it goes (for tests)."""

    def __init__(self, spec: OpenLoopSpec, measurements: WindowCounts, progress: bool, on_send: Callable | None):
        self.spec = spec
        self.measurements = measurements
        self.progress = progress
        self.on_send = on_send
        self._tasks: set[asyncio.Task] = set()
        self.started = time.monotonic()

    def marks(self, rng: np.random.Generator, count: int) -> list:
        """What each of ``count`` successive requests carries (drawn after their epochs and targets)."""
        raise NotImplementedError

    async def exchange(self, session: aiohttp.ClientSession, target: str, mark, sent: float, measured: bool):
        """Send one request (``sent``: the monotonic clock at its send) and return what it measured."""
        raise NotImplementedError

    def arrivals(self, rng: np.random.Generator, horizon: float = math.inf):
        """(epoch offset, target index, mark) of every arrival, in order, forever (or, for an MMPP,
        until its phases pass ``horizon`` seconds: one of tiny rates may draw no arrival for ever)."""
        for epochs, target in self.epochs(rng, horizon):
            yield from zip(epochs.tolist(), target.tolist(), self.marks(rng, len(epochs)))

    def epochs(self, rng: np.random.Generator, horizon: float = math.inf):
        """Chunks of (epoch offsets in seconds, target indices) of the arrival process, forever (an
        MMPP's until ``horizon``)."""
        spec = self.spec
        process = spec.arrivals
        targets = spec.target_probabilities()
        if process.kind == "mmpp":
            yield from self.mmpp_epochs(rng, targets, horizon)
            return
        batch = process.mean_batch if process.kind == "batch" else 1.0
        offset = 0.0
        while True:
            starts = offset + np.cumsum(rng.exponential(batch / spec.rate, ARRIVAL_CHUNK))
            if process.kind == "batch":  # a batch's requests at its epoch, each to its own target
                epochs = np.repeat(starts, rng.geometric(1.0 / batch, ARRIVAL_CHUNK))
                yield epochs, rng.choice(len(targets), len(epochs), p=targets)
            else:
                yield starts, rng.choice(len(targets), ARRIVAL_CHUNK, p=targets)
            offset = float(starts[-1])

    def mmpp_epochs(self, rng: np.random.Generator, targets: np.ndarray, horizon: float = math.inf):
        """The MMPP's chunks: from its stationary phase, exponential phase sojourns (means T1 and
        T2 in ``time_unit_ms``), Poisson arrivals at the phase's rate within each, until a phase
        starts after ``horizon`` seconds."""
        spec = self.spec
        process = spec.arrivals
        unit_s = spec.time_unit_ms / 1e3
        rates = process.phase_rates(spec.rate)  # (on, off), per second
        means = (process.on * unit_s, process.off * unit_s)
        phase = 0 if rng.random() < process.on_probability() else 1
        start, end = 0.0, rng.exponential(means[phase])
        while start < horizon:
            expected = rates[phase] * (end - start)  # draw about what the phase needs, at most a chunk
            count = int(min(ARRIVAL_CHUNK, 2 * expected + 16))
            epochs = start + np.cumsum(rng.exponential(1.0 / rates[phase], count))
            epochs = epochs[epochs < end]
            if len(epochs) == count:
                start = float(epochs[-1])
            else:  # the phase ends before the chunk: the next starts at its end (memoryless)
                phase = 1 - phase
                start, end = end, end + rng.exponential(means[phase])
            if len(epochs):
                yield epochs, rng.choice(len(targets), len(epochs), p=targets)

    async def run(self):
        """Send the whole load and wait for its answers: the measurements' result."""
        spec = self.spec
        self.started = time.monotonic()
        connector = aiohttp.TCPConnector(limit=0, force_close=False)
        timeout = aiohttp.ClientTimeout(total=spec.timeout)
        progress = asyncio.create_task(self.report_progress()) if self.progress else None
        clock = EpochClock(asyncio.get_running_loop())  # sends on time, where asyncio's timers are late
        try:
            with frozen_heap():
                async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
                    await self.send_all(session, clock)
        finally:
            clock.stop()
        if progress is not None:
            progress.cancel()
            self.draw_progress(final=True)
        return self.measurements.result()

    async def send_all(self, session, clock: EpochClock) -> None:
        """Send every arrival of the run at its epoch (the host's monotonic clock) and wait for all."""
        spec = self.spec
        start = time.monotonic() + START_DELAY_S
        window_start = start + spec.warmup
        end = window_start + spec.duration
        for offset, target, mark in self.arrivals(np.random.default_rng(spec.seed), spec.warmup + spec.duration):
            scheduled = start + offset
            if scheduled >= end:
                break
            if scheduled > time.monotonic():  # a batch's next request is due at once
                await clock.sleep_until(scheduled)
            measured = scheduled >= window_start
            if self.measurements.in_flight >= spec.max_in_flight:
                self.measurements.not_sent += 1
                continue
            self.measurements.in_flight += 1  # counted now: the task may start after the next arrival
            task = asyncio.create_task(
                self.send(session, spec.targets[target], mark, scheduled, window_start if measured else None)
            )
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        self.measurements.window = spec.duration
        if self._tasks:
            await asyncio.gather(*self._tasks)

    async def send(self, session, target: str, mark, scheduled: float, window_start: float | None) -> None:
        """One request (already counted in flight); measured when ``window_start`` is given (sent in
        the measured window)."""
        m = self.measurements
        m.sent += 1
        sent = time.monotonic()
        if self.on_send is not None:
            self.on_send(sent, target, mark)
        try:
            answer = await self.exchange(session, target, mark, sent, window_start is not None)
        finally:
            m.in_flight -= 1
        if window_start is not None:
            m.count_measured(target, sent - scheduled)
            m.record(answer, target, mark, scheduled - window_start)

    async def report_progress(self) -> None:
        interval_s = PROGRESS_INTERVAL_S if is_terminal(sys.stderr) else LOG_INTERVAL
        while True:
            await asyncio.sleep(interval_s)
            self.draw_progress()

    def draw_progress(self, final: bool = False) -> None:
        m = self.measurements
        spec = self.spec
        elapsed = time.monotonic() - self.started
        total = spec.warmup + spec.duration
        phase = "warm-up" if elapsed < spec.warmup else "measuring"
        line = (
            f"loadgen: {min(elapsed, total):.0f}/{total:g} s {phase if not final else 'done'}, {m.sent} sent, "
            f"{m.in_flight} in flight, {m.progress_text()}"
        )
        if is_terminal(sys.stderr):
            sys.stderr.write(f"\r\033[K{line}" + ("\n" if final else ""))
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()


class LoadGenerator(OpenLoopGenerator):
    """Runs one LoadSpec (plain HTTP requests) in the running event loop: ``await run()`` gives the
    result mapping. ``on_send(sent, target, job_type)`` is told of every request as it goes."""

    spec: LoadSpec

    def __init__(self, spec: LoadSpec, progress: bool = True, on_send: Callable | None = None):
        super().__init__(spec, Measurements(spec), progress, on_send)
        self.type_names, self.type_probabilities = spec.type_probabilities()

    def marks(self, rng: np.random.Generator, count: int) -> list:
        """The job type (its name, or None without types) of each request."""
        return [self.type_names[k] for k in rng.choice(len(self.type_probabilities), count, p=self.type_probabilities)]

    async def exchange(self, session, target: str, job_type: str | None, sent: float, measured: bool) -> tuple:
        """(outcome, backend, response time in s, X-Sojourn-Ms) of one request."""
        spec = self.spec
        headers = {"X-Job-Type": job_type} if job_type is not None else {}
        outcome, backend, sojourn = "", target, math.nan
        try:
            async with session.request(spec.method, target + spec.path, headers=headers) as response:
                await response.read()
                status = response.status
                backend = response.headers.get("X-Backend", target)
                sojourn = float(response.headers.get(SOJOURN, "nan"))
            outcome = "ok" if 200 <= status < 300 else "blocked" if status == 503 else str(status)
        except TimeoutError:
            outcome = "timeout"
        except aiohttp.ClientError as error:
            outcome = "connection" if isinstance(error, aiohttp.ClientConnectionError) else "client"
        except ValueError:  # an X-Sojourn-Ms that is not a number
            outcome = "bad-header"
        return outcome, backend, time.monotonic() - sent, sojourn


def generate_load(spec: LoadSpec, progress: bool = True) -> LoadResult:
    """Run ``spec`` to its end in a new event loop: its LoadResult, a mapping of the figures (see the
    module's docstring) with metadata."""
    return asyncio.run(LoadGenerator(spec, progress=progress).run())


def shown(value, spec: str = ".3f") -> str:
    """A figure of the result as text: "n/a" for None (not computed)."""
    return "n/a" if value is None else format(value, spec)


def outcome_lines(result: Mapping) -> list[str]:
    """The lines of an open-loop run's text that every kind of request shares: blocked, errors,
    the send lag and the arrivals not sent."""
    lag = result["send_lag_ms"]
    kinds = ", ".join(f"{kind}: {count}" for kind, count in result["errors_by_kind"].items())
    lines = [
        f"blocked (503)       {result['blocked']}  (probability {shown(result['blocking_probability'], '.4f')})",
        f"errors              {result['errors']}" + (f"  ({kinds})" if result["errors"] else ""),
        f"send lag            mean {shown(lag['mean'])} ms, p99 {shown(lag['p99'])} ms",
    ]
    if result["not_sent"]:
        lines.append(f"not sent            {result['not_sent']} (more than --max-in-flight outstanding)")
    return lines


def format_load_result(result: Mapping) -> str:
    """The result as a few readable lines (milliseconds)."""
    low, high = result["mean_response_time_ci"]
    lines = [
        f"requests            {result['requests']} in {result['duration']:g} s: achieved rate "
        f"{shown(result['achieved_rate'], '.1f')}/s of {result['offered_rate']:g}/s offered",
        f"mean response time  {shown(result['mean_response_time'])} ms  (95% CI {shown(low)} .. {shown(high)})",
        f"p50 / p95 / p99     {shown(result['response_time_p50'])} / {shown(result['response_time_p95'])} / "
        f"{shown(result['response_time_p99'])} ms",
        *outcome_lines(result),
    ]
    if result["mean_backend_sojourn"] is not None:
        lines.append(
            f"backends' share     {shown(result['mean_backend_sojourn'])} ms (X-Sojourn-Ms); the rest, "
            f"{shown(result['mean_overhead'])} ms, is the path to and from them"
        )
    lines.append("per backend:")
    lines += [f"  {backend}  {count}" for backend, count in result["per_backend"].items()]
    return "\n".join(lines)
