"""hetlb backend --openai, the emulated inference engine: its tokens as milestones of the multi-slot
server's attained-work clock against the law's closed forms and against the definition of the
batch server; the requests it reads; then real processes on 127.0.0.1: one request alone, b at
once, FIFO beyond c (closed forms, within the timer lateness bound below), a Poisson load against
hetlb.simulate of the same batch server, and the OpenAI shapes through the official client, the
metrics, adapters, bad bodies, aborts and faults.

LATENESS_S bounds how late a client on the same host sees an event after the model's epoch: the
EpochClock wakes within microseconds (tests/engines/test_live_backend.py checks it never wakes early),
then one pass of the engine's event loop, a loopback write and the client's read, well under a
millisecond on an idle host; the bound allows the other work of a shared two-core host to delay
the two processes by a few scheduler periods. It is at most half of a token time of these tests
(40 ms, and 80 ms at speed 1/2), so that a law off by one token (one token time) fails them.
The checks of a request alone are also one-sided exact: no event can come before its model epoch,
as the client sends before the engine's arrival epoch."""

from __future__ import annotations

import asyncio
import json
import math
import time

import aiohttp
import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families
from scipy import stats

import hetlb
from hetlb.engines.backend import BackendSpec, MultiSlotServer, parse_listen
from hetlb.engines.inference import (
    DEFAULT_MAX_TOKENS,
    RequestError,
    count_tokens,
    orca_header,
    read_completion,
)
from hetlb.errors import InputError
from hetlb.model.servers import RateCurve
from hetlb.wire.runtime import EpochClock

from support.live_fleet import backend_process
from support.serve_processes import get, wait_for

LATENESS_S = 0.020
TOKEN_TIME_MS = 40.0

# --- tokens on the attained-work clock, without a network ----------------------------------------


def milestones(prefill: float, n: int, token_s: float):
    """The engine's milestones of a request: tokens 1..n-1 at (prefill + k) token_s of work."""
    return ((prefill + k) * token_s for k in range(1, n))


def token_epochs(server: MultiSlotServer, arrivals, prefills, n: int, token_s: float) -> list[np.ndarray]:
    """The epochs of each job's n tokens (prefill work ``prefills[i]`` token times) through ``server``."""
    heard: dict[int, list[float]] = {}
    server.on_milestone = server.on_departure = lambda job, epoch: heard.setdefault(job, []).append(epoch)
    jobs = [server.arrive(a, (p + n) * token_s, milestones(p, n, token_s)) for a, p in zip(arrivals, prefills)]
    server.advance(math.inf)
    return [np.array(heard[job]) for job in jobs]


def test_tokens_of_one_request_alone_and_of_b_at_once():
    """Alone: token k at (prefill + k) tau. b at once on concurrency >= b: (prefill + k) tau b / phi(b),
    every request alike. FIFO beyond c (c = 2, independent, three at once): the third starts when
    the first two leave, at W tau, its tokens at (W + prefill + k) tau."""
    tau, n, prefill = 0.02, 12, 1.5
    k = np.arange(1, n + 1)
    (alone,) = token_epochs(MultiSlotServer(4, RateCurve("shared")), [0.0], [prefill], n, tau)
    assert np.allclose(alone, (prefill + k) * tau, rtol=1e-12)
    curve = RateCurve("saturating", alpha=0.5)
    for b in (2, 4):
        epochs = token_epochs(MultiSlotServer(4, curve), [0.0] * b, [prefill] * b, n, tau)
        for each in epochs:
            assert np.allclose(each, (prefill + k) * tau * b / curve.phi(b), rtol=1e-12)
    first, second, third = token_epochs(MultiSlotServer(2, RateCurve()), [0.0] * 3, [prefill] * 3, n, tau)
    assert np.allclose(first, second) and np.allclose(first, (prefill + k) * tau)
    assert np.allclose(third, (2 * prefill + n + k) * tau, rtol=1e-12)


@pytest.mark.parametrize("concurrency, curve", [(3, RateCurve("saturating", alpha=0.4)), (2, RateCurve("shared"))])
def test_tokens_against_the_definition_of_the_batch_server(concurrency, curve):
    """Random arrivals and prompts: the departures are those of plain jobs of the same work on the
    same server (milestones change nothing), and each request's attained work at its k-th token's
    epoch, the integral of phi(b(t)) / b(t) over its time in service, is prefill + k token times."""
    rng = np.random.default_rng(5)
    tau, n, jobs = 0.01, 6, 300
    arrivals = np.cumsum(rng.exponential(0.05, jobs))
    prefills = rng.integers(0, 200, jobs) * 0.02
    epochs = token_epochs(MultiSlotServer(concurrency, curve), arrivals, prefills, n, tau)
    departures = np.array([each[-1] for each in epochs])
    plain: dict[int, float] = {}
    server = MultiSlotServer(concurrency, curve, on_departure=plain.__setitem__)
    numbers = [server.arrive(a, (p + n) * tau) for a, p in zip(arrivals, prefills)]
    server.advance(math.inf)
    assert np.allclose(departures, [plain[j] for j in numbers], rtol=0, atol=1e-9)
    events = np.unique(np.concatenate([arrivals, departures]))
    attained = np.zeros((len(events), jobs))  # each job's work at each event epoch
    for i, (start, end) in enumerate(zip(events[:-1], events[1:])):
        middle = (start + end) / 2
        present = np.flatnonzero((arrivals <= middle) & (departures > middle))
        serving = present[: min(len(present), concurrency)]
        attained[i + 1] = attained[i]
        if len(serving):
            attained[i + 1, serving] += float(curve.per_job_rate(len(serving))) * (end - start)
    for j in range(jobs):
        work = np.interp(epochs[j], events, attained[:, j])  # piecewise linear between events
        assert np.allclose(work, (prefills[j] + np.arange(1, n + 1)) * tau, rtol=0, atol=1e-9)


def test_a_request_that_leaves_drops_its_remaining_work():
    """c = 1, works 10 and 5 at 0: the first leaves at 3, the second starts then and leaves at 8;
    a waiting job that leaves is never served; a job that left (or departed) leaves no second time."""
    departed: dict[int, float] = {}
    server = MultiSlotServer(1, RateCurve(), on_departure=departed.__setitem__)
    first, second = server.arrive(0.0, 10.0), server.arrive(0.0, 5.0)
    third = server.arrive(0.5, 1.0)
    assert server.leave(first, 3.0) and not server.leave(first, 3.5)
    assert server.leave(third, 4.0)
    server.advance(math.inf)
    assert departed == {second: 8.0}
    assert not server.leave(second, 9.0)


def test_the_emulated_tokenizer_and_the_requests_it_reads():
    """P = whitespace-separated words of the prompt or the messages' contents; n = max_tokens (chat:
    max_completion_tokens first), 16 when absent."""
    assert count_tokens("  one two\nthree\tfour ") == 4
    body = {"model": "m", "messages": [{"role": "system", "content": "a b"}, {"role": "user", "content": "c d e"}]}
    chat = read_completion(json.dumps(body).encode(), True, 100)
    assert (chat.model, chat.prompt_tokens, chat.max_tokens, chat.stream) == ("m", 5, DEFAULT_MAX_TOKENS, False)
    parts = {**body, "messages": [{"role": "user", "content": [{"type": "text", "text": "x y"}]}], "max_tokens": 3}
    assert read_completion(json.dumps({**parts, "max_completion_tokens": 7}).encode(), True, 100).max_tokens == 7
    assert read_completion(json.dumps(parts).encode(), True, 100).prompt_tokens == 2
    streamed = {"model": "m", "prompt": ["a b", "c"], "stream": True, "stream_options": {"include_usage": True}}
    text = read_completion(json.dumps(streamed).encode(), False, 100)
    assert (text.prompt_tokens, text.stream, text.include_usage) == (3, True, True)
    assert read_completion(b'{"model": "m", "prompt": [1, 2, 3, 4]}', False, 100).prompt_tokens == 4


@pytest.mark.parametrize(
    "body, chat, message",
    [
        (b"not json", True, "the body must be a JSON object"),
        (b"[1, 2]", True, "the body must be a JSON object"),
        (b'{"messages": [{"role": "user", "content": "hi"}]}', True, "model: must be a non-empty text"),
        (b'{"model": "m"}', True, "messages: must be a non-empty list"),
        (b'{"model": "m", "messages": ["hi"]}', True, "messages[0]: must be an object with a role"),
        (b'{"model": "m", "prompt": 5}', False, "prompt: must be a text"),
        (b'{"model": "m", "prompt": "a", "max_tokens": 0}', False, "max_tokens: must be an integer >= 1"),
        (b'{"model": "m", "prompt": "a", "max_tokens": 2.5}', False, "max_tokens: must be an integer >= 1"),
        (b'{"model": "m", "prompt": "a", "n": 2}', False, "n: the emulated engine gives one choice"),
        (b'{"model": "m", "prompt": "a", "stream": "yes"}', False, "stream: must be true or false"),
        (b'{"model": "m", "prompt": "a", "stream_options": {}}', False, "stream_options: apply only when stream"),
        (b'{"model": "m", "prompt": "a b c", "max_tokens": 8}', False, "the prompt (3 tokens) and max_tokens (8)"),
    ],
)
def test_bad_requests_are_400_in_the_openai_shape(body, chat, message):
    with pytest.raises(RequestError) as error:
        read_completion(body, chat, 10)
    assert error.value.status == 400 and error.value.message.startswith(message)
    answer = json.loads(error.value.response().body)
    assert set(answer["error"]) == {"message", "type", "param", "code"} and answer["error"]["type"] == "BadRequestError"


def test_orca_header_formats():
    metrics = {"kv_cache_usage_perc": 0.5, "num_requests_waiting": 2.0}
    assert (
        orca_header("TEXT", metrics)
        == "TEXT named_metrics.kv_cache_usage_perc=0.5, named_metrics.num_requests_waiting=2.0"
    )
    assert json.loads(orca_header("JSON", metrics).removeprefix("JSON ")) == {"named_metrics": metrics}


def test_parse_listen_models_and_bad_command_lines(capsys):
    from hetlb.cli import main

    assert parse_listen("127.0.0.1:0,models=a|b,speed=2") == [BackendSpec("127.0.0.1", 0, 2.0, models=("a", "b"))]
    with pytest.raises(InputError, match="--listen models: each model id once"):
        parse_listen("127.0.0.1:0,models=a|a")
    for argv, line in [
        (["--openai"], "hetlb: error: --models: give the models the engines serve"),
        (["--openai", "--models", "a", "--mean-service-ms", "5"], "hetlb: error: --mean-service-ms: applies without"),
        (["--models", "a"], "hetlb: error: --models: applies with --openai only"),
        (["--listen", "127.0.0.1:0,models=a"], "hetlb: error: --listen models: applies with --openai only"),
        (["--openai", "--models", "a", "--engine", "tgi"], "hetlb: error: --engine: must be one of vllm, sglang"),
        (["--openai", "--models", "a", "--token-time-ms", "0"], "hetlb: error: --token-time-ms: must be a finite"),
        (["--openai", "--models", "a,", "--prefill-cost", "1"], "hetlb: error: --models: model ids are non-empty"),
        (["--openai", "--models", "a", "--abort-probability", "2"], "hetlb: error: --abort-probability: must be"),
    ]:
        assert main(["backend", "--listen", "127.0.0.1:0", *argv]) == 2
        error = capsys.readouterr().err
        assert error.startswith(line) and error.count("\n") == 1


# --- real processes ------------------------------------------------------------------------------


def engine(*args: str, count: int = 1):
    """A ``hetlb backend --openai`` child (stopped at the end, also when the test fails)."""
    return backend_process("--openai", "--token-time-ms", str(TOKEN_TIME_MS), *args, count=count)


def chat_body(model: str, words: int, tokens: int, **more) -> dict:
    prompt = " ".join(["word"] * words)
    return {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": tokens, **more}


async def streamed(session: aiohttp.ClientSession, url: str, body: dict, headers=None) -> dict:
    """One streamed chat completion: its send epoch, each token event's arrival epoch, the texts,
    the usage chunk, whether [DONE] came, the answer's headers."""
    sent = time.monotonic()
    result: dict = {"sent": sent, "tokens": [], "texts": [], "usage": None, "done": False, "finish": []}
    async with session.post(f"{url}/v1/chat/completions", json={**body, "stream": True}, headers=headers) as answer:
        result["status"], result["headers"] = answer.status, dict(answer.headers)
        async for line in answer.content:
            if not line.startswith(b"data: "):
                continue
            payload = line.removeprefix(b"data: ").strip()
            if payload == b"[DONE]":
                result["done"] = True
                continue
            chunk = json.loads(payload)
            if chunk["choices"]:
                result["tokens"].append(time.monotonic())
                result["texts"].append(chunk["choices"][0]["delta"])
                result["finish"].append(chunk["choices"][0]["finish_reason"])
            if chunk.get("usage"):
                result["usage"] = chunk["usage"]
    return result


def all_at_once(url: str, bodies: list[dict]) -> tuple[float, list[dict]]:
    async def run():
        async with aiohttp.ClientSession() as session:
            await asyncio.gather(*(session.get(f"{url}/health") for _ in bodies))  # the connections, opened before
            start = time.monotonic()
            return start, await asyncio.gather(*(streamed(session, url, body) for body in bodies))

    return asyncio.run(run())


def test_one_request_alone_ttft_and_end_to_end():
    """Speed 1/2, P = 50 words at prefill cost 0.1 (5 token times), n = 6: token k at (5 + k) tau / (1/2),
    so TTFT = 6 x 80 = 480 ms and e2e = W tau / (1/2) = 11 x 80 = 880 ms; each event no earlier than
    its epoch and within LATENESS_S of it. The events are the OpenAI chunks: role on the first,
    t1..tn, finish_reason length on the last, the usage chunk, then [DONE]."""
    tau = TOKEN_TIME_MS / 1e3 / 0.5
    with engine("--listen", "127.0.0.1:0,speed=0.5", "--models", "m", "--prefill-cost", "0.1") as (child, (url,)):
        _, (result,) = all_at_once(url, [chat_body("m", 50, 6, stream_options={"include_usage": True})])
        assert child.stop() == 0
    assert result["status"] == 200 and result["headers"]["Content-Type"] == "text/event-stream"
    offsets = np.array(result["tokens"]) - result["sent"]
    expected = (5 + np.arange(1, 7)) * tau
    assert np.all(offsets >= expected) and np.all(offsets < expected + LATENESS_S)
    assert result["texts"][0] == {"role": "assistant", "content": "t1"}
    assert "".join(delta["content"] for delta in result["texts"]) == "t1 t2 t3 t4 t5 t6"
    assert result["finish"] == [None] * 5 + ["length"] and result["done"]
    assert result["usage"] == {"prompt_tokens": 50, "completion_tokens": 6, "total_tokens": 56}


@pytest.mark.parametrize("b, curve", [(4, "saturating:alpha=0.5"), (3, "shared")])
def test_b_requests_at_once_share_the_batch(b, curve):
    """b requests at once on concurrency 4: between its second and its second-last token (all b
    in service then), each request's tokens come every tau b / phi(b) (100 ms and 120 ms here); the
    mean of those n - 3 gaps lies within 2 LATENESS_S / (n - 3) of it, as only its two ends carry
    lateness (the b arrivals a few hundred microseconds apart shift its first tokens, not those gaps)."""
    n, interval = 12, TOKEN_TIME_MS / 1e3 * b / float(RateCurve.parse(curve).phi(b))
    with engine("--listen", "127.0.0.1:0", "--models", "m", "--concurrency", "4", "--rate-curve", curve) as (_, (url,)):
        start, results = all_at_once(url, [chat_body("m", 0, n)] * b)
    for result in results:
        tokens = np.array(result["tokens"])
        assert len(tokens) == n and result["done"]
        mean_gap = (tokens[-2] - tokens[1]) / (n - 3)
        assert abs(mean_gap - interval) < 2 * LATENESS_S / (n - 3)


def test_fifo_waiting_beyond_the_concurrency():
    """Three requests at once on concurrency 2 (independent): two start at once (TTFT (P c + 1) tau),
    the third waits for a slot, the first departure at W tau, and has its first token at
    (W + P c + 1) tau after the first send; each within LATENESS_S (which also covers the spread
    of the three sends) of its epoch."""
    words, n, cost = 50, 5, 0.02
    prefill = words * cost
    tau = TOKEN_TIME_MS / 1e3
    with engine("--listen", "127.0.0.1:0", "--models", "m", "--concurrency", "2") as (_, (url,)):
        start, results = all_at_once(url, [chat_body("m", words, n)] * 3)
    firsts = sorted(result["tokens"][0] - start for result in results)
    expected = [(prefill + 1) * tau] * 2 + [(prefill + n + prefill + 1) * tau]
    for first, epoch in zip(firsts, expected):
        assert epoch <= first < epoch + LATENESS_S


def poisson_end_to_end(url: str, rate: float, duration: float, warmup: float, body: dict, seed: int):
    """Streamed chat completions sent at the epochs of a Poisson process (on an EpochClock): the
    send offsets and end-to-end times (send to [DONE]) of those sent after ``warmup``."""
    rng = np.random.default_rng(seed)
    epochs = np.cumsum(rng.exponential(1 / rate, int(3 * rate * (warmup + duration)) + 10))
    epochs = epochs[epochs < warmup + duration]

    async def run():
        clock = EpochClock(asyncio.get_running_loop())
        try:
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
                start = time.monotonic()

                async def one(offset: float):
                    await clock.sleep_until(start + offset)
                    result = await streamed(session, url, body)
                    assert result["done"] and len(result["tokens"]) == body["max_tokens"]
                    return result["sent"] - start, time.monotonic() - result["sent"]

                return await asyncio.gather(*(one(offset) for offset in epochs))
        finally:
            clock.stop()

    measured = np.array([row for row in asyncio.run(run()) if row[0] >= warmup])
    return measured[:, 0] - warmup, measured[:, 1]


def test_a_poisson_load_against_the_simulator():
    """One engine of concurrency 8, saturating alpha 0.3, tau 2 ms, every request P = 50 words
    (prefill 1 token time) and n = 16: deterministic work W = 17 tau = 34 ms; Poisson arrivals at
    half its capacity phi(8) / W for 15 s (about 570 requests). The mean e2e at the client (99.9%
    batch means over 20 slices of the window, each many sojourns long) and hetlb.simulate's mean
    sojourn of the same batch server (deterministic size 1 in units of W tau, its 99.9% interval)
    overlap: their difference is within the sum of the two half-widths."""
    tau_ms, words, n, concurrency, curve = 2.0, 50, 16, 8, RateCurve("saturating", alpha=0.3)
    duration, batches = 15.0, 20
    work_s = (words * 0.02 + n) * tau_ms / 1e3
    rate = 0.5 * float(curve.phi(concurrency)) / work_s
    arguments = ["--listen", "127.0.0.1:0", "--models", "m", "--concurrency", str(concurrency)]
    with backend_process(
        "--openai", "--token-time-ms", str(tau_ms), *arguments, "--rate-curve", curve.text
    ) as (_, (url,)):  # fmt: skip
        offsets, e2e = poisson_end_to_end(url, rate, duration, 1.0, chat_body("m", words, n), seed=8)
    assert len(e2e) > 0.8 * rate * duration
    slices = np.minimum((offsets / duration * batches).astype(int), batches - 1)
    means = np.bincount(slices, weights=e2e) / np.bincount(slices)
    live_half = stats.t.ppf(1 - 0.001 / 2, batches - 1) * means.std(ddof=1) / math.sqrt(batches)
    system = hetlb.System.from_speeds(
        [1.0], arrival_rate=rate * work_s, job_sizes="deterministic", concurrency=concurrency, rate_curve=curve
    )
    simulated = hetlb.simulate(system, "jsq", jobs=40_000, warmup=50.0, replications=5, seed=2)
    low, high = (bound * work_s for bound in simulated.mean_response_time_ci)
    assert abs(means.mean() - simulated.mean_response_time * work_s) < live_half + (high - low) / 2
    assert simulated.mean_response_time > 1.0  # sharing the batch makes the mean sojourn exceed W alone


def engine_metrics(url: str, model: str = "m") -> dict[str, float]:
    """The engine's /metrics parsed by prometheus_client's text parser: sample name (with its
    finished_reason in brackets, if any) -> value; every sample is labelled with ``model``."""
    status, headers, body = get(f"{url}/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    values = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            assert sample.labels["model_name"] == model
            reason = sample.labels.get("finished_reason")
            values[sample.name + (f"[{reason}]" if reason else "")] = sample.value
    return values


def post(url: str, path: str, body) -> tuple[int, dict]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    status, _, answer = get(f"{url}{path}", method="POST", data=data, headers={"Content-Type": "application/json"})
    return status, (json.loads(answer) if answer.startswith(b"{") else {"text": answer.decode()})


def test_the_openai_client_models_completions_and_adapters():
    """The official client lists the base models of each engine (--models, and models= per backend),
    gets a non-streamed and a streamed chat completion with usage (P words, n tokens, content
    t1..tn), a text completion; an adapter loaded on a running engine is listed at once with its
    base model as parent and serves; unloaded, it is a 404 NotFoundError again."""
    openai = pytest.importorskip("openai", reason="the openai client is in the test extra")
    with engine(
        "--listen", "127.0.0.1:0", "--listen", "127.0.0.1:0,models=qwen", "--models", "llama,mistral", count=2
    ) as (
        child,
        (url, other),
    ):
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0)
        listed = client.models.list().data
        assert [(m.id, m.owned_by, m.parent) for m in listed] == [("llama", "vllm", None), ("mistral", "vllm", None)]
        assert [m.id for m in openai.OpenAI(base_url=f"{other}/v1", api_key="none").models.list().data] == ["qwen"]
        messages = [{"role": "user", "content": "how fast is a batch server"}]
        answer = client.chat.completions.create(model="mistral", messages=messages, max_tokens=4)
        assert answer.choices[0].message.content == "t1 t2 t3 t4" and answer.choices[0].finish_reason == "length"
        assert (answer.usage.prompt_tokens, answer.usage.completion_tokens, answer.usage.total_tokens) == (6, 4, 10)
        chunks = list(
            client.chat.completions.create(
                model="llama",
                messages=messages,
                max_completion_tokens=5,
                stream=True,
                stream_options={"include_usage": True},
            )
        )
        assert [c.choices[0].delta.content for c in chunks[:-1]] == ["t1", " t2", " t3", " t4", " t5"]
        assert (
            chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 5 and chunks[-1].usage.prompt_tokens == 6
        )
        text = client.completions.create(model="llama", prompt="one two three", max_tokens=2)
        assert text.choices[0].text == "t1 t2" and text.usage.total_tokens == 5
        assert post(url, "/v1/load_lora_adapter", {"lora_name": "sql", "lora_path": "/adapters/sql"})[0] == 200
        assert (
            post(url, "/v1/load_lora_adapter", {"lora_name": "legal", "lora_path": "/l", "base_model": "mistral"})[0]
            == 200
        )
        cards = {m.id: (m.root, m.parent) for m in client.models.list().data}
        assert cards["sql"] == ("/adapters/sql", "llama") and cards["legal"] == ("/l", "mistral")
        assert (
            client.chat.completions.create(model="sql", messages=messages, max_tokens=1).choices[0].message.content
            == "t1"
        )
        status, error = post(url, "/v1/load_lora_adapter", {"lora_name": "sql", "lora_path": "/x"})
        assert status == 400 and "already been loaded" in error["error"]["message"]
        assert post(url, "/v1/load_lora_adapter", {"lora_name": "x", "lora_path": "/x", "base_model": "qwen"})[0] == 404
        assert post(url, "/v1/unload_lora_adapter", {"lora_name": "sql"})[0] == 200
        assert post(url, "/v1/unload_lora_adapter", {"lora_name": "sql"})[0] == 404
        assert "sql" not in {m.id for m in client.models.list().data}
        with pytest.raises(openai.NotFoundError) as missing:
            client.chat.completions.create(model="sql", messages=messages)
        assert missing.value.body["code"] == "model_not_found" and missing.value.body["type"] == "NotFoundError"
        assert child.stop() == 0


def test_bad_bodies_unknown_models_and_routes():
    """400 for a body that is not JSON or lacks model, 413 for one over 1 MiB, 404 model_not_found for
    a model the engine does not serve (other engines' models included), each in the OpenAI error shape; the engine keeps
    serving and counts none of them."""
    with engine("--listen", "127.0.0.1:0", "--listen", "127.0.0.1:0,models=b", "--models", "a", count=2) as (
        _,
        (url, _),
    ):
        for body, status, code in [
            (b"{not json", 400, "bad_request"),
            (b"x" * (2 << 20), 413, "body_too_large"),
            ({"messages": [{"role": "user", "content": "x"}]}, 400, "bad_request"),
            ({"model": "b", "messages": [{"role": "user", "content": "x"}]}, 404, "model_not_found"),
        ]:
            answer_status, answer = post(url, "/v1/chat/completions", body)
            assert (answer_status, answer["error"]["code"]) == (status, code)
            assert set(answer["error"]) == {"message", "type", "param", "code"}
        assert get(f"{url}/v1/chat/completions")[0] == 405 and get(f"{url}/v2/anything")[0] == 404
        assert get(f"{url}/health")[0] == 200 and get(f"{url}/healthz")[2] == b"ok"
        metrics = engine_metrics(url, model="a")
        assert sum(metrics[f"vllm:request_success_total[{r}]"] for r in ("length", "abort", "error")) == 0
        assert metrics["vllm:prompt_tokens_total"] == 0
        assert post(url, "/v1/completions", {"model": "a", "prompt": "x", "max_tokens": 1})[0] == 200


def test_metrics_count_the_requests_in_system_and_the_tokens():
    """Five streams at once on concurrency 2, each P = 7 words, n = 6: once every answer has begun
    (headers are sent at arrival), running = 2 and waiting = 3 (the number in system, as /load and
    the ORCA header say), kv usage 2/2; when all have ended: 0 and 0, 5 successes, 5 P prompt
    tokens and 5 n output tokens, exactly."""
    with engine("--listen", "127.0.0.1:0", "--models", "m", "--concurrency", "2") as (_, (url,)):

        async def run():
            async with aiohttp.ClientSession() as session:
                body = {**chat_body("m", 7, 6), "stream": True}
                headers = {"endpoint-load-metrics-format": "JSON"}
                answers = [
                    await session.post(f"{url}/v1/chat/completions", json=body, headers=headers) for _ in range(5)
                ]
                during = await asyncio.to_thread(engine_metrics, url)
                load = await asyncio.to_thread(get, f"{url}/load")
                for answer in answers:
                    assert (await answer.read()).endswith(b"data: [DONE]\n\n")
                return answers, during, load

        answers, during, load = asyncio.run(run())
        after = engine_metrics(url)
    assert (during["vllm:num_requests_running"], during["vllm:num_requests_waiting"]) == (2, 3)
    assert during["vllm:kv_cache_usage_perc"] == 1.0 and json.loads(load[2]) == {"queue_length": 5}
    orca = [json.loads(a.headers["endpoint-load-metrics"].removeprefix("JSON "))["named_metrics"] for a in answers]
    assert [o["num_requests_running"] + o["num_requests_waiting"] for o in orca] == [1, 2, 3, 4, 5]
    assert [int(a.headers["X-Queue-Length"]) for a in answers] == [0, 1, 2, 3, 4]  # the others, at its arrival
    assert (after["vllm:num_requests_running"], after["vllm:num_requests_waiting"]) == (0, 0)
    assert after["vllm:request_success_total[length]"] == 5 and after["vllm:request_success_total[abort]"] == 0
    assert (after["vllm:prompt_tokens_total"], after["vllm:generation_tokens_total"]) == (35, 30)


def test_sglang_names():
    with engine("--listen", "127.0.0.1:0", "--models", "m", "--engine", "sglang", "--concurrency", "4") as (_, (url,)):
        assert post(url, "/v1/completions", {"model": "m", "prompt": "a b", "max_tokens": 3})[0] == 200
        metrics = engine_metrics(url)
    assert {
        name: metrics[name] for name in ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage")
    } == {
        "sglang:num_running_reqs": 0,
        "sglang:num_queue_reqs": 0,
        "sglang:token_usage": 0,
    }
    assert (metrics["sglang:prompt_tokens_total"], metrics["sglang:generation_tokens_total"]) == (2, 3)
    assert (metrics["sglang:num_requests_total"], metrics["sglang:num_aborted_requests_total"]) == (1, 0)


def test_a_client_that_goes_away_releases_its_request():
    """Concurrency 1: a stream of n = 50 tokens whose client closes the connection after its second
    token leaves the engine at once: the metrics return to 0 in system, it ends as an abort, not a
    success, and fewer than n tokens were generated; a request sent next has the TTFT of one alone (the dropped
    work does not delay it)."""
    n, tau = 50, TOKEN_TIME_MS / 1e3
    with engine("--listen", "127.0.0.1:0", "--models", "m") as (_, (url,)):

        async def run():
            async with aiohttp.ClientSession() as session:
                answer = await session.post(f"{url}/v1/chat/completions", json={**chat_body("m", 0, n), "stream": True})
                events = 0
                async for line in answer.content:
                    events += line.startswith(b"data: ")
                    if events == 2:
                        break
                answer.close()  # the client goes away mid-stream
                return await streamed(session, url, chat_body("m", 0, 1))

        after = asyncio.run(run())
        metrics = wait_for(
            lambda: (m := engine_metrics(url))["vllm:request_success_total[length]"] == 1 and m, timeout=5.0
        )
    assert metrics and (metrics["vllm:num_requests_running"], metrics["vllm:num_requests_waiting"]) == (0, 0)
    assert 2 <= metrics["vllm:generation_tokens_total"] - 1 < n and metrics["vllm:request_success_total[abort]"] == 1
    assert tau <= after["tokens"][0] - after["sent"] < tau + LATENESS_S


def test_faults_abort_error_and_stall():
    """--abort-probability 1: the connection closes once ceil(n / 2) tokens are out, without [DONE],
    and the request is gone; --error-probability 1: served, then 500 in the OpenAI shape;
    --stall-probability 1: no answer, nothing in the server."""
    with engine("--listen", "127.0.0.1:0", "--models", "m", "--abort-probability", "1") as (_, (url,)):

        async def aborted():
            async with aiohttp.ClientSession() as session:
                with pytest.raises(aiohttp.ClientPayloadError):
                    await streamed(session, url, chat_body("m", 0, 7))
                async with session.post(
                    f"{url}/v1/chat/completions", json={**chat_body("m", 0, 7), "stream": True}
                ) as a:
                    received = b""
                    with pytest.raises(aiohttp.ClientPayloadError):
                        async for chunk in a.content.iter_any():
                            received += chunk
                    return received

        received = asyncio.run(aborted())
        metrics = engine_metrics(url)
    assert received.count(b"data: ") == 4 and b"[DONE]" not in received
    assert (metrics["vllm:num_requests_running"], metrics["vllm:num_requests_waiting"]) == (0, 0)
    assert metrics["vllm:generation_tokens_total"] == 8 and metrics["vllm:request_success_total[length]"] == 0
    assert metrics["vllm:request_success_total[abort]"] == 2
    with engine("--listen", "127.0.0.1:0", "--models", "m", "--error-probability", "1") as (_, (url,)):
        status, answer = post(url, "/v1/completions", {"model": "m", "prompt": "a", "max_tokens": 2})
        assert status == 500 and answer["error"]["type"] == "InternalServerError"
        metrics = engine_metrics(url)
        assert metrics["vllm:generation_tokens_total"] == 2 and metrics["vllm:request_success_total[error]"] == 1
    with engine("--listen", "127.0.0.1:0", "--models", "m", "--stall-probability", "1") as (child, (url,)):
        with pytest.raises(TimeoutError):
            get(f"{url}/v1/completions", method="POST", data=b'{"model": "m", "prompt": "a"}', timeout=0.3)
        assert json.loads(get(f"{url}/load")[2]) == {"queue_length": 0}
        assert child.stop() == 0
