"""hetlb loadgen --openai: streamed chat completions against a stub engine of known timing (its
first token D1 after the request, then one every D2), their counts split exactly by model and by
backend, the draws of models and token counts against their laws, the histogram's percentiles,
every kind of error, and bad flags.

The stub is this file run as a script (``--stub``): an aiohttp server on 127.0.0.1 whose answer
depends on the body's model (see ``chat``)."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import math
import sys
from collections import Counter

import numpy as np
import pytest
from aiohttp import web
from scipy import stats

from hetlb.cli import main
from hetlb.load.inference import (
    TOKEN_LIMIT,
    InferenceLoadGenerator,
    InferenceLoadSpec,
    format_inference_load_result,
)
from hetlb.processes import ChildProcess
from hetlb.stats.histogram import HIGH, LOW, RATIO, LogHistogram, bin_of

ALPHA = 0.001
"""Level of each statistical check (its chance of a false alarm)."""
D1_MS, D2_MS = 40.0, 10.0
"""The stub's delay from a request to its first content event, and between its content events."""
LATE_MS = 5.0
"""How late an event may reach the client at the median, and on average: the stub's timer wakes up
to a millisecond late (epoll waits in whole milliseconds), the way over loopback and the parsing
take well under a millisecond, and the rest is the scheduling of two processes on a shared machine
of two cores."""
STATUS_OF_MODEL = {"missing": 404, "fail": 500, "overload": 503}


async def chat(request: web.Request) -> web.StreamResponse:
    """The stub's ``POST /v1/chat/completions``: for k = max_tokens, a role chunk without content at
    once, then content events at D1 + i D2 (i = 0 .. k-1) after the request, a usage chunk
    (prompt_tokens: the words of the message), ``[DONE]``. By model: ``plain`` has no usage chunk;
    ``cut`` closes the connection after k // 2 events, ``no-done`` ends the body without [DONE],
    ``empty`` sends no content event, ``stall`` stops after its first,
    ``bad-event`` sends an event that is not JSON, ``hang`` never answers, and those of
    STATUS_OF_MODEL answer their status. With ``--backend NAME`` every answer has ``X-Backend:
    NAME-MODEL``."""
    loop = asyncio.get_running_loop()
    received = loop.time()
    body = await request.json()
    model, tokens = body["model"], 0 if body["model"] == "empty" else body["max_tokens"]
    words = len(body["messages"][0]["content"].split())
    headers = {"X-Backend": f"{request.app['backend']}-{model}"} if request.app["backend"] else {}
    if model in STATUS_OF_MODEL:
        error = {"error": {"message": model, "type": "stub", "code": model}}
        return web.json_response(error, status=STATUS_OF_MODEL[model], headers=headers)
    if model == "hang":
        await asyncio.sleep(3600)
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", **headers})
    await response.prepare(request)

    async def event(data) -> None:
        await response.write(f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n".encode())

    await event({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
    for i in range(tokens):
        await asyncio.sleep(max(0.0, received + (D1_MS + i * D2_MS) / 1e3 - loop.time()))
        if model == "stall" and i == 1:
            await asyncio.sleep(3600)
        if model == "cut" and i == tokens // 2:
            request.transport.close()
            return response
        await event("not json" if model == "bad-event" else {"choices": [{"index": 0, "delta": {"content": "w "}}]})
    if model != "no-done":
        if model != "plain":
            usage = {"prompt_tokens": words, "completion_tokens": tokens, "total_tokens": words + tokens}
            await event({"choices": [], "usage": usage})
        await event("[DONE]")
    await response.write_eof()
    return response


def serve_stub(backend: str) -> None:
    async def serve():
        app = web.Application()
        app["backend"] = backend
        app.router.add_post("/v1/chat/completions", chat)
        runner = web.AppRunner(app, shutdown_timeout=0.1)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        print(f"http://127.0.0.1:{runner.addresses[0][1]}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(serve())


class stubs:
    """Stub processes (one per X-Backend name, "" for none): their URLs; stopped at the end."""

    def __init__(self, *backends: str):
        self.children = [ChildProcess("stub engine", [sys.executable, __file__, "--stub", b]) for b in backends]

    def __enter__(self) -> list[str]:
        try:
            return [child.read_lines(1)[0].strip() for child in self.children]
        except BaseException:
            self.__exit__()
            raise

    def __exit__(self, *_) -> None:
        for child in self.children:
            child.stop()


def run(spec: InferenceLoadSpec, generators: list | None = None) -> tuple[dict, list]:
    """The result of ``spec`` and its sends, (sent, target, request) each; the generator is appended
    to ``generators`` when given."""
    sends: list = []
    generator = InferenceLoadGenerator(spec, progress=False, on_send=lambda *send: sends.append(send))
    if generators is not None:
        generators.append(generator)
    return asyncio.run(generator.run()), sends


def test_stream_timing_tokens_and_splits():
    """60 streams of k = 6 tokens (models a=3, plain=1; prompts lognormal) on two stubs, one naming
    its backend per model: TTFT >= D1 and e2e >= D1 + (k-1) D2 for every stream (the stub waits that
    long after it has the request), and within LATE_MS above at the median and on average; the mean
    TBT within LATE_MS / (k-1) of D2 (a stream's gaps sum to its last event's time minus its first's,
    (k-1) D2 plus the difference of two lateness), its median gap within LATE_MS; tokens counted
    exactly (from usage, and from the events for ``plain``, which has none), the requests split
    exactly by model, backend and target, and the k - 1 gaps of each stream kept only as counts in
    the histograms (memory bounded)."""
    k = 6
    with stubs("gpu", "") as urls:
        spec = InferenceLoadSpec(
            targets=tuple(urls),
            rate=20.0,
            duration=3.0,
            seed=4,
            models={"a": 3, "plain": 1},
            prompt_tokens=20,
            prompt_law="lognormal:scv=1",
            output_tokens=k,
        )
        generators: list = []
        result, sends = run(spec, generators)
    n = len(sends)
    assert result["requests"] == result["answered"] == n > 30 and result["errors"] == 0 and result["blocked"] == 0
    for figures in (result, *result["per_model"].values(), *result["per_backend"].values()):
        assert figures["ttft_p50"] >= D1_MS and figures["mean_ttft"] >= D1_MS
        assert figures["e2e_p50"] >= D1_MS + (k - 1) * D2_MS
    assert result["ttft_p50"] <= D1_MS + LATE_MS and result["mean_ttft"] <= D1_MS + LATE_MS
    assert result["e2e_p50"] <= D1_MS + (k - 1) * D2_MS + LATE_MS
    assert result["mean_e2e"] <= D1_MS + (k - 1) * D2_MS + LATE_MS
    assert abs(result["mean_tbt"] - D2_MS) <= LATE_MS / (k - 1)
    assert abs(result["tbt_p50"] - D2_MS) <= LATE_MS
    for name in ("ttft", "tbt", "e2e"):
        low, high = result[f"mean_{name}_ci"]
        assert low <= result[f"mean_{name}"] <= high
        assert result[f"{name}_p50"] <= result[f"{name}_p90"] <= result[f"{name}_p99"]
    models = Counter(request.model for _, _, request in sends)
    per_backend = Counter(f"gpu-{request.model}" if target == urls[0] else target for _, target, request in sends)
    assert {name: figures["requests"] for name, figures in result["per_model"].items()} == models
    assert {name: figures["requests"] for name, figures in result["per_backend"].items()} == per_backend
    assert result["per_target"] == Counter(target for _, target, _ in sends)
    assert result["output_tokens"] == k * n
    assert result["prompt_tokens"] == sum(request.prompt_tokens for _, _, request in sends)
    assert result["output_tokens_per_s"] == result["output_tokens"] / spec.duration
    for name, figures in result["per_model"].items():
        assert figures["output_tokens"] == k * models[name] and figures["answered"] == models[name]
    kept = generators[0].measurements  # a few numbers per stream; its k - 1 gaps only as histogram counts
    assert all(len(getattr(kept, name)) == n for name in ("ttft", "e2e", "gap_sum", "gaps", "output_tokens"))
    assert kept.tbt["all", ""].total == (k - 1) * n and sum(kept.gaps) == (k - 1) * n
    assert {name: kept.tbt["model", name].total for name in models} == {m: (k - 1) * c for m, c in models.items()}
    text = format_inference_load_result(result)
    assert "time to first token" in text and f"  gpu-a  {per_backend['gpu-a']} requests" in text


def test_through_hetlb_serve_by_its_backend_header():
    """Through ``hetlb serve --type-body-field model`` over two stubs that name no backend, one
    holding model a, the other b: each answer counted under the stub that ``X-Backend`` names, so
    the split by backend is exactly that by model; every stream complete with its tokens, and none
    faster than the stub makes it."""
    from support.serve_processes import Processes, free_ports  # here: the stub runs this file without tests/

    k = 4
    processes = Processes()
    try:
        with stubs("", "") as backends:
            port = free_ports()
            flags = ["--policy", "jsq", "--type-body-field", "model"]
            flags += [f"--backend={url},types={model}" for url, model in zip(backends, "ab")]
            processes.serve(*flags, port=port)
            spec = InferenceLoadSpec(
                (f"http://127.0.0.1:{port}",), 20.0, 1.5, seed=3, models={"a": 1, "b": 2}, output_tokens=k
            )
            result, sends = run(spec)
    finally:
        processes.stop_all()
    models = Counter(request.model for _, _, request in sends)
    assert result["requests"] == result["answered"] == len(sends) > 10 and result["errors"] == 0
    assert {url: result["per_backend"][url]["answered"] for url in backends} == {
        url: models[model] for url, model in zip(backends, "ab")
    }
    assert result["output_tokens"] == k * len(sends)
    assert result["mean_e2e"] >= D1_MS + (k - 1) * D2_MS and result["mean_ttft"] >= D1_MS


def test_errors_by_kind():
    """Each failure counted once, by kind, overall and per model: streams cut by the connection's
    close or ended without [DONE] (broken-stream), one without content (empty-stream), an event that is not JSON (bad-event), 404 and
    500 by status, 503 as blocked; a request never answered, or whose stream stops, as a timeout, with the arrivals
    beyond --max-in-flight not sent; a refused connection."""
    models = {"ok": 1, "cut": 1, "no-done": 1, "empty": 1, "bad-event": 1, "missing": 1, "fail": 1, "overload": 1}
    with stubs("") as (url,):
        spec = InferenceLoadSpec((url,), 100.0, 0.6, seed=2, models=models, output_tokens=4)
        result, sends = run(spec)
        hang_spec = InferenceLoadSpec((url,), 100.0, 0.3, seed=1, models={"hang": 1, "stall": 1}, timeout=0.5)
        hang, hung = run(dataclasses.replace(hang_spec, max_in_flight=3))
    drawn = Counter(request.model for _, _, request in sends)
    assert set(drawn) == set(models) and result["requests"] == len(sends)
    assert result["errors_by_kind"] == {
        "broken-stream": drawn["cut"] + drawn["no-done"],
        "empty-stream": drawn["empty"],
        "bad-event": drawn["bad-event"],
        "404": drawn["missing"],
        "500": drawn["fail"],
    }
    assert result["blocked"] == drawn["overload"] and result["answered"] == drawn["ok"]
    assert result["blocking_probability"] == drawn["overload"] / len(sends)
    assert result["per_model"]["cut"]["errors_by_kind"] == {"broken-stream": drawn["cut"]}
    assert result["per_model"]["overload"]["blocked"] == drawn["overload"]
    assert result["output_tokens"] == 4 * drawn["ok"]
    assert hang["errors_by_kind"] == {"timeout": 3} and hang["requests"] == 3 and hang["not_sent"] > 0
    hung_models = Counter(request.model for _, _, request in hung)
    assert hung_models["stall"] > 0  # a timeout within a stream too
    assert {name: figures["errors_by_kind"] for name, figures in hang["per_model"].items()} == {
        name: {"timeout": count} for name, count in hung_models.items()
    }
    refused, _ = run(InferenceLoadSpec((url,), 50.0, 0.2, models={"a": 1}))  # the stub has stopped
    assert refused["errors_by_kind"] == {"connection": refused["requests"]} and refused["mean_ttft"] is None
    assert "mean n/a ms" in format_inference_load_result(refused)


def drawn_requests(spec: InferenceLoadSpec, count: int) -> list:
    generator = InferenceLoadGenerator(spec, progress=False)
    return [request for _, _, request in itertools.islice(generator.arrivals(np.random.default_rng(spec.seed)), count)]


def test_draws_follow_their_laws():
    """20,000 draws: models by proportion (chi-square); max_tokens = max(1, round(8 X)) with X
    exponential of mean 1, whose law is P(N = 1) = 1 - exp(-1.5 / 8) and P(N = j) =
    exp(-(j - 0.5) / 8) - exp(-(j + 0.5) / 8) (chi-square); deterministic prompts of mean 7.4 are 7
    words each, and the prompt's text has that many words, the first the request's number (every
    request numbered in turn, over several chunks of draws and with batch arrivals)."""
    spec = InferenceLoadSpec(
        ("http://x",),
        1.0,
        1.0,
        seed=9,
        models={"a": 1, "b": 2, "c": 5},
        prompt_tokens=7.4,
        output_tokens=8.0,
        output_law="exponential",
    )
    requests = drawn_requests(spec, 20_000)
    models = Counter(request.model for request in requests)
    observed = np.array([models[name] for name in "abc"])
    assert stats.chisquare(observed, np.array([1, 2, 5]) / 8 * len(requests)).pvalue > ALPHA
    tokens = np.array([request.max_tokens for request in requests])
    edges = np.append(np.arange(1, 40) + 0.5, np.inf)
    probabilities = np.diff(np.concatenate([[0.0], 1 - np.exp(-edges / 8)]))
    counts = np.bincount(np.minimum(tokens, 40), minlength=41)[1:]
    assert stats.chisquare(counts, probabilities * len(tokens)).pvalue > ALPHA
    assert {request.prompt_tokens for request in requests} == {7}
    assert [request.number for request in requests] == list(range(len(requests)))  # over several chunks
    batches = dataclasses.replace(spec, arrivals="batch:mean=3")
    assert [request.number for request in drawn_requests(batches, 10_000)] == list(range(10_000))
    words = requests[5].body()["messages"][0]["content"].split()
    assert len(words) == 7 and words[0] == "5" and requests[5].body()["stream_options"] == {"include_usage": True}


def test_heavy_tails_are_bounded():
    """A Pareto law of huge mean draws at most TOKEN_LIMIT tokens, at least 1."""
    spec = InferenceLoadSpec(
        ("http://x",), 1.0, 1.0, models={"a": 1}, prompt_tokens=TOKEN_LIMIT, prompt_law="pareto:scv=100"
    )
    prompts = np.array([request.prompt_tokens for request in drawn_requests(spec, 2000)])
    assert prompts.max() == TOKEN_LIMIT and prompts.min() >= 1


def test_histogram_percentiles_within_half_a_bin():
    """The histogram's percentiles against the nearest-rank percentiles of the values themselves
    (numpy's inverted_cdf), within a factor sqrt(RATIO), for lognormal values over six decades; 0
    for values below LOW."""
    rng = np.random.default_rng(1)
    values = np.exp(rng.normal(math.log(1e-2), 2.5, 50_001))
    values = values[(values >= LOW) & (values <= HIGH)]
    histogram = LogHistogram()
    histogram.add_bins(Counter(bin_of(value) for value in values))
    assert histogram.total == len(values)
    for q in (1, 10, 50, 90, 99, 99.9, 100):
        exact = np.percentile(values, q, method="inverted_cdf")
        assert abs(math.log(histogram.percentile(q) / exact)) <= math.log(RATIO) / 2 + 1e-12
    tiny = LogHistogram()
    tiny.add_bins({bin_of(0.0): 3, bin_of(LOW / 2): 1})
    assert tiny.percentile(99) == 0.0 and math.isnan(LogHistogram().percentile(50))


def test_command_line_json(capsys):
    """``hetlb loadgen --openai ... --json``: the figures and the spec in the JSON output."""
    with stubs("") as (url,):
        argv = ["loadgen", "--openai", "--target", url, "--models", "m", "--rate", "20", "--duration", "0.5"]
        assert main([*argv, "--output-tokens", "3", "--prompt-law", "exponential", "--json", "-q"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["answered"] == result["requests"] == result["per_model"]["m"]["answered"] > 0
    assert result["output_tokens"] == 3 * result["answered"]
    assert result["metadata"]["load"]["models"] == {"m": 1.0}
    assert result["metadata"]["load"]["prompt_law"] == "exponential"


@pytest.mark.parametrize(
    "argv, message",
    [
        ([], "--models: give the models to ask for"),
        (["--models", "a=0"], "--models: every value must be finite and > 0"),
        (["--models", "a", "--prompt-law", "gamma"], "--prompt-law: must be one of exponential"),
        (["--models", "a", "--prompt-law", "lognormal"], "--prompt-law: lognormal needs its scv"),
        (["--models", "a", "--output-law", "lognormal:scv=x"], "--output-law: scv must be a number"),
        (["--models", "a", "--output-law", "lognormal:cv=2"], "--output-law: must be KIND, KIND:scv=S"),
        (["--models", "a", "--output-law", "hyperexponential:scv=0.5"], "--output-law: hyperexponential sizes"),
        (["--models", "a", "--output-law", "empirical:/nonexistent"], "--output-law:"),
        (["--models", "a", "--output-tokens", "0"], "--output-tokens: must be a finite number >= 1"),
        (["--models", "a", "--prompt-tokens", "2e6"], "--prompt-tokens: must be a finite number >= 1 and <= 1e+06"),
        (["--models", "a", "--job-types", "x"], "--job-types: is not for --openai"),
        (["--models", "a", "--path", "/x"], "--path: is not for --openai"),
    ],
)
def test_bad_flags_are_one_line(argv, message, capsys):
    base = ["loadgen", "--openai", "--target", "http://127.0.0.1:9", "--rate", "10", "--duration", "1"]
    assert main([*base, *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hetlb: error: {message}") and err.count("\n") == 1


def test_openai_flags_need_openai(capsys):
    assert main(["loadgen", "--target", "http://127.0.0.1:9", "--rate", "1", "--duration", "1", "--models", "a"]) == 2
    assert capsys.readouterr().err.startswith("hetlb: error: --models: is for streamed chat completions")


if __name__ == "__main__" and sys.argv[1:2] == ["--stub"]:
    serve_stub(sys.argv[2])


def test_reference_lists_every_flag_and_figure():
    """docs/reference/testbed.md names every --openai flag and every figure of the result, overall
    and per group."""
    from pathlib import Path

    from hetlb.cli import build_parser
    from hetlb.load.inference import StreamMeasurements

    text = (Path(__file__).resolve().parents[2] / "docs" / "reference" / "testbed.md").read_text()
    loadgen = build_parser(flags_of=("loadgen",))._subparsers._group_actions[0].choices["loadgen"]
    group = next(group for group in loadgen._action_groups if group.title.startswith("streamed"))
    flags = [action.option_strings[0] for action in group._group_actions]
    spec = InferenceLoadSpec(("http://x",), 1.0, 1.0, models={"a": 1})
    measurements = StreamMeasurements(spec)
    measurements.outcomes["a", "http://x", "connection"] += 1
    result = measurements.result()
    keys = [*result, *result["per_model"]["a"]]
    missing = [name for name in (*flags, *keys) if f"`{name}" not in text]
    assert len(flags) == 6 and not missing
