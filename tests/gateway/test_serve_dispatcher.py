"""The live dispatcher's state and decisions, without a network: its decisions are the registered
rules (frequencies on a frozen estimate against hetlb.policies.exact_rules), its estimate combines
the signals as docs/reference/serve.md says, its in-flight counts are released exactly once, and
ejection removes a backend from every candidate set."""

import re
import tomllib
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from hetlb.gateway.answers import AnswerWatch
from hetlb.gateway.config import CONFIG_KEYS, LIVE_POLICIES, ServeConfig
from hetlb.gateway.dispatcher import NO_BACKEND, Dispatcher
from hetlb.gateway.http.proxy import lags, service_time
from hetlb.gateway.metrics import Metrics
from hetlb.policies.registry import POLICIES

SPEEDS = [2.0, 2.0, 1.0, 1.0, 0.5, 0.25]
FROZEN_ESTIMATES = [
    [0, 1, 0, 2, 0, 1],  # idle servers of several speeds
    [3, 1, 1, 2, 4, 1],  # none idle, ties among the shortest of several speeds
]
DRAWS = 4000
FAMILY_ALPHA = 1e-3


def config_of(policy: str, signals: str | None = None, speeds=SPEEDS, **keys) -> ServeConfig:
    data = {
        "backends": [f"http://127.0.0.1:{20000 + i},speed={speed}" for i, speed in enumerate(speeds)],
        "policy": policy,
        **keys,
    }
    if signals is not None:
        data["signals"] = signals
    elif POLICIES[policy if isinstance(policy, str) else policy["id"]].on_local_estimates:
        data["signals"] = "piggyback"
    return ServeConfig.from_mapping(data)


def test_the_live_policies_are_the_fifteen_of_the_registry():
    assert set(LIVE_POLICIES) == {
        "random", "weighted-random", "jsq", "jfsq", "jssq", "jiq", "jfiq", "pod", "sed", "jsq-fiq", "jlu", "lew",
        "l-jsq", "l-jba", "l-pod",
    }  # fmt: skip


@pytest.mark.parametrize("policy", LIVE_POLICIES)
def test_routing_frequencies_on_a_frozen_estimate_are_the_exact_rule(policy):
    dispatcher = Dispatcher(config_of(policy), seed=7)
    rule = POLICIES[policy].rule_on_estimates
    speed = np.array(SPEEDS)
    comparisons = len(LIVE_POLICIES) * len(FROZEN_ESTIMATES)
    for frozen in FROZEN_ESTIMATES:
        dispatcher.estimate[:] = frozen
        counts = np.bincount([dispatcher.choose(0) for _ in range(DRAWS)], minlength=len(SPEEDS))
        probability = rule(np.array([frozen]), speed, speed == speed.max(), dispatcher.config.policy.params, None)[0]
        assert counts[probability == 0].sum() == 0, f"{policy} chose a server its rule excludes: {counts}"
        support = probability > 0
        if support.sum() > 1:
            p_value = stats.chisquare(counts[support], DRAWS * probability[support]).pvalue
            assert p_value > FAMILY_ALPHA / comparisons, (policy, frozen, counts, probability)


def test_one_dispatcher_with_the_default_signals_knows_the_number_in_system():
    dispatcher = Dispatcher(config_of("jsq"), seed=1)
    leases = [dispatcher.start(s) for s in (0, 0, 1, 3, 3, 3)]
    assert dispatcher.estimate.tolist() == [2, 1, 0, 3, 0, 0]
    leases[0].release()
    # a piggybacked report never exceeds this dispatcher's own requests: it adds nothing
    dispatcher.report(3, 2, own_left=1)
    leases[3].release()
    assert dispatcher.estimate.tolist() == dispatcher.in_flight.tolist() == [1, 1, 0, 2, 0, 0]


def test_reports_give_the_other_dispatchers_requests():
    dispatcher = Dispatcher(config_of("jsq"), seed=1)
    lease = dispatcher.start(2)
    dispatcher.report(2, 5)  # a probe: 5 in system, one of them this dispatcher's
    assert dispatcher.others[2] == 4 and dispatcher.estimate[2] == 5
    lease.release()
    assert dispatcher.estimate[2] == 4  # own requests are known exactly, the others' as reported
    dispatcher.report(2, 0)
    assert dispatcher.estimate[2] == 0


def test_without_inflight_the_estimate_is_the_last_report():
    dispatcher = Dispatcher(config_of("jsq", "poll:tau=100ms"), seed=1)
    dispatcher.start(1)
    assert dispatcher.estimate[1] == 0
    dispatcher.report(1, 3)
    dispatcher.start(1)
    assert dispatcher.estimate[1] == 3


@pytest.mark.parametrize("increment", [False, True])
def test_led_estimates_change_only_by_updates(increment):
    policy = {"id": "l-jsq", "increment_on_dispatch": increment}
    dispatcher = Dispatcher(config_of(policy, "inflight,piggyback,push"), seed=1)
    leases = [dispatcher.start(0) for _ in range(3)]
    assert dispatcher.estimate[0] == (3 if increment else 0)
    leases[0].release()
    assert dispatcher.estimate[0] == (3 if increment else 0)
    dispatcher.report(0, 7, own_left=1)
    assert dispatcher.estimate[0] == 7
    dispatcher.start(0)
    assert dispatcher.estimate[0] == (8 if increment else 7)


def test_a_lease_releases_once_and_counts_never_go_negative():
    dispatcher = Dispatcher(config_of("jsq"), seed=1)
    lease = dispatcher.start(4)
    for _ in range(3):
        lease.release()
    assert dispatcher.in_flight[4] == 0 and dispatcher.estimate[4] == 0
    dispatcher.end(4)  # a release without a lease is refused and counted
    assert dispatcher.in_flight[4] == 0 and dispatcher.accounting_violations == 1


def test_blocking_uses_the_buffer_and_never_the_policy():
    config = ServeConfig.from_mapping(
        {"backends": ["http://127.0.0.1:20001,buffer=2", "http://127.0.0.1:20002,speed=0.5"], "policy": "jfsq"}
    )
    dispatcher = Dispatcher(config, seed=1)
    assert dispatcher.choose(0) == 0
    dispatcher.start(0)
    dispatcher.start(0)
    assert dispatcher.is_full(0) and not dispatcher.is_full(1)
    assert dispatcher.choose(0) == 1  # jfsq: the shorter queue, whatever the buffers


def test_ejection_removes_a_backend_from_every_type_until_readmitted():
    config = ServeConfig.from_mapping(
        {
            "backends": [
                "http://127.0.0.1:20001,types=a|b",
                "http://127.0.0.1:20002,types=a",
                "http://127.0.0.1:20003",
            ],
            "policy": "random",
            "eject_after": 2,
        }
    )
    dispatcher = Dispatcher(config, seed=3)
    a, b = dispatcher.type_index["a"], dispatcher.type_index["b"]
    assert set(dispatcher.choose(b) for _ in range(200)) == {0, 2}
    assert not dispatcher.failed(2)
    assert dispatcher.failed(2)
    assert set(dispatcher.choose(b) for _ in range(200)) == {0}
    assert set(dispatcher.choose(a) for _ in range(200)) == {0, 1}
    dispatcher.set_ejected(0, True)
    assert dispatcher.choose(b) == NO_BACKEND
    dispatcher.set_ejected(2, False)
    assert set(dispatcher.choose(b) for _ in range(200)) == {2}


def test_auto_speed_is_the_inverse_mean_service_time():
    config = ServeConfig.from_mapping(
        {"backends": ["http://127.0.0.1:20001,speed=auto", "http://127.0.0.1:20002,speed=auto"], "policy": "jfsq"}
    )
    dispatcher = Dispatcher(config, seed=1)
    changed = [dispatcher.observe_service(0, seconds) for seconds in [0.01, 0.03] * 5]
    assert changed.index(True) == 4  # from the fifth sample on
    dispatcher.refresh()
    assert dispatcher.speed[0] == 1.0 / 0.02  # the mean of the samples: 20 ms, 50 requests per second
    assert dispatcher.speed[1] == dispatcher.speed[0]  # unmeasured: the mean of the measured


# --- the reference page ---------------------------------------------------------------------------------

SERVE_PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "serve.md"


def test_the_reference_lists_every_key_and_metric_and_its_toml_loads():
    text = SERVE_PAGE.read_text()
    assert not [key for key in CONFIG_KEYS if f"| `{key}` |" not in text]
    dispatcher = Dispatcher(config_of("jsq"), seed=1)
    names = {family.name for family in Metrics(dispatcher).registry.collect()}
    assert names and not [name for name in names if f"`{name}" not in text and f"`{name}_total`" not in text]
    for block in re.findall(r"```toml\n(.*?)```", text, flags=re.S):
        config = ServeConfig.from_mapping(tomllib.loads(block))
        assert config.backends[1].speed is None and config.policy.id == "jfsq"


def test_auto_speed_samples_are_service_times():
    plain = AnswerWatch("application/json", want_tokens=True)
    plain.opened = 10.25  # the answer's headers, 0.25 s after its arrival at 10 s
    assert service_time({"X-Service-Ms": "20", "X-Sojourn-Ms": "50"}, False, plain, 10.0) == 0.02  # any answer
    assert service_time({"X-Sojourn-Ms": "50"}, False, plain, 10.0) is None  # a sojourn behind others: none
    assert service_time({"X-Sojourn-Ms": "50"}, True, plain, 10.0) == 0.05  # found empty: the sojourn
    assert service_time({}, True, plain, 10.0) == 0.25  # found empty, nothing reported: to the headers
    assert service_time({"X-Service-Ms": "x"}, False, plain, 10.0) is None


def test_an_inference_answer_gives_seconds_per_output_token():
    """A stream of 5 tokens, its first at 11 s and its last at 13 s: 0.5 s per token after the
    first; a JSON answer of 4 tokens ending 2 s after its arrival: 0.5 s per token."""
    stream = AnswerWatch("text/event-stream; charset=utf-8", want_tokens=True)
    for chunk in (b'data: {"a": 1}\n', b'\ndata: {"b": 2}\r\n\r', b'\ndata: {"usage": {"completion_tokens": 5}}\n\n'):
        stream.passed(chunk)
    stream.passed(b"data: [DONE]\n\n")
    assert stream.events == 4 and stream.tokens == 5  # terminators split across chunks are found
    stream.first_byte, stream.last_byte = 11.0, 13.0
    assert stream.seconds_per_token(10.0) == 0.5
    assert service_time({}, True, stream, 10.0) == 0.5 and service_time({}, False, stream, 10.0) is None
    whole = AnswerWatch("application/json", want_tokens=True)
    whole.passed(b'{"choices": [], "usage": {"prompt_tokens": 9, ')
    whole.passed(b'"completion_tokens": 4, "total_tokens": 13}}')
    whole.finished()
    whole.last_byte = 12.0
    assert whole.tokens == 4 and whole.events == 0 and whole.seconds_per_token(10.0) == 0.5
    for body in (b"not json", b'{"usage": {"completion_tokens": -1}}', b'{"usage": 3}', b"[1]"):
        broken = AnswerWatch("application/json", want_tokens=True)
        broken.passed(body)
        broken.finished()
        assert broken.tokens is None
    blind = AnswerWatch("text/event-stream", want_tokens=False)
    blind.passed(b'data: {"usage": {"completion_tokens": 5}}\n\n')
    assert blind.events == 1 and blind.tokens is None  # nothing parsed unless speed=auto asks


def test_the_backend_epochs_give_the_forward_delay_and_the_answer_lag():
    """Decided at 100 s, arrived at 100.0004 s (departure 100.0504 s minus a 50 ms sojourn), read at
    100.0514 s: a forward delay of 0.4 ms and an answer lag of 1 ms."""
    headers = {"X-Departure": "100.050400", "X-Sojourn-Ms": "50.000000"}
    forward, answer = lags(headers, decided=100.0, now=100.0514)
    assert forward == pytest.approx(4e-4, abs=1e-9) and answer == pytest.approx(1e-3, abs=1e-9)
    assert lags({"X-Departure": "100.0504"}, 100.0, 100.0514)[0] is None  # no sojourn: no arrival epoch
    assert lags({"X-Sojourn-Ms": "50"}, 100.0, 100.0514) == (None, None)  # no departure: neither
    assert lags({"X-Departure": "junk", "X-Sojourn-Ms": "50"}, 100.0, 100.1) == (None, None)
    assert lags(headers, decided=100.1, now=100.0) == (None, None)  # another clock: negative, not kept
    assert lags(headers, decided=0.0, now=100.0514)[0] is None  # over a minute: another clock
