"""Results for a seed do not change where the model does not: a fixed set of runs, every kernel path
of jit_off_scenarios.py and three larger runs, reduced to digests of their numbers.

The digests in data/seed_invariance.json were written by the code of the commit named in the file.
A change that is meant to change results for a seed (a new model, a corrected kernel) writes them
anew, and says so in its commit:

    PYTHONPATH=tests python tests/simulation/test_seed_invariance.py --write

A new scenario adds its digests the same way; the recorded ones must come out unchanged.
"""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import hetlb

from support.jit_off_scenarios import continuous_numbers, dispatcher_numbers, scenarios

DIGESTS = Path(__file__).with_name("data") / "seed_invariance.json"


def larger_runs() -> dict:
    """Runs large enough to take the paths a large system takes (prefetching, the tree, buckets)."""
    four_speeds = "50x1,50x0.5,50x0.25,50x0.125"
    return {
        "200 servers jfsq at load 0.9": lambda: continuous_numbers(
            hetlb.simulate(hetlb.System.from_speeds(four_speeds, load=0.9), "jfsq", jobs=40_000, warmup=20.0, seed=11)
        ),
        "1000 servers jiq, buffer 5": lambda: continuous_numbers(
            hetlb.simulate(
                hetlb.System.from_speeds("500x1,500x0.25", load=0.8, buffer=5), "jiq", jobs=40_000, warmup=5.0, seed=12
            )
        ),
        "100 servers, 4 dispatchers, sed on delayed piggyback": lambda: dispatcher_numbers(
            hetlb.simulate(
                hetlb.System.from_speeds("50x1,50x0.5", load=0.85),
                "sed",
                jobs=20_000,
                warmup=5.0,
                seed=13,
                dispatchers=4,
                update="increment,piggyback:delay=0.1",
            )
        ),
    }


def digests(numbers: dict) -> dict:
    """Field -> the first 16 hex digits of the SHA-256 of its values as float64 bytes."""
    return {
        name: hashlib.sha256(np.ascontiguousarray(value, dtype=np.float64).tobytes()).hexdigest()[:16]
        for name, value in sorted(numbers.items())
    }


RUNS = {**scenarios(), **larger_runs()}


@pytest.fixture(scope="module")
def recorded() -> dict:
    return json.loads(DIGESTS.read_text())


@pytest.mark.parametrize("name", list(RUNS))
def test_results_for_a_seed_are_unchanged(name, recorded):
    expected = recorded["runs"][name]
    measured = digests(RUNS[name]())
    assert measured.keys() >= expected.keys(), f"fields no longer measured: {sorted(expected.keys() - measured.keys())}"
    changed = sorted(field for field in expected if measured[field] != expected[field])
    assert not changed, f"{name}: changed since {recorded['commit'][:12]}: {changed}"


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: PYTHONPATH=tests python tests/simulation/test_seed_invariance.py --write")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    runs = {name: digests(run()) for name, run in RUNS.items()}
    DIGESTS.write_text(json.dumps({"commit": commit, "runs": runs}, indent=1, sort_keys=True) + "\n")
