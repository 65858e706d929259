"""A dispatcher's state and decision: its load estimate of every backend, and the policy's choice
on it through hetlb.policies.choice.choose_server (the rule the kernels use; no second one here).

Everything is held in numpy arrays indexed by backend s, so that one decision is one call of the
compiled rule on the arrays. The arrays:

- ``in_flight[s]``: requests this dispatcher sent to s and has not seen end (released exactly once
  by a :class:`Lease`); ``requests[s]``, ``errors[s]``, ``blocked[s]``: counters;
- ``others[s]``: the requests of other dispatchers that s held at its last report (piggybacked
  X-Queue-Length, a push probe, a poll): the reported number in system minus this dispatcher's own
  requests at s at that moment, at least 0; ``reported_at[s]``: when (the estimate's age counts from
  there);
- ``estimate[s]``: what the policy decides on (Q~_s of 001), made of the signals as
  docs/reference/serve.md says:

  * ranking and sampling policies with ``inflight``: ``in_flight[s] + others[s]``: the own requests
    exactly, the others' as last reported. With one dispatcher others[s] is 0 (a backend holds only
    this dispatcher's requests, and its report never exceeds them), so the estimate is the backend's
    number in system, the simulator's model, up to requests on the wire;
  * the same policies without ``inflight``: the last reported number in system (a snapshot);
  * the LED policies (l-jsq, l-jba, l-pod): the last reported number, changed only by updates as
    in 001 (plus the requests sent since, with ``increment_on_dispatch``).

- ``ejected[s]``: out of every candidate set until re-admitted; the candidate arrays of each job
  type (CSR, as the compatibility graph's) hold the admitted compatible backends.
"""

from __future__ import annotations

import math
import time

import numpy as np

from hetlb.live.config import ServeConfig
from hetlb.live.random_source import RandomSource, decide
from hetlb.model.system import speed_classes
from hetlb.policies.choice import jba_options

NO_BACKEND = -1
"""choose() when every compatible backend is ejected."""

AUTO_SPEED_MIN_SAMPLES = 5
AUTO_SPEED_WEIGHT = 0.02
"""speed=auto: the mean of the first samples, then an exponentially weighted mean of this weight."""


class Lease:
    """One request's hold on a backend's in-flight count: :meth:`release` gives it back once, however
    often it is called (success, error, timeout, disconnect, cancellation all end in it)."""

    __slots__ = ("dispatcher", "backend", "started", "found_empty", "released")

    def __init__(self, dispatcher: Dispatcher, backend: int, found_empty: bool):
        self.dispatcher = dispatcher
        self.backend = backend
        self.started = time.monotonic()  # the decision's epoch, seconds on the host's clock
        self.found_empty = found_empty
        self.released = False

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.dispatcher.end(self.backend)


class Dispatcher:
    """The state of one dispatcher over the configured backends, and its decisions."""

    def __init__(self, config: ServeConfig, seed: int | None = None):
        backends = config.backends
        n = len(backends)
        self.config = config
        self.n_backends = n
        self.urls = [backend.url for backend in backends]
        self.policy_code = config.policy.code
        params = config.policy.params
        led = config.policy.spec.on_local_estimates
        self.led = led
        self.own_in_estimate = (config.signals.inflight and not led) or (led and params.get("increment_on_dispatch"))
        self.ends_in_estimate = config.signals.inflight and not led
        self.sample_size = int(params.get("d", 2))
        self.jba_rate_weighted, self.jba_inclusive, self.jba_fallback = jba_options(params)
        self.random_source = RandomSource(np.random.default_rng(seed))

        self.speed_auto = np.array([backend.speed is None for backend in backends])
        self.speed = np.array([1.0 if backend.speed is None else backend.speed for backend in backends])
        self.speed_samples = np.zeros(n, dtype=np.int64)
        self.service_mean = np.zeros(n)  # seconds, speed=auto
        self.buffer = np.array([backend.buffer or 0 for backend in backends], dtype=np.int64)  # 0: no limit

        self.in_flight = np.zeros(n, dtype=np.int64)
        self.requests = np.zeros(n, dtype=np.int64)
        self.errors = np.zeros(n, dtype=np.int64)
        self.blocked = np.zeros(n, dtype=np.int64)
        self.failures_in_a_row = np.zeros(n, dtype=np.int64)
        self.ejected = np.zeros(n, dtype=bool)
        self.others = np.zeros(n, dtype=np.int64)
        self.since_update = np.zeros(n, dtype=np.int64)
        self.estimate = np.zeros(n, dtype=np.int64)
        self.reported_at = np.full(n, time.monotonic())
        self.accounting_violations = 0

        self.job_types = config.job_types
        self.type_index = {name: k for k, name in enumerate(self.job_types)}
        n_types = max(len(self.job_types), 1)
        self.compatible = [
            np.array([s for s, b in enumerate(backends) if not self.job_types or b.serves(name)], dtype=np.int64)
            for name in (self.job_types or ("",))
        ]
        self.candidates = np.zeros(n_types * n + 1, dtype=np.int64)
        self.indptr = np.zeros(n_types + 1, dtype=np.int64)
        self.cumulative_speed = np.zeros(n_types * n + 1)
        self.idle_since = np.zeros(n)
        self.keys = np.zeros(n)
        self.ties = np.zeros(n, dtype=np.int64)
        self.sample = np.zeros(n, dtype=np.int64)
        self.speed_class = np.zeros(n, dtype=np.int64)
        self.n_classes = 1
        self.refresh()

    # --- the candidate sets ----------------------------------------------------------------------

    def refresh(self) -> None:
        """Rebuild the speed classes and each job type's admitted candidates (after an ejection, a
        re-admission or a new speed estimate)."""
        _, self.speed_class = speed_classes(self.speed)
        self.n_classes = int(self.speed_class.max()) + 1
        at = 0
        for k, compatible in enumerate(self.compatible):
            admitted = compatible[~self.ejected[compatible]]
            self.candidates[at : at + len(admitted)] = admitted
            self.cumulative_speed[at : at + len(admitted)] = np.cumsum(self.speed[admitted])
            at += len(admitted)
            self.indptr[k + 1] = at

    def choose(self, k: int, exclude: tuple[int, ...] = ()) -> int:
        """The backend the policy sends a request of job type index k to, or NO_BACKEND; a retry
        ``exclude``s the backends it tried (then the candidates are copied without them)."""
        candidates, cumulative_speed = self.candidates, self.cumulative_speed
        lo = int(self.indptr[k])
        hi = int(self.indptr[k + 1])
        if exclude:
            admitted = candidates[lo:hi]
            candidates = admitted[~np.isin(admitted, exclude)]
            cumulative_speed = np.cumsum(self.speed[candidates])
            lo, hi = 0, len(candidates)
        if lo == hi:
            return NO_BACKEND
        return int(
            decide(
                self.random_source, self.policy_code, candidates, lo, hi, self.estimate, self.speed_class,
                self.n_classes, self.speed, cumulative_speed, self.idle_since, self.sample_size,
                self.jba_rate_weighted, self.jba_inclusive, self.jba_fallback, self.keys, self.ties, self.sample,
            )
        )  # fmt: skip

    def held(self, s: int) -> int:
        """What this dispatcher knows backend s holds: its own requests plus the others' last reported."""
        return int(self.in_flight[s] + self.others[s])

    def is_full(self, s: int) -> bool:
        """Whether backend s holds its buffer already (the request is then blocked)."""
        return bool(self.buffer[s]) and self.held(s) >= self.buffer[s]

    # --- one request ------------------------------------------------------------------------------

    def start(self, s: int) -> Lease:
        """Count a request sent to backend s; the lease gives it back."""
        lease = Lease(self, s, self.held(s) == 0)
        self.in_flight[s] += 1
        self.requests[s] += 1
        self.since_update[s] += 1
        if self.own_in_estimate:
            self.estimate[s] += 1
        return lease

    def end(self, s: int) -> None:
        """A request to backend s ended (whatever way); called once per request by its Lease."""
        if self.in_flight[s] <= 0:
            self.accounting_violations += 1
            return
        self.in_flight[s] -= 1
        if self.ends_in_estimate:
            self.estimate[s] -= 1

    def report(self, s: int, number_in_system: int, own_left: int = 0) -> None:
        """Backend s reported its number in system; ``own_left``: requests of this dispatcher still
        counted in in_flight[s] that the report no longer includes (1 for a piggybacked report: the
        request that carried it)."""
        own = int(self.in_flight[s]) - own_left
        self.others[s] = max(0, number_in_system - own)
        self.since_update[s] = 0
        self.reported_at[s] = time.monotonic()
        if self.ends_in_estimate:
            self.estimate[s] = self.in_flight[s] + self.others[s]
        else:
            self.estimate[s] = number_in_system

    def succeeded(self, s: int) -> None:
        self.failures_in_a_row[s] = 0

    def failed(self, s: int) -> bool:
        """A connection failure, timeout or 5xx of backend s; True when it ejects s (passive check)."""
        self.errors[s] += 1
        self.failures_in_a_row[s] += 1
        if not self.ejected[s] and self.failures_in_a_row[s] >= self.config.eject_after:
            self.set_ejected(s, True)
            return True
        return False

    def set_ejected(self, s: int, ejected: bool) -> None:
        if self.ejected[s] != ejected:
            self.ejected[s] = ejected
            if not ejected:
                self.failures_in_a_row[s] = 0
            self.refresh()

    def observe_service(self, s: int, seconds: float) -> bool:
        """A service time of backend s (speed=auto); True when its speed estimate changed by more than
        1% (then :meth:`refresh` should run)."""
        if not self.speed_auto[s] or not (seconds > 0 and math.isfinite(seconds)):
            return False
        self.speed_samples[s] += 1
        count = self.speed_samples[s]
        weight = 1.0 / count if count <= 1.0 / AUTO_SPEED_WEIGHT else AUTO_SPEED_WEIGHT
        self.service_mean[s] += weight * (seconds - self.service_mean[s])
        if count < AUTO_SPEED_MIN_SAMPLES:
            return False
        speed = float(f"{1.0 / self.service_mean[s]:.2g}")  # two digits: equal backends share a class
        if abs(speed - self.speed[s]) <= 0.01 * self.speed[s]:
            return False
        self.speed[s] = speed
        measured = self.speed_auto & (self.speed_samples >= AUTO_SPEED_MIN_SAMPLES)
        self.speed[self.speed_auto & ~measured] = self.speed[measured].mean()  # the unmeasured: the mean
        return True

    # --- what it knows ----------------------------------------------------------------------------

    def estimate_age(self) -> np.ndarray:
        """Seconds since each backend's last report (0 for an estimate of own counts alone)."""
        if not self.config.signals.reports:
            return np.zeros(self.n_backends)
        return time.monotonic() - self.reported_at

    def warm_up(self) -> None:
        """Compile (or load from the cache) the decision rule on these arrays' types."""
        for k in range(len(self.compatible)):
            self.choose(k)
