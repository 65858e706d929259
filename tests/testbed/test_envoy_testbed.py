"""The testbed's ``gateway = "envoy"``: the inference scenario of examples/testbed-inference.toml,
cut to jfsq and 1 s measured, through Envoy with a hetlb pick, lies in the simulator's prediction
interval; Envoy alone (LEAST_REQUEST and ROUND_ROBIN, one cluster per model chosen by a header)
runs on the same backends and traffic. No request errs (an engine answers 404 to a model it does
not hold: 0 errors is 0 misrouted), and every process is stopped."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from support.envoy import envoy_missing
from support.serve_processes import leftover_processes

pytest.importorskip("grpc", reason="grpcio (the [pick] extra) is not installed")
pytest.importorskip("envoy.service.ext_proc.v3.external_processor_pb2", reason="xds-protos (the [pick] extra)")

from hetlb import testbed as testbed_module  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "testbed-inference.toml"


@pytest.mark.skipif(envoy_missing() is not None, reason=str(envoy_missing()))
def test_the_inference_scenario_through_envoy_and_pickers_is_predicted(tmp_path):
    data = tomllib.loads(EXAMPLE.read_text())
    data["testbed"] |= {"policies": ["jfsq"], "compare": ["envoy"], "gateway": "envoy"}
    data["testbed"] |= {"warmup": 0.3, "duration": 1.0, "prediction_runs": 40}
    data["run"] = {"jobs": 20_000, "replications": 2, "warmup": 100.0}
    bed = testbed_module.run_testbed_mapping(data, tmp_path, say=lambda _: None)
    assert [row["balancer"] for row in bed.rows] == ["hetlb", "envoy-least_request", "envoy-round_robin"]
    assert bed.rows[0]["policy"] == "jfsq via Envoy+pick"
    for detail in bed.details:
        live = detail["live"]
        assert live["errors"] == 0 and live["answered"] == live["requests"] > 20, detail["row"]["balancer"]
        assert live["output_tokens"] >= live["answered"]
    (jfsq,) = [row for row in bed.rows if row["balancer"] == "hetlb"]
    assert jfsq["agrees"], jfsq
    (picker,) = [status for detail in bed.details for status in detail["dispatchers"] if status]
    assert picker["requests"] >= jfsq_requests(bed) and picker["accounting_violations"] == 0
    assert leftover_processes(" pick --listen") == [] and leftover_processes("--disable-hot-restart") == []


def jfsq_requests(bed) -> int:
    (detail,) = [detail for detail in bed.details if detail["row"]["balancer"] == "hetlb"]
    return detail["live"]["requests"]


@pytest.mark.parametrize(
    "gateway, message",
    [
        ("nginx", "testbed.gateway: must be one of hetlb, envoy, got 'nginx'"),
        ([], "testbed.gateway: give one or more of hetlb, envoy"),
        (["envoy", "envoy"], "testbed.gateway: a gateway is listed twice"),
    ],
)
def test_bad_gateways_are_one_line_errors(gateway, message):
    from hetlb.errors import InputError

    data = tomllib.loads(EXAMPLE.read_text())
    data["testbed"]["gateway"] = gateway
    with pytest.raises(InputError) as error:
        testbed_module.TestbedScenario.from_mapping(data)
    assert str(error.value) == message


def test_the_envoy_examples_run_each_policy_through_the_gateways_they_name():
    examples = EXAMPLE.parent
    one = testbed_module.TestbedScenario.from_toml(examples / "testbed-envoy.toml")
    four = testbed_module.TestbedScenario.from_toml(examples / "testbed-envoy-gateways.toml")
    assert one.gateways == ("envoy", "hetlb") and one.compare == ["envoy", "haproxy", "nginx"]
    assert four.gateways == ("envoy",) and four.dispatchers == 4
