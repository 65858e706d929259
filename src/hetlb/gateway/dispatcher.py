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

The fleet changes at run time (:meth:`Dispatcher.add`, :meth:`~Dispatcher.drain`,
:meth:`~Dispatcher.patch`), each change between two decisions (no await inside one). A backend's
index s is its slot, stable for the leases of its requests in flight: ``state[s]`` is ACTIVE
(a candidate), DRAINING (no new decision; retired when its in-flight count reaches 0, or by
:meth:`~Dispatcher.retire`) or RETIRED (out of the fleet; its arrays stay until its leases are
released, and its slot is never reused). A new backend takes a new slot; the arrays grow by
doubling. Job type indices are stable too: a type keeps its index k once seen, and
``type_index`` lists the types the active backends serve now. Index 0 is the one type of a fleet
where no backend declares types.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

from hetlb.gateway.config import Backend, ServeConfig
from hetlb.gateway.random_source import RandomSource, decide
from hetlb.jit import entry_point
from hetlb.model.system import speed_classes
from hetlb.policies.choice import jba_options

NO_BACKEND = -1
"""choose() when every compatible backend is ejected."""

ACTIVE, DRAINING, RETIRED = 0, 1, 2
STATE_NAMES = ("active", "draining", "retired")
"""A slot's state (``Dispatcher.state[s]``)."""

AUTO_SPEED_MIN_SAMPLES = 5
AUTO_SPEED_WEIGHT = 0.02
"""speed=auto: the mean of the first samples, then an exponentially weighted mean of this weight."""


SLOT_ARRAYS = (
    "speed_auto", "speed", "speed_samples", "service_mean", "buffer", "state", "in_flight", "requests", "errors",
    "blocked", "failures_in_a_row", "ejected", "others", "since_update", "estimate", "reported_at", "idle_since",
    "keys", "ties", "sample", "speed_class",
)  # fmt: skip
"""The arrays indexed by slot s (:meth:`Dispatcher.grow` copies them)."""


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
    """The state of one dispatcher over its backends (the fleet as it changes), and its decisions."""

    def __init__(self, config: ServeConfig, seed: int | None = None):
        self.config = config
        self.policy_code = config.policy.code
        params = config.policy.params
        led = config.policy.spec.on_local_estimates
        self.led = led
        self.own_in_estimate = (config.signals.inflight and not led) or (led and params.get("increment_on_dispatch"))
        self.ends_in_estimate = config.signals.inflight and not led
        self.sample_size = int(params.get("d", 2))
        self.jba_rate_weighted, self.jba_inclusive, self.jba_fallback = jba_options(params)
        self.random_source = RandomSource(np.random.default_rng(seed))
        self.decide = decide  # numba's dispatcher; its compiled code after warm_up
        self.accounting_violations = 0

        self.backends: list[Backend] = []  # per slot: its spec now (a retired slot keeps its last)
        self.urls: list[str] = []  # per slot, as configured
        self.slot_of: dict[str, int] = {}  # the slots of the current (active or draining) backends
        self.n_backends = 0  # slots taken, retired ones included
        self.on_retired: list[Callable[[int], None]] = []  # told of each slot retired
        self.allocate(len(config.backends))
        for backend in config.backends:
            self.place(backend)
        self.type_names: list[str] = [""]  # every job type seen, by index k; "" the one type of an untyped fleet
        self.type_index: dict[str, int] = {}
        self.job_types: tuple[str, ...] = ()
        self.typed = False
        self.compatible: list[np.ndarray] = []
        self.candidates = np.zeros(1, dtype=np.int64)
        self.cumulative_speed = np.zeros(1)
        self.indptr = np.zeros(2, dtype=np.int64)
        self.n_classes = 1
        self.rebuild_types()

    def allocate(self, capacity: int) -> None:
        """The per-slot arrays, for ``capacity`` slots (at least 1)."""
        capacity = max(capacity, 1)
        self.capacity = capacity
        self.speed_auto = np.zeros(capacity, dtype=bool)
        self.speed = np.ones(capacity)
        self.speed_samples = np.zeros(capacity, dtype=np.int64)
        self.service_mean = np.zeros(capacity)  # seconds, speed=auto
        self.buffer = np.zeros(capacity, dtype=np.int64)  # 0: no limit
        self.state = np.full(capacity, RETIRED, dtype=np.int8)
        self.in_flight = np.zeros(capacity, dtype=np.int64)
        self.requests = np.zeros(capacity, dtype=np.int64)
        self.errors = np.zeros(capacity, dtype=np.int64)
        self.blocked = np.zeros(capacity, dtype=np.int64)
        self.failures_in_a_row = np.zeros(capacity, dtype=np.int64)
        self.ejected = np.zeros(capacity, dtype=bool)
        self.others = np.zeros(capacity, dtype=np.int64)
        self.since_update = np.zeros(capacity, dtype=np.int64)
        self.estimate = np.zeros(capacity, dtype=np.int64)
        self.reported_at = np.full(capacity, time.monotonic())
        self.idle_since = np.zeros(capacity)
        self.keys = np.zeros(capacity)
        self.ties = np.zeros(capacity, dtype=np.int64)
        self.sample = np.zeros(capacity, dtype=np.int64)
        self.speed_class = np.zeros(capacity, dtype=np.int64)

    def grow(self) -> None:
        """Twice the slots, the taken ones copied (their indices unchanged)."""
        old = {name: getattr(self, name) for name in SLOT_ARRAYS}
        self.allocate(2 * self.capacity)
        for name, values in old.items():
            getattr(self, name)[: len(values)] = values

    def place(self, backend: Backend) -> int:
        """A new slot for ``backend``, active (the candidate sets are not rebuilt here)."""
        if self.n_backends == self.capacity:
            self.grow()
        s = self.n_backends
        self.n_backends += 1
        self.backends.append(backend)
        self.urls.append(backend.url)
        self.slot_of[backend.url] = s
        self.state[s] = ACTIVE
        self.reported_at[s] = time.monotonic()
        self.set_spec(s, backend)
        return s

    def set_spec(self, s: int, backend: Backend) -> None:
        """Backend s's speed, buffer and types from ``backend`` (a change of speed=auto restarts its
        estimate; a number replaces it)."""
        self.backends[s] = backend
        self.buffer[s] = backend.buffer or 0
        auto = backend.speed is None
        if not auto:
            self.speed_auto[s] = False
            self.speed[s] = backend.speed
        elif not self.speed_auto[s]:
            self.speed_auto[s] = True
            self.speed_samples[s] = 0
            self.service_mean[s] = 0.0
            measured = self.speed_auto & (self.speed_samples >= AUTO_SPEED_MIN_SAMPLES)
            self.speed[s] = self.speed[measured].mean() if measured.any() else 1.0

    # --- the fleet's changes (each between two decisions) -----------------------------------------

    def current(self) -> np.ndarray:
        """The slots of the backends in the fleet now (active or draining), in slot order."""
        return np.flatnonzero(self.state[: self.n_backends] != RETIRED)

    def add(self, backend: Backend) -> int:
        """Add a backend (its URL not in the fleet) in a new slot; its slot s."""
        assert backend.url not in self.slot_of, backend.url
        s = self.place(backend)
        self.rebuild_types()
        return s

    def patch(self, s: int, backend: Backend) -> None:
        """Backend s's speed, types and buffer become ``backend``'s (the same URL); its state stays."""
        assert self.state[s] != RETIRED and backend.url == self.urls[s]
        self.set_spec(s, backend)
        self.rebuild_types()

    def undrain(self, s: int) -> None:
        """A draining backend s takes new decisions again."""
        if self.state[s] == DRAINING:
            self.state[s] = ACTIVE
            self.rebuild_types()

    def drain(self, s: int) -> bool:
        """No new decision to backend s; it is retired now if none of its requests is in flight, else
        when the last one ends (or by :meth:`retire`). True when it is retired already."""
        if self.state[s] == ACTIVE:
            self.state[s] = DRAINING
            self.rebuild_types()
        if self.state[s] == DRAINING and self.in_flight[s] == 0:
            self.retire(s)
        return bool(self.state[s] == RETIRED)

    def retire(self, s: int) -> None:
        """Backend s leaves the fleet; leases of its requests still in flight release into its slot."""
        if self.state[s] == RETIRED:
            return
        self.state[s] = RETIRED
        del self.slot_of[self.urls[s]]
        self.rebuild_types()
        for listener in self.on_retired:
            listener(s)

    def rebuild_types(self) -> None:
        """The job types the active backends serve (a new one takes the next index k) and each type's
        compatible active backends; then :meth:`refresh`."""
        active = [s for s in range(self.n_backends) if self.state[s] == ACTIVE]
        served = sorted({name for s in active for name in self.backends[s].types or ()})
        known = {name: k for k, name in enumerate(self.type_names)}
        for name in served:
            if name not in known:
                known[name] = len(self.type_names)
                self.type_names.append(name)
        self.type_index = {name: known[name] for name in served}
        self.job_types = tuple(served)
        self.typed = any(self.backends[s].types is not None for s in active)
        self.compatible = [
            np.array([s for s in active if self.backends[s].serves(name)], dtype=np.int64) for name in self.type_names
        ]
        size = len(self.type_names) * self.capacity + 1
        if len(self.candidates) < size:
            self.candidates = np.zeros(size, dtype=np.int64)
            self.cumulative_speed = np.zeros(size)
        self.indptr = np.zeros(len(self.type_names) + 1, dtype=np.int64)
        self.refresh()

    # --- the candidate sets ----------------------------------------------------------------------

    def refresh(self) -> None:
        """Rebuild the speed classes and each job type's admitted candidates (after an ejection, a
        re-admission or a new speed estimate); the speed classes are those of the current backends."""
        current = self.current()
        self.speed_class[:] = 0
        if len(current):
            _, self.speed_class[current] = speed_classes(self.speed[current])
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
        return int(self.decide(*self.decision_arguments(candidates, lo, hi, cumulative_speed)))

    def decision_arguments(self, candidates: np.ndarray, lo: int, hi: int, cumulative_speed: np.ndarray) -> tuple:
        """What :func:`hetlb.gateway.random_source.decide` takes, for candidates[lo:hi]."""
        return (
            self.random_source, self.policy_code, candidates, lo, hi, self.estimate, self.speed_class,
            self.n_classes, self.speed, cumulative_speed, self.idle_since, self.sample_size,
            self.jba_rate_weighted, self.jba_inclusive, self.jba_fallback, self.keys, self.ties, self.sample,
        )  # fmt: skip

    def admitted_count(self, k: int) -> int:
        """How many admitted backends serve job type index k."""
        return int(self.indptr[k + 1] - self.indptr[k])

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
        if self.state[s] == DRAINING and self.in_flight[s] == 0:
            self.retire(s)

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

    def failed(self, s: int, at_once: bool = False) -> bool:
        """A failure of backend s that an answer showed; True when it ejects s (passive check: after
        eject_after in a row, or ``at_once``)."""
        self.errors[s] += 1
        self.failures_in_a_row[s] += 1
        if not self.ejected[s] and (at_once or self.failures_in_a_row[s] >= self.config.eject_after):
            self.set_ejected(s, True)
            return True
        return False

    def set_ejected(self, s: int, ejected: bool) -> None:
        if self.ejected[s] != ejected and self.state[s] != RETIRED:
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
            return np.zeros(self.capacity)
        return time.monotonic() - self.reported_at

    def warm_up(self) -> None:
        """Compile (or load from the cache) the decision rule on these arrays' types; then every
        decision calls its compiled code directly (:func:`hetlb.jit.entry_point`: the arrays keep
        their types when the fleet changes)."""
        for k in range(len(self.compatible)):
            self.choose(k)
        compiled = entry_point(decide, self.decision_arguments(self.candidates, 0, 0, self.cumulative_speed))
        if compiled is not None:
            self.decide = compiled
