"""hetlb serve in front of an emulated inference fleet, with the official ``openai`` client, real
processes on 127.0.0.1: a streamed chat completion's first token reaches the client while its
engine still produces the rest; requests name models only some engines hold and reach only those;
the in-flight counts return to 0 after streams that end, that the engine aborts, and that the
client abandons.

Every process is stopped at the end, also when a test fails; every request has a timeout."""

from __future__ import annotations

import json

import pytest

from support.live_fleet import backend_process
from support.serve_processes import Processes, free_ports, get, status, wait_for

openai = pytest.importorskip("openai", reason="the openai client is not installed")
pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

TOKEN_TIME_MS = 40.0


@pytest.fixture
def fleet():
    """Two engines holding llama (and the second mistral too) behind one dispatcher: (client,
    admin port, engine URLs)."""
    processes = Processes()
    with backend_process(
        "--openai", "--token-time-ms", str(TOKEN_TIME_MS), "--concurrency", "4",
        "--listen", "127.0.0.1:0,models=llama", "--listen", "127.0.0.1:0,models=llama|mistral",
        count=2,
    ) as (_, engines):  # fmt: skip
        port, admin = free_ports(), free_ports()
        try:
            processes.serve(
                "--backend", f"{engines[0]},types=llama", "--backend", f"{engines[1]},types=llama|mistral",
                "--type-body-field", "model", "--policy", "jsq", "--health-interval", "0",
                port=port, admin=admin,
            )  # fmt: skip
            client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0, timeout=30)
            yield client, admin, engines
        finally:
            processes.stop_all()


def in_flight(admin: int) -> int:
    return sum(backend["in_flight"] for backend in status(admin)["backends"])


def test_the_first_token_arrives_while_the_engine_still_produces(fleet):
    """16 tokens of 40 ms each: when the client holds the first token, the request is still in
    flight at the dispatcher and the other 15 tokens are still to come (the answer is relayed as it
    arrives, not when it ends); usage comes with the stream, then the count is 0."""
    client, admin, _ = fleet
    stream = client.chat.completions.create(
        model="mistral", messages=[{"role": "user", "content": "one two three"}], max_tokens=16, stream=True,
        stream_options={"include_usage": True},
    )  # fmt: skip
    chunks = iter(stream)
    first = next(chunk for chunk in chunks if chunk.choices and chunk.choices[0].delta.content)
    assert first.model == "mistral"
    assert in_flight(admin) == 1  # the engine is producing the rest
    rest = list(chunks)
    contents = [chunk.choices[0].delta.content for chunk in rest if chunk.choices and chunk.choices[0].delta.content]
    assert len(contents) == 15
    assert rest[-1].usage is not None and rest[-1].usage.completion_tokens == 16
    assert wait_for(lambda: in_flight(admin) == 0)
    state = status(admin)["backends"]
    assert state[1]["requests"] == 1 and state[0]["requests"] == 0  # only the second engine holds mistral
    assert state[1]["stream_events"] >= 17 and status(admin)["accounting_violations"] == 0


def test_models_reach_only_the_engines_that_hold_them(fleet):
    client, admin, engines = fleet
    for k in range(12):
        model = ("llama", "mistral")[k % 2]
        answer = client.chat.completions.with_raw_response.create(
            model=model, messages=[{"role": "user", "content": "hi"}], max_tokens=2
        )
        backend = answer.headers["X-Backend"]
        assert backend in (engines if model == "llama" else engines[1:])
        assert answer.parse().usage.completion_tokens == 2
    with pytest.raises(openai.NotFoundError) as error:
        client.chat.completions.create(model="gpt-9", messages=[{"role": "user", "content": "hi"}], max_tokens=2)
    assert error.value.code == "model_not_found"
    state = status(admin)
    assert state["requests"] == 12 and state["rejected"]["unknown_type"] == 1


def test_counts_return_to_zero_after_streams_that_end_fail_and_are_abandoned(fleet):
    client, admin, engines = fleet
    for _ in range(3):  # abandoned after the first token
        stream = client.chat.completions.create(
            model="llama", messages=[{"role": "user", "content": "x"}], max_tokens=50, stream=True
        )
        next(iter(stream))
        stream.close()
    assert wait_for(lambda: in_flight(admin) == 0)
    engine_metrics = [get(f"{engine}/metrics")[2].decode() for engine in engines]
    aborted = sum(
        float(line.rsplit(" ", 1)[1])
        for text in engine_metrics
        for line in text.splitlines()
        if line.startswith("vllm:request_success_total") and 'finished_reason="abort"' in line
    )
    assert aborted == 3  # each abandoned stream ended its engine's request, once
    running = [
        float(line.rsplit(" ", 1)[1])
        for text in engine_metrics
        for line in text.splitlines()
        if line.startswith("vllm:num_requests_running")
    ]
    assert running and sum(running) == 0
    state = status(admin)
    assert sum(backend["client_gone"] for backend in state["backends"]) == 3
    assert state["accounting_violations"] == 0
    # a stream that ends normally after those
    text = "".join(
        chunk.choices[0].delta.content or ""
        for chunk in client.chat.completions.create(
            model="llama", messages=[{"role": "user", "content": "x"}], max_tokens=3, stream=True
        )
        if chunk.choices
    )
    assert text.split() == ["t1", "t2", "t3"]
    assert wait_for(lambda: in_flight(admin) == 0)
    assert json.loads(json.dumps(status(admin)))["accounting_violations"] == 0


def test_a_stream_the_engine_cuts_reaches_the_client_cut():
    """An engine that closes every connection after half the tokens: the client's stream ends in an
    error (never a complete-looking answer), the failure is the engine's, and the count is 0."""
    processes = Processes()
    with backend_process(
        "--openai", "--token-time-ms", "5", "--abort-probability", "1", "--listen", "127.0.0.1:0,models=llama"
    ) as (_, engines):
        port, admin = free_ports(), free_ports()
        try:
            processes.serve(
                "--backend", f"{engines[0]},types=llama", "--type-body-field", "model", "--health-interval", "0",
                "--eject-after", "100", port=port, admin=admin,
            )  # fmt: skip
            client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0, timeout=30)
            for _ in range(2):
                received = []
                with pytest.raises(openai.APIError):
                    for chunk in client.chat.completions.create(
                        model="llama", messages=[{"role": "user", "content": "x"}], max_tokens=10, stream=True
                    ):
                        received.append(chunk)
                assert 0 < len(received) < 10
            assert wait_for(lambda: in_flight(admin) == 0)
            backend = status(admin)["backends"][0]
            assert backend["backend_broken"] == 2 and backend["errors"] == 2 and backend["client_gone"] == 0
            assert status(admin)["accounting_violations"] == 0
        finally:
            processes.stop_all()
