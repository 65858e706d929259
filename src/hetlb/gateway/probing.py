"""The messages a dispatcher sends off the request's path: LED push probes, periodic snapshots of
every backend (polls of ``/load``, scrapes of an inference engine's metrics) and active health
checks.

Each is a GET to a backend: ``/load`` answers ``{"queue_length": n}``, an engine's Prometheus
path its running and waiting requests (hetlb.wire.load_reports.engine_load); either sets the
dispatcher's estimate of that backend (:meth:`hetlb.gateway.dispatcher.Dispatcher.report`); the
health path answers below 500 for a healthy backend. Push probes run as tasks of their own, at
most MAX_PENDING_PROBES at once (a push beyond it is skipped and counted); snapshots and health
checks run as loops, each at its interval, for the life of the dispatcher. A snapshot asks every
backend at once, each tau from the dispatcher's own phase, drawn uniform in [0, tau) at its start
(the ``independent`` phases of the model's snapshot, its twin).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time

import aiohttp
from yarl import URL

from hetlb.gateway.config import ServeConfig
from hetlb.gateway.dispatcher import Dispatcher
from hetlb.gateway.metrics import Metrics
from hetlb.wire.load_reports import MAX_SCRAPE_BYTES, EngineMetrics, engine_load, reported_number

MAX_PENDING_PROBES = 1024


class Prober:
    """The off-path messages of one dispatcher (probes, scrapes, health checks, and the fleet's
    GET /v1/models) on an HTTP ``session`` of their own, made in a running loop and closed by
    :meth:`stop`; ``base``: each backend's URL without a trailing slash."""

    def __init__(self, config: ServeConfig, dispatcher: Dispatcher, metrics: Metrics, base):
        self.config = config
        self.dispatcher = dispatcher
        self.metrics = metrics
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, enable_cleanup_closed=True),
            auto_decompress=False,
            skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"),
            cookie_jar=aiohttp.DummyCookieJar(),
        )
        self.base: list[URL] = base
        self.random = random.Random(config.seed)
        self.tasks: set[asyncio.Task] = set()
        self.probes: set[asyncio.Task] = set()
        self.probe_timeout = aiohttp.ClientTimeout(total=config.probe_timeout)
        self.health_timeout = aiohttp.ClientTimeout(total=max(min(config.health_interval, config.probe_timeout), 0.1))
        self.engine: EngineMetrics | None = None  # metrics: where the engines report their load

    def start(self) -> None:
        signals = self.config.signals
        if signals.poll_interval is not None:
            self.spawn(self.snapshots(signals.poll_interval, self.poll))
        if signals.metrics is not None:
            engine, tau = signals.metrics
            self.engine = self.config.engine(engine)
            self.spawn(self.snapshots(tau, self.scrape))
        if self.config.health_interval > 0:
            self.spawn(self.health_loop())

    async def stop(self) -> None:
        for task in [*self.tasks, *self.probes]:
            task.cancel()
        await asyncio.gather(*self.tasks, *self.probes, return_exceptions=True)
        await self.session.close()

    def spawn(self, coroutine) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def push(self) -> None:
        """LED push: probe d backends sampled without replacement, off the request's path."""
        if len(self.probes) >= MAX_PENDING_PROBES:
            self.metrics.rejected("probe_skipped")
            return
        current = self.dispatcher.current().tolist()
        sampled = self.random.sample(current, min(self.config.d, len(current)))
        task = asyncio.get_running_loop().create_task(self.probe_all(sampled, "push"))
        self.probes.add(task)
        task.add_done_callback(self.probes.discard)

    async def probe_all(self, backends, signal: str) -> None:
        await asyncio.gather(*(self.probe(s, signal) for s in backends), return_exceptions=True)

    async def probe(self, s: int, signal: str) -> bool:
        """GET /load of backend s: {"queue_length": n} sets its estimate; True when it did."""
        self.metrics.messages[signal] += 1
        with contextlib.suppress(aiohttp.ClientError, asyncio.TimeoutError, ValueError, OSError):
            async with self.session.get(self.base[s] / "load", timeout=self.probe_timeout) as answer:
                if answer.status != 200:
                    return False
                data = json.loads(await answer.read())
                reported = reported_number(data.get("queue_length") if isinstance(data, dict) else None)
                if reported is not None:
                    self.dispatcher.report(s, reported)
                    return True
        return False

    async def snapshots(self, interval: float, ask) -> None:
        """``ask`` every backend every ``interval`` seconds (all at once: the snapshot), from this
        dispatcher's phase, uniform in [0, interval)."""
        await asyncio.sleep(self.random.uniform(0.0, interval))
        while True:
            tick = time.monotonic()
            await asyncio.gather(*(ask(s) for s in self.dispatcher.current().tolist()), return_exceptions=True)
            await asyncio.sleep(max(0.0, interval - (time.monotonic() - tick)))

    async def poll(self, s: int) -> None:
        """A poll of backend s, its delay (sending to the report) measured."""
        sent = time.monotonic()
        if await self.probe(s, "poll"):
            self.metrics.scrape_delay.observe(time.monotonic() - sent)

    async def scrape(self, s: int) -> None:
        """GET the engine's metrics of backend s: running + waiting sets its estimate. No answer, a
        status other than 200 or a text longer than MAX_SCRAPE_BYTES is a failed scrape; a text
        without both gauges readable is a malformed one; both are counted, neither is a report."""
        assert self.engine is not None
        self.metrics.messages["metrics"] += 1
        url = self.base[s].with_path(self.base[s].path.rstrip("/") + self.engine.path)
        sent = time.monotonic()
        try:
            async with self.session.get(url, timeout=self.probe_timeout) as answer:
                text = await read_at_most(answer, MAX_SCRAPE_BYTES) if answer.status == 200 else None
        except (TimeoutError, aiohttp.ClientError, OSError):
            text = None
        if text is None:
            self.metrics.scrape_failures["failed"] += 1
            return
        reported = engine_load(text, self.engine)
        if reported is None:
            self.metrics.scrape_failures["malformed"] += 1
            return
        self.dispatcher.report(s, reported)
        self.metrics.scrape_delay.observe(time.monotonic() - sent)

    async def health_loop(self) -> None:
        """Active checks: GET health_path of every backend each interval; any answer below 500
        re-admits an ejected backend, a failure ejects an admitted one."""
        while True:
            tick = time.monotonic()
            checked = self.dispatcher.current().tolist()
            results = await asyncio.gather(*(self.healthy(s) for s in checked))
            for s, healthy in zip(checked, results):
                if healthy and self.dispatcher.ejected[s]:
                    self.dispatcher.set_ejected(s, False)
                    self.metrics.readmission(s)
                elif not healthy and not self.dispatcher.ejected[s]:
                    self.dispatcher.set_ejected(s, True)
                    self.metrics.ejection(s)
            await asyncio.sleep(max(0.0, self.config.health_interval - (time.monotonic() - tick)))

    async def healthy(self, s: int) -> bool:
        self.metrics.messages["health"] += 1
        url = self.base[s].with_path(self.base[s].path.rstrip("/") + self.config.health_path)
        try:
            async with self.session.get(url, timeout=self.health_timeout) as answer:
                await answer.read()
                return answer.status < 500
        except (TimeoutError, aiohttp.ClientError, OSError):
            return False


async def read_at_most(answer: aiohttp.ClientResponse, limit: int) -> bytes | None:
    """An answer's body, or None when it is longer than ``limit`` bytes."""
    if answer.content_length is not None and answer.content_length > limit:
        return None
    chunks, size = [], 0
    async for chunk in answer.content.iter_any():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)
