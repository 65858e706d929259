"""hetlb pick's decisions and configuration without Envoy: the picked endpoint and its fallbacks are
the policy's choices in order (jsq on known counts, checked exactly), the subset restricts them, the
served endpoint's metadata moves the count, ORCA reports (BIN, the protobuf) set the estimate by the
dispatcher's rule, the job type is read by serve's rules, keys of hetlb serve that a picker has no
use for are refused; the Envoy bootstraps pass Envoy's own validation when it is installed."""

from __future__ import annotations

import base64
import json
import subprocess
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("envoy.service.ext_proc.v3.external_processor_pb2", reason="xds-protos (the [pick] extra)")

from multidict import CIMultiDict  # noqa: E402

from hetlb.cli import main  # noqa: E402
from hetlb.errors import InputError  # noqa: E402
from hetlb.gateway.dispatcher import Dispatcher  # noqa: E402
from hetlb.gateway.envoy.bootstrap import envoy_path, picker_bootstrap  # noqa: E402
from hetlb.gateway.envoy.picker import SERVED, Picker, load_pick_config  # noqa: E402
from hetlb.gateway.job_types import Refusal  # noqa: E402
from hetlb.gateway.metrics import Metrics  # noqa: E402
from hetlb.testbed.peers import balancer_bootstrap  # noqa: E402
from hetlb.wire.addresses import Address  # noqa: E402
from hetlb.wire.load_reports import orca_load  # noqa: E402

from support.envoy import envoy_missing  # noqa: E402

URLS = ["http://127.0.0.1:9101", "http://127.0.0.1:9102", "http://127.0.0.1:9103"]


def picker_of(fallbacks: int = 0, signals: str = "inflight", backends_types: bool = False, **keys) -> Picker:
    """A picker on URLS (with ``backends_types``: types a, a|b and b)."""
    backends = (
        [url + types for url, types in zip(URLS, (",types=a", ",types=a|b", ",types=b"))] if backends_types else URLS
    )
    config = load_pick_config(backends=backends, signals=signals, fallbacks=fallbacks, seed=1, **keys)
    dispatcher = Dispatcher(config.serve, 1)
    return Picker(config, dispatcher, Metrics(dispatcher))


def test_the_picked_endpoint_and_fallbacks_are_the_policys_choices_in_order():
    picker = picker_of(fallbacks=2)
    dispatcher = picker.dispatcher
    for s, count in ((0, 2), (2, 1)):  # jsq on counts 2, 0, 1: backends 1, 2, 0 in that order
        for _ in range(count):
            dispatcher.start(s)
    lease, chosen = picker.pick(CIMultiDict({":path": "/x"}), None, None)
    assert chosen == [1, 2, 0] and lease.backend == 1 and dispatcher.in_flight.tolist() == [2, 1, 1]
    message = picker.destination("request_headers", chosen)
    endpoints = "127.0.0.1:9102,127.0.0.1:9103,127.0.0.1:9101"
    assert message.request_headers.response.header_mutation.set_headers[0].header.raw_value == endpoints.encode()
    assert message.dynamic_metadata.fields["envoy.lb"].struct_value.fields[
        "x-gateway-destination-endpoint"
    ].string_value == endpoints  # fmt: skip
    lease, chosen = picker.pick(CIMultiDict({":path": "/x"}), None, ["127.0.0.1:9101", "127.0.0.1:9103"])
    assert chosen == [2, 0]  # the subset only: counts 2 and 1
    for subset in ([], ["127.0.0.1:9999"]):
        refusal = picker.pick(CIMultiDict({":path": "/x"}), None, subset)
        assert isinstance(refusal, Refusal) and refusal.status == 503
    assert dispatcher.requests.tolist() == [2, 1, 2]  # the three set up, the two picks; a refusal counts none


def test_the_served_endpoints_metadata_moves_the_count_and_orca_sets_the_estimate():
    from envoy.config.core.v3.base_pb2 import HeaderMap, HeaderValue, Metadata
    from envoy.service.ext_proc.v3 import external_processor_pb2 as ext_proc
    from google.protobuf.struct_pb2 import Struct
    from xds.data.orca.v3.orca_load_report_pb2 import OrcaLoadReport

    picker = picker_of(signals="inflight,piggyback")
    dispatcher = picker.dispatcher
    lease = dispatcher.start(0)
    report = OrcaLoadReport(named_metrics={"num_requests_running": 3.0, "num_requests_waiting": 2.0})
    orca = "BIN " + base64.b64encode(report.SerializeToString()).decode()
    assert orca_load(orca) == 5 and orca_load("BIN %%%") is None and orca_load("BIN CgQIARAC") is None
    served = Struct()
    served.update({SERVED: "127.0.0.1:9103"})
    metadata = Metadata(filter_metadata={"envoy.lb": served})
    headers = [(":status", "200"), ("content-type", "application/json"), ("endpoint-load-metrics", orca)]
    message = ext_proc.ProcessingRequest(
        response_headers=ext_proc.HttpHeaders(
            headers=HeaderMap(headers=[HeaderValue(key=k, raw_value=v.encode()) for k, v in headers])
        ),
        metadata_context=metadata,
    )
    moved = picker.on_response(lease, message)
    assert moved.backend == 2 and dispatcher.in_flight.tolist() == [0, 0, 1]
    # a whole answer's report excludes its request (own_left 1): others = 5 - (1 - 1), estimate = 1 + 5
    assert int(dispatcher.others[2]) == 5 and int(dispatcher.estimate[2]) == 6
    moved.release()
    assert int(dispatcher.estimate[2]) == 5 and dispatcher.accounting_violations == 0


def test_the_job_type_is_read_by_serves_rules_and_refused_in_envoys_answer():
    """The body's field first, then the type header, then the longest prefix, then the default; a
    refusal is an ImmediateResponse with the OpenAI error serve answers."""
    keys = {"type_prefixes": ["/b/=b"], "default_type": "a", "type_body_field": "model"}
    picker = picker_of(**keys, backends_types=True)
    dispatcher = picker.dispatcher
    index = dispatcher.type_index
    cases = [({"x-job-type": "b", ":path": "/b/x"}, b'{"model": "a"}', "a"), ({"x-job-type": "b"}, None, "b")]
    cases += [({":path": "/b/x"}, None, "b"), ({":path": "/x"}, None, "a"), ({":path": "/b/x"}, b"{}", "b")]
    for headers, body, expected in cases:
        lease, chosen = picker.pick(CIMultiDict(headers), body, None)
        assert dispatcher.backends[chosen[0]].serves(expected) and expected in index
        lease.release()
    refusal = picker.pick(CIMultiDict({":path": "/x"}), b'{"model": "c"}', None)
    assert isinstance(refusal, Refusal) and (refusal.status, refusal.code) == (404, "model_not_found")
    answer = picker.immediate(refusal).immediate_response
    assert answer.status.code == 404 and json.loads(answer.body)["error"]["param"] == "model"
    assert [picker.pick(CIMultiDict({}), body, None).code for body in (b"[1]", b'{"model": 3}')] == [
        "invalid_json",
        "invalid_type",
    ]
    assert dispatcher.accounting_violations == 0 and int(dispatcher.in_flight.sum()) == 0


def test_keys_a_picker_has_no_use_for_are_refused():
    with pytest.raises(InputError, match="timeout: a key of hetlb serve"):
        load_pick_config(backends=URLS, timeout="1s")
    with pytest.raises(InputError, match="backends: an endpoint picker names backends by IP:PORT"):
        load_pick_config(backends=["http://localhost:9101"])
    with pytest.raises(InputError, match="no path"):
        load_pick_config(backends=["http://127.0.0.1:9101/v1"])
    with pytest.raises(InputError, match="fallbacks"):
        load_pick_config(backends=URLS, fallbacks=17)
    assert str(load_pick_config(backends=URLS).serve.listen) == "127.0.0.1:9002"


def test_envoy_config_refuses_bad_flags(capsys):
    assert main(["envoy-config", "--lb", "MAGLEV", "--backend", URLS[0]]) == 2
    assert "lb: must be one of LEAST_REQUEST, ROUND_ROBIN" in capsys.readouterr().err
    assert main(["envoy-config"]) == 2
    assert "picker: give at least one picker" in capsys.readouterr().err


def test_balancer_weights_are_in_proportion_to_the_speeds():
    config = balancer_bootstrap(Address("127.0.0.1", 8080), [(URLS[0], 4.0), (URLS[1], 1.0)], "LEAST_REQUEST")
    (cluster,) = config["static_resources"]["clusters"]  # one pool, every backend
    members = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"]
    assert [member["load_balancing_weight"] for member in members] == [256, 64]


@pytest.mark.skipif(envoy_missing() is not None, reason=str(envoy_missing()))
@pytest.mark.parametrize("kind", ["picker", "picker-body", "least-request", "round-robin"])
def test_the_bootstraps_pass_envoys_validation(kind):
    listen, picker = Address("127.0.0.1", 8080), Address("127.0.0.1", 9002)
    backends = [(URLS[0], 2.0), (URLS[1], 1.0)]
    config = {
        "picker": lambda: picker_bootstrap(listen, [picker], admin=Address("127.0.0.1", 9901)),
        "picker-body": lambda: picker_bootstrap(listen, [picker, Address("127.0.0.1", 9003)], body=True),
        "least-request": lambda: balancer_bootstrap(listen, backends, "LEAST_REQUEST"),
        "round-robin": lambda: balancer_bootstrap(listen, backends, "ROUND_ROBIN"),
    }[kind]()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "envoy.json"
        path.write_text(json.dumps(config))
        command = [envoy_path(), "--mode", "validate", "-c", str(path), "--disable-hot-restart", "-l", "error"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
