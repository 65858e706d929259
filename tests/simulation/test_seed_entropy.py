"""A SeedSequence made from a list of integers seeds a run like one made from a single integer."""

import json

import numpy as np

import hetlb


def test_continuous_run_takes_a_seed_sequence_of_several_words():
    system = hetlb.System.from_speeds([2.0, 1.0], load=0.5)
    first = hetlb.simulate(system, "jsq", jobs=200, replications=2, seed=np.random.SeedSequence([1, 2]))
    again = hetlb.simulate(system, "jsq", jobs=200, replications=2, seed=np.random.SeedSequence([1, 2]))
    assert first.mean_response_time == again.mean_response_time
    assert first.metadata["seed"] == {"entropy": [1, 2], "spawn_key": []}
    assert [run.seed_entropy for run in first.runs] == [[1, 2], [1, 2]]
    assert json.loads(first.to_json())["runs"][1]["seed"] == {"entropy": [1, 2], "spawn_key": [1]}


def test_slotted_run_takes_a_seed_sequence_of_several_words():
    system = hetlb.SlottedSystem.from_speeds([1.0] * 4, load=0.5)
    result = hetlb.simulate_slotted(system, "jsq", slots=100, seed=np.random.SeedSequence([4, 5]))
    assert result.runs[0].seed_entropy == [4, 5]
    assert json.loads(result.to_json())["metadata"]["seed"]["entropy"] == [4, 5]
