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
from hetlb.results.run import finite_or_null, json_default
from hetlb.scenario import Scenario
from hetlb.theory import speed_lower_bound


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
    bound = speed_lower_bound([2.0, 2.0, 1.0, 1.0, 1.0], 0.75 * 7.0).lower_bound
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
