"""``hetlb pick``: an endpoint picker for Envoy, the Gateway API Inference Extension's Endpoint
Picker Protocol over Envoy's external processing (ext_proc) gRPC service.

Envoy opens one ext_proc stream per HTTP request and sends the request's headers (and, when the
job type is read from the body, the buffered body); the picker reads the job type as ``hetlb
serve`` does (hetlb.gateway.job_types), decides with the same :class:`~hetlb.gateway.dispatcher.Dispatcher`
(the registry's compiled rule on the same estimates), and answers with the chosen backend's
``IP:PORT`` in the ``x-gateway-destination-endpoint`` request header and in the dynamic metadata
``envoy.lb``, the fallbacks after it (``IP:PORT,IP:PORT,...``). Envoy's original-destination
cluster routes on that header (hetlb.gateway.envoy.bootstrap writes such a bootstrap).

- Subset: the ``x-gateway-destination-endpoint-subset`` list of the request's filter metadata
  ``envoy.lb.subset_hint`` restricts the candidates; an empty subset, or one with no admitted
  backend of the request's type, is an ImmediateResponse 503.
- Accounting: a request is in flight at its backend from its pick to the end of its ext_proc
  stream, which Envoy ends with the HTTP stream (the answer's end, also for a streamed answer, or
  its reset when the client or the backend goes away), counted once by a
  :class:`~hetlb.gateway.dispatcher.Lease`. When the proxy tells which endpoint served it
  (``x-gateway-destination-endpoint-served`` in ``envoy.lb``) and that is a fallback, the count
  moves there.
- Signals: the own counts; piggybacked ``X-Queue-Length`` and ORCA ``endpoint-load-metrics``
  (TEXT, JSON or BIN) of the response headers Envoy passes on; LED push probes, polls, scrapes of
  the engines' metrics and health checks by the same :class:`~hetlb.gateway.probing.Prober`.
- Health: the gRPC Health Checking Protocol's ``Check`` and ``Watch`` for the protocol's services
  (HEALTH_SERVICES), beside the admin listener's ``/ready``.
- Refusals: the protocol's documented answers, each an ImmediateResponse (400 or 404 for a
  request whose type is missing or served by none, 503 with no eligible backend, 503 overload);
  an ext_proc message out of order is a gRPC INVALID_ARGUMENT (Envoy answers the request 500
  unless its filter allows failure); the picker keeps serving.
"""

from __future__ import annotations

import asyncio
import random
import signal
import sys
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from multidict import CIMultiDict
from yarl import URL

from hetlb import validation
from hetlb.errors import InputError
from hetlb.gateway.answers import AnswerWatch, lags
from hetlb.gateway.config import ServeConfig, load_config
from hetlb.gateway.dispatcher import NO_BACKEND, Dispatcher, Lease
from hetlb.gateway.envoy.protocol import DESTINATION, DESTINATION_NAMESPACE, SERVED, SUBSET, SUBSET_NAMESPACE, endpoint
from hetlb.gateway.fleet import ConfigSource, Fleet
from hetlb.gateway.job_types import Refusal, body_type, job_type
from hetlb.gateway.metrics import Metrics
from hetlb.gateway.probing import Prober
from hetlb.wire.load_reports import (
    ORCA_FORMAT,
    piggybacked_report,
    reported_number,
)

BACKEND = "x-backend"
"""The answer header naming the backend's URL, as hetlb serve's X-Backend."""
DEFAULT_LISTEN = "127.0.0.1:9002"
HEALTH_SERVICES = ("", "liveness", "readiness", "envoy.service.ext_proc.v3.ExternalProcessor")
"""The services of the gRPC Health Checking Protocol the picker answers (the protocol's list; the
empty name is the server's): SERVING while it serves, NOT_SERVING once it stops."""
SERVE_ONLY_KEYS = {
    "timeout": "Envoy's route timeout bounds a request (hetlb envoy-config --timeout)",
    "connect_timeout": "Envoy connects to the backends (hetlb envoy-config --connect-timeout)",
    "retries": "Envoy retries (its retry policy; the fallbacks key gives it the endpoints)",
    "max_body_bytes": "Envoy's buffer limit bounds a body",
    "max_header_bytes": "Envoy's limits bound the headers",
    "header_timeout": "Envoy's connection manager times the client's headers (its request_headers_timeout)",
    "body_timeout": "Envoy's connection manager times the client's body",
    "keep_alive_timeout": "Envoy's connection manager closes idle client connections",
    "trust_forwarded": "Envoy decides which forwarded headers it keeps",
    "dispatchers": "run one hetlb pick per Envoy (or several behind one Envoy: envoy-config --picker)",
}
"""Keys of hetlb serve's configuration that a picker has no use for: refused, with where it is."""
MAX_FALLBACKS = 16


@dataclass(frozen=True)
class PickConfig:
    """Everything one ``hetlb pick`` runs with: the dispatcher's configuration (``serve``, the keys
    of hetlb.gateway.config.CONFIG_KEYS but SERVE_ONLY_KEYS; ``listen`` is the gRPC address) and
    ``fallbacks``, the endpoints named after the picked one (the policy's next choices)."""

    serve: ServeConfig
    fallbacks: int = 0


def load_pick_config(path=None, **overrides) -> PickConfig:
    """A PickConfig from a TOML file and the command line's ``overrides`` (as load_config)."""
    from hetlb.scenario import read_toml

    data = read_toml(path, field="config") if path is not None else {}
    data.update({key: value for key, value in overrides.items() if value is not None})
    for key, where in SERVE_ONLY_KEYS.items():
        if key in data:
            raise InputError(key, f"a key of hetlb serve, not of hetlb pick: {where}")
    fallbacks = validation.integer("fallbacks", data.pop("fallbacks", 0), 0, MAX_FALLBACKS)
    data.setdefault("listen", DEFAULT_LISTEN)
    serve = load_config(None, **data)
    for backend in serve.backends:
        endpoint("backends", backend.url)
    return PickConfig(serve, fallbacks)


class PickSource(ConfigSource):
    """A picker's configuration source: read again at SIGHUP, its dispatcher's part."""

    def load(self) -> ServeConfig:
        return load_pick_config(self.path, **self.overrides).serve


class BadMessage(Exception):
    """An ext_proc message the protocol does not allow here."""


class Picker:
    """The ext_proc service of one picker: its configuration, dispatcher, metrics and prober (the
    :class:`~hetlb.gateway.fleet.Gateway` of a Fleet)."""

    def __init__(self, config: PickConfig, dispatcher: Dispatcher, metrics: Metrics, index: int = 0):
        from envoy.service.ext_proc.v3 import external_processor_pb2

        self.messages = external_processor_pb2
        self.fallbacks = config.fallbacks
        self.config = config.serve
        self.dispatcher = dispatcher
        self.metrics = metrics
        self.index = index
        self.base = [URL(url.rstrip("/")) for url in dispatcher.urls]
        self.prober: Prober | None = None
        self.random = random.Random(self.config.seed)
        self.active = 0
        self.endpoints: dict[str, int] = {}  # IP:PORT -> slot (a slot's URL never changes)
        self.endpoints_known = 0  # the slots read into endpoints

    async def start(self) -> None:
        self.prober = Prober(self.config, self.dispatcher, self.metrics, self.base)
        self.prober.start()

    async def stop(self) -> None:
        if self.prober is not None:
            await self.prober.stop()

    def close_connections(self, s: int) -> None:
        """Backend s left the fleet: the picker keeps no connection of its own to it (Envoy does)."""

    def slot_of(self, where: str) -> int | None:
        """The slot of the backend at ``IP:PORT`` (None: none in the fleet)."""
        urls = self.dispatcher.urls
        for slot in range(self.endpoints_known, len(urls)):  # a URL added again: its newest slot
            self.endpoints[urlsplit(urls[slot]).netloc] = slot
        self.endpoints_known = len(urls)
        s = self.endpoints.get(where)
        return s if s is not None and self.dispatcher.slot_of.get(urls[s]) == s else None

    # --- one stream: one HTTP request -------------------------------------------------------------

    async def Process(self, requests, context) -> None:  # noqa: N802 (the gRPC method's name)
        """One ext_proc stream: the pick at the request's headers (or its body), then the answer's
        headers; the lease is released when the stream ends, whatever way."""
        import grpc

        started = time.perf_counter()
        lease: Lease | None = None
        content_type = ""
        try:
            first = await context.read()
            if first is grpc.aio.EOF:
                return
            if first.WhichOneof("request") != "request_headers":
                raise BadMessage(
                    f"the first message must carry the request's headers, not {first.WhichOneof('request')}"
                )
            headers = header_map(first.request_headers.headers)
            subset = subset_of(first.metadata_context)
            body: bytes | None = None
            needs_body = (
                self.config.type_body_field is not None
                and self.dispatcher.typed
                and not first.request_headers.end_of_stream
            )
            if needs_body:
                await context.write(self.messages.ProcessingResponse(request_headers=self.messages.HeadersResponse()))
                chunks = []
                while True:
                    message = await context.read()
                    if message is grpc.aio.EOF:
                        return  # the request ended before its body (the client went away)
                    if message.WhichOneof("request") != "request_body":
                        raise BadMessage(f"expected the request's body, got {message.WhichOneof('request')}")
                    chunks.append(message.request_body.body)
                    if message.request_body.end_of_stream:
                        break
                    await context.write(self.messages.ProcessingResponse(request_body=self.messages.BodyResponse()))
                body = b"".join(chunks)
            picked = self.pick(headers, body, subset)
            if isinstance(picked, Refusal):
                await context.write(self.immediate(picked))
                return
            lease, chosen = picked
            self.active += 1
            phase = "request_body" if needs_body else "request_headers"
            await context.write(self.destination(phase, chosen))
            while True:
                message = await context.read()
                if message is grpc.aio.EOF:
                    break
                kind = message.WhichOneof("request")
                if kind == "response_headers":
                    lease = self.on_response(lease, message)
                    answer = header_map(message.response_headers.headers)
                    content_type = answer.get("content-type", "")
                    await context.write(self.answer_headers(lease.backend))
                elif kind == "response_body":
                    await context.write(self.messages.ProcessingResponse(response_body=self.messages.BodyResponse()))
                elif kind == "response_trailers":
                    await context.write(
                        self.messages.ProcessingResponse(response_trailers=self.messages.TrailersResponse())
                    )
                else:
                    raise BadMessage(f"{kind} after the pick")
        except BadMessage as error:
            self.metrics.rejected("bad_message")
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
        finally:
            if lease is not None:
                self.active -= 1
                lease.release()
                self.metrics.answered(lease.backend, started, AnswerWatch(content_type, False))

    def pick(self, headers: CIMultiDict, body: bytes | None, subset: list[str] | None) -> Refusal | tuple[Lease, list]:
        """The request's job type and the policy's backend (then ``fallbacks`` more, each the
        policy's choice without those before), restricted to ``subset``; or its refusal."""
        config = self.config
        dispatcher = self.dispatcher
        from_body = None
        if body:
            assert config.type_body_field is not None
            found = body_type(config.type_body_field, body)
            if isinstance(found, Refusal):
                return self.refused(found)
            from_body = found
        path = headers.get(":path", "/").partition("?")[0]
        k = job_type(config, dispatcher, headers, path, from_body)
        if isinstance(k, Refusal):
            return self.refused(k)
        if self.active >= config.max_in_flight:
            return self.refused(Refusal(503, "overload", "overloaded"))
        excluded: tuple[int, ...] = ()
        if subset is not None:
            allowed = {s for s in map(self.slot_of, subset) if s is not None}
            compatible = dispatcher.candidates[dispatcher.indptr[k] : dispatcher.indptr[k + 1]].tolist()
            excluded = tuple(s for s in compatible if s not in allowed)
        decided = time.perf_counter()
        s = dispatcher.choose(k, excluded)
        self.metrics.decision(time.perf_counter() - decided)
        if s == NO_BACKEND:
            return self.refused(Refusal(503, "no_backend", "no healthy backend"))
        if dispatcher.is_full(s):
            dispatcher.blocked[s] += 1
            return Refusal(503, "blocked", "backend full")
        chosen = [s]
        for _ in range(self.fallbacks):
            fallback = dispatcher.choose(k, excluded + tuple(chosen))
            if fallback == NO_BACKEND:
                break
            chosen.append(fallback)
        if config.signals.push and self.random.random() < config.p_hat:
            assert self.prober is not None
            self.prober.push()
        return dispatcher.start(s), chosen

    def refused(self, refusal: Refusal) -> Refusal:
        self.metrics.rejected(refusal.reason)
        return refusal

    def on_response(self, lease: Lease, message) -> Lease:
        """The answer's headers: the endpoint that served it (its lease moves there), its report,
        the delays its backend's epochs show (as hetlb serve measures them), its health."""
        dispatcher = self.dispatcher
        served = metadata_text(message.metadata_context, DESTINATION_NAMESPACE, SERVED)
        if served is not None:
            s = self.slot_of(served.split(",")[0].strip())
            if s is not None and s != lease.backend:
                lease.release()
                lease = dispatcher.start(s)
        s = lease.backend
        headers = header_map(message.response_headers.headers)
        if self.config.signals.piggyback:
            report = piggybacked_report(headers)
            if report is not None:
                dispatcher.report(s, report[0], own_left=report[1])
        forward, answer = lags(headers, lease.started, time.monotonic())
        if forward is not None:
            self.metrics.forward_delay.observe(forward)
        if answer is not None:
            self.metrics.answer_lag.observe(answer)
        status = reported_number(headers.get(":status"))
        if status is not None and status >= 500:
            if dispatcher.failed(s):
                self.metrics.ejection(s)
        else:
            dispatcher.succeeded(s)
        return lease

    # --- the answers -------------------------------------------------------------------------------

    def header_option(self, name: str, value: str, action: str = "OVERWRITE_IF_EXISTS_OR_ADD"):
        from envoy.config.core.v3.base_pb2 import HeaderValue, HeaderValueOption

        return HeaderValueOption(
            header=HeaderValue(key=name, raw_value=value.encode()),
            append_action=HeaderValueOption.HeaderAppendAction.Value(action),
        )

    def destination(self, phase: str, chosen: list[int]):
        """The answer to the request's headers or body: the endpoints in the header and in envoy.lb."""
        from google.protobuf.struct_pb2 import Struct

        endpoints = ",".join(urlsplit(self.dispatcher.urls[s]).netloc for s in chosen)
        options = [self.header_option(DESTINATION, endpoints)]
        if self.config.signals.piggyback:
            options.append(self.header_option(ORCA_FORMAT, "TEXT", "ADD_IF_ABSENT"))
        common = self.messages.CommonResponse(header_mutation=self.messages.HeaderMutation(set_headers=options))
        metadata = Struct()
        metadata.update({DESTINATION_NAMESPACE: {DESTINATION: endpoints}})
        if phase == "request_body":
            return self.messages.ProcessingResponse(
                request_body=self.messages.BodyResponse(response=common), dynamic_metadata=metadata
            )
        return self.messages.ProcessingResponse(
            request_headers=self.messages.HeadersResponse(response=common), dynamic_metadata=metadata
        )

    def answer_headers(self, s: int):
        """The answer to the response's headers: X-Backend added, as hetlb serve adds it."""
        option = self.header_option(BACKEND, self.dispatcher.urls[s])
        common = self.messages.CommonResponse(header_mutation=self.messages.HeaderMutation(set_headers=[option]))
        return self.messages.ProcessingResponse(response_headers=self.messages.HeadersResponse(response=common))

    def immediate(self, refusal: Refusal):
        """A refusal as an ImmediateResponse, with the headers and body hetlb serve answers it with
        (:meth:`~hetlb.gateway.job_types.Refusal.answer`)."""
        from envoy.type.v3.http_status_pb2 import HttpStatus

        headers, body = refusal.answer(self.config)
        options = [self.header_option(name.lower(), value) for name, value in headers]
        return self.messages.ProcessingResponse(
            immediate_response=self.messages.ImmediateResponse(
                status=HttpStatus(code=refusal.status),
                headers=self.messages.HeaderMutation(set_headers=options),
                body=body,
                details=f"hetlb_{refusal.reason}",
            )
        )


def header_map(header_map_message) -> CIMultiDict:
    """An ext_proc HeaderMap as a case-insensitive mapping (Envoy sends ``raw_value`` bytes, or ``value``)."""
    return CIMultiDict(
        (header.key, header.raw_value.decode("latin-1") if header.raw_value else header.value)
        for header in header_map_message.headers
    )


def metadata_field(metadata, namespace: str, key: str):
    """The value (a protobuf Value) of ``key`` in the filter metadata ``namespace``, or None."""
    if namespace not in metadata.filter_metadata:
        return None
    fields = metadata.filter_metadata[namespace].fields
    return fields[key] if key in fields else None


def metadata_text(metadata, namespace: str, key: str) -> str | None:
    value = metadata_field(metadata, namespace, key)
    return value.string_value if value is not None and value.WhichOneof("kind") == "string_value" else None


def subset_of(metadata) -> list[str] | None:
    """The endpoint subset of ``envoy.lb.subset_hint`` (a list of IP:PORT texts), None when absent;
    a value that is not a list of texts is an empty subset (nothing is eligible)."""
    value = metadata_field(metadata, SUBSET_NAMESPACE, SUBSET)
    if value is None:
        return None
    if value.WhichOneof("kind") != "list_value":
        return []
    items = value.list_value.values
    return [item.string_value for item in items if item.WhichOneof("kind") == "string_value"]


# --- the process -----------------------------------------------------------------------------------


def pick(config: PickConfig, *, announce=None, source: ConfigSource | None = None) -> int:
    """Run the picker of ``config`` until SIGTERM or SIGINT; its exit status (0 after a clean stop)."""
    say = announce or (lambda line: print(line, file=sys.stderr, flush=True))
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # until the picker's loop takes it
    return asyncio.run(run_picker(config, say, source))


async def run_picker(config: PickConfig, say, source: ConfigSource | None = None) -> int:
    import grpc
    from aiohttp import web
    from envoy.service.ext_proc.v3 import external_processor_pb2_grpc
    from grpc_health.v1 import health, health_pb2, health_pb2_grpc

    from hetlb.gateway.admin import admin_app
    from hetlb.gateway.serving import bind

    serve = config.serve
    dispatcher = Dispatcher(serve, serve.seed)
    dispatcher.warm_up()
    metrics = Metrics(dispatcher)
    picker = Picker(config, dispatcher, metrics)
    fleet = Fleet(picker, 0, source, say, command="hetlb pick: picker")
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    external_processor_pb2_grpc.add_ExternalProcessorServicer_to_server(picker, server)
    checks = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(checks, server)
    if server.add_insecure_port(str(serve.listen)) == 0:
        raise InputError("listen", f"cannot listen on {serve.listen}")
    admin_socket = bind("admin", serve.admin) if serve.admin is not None else None
    started = time.monotonic()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(number, stop.set)
    loop.add_signal_handler(signal.SIGHUP, fleet.reload)
    await picker.start()
    await fleet.start()
    await server.start()
    for service in HEALTH_SERVICES:
        await checks.set(service, health_pb2.HealthCheckResponse.SERVING)
    admin_runner = None
    if admin_socket is not None:
        admin_runner = web.AppRunner(admin_app(fleet, metrics, 0, started), handle_signals=False, access_log=None)
        await admin_runner.setup()
        await web.SockSite(admin_runner, admin_socket).start()
    say(
        f"hetlb pick: picker listening on grpc://{serve.listen}"
        + (f", admin http://{serve.admin}" if serve.admin is not None else "")
        + f"; policy {serve.policy.id}, {len(dispatcher.current())} backends, signals {','.join(serve.signals.names())}"
    )
    await stop.wait()
    say(f"hetlb pick: stopping (the streams in flight get at most {serve.drain:g} s)")
    for service in HEALTH_SERVICES:
        await checks.set(service, health_pb2.HealthCheckResponse.NOT_SERVING)
    await server.stop(serve.drain)
    await fleet.stop()
    await picker.stop()
    if admin_runner is not None:
        await admin_runner.cleanup()
    return 0
