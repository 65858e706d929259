"""Result objects: JSON round trip, histogram quantiles, the progress bar."""

import io
import json

import numpy as np

import hetlb
from hetlb.kernels.continuous import HISTOGRAM_BINS_PER_OCTAVE, HISTOGRAM_MIN_EXPONENT, HISTOGRAM_OCTAVES
from hetlb.progress import ProgressBar
from hetlb.results import response_time_quantile


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
