"""The messages a dispatcher sends off the request's path: LED push probes, periodic polls of
every backend (a snapshot) and active health checks.

Each is a GET to a backend: ``/load`` answers ``{"queue_length": n}``, which sets the dispatcher's
estimate of that backend (:meth:`hetlb.live.dispatcher.Dispatcher.report`); the health path
answers below 500 for a healthy backend. Push probes run as tasks of their own, at most
MAX_PENDING_PROBES at once (a push beyond it is skipped and counted); polls and health checks run
as loops, each at its interval, for the life of the dispatcher.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time

import aiohttp
from yarl import URL

from hetlb.live.config import ServeConfig
from hetlb.live.dispatcher import Dispatcher
from hetlb.live.load_reports import reported_number
from hetlb.live.metrics import Metrics

MAX_PENDING_PROBES = 1024


class Prober:
    """The off-path messages of one dispatcher, on the proxy's HTTP ``session``; ``base``: each
    backend's URL without a trailing slash."""

    def __init__(
        self, config: ServeConfig, dispatcher: Dispatcher, metrics: Metrics, session: aiohttp.ClientSession, base
    ):
        self.config = config
        self.dispatcher = dispatcher
        self.metrics = metrics
        self.session = session
        self.base: list[URL] = base
        self.random = random.Random(config.seed)
        self.tasks: set[asyncio.Task] = set()
        self.probes: set[asyncio.Task] = set()
        self.probe_timeout = aiohttp.ClientTimeout(total=config.probe_timeout)
        self.health_timeout = aiohttp.ClientTimeout(total=max(min(config.health_interval, config.probe_timeout), 0.1))

    def start(self) -> None:
        if self.config.signals.poll_interval is not None:
            self.spawn(self.poll_loop())
        if self.config.health_interval > 0:
            self.spawn(self.health_loop())

    async def stop(self) -> None:
        for task in [*self.tasks, *self.probes]:
            task.cancel()
        await asyncio.gather(*self.tasks, *self.probes, return_exceptions=True)

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

    async def probe(self, s: int, signal: str) -> None:
        """GET /load of backend s: {"queue_length": n} sets its estimate."""
        self.metrics.messages[signal] += 1
        with contextlib.suppress(aiohttp.ClientError, asyncio.TimeoutError, ValueError, OSError):
            async with self.session.get(self.base[s] / "load", timeout=self.probe_timeout) as answer:
                if answer.status != 200:
                    return
                data = json.loads(await answer.read())
                reported = reported_number(data.get("queue_length") if isinstance(data, dict) else None)
                if reported is not None:
                    self.dispatcher.report(s, reported)

    async def poll_loop(self) -> None:
        """Poll every backend of the fleet's /load every tau (all at once: the snapshot)."""
        interval = self.config.signals.poll_interval
        assert interval is not None
        while True:
            tick = time.monotonic()
            await self.probe_all(self.dispatcher.current().tolist(), "poll")
            await asyncio.sleep(max(0.0, interval - (time.monotonic() - tick)))

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
