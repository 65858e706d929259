"""The kernels run as plain Python (NUMBA_DISABLE_JIT=1) give the compiled kernels' results, bit for bit.

Every path of the event loops, run small (jit_off_scenarios.py): the continuous loop routing by a
scan, the least-key tree and the key buckets, on complete and sparse graphs, with finite buffers
and each job-size law; the slotted loop with LED pushes and pulls, jiq's tokens, shared ties and
the preference estimator; JSQ-FSL, JSQ-SSL and the coupled sandwich check. The compiled numbers
come from running jit_off_scenarios.py in a subprocess with the JIT on.

These tests run only with the JIT off (``make test`` runs them in a second pytest process):

    NUMBA_DISABLE_JIT=1 python -m pytest -m jit_off
"""

import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from numba import config

from hetlb.kernels import continuous as kernel

from support.jit_off_scenarios import scenarios

pytestmark = [
    pytest.mark.jit_off,
    pytest.mark.skipif(not config.DISABLE_JIT, reason="runs with NUMBA_DISABLE_JIT=1 (make test runs it so)"),
]

SCENARIOS = scenarios()


@pytest.fixture(scope="module")
def compiled() -> dict:
    """Each scenario's numbers from the compiled kernels."""
    environment = {name: value for name, value in os.environ.items() if name != "NUMBA_DISABLE_JIT"}
    script = Path(__file__).parents[1] / "support" / "jit_off_scenarios.py"
    finished = subprocess.run(
        [sys.executable, str(script)], env=environment, capture_output=True, check=False, timeout=900
    )
    assert finished.returncode == 0, finished.stderr.decode()
    return pickle.loads(finished.stdout)


def assert_same_bits(plain: dict, compiled: dict) -> None:
    assert plain.keys() == compiled.keys()
    for name in plain:
        np.testing.assert_array_equal(plain[name], compiled[name], err_msg=name)
        assert np.asarray(plain[name]).tobytes() == np.asarray(compiled[name]).tobytes(), name


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_plain_python_gives_the_compiled_results(name, compiled):
    assert_same_bits(SCENARIOS[name](), compiled[name])


@pytest.mark.parametrize("name", ["tree sed, state distribution", "buckets jsq"])
def test_prefetching_changes_nothing(name, compiled, monkeypatch):
    """The prefetches of a large system (a no-op in plain Python, by design) on a small one."""
    monkeypatch.setattr(kernel, "PREFETCH_MIN_SERVERS", 1)
    assert_same_bits(SCENARIOS[name](), compiled[name])
