"""The configuration of ``hetlb serve``: backends, policy, load signals, listeners and limits.

:class:`ServeConfig` is built from a mapping with the keys of :data:`CONFIG_KEYS` (a TOML file, or the
command line's flags, which override the file's keys), and every value is checked here, before
anything listens: a bad value raises :class:`hetlb.errors.InputError` naming its key.

A backend is written ``URL[,speed=S|auto][,types=A|B|discover][,buffer=B]`` (or as a table with those
keys): its speed mu_s (a number > 0, or ``auto``: estimated online from observed service times), the
job types it serves (the compatibility graph; default every type; ``discover``: the ids its
``GET /v1/models`` lists) and its buffer (the most requests it may hold, the one in service
included; default no limit). The backends may come from a file of their own (``backends_file``,
TOML or JSON with a ``backends`` list, :func:`read_backends_file`). Load signals are listed as
``inflight,piggyback,push,poll:tau=100ms`` or ``inflight,metrics:vllm:tau=50ms``; the metric names
of engines other than vLLM and SGLang are tables ``[engine_metrics.NAME]`` (docs/reference/serve.md).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from urllib.parse import urlsplit

from hetlb import validation
from hetlb.errors import InputError
from hetlb.policies.registry import POLICIES, Policy, make_policy, policies_where
from hetlb.signals import (
    DURATION,
    LED_UPDATE_PARAMETERS,
    LIVE_FORMS,
    LIVE_SIGNALS,
    SIGNALS,
    WORD,
    default_live_signals,
    joined,
)
from hetlb.wire.addresses import Address, check_host, http_url
from hetlb.wire.load_reports import ENGINE_METRICS, METRIC_NAME, EngineMetrics

LIVE_POLICIES = policies_where(model="live")
"""The policies ``hetlb serve`` runs: the registry's live model."""

SLOTTED_ONLY_PARAMETERS = tuple(
    name for name in LED_UPDATE_PARAMETERS if name not in {s.led_flag for s in SIGNALS.values() if s.live}
)
"""The LED policies' update parameters of the slotted model; live, --signals, --p-hat and --d
give the updates instead (an LED flag of a live signal, increment_on_dispatch, stays)."""

MAX_PORT = 65535
MAX_DISPATCHERS = 64
MAX_BACKENDS = 4096


DISCOVER = "discover"
"""``types = "discover"``: a backend's types are the ids its ``GET /v1/models`` lists."""
BACKEND_KEYS = ("url", "speed", "types", "buffer")


@dataclass(frozen=True)
class Backend:
    """One backend: ``url`` as configured (the X-Backend header repeats it), ``speed`` (mu_s; None
    for ``auto``), ``types`` (None: every type) and ``buffer`` (None: no limit). With ``discover``
    its types are those its ``GET /v1/models`` listed last (none before the first answer).

    Parameters
    ----------
    url
        The backend's base URL.
    speed
        mu_s (None: ``auto``, measured).
    types
        The job types it serves (None: every type).
    buffer
        b, the most requests it may hold, the one in service included (None: no limit).
    discover
        Take its types from ``GET /v1/models``.
    """

    url: str
    speed: float | None = 1.0
    types: tuple[str, ...] | None = None
    buffer: int | None = None
    discover: bool = False

    def serves(self, job_type: str) -> bool:
        """Whether this backend serves the job type ``job_type``.

        Parameters
        ----------
        job_type
            A job type's name (the body's ``model`` field in front of inference engines).

        Returns
        -------
        bool
            True when the backend lists the type, or lists none (it serves every type).
        """
        return self.types is None or job_type in self.types

    def spec(self) -> dict:
        """The backend as a table of the configuration's keys (JSON-ready)."""
        types = DISCOVER if self.discover else None if self.types is None else list(self.types)
        return {
            "url": self.url,
            "speed": "auto" if self.speed is None else self.speed,
            "types": types,
            "buffer": self.buffer,
        }

    def configured_as(self, other: Backend) -> bool:
        """Whether ``other`` has the same configured speed, types and buffer (discovered types aside).

        Parameters
        ----------
        other
            Another backend.
        """
        same_types = self.discover == other.discover and (self.discover or self.types == other.types)
        return same_types and self.speed == other.speed and self.buffer == other.buffer


@dataclass(frozen=True)
class Signals:
    """Which load signals a dispatcher uses: ``chosen`` maps the live name of each (an entry of
    hetlb.signals) to its options (poll's and metrics' ``tau``, seconds; metrics' ``engine``), in
    the entries' order.

    Parameters
    ----------
    chosen
        Live name -> its options.
    """

    chosen: dict = field(default_factory=default_live_signals)

    @cached_property
    def inflight(self) -> bool:
        return "inflight" in self.chosen

    @cached_property
    def piggyback(self) -> bool:
        return "piggyback" in self.chosen

    @cached_property
    def push(self) -> bool:
        return "push" in self.chosen

    @cached_property
    def poll_interval(self) -> float | None:
        """tau (seconds) of polling, None without."""
        return self.chosen["poll"]["tau"] if "poll" in self.chosen else None

    @cached_property
    def metrics(self) -> tuple[str, float] | None:
        """(engine, tau in seconds) of scraping the engines' metrics, None without."""
        options = self.chosen.get("metrics")
        return None if options is None else (options["engine"], options["tau"])

    @property
    def reports(self) -> bool:
        """Whether any signal reports a backend's number in system (sends messages)."""
        return any(LIVE_SIGNALS[name].messages for name in self.chosen)

    def names(self) -> list[str]:
        """The chosen signals as their texts in the configuration, e.g. ['inflight', 'piggyback']."""
        return [LIVE_FORMS[name].text(options) for name, options in self.chosen.items()]


@dataclass(frozen=True)
class ServeConfig:
    """Everything one ``hetlb serve`` runs with (its keys are those of :data:`CONFIG_KEYS`).

    Build it with :meth:`from_mapping` (checks every value) or :func:`load_config`; run it with
    :func:`hetlb.gateway.serve`.

    Parameters
    ----------
    backends
        The backends (docs/reference/serve.md).
    policy
        A live policy; in TOML an id, or a table ``[policy]`` with ``id`` and parameters.
    listen
        Where dispatcher 0 listens.
    admin
        The admin listener of dispatcher 0 (none unless asked for).
    signals
        The load signals (docs/reference/serve.md); in TOML a text or a list.
    p_hat
        Probability of a push probe per request, in (0, 1].
    d
        Backends a push probes; also the sample size of ``pod`` and ``l-pod`` (unless ``--set
        d=...`` gives theirs).
    default_type
        The job type of a request without the type header.
    type_header
        The header that names the job type.
    type_body_field
        The top-level field of a JSON request body that names the job type, before the header
        (``model`` for OpenAI-compatible APIs).
    type_prefixes
        Path prefixes that give the job type; in TOML a table ``{"/llama/" = "llama"}``.
    dispatchers
        Independent dispatcher processes, at most 64.
    seed
        Seed of the decisions: dispatcher m uses seed + m (None: from the system).
    timeout
        The longest a backend may stay silent: before its answer's headers (504 beyond) and between
        two chunks of its body (the answer is cut beyond); a stream may last longer (seconds).
    connect_timeout
        Connecting to a backend; 502 beyond (seconds).
    probe_timeout
        A push or poll probe of ``GET /load``, a scrape of an engine's metrics (seconds).
    drain
        Time the requests in flight get at a stop (seconds).
    health_interval
        The interval of the active checks of every backend (seconds); 0 turns them off.
    health_path
        The path of the active check.
    eject_after
        Consecutive failures that an answer shows (connection failures, timeouts, 5xx, answers cut
        short) that eject a backend; a protocol violation ejects at once.
    retries
        Retries of an idempotent request (GET, HEAD, PUT, DELETE, OPTIONS, TRACE) after a failure,
        each to a backend it has not tried.
    max_body_bytes
        The largest request body; 413 beyond.
    max_header_bytes
        The longest request line (414 beyond) and header line (431 beyond); the whole header
        section at most 8 times this.
    max_in_flight
        Concurrent requests of a dispatcher; 503 beyond (bounded memory).
    header_timeout
        A request's header section must arrive within this of its first byte or of its
        connection's opening (seconds); else 408.
    body_timeout
        The longest silence of a request's body while it is read (seconds); else 408.
    keep_alive_timeout
        A client connection with no request under way is closed after this (seconds).
    trust_forwarded
        Keep a client's ``X-Forwarded-*`` and ``Forwarded`` headers (behind a trusted front proxy
        only); else the proxy sets its own.
    engine_metrics
        The metric names of engines other than vLLM and SGLang, for ``metrics:NAME``
        (docs/reference/serve.md).
    backends_file
        A TOML or JSON file with the ``backends`` list, applied again each time it changes; refused
        together with ``backends``.
    backends_file_interval
        How often the backends file's modification time and size are looked at (seconds).
    discover_interval
        How often the ``types = "discover"`` backends' ``GET /v1/models`` is read again (seconds).
    """

    backends: tuple[Backend, ...]
    policy: Policy = field(default_factory=lambda: make_policy("jsq"))
    listen: Address = Address("127.0.0.1", 8000)
    admin: Address | None = None
    signals: Signals = Signals()
    p_hat: float = 1.0
    d: int = 2
    default_type: str | None = None
    type_header: str = "X-Job-Type"
    type_body_field: str | None = None
    type_prefixes: tuple[tuple[str, str], ...] = ()
    dispatchers: int = 1
    seed: int | None = None
    timeout: float = 30.0
    connect_timeout: float = 1.0
    probe_timeout: float = 1.0
    drain: float = 10.0
    health_interval: float = 0.5
    health_path: str = "/healthz"
    eject_after: int = 3
    retries: int = 0
    max_body_bytes: int = 16 * 2**20
    max_header_bytes: int = 8190
    max_in_flight: int = 10_000
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    keep_alive_timeout: float = 75.0
    trust_forwarded: bool = False
    engine_metrics: dict = field(default_factory=dict)
    backends_file: str | None = None
    backends_file_interval: float = 1.0
    discover_interval: float = 5.0

    @classmethod
    def from_mapping(cls, data: dict) -> ServeConfig:
        """A checked configuration from a mapping of :data:`CONFIG_KEYS` (e.g. a parsed TOML file).

        Parameters
        ----------
        data
            The keys of CONFIG_KEYS and their values.
        """
        data = dict(validation.table("config", data))
        unknown = sorted(set(data) - set(CONFIG_KEYS))
        if unknown:
            raise InputError(unknown[0], f"unknown key; the keys are: {', '.join(CONFIG_KEYS)}")
        from_file = None
        if "backends_file" in data:
            if "backends" in data:
                raise InputError(
                    "backends_file", "the backends come from the file: give no backends (--backend) with it"
                )
            path = validation.path("backends_file", data["backends_file"])
            try:
                data["backends_file"] = str(path.resolve())
            except (OSError, RuntimeError) as error:  # RuntimeError: a loop of symbolic links
                raise InputError("backends_file", f"cannot use {validation.shown(str(path))}: {error}") from None
            from_file = read_backends_file(data["backends_file"])
        elif "backends" not in data:
            raise InputError("backends", "give at least one backend (--backend URL[,speed=S][,types=A|B][,buffer=B])")
        values = {key: check(key, data[key]) for key, check in CONFIG_KEYS.items() if key in data}
        if from_file is not None:
            values["backends"] = from_file
        policy = policy_from(data.get("policy", "jsq"), values.get("d"), values.get("p_hat"))
        values["policy"] = policy
        config = cls(**values)
        check_consistency(config)
        return config

    def dispatcher_addresses(self, m: int) -> tuple[Address, Address | None]:
        """(listen, admin) of dispatcher m: PORT + m and ADMIN + m.

        Parameters
        ----------
        m
            The dispatcher's index, from 0.
        """
        return self.listen.shifted(m), None if self.admin is None else self.admin.shifted(m)

    def engine(self, name: str) -> EngineMetrics:
        """The metric names of engine ``name``: an ``[engine_metrics.NAME]`` table or a built-in one.

        Parameters
        ----------
        name
            The engine's name (e.g. ``vllm``).
        """
        return self.engine_metrics.get(name) or ENGINE_METRICS[name]

    @property
    def discovers(self) -> bool:
        """Whether some backend's types come from its GET /v1/models."""
        return any(backend.discover for backend in self.backends)

    @property
    def job_types(self) -> tuple[str, ...]:
        """The job types some backend declares, sorted; empty when none declares any (one type)."""
        return tuple(sorted({name for backend in self.backends for name in backend.types or ()}))


# --- values ----------------------------------------------------------------------------------------


def duration(name: str, value, *, zero: bool = False) -> float:
    """Seconds from a number of seconds or a text such as "100ms", "0.5s" (> 0; >= 0 with ``zero``)."""
    if isinstance(value, str) and value.strip() == "0":
        value = 0.0
    if isinstance(value, str):
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ms|s)\s*", value)
        if match is None:
            raise InputError(name, f"must be a duration such as 100ms or 0.5s, got {validation.shown(value)}")
        value = float(match[1]) / (1000.0 if match[2] == "ms" else 1.0)
    seconds = validation.number(name, value, 0.0, strict=not zero, high=86_400.0)
    return seconds


def address(name: str, value) -> Address:
    """HOST:PORT (an IPv6 host in brackets), port in 1..65535."""
    text = validation.text(name, value)
    match = re.fullmatch(r"\[([0-9A-Fa-f:.]+)\]:([0-9]{1,5})|([^:\[\]\s]+):([0-9]{1,5})", text)
    if match is None:
        raise InputError(name, f"must be HOST:PORT, got {validation.shown(text)}")
    host = match[1] or match[3]
    check_host(name, host)
    port = int(match[2] or match[4])
    if not 1 <= port <= MAX_PORT:
        raise InputError(name, f"the port must be in 1..{MAX_PORT}, got {port}")
    return Address(host, port)


def backend_url(name: str, value) -> str:
    """An http:// or https:// URL with a host and a port (a path prefix allowed), nothing else."""
    text = http_url(name, validation.text(name, value), port=True)
    parts = urlsplit(text)
    if parts.query or parts.fragment or parts.username or parts.password:
        raise InputError(name, f"must have no query, fragment or user, got {validation.shown(text)}")
    return text


def parse_backend(name: str, value) -> Backend:
    """A backend from its SPEC text ``URL[,speed=S|auto][,types=A|B][,buffer=B]`` or a table."""
    if isinstance(value, str):
        url, *options = value.split(",")
        table: dict = {"url": url}
        for option in options:
            key, sep, text = option.partition("=")
            if not sep or key.strip() not in ("speed", "types", "buffer"):
                raise InputError(
                    name, f"options are speed=S|auto, types=A|B|discover, buffer=B; got {validation.shown(option)}"
                )
            if key.strip() in table:
                raise InputError(name, f"{key.strip()} given twice")
            table[key.strip()] = text.strip()
        raw = table
        if "speed" in raw and raw["speed"] != "auto":
            raw["speed"] = number_text(f"{name}.speed", raw["speed"])
        if "buffer" in raw:
            raw["buffer"] = integer_text(f"{name}.buffer", raw["buffer"])
        if "types" in raw and raw["types"] != DISCOVER:
            raw["types"] = raw["types"].split("|")
    else:
        raw = dict(validation.table(name, value))
        unknown = sorted(set(raw) - set(BACKEND_KEYS))
        if unknown:
            raise InputError(f"{name}.{unknown[0]}", "unknown key; a backend has url, speed, types, buffer")
    if "url" not in raw:
        raise InputError(f"{name}.url", "missing")
    url = backend_url(f"{name}.url", raw["url"])
    speed = raw.get("speed", 1.0)
    if speed != "auto":
        speed = validation.number(f"{name}.speed", speed, 0.0, strict=True)
        validation.positive_finite_array(f"{name}.speed", [speed], within=validation.RATE_RANGE)
    types = raw.get("types")
    discover = types == DISCOVER
    if discover:
        types = ()  # none until its GET /v1/models answers
    elif types is not None:
        if not isinstance(types, list) or not types:
            raise InputError(
                f"{name}.types", f'must be a list of job types or "discover", got {validation.shown(types)}'
            )
        types = tuple(validation.job_type_name(f"{name}.types", item) for item in types)
        if len(set(types)) != len(types):
            raise InputError(f"{name}.types", "a job type is listed twice")
    buffer = raw.get("buffer")
    if buffer is not None:
        buffer = validation.count(f"{name}.buffer", buffer)
    return Backend(url, None if speed == "auto" else speed, types, buffer, discover)


def number_text(name: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InputError(name, f"must be a number > 0 or auto, got {validation.shown(text)}") from None


def integer_text(name: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise InputError(name, f"must be an integer >= 1, got {validation.shown(text)}") from None


def parse_backends(name: str, value) -> tuple[Backend, ...]:
    if isinstance(value, str | dict):
        value = [value]
    if not isinstance(value, list | tuple) or not value:
        raise InputError(name, "must be a non-empty list of backends")
    if len(value) > MAX_BACKENDS:
        raise InputError(name, f"at most {MAX_BACKENDS} backends, got {len(value)}")
    backends = tuple(parse_backend(f"backend {i + 1}", item) for i, item in enumerate(value))
    urls = [backend.url for backend in backends]
    for i, url in enumerate(urls):
        if url in urls[:i]:
            raise InputError(f"backend {i + 1}", f"{validation.shorten(url)} is configured twice")
    return backends


MAX_BACKENDS_FILE_BYTES = 8 * 2**20
"""The largest backends file read (a larger one is refused rather than read into memory)."""


def read_backends_file(path) -> tuple[Backend, ...]:
    """The backends of a TOML or JSON file with a top-level ``backends`` list (the configuration's
    syntax); a file ending in .json is JSON, any other TOML. InputError naming ``backends_file``."""
    import json
    import tomllib

    name = "backends_file"
    found = Path(path)
    try:
        if found.exists() and not found.is_file():  # a FIFO would block, /dev/zero never end
            raise InputError(name, f"{validation.shown(str(path))} is not a regular file")
        with found.open("rb") as handle:
            raw = handle.read(MAX_BACKENDS_FILE_BYTES + 1)
        if len(raw) > MAX_BACKENDS_FILE_BYTES:
            raise InputError(
                name, f"{validation.shown(str(path))} is larger than {MAX_BACKENDS_FILE_BYTES // 2**20} MiB"
            )
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(
            name, f"cannot read {validation.shown(str(path))}: {getattr(error, 'strerror', None) or error}"
        ) from None
    try:
        data = json.loads(text) if str(path).endswith(".json") else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as error:
        raise InputError(
            name,
            f"{validation.shown(str(path))} is not valid {'JSON' if str(path).endswith('.json') else 'TOML'}: {error}",
        ) from None
    if not isinstance(data, dict) or "backends" not in data:
        raise InputError(name, f'{validation.shown(str(path))} must have a top-level "backends" list')
    unknown = sorted(set(data) - {"backends"})
    if unknown:
        raise InputError(f"{name} {unknown[0]}", "unknown key; the file has one key, backends")
    return parse_backends("backends", data["backends"])


def parse_signals(name: str, value) -> Signals:
    """``inflight,piggyback,push,poll:tau=100ms`` or ``metrics:vllm:tau=50ms`` (a text or a list of
    such items): the live forms of the entries of hetlb.signals, each with its options (durations,
    and a word given first without its key). Two live forms of one entry (poll and metrics, both
    snapshots) are refused: the model has one of each signal."""
    items = value.split(",") if isinstance(value, str) else value
    known = ", ".join(LIVE_FORMS)
    if not isinstance(items, list | tuple) or not items or not all(isinstance(item, str) for item in items):
        raise InputError(name, f"must list signals of {known}, got {validation.shown(value)}")
    chosen: dict = {}
    for item in (item.strip() for item in items):
        kind, _, given = item.partition(":")
        if kind not in LIVE_FORMS:
            raise InputError(name, f"unknown signal {validation.shown(item)}; choose from {known}")
        if kind in chosen:
            raise InputError(name, f"{kind} is listed twice")
        twin = next((other for other in chosen if LIVE_SIGNALS[other] is LIVE_SIGNALS[kind]), None)
        if twin is not None:
            raise InputError(name, f"{twin} and {kind} are both {LIVE_SIGNALS[kind].name}s: give one")
        chosen[kind] = live_options(name, LIVE_FORMS[kind], item, given.split(":") if given else [])
    return Signals({kind: chosen[kind] for kind in LIVE_FORMS if kind in chosen})


def live_options(name: str, live, item: str, pairs: list[str]) -> dict:
    """The options of one live signal ``item`` from its ``key=value`` parts (its positional word
    first, without a key), with the defaults of those not given."""
    options = {key: option.default for key, option in live.options.items()}
    if live.positional is not None and pairs and "=" not in pairs[0]:
        options[live.positional] = engine_name(f"{name} {live.name}", pairs.pop(0))
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key = key.strip()
        if not live.options:
            raise InputError(name, f"{live.name} takes no option, got {validation.shown(item)}")
        if not sep or key not in live.options or key == live.positional:
            keys = ", ".join(f"{key}=DURATION" for key in live.options if key != live.positional)
            raise InputError(name, f"{live.name} takes {keys}, e.g. {live.example}, got {validation.shown(item)}")
        assert live.options[key].kind == DURATION
        options[key] = duration(f"{name} {live.name} {key}", text)
    assert all(option.kind in (DURATION, WORD) for option in live.options.values())
    return options


def engine_name(name: str, value) -> str:
    text = validation.text(name, value).strip()
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", text):
        raise InputError(name, f"an engine is 1 to 64 letters, digits, _ or -, got {validation.shown(text)}")
    return text


def parse_engine_metrics(name: str, value) -> dict:
    """``[engine_metrics.NAME]`` tables: NAME -> {path, running, waiting}, the Prometheus path and
    gauge names of an engine that ``metrics:NAME`` scrapes."""
    engines = {}
    for engine, table in validation.table(name, value).items():
        where = f"{name}.{engine}"
        engine = engine_name(where, engine)
        if engine in ENGINE_METRICS:
            raise InputError(where, f"{engine} is built in (its names: docs/reference/serve.md); give another name")
        table = validation.table(where, table)
        keys = ("path", "running", "waiting")
        unknown = sorted(set(table) - set(keys))
        if unknown:
            raise InputError(f"{where}.{unknown[0]}", f"unknown key; an engine has {joined(keys)}")
        missing = [key for key in keys if key not in table]
        if missing:
            raise InputError(f"{where}.{missing[0]}", "missing")
        names = {}
        for key in ("running", "waiting"):
            text = validation.text(f"{where}.{key}", table[key])
            if not METRIC_NAME.fullmatch(text):
                raise InputError(f"{where}.{key}", f"must be a Prometheus metric name, got {validation.shown(text)}")
            names[key] = text
        if names["running"] == names["waiting"]:
            raise InputError(f"{where}.waiting", "must differ from running")
        engines[engine] = EngineMetrics(path_text(f"{where}.path", table["path"]), **names)
    return engines


def parse_prefixes(name: str, value) -> tuple[tuple[str, str], ...]:
    """Path prefixes that give a job type: a table {"/prefix/" = "type"} or texts "PREFIX=TYPE"."""
    if isinstance(value, list):
        pairs = []
        for item in value:
            prefix, sep, kind = validation.text(name, item).partition("=")
            if not sep:
                raise InputError(name, f"must be PREFIX=TYPE, got {validation.shown(item)}")
            pairs.append((prefix, kind))
    else:
        pairs = list(validation.table(name, value).items())
    checked = []
    for prefix, kind in pairs:
        if not prefix.startswith("/"):
            raise InputError(name, f"a path prefix starts with /, got {validation.shown(prefix)}")
        checked.append((prefix, validation.job_type_name(name, kind)))
    return tuple(sorted(checked, key=lambda pair: -len(pair[0])))  # the longest prefix first


def header_name(name: str, value) -> str:
    text = validation.text(name, value)
    if not re.fullmatch(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}", text):
        raise InputError(name, f"must be an HTTP header name, got {validation.shown(text)}")
    return text


def body_field(name: str, value) -> str:
    """A top-level field name of a JSON body (e.g. ``model``): 1 to 64 letters, digits or _.-."""
    text = validation.text(name, value)
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", text):
        raise InputError(name, f"must be a field name of 1 to 64 letters, digits or _.-, got {validation.shown(text)}")
    return text


def policy_from(value, d: int | None, p_hat: float | None) -> Policy:
    """The live policy from an id or a table {id = ..., parameters...}; ``d`` (--d) also sets the
    sample size of pod and l-pod."""
    table = {"id": value} if isinstance(value, str) else dict(validation.table("policy", value))
    policy_id = table.pop("id", None)
    if policy_id is None:
        raise InputError("policy.id", "missing")
    policy_id = validation.text("policy.id", policy_id)
    if policy_id not in LIVE_POLICIES:
        hint = "" if policy_id not in POLICIES else f" ({policy_id} does not run live)"
        raise InputError(
            "policy",
            f"unknown live policy {validation.shown(policy_id)}{hint}; choose one of: {', '.join(LIVE_POLICIES)}",
        )
    slotted = sorted(set(table) & set(SLOTTED_ONLY_PARAMETERS))
    if slotted:
        raise InputError(
            f"policy {policy_id}.{slotted[0]}",
            "an update parameter of the slotted model; live, --signals (with --p-hat and --d) gives the updates",
        )
    if d is not None and "d" in POLICIES[policy_id].parameters:
        table.setdefault("d", d)
    return make_policy(policy_id, **table)


def check_consistency(config: ServeConfig) -> None:
    """Rules across keys: what the policy needs of the signals, the job types, the ports."""
    spec = config.policy.spec
    signals = config.signals
    if spec.on_local_estimates and not signals.reports:
        reporting = ", ".join(name for name in LIVE_FORMS if LIVE_SIGNALS[name].messages)
        raise InputError("signals", f"{spec.id} changes its estimates only by updates: give one of {reporting}")
    if signals.metrics is not None and signals.metrics[0] not in {**ENGINE_METRICS, **config.engine_metrics}:
        engines = joined([*ENGINE_METRICS, *config.engine_metrics])
        raise InputError(
            "signals",
            f"metrics:{signals.metrics[0]} names no engine: {engines}, or give a table [engine_metrics.{signals.metrics[0]}]",
        )
    if spec.decides_on_load and not (signals.inflight or signals.reports):
        raise InputError("signals", f"{spec.id} decides on load: give at least one signal")
    if signals.push and config.d > len(config.backends):
        raise InputError("d", f"push probes d distinct backends: at most {len(config.backends)}, got {config.d}")
    if config.default_type is not None and not served_by_some(config, config.default_type):
        raise InputError("default_type", f"no backend serves {validation.shown(config.default_type)}")
    for prefix, kind in config.type_prefixes:
        if not served_by_some(config, kind):
            raise InputError("type_prefixes", f"no backend serves {validation.shown(kind)} (prefix {prefix})")
    top = config.listen.port + config.dispatchers - 1
    if top > MAX_PORT:
        raise InputError("listen", f"{config.dispatchers} dispatchers need ports up to {top}, beyond {MAX_PORT}")
    if config.admin is not None:
        top_admin = config.admin.port + config.dispatchers - 1
        if top_admin > MAX_PORT:
            raise InputError(
                "admin", f"{config.dispatchers} dispatchers need ports up to {top_admin}, beyond {MAX_PORT}"
            )
        if same_host(config.admin.host, config.listen.host):
            listen = set(range(config.listen.port, top + 1))
            if listen & set(range(config.admin.port, top_admin + 1)):
                raise InputError("admin", f"the admin ports overlap the listen ports {config.listen.port}..{top}")


def served_by_some(config: ServeConfig, kind: str) -> bool:
    """Whether some backend serves job type ``kind`` (any may, while some discover their types)."""
    return config.discovers or any(backend.serves(kind) for backend in config.backends)


def same_host(first: str, second: str) -> bool:
    try:
        return ipaddress.ip_address(first) == ipaddress.ip_address(second)
    except ValueError:
        return first == second


def positive_int(low: int = 1, high: int | None = None):
    return lambda name, value: validation.integer(name, value, low, high)


CONFIG_KEYS = {
    "backends": parse_backends,
    "policy": lambda name, value: value,  # checked with d and p_hat by policy_from
    "listen": address,
    "admin": address,
    "signals": parse_signals,
    "p_hat": lambda name, value: validation.probability(name, value, positive=True),
    "d": positive_int(1, MAX_BACKENDS),
    "default_type": validation.job_type_name,
    "type_header": header_name,
    "type_body_field": lambda name, value: body_field(name, value),
    "type_prefixes": parse_prefixes,
    "dispatchers": positive_int(1, MAX_DISPATCHERS),
    "seed": lambda name, value: validation.seed(name, value),
    "timeout": duration,
    "connect_timeout": duration,
    "probe_timeout": duration,
    "drain": lambda name, value: duration(name, value, zero=True),
    "health_interval": lambda name, value: duration(name, value, zero=True),
    "health_path": lambda name, value: path_text(name, value),
    "eject_after": positive_int(1, 1_000_000),
    "retries": positive_int(0, 10),
    "max_body_bytes": positive_int(0, 2**40),
    "max_header_bytes": positive_int(256, 2**20),
    "max_in_flight": positive_int(1, 10_000_000),
    "header_timeout": duration,
    "body_timeout": duration,
    "keep_alive_timeout": duration,
    "trust_forwarded": validation.flag,
    "engine_metrics": parse_engine_metrics,
    "backends_file": lambda name, value: validation.text(name, value),  # read by from_mapping
    "backends_file_interval": duration,
    "discover_interval": duration,
}
"""Every key of a serve configuration and its check (docs/reference/serve.md)."""


def path_text(name: str, value) -> str:
    text = validation.text(name, value)
    if not text.startswith("/") or any(c.isspace() for c in text) or "?" in text or "#" in text:
        raise InputError(name, f"must be a path starting with /, got {validation.shown(text)}")
    return text


def load_config(path=None, **overrides) -> ServeConfig:
    """A ServeConfig from a TOML file (its top-level keys are those of :data:`CONFIG_KEYS`) with
    ``overrides`` (None values ignored) taking precedence, as the command line's flags do.

    Parameters
    ----------
    path
        The TOML file (None: the overrides alone).
    **overrides
        Keys of CONFIG_KEYS and their values.
    """
    from hetlb.scenario import read_toml

    data = read_toml(path, field="config") if path is not None else {}
    data.update({key: value for key, value in overrides.items() if value is not None})
    return ServeConfig.from_mapping(data)
