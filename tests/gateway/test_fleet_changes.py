"""The dispatcher's fleet changes without a network (hetlb.gateway.dispatcher): backends added, drained,
retired and patched between decisions, against a plain model of the fleet kept here (a dict of
specs and states): every choice is among the admitted compatible active backends of that model,
every lease is released exactly once into its own slot, the in-flight counts equal the open leases,
and a drained backend leaves when its last lease is released."""

import asyncio
from collections import Counter

import numpy as np
import pytest

from hetlb.gateway.config import Backend, ServeConfig
from hetlb.gateway.dispatcher import ACTIVE, DRAINING, NO_BACKEND, RETIRED, Dispatcher

TYPES = ("a", "b", "c")
STEPS = 3000


def dispatcher_of(policy: str, backends: list[str], signals: str = "inflight,piggyback") -> Dispatcher:
    return Dispatcher(ServeConfig.from_mapping({"backends": backends, "policy": policy, "signals": signals}), seed=11)


def random_backend(rng, url: str) -> Backend:
    types = None if rng.random() < 0.2 else tuple(sorted(rng.choice(TYPES, rng.integers(1, 4), replace=False)))
    speed = None if rng.random() < 0.1 else float(rng.choice([0.5, 1.0, 2.0, 4.0]))
    buffer = None if rng.random() < 0.7 else int(rng.integers(1, 4))
    return Backend(url, speed, types, buffer)


class FleetModel:
    """What the fleet should be: each URL's spec, state and ejection, kept apart from the dispatcher."""

    def __init__(self, backends):
        self.spec = {b.url: b for b in backends}
        self.state = dict.fromkeys(self.spec, "active")
        self.ejected = dict.fromkeys(self.spec, False)

    def candidates(self, job_type: str | None) -> set[str]:
        return {
            url
            for url, state in self.state.items()
            if state == "active"
            and not self.ejected[url]
            and (job_type is None or self.spec[url].types is None or job_type in self.spec[url].types)
        }

    def types(self) -> tuple[str, ...]:
        active = [self.spec[url] for url, state in self.state.items() if state == "active"]
        return tuple(sorted({name for b in active for name in b.types or ()}))


@pytest.mark.parametrize("policy", ["jsq", "jfsq", "sed", "random", "pod", "jiq"])
def test_choices_and_leases_across_random_changes(policy):
    rng = np.random.default_rng(5)
    initial = [Backend(f"http://127.0.0.1:{21000 + i}", 1.0, ("a", "b")) for i in range(2)]
    dispatcher = dispatcher_of(policy, [f"{b.url},types=a|b" for b in initial])
    model = FleetModel(initial)
    leases = []  # (lease, url)
    next_port = 21100
    decisions = released_twice = 0
    for _ in range(STEPS):
        action = rng.choice(["decide", "decide", "decide", "release", "release", "add", "drain", "patch", "eject"])
        current = [url for url, state in model.state.items() if state in ("active", "draining")]
        if action == "decide":
            job_types = dispatcher.job_types
            if not job_types:
                continue
            name = str(rng.choice(job_types))
            assert dispatcher.job_types == model.types()
            s = dispatcher.choose(dispatcher.type_index[name])
            expected = model.candidates(name)
            if s == NO_BACKEND:
                assert not expected
                continue
            assert dispatcher.urls[s] in expected, (policy, dispatcher.urls[s], expected)
            leases.append((dispatcher.start(s), dispatcher.urls[s]))
            decisions += 1
        elif action == "release" and leases:
            lease, url = leases.pop(int(rng.integers(len(leases))))
            lease.release()
            if rng.random() < 0.3:
                lease.release()  # a second release gives nothing back
                released_twice += 1
        elif action == "add":
            backend = random_backend(rng, f"http://127.0.0.1:{next_port}")
            next_port += 1
            dispatcher.add(backend)
            model.spec[backend.url] = backend
            model.state[backend.url] = "active"
            model.ejected[backend.url] = False
        elif action == "drain" and current:
            url = str(rng.choice(current))
            s = dispatcher.slot_of[url]
            if model.state[url] == "draining":
                dispatcher.retire(s)  # the drain timer ran out: it leaves with requests in flight
            else:
                dispatcher.drain(s)
            model.state[url] = "draining" if model.state[url] == "active" else "retired"
        elif action == "patch" and current:
            url = str(rng.choice(current))
            backend = random_backend(rng, url)
            dispatcher.patch(dispatcher.slot_of[url], backend)
            model.spec[url] = backend
        elif action == "eject" and current:
            url = str(rng.choice(current))
            model.ejected[url] = not model.ejected[url]
            dispatcher.set_ejected(dispatcher.slot_of[url], model.ejected[url])
        # a draining backend leaves with its last lease
        open_urls = [url for _, url in leases]
        for url, state in model.state.items():
            if state == "draining" and url not in open_urls:
                model.state[url] = "retired"
        assert_same_fleet(dispatcher, model, leases)
    assert decisions > STEPS // 5 and released_twice > 0
    for lease, _ in leases:
        lease.release()
    assert dispatcher.accounting_violations == 0
    assert not dispatcher.in_flight.any()
    assert not (dispatcher.state == DRAINING).any()  # each left with its last lease


def assert_same_fleet(dispatcher: Dispatcher, model: FleetModel, leases) -> None:
    """The dispatcher's slots against the model: states, in-flight counts, specs, no violation."""
    names = {ACTIVE: "active", DRAINING: "draining", RETIRED: "retired"}
    held = Counter(lease.backend for lease, _ in leases)
    for s in range(dispatcher.n_backends):
        url = dispatcher.urls[s]
        assert names[int(dispatcher.state[s])] == model.state[url]
        assert dispatcher.in_flight[s] == held[s]
        if model.state[url] != "retired":
            assert dispatcher.slot_of[url] == s and dispatcher.backends[s] == model.spec[url]
            assert dispatcher.speed[s] == (model.spec[url].speed or dispatcher.speed[s])
            assert dispatcher.buffer[s] == (model.spec[url].buffer or 0)
    assert set(dispatcher.slot_of) == {url for url, state in model.state.items() if state != "retired"}
    assert dispatcher.accounting_violations == 0


def test_slots_stay_put_as_the_arrays_grow_and_a_lease_outlives_its_backend():
    dispatcher = dispatcher_of("jsq", ["http://127.0.0.1:22000"])
    lease = dispatcher.start(0)
    for i in range(1, 40):
        assert dispatcher.add(Backend(f"http://127.0.0.1:{22000 + i}")) == i
    assert dispatcher.capacity == 64 and dispatcher.urls[0] == "http://127.0.0.1:22000"
    assert dispatcher.in_flight[0] == 1 and dispatcher.requests[0] == 1  # copied into the larger arrays
    assert not dispatcher.drain(0)  # a request in flight: it drains
    assert set(dispatcher.choose(0) for _ in range(2000)) == set(range(1, 40))  # never the draining one
    dispatcher.retire(0)  # the drain timer: it leaves the fleet with its request in flight
    assert "http://127.0.0.1:22000" not in dispatcher.slot_of
    lease.release()
    lease.release()
    assert dispatcher.in_flight[0] == 0 and dispatcher.accounting_violations == 0
    assert dispatcher.add(Backend("http://127.0.0.1:22000")) == 40  # a new slot, never a retired one


def test_job_types_appear_and_disappear_with_their_backends_and_keep_their_index():
    dispatcher = dispatcher_of("jsq", ["http://127.0.0.1:22101,types=a"])
    a = dispatcher.type_index["a"]
    s = dispatcher.add(Backend("http://127.0.0.1:22102", types=("b",)))
    b = dispatcher.type_index["b"]
    assert dispatcher.job_types == ("a", "b") and {dispatcher.choose(b) for _ in range(100)} == {s}
    dispatcher.drain(s)
    assert dispatcher.job_types == ("a",) and "b" not in dispatcher.type_index
    assert dispatcher.choose(b) == NO_BACKEND  # a request already typed b finds no backend
    dispatcher.add(Backend("http://127.0.0.1:22103", types=("b", "c")))
    assert dispatcher.type_index == {"a": a, "b": b, "c": dispatcher.type_index["c"]}


def test_a_patched_speed_is_the_one_jfsq_ranks_on():
    """jfsq breaks ties between equal queues towards the fastest: patching the slowest to be the fastest
    moves every tie-break to it."""
    dispatcher = dispatcher_of(
        "jfsq", [f"http://127.0.0.1:{22200 + i},speed={speed}" for i, speed in enumerate([2, 1])]
    )
    assert {dispatcher.choose(0) for _ in range(50)} == {0}
    dispatcher.patch(1, Backend("http://127.0.0.1:22201", speed=4.0))
    assert {dispatcher.choose(0) for _ in range(50)} == {1}
    s = dispatcher.add(Backend("http://127.0.0.1:22202", speed=8.0))
    assert {dispatcher.choose(0) for _ in range(50)} == {s}
    dispatcher.patch(s, Backend("http://127.0.0.1:22202", speed=8.0, buffer=1))
    lease = dispatcher.start(s)
    assert dispatcher.is_full(s)
    lease.release()


# --- the fleet's changes: the backends file's difference, the admin API's checks ---------------------


def fleet_of(backends: list[str], **keys):
    """A Fleet on a proxy that has not started (no HTTP session: the changes here need none)."""
    from hetlb.gateway.fleet import Fleet
    from hetlb.gateway.http.proxy import Proxy
    from hetlb.gateway.metrics import Metrics

    config = ServeConfig.from_mapping({"backends": backends, "health_interval": 0, **keys})
    dispatcher = Dispatcher(config, seed=1)
    return Fleet(Proxy(config, dispatcher, Metrics(dispatcher)), say=lambda line: None)


def states(fleet) -> dict[str, str]:
    return {entry["url"]: entry["state"] for entry in fleet.entries()}


def test_a_backends_file_is_applied_as_a_difference():
    from hetlb.gateway.config import parse_backends

    async def run():
        fleet = fleet_of(["http://127.0.0.1:23001", "http://127.0.0.1:23002,speed=2"], drain=60)
        dispatcher = fleet.dispatcher
        lease = dispatcher.start(0)  # a request in flight at the first backend
        fleet.apply(parse_backends("backends", ["http://127.0.0.1:23002,speed=3", "http://127.0.0.1:23003"]), "test")
        assert states(fleet) == {url: state for url, state in [
            ("http://127.0.0.1:23001", "draining"), ("http://127.0.0.1:23002", "active"),
            ("http://127.0.0.1:23003", "active"),
        ]}  # fmt: skip
        assert dispatcher.speed[1] == 3.0 and len(fleet.gateway.base) == 3 == dispatcher.n_backends
        assert str(fleet.gateway.base[2]) == "http://127.0.0.1:23003"
        fleet.apply(parse_backends("backends", ["http://127.0.0.1:23001,buffer=4", "http://127.0.0.1:23003"]), "test")
        assert states(fleet) == {"http://127.0.0.1:23001": "active", "http://127.0.0.1:23003": "active"}
        assert dispatcher.slot_of["http://127.0.0.1:23001"] == 0 and dispatcher.buffer[0] == 4  # taken back
        assert dispatcher.slot_of.get("http://127.0.0.1:23002") is None  # nothing in flight: gone at once
        assert not fleet.drain_timers  # the timer of the one taken back was cancelled
        lease.release()
        assert states(fleet)["http://127.0.0.1:23001"] == "active" and dispatcher.accounting_violations == 0
        await fleet.stop()

    asyncio.run(run())


@pytest.mark.parametrize(
    "change,status,field",
    [
        ({"op": "add", "backend": {"url": "http://127.0.0.1:23001"}}, 409, "url"),
        ({"op": "add", "backend": {"url": "http://127.0.0.1:23009", "speed": "x"}}, None, "backend.speed"),
        ({"op": "add", "backend": "http://127.0.0.1:23009,types=a b"}, None, "backend.types"),
        ({"op": "drain", "url": "http://127.0.0.1:23009"}, 404, "url"),
        ({"op": "patch", "url": "http://127.0.0.1:23001", "changes": {"url": "http://x:1"}}, None, "backend.url"),
        ({"op": "patch", "url": "http://127.0.0.1:23001", "changes": [1]}, None, "backend"),
        ({"op": "patch", "url": "http://127.0.0.1:23001", "changes": {"buffer": -1}}, None, "backend.buffer"),
        ({"op": "rename"}, None, "op"),
    ],
)
def test_a_bad_change_names_its_field_and_changes_nothing(change, status, field):
    from hetlb.errors import InputError
    from hetlb.gateway.fleet import FleetError

    fleet = fleet_of(["http://127.0.0.1:23001,types=a"])
    before = (fleet.entries(), fleet.dispatcher.type_index)
    with pytest.raises((InputError, FleetError)) as raised:
        fleet.change(change)
    assert raised.value.field == field and getattr(raised.value, "status", None) == status
    assert (fleet.entries(), fleet.dispatcher.type_index) == before


def test_models_listed_reads_the_openai_list():
    from hetlb.gateway.fleet import models_listed

    listed = {"object": "list", "data": [{"id": "llama-3-8b"}, {"id": "lora/sql"}, {"id": "x" * 65}, {"id": 3}, "y"]}
    assert models_listed(listed) == ("llama-3-8b", "lora/sql")  # ids that are no job type name left out
    assert models_listed({"data": []}) == ()
    assert models_listed({"models": []}) is None and models_listed([{"id": "a"}]) is None
