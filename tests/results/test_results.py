"""Result objects: JSON round trip, histogram quantiles, the progress bar; the names of a result's
figures in Python and JSON, its repr, and its one-row table against a sweep's."""

import io
import json
import re

import numpy as np
import pytest
from scipy import stats

import hetlb
from hetlb.experiments import SweepSpec, sweep
from hetlb.kernels.continuous import HISTOGRAM_BINS_PER_OCTAVE, HISTOGRAM_MIN_EXPONENT, HISTOGRAM_OCTAVES
from hetlb.progress import ProgressBar
from hetlb.results import response_time_quantile
from hetlb.results.base import finite_or_null, json_default
from hetlb.scenario import Scenario
from hetlb.theory import speed_lower_bound_arrays


def test_json_is_strict_and_complete():
    system = hetlb.System.from_speeds([1.0], arrival_rate=0.2, buffer=2)
    result = hetlb.simulate(system, "jsq", jobs=200, seed=1)
    text = result.to_json()
    data = json.loads(text)  # strict: no NaN tokens
    assert "NaN" not in text and "Infinity" not in text
    assert data["metadata"]["system"]["buffer"] == 2
    assert data["metadata"]["stopping"] == {"jobs": 200, "horizon": None, "warmup": 0.0}
    assert len(data["runs"][0]["utilisation"]) == 1


def test_histogram_quantile_recovers_a_known_distribution():
    """Bin an exponential sample the way the kernel does; quantiles agree within the bin width."""
    rng = np.random.default_rng(0)
    sample = rng.exponential(2.0, 200_000)
    mantissa, exponent = np.frexp(sample)
    bins = (exponent - HISTOGRAM_MIN_EXPONENT) * HISTOGRAM_BINS_PER_OCTAVE + (
        (mantissa - 0.5) * 2 * HISTOGRAM_BINS_PER_OCTAVE
    ).astype(int)
    histogram = np.bincount(bins, minlength=HISTOGRAM_OCTAVES * HISTOGRAM_BINS_PER_OCTAVE)
    for q in (0.5, 0.95, 0.99):
        exact = np.quantile(sample, q)
        assert abs(response_time_quantile(histogram, q) - exact) <= exact / HISTOGRAM_BINS_PER_OCTAVE


def test_progress_bar_draws_and_closes():
    stream = io.StringIO()
    bar = ProgressBar("jsq ", stream=stream)
    bar.update(0.5, 2_000_000, force=True)
    bar.close()
    text = stream.getvalue()
    assert "50.0%" in text and "2.00M events" in text and text.endswith("\n")
    silent = io.StringIO()
    ProgressBar(stream=silent, enabled=False).update(0.5, 1, force=True)
    assert silent.getvalue() == ""


# ------------------------------------------------------------------------------------------------
# one name for one thing: the summary's keys are the result's attributes, in JSON and in Python


def same(a, b) -> bool:
    """Equal as JSON (nan and None alike, numpy values as numbers)."""
    return json.dumps(finite_or_null(a), default=json_default) == json.dumps(finite_or_null(b), default=json_default)


@pytest.fixture(scope="module")
def continuous_results():
    system = hetlb.System.from_speeds([2.0, 1.0, 1.0], load=0.7, buffer=4)
    return {
        replications: hetlb.simulate(system, "jsq", jobs=3000, seed=4, replications=replications)
        for replications in (1, 3)
    }


@pytest.fixture(scope="module")
def slotted_result():
    system = hetlb.SlottedSystem.from_speeds([1.0] * 4 + [0.5] * 4, dispatchers=3, load=0.6)
    return hetlb.simulate_slotted(system, "l-jsq", slots=3000, seed=2, replications=2, preference=True, p_hat=0.5)


@pytest.mark.parametrize("replications", [1, 3])
def test_every_summary_key_is_an_attribute_with_the_same_value(continuous_results, replications):
    result = continuous_results[replications]
    data = json.loads(result.to_json())
    assert set(data) - {"metadata", "runs"} == set(result.summary)
    for key, value in result.summary.items():
        assert same(getattr(result, key), value), key
        assert same(data[key], value), key
    for p in (50, 95, 99):
        name = f"response_time_p{p}"
        assert same(getattr(result.runs[0], name), data["runs"][0][name])
    assert result.mean_waiting_time_ci == (
        result.runs[0].mean_waiting_time_ci if replications == 1 else data["mean_waiting_time_ci"]
    )
    assert not hasattr(result, "response_time_percentiles")
    assert not hasattr(result.runs[0], "response_time_percentiles")


@pytest.mark.parametrize("name", ["p_wait", "response_time_p50", "response_time_p99"])
def test_figures_of_replications_are_means_with_t_intervals(continuous_results, name):
    """p_wait_ci and the percentiles' intervals: Student-t over the replications, computed here."""
    result = continuous_results[3]
    values = np.array([getattr(run, name) for run in result.runs])
    half = stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
    assert getattr(result, name) == pytest.approx(values.mean(), rel=1e-14)
    assert np.allclose(getattr(result, name + "_ci"), [values.mean() - half, values.mean() + half], rtol=1e-12)
    assert json.loads(result.to_json())[name + "_ci"] == pytest.approx(getattr(result, name + "_ci"), rel=1e-15)
    single = continuous_results[1]  # one run keeps no batch counts of waiting jobs nor batch quantiles
    assert getattr(single, name + "_ci") is None and name + "_ci" not in json.loads(single.to_json())
    assert getattr(single, name) == json.loads(single.to_json())["runs"][0][name]


def test_slotted_summary_keys_are_attributes_and_dispatchers_has_one_name(slotted_result):
    result = slotted_result
    data = json.loads(result.to_json())
    assert set(result.summary) <= set(data)
    assert {"preference_tilted", "number_in_system_growth_ci", "messages_per_decision_ci"} <= set(result.summary)
    for key, value in result.summary.items():
        assert same(getattr(result, key), value), key
        assert same(data[key], value), key
    system = data["metadata"]["system"]
    assert system["dispatchers"] == 3 and "n_dispatchers" not in system
    scenario = Scenario.from_mapping(
        {"system": {"model": "slotted", "speeds": "4x1,4x0.5", "load": 0.6, "dispatchers": 3}, "policy": {"id": "jsq"}}
    )
    assert scenario.system.dispatchers == 3 and len(scenario.system.dispatcher_share) == 3
    with pytest.raises(TypeError):
        hetlb.SlottedSystem.from_speeds([1.0], n_dispatchers=2, load=0.5)


def integers_are_ints(value, path=""):
    """Paths of the whole numbers in ``value`` that are not plain ints (floats such as 44.0, numpy ints)."""
    if isinstance(value, dict):
        return [bad for key, item in value.items() for bad in integers_are_ints(item, f"{path}.{key}")]
    if isinstance(value, (list, tuple)):
        return [bad for i, item in enumerate(value) for bad in integers_are_ints(item, f"{path}[{i}]")]
    if isinstance(value, (np.integer, np.floating)):
        return [path]
    return []


COUNT_KEYS = ("slots", "arrivals", "departures", "decisions", "slots_run", "events", "replications")


def test_slotted_counts_are_ints_and_the_repr_has_no_long_floats(slotted_result):
    result = slotted_result
    data = result.to_dict(per_server=False)
    assert integers_are_ints({k: v for k, v in data.items() if k != "preference"}) == []
    run = data["runs"][0]
    for key in COUNT_KEYS:
        if key in run:
            assert type(run[key]) is int, key
    assert all(type(count) is int for count in [*run["messages"].values(), *run["counters"].values()])
    assert all(type(count) is int for count in result.messages.values())
    assert type(data["replications"]) is int and type(data["metadata"]["stopping"]["slots"]) is int
    for text in (repr(result), repr(result.runs[0])):
        digits = [len(number.replace(".", "").lstrip("-0")) for number in re.findall(r"-?\d+\.\d+", text)]
        assert digits and max(digits) <= 6, text


def test_repr_is_one_short_line(continuous_results, slotted_result):
    result = continuous_results[3]
    text = repr(result)
    low, high = result.mean_response_time_ci
    assert "\n" not in text and len(text) < 160
    assert text.startswith("<SimulationResult jsq, 3 servers, load 0.7: mean response time ")
    assert f"{result.mean_response_time:.5g} [{low:.5g}, {high:.5g}] (95% CI), 3 replications>" in text
    assert repr(continuous_results[1]).endswith(", 1 replication>")
    text = repr(slotted_result)
    assert "\n" not in text and len(text) < 160
    assert text.startswith("<SlottedResult l-jsq, 8 servers, 3 dispatchers, load 0.6: mean delay (slots) ")
    assert text.endswith(", 2 replications>")
    assert "\n" not in repr(result.runs[0]) and len(repr(result.runs[0])) < 120


# ------------------------------------------------------------------------------------------------
# a result as a one-row table: the columns and the numbers of a sweep's summary row


def sweep_and_the_same_runs(base, axes, replications=2):
    """A sweep of one point, and a result of its very runs (the sweep's seeds) built from the scenario."""
    spec = SweepSpec(base=base, axes=axes, replications=replications, seed=9)
    swept = sweep(spec, executor="serial", store=None)
    units = spec.units()
    results = [Scenario.from_mapping(unit.scenario).simulate(seed=unit.seed) for unit in units]
    return swept, type(results[0])([r.runs[0] for r in results], results[0].metadata)


@pytest.mark.parametrize("replications", [1, 2])
def test_to_frame_is_a_sweeps_summary_row(replications):
    base = {"system": {"speeds": "2x2.0,3x1.0", "load": 0.6}, "policy": {"id": "pod", "d": 2}, "run": {"jobs": 2000}}
    swept, result = sweep_and_the_same_runs(base, {"system.load": [0.75]}, replications)
    frame = result.to_frame()
    row = swept.summary.drop(columns=["point", "system.load"])
    assert len(frame) == 1
    assert list(frame.columns) == ["policy.id", "policy.d", "system.n_servers", "system.load", *row.columns]
    assert frame[row.columns].equals(row)
    assert frame.loc[0, "policy.id"] == "pod" and frame.loc[0, "policy.d"] == 2
    assert frame.loc[0, "system.n_servers"] == 5 and frame.loc[0, "system.load"] == 0.75
    assert frame.loc[0, "replications"] == replications
    # against numbers computed here: the mean over the runs and the bound of Proposition 1 (000)
    assert frame.loc[0, "mean_response_time"] == pytest.approx(np.mean([r.mean_response_time for r in result.runs]))
    bound = speed_lower_bound_arrays([2.0, 2.0, 1.0, 1.0, 1.0], 0.75 * 7.0).lower_bound
    assert frame.loc[0, "speed_lower_bound"] == pytest.approx(bound, rel=1e-12)


def test_slotted_to_frame_is_a_sweeps_summary_row():
    base = {
        "system": {"model": "slotted", "speeds": "3x1,3x0.5", "load": 0.5, "dispatchers": 2},
        "policy": {"id": "jsq"},
        "run": {"slots": 2000},
    }
    swept, result = sweep_and_the_same_runs(base, {"system.dispatchers": [2]})
    frame = result.to_frame()
    row = swept.summary.drop(columns=["point", "system.dispatchers"])
    assert list(frame.columns) == ["policy.id", "system.n_servers", "system.dispatchers", "system.load", *row.columns]
    assert frame[row.columns].equals(row)
    assert frame.loc[0, "mean_delay"] == pytest.approx(np.mean([r.mean_delay for r in result.runs]))


def test_the_table_of_t_quantiles_is_scipys():
    from scipy.special import stdtrit

    from hetlb.stats.intervals import CONFIDENCE, T_975, t_quantile

    assert 0.5 + CONFIDENCE / 2.0 == 0.975  # the intervals look the table up
    assert list(T_975) == [float(stdtrit(df, 0.975)) for df in range(1, len(T_975) + 1)]
    assert t_quantile(len(T_975) + 1, 0.975) == float(stdtrit(len(T_975) + 1, 0.975))


# ------------------------------------------------------------------------------------------------
# the result family: every member keeps the contract of hetlb.results.base.Result


def load_result():
    """A LoadResult of 40 answered requests (10 ms each, backends' 8 ms) and 2 blocked ones, made
    from the generator's measurements without a network."""
    from array import array

    from hetlb.load.open_loop import LoadSpec, Measurements

    spec = LoadSpec(targets=("http://127.0.0.1:1",), rate=10.0, duration=4.0, batches=4, seed=3)
    measured = Measurements(spec, window=4.0, measured=42, sent=42, blocked=2)
    measured.send_offset = array("d", [0.1 * i for i in range(40)])
    measured.response_time = array("d", [0.010] * 40)
    measured.sojourn = array("d", [8.0] * 40)
    measured.send_lag = array("d", [0.0] * 42)
    measured.backends["b"] = 40
    return measured.result()


def inference_load_result():
    """An InferenceLoadResult of 20 complete streams of 5 tokens (TTFT 50 ms, gaps 12.5 ms, e2e 100
    ms; half of model a on backend x, half of model b on y) and one 503, made from the generator's
    measurements without a network."""
    from collections import Counter

    from hetlb.load.inference import ChatRequest, InferenceLoadSpec, StreamAnswer, StreamMeasurements
    from hetlb.stats.histogram import bin_of

    spec = InferenceLoadSpec(("http://127.0.0.1:1",), 5.0, 4.0, batches=4, models={"a": 1, "b": 1})
    measured = StreamMeasurements(spec, window=4.0)
    for i in range(21):
        model, backend = ("a", "x") if i % 2 else ("b", "y")
        request = ChatRequest(model, 10, 5, i)
        answer = StreamAnswer("ok", backend, 0.05, 0.1, 0.05, 4, Counter({bin_of(0.0125): 4}), 5, 10)
        measured.count_measured("http://127.0.0.1:1", 0.0)
        measured.record(answer if i < 20 else StreamAnswer("blocked", backend), "http://127.0.0.1:1", request, 0.2 * i)
    return measured.result()


def made_testbed(tmp_path):
    """A testbed's result with three hetlb runs recorded by hand, two of them agreeing."""
    from hetlb.testbed import Testbed, TestbedScenario

    bed = TestbedScenario.from_mapping(
        {"system": {"speeds": "2x1,2x0.25"}, "testbed": {"loads": [0.5], "policies": ["jsq", "jfsq", "sed"]}}
    )
    testbed = Testbed(bed, tmp_path)
    for policy, live, agrees in (("jsq", 10.0, True), ("jfsq", 9.0, True), ("sed", 30.0, False)):
        testbed.rows.append(
            {
                "balancer": "hetlb",
                "policy": policy,
                "load": 0.5,
                "live_minus_overhead_ms": live,
                "agrees": agrees,
                "sim_run_mean_ms": live,
                "sim_run_low_ms": live - 1.0,
                "sim_run_high_ms": live + 1.0,
            }  # fmt: skip
        )
    return testbed


@pytest.fixture(scope="module")
def family(continuous_results, slotted_result, tmp_path_factory):
    """One of every member of the result family."""
    from hetlb.simulation.bounding import simulate_bounding_system_arrays

    dispatchers = hetlb.simulate(
        hetlb.System.from_speeds([1.0, 1.0, 0.5, 0.5], load=0.6), "l-jsq", jobs=2000, dispatchers=2, seed=1
    )
    bounding = simulate_bounding_system_arrays(
        np.linspace(0.7, 1.3, 20), 20 - np.sqrt(20), kind="ssl", buffer=3, horizon=100.0, warmup=10.0, replications=3
    )
    continuous = continuous_results[3]
    members = [continuous, continuous.runs[0], slotted_result, slotted_result.runs[0], dispatchers]
    members += [dispatchers.runs[0], bounding, load_result(), inference_load_result()]
    members += [made_testbed(tmp_path_factory.mktemp("testbed"))]
    return {type(member).__name__: member for member in members}


FAMILY = (
    "SimulationResult",
    "RunResult",
    "SlottedResult",
    "SlottedRunResult",
    "DispatchersResult",
    "DispatcherRunResult",
    "BoundingResult",
    "LoadResult",
    "InferenceLoadResult",
    "Testbed",
)


@pytest.mark.parametrize("name", FAMILY)
def test_every_result_keeps_the_familys_contract(family, name):
    import pandas as pd

    from hetlb.results import Result

    result = family[name]
    assert isinstance(result, Result)
    data = result.to_dict()
    text = result.to_json()
    assert "NaN" not in text and "Infinity" not in text
    assert same(json.loads(text), data)  # to_dict round-trips through JSON
    assert json.loads(text) == json.loads(json.dumps(json.loads(text)))
    assert isinstance(result.metadata, dict) and json.dumps(finite_or_null(result.metadata), default=json_default)
    assert set(result.summary) <= set(data)  # the summary: the headline entries of to_dict, same values
    for key, value in result.summary.items():
        assert same(data[key], value), key
    seed = data.get("seed", data.get("metadata", {}).get("seed"))  # a replication's metadata is its seed
    assert name in ("Testbed", "LoadResult", "InferenceLoadResult") or seed is not None
    text = repr(result)
    assert text.startswith(f"<{name} ") and text.endswith(">") and "\n" not in text and len(text) < 160, text
    frame = result.to_frame()
    assert isinstance(frame, pd.DataFrame) and len(frame) >= 1


@pytest.mark.parametrize("name", [name for name in FAMILY if name not in ("Testbed",)])
def test_a_results_frame_holds_its_headline_figure(family, name):
    """One row; the column of the figure the repr shows has the value the summary gives."""
    import pandas as pd

    result = family[name]
    frame = result.to_frame()
    label, value, ci = result.headline()
    assert len(frame) == 1
    numbers = [column for column in frame.columns if pd.api.types.is_numeric_dtype(frame[column])]
    matches = [column for column in numbers if np.isclose(frame.loc[0, column], value)]
    assert matches, (label, value)
    if ci is not None and name not in ("SimulationResult", "SlottedResult", "DispatchersResult"):
        assert any(np.isclose(frame.loc[0, column], ci[0]) for column in frame.columns if column.endswith("_ci_low"))


def test_the_load_result_is_the_mapping_it_was_with_metadata():
    result = load_result()
    assert isinstance(result, dict) and json.loads(json.dumps(result)) == dict(result)  # dumps as before
    assert result["requests"] == 42 and result["answered"] == 40 and result["blocked"] == 2
    assert result["mean_response_time"] == pytest.approx(10.0) and result["mean_overhead"] == pytest.approx(2.0)
    assert result["blocking_probability"] == pytest.approx(2 / 42)
    assert result.metadata["load"]["rate"] == 10.0 and result.metadata["load"]["targets"] == ("http://127.0.0.1:1",)
    assert result.to_dict() == {**result, "metadata": result.metadata}
    assert repr(result).startswith("<LoadResult 1 target at 10/s: mean response time (ms) 10 ")


def test_the_inference_load_result_has_the_figures_of_its_streams():
    """Every figure of the hand-made streams, overall and per group, from their definitions."""
    result = inference_load_result()
    assert (result["requests"], result["answered"], result["blocked"], result["errors"]) == (21, 20, 1, 0)
    for figures in (result, result["per_model"]["a"], result["per_backend"]["y"]):
        assert figures["mean_ttft"] == pytest.approx(50.0) and figures["ttft_p99"] == pytest.approx(50.0)
        assert figures["mean_e2e"] == pytest.approx(100.0) and figures["mean_tbt"] == pytest.approx(12.5)
        assert figures["tbt_p50"] == pytest.approx(12.5, rel=0.005)  # the histogram's bin, within 0.5%
    assert result["output_tokens"] == 100 and result["output_tokens_per_s"] == 25.0 and result["prompt_tokens"] == 200
    assert result["per_model"]["a"]["requests"] == 10 and result["per_model"]["b"]["blocked"] == 1
    assert result["per_backend"]["x"]["output_tokens"] == 50 and result["per_backend"]["y"]["requests"] == 11
    assert result["blocking_probability"] == pytest.approx(1 / 21)
    assert repr(result).startswith("<InferenceLoadResult 2 models at 5/s: mean time to first token (ms) 50 ")


def test_the_testbeds_result_counts_the_runs_that_agree(tmp_path):
    testbed = made_testbed(tmp_path)
    assert (testbed.summary["compared"], testbed.summary["agreeing"]) == (3, 2)
    assert list(testbed.to_frame()["policy"]) == ["jsq", "jfsq", "sed"]
    assert testbed.to_dict()["order"]["0.5"]["live"] == ["jfsq", "jsq", "sed"]
    assert (
        repr(testbed)
        == "<Testbed 3 policies, 0 balancers, 1 loads: agreeing with the simulation 2, 3 of 3 runs compared>"
    )


def test_the_bounding_result_lives_with_the_results_and_keeps_its_estimates(family):
    from hetlb.results.bounding import BoundingResult, Estimate
    from hetlb.simulation import bounding

    result = family["BoundingResult"]
    assert bounding.BoundingResult is BoundingResult and isinstance(result.estimates["X_+1"], Estimate)
    values = result.replication_values[:, bounding.MEASURES.index("Q_+1")]
    assert result.summary["Q_+1"] == pytest.approx(values.mean(), rel=1e-12)
    low, high = result.summary["Q_+1_ci"]
    half = stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
    assert (low, high) == pytest.approx((values.mean() - half, values.mean() + half), rel=1e-9)
    assert result.to_dict()["metadata"]["system"]["kind"] == "ssl" and result.metadata["seed"] == 0


def test_the_versions_are_those_importlib_metadata_reads():
    from importlib.metadata import version

    from hetlb.results.base import installed_version, versions

    for name in ("numba", "scipy", "numpy"):
        assert installed_version(name) == version(name)
    assert versions()["numba"] == version("numba") and versions()["scipy"] == version("scipy")


def test_no_warm_up_warns_of_a_gap_the_intervals_would_hide():
    system = hetlb.System.from_speeds([1.0] * 20 + [0.1] * 20, load=0.8)
    run = dict(dispatchers=5, update="piggyback,push:p_hat=0.1:d=2", jobs=20_000, seed=1)
    cold = hetlb.simulate(system, "l-jsq", **run)
    gap, spread = cold.littles_law_gap, abs(cold.mean_response_time_ci[1] / cold.mean_response_time - 1)
    assert abs(gap) > 0.05  # L = lambda W holds in steady state: the gap is the empty start's bias
    assert any("no warm-up" in warning for warning in cold.warnings) == (abs(gap) <= spread)
    assert any("warm-up" in warning for warning in cold.warnings)
    assert repr(cold).endswith(
        f"1 replication; {len(cold.warnings)} warning{'s' * (len(cold.warnings) > 1)}: see .warnings>"
    )
