"""The run options of the continuous model: one checked object, the same from every entry point."""

import math

import numpy as np
import pytest

import hetlb
from hetlb.errors import InputError
from hetlb.model.dispatchers import Updates
from hetlb.scenario import Scenario


def test_an_options_object_gives_the_result_of_the_keywords():
    system = hetlb.System.from_speeds([2.0, 1.0, 0.5], load=0.7)
    keywords = dict(jobs=3000, warmup=5.0, replications=2, seed=3, batches=10, occupancy_levels=4)
    by_keywords = hetlb.simulate(system, "jfsq", **keywords)
    by_object = hetlb.simulate(system, "jfsq", hetlb.RunOptions(**keywords))
    assert [run.mean_response_time for run in by_object.runs] == [run.mean_response_time for run in by_keywords.runs]
    assert by_object.metadata["stopping"] == {"jobs": 3000, "horizon": None, "warmup": 5.0}


def test_options_and_keywords_together_are_refused():
    system = hetlb.System.from_speeds([1.0, 1.0], load=0.5)
    with pytest.raises(InputError) as error:
        hetlb.simulate(system, "jsq", hetlb.RunOptions(jobs=100), jobs=200)
    assert error.value.field == "options"


def test_the_stopping_rule_is_settled_when_the_object_is_made():
    assert hetlb.RunOptions().jobs == 100_000 and hetlb.RunOptions().end_time == math.inf
    by_time = hetlb.RunOptions(horizon=50.0, warmup=5.0)
    assert by_time.jobs is None and by_time.end_time == 50.0
    assert by_time.replace(jobs=400).horizon is None  # a new stopping rule replaces the other
    with pytest.raises(InputError, match="greater than the warm-up"):
        hetlb.RunOptions(horizon=5.0, warmup=10.0)
    with pytest.raises(InputError, match="at least the number of batches"):
        hetlb.RunOptions(jobs=5)


def test_a_scenario_holds_its_run_table_and_dispatcher_keys_as_one_object():
    scenario = Scenario.from_mapping(
        {
            "system": {"speeds": "2x1.0", "load": 0.5, "dispatchers": 2, "dispatcher_share": [0.5, 0.5]},
            "policy": {"id": "l-jsq", "update": "pull:p_hat=0.5"},
            "run": {"jobs": 500, "herd_window": 0.2},
        }
    )
    options = scenario.run
    assert isinstance(options, hetlb.RunOptions) and options.many_dispatchers
    assert options.dispatchers == 2 and options.dispatcher_share == [0.5, 0.5] and options.herd_window == 0.2
    assert options.update == Updates.parse("pull:p_hat=0.5")
    assert scenario.policy.params == hetlb.make_policy("l-jsq").params  # the slotted update left at its default


@pytest.mark.parametrize(
    "run,field",
    [
        ({"jobs": "x"}, "run.jobs"),
        ({"jobs": 2**64}, "run.jobs"),
        ({"horizon": 1.0, "warmup": 2.0}, "run.horizon"),
        ({"jobs": 5}, "run.jobs"),
        ({"seed": -1}, "run.seed"),
        ({"batches": 1}, "run.batches"),
        ({"herd_window": 0.0}, "run.herd_window"),
    ],
)
def test_a_scenario_names_the_run_key_of_a_bad_value(run, field):
    with pytest.raises(InputError) as error:
        Scenario.from_mapping({"system": {"speeds": "1,1", "load": 0.5}, "run": run})
    assert error.value.field == field


def test_the_dispatchers_share_has_one_name():
    system = hetlb.System.from_speeds([1.0] * 4, load=0.5)
    shares = np.array([0.25, 0.75])
    result = hetlb.simulate(system, "l-jsq", dispatchers=2, dispatcher_share=shares, jobs=1000, seed=2)
    assert result.metadata["dispatchers"]["rates"][0] == [0.25 * system.total_arrival_rate]
    with pytest.raises(InputError) as error:  # the former keyword, as the scenario's key is named
        hetlb.simulate(system, "l-jsq", dispatchers=2, split=shares, jobs=1000, seed=2)
    assert error.value.field == "split"


def test_the_slotted_model_takes_its_options_the_same_way():
    system = hetlb.SlottedSystem.from_speeds([1.0] * 4, dispatchers=2, load=0.6)
    keywords = dict(slots=2000, warmup=100, replications=2, seed=5, batches=10)
    by_keywords = hetlb.simulate_slotted(system, "l-jsq", p_hat=0.5, **keywords)
    by_object = hetlb.simulate_slotted(system, "l-jsq", hetlb.SlottedRunOptions(**keywords), p_hat=0.5)
    assert [run.mean_delay for run in by_object.runs] == [run.mean_delay for run in by_keywords.runs]
    assert by_object.metadata["stopping"] == {"slots": 2000, "warmup": 100}
    scenario = Scenario.from_mapping(
        {"system": {"model": "slotted", "speeds": "4x1.0", "load": 0.6, "dispatchers": 2}, "run": {"slots": 500}}
    )
    assert scenario.run == hetlb.SlottedRunOptions(slots=500)
    with pytest.raises(InputError) as error:
        Scenario.from_mapping({"system": {"model": "slotted", "speeds": "1,1", "load": 0.5}, "run": {"slots": 5}})
    assert error.value.field == "run.slots"
