"""An open-loop load of streamed OpenAI chat completions (``hetlb loadgen --openai``): the arrivals,
targets, warm-up, measured window and in-flight bound of hetlb.load.open_loop's OpenLoopGenerator,
with each request a ``POST {target}/v1/chat/completions`` of ``stream: true`` and
``stream_options: {"include_usage": true}``.

Each request draws, independently of the others and of its target, its model (the body's
``model``) with probability proportional to ``models[name]``, its prompt length P and its
``max_tokens`` from their laws (a mean times a mean-1 law of hetlb.model.job_sizes.JobSizes,
:func:`parse_law`, rounded to the nearest integer, at least 1 and at most
TOKEN_LIMIT). The prompt is P whitespace-separated words (one token each for hetlb's emulated
engine), the first the request's number, so that no two prompts share a prefix (a real engine's
prefix cache would serve them otherwise).

Of a streamed answer it measures, from the send (the host's monotonic clock): the time to first
token (TTFT, to the first event whose choices carry content: ``delta.content``,
``delta.reasoning_content`` or ``text``), the times between tokens (TBT, the gaps between
successive content events of a stream), and the end-to-end latency (e2e, to the ``data: [DONE]``
event). A measured request keeps a few numbers (send offset, TTFT, e2e, the sum and number of its
gaps, its tokens, its model and backend); its gaps go to logarithmic histograms
(hetlb.stats.histogram: percentiles within 0.5%), overall, per model and per backend, when its
stream completes. Its output tokens are the answer's ``usage.completion_tokens``, or the content
events counted when it has no usage; its prompt tokens ``usage.prompt_tokens``, or the words sent.

An answer is ``ok`` (a 2xx event stream that ends with ``[DONE]``), ``blocked`` (503), or an error
of one kind: its HTTP status (``"404"``, ``"500"``, ...), ``broken-stream`` (a 2xx answer that
ends, or whose connection closes, without ``[DONE]``), ``empty-stream`` (one that ends with
``[DONE]`` before any content), ``bad-event`` (an event whose data is not
a JSON object), ``timeout`` (not done within ``timeout`` seconds of its send), ``connection``
(no answer: refused or closed before one) or ``client``. Its backend is the answer's ``X-Backend``
header (which hetlb serve adds), else its target.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import time
from array import array
from collections import Counter
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

import aiohttp
import numpy as np

from hetlb import validation
from hetlb.errors import InputError
from hetlb.load.open_loop import (
    OpenLoopGenerator,
    OpenLoopSpec,
    WindowCounts,
    mean_and_interval,
    outcome_lines,
    percentiles,
    proportions_of,
    shown,
)
from hetlb.model.job_sizes import SCV_KINDS, JobSizes
from hetlb.results.base import finite_or_null, versions
from hetlb.results.load import InferenceLoadResult
from hetlb.stats.histogram import LogHistogram, bin_of
from hetlb.stats.intervals import interval

CHAT_PATH = "/v1/chat/completions"
TOKEN_LIMIT = 1_000_000
"""The most tokens a draw gives (a prompt of a million words is a body of several megabytes)."""
LAW_SYNTAX = "KIND, KIND:scv=S (hyperexponential, lognormal, pareto, weibull) or empirical:FILE"
LEVELS = (50, 90, 99)
"""The percentiles reported of TTFT, TBT and e2e."""


def parse_law(flag: str, law) -> JobSizes:
    """The mean-1 law of a token count from its text (``KIND``, ``KIND:scv=S`` or ``empirical:FILE``),
    or itself when it is a JobSizes; ``flag`` names it in errors."""
    if isinstance(law, JobSizes):
        return law
    text = validation.text(flag, law)
    kind, _, rest = text.strip().partition(":")
    try:
        if kind == "empirical":
            return JobSizes(kind, path=rest or None)
        if not rest:
            if kind in SCV_KINDS:
                raise InputError(flag, f"{kind} needs its scv: {kind}:scv=S")
            return JobSizes(kind)
        key, equals, value = rest.partition("=")
        if key.strip() != "scv" or not equals:
            raise InputError(flag, f"must be {LAW_SYNTAX}, got {validation.shown(text)}")
        try:
            scv = float(value)
        except ValueError:
            raise InputError(flag, f"scv must be a number, got {validation.shown(value)}") from None
        return JobSizes(kind, scv)
    except InputError as error:
        if error.field == flag:
            raise
        raise InputError(flag, error.rule) from None  # JobSizes' rule, under the flag's name


def law_text(sizes: JobSizes) -> str:
    """The text of a token count's law (what :func:`parse_law` reads)."""
    if sizes.kind == "empirical":
        return f"empirical:{sizes.path}"
    return f"{sizes.kind}:scv={sizes.scv:g}" if sizes.kind in SCV_KINDS else sizes.kind


def token_counts(sizes: JobSizes, mean: float, rng: np.random.Generator, count: int) -> np.ndarray:
    """``count`` token counts round(``mean`` X), at least 1 and at most TOKEN_LIMIT, X from ``sizes``."""
    return np.clip(np.rint(mean * sizes.sample(rng, count)), 1, TOKEN_LIMIT).astype(np.int64)


@dataclass(frozen=True)
class InferenceLoadSpec(OpenLoopSpec):
    """An open-loop load of streamed chat completions: ``models`` (name: proportion), the mean
    prompt length and ``max_tokens`` (tokens) and their mean-1 laws (a JobSizes or its text, see
    :func:`parse_law`). Times in seconds; ``timeout`` bounds a whole stream. ``model_header``: a
    header that also carries the model, for balancers that cannot read the body; ``herd_window``:
    the result then has the live ``herd_fraction`` of the targets' decisions (:func:`herd_fraction`);
    ``target_per_model``: target m serves model m of ``models`` (a router per model), and each
    request goes to its model's (the arrivals and marks as without it)."""

    timeout: float = 300.0
    models: Mapping[str, float] | None = None
    prompt_tokens: float = 128.0
    prompt_law: JobSizes | str = "deterministic"
    output_tokens: float = 128.0
    output_law: JobSizes | str = "deterministic"
    model_header: str | None = None
    herd_window: float | None = None
    target_per_model: bool = False

    def __post_init__(self):
        super().__post_init__()
        if self.model_header is not None:
            validation.text("model_header", self.model_header)
        if self.herd_window is not None:
            validation.positive_number("herd_window", self.herd_window)
        if self.target_per_model and len(self.targets) != len(self.models):
            raise InputError(
                "target_per_model", f"needs one target per model ({len(self.models)}), got {len(self.targets)}"
            )
        if not self.models:
            raise InputError("--models", "give the models to ask for, MODEL=PROPORTION each (e.g. a=3 b=1)")
        validation.positive_finite_array("--models", list(self.models.values()))
        for name in ("prompt", "output"):
            validation.number(f"--{name}-tokens", getattr(self, f"{name}_tokens"), 1.0, high=TOKEN_LIMIT)
            object.__setattr__(self, f"{name}_law", parse_law(f"--{name}-law", getattr(self, f"{name}_law")))

    def to_dict(self) -> dict:
        law = {name: law_text(getattr(self, name)) for name in ("prompt_law", "output_law")}
        return {**super().to_dict(), "models": dict(self.models or {}), **law}


class ChatRequest(NamedTuple):
    """What one request asks: its model, prompt length (words) and ``max_tokens``; ``number`` is
    its place in the run (the prompt's first word)."""

    model: str
    prompt_tokens: int
    max_tokens: int
    number: int

    def body(self) -> dict:
        """The JSON body of ``POST /v1/chat/completions``."""
        words = " ".join([str(self.number), *["token"] * (self.prompt_tokens - 1)])
        return {
            "model": self.model,
            "messages": [{"role": "user", "content": words}],
            "max_tokens": self.max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }


class StreamAnswer(NamedTuple):
    """What one streamed answer measured (times in seconds from the send; ``gap_bins`` counts its
    gaps between content events by histogram bin)."""

    outcome: str
    backend: str
    ttft: float = math.nan
    e2e: float = math.nan
    gap_sum: float = 0.0
    gaps: int = 0
    gap_bins: Counter | None = None
    output_tokens: int = 0
    prompt_tokens: int = 0


async def event_data(content: aiohttp.StreamReader) -> AsyncGenerator[str, None]:
    """The data of each server-sent event of ``content``, as the event-stream format defines it: its
    ``data:`` lines (less one space after the colon) joined by newlines, dispatched at the blank line
    that ends the event; other fields and comments are skipped, and an event the stream cuts off is
    dropped."""
    data: list[str] = []
    async for raw in content:
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line:
            if data:
                yield "\n".join(data)
                data = []
        elif line.startswith("data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(" ") else value)


def has_content(chunk: dict) -> bool:
    """Whether a chat chunk carries generated text (``delta.content``, ``delta.reasoning_content``,
    or a completion's ``text``)."""
    choices = chunk.get("choices")
    for choice in choices if isinstance(choices, list) else ():
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if isinstance(delta, dict) and (delta.get("content") or delta.get("reasoning_content")):
            return True
        if isinstance(choice, dict) and choice.get("text"):
            return True
    return False


def reported(usage, key: str, otherwise: int) -> int:
    """``usage[key]`` when the answer reported it as an integer, else ``otherwise``."""
    value = usage.get(key) if isinstance(usage, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else otherwise


@dataclass
class StreamMeasurements(WindowCounts):
    """What a load of streamed chat completions saw: per measured complete stream a few numbers in
    typed arrays (64 bytes); outcome counts by (model, backend, outcome); TBT histograms by group."""

    spec: InferenceLoadSpec
    send_offset: array = field(default_factory=lambda: array("d"))  # s from the window's start
    ttft: array = field(default_factory=lambda: array("d"))  # s
    e2e: array = field(default_factory=lambda: array("d"))  # s
    gap_sum: array = field(default_factory=lambda: array("d"))  # s, a stream's gaps between content events
    gaps: array = field(default_factory=lambda: array("q"))  # their number
    output_tokens: array = field(default_factory=lambda: array("q"))
    prompt_tokens: array = field(default_factory=lambda: array("q"))
    model: array = field(default_factory=lambda: array("i"))  # index in names["model"]
    backend: array = field(default_factory=lambda: array("i"))  # index in names["backend"]
    target: array = field(default_factory=lambda: array("i"))  # index in names["target"]
    names: dict = field(default_factory=lambda: {"model": {}, "backend": {}, "target": {}})  # name -> index, by group
    outcomes: Counter = field(default_factory=Counter)  # (model, backend, outcome) -> requests
    tbt: dict = field(default_factory=dict)  # ("all", "") | ("model", name) | ("backend", name) -> LogHistogram

    def record(self, answer: StreamAnswer, target: str, request: ChatRequest, offset: float) -> None:
        outcome, backend = answer.outcome, answer.backend
        self.outcomes[request.model, backend, outcome] += 1
        if outcome != "ok":
            if outcome == "blocked":
                self.blocked += 1
            else:
                self.errors[outcome] += 1
            return
        for values, value in (
            (self.send_offset, offset),
            (self.ttft, answer.ttft),
            (self.e2e, answer.e2e),
            (self.gap_sum, answer.gap_sum),
            (self.gaps, answer.gaps),
            (self.output_tokens, answer.output_tokens),
            (self.prompt_tokens, answer.prompt_tokens),
            (self.model, self.index("model", request.model)),
            (self.backend, self.index("backend", backend)),
            (self.target, self.index("target", target)),
        ):
            values.append(value)
        for group in (("all", ""), ("model", request.model), ("backend", backend)):
            self.tbt.setdefault(group, LogHistogram()).add_bins(answer.gap_bins or {})

    def index(self, group: str, name: str) -> int:
        """The index of a model's or backend's name (a new one gets the next)."""
        return self.names[group].setdefault(name, len(self.names[group]))

    def group_figures(self, chosen: np.ndarray, histogram: LogHistogram | None) -> dict:
        """TTFT, TBT and e2e (ms: mean, its interval, p50, p90, p99) and the output tokens (total and
        per second of the window) of the complete streams ``chosen`` (a mask, in the order recorded)."""

        def column(name: str, dtype=np.float64) -> np.ndarray:
            return np.frombuffer(getattr(self, name), dtype=dtype)[chosen]

        order = np.argsort(column("send_offset"), kind="stable")
        figures: dict = {}
        for name in ("ttft", "e2e"):
            values = column(name)[order] * 1e3
            figures[f"mean_{name}"], figures[f"mean_{name}_ci"] = mean_and_interval(values, self.spec.batches)
            for level, value in zip(LEVELS, percentiles(values, LEVELS)):
                figures[f"{name}_p{level}"] = value
        gap_sum = column("gap_sum")[order] * 1e3
        gaps = column("gaps", np.int64)[order].astype(np.float64)
        figures["mean_tbt"], figures["mean_tbt_ci"] = ratio_and_interval(gap_sum, gaps, self.spec.batches)
        for level in LEVELS:
            figures[f"tbt_p{level}"] = math.nan if histogram is None else 1e3 * histogram.percentile(level)
        tokens = int(column("output_tokens", np.int64).sum())
        figures["output_tokens"] = tokens
        figures["output_tokens_per_s"] = tokens / self.window if self.window > 0 else math.nan
        figures["prompt_tokens"] = int(column("prompt_tokens", np.int64).sum())
        return figures

    def split(self, position: int) -> dict:
        """The figures per model (``position`` 0) or per backend (1)."""
        group = ("model", "backend")[position]
        indices = np.frombuffer(getattr(self, group), dtype=np.int32)
        groups = {}
        for name in sorted({key[position] for key in self.outcomes}):
            counts: Counter = Counter()
            for key, count in self.outcomes.items():
                if key[position] == name:
                    counts[key[2]] += count
            errors = {kind: count for kind, count in sorted(counts.items()) if kind not in ("ok", "blocked")}
            histogram = self.tbt.get((group, name))
            groups[name] = {
                "requests": sum(counts.values()),
                "answered": counts["ok"],
                "blocked": counts["blocked"],
                "errors": sum(errors.values()),
                "errors_by_kind": errors,
                **self.group_figures(indices == self.names[group].get(name, -1), histogram),
            }
        return groups

    def result(self) -> InferenceLoadResult:
        everything = np.ones(len(self.ttft), dtype=bool)
        window = self.window_figures()
        figures = finite_or_null(
            {
                "time_unit": "ms",
                **self.group_figures(everything, self.tbt.get(("all", ""))),
                "blocking_probability": window.pop("blocking_probability"),
                "requests": window.pop("requests"),
                "answered": len(self.ttft),
                **window,
                "per_model": self.split(0),
                "per_backend": self.split(1),
                "per_target": dict(sorted(self.targets.items())),
                **self.herd_figures(),
            }
        )
        return InferenceLoadResult(figures, {"load": self.spec.to_dict(), "versions": versions()})

    def herd_figures(self) -> dict:
        """``herd_fraction`` of the complete streams' decisions (the spec's ``herd_window``), if asked."""
        window = self.spec.herd_window
        if window is None:
            return {}
        times = np.frombuffer(self.send_offset, dtype=np.float64)
        targets = np.frombuffer(self.target, dtype=np.int32)
        backends = np.frombuffer(self.backend, dtype=np.int32)
        return {"herd_fraction": herd_fraction(times, targets, backends, window)}

    def progress_text(self) -> str:
        mean = 1e3 * sum(self.ttft) / len(self.ttft) if self.ttft else math.nan
        return f"mean TTFT {mean:.1f} ms, {super().progress_text()}"


def herd_fraction(times: np.ndarray, dispatchers: np.ndarray, servers: np.ndarray, window: float) -> float:
    """The fraction of decisions that herd: whose server's previous decision (by any dispatcher)
    came less than ``window`` before and from another dispatcher, as the continuous model counts
    its ``herd_fraction`` (hetlb.kernels.decisions.record_herd). Decision i sent dispatcher
    ``dispatchers[i]``'s request to ``servers[i]`` at ``times[i]`` (any order; seconds or any unit
    of ``window``); nan without decisions. Live, a request's send time stands for its decision's."""
    if len(times) == 0:
        return math.nan
    order = np.lexsort((times, servers))  # by server, then by time
    server, time_, dispatcher = servers[order], times[order], dispatchers[order]
    follows = server[1:] == server[:-1]
    herded = follows & (time_[1:] - time_[:-1] < window) & (dispatcher[1:] != dispatcher[:-1])
    return float(herded.sum() / len(times))


def ratio_and_interval(numerators: np.ndarray, denominators: np.ndarray, batches: int) -> tuple[float, list]:
    """sum(numerators) / sum(denominators) and its 95% interval over the ratios of ``batches``
    batches of equal numbers of the entries (the mean gap of batches of streams)."""
    total = denominators.sum()
    if total == 0:
        return math.nan, [math.nan, math.nan]
    parts = zip(np.array_split(numerators, batches), np.array_split(denominators, batches))
    ratios = [n.sum() / d.sum() if d.sum() else math.nan for n, d in parts]
    return float(numerators.sum() / total), interval(ratios)


class InferenceLoadGenerator(OpenLoopGenerator):
    """Runs one InferenceLoadSpec in the running event loop: ``await run()`` gives its
    InferenceLoadResult. ``on_send(sent, target, request)`` is told of every ChatRequest as it goes."""

    spec: InferenceLoadSpec

    def __init__(self, spec: InferenceLoadSpec, progress: bool = True, on_send: Callable | None = None):
        super().__init__(spec, StreamMeasurements(spec), progress, on_send)
        self.model_names, self.model_probabilities = proportions_of(spec.models or {})
        self.prompt_law = parse_law("--prompt-law", spec.prompt_law)  # the spec's JobSizes
        self.output_law = parse_law("--output-law", spec.output_law)
        self.drawn = 0

    def arrivals(self, rng: np.random.Generator, horizon: float = math.inf):
        """The open-loop arrivals; with ``target_per_model`` each to its model's target (the drawn
        target is still drawn, so that the epochs and marks are those of the same seed without it)."""
        if not self.spec.target_per_model:
            yield from super().arrivals(rng, horizon)
            return
        index = {name: m for m, name in enumerate(self.model_names)}
        for offset, _, request in super().arrivals(rng, horizon):
            yield offset, index[request.model], request

    def marks(self, rng: np.random.Generator, count: int) -> list[ChatRequest]:
        """The model, prompt length and ``max_tokens`` of each request."""
        models = rng.choice(len(self.model_names), count, p=self.model_probabilities)
        prompts = token_counts(self.prompt_law, self.spec.prompt_tokens, rng, count)
        outputs = token_counts(self.output_law, self.spec.output_tokens, rng, count)
        first, self.drawn = self.drawn, self.drawn + count
        return [
            ChatRequest(self.model_names[k], int(p), int(n), first + i)
            for i, (k, p, n) in enumerate(zip(models, prompts, outputs))
        ]

    async def exchange(self, session, target: str, request: ChatRequest, sent: float, measured: bool) -> StreamAnswer:
        """Send ``request`` and read its stream to the end."""
        backend = target
        try:
            headers = {self.spec.model_header: request.model} if self.spec.model_header else None
            async with session.post(target + CHAT_PATH, json=request.body(), headers=headers) as response:
                backend = response.headers.get("X-Backend", target)
                if not 200 <= response.status < 300:
                    await response.read()
                    return StreamAnswer("blocked" if response.status == 503 else str(response.status), backend)
                return await self.read_stream(response, request, sent, backend, measured)
        except TimeoutError:
            return StreamAnswer("timeout", backend)
        except aiohttp.ClientError as error:
            return StreamAnswer("connection" if isinstance(error, aiohttp.ClientConnectionError) else "client", backend)

    @staticmethod
    async def read_stream(response, request: ChatRequest, sent: float, backend: str, measured: bool) -> StreamAnswer:
        """The measures of a 2xx answer's event stream (``measured``: its gaps binned too)."""
        first = last = done = math.nan
        events, gap_sum = 0, 0.0
        gap_bins: Counter = Counter()
        usage = None
        try:
            async with contextlib.aclosing(event_data(response.content)) as stream:
                async for data in stream:
                    now = time.monotonic()
                    if data == "[DONE]":  # the stream's end, whatever follows
                        done = now
                        break
                    chunk = json.loads(data)
                    if not isinstance(chunk, dict):
                        raise ValueError("an event that is not a JSON object")
                    usage = chunk.get("usage") or usage
                    if has_content(chunk):
                        if events:
                            gap_sum += now - last
                            if measured:
                                gap_bins[bin_of(now - last)] += 1
                        else:
                            first = now
                        events, last = events + 1, now
        except ValueError:  # not JSON, not UTF-8, or a line beyond the reader's limit
            return StreamAnswer("bad-event", backend)
        except TimeoutError:  # a timeout (ServerTimeoutError is a ClientError too), whenever it strikes
            raise
        except aiohttp.ClientError:  # the connection closed or broke within the body
            return StreamAnswer("broken-stream", backend)
        if math.isnan(done):
            return StreamAnswer("broken-stream", backend)
        if not events:
            return StreamAnswer("empty-stream", backend)
        return StreamAnswer(
            "ok",
            backend,
            ttft=first - sent,
            e2e=done - sent,
            gap_sum=gap_sum,
            gaps=max(events - 1, 0),
            gap_bins=gap_bins,
            output_tokens=reported(usage, "completion_tokens", events),
            prompt_tokens=reported(usage, "prompt_tokens", request.prompt_tokens),
        )


def generate_inference_load(spec: InferenceLoadSpec, progress: bool = True) -> InferenceLoadResult:
    """Run ``spec`` to its end in a new event loop: its InferenceLoadResult (see the module's
    docstring and docs/reference/testbed.md)."""
    return asyncio.run(InferenceLoadGenerator(spec, progress=progress).run())


def latency_line(figures: Mapping, name: str, label: str) -> str:
    low, high = figures[f"mean_{name}_ci"]
    percentiles_text = " / ".join(shown(figures[f"{name}_p{level}"]) for level in LEVELS)
    return (
        f"{label:<20}mean {shown(figures[f'mean_{name}'])} ms  (95% CI {shown(low)} .. {shown(high)}), "
        f"p50 / p90 / p99 {percentiles_text} ms"
    )


def group_line(name: str, figures: Mapping) -> str:
    return (
        f"  {name}  {figures['requests']} requests, {figures['answered']} answered, {figures['errors']} errors; "
        f"TTFT {shown(figures['mean_ttft'])} ms, TBT {shown(figures['mean_tbt'])} ms, "
        f"e2e {shown(figures['mean_e2e'])} ms, {shown(figures['output_tokens_per_s'], '.1f')} tokens/s"
    )


def format_inference_load_result(result: Mapping) -> str:
    """The result as a few readable lines (milliseconds)."""
    lines = [
        f"requests            {result['requests']} in {result['duration']:g} s: achieved rate "
        f"{shown(result['achieved_rate'], '.1f')}/s of {result['offered_rate']:g}/s offered, "
        f"{result['answered']} streams complete",
        latency_line(result, "ttft", "time to first token"),
        latency_line(result, "tbt", "time between tokens"),
        latency_line(result, "e2e", "end to end"),
        f"output tokens       {result['output_tokens']} ({shown(result['output_tokens_per_s'], '.1f')}/s); "
        f"prompt tokens {result['prompt_tokens']}",
        *outcome_lines(result),
    ]
    lines.append("per model:")
    lines += [group_line(name, figures) for name, figures in result["per_model"].items()]
    lines.append("per backend:")
    lines += [group_line(name, figures) for name, figures in result["per_backend"].items()]
    return "\n".join(lines)
