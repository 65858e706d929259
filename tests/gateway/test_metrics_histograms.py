"""hetlb serve's histograms (hetlb.gateway.metrics.Histograms: bucket counts on the request path)
against prometheus-client's own Histogram fed the same observations: the same exposition."""

from __future__ import annotations

import numpy as np
from prometheus_client import CollectorRegistry, Histogram

from hetlb.gateway.metrics import LATENCY_BUCKETS, Histograms


class One:
    def __init__(self, histogram: Histograms, labels):
        self.histogram, self.labels = histogram, labels

    def collect(self):
        yield self.histogram.family(self.labels)


def samples(registry: CollectorRegistry) -> dict:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in registry.collect()
        for sample in family.samples
        if not sample.name.endswith("_created")
    }


def test_bucket_counts_and_sums_equal_prometheus_clients_histogram():
    rng = np.random.default_rng(7)
    values = np.concatenate([rng.exponential(0.05, 2000), LATENCY_BUCKETS, [0.0, 100.0]])  # bounds themselves too
    ours = Histograms("hetlb_test_seconds", "a test", LATENCY_BUCKETS)
    reference_registry, our_registry = CollectorRegistry(), CollectorRegistry()
    reference = Histogram(
        "hetlb_test_seconds", "a test", ["backend"], buckets=LATENCY_BUCKETS, registry=reference_registry
    )
    for i, value in enumerate(values):
        slot = i % 3
        ours.observe(float(value), slot)
        reference.labels(f"http://b{slot}").observe(float(value))
    our_registry.register(One(ours, {slot: f"http://b{slot}" for slot in range(3)}))
    expected, got = samples(reference_registry), samples(our_registry)
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert abs(got[key] - value) <= 1e-9 * max(1.0, abs(value)), key  # counts exact, sums to rounding
