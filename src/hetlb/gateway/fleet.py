"""A fleet that changes while ``hetlb serve`` runs: backends added, drained and patched, from the
admin API (hetlb.gateway.admin), the backends file, a reload (SIGHUP) and each backend's
``GET /v1/models`` (``types = "discover"``).

Every change is made on the dispatcher's arrays between two decisions (hetlb.gateway.dispatcher: no
await inside one), so no request is lost or counted twice by a change: a drained backend takes no
new request, its requests in flight finish, and it leaves the fleet when the last one ends or after
``drain`` seconds, whichever comes first (its requests still in flight then go on to their end).

The backends file and a reload are declarative: the fleet becomes the backends they list (new ones
added, missing ones drained, changed ones patched), whatever the admin API changed before. With M
dispatchers each one watches the file and is sent SIGHUP by the parent; an admin API change made on
one dispatcher is passed to the others through the parent (:attr:`Fleet.relay`,
hetlb.gateway.serving).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import aiohttp
from yarl import URL

from hetlb import validation
from hetlb.errors import InputError
from hetlb.gateway.config import (
    MAX_BACKENDS,
    Backend,
    ServeConfig,
    load_config,
    parse_backend,
    read_backends_file,
)
from hetlb.gateway.dispatcher import ACTIVE, DRAINING, RETIRED, STATE_NAMES, Dispatcher
from hetlb.gateway.probing import Prober

MODELS_PATH = "/v1/models"
RELOADED_KEYS = (
    "retries",
    "eject_after",
    "max_in_flight",
    "default_type",
    "type_header",
    "type_prefixes",
    "discover_interval",
    "backends_file_interval",
)
"""The keys a reload changes in a running dispatcher, besides the backends; a change of any other
key (listen, admin, dispatchers, policy, signals, ...) is refused with one log line until a restart."""
PATCH_KEYS = ("speed", "types", "buffer")


class FleetError(Exception):
    """A change that cannot be made: ``status`` (the admin API's 4xx), ``field`` and ``rule``."""

    def __init__(self, status: int, field: str, rule: str):
        super().__init__(f"{field}: {rule}")
        self.status = status
        self.field = field
        self.rule = rule


@dataclass(frozen=True)
class ConfigSource:
    """Where a configuration comes from, to read it again at a reload: the TOML file (``--config``,
    None for none) and the command line's overrides, which keep their precedence over the file."""

    path: str | None = None
    overrides: dict = field(default_factory=dict)

    def load(self) -> ServeConfig:
        return load_config(self.path, **self.overrides)


class Gateway(Protocol):
    """What a fleet changes besides the dispatcher's arrays: a dispatcher's front end (hetlb serve's
    :class:`~hetlb.gateway.http.proxy.Proxy`, hetlb pick's :class:`~hetlb.gateway.envoy.picker.Picker`) with its
    configuration, its dispatcher, each slot's base URL (``base``, shared with the prober), its
    prober (whose HTTP session asks GET /v1/models too)."""

    config: ServeConfig
    dispatcher: Dispatcher
    base: list[URL]
    prober: Prober | None

    def close_connections(self, s: int) -> None:
        """Close the kept-alive connections to backend s (it left the fleet, none of its requests in flight)."""


class Fleet:
    """The changes of one dispatcher's fleet: its ``gateway`` (:class:`Gateway`), dispatcher
    ``index``, the ``source`` read again at a reload (None: only the backends file), ``say`` (a
    function of one log line) and ``command``, the name its log lines start with."""

    def __init__(
        self,
        gateway: Gateway,
        index: int = 0,
        source: ConfigSource | None = None,
        say=print,
        command: str = "hetlb serve: dispatcher",
    ):
        self.gateway = gateway
        self.dispatcher = gateway.dispatcher
        self.config = gateway.config
        self.index = index
        self.source = source
        self.say = say
        self.command = command
        self.relay: Callable[[dict], None] | None = None
        """Told of every change made through the admin API (the other dispatchers make it too)."""
        self.tasks: set[asyncio.Task] = set()
        self.drain_timers: dict[int, asyncio.TimerHandle] = {}
        self.file_seen: tuple[int, int] | None = None  # the first look applies the file (a no-op if unchanged)
        self.dispatcher.on_retired.append(self.close_connections)

    # --- life ------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Discover the types of the ``discover`` backends (before serving), then watch the backends
        file and discover again every discover_interval."""
        await self.discover_all()
        self.spawn(self.discover_loop())
        if self.config.backends_file is not None:
            self.spawn(self.watch_file())

    async def stop(self) -> None:
        for timer in self.drain_timers.values():
            timer.cancel()
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    def spawn(self, coroutine) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def log(self, text: str) -> None:
        self.say(f"{self.command} {self.index}: {text}")

    # --- the changes -----------------------------------------------------------------------------

    def slot(self, url: str) -> int:
        s = self.dispatcher.slot_of.get(url)
        if s is None:
            raise FleetError(404, "url", f"no backend {validation.shown(url)} in the fleet")
        return s

    def entry(self, s: int) -> dict:
        """Backend s as the admin API shows it: its spec, the types it serves now, its state."""
        dispatcher = self.dispatcher
        backend = dispatcher.backends[s]
        return {
            **backend.spec(),
            "served_types": None if backend.types is None else list(backend.types),
            "state": STATE_NAMES[dispatcher.state[s]] if dispatcher.state[s] != RETIRED else "removed",
            "in_flight": int(dispatcher.in_flight[s]),
            "ejected": bool(dispatcher.ejected[s]),
        }

    def entries(self) -> list[dict]:
        return [self.entry(s) for s in self.dispatcher.current()]

    def add(self, backend: Backend) -> int:
        """Add ``backend`` (a draining one of its URL takes new requests again, with this spec);
        FleetError 409 when its URL is in the fleet already, or when the fleet is full. With active
        checks, a new backend is admitted at its first good check (the first at once), so that a
        replica that does not answer yet fails no request."""
        dispatcher = self.dispatcher
        s = dispatcher.slot_of.get(backend.url)
        if s is None and len(dispatcher.slot_of) >= MAX_BACKENDS:
            raise FleetError(409, "url", f"the fleet has {MAX_BACKENDS} backends already, the most it may have")
        if s is not None:
            if dispatcher.state[s] == ACTIVE:
                raise FleetError(
                    409, "url", f"{validation.shown(backend.url)} is in the fleet already (PATCH changes it)"
                )
            self.cancel_drain(s)
            dispatcher.patch(s, self.keep_discovered(dispatcher.backends[s], backend))
            dispatcher.undrain(s)
        else:
            s = dispatcher.add(backend)
            base = self.gateway.base  # the prober's list too: one per slot
            base.extend(URL(url.rstrip("/")) for url in dispatcher.urls[len(base) :])
            if self.config.health_interval > 0:
                dispatcher.set_ejected(s, True)
                self.spawn(self.admit_when_healthy(s))
        if backend.discover:
            self.spawn(self.discover(s))
        return s

    async def admit_when_healthy(self, s: int) -> None:
        """Admit a new backend s if its first active check succeeds (else the checks' loop will)."""
        prober = self.gateway.prober
        healthy = prober is None or await prober.healthy(s)
        if healthy and self.dispatcher.state[s] != RETIRED:
            self.dispatcher.set_ejected(s, False)

    def drain(self, url: str) -> int:
        """Drain the backend of ``url``: no new request; it leaves when its last request in flight ends,
        or after ``drain`` seconds. Its slot."""
        s = self.slot(url)
        if s not in self.drain_timers and not self.dispatcher.drain(s):
            self.drain_timers[s] = asyncio.get_running_loop().call_later(self.config.drain, self.retire, s)
        return s

    def retire(self, s: int) -> None:
        self.drain_timers.pop(s, None)
        self.dispatcher.retire(s)

    def close_connections(self, s: int) -> None:
        """Backend s left the fleet: its kept-alive connections are closed when none of its requests
        is in flight (else they end with the gateway, or when the backend closes them)."""
        if self.dispatcher.in_flight[s] == 0:
            self.gateway.close_connections(s)

    def cancel_drain(self, s: int) -> None:
        timer = self.drain_timers.pop(s, None)
        if timer is not None:
            timer.cancel()

    def patch(self, url: str, changes) -> int:
        """Change the speed, types or buffer of the backend of ``url`` (each checked as the
        configuration's); its slot."""
        s = self.slot(url)
        changes = validation.table("backend", changes)
        unknown = sorted(set(changes) - set(PATCH_KEYS))
        if unknown:
            raise InputError(
                f"backend.{unknown[0]}", f"a PATCH changes {', '.join(PATCH_KEYS)} (the URL is the query's)"
            )
        current = self.dispatcher.backends[s]
        table = {key: value for key, value in {**current.spec(), **changes}.items() if value is not None}
        self.dispatcher.patch(s, self.keep_discovered(current, parse_backend("backend", table)))
        if current.discover != self.dispatcher.backends[s].discover and self.dispatcher.backends[s].discover:
            self.spawn(self.discover(s))
        return s

    @staticmethod
    def keep_discovered(current: Backend, new: Backend) -> Backend:
        """``new``, with the types ``current`` discovered when both discover."""
        return dataclasses.replace(new, types=current.types) if current.discover and new.discover else new

    def apply(self, backends: tuple[Backend, ...], why: str) -> None:
        """Make the fleet ``backends``: the new ones added, the missing ones drained, the changed
        ones patched; one log line when anything changed."""
        dispatcher = self.dispatcher
        wanted = {backend.url: backend for backend in backends}
        drained = [url for url, s in dispatcher.slot_of.items() if url not in wanted and dispatcher.state[s] == ACTIVE]
        for url in drained:
            self.drain(url)
        added = patched = 0
        for backend in backends:
            s = dispatcher.slot_of.get(backend.url)
            if s is None or dispatcher.state[s] == DRAINING:
                self.add(backend)
                added += 1
            elif not backend.configured_as(dispatcher.backends[s]):
                self.dispatcher.patch(s, self.keep_discovered(dispatcher.backends[s], backend))
                if backend.discover:
                    self.spawn(self.discover(s))
                patched += 1
        if added or drained or patched:
            self.log(f"{why}: {added} added, {len(drained)} draining, {patched} changed; {len(wanted)} backends")

    def change(self, change: dict) -> int:
        """One change as the admin API and the relay write it: {"op": "add", "backend": SPEC},
        {"op": "drain", "url": URL} or {"op": "patch", "url": URL, "changes": {...}}; its slot."""
        op = change.get("op")
        if op not in ("add", "drain", "patch"):
            raise InputError("op", f"must be add, drain or patch, got {validation.shown(op)}")
        if op == "add":
            return self.add(parse_backend("backend", change.get("backend")))
        url = validation.text("url", change.get("url"))
        return self.drain(url) if op == "drain" else self.patch(url, change.get("changes"))

    def relayed(self, message: bytes) -> None:
        """A change another dispatcher made through its admin API."""
        try:
            self.change(json.loads(message))
        except (InputError, FleetError, ValueError) as error:
            self.log(f"a change relayed from another dispatcher was not made: {error}")

    # --- the backends file and reloads ---------------------------------------------------------------

    async def watch_file(self) -> None:
        """Apply the backends file each time its modification time or size changes (checked every
        backends_file_interval); an invalid file is logged on one line and the fleet stays."""
        while True:
            await asyncio.sleep(self.config.backends_file_interval)
            path = self.config.backends_file
            seen = file_signature(path)
            if seen == self.file_seen:
                continue
            self.file_seen = seen
            try:
                backends = read_backends_file(path)
            except InputError as error:
                self.log(f"the backends file is not applied, the fleet stays: {error}")
                continue
            self.apply(backends, "backends file")

    def reload(self) -> None:
        """SIGHUP: read the configuration (and the backends file) again and apply the backends and
        the keys of RELOADED_KEYS; a change of any other key is refused with one log line."""
        config = self.config
        try:
            if self.source is not None:
                new = self.source.load()
            elif config.backends_file is not None:
                new = dataclasses.replace(config, backends=read_backends_file(config.backends_file))
            else:
                new = config
        except InputError as error:
            self.log(f"reload refused, nothing changed: {error}")
            return
        refused = [
            name
            for name in (f.name for f in dataclasses.fields(ServeConfig))
            if name not in (*RELOADED_KEYS, "backends")
            and shown_value(getattr(new, name)) != shown_value(getattr(config, name))
        ]
        if refused:
            self.log(f"reload keeps {', '.join(refused)} as they are (they change at a restart only)")
        self.set_config(
            dataclasses.replace(config, backends=new.backends, **{k: getattr(new, k) for k in RELOADED_KEYS})
        )
        self.file_seen = file_signature(config.backends_file)
        self.apply(new.backends, "reload")
        self.spawn(self.discover_all())

    def set_config(self, config: ServeConfig) -> None:
        self.config = config
        self.gateway.config = config
        self.dispatcher.config = config
        if self.gateway.prober is not None:
            self.gateway.prober.config = config

    # --- discover --------------------------------------------------------------------------------

    async def discover_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.discover_interval)
            await self.discover_all()

    async def discover_all(self) -> None:
        dispatcher = self.dispatcher
        found = [s for s in dispatcher.current() if dispatcher.backends[s].discover]
        await asyncio.gather(*(self.discover(s) for s in found))

    async def discover(self, s: int) -> None:
        """The types of backend s become the ids its GET /v1/models lists (OpenAI's
        {"data": [{"id": ...}]}); an id that is not a job type name is left out. A failed or
        malformed answer changes nothing (the active checks eject a backend that is down)."""
        assert self.gateway.prober is not None
        session = self.gateway.prober.session
        url = self.gateway.base[s].with_path(self.gateway.base[s].path.rstrip("/") + MODELS_PATH)
        try:
            async with session.get(url, timeout=aiohttp.ClientTimeout(total=self.config.probe_timeout)) as answer:
                data = json.loads(await answer.read()) if answer.status == 200 else None
        except (TimeoutError, aiohttp.ClientError, OSError, ValueError):
            return
        ids = models_listed(data)
        if ids is None:
            return
        backend = self.dispatcher.backends[s]
        if self.dispatcher.state[s] == RETIRED or not backend.discover or backend.types == ids:
            return
        self.dispatcher.patch(s, dataclasses.replace(backend, types=ids))
        self.log(f"{backend.url} serves {', '.join(ids) or 'no model'} (GET {MODELS_PATH})")


def models_listed(data) -> tuple[str, ...] | None:
    """The sorted job types of an OpenAI model list {"data": [{"id": ...}, ...]}, or None when it is
    not one; ids that are not job type names (1 to 64 letters, digits or _.:/-) are left out."""
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        return None
    ids = set()
    for model in data["data"]:
        with contextlib.suppress(InputError):
            if isinstance(model, dict):
                ids.add(validation.job_type_name("id", model.get("id")))
    return tuple(sorted(ids))


def file_signature(path: str | None) -> tuple[int, int] | None:
    """(modification time in ns, size) of a file, None when it is missing or None."""
    if path is None:
        return None
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_mtime_ns, info.st_size


def shown_value(value):
    """A configuration value as compared by a reload (a policy by its description)."""
    describe = getattr(value, "describe", None)
    return describe() if callable(describe) else value
