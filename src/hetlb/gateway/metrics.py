"""What one dispatcher tells its admin listener: Prometheus metrics (a registry per dispatcher) and
the JSON of ``GET /status``.

The request path only adds to counts: the per-backend counters and gauges are read from the
dispatcher's arrays when scraped, and the histograms are bucket counts (:class:`Histograms`, one
bisection and two additions per observation) exported as Prometheus histograms at a scrape. The
names are listed in docs/reference/serve.md.
"""

from __future__ import annotations

import bisect
import time
from collections import Counter

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from hetlb.gateway.answers import AnswerWatch
from hetlb.gateway.dispatcher import DRAINING, RETIRED, STATE_NAMES, Dispatcher

LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
DECISION_BUCKETS = (1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 1e-3)
LAG_BUCKETS = (1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 0.1)
"""Seconds."""
SCRAPE_FAILURES = ("failed", "malformed")
"""Why a scrape of an engine's metrics gave no report."""
REJECTIONS = (
    "bad_type", "unknown_type", "bad_body", "bad_path", "too_large", "body_timeout", "malformed", "header_timeout",
    "header_too_large", "no_backend", "overload", "internal_error", "probe_skipped", "bad_message",
)  # fmt: skip
"""The reasons a dispatcher answers a request itself (docs/reference/serve.md)."""


class Histograms:
    """Histograms of seconds, one per key (a backend's slot, or None for an unlabelled one): the
    count of observations in each bucket (upper bounds ``buckets``, then +Inf) and their sum."""

    def __init__(self, name: str, documentation: str, buckets: tuple[float, ...]):
        self.name = name
        self.documentation = documentation
        self.bounds = buckets
        self.counts: dict = {}
        self.sums: dict = {}

    def observe(self, seconds: float, key=None) -> None:
        counts = self.counts.get(key)
        if counts is None:
            counts = self.counts[key] = [0] * (len(self.bounds) + 1)
            self.sums[key] = 0.0
        counts[bisect.bisect_left(self.bounds, seconds)] += 1  # the first bucket whose bound >= seconds
        self.sums[key] += seconds

    def forget(self, key) -> None:
        self.counts.pop(key, None)
        self.sums.pop(key, None)

    def count(self, key=None) -> int:
        return sum(self.counts.get(key, ()))

    def family(self, labels: dict | None = None) -> HistogramMetricFamily:
        """The Prometheus histogram: unlabelled, or one per key of ``labels`` (key -> backend URL)."""
        family = HistogramMetricFamily(self.name, self.documentation, labels=None if labels is None else ["backend"])
        for key, label in {None: None}.items() if labels is None else labels.items():
            counts = self.counts.get(key, [0] * (len(self.bounds) + 1))
            cumulative = 0
            buckets = []
            for bound, n in zip((*map(str, self.bounds), "+Inf"), counts):
                cumulative += n
                buckets.append((bound, cumulative))
            family.add_metric([] if label is None else [label], buckets, self.sums.get(key, 0.0))
        return family


class Lag(Histograms):
    """A delay of the dispatcher's view measured per request (seconds), with its count and mean for
    /status."""

    def __init__(self, name: str, documentation: str):
        super().__init__(name, documentation, LAG_BUCKETS)

    def status(self) -> dict:
        count = self.count()
        return {"count": count, "mean_ms": 1e3 * self.sums.get(None, 0.0) / count if count else None}


class Metrics:
    """The metrics of one dispatcher, on their own registry."""

    def __init__(self, dispatcher: Dispatcher):
        self.dispatcher = dispatcher
        self.registry = CollectorRegistry(auto_describe=True)
        self.rejections: Counter = Counter()
        self.ejections: Counter = Counter()  # by slot
        self.readmissions: Counter = Counter()
        self.messages: Counter = Counter()
        self.events: Counter = Counter()  # by slot
        self.client_gone: Counter = Counter()
        self.backend_broken: Counter = Counter()
        self.latency_seconds = Histograms(
            "hetlb_request_duration_seconds",
            "time from a request's arrival at the dispatcher to the last byte of its answer relayed, per backend",
            LATENCY_BUCKETS,
        )
        self.first_byte_seconds = Histograms(
            "hetlb_time_to_first_byte_seconds",
            "time from a request's arrival at the dispatcher to the first byte of its answer's body relayed "
            "(an event stream's first event), per backend",
            LATENCY_BUCKETS,
        )
        dispatcher.on_retired.append(self.forget)
        self.decision_seconds = Histograms(
            "hetlb_decision_seconds",
            "time of one decision of the policy (the compiled rule on the estimates)",
            DECISION_BUCKETS,
        )
        self.answer_lag = Lag(
            "hetlb_answer_lag_seconds",
            "time from a backend's departure (its X-Departure header, the host's clock) to the "
            "dispatcher reading the answer: how late the dispatcher learns a completion",
        )
        self.forward_delay = Lag(
            "hetlb_forward_delay_seconds",
            "time from the dispatcher's decision to the request's arrival at the backend (X-Departure "
            "minus X-Sojourn-Ms, the host's clock): how long a chosen backend waits for its job",
        )
        self.scrape_delay = Lag(
            "hetlb_scrape_delay_seconds",
            "time from sending a snapshot's GET (a poll of /load, a scrape of an engine's metrics) to "
            "reading its answer in full: how late a snapshot's numbers are when they are used",
        )
        self.scrape_failures: Counter = Counter()
        self.registry.register(ArrayCollector(self))

    def forget(self, s: int) -> None:
        """Backend s left the fleet: its histograms go (the per-backend arrays are read for the
        current backends only)."""
        self.latency_seconds.forget(s)
        self.first_byte_seconds.forget(s)

    def answered(self, s: int, started: float, watch: AnswerWatch) -> None:
        """An answer of backend s relayed in full, for a request that arrived at ``started``
        (perf_counter): its times to first and last byte (none for a backend that has left the fleet
        meanwhile)."""
        if self.dispatcher.state[s] == RETIRED:
            return
        last = watch.last_byte if watch.last_byte is not None else time.perf_counter()
        self.latency_seconds.observe(last - started, s)
        if watch.first_byte is not None:
            self.first_byte_seconds.observe(watch.first_byte - started, s)

    def aborted(self, s: int, reason: str) -> None:
        """An answer of backend s cut: ``client_gone`` or ``backend_broken``."""
        counts = self.client_gone if reason == "client_gone" else self.backend_broken
        counts[s] += 1

    def decision(self, seconds: float) -> None:
        self.decision_seconds.observe(seconds)

    def rejected(self, reason: str) -> None:
        self.rejections[reason] += 1

    def ejection(self, s: int) -> None:
        self.ejections[s] += 1

    def readmission(self, s: int) -> None:
        self.readmissions[s] += 1


class ArrayCollector:
    """The per-backend counters and gauges, read from the dispatcher's arrays at each scrape."""

    def __init__(self, metrics: Metrics):
        self.metrics = metrics

    def describe(self):
        return []

    def collect(self):
        metrics = self.metrics
        dispatcher = metrics.dispatcher
        current = dispatcher.current()
        urls = [dispatcher.urls[s] for s in current]
        counters = [
            ("hetlb_requests", "requests sent to the backend", dispatcher.requests),
            ("hetlb_blocked", "requests answered 503 because the chosen backend held its buffer", dispatcher.blocked),
            ("hetlb_backend_errors", "5xx answers, connection failures and timeouts of the backend", dispatcher.errors),
            ("hetlb_ejections", "times the backend was ejected", metrics.ejections),
            ("hetlb_readmissions", "times an active check re-admitted the backend", metrics.readmissions),
            ("hetlb_stream_events", "server-sent events relayed from the backend's event streams", metrics.events),
            ("hetlb_client_gone", "answers cut because the client went away before their end", metrics.client_gone),
            (
                "hetlb_backend_broken",
                "answers cut because the backend failed after they had begun",
                metrics.backend_broken,
            ),
        ]
        for name, text, values in counters:
            family = CounterMetricFamily(name, text, labels=["backend"])
            for url, s in zip(urls, current):
                family.add_metric([url], int(values[s]))
            yield family
        ages = dispatcher.estimate_age()
        gauges = [
            ("hetlb_in_flight", "requests sent to the backend and not yet ended", dispatcher.in_flight),
            ("hetlb_estimate", "the number in system the policy decides on", dispatcher.estimate),
            ("hetlb_estimate_age_seconds", "seconds since the backend's last load report", ages),
            ("hetlb_backend_ejected", "1 while the backend is ejected", dispatcher.ejected),
            (
                "hetlb_backend_draining",
                "1 while the backend drains (no new requests) before it leaves",
                dispatcher.state == DRAINING,
            ),
            (
                "hetlb_backend_speed",
                "the backend's speed mu (configured, or estimated with speed=auto)",
                dispatcher.speed,
            ),
        ]
        for name, text, values in gauges:
            family = GaugeMetricFamily(name, text, labels=["backend"])
            for url, s in zip(urls, current):
                family.add_metric([url], float(values[s]))
            yield family
        rejected = CounterMetricFamily(
            "hetlb_rejected", "requests answered without a backend, by reason", labels=["reason"]
        )
        for reason in REJECTIONS:
            rejected.add_metric([reason], metrics.rejections[reason])
        yield rejected
        messages = CounterMetricFamily("hetlb_probes", "GET /load and health requests sent", labels=["signal"])
        for signal, value in metrics.messages.items():
            messages.add_metric([signal], value)
        yield messages
        failures = CounterMetricFamily(
            "hetlb_scrape_failures",
            "scrapes of engine metrics that gave no report: failed (no answer, timeout, status other "
            "than 200, too long) or malformed (the running or waiting gauge missing or unreadable)",
            labels=["reason"],
        )
        for reason in SCRAPE_FAILURES:
            failures.add_metric([reason], metrics.scrape_failures[reason])
        yield failures
        violations = CounterMetricFamily(
            "hetlb_accounting_violations", "releases of an in-flight count that was already 0 (never expected)"
        )
        violations.add_metric([], dispatcher.accounting_violations)
        yield violations
        labels = dict(zip(current, urls))
        yield metrics.latency_seconds.family(labels)
        yield metrics.first_byte_seconds.family(labels)
        for histogram in (metrics.decision_seconds, metrics.answer_lag, metrics.forward_delay, metrics.scrape_delay):
            yield histogram.family()


def status(dispatcher: Dispatcher, metrics: Metrics, index: int, started: float) -> dict:
    """The JSON of GET /status."""
    config = dispatcher.config
    ages = dispatcher.estimate_age()
    backends = []
    for s in dispatcher.current():
        backend = dispatcher.backends[s]
        backends.append(
            {
                "url": dispatcher.urls[s],
                "state": STATE_NAMES[dispatcher.state[s]],
                "speed": float(dispatcher.speed[s]),
                "speed_source": "auto" if dispatcher.speed_auto[s] else "configured",
                "speed_samples": int(dispatcher.speed_samples[s]),
                "types": "discover" if backend.discover else None if backend.types is None else list(backend.types),
                "served_types": None if backend.types is None else list(backend.types),
                "buffer": backend.buffer,
                "in_flight": int(dispatcher.in_flight[s]),
                "requests": int(dispatcher.requests[s]),
                "errors": int(dispatcher.errors[s]),
                "blocked": int(dispatcher.blocked[s]),
                "ejected": bool(dispatcher.ejected[s]),
                "ejections": metrics.ejections[s],
                "stream_events": metrics.events[s],
                "client_gone": metrics.client_gone[s],
                "backend_broken": metrics.backend_broken[s],
                "estimate": int(dispatcher.estimate[s]),
                "estimate_age_s": round(float(ages[s]), 6),
                "others": int(dispatcher.others[s]),
            }
        )
    requests = int(dispatcher.requests.sum())
    probes = metrics.messages["push"] + metrics.messages["poll"] + metrics.messages["metrics"]
    return {
        "dispatcher": index,
        "policy": config.policy.describe(),
        "signals": config.signals.names(),
        "job_types": list(dispatcher.job_types),
        "uptime_s": round(time.monotonic() - started, 3),
        "requests": requests,
        "blocked": int(dispatcher.blocked.sum()),
        "rejected": dict(metrics.rejections),
        "messages": {
            "push_probes": metrics.messages["push"],
            "poll_probes": metrics.messages["poll"],
            "metrics_scrapes": metrics.messages["metrics"],
            "scrapes_failed": metrics.scrape_failures["failed"],
            "scrapes_malformed": metrics.scrape_failures["malformed"],
            "health_checks": metrics.messages["health"],
            "probe_messages_per_request": 2 * probes / requests if requests else None,
        },
        "answer_lag": metrics.answer_lag.status(),
        "forward_delay": metrics.forward_delay.status(),
        "scrape_delay": metrics.scrape_delay.status(),
        "accounting_violations": dispatcher.accounting_violations,
        "backends": backends,
    }
