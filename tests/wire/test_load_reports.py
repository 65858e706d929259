"""What backends report of their load (hetlb.wire.load_reports): an engine's Prometheus text (vLLM's
and SGLang's metric names, written here by hand in their format), the ORCA endpoint-load-metrics
header in its TEXT and JSON forms, and which request a piggybacked report still counts; then what
Dispatcher.report makes of each, checked against the rule of docs/reference/serve.md by hand."""

from __future__ import annotations

import pytest

from hetlb.gateway.config import ServeConfig
from hetlb.gateway.dispatcher import Dispatcher
from hetlb.wire.load_reports import (
    ENGINE_METRICS,
    MAX_REPORT,
    EngineMetrics,
    engine_load,
    orca_load,
    piggybacked_report,
)

VLLM = ENGINE_METRICS["vllm"]
SGLANG = ENGINE_METRICS["sglang"]

VLLM_TEXT = b"""# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 3.0
vllm:num_requests_running{engine="0",model_name="sql-lora"} 1.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 5.0
vllm:num_requests_waiting{engine="0",model_name="sql-lora"} 0.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} NaN
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} 12.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} NaN
vllm:time_to_first_token_seconds_count{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 12.0
"""
"""Running 3 + 1, waiting 5 + 0: 9 in system; NaN only in families that are not read."""

SGLANG_TEXT = b"""# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="Qwen/Qwen2.5-7B-Instruct",pp_rank="0",tp_rank="0"} 7.0
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="Qwen/Qwen2.5-7B-Instruct",pp_rank="0",tp_rank="0"} 2.0
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="Qwen/Qwen2.5-7B-Instruct",pp_rank="0",tp_rank="0"} 0.31
"""


def test_vllm_running_plus_waiting_summed_over_its_models():
    assert engine_load(VLLM_TEXT, VLLM) == 3 + 1 + 5 + 0


def test_sglang_running_plus_queued():
    assert engine_load(SGLANG_TEXT, SGLANG) == 7 + 2
    assert engine_load(SGLANG_TEXT, VLLM) is None  # an SGLang text has no vLLM gauge


@pytest.mark.parametrize(
    "line, expected",
    [
        (b"vllm:num_requests_running 2", 2),  # no labels
        (b"vllm:num_requests_running{} 2", 2),  # empty labels
        (b"  vllm:num_requests_running\t2 1700000000000", 2),  # blanks, a tab, a timestamp
        (b'vllm:num_requests_running{model_name="a \\"quoted\\" }, name"} 2', 2),  # a brace and comma quoted
        (b'vllm:num_requests_running{model_name="a",} 2e0', 2),  # a trailing comma, an exponent
        (b"vllm:num_requests_running 2\r", 2),  # a CRLF line end
    ],
)
def test_the_sample_forms_of_the_text_format(line, expected):
    text = line + b"\nvllm:num_requests_waiting 0\n"
    assert engine_load(text, VLLM) == expected


def test_only_the_two_gauges_are_read():
    """A family whose name extends a gauge's, a comment naming it, and a sample without its line end
    at the end of the text: only the gauges' own lines count."""
    text = (
        b"vllm:num_requests_running_total 100\n"
        b"# vllm:num_requests_running 50\n"
        b"xvllm:num_requests_running 25\n"
        b"vllm:num_requests_running 1\n"
        b"vllm:num_requests_waiting 2"
    )
    assert engine_load(text, VLLM) == 3


@pytest.mark.parametrize(
    "text, why",
    [
        (b"vllm:num_requests_running 1\n", "no waiting gauge"),
        (b"", "empty"),
        (b"vllm:num_requests_running NaN\nvllm:num_requests_waiting 1\n", "NaN"),
        (b"vllm:num_requests_running +Inf\nvllm:num_requests_waiting 1\n", "infinite"),
        (b"vllm:num_requests_running -1\nvllm:num_requests_waiting 1\n", "negative"),
        (b"vllm:num_requests_running 1.5\nvllm:num_requests_waiting 1\n", "not whole"),
        (b"vllm:num_requests_running one\nvllm:num_requests_waiting 1\n", "not a number"),
        (b'vllm:num_requests_running{model_name="a} 1\nvllm:num_requests_waiting 1\n', "an open quote"),
        (b"vllm:num_requests_running{model_name=a} 1\nvllm:num_requests_waiting 1\n", "an unquoted label"),
        (b"vllm:num_requests_running {\nvllm:num_requests_waiting 1\n", "a bare brace"),
        (b"vllm:num_requests_running 1 2 3\nvllm:num_requests_waiting 1\n", "two timestamps"),
        (b"\xff\xfe<html>vllm:num_requests_running</html>", "not a metrics text"),
        (b"vllm:num_requests_runningx" * 1000 + b" vllm:num_requests_waiting 1", "the names inside a line"),
        (f"vllm:num_requests_running {MAX_REPORT}\nvllm:num_requests_waiting 1\n".encode(), "beyond 10^9"),
    ],
)
def test_malformed_texts_are_no_report(text, why):
    assert engine_load(text, VLLM) is None, why


def test_a_configured_engine_reads_its_own_names():
    tgi = EngineMetrics("/metrics", "tgi_batch_current_size", "tgi_queue_size")
    text = b"# TYPE tgi_queue_size gauge\ntgi_queue_size 4\ntgi_batch_current_size 6\n"
    assert engine_load(text, tgi) == 10


def test_a_real_sized_text_is_read():
    """~100 KB of other families around the gauges (a vLLM answer's size)."""
    other = b"".join(
        b'vllm:request_prompt_tokens_bucket{engine="0",le="%d",model_name="m"} %d.0\n' % (b, b) for b in range(3000)
    )
    assert len(other) > 100_000
    assert engine_load(other + VLLM_TEXT + other, VLLM) == 9


# --- ORCA ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "header, expected",
    [
        ("TEXT named_metrics.num_requests_running=4, named_metrics.num_requests_waiting=2", 6),
        ("TEXT cpu_utilization=0.5, named_metrics.num_requests_waiting=2.0,named_metrics.num_requests_running=4.0", 6),
        ("TEXT named_metrics.kv_cache_usage_perc=0.4, named_metrics.num_requests_waiting=1.0", None),  # vLLM's today
        ('JSON {"named_metrics": {"num_requests_running": 3, "num_requests_waiting": 0}}', 3),
        (
            'JSON {"cpu_utilization": 0.2, "named_metrics": {"num_requests_running": 3.0, "num_requests_waiting": 1.0}}',
            4,
        ),
        ('JSON {"named_metrics": {"num_requests_running": "3", "num_requests_waiting": null}}', None),
        ("JSON {not json", None),
        ('JSON ["named_metrics"]', None),
        ("BIN CgQIARAC", None),  # the base64 protobuf: not read
        ("TEXT named_metrics.num_requests_running=NaN, named_metrics.num_requests_waiting=1", None),
        ("TEXT named_metrics.num_requests_running=-2, named_metrics.num_requests_waiting=1", None),
        ("", None),
    ],
)
def test_the_orca_header(header, expected):
    assert orca_load(header) == expected


ORCA_6 = "TEXT named_metrics.num_requests_running=4, named_metrics.num_requests_waiting=2"


@pytest.mark.parametrize(
    "headers, report",
    [
        ({"X-Queue-Length": "3"}, (3, 1)),  # the number after this request left
        ({"X-Queue-Length": "3", "endpoint-load-metrics": ORCA_6}, (3, 1)),  # X-Queue-Length first
        ({"X-Queue-Length": "x", "endpoint-load-metrics": ORCA_6}, (6, 1)),  # then ORCA
        ({"endpoint-load-metrics": ORCA_6, "Content-Type": "application/json"}, (6, 1)),  # a whole answer: left
        ({"endpoint-load-metrics": ORCA_6, "Content-Type": "text/event-stream; charset=utf-8"}, (6, 0)),  # streaming
        ({"endpoint-load-metrics": "TEXT cpu_utilization=0.5"}, None),
        ({}, None),
    ],
)
def test_a_piggybacked_report_and_the_own_request_it_no_longer_counts(headers, report):
    assert piggybacked_report(headers) == report


# --- the estimate ----------------------------------------------------------------------------------


def dispatcher(signals: str, policy: str = "jsq") -> Dispatcher:
    return Dispatcher(
        ServeConfig.from_mapping({"backends": ["http://127.0.0.1:9001"], "signals": signals, "policy": policy})
    )


@pytest.mark.parametrize(
    "headers, estimate_after",
    [
        ({"endpoint-load-metrics": ORCA_6, "Content-Type": "application/json"}, 6),
        ({"endpoint-load-metrics": ORCA_6, "Content-Type": "text/event-stream"}, 5),
    ],
)
def test_a_report_on_an_answer_counts_the_others_by_what_it_counts(headers, estimate_after):
    """One own request at backend 0 carries a report of 6. A whole answer's report no longer counts
    it: the 6 are others' (estimate 6 once it ends). An event stream's still counts it: 5 others."""
    state = dispatcher("inflight,piggyback")
    lease = state.start(0)
    number, own_left = piggybacked_report(headers)
    state.report(0, number, own_left=own_left)
    assert state.estimate[0] == 1 + estimate_after  # its own request, still in flight, and the others
    lease.release()
    assert state.estimate[0] == estimate_after and state.others[0] == estimate_after


def test_a_scrape_combines_with_the_own_requests():
    """A scrape reports n while the dispatcher holds k requests there: estimate k + max(0, n - k)."""
    state = dispatcher("inflight,metrics:vllm:tau=50ms")
    leases = [state.start(0), state.start(0)]
    state.report(0, engine_load(VLLM_TEXT, VLLM))  # 9 in system, 2 of them its own
    assert (state.others[0], state.estimate[0]) == (7, 9)
    state.report(0, 1)  # fewer than its own (two on the wire): the others are 0
    assert (state.others[0], state.estimate[0]) == (0, 2)
    for lease in leases:
        lease.release()
    assert state.estimate[0] == 0


def test_without_inflight_the_estimate_is_the_scraped_number():
    state = dispatcher("metrics:sglang")
    state.start(0)
    state.report(0, engine_load(SGLANG_TEXT, SGLANG))
    assert state.estimate[0] == 9
