"""An emulated OpenAI-compatible inference engine (``hetlb backend --openai``): the HTTP face of vLLM
or SGLang (models and LoRA adapters at ``GET /v1/models``, chat and text completions streamed one
server-sent event per output token, ``usage``, the engine's own Prometheus metrics, the ORCA load
header) over the batch-server law of hetlb.model.servers, at the level of tokens.

The law (docs/reference/engine.md). Times are in units of one output token's time alone in service
at speed 1, ``token_time_ms`` (tau). A request with P prompt tokens and n output tokens is a job of
work

    W = P * prefill_cost + n

on a :class:`~hetlb.engines.backend.MultiSlotServer` of concurrency c and rate curve phi, whose jobs
take W * tau / speed alone in service: with b requests in service each receives work at
phi(b) / b. Its k-th output token (k = 1..n) is emitted at the epoch its attained work reaches
P * prefill_cost + k (the first after the prefill and one token's work), the last one at its
departure: its end-to-end time is the batch server's sojourn of a job of size W, which the
simulator predicts. Tokens are milestones of the server's attained-work clock
(:class:`~hetlb.engines.backend.Progress`): one EpochClock wake-up per engine, at its next token epoch
of any request, emits every token due then.

The emulated tokenizer counts one token per whitespace-separated word: of the prompt (a text, a list
of texts, or token ids, one token each) or of the messages' contents (texts, or the ``text`` of
their parts). Output token k is the word ``t{k}``, so the content ``t1 t2 ... tn`` has n tokens.
``max_tokens`` (chat: ``max_completion_tokens``, else ``max_tokens``) is n, 16 when absent; the
prompt and n together may hold at most ``max_model_len`` tokens (vLLM's ``--max-model-len``).

A client that goes away (mid-stream or while waiting) takes its request out of the server at that
moment, its remaining work dropped, counted once, as an abort. Faults, for tests: with
``error_probability`` a request is served, then answered 500; with ``stall_probability`` it is
never answered (it takes no service); with ``abort_probability`` the connection is closed once the
first ceil(n / 2) of its tokens are out, and the request leaves the server then.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NoReturn

import numpy as np
from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from hetlb import validation
from hetlb.constants import UNLIMITED_CONCURRENCY
from hetlb.engines.backend import BackendSpec, Fleet, MultiSlotServer, fleet_servers, model_names
from hetlb.errors import InputError
from hetlb.model.servers import concurrency_text
from hetlb.wire.load_reports import (
    ENGINE_METRICS,
    EVENT_STREAM,
    ORCA_FORMAT,
    ORCA_LOAD,
    ORCA_RUNNING,
    ORCA_WAITING,
    QUEUE_LENGTH,
    SOJOURN,
)
from hetlb.wire.runtime import EpochClock

DEFAULT_TOKEN_TIME_MS = 20.0
DEFAULT_PREFILL_COST = 0.02
DEFAULT_MAX_TOKENS = 16
DEFAULT_MAX_MODEL_LEN = 8192
ENGINES = ("vllm", "sglang")
LOAD_METRICS_FORMATS = ("TEXT", "JSON")
FINISHED_REASONS = ("length", "abort", "error")
"""How a request ends: all its tokens out (``length``), its client gone or the abort fault
(``abort``), the error fault (``error``)."""


@dataclass(frozen=True)
class MetricNames:
    """An engine's names for the metrics the emulated engine exports (counters without ``_total``)."""

    running: str
    waiting: str
    cache_usage: str
    prompt_tokens: str
    generation_tokens: str
    finished: str
    aborted: str | None  # None: ``finished`` has a finished_reason label (vLLM's), abort one of them


METRIC_NAMES = {
    "vllm": MetricNames(
        ENGINE_METRICS["vllm"].running,
        ENGINE_METRICS["vllm"].waiting,
        "vllm:kv_cache_usage_perc",
        "vllm:prompt_tokens",
        "vllm:generation_tokens",
        "vllm:request_success",
        None,
    ),
    "sglang": MetricNames(
        ENGINE_METRICS["sglang"].running,
        ENGINE_METRICS["sglang"].waiting,
        "sglang:token_usage",
        "sglang:prompt_tokens",
        "sglang:generation_tokens",
        "sglang:num_requests",
        "sglang:num_aborted_requests",
    ),
}


def count_tokens(text: str) -> int:
    """The emulated tokenizer: one token per whitespace-separated word of ``text``."""
    return len(text.split())


def output_token(k: int) -> str:
    """The text of output token k (1, 2, ...): ``t1``, then `` t2``, ...: n words in all."""
    return f"t{k}" if k == 1 else f" t{k}"


class RequestError(Exception):
    """A request the engine refuses: its HTTP status and the OpenAI error body."""

    def __init__(self, status: int, message: str, kind: str = "BadRequestError", code: str = "bad_request", param=None):
        super().__init__(message)
        self.status, self.message, self.kind, self.code, self.param = status, message, kind, code, param

    @classmethod
    def of_input(cls, error: InputError) -> RequestError:
        """A 400 from a field that hetlb.validation refused."""
        return cls(400, str(error), param=error.field)

    def response(self) -> web.Response:
        body = {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}
        return web.json_response(body, status=self.status)


def not_found(model: str) -> RequestError:
    return RequestError(404, f"The model `{model}` does not exist.", "NotFoundError", "model_not_found", "model")


@dataclass(frozen=True)
class Completion:
    """One completion request as the engine reads it: P (``prompt_tokens``) and n (``max_tokens``)."""

    chat: bool
    model: str
    prompt_tokens: int
    max_tokens: int
    stream: bool
    include_usage: bool


async def body_of(request: web.BaseRequest) -> bytes:
    """A request's body, up to aiohttp's limit (1 MiB; more is a 413 in the OpenAI shape)."""
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge as error:
        raise RequestError(413, error.text or "the body is too large", code="body_too_large") from None


def json_object(body: bytes) -> dict:
    """A request body that must be a JSON object (else a 400)."""
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise RequestError(400, "the body must be a JSON object; it is not JSON") from None
    if not isinstance(value, dict):
        raise RequestError(400, f"the body must be a JSON object, got {validation.shown(value)}")
    return value


def read_completion(body: bytes, chat: bool, max_model_len: int) -> Completion:
    """The completion a body asks for (``chat``: /v1/chat/completions, else /v1/completions); a
    RequestError (400) for a body that is not a JSON object, lacks a field or breaks a rule."""
    request = json_object(body)
    try:
        model = validation.text("model", request.get("model"))
        prompt = messages_tokens(request.get("messages")) if chat else prompt_tokens(request.get("prompt"))
        tokens_field = (
            "max_completion_tokens" if chat and request.get("max_completion_tokens") is not None else "max_tokens"
        )
        max_tokens = request.get(tokens_field)
        max_tokens = DEFAULT_MAX_TOKENS if max_tokens is None else validation.integer(tokens_field, max_tokens)
        if request.get("n", 1) != 1:
            raise InputError("n", f"the emulated engine gives one choice, n = 1, got {validation.shown(request['n'])}")
        stream = validation.flag("stream", request.get("stream", False))
        options = request.get("stream_options")
        include_usage = False
        if options is not None:
            if not stream:
                raise InputError("stream_options", "apply only when stream is true")
            include_usage = validation.flag(
                "stream_options.include_usage", validation.table("stream_options", options).get("include_usage", False)
            )
    except InputError as error:
        raise RequestError.of_input(error) from None
    if prompt + max_tokens > max_model_len:
        raise RequestError(
            400,
            f"the prompt ({prompt} tokens) and {tokens_field} ({max_tokens}) exceed the maximum context length "
            f"of {max_model_len} tokens",
            param=tokens_field,
        )
    return Completion(chat, model, prompt, max_tokens, stream, include_usage)


def prompt_tokens(prompt) -> int:
    """P of a text completion's ``prompt``: a text, a list of texts, token ids or lists of them."""
    if isinstance(prompt, str):
        return count_tokens(prompt)
    if isinstance(prompt, list) and prompt:
        if all(isinstance(item, str) for item in prompt):
            return sum(count_tokens(item) for item in prompt)
        if all(validation.is_integer(item) for item in prompt):
            return len(prompt)
        if all(isinstance(item, list) and all(validation.is_integer(i) for i in item) for item in prompt):
            return sum(len(item) for item in prompt)
    raise InputError("prompt", f"must be a text, a list of texts or of token ids, got {validation.shown(prompt)}")


def messages_tokens(messages) -> int:
    """P of a chat completion's ``messages``: the words of their contents (texts, or parts' ``text``)."""
    if not isinstance(messages, list) or not messages:
        raise InputError("messages", f"must be a non-empty list of messages, got {validation.shown(messages)}")
    total = 0
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise InputError(f"messages[{index}]", f"must be an object with a role, got {validation.shown(message)}")
        content = message.get("content")
        if isinstance(content, str):
            total += count_tokens(content)
        elif isinstance(content, list):
            total += sum(count_tokens(part.get("text", "")) for part in content if isinstance(part, dict))
        elif content is not None:
            raise InputError(
                f"messages[{index}].content", f"must be a text or a list of parts, got {validation.shown(content)}"
            )
    return total


class Generation:
    """One request's output: n tokens (``tokens``), of which ``emitted`` have reached their epoch
    (``epoch``, the last one's, on the host's monotonic clock); ``changed`` is set at each."""

    __slots__ = ("tokens", "prompt_tokens", "emitted", "epoch", "changed")

    def __init__(self, tokens: int, prompt_tokens: int):
        self.tokens = tokens
        self.prompt_tokens = prompt_tokens
        self.emitted = 0
        self.epoch = math.nan
        self.changed = asyncio.Event()

    @property
    def finished(self) -> bool:
        return self.emitted == self.tokens


class Engine:
    """One emulated engine (a backend of ``hetlb backend --openai``): its base models and adapters,
    its server (speed, concurrency, rate curve), its law (``token_s`` = tau / speed, seconds;
    ``prefill_cost`` in token times per prompt token), its faults and its counters."""

    def __init__(
        self,
        spec: BackendSpec,
        models: tuple[str, ...],
        server: MultiSlotServer,
        *,
        engine: str,
        token_time_ms: float,
        prefill_cost: float,
        max_model_len: int,
        faults: np.random.Generator,
        error_probability: float = 0.0,
        stall_probability: float = 0.0,
        abort_probability: float = 0.0,
    ):
        self.spec = spec
        self.models = models
        self.adapters: dict[str, tuple[str, str]] = {}  # name -> (path, base model)
        self.server = server
        self.engine = engine
        self.metric_names = METRIC_NAMES[engine]
        self.token_s = token_time_ms / spec.speed / 1e3
        self.prefill_cost = prefill_cost
        self.max_model_len = max_model_len
        self.faults = faults
        self.error_probability = error_probability
        self.stall_probability = stall_probability
        self.abort_probability = abort_probability
        self.generations: dict[int, Generation] = {}
        self.created = int(time.time())
        self.url = ""
        self.finished: Counter[str] = Counter()  # requests ended, by their FINISHED_REASONS
        self.prompt_tokens = self.generation_tokens = 0
        server.on_milestone = self._token
        server.on_departure = self._token
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(EngineCollector(self))

    def attach(self, clock: EpochClock) -> None:
        """Run the server's timeline on ``clock`` (the fleet's, once it starts)."""
        self.server.clock = clock

    def announcement(self) -> str:
        """``URL speed=S concurrency=C rate_curve=CURVE engine=E models=A|B``."""
        return (
            f"{self.url} speed={self.spec.speed:g} concurrency={concurrency_text(self.server.concurrency)} "
            f"rate_curve={self.server.rate_curve.text} engine={self.engine} models={'|'.join(self.models)}"
        )

    def running_waiting(self) -> tuple[int, int]:
        """The requests in service (running: prefill or decoding) and waiting, now."""
        self.server.advance(time.monotonic())
        return len(self.server.in_service), len(self.server.waiting)

    def cache_usage(self, running: int) -> float:
        """The emulated KV-cache usage, a fraction: running / c (0 with unlimited concurrency)."""
        c = self.server.concurrency
        return 0.0 if c >= UNLIMITED_CONCURRENCY else running / c

    def base_of(self, model: str) -> str:
        """The base model that serves ``model`` (a base model or an adapter), else a 404."""
        if model in self.models:
            return model
        if model in self.adapters:
            return self.adapters[model][1]
        raise not_found(model)

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        try:
            route = ROUTES.get(request.path)
            if route is None:
                raise RequestError(404, f"no route {request.path}", "NotFoundError", "not_found")
            method, handler = route
            if request.method != method:
                raise RequestError(
                    405, f"{request.path} takes {method}, not {request.method}", code="method_not_allowed"
                )
            return await handler(self, request)
        except RequestError as error:
            return error.response()

    # --- the routes --------------------------------------------------------------------------

    async def list_models(self, request: web.BaseRequest) -> web.Response:
        cards = [self.model_card(model, model, None) for model in self.models]
        cards += [self.model_card(name, path, base) for name, (path, base) in self.adapters.items()]
        return web.json_response({"object": "list", "data": cards})

    def model_card(self, model: str, root: str, parent: str | None) -> dict:
        return {
            "id": model,
            "object": "model",
            "created": self.created,
            "owned_by": self.engine,
            "root": root,
            "parent": parent,
        }

    async def load_adapter(self, request: web.BaseRequest) -> web.Response:
        body = json_object(await body_of(request))
        try:
            name = validation.text("lora_name", body.get("lora_name"))
            path = validation.text("lora_path", body.get("lora_path"))
            base = validation.text("base_model", body.get("base_model", self.models[0]))
        except InputError as error:
            raise RequestError.of_input(error) from None
        if base not in self.models:
            raise not_found(base)
        if name in self.models or name in self.adapters:
            raise RequestError(400, f"the LoRA adapter {name!r} has already been loaded", param="lora_name")
        self.adapters[name] = (path, base)
        return web.Response(text=f"Success: LoRA adapter '{name}' added successfully.")

    async def unload_adapter(self, request: web.BaseRequest) -> web.Response:
        body = json_object(await body_of(request))
        try:
            name = validation.text("lora_name", body.get("lora_name"))
        except InputError as error:
            raise RequestError.of_input(error) from None
        if self.adapters.pop(name, None) is None:
            raise RequestError(
                404, f"the LoRA adapter {name!r} cannot be found", "NotFoundError", "lora_not_found", "lora_name"
            )
        return web.Response(text=f"Success: LoRA adapter '{name}' removed successfully.")

    async def metrics(self, request: web.BaseRequest) -> web.Response:
        return web.Response(body=generate_latest(self.registry), content_type="text/plain", charset="utf-8")

    async def health(self, request: web.BaseRequest) -> web.Response:
        return web.Response(text="ok" if request.path == "/healthz" else "")

    async def load(self, request: web.BaseRequest) -> web.Response:
        running, waiting = self.running_waiting()
        return web.json_response({"queue_length": running + waiting})

    async def chat_completions(self, request: web.BaseRequest) -> web.StreamResponse:
        return await self.complete(request, chat=True)

    async def completions(self, request: web.BaseRequest) -> web.StreamResponse:
        return await self.complete(request, chat=False)

    # --- a completion --------------------------------------------------------------------------

    async def complete(self, request: web.BaseRequest, chat: bool) -> web.StreamResponse:
        """Serve one completion: its job enters the server, its tokens come at the law's epochs."""
        completion = read_completion(await body_of(request), chat, self.max_model_len)
        self.base_of(completion.model)
        stall, error, abort = self.faults.random(3)
        if stall < self.stall_probability:
            await asyncio.Future()  # never set: cancelled when the client or the engine goes
        arrival = time.monotonic()
        n = completion.max_tokens
        prefill = completion.prompt_tokens * self.prefill_cost  # token times
        milestones: Iterator[float] = ((prefill + k) * self.token_s for k in range(1, n))
        job = self.server.arrive(arrival, (prefill + n) * self.token_s, milestones)
        generation = self.generations[job] = Generation(n, completion.prompt_tokens)
        abort_after = math.ceil(n / 2) if abort < self.abort_probability else None
        try:
            if error < self.error_probability:
                await self.emitted(generation, n)
                self.finished["error"] += 1
                return RequestError(
                    500, "the emulated engine failed this request", "InternalServerError", "internal_error"
                ).response()
            if completion.stream:
                return await self.stream(request, completion, job, generation, abort_after)
            if abort_after is not None:
                await self.emitted(generation, abort_after)
                self.abort(request, job)
            await self.emitted(generation, n)
            self.finished["length"] += 1
            response = web.json_response(self.answer(completion, job))
            response.headers[SOJOURN] = f"{(generation.epoch - arrival) * 1e3:.6f}"  # the model's sojourn
            self.load_headers(request, response, generation)
            return response
        finally:
            del self.generations[job]
            if not generation.finished and self.server.leave(job, time.monotonic()):
                self.finished["abort"] += 1  # its client went away (the abort fault's request has left already)

    async def emitted(self, generation: Generation, count: int) -> None:
        """Wait until ``count`` of the generation's tokens have been emitted."""
        while generation.emitted < count:
            generation.changed.clear()
            await generation.changed.wait()

    async def stream(
        self,
        request: web.BaseRequest,
        completion: Completion,
        job: int,
        generation: Generation,
        abort_after: int | None,
    ) -> web.StreamResponse:
        """The answer as server-sent events: one per output token as it is emitted, then the usage
        (when asked) and ``[DONE]``."""
        response = web.StreamResponse(headers={"Content-Type": EVENT_STREAM, "Cache-Control": "no-cache"})
        self.load_headers(request, response, generation)
        await response.prepare(request)
        sent = 0
        last = generation.tokens if abort_after is None else abort_after
        while sent < last:
            await self.emitted(generation, sent + 1)
            upto = min(generation.emitted, last)
            events = [self.event(self.chunk(completion, job, k, generation.tokens)) for k in range(sent + 1, upto + 1)]
            sent = upto
            if sent == generation.tokens and abort_after is None:
                if completion.include_usage:
                    events.append(self.event(self.usage_chunk(completion, job, generation.tokens)))
                events.append(b"data: [DONE]\n\n")
                self.finished["length"] += 1  # before its last bytes leave
            await response.write(b"".join(events))
        if abort_after is not None:
            self.abort(request, job)
        await response.write_eof()
        return response

    def abort(self, request: web.BaseRequest, job: int) -> NoReturn:
        """The abort fault: the request leaves the server now and its connection is closed."""
        self.finished["abort"] += 1
        self.server.leave(job, time.monotonic())
        if request.transport is not None:
            request.transport.close()
        raise asyncio.CancelledError  # nothing more is written on the closed connection

    def _token(self, job: int, epoch: float) -> None:
        """A token of ``job`` reached its epoch (a milestone, or the last at its departure)."""
        generation = self.generations.get(job)
        if generation is None:
            return
        generation.emitted += 1
        generation.epoch = epoch
        generation.changed.set()
        self.generation_tokens += 1
        if generation.emitted == 1:
            self.prompt_tokens += generation.prompt_tokens  # its prefill is done

    def load_headers(self, request: web.BaseRequest, response: web.StreamResponse, generation: Generation) -> None:
        """``X-Queue-Length`` (the other requests in the engine now) and, when the request asks for it
        in ``endpoint-load-metrics-format``, the ORCA header ``endpoint-load-metrics``."""
        running, waiting = self.running_waiting()
        response.headers[QUEUE_LENGTH] = str(running + waiting - (not generation.finished))
        wanted = request.headers.get(ORCA_FORMAT, "").strip().upper()
        if wanted in LOAD_METRICS_FORMATS:
            response.headers[ORCA_LOAD] = orca_header(
                wanted,
                {
                    "kv_cache_usage_perc": self.cache_usage(running),
                    ORCA_WAITING: float(waiting),
                    ORCA_RUNNING: float(running),
                },
            )

    # --- the OpenAI shapes --------------------------------------------------------------------

    def chunk(self, completion: Completion, job: int, k: int, n: int) -> dict:
        """The event of output token k of n."""
        finish = "length" if k == n else None
        if completion.chat:
            delta = {"role": "assistant", "content": output_token(k)} if k == 1 else {"content": output_token(k)}
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        else:
            choice = {"index": 0, "text": output_token(k), "logprobs": None, "finish_reason": finish}
        return {**self.header(completion, job, streamed=True), "choices": [choice]}

    def usage_chunk(self, completion: Completion, job: int, n: int) -> dict:
        return {**self.header(completion, job, streamed=True), "choices": [], "usage": usage(completion, n)}

    def answer(self, completion: Completion, job: int) -> dict:
        """The non-streamed answer."""
        n = completion.max_tokens
        text = "".join(output_token(k) for k in range(1, n + 1))
        if completion.chat:
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": None,
                "finish_reason": "length",
            }
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": "length"}
        return {**self.header(completion, job, streamed=False), "choices": [choice], "usage": usage(completion, n)}

    def header(self, completion: Completion, job: int, streamed: bool) -> dict:
        if completion.chat:
            kind, prefix = ("chat.completion.chunk" if streamed else "chat.completion"), "chatcmpl"
        else:
            kind, prefix = "text_completion", "cmpl"
        return {
            "id": f"{prefix}-{self.spec.port}-{job}",
            "object": kind,
            "created": self.created,
            "model": completion.model,
        }

    @staticmethod
    def event(payload: dict) -> bytes:
        return b"data: " + json.dumps(payload).encode() + b"\n\n"


def usage(completion: Completion, n: int) -> dict:
    return {
        "prompt_tokens": completion.prompt_tokens,
        "completion_tokens": n,
        "total_tokens": completion.prompt_tokens + n,
    }


def orca_header(format_: str, named_metrics: dict[str, float]) -> str:
    """The ORCA ``endpoint-load-metrics`` value in ``format_`` (TEXT or JSON), as vLLM writes it."""
    if format_ == "TEXT":
        return "TEXT " + ", ".join(f"named_metrics.{name}={value}" for name, value in named_metrics.items())
    return "JSON " + json.dumps({"named_metrics": named_metrics})


ROUTES = {
    "/v1/models": ("GET", Engine.list_models),
    "/v1/load_lora_adapter": ("POST", Engine.load_adapter),
    "/v1/unload_lora_adapter": ("POST", Engine.unload_adapter),
    "/v1/chat/completions": ("POST", Engine.chat_completions),
    "/v1/completions": ("POST", Engine.completions),
    "/metrics": ("GET", Engine.metrics),
    "/health": ("GET", Engine.health),
    "/healthz": ("GET", Engine.health),
    "/load": ("GET", Engine.load),
}


class EngineCollector:
    """The engine's Prometheus metrics, read from the engine when scraped, under its engine's names,
    each with a ``model_name`` label (the first base model, as an engine labels its metrics with
    its served model name)."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def describe(self):
        return []

    def collect(self):
        engine, names = self.engine, self.engine.metric_names
        labels, values = ["model_name"], [engine.models[0]]
        running, waiting = engine.running_waiting()
        for name, documentation, value in (
            (names.running, "requests in the batch (prefill or decoding)", running),
            (names.waiting, "requests waiting for a slot", waiting),
            (
                names.cache_usage,
                "emulated KV-cache usage: running / concurrency, a fraction",
                engine.cache_usage(running),
            ),
        ):
            gauge = GaugeMetricFamily(name, documentation, labels=labels)
            gauge.add_metric(values, float(value))
            yield gauge
        for name, documentation, value in (
            (names.prompt_tokens, "prompt tokens of the requests whose prefill ended", engine.prompt_tokens),
            (names.generation_tokens, "output tokens emitted", engine.generation_tokens),
        ):
            counter = CounterMetricFamily(name, documentation, labels=labels)
            counter.add_metric(values, float(value))
            yield counter
        if names.aborted is None:
            counter = CounterMetricFamily(names.finished, "requests ended", labels=[*labels, "finished_reason"])
            for reason in FINISHED_REASONS:
                counter.add_metric([*values, reason], float(engine.finished[reason]))
            yield counter
            return
        for name, documentation, value in (
            (names.finished, "requests ended", sum(engine.finished.values())),
            (names.aborted, "requests aborted", engine.finished["abort"]),
        ):
            counter = CounterMetricFamily(name, documentation, labels=labels)
            counter.add_metric(values, float(value))
            yield counter


class EngineFleet(Fleet):
    """Emulated engines (:class:`Engine`) as a :class:`~hetlb.engines.backend.Fleet`, one per spec, each
    with its own server, adapters, counters and fault stream.

    >>> async def demo():
    ...     async with EngineFleet([BackendSpec("127.0.0.1", 0)], models="llama-3-8b") as fleet:
    ...         return fleet.announcements()[0].split()[1:]
    >>> asyncio.run(demo())
    ['speed=1', 'concurrency=1', 'rate_curve=independent', 'engine=vllm', 'models=llama-3-8b']

    ``models`` (a text ``A,B`` or a sequence) are the base models of every engine whose spec names
    none; ``concurrency`` and ``rate_curve`` as in :func:`~hetlb.engines.backend.fleet_servers`.
    """

    def __init__(
        self,
        specs: Sequence[BackendSpec],
        *,
        models=None,
        engine: str = "vllm",
        token_time_ms: float = DEFAULT_TOKEN_TIME_MS,
        prefill_cost: float = DEFAULT_PREFILL_COST,
        max_model_len: int = DEFAULT_MAX_MODEL_LEN,
        seed: int = 0,
        error_probability: float = 0.0,
        stall_probability: float = 0.0,
        abort_probability: float = 0.0,
        concurrency=None,
        rate_curve=None,
    ):
        servers = fleet_servers(specs, concurrency, rate_curve)
        if isinstance(models, str):
            models = model_names("--models", models)
        engine = validation.choice("--engine", engine, ENGINES)
        options: dict = {
            "engine": engine,
            "token_time_ms": validation.positive_number("--token-time-ms", token_time_ms),
            "prefill_cost": validation.number("--prefill-cost", prefill_cost, 0.0),
            "max_model_len": validation.count("--max-model-len", max_model_len),
            "error_probability": validation.probability("--error-probability", error_probability),
            "stall_probability": validation.probability("--stall-probability", stall_probability),
            "abort_probability": validation.probability("--abort-probability", abort_probability),
        }
        streams = np.random.SeedSequence(validation.seed("--seed", seed)).spawn(len(specs))
        engines = []
        for spec, stream, (c, curve) in zip(specs, streams, servers):
            served = spec.models or (tuple(models) if models else None)
            if not served:
                raise InputError(
                    "--models", "give the models the engines serve: --models A,B or models=A|B in --listen"
                )
            faults = np.random.default_rng(stream)
            engines.append(Engine(spec, served, MultiSlotServer(c, curve), faults=faults, **options))
        super().__init__(engines)
