"""hetlb backend, the model's server on HTTP: its FIFO queue against the definition of a single FIFO
server, its multi-slot server against the definition of one with concurrency c and a rate curve
and against M/M/c, M/M/1 and a birth-death chain, its service times against their laws, and real
processes on 127.0.0.1 (one at a time, the number in system, the seed, faults, bad input, stopping;
a multi-slot backend fed by the load generator against the same closed forms)."""

from __future__ import annotations

import asyncio
import math
import time

import aiohttp
import numpy as np
import pytest
from scipy import stats

from hetlb.constants import UNLIMITED_CONCURRENCY
from hetlb.engines.backend import BackendSpec, FifoServer, MultiSlotServer, ServiceTimes, parse_listen
from hetlb.errors import InputError
from hetlb.load.open_loop import LoadGenerator, LoadSpec
from hetlb.model.job_sizes import JobSizes
from hetlb.model.servers import RateCurve
from hetlb.wire.runtime import EpochClock

from support.live_fleet import backend_process

# --- the queue and the service times, without a network ------------------------------------------


def test_parse_listen_ports_ranges_and_speed():
    assert parse_listen("127.0.0.1:0") == [BackendSpec("127.0.0.1", 0, 1.0)]
    assert parse_listen("127.0.0.1:9001-9003,speed=0.25") == [
        BackendSpec("127.0.0.1", port, 0.25) for port in (9001, 9002, 9003)
    ]
    assert parse_listen("[::1]:80") == [BackendSpec("::1", 80, 1.0)]
    assert parse_listen("127.0.0.1:0,concurrency=8,rate_curve=saturating:alpha=0.2,speed=2") == [
        BackendSpec("127.0.0.1", 0, 2.0, 8, RateCurve("saturating", alpha=0.2))
    ]
    assert parse_listen("127.0.0.1:0,rate_curve=table:1,1.8,2.4,concurrency=inf") == [
        BackendSpec("127.0.0.1", 0, 1.0, UNLIMITED_CONCURRENCY, RateCurve("table", values=(1.0, 1.8, 2.4)))
    ]


@pytest.mark.parametrize(
    "text, message",
    [
        ("9001", "--listen: must be HOST:PORT"),
        ("127.0.0.1:x", "--listen: the port must be an integer"),
        ("127.0.0.1:70000", "--listen: ports lie in [0, 65535]"),
        ("127.0.0.1:9003-9001", "--listen: a port range needs 0 < FIRST <= LAST"),
        ("127.0.0.1:0,speed=0", "--listen speed: must be a finite number > 0"),
        ("127.0.0.1:0,speed=fast", "--listen speed: must be a number > 0"),
        ("127.0.0.1:0,sped=2", "--listen: options are speed=S"),
        ("127.0.0.1:0,speed=1,speed=2", "--listen: options are speed=S"),
        ("127.0.0.1:0,concurrency=0", "concurrency: must be an integer"),
        ("127.0.0.1:0,rate_curve=fast", "rate_curve: must be independent, shared"),
        ("127.0.0.1:0,rate_curve=table:1,3", "rate_curve.values: phi(b)/b must be non-increasing"),
    ],
)
def test_parse_listen_refuses_bad_specs(text, message):
    with pytest.raises(InputError) as error:
        parse_listen(text)
    assert str(error.value).startswith(message)


def test_fifo_server_is_one_fifo_server():
    """Against the definition: each job starts at or after its arrival and after the previous job
    left (one at a time, in arrival order), the server never idles while a job waits, and the
    number in system at t is the count of jobs with arrival <= t < departure."""
    rng = np.random.default_rng(1)
    arrivals = np.cumsum(rng.exponential(1.0, 2_000))
    services = rng.exponential(0.9, 2_000)
    server = FifoServer()
    departures = np.array([server.arrive(a, s) for a, s in zip(arrivals, services)])
    starts = departures - services
    assert np.all(starts >= arrivals - 1e-12)
    assert np.all(starts[1:] >= departures[:-1] - 1e-9)
    waited = starts > arrivals + 1e-9
    assert np.allclose(starts[1:][waited[1:]], departures[:-1][waited[1:]])
    assert np.any(waited)  # the check above is not vacuous
    # replay, asking the number in system at a moment before the next arrival
    replay = FifoServer()
    for index, (a, s) in enumerate(zip(arrivals, services)):
        replay.arrive(a, s)
        t = a + rng.uniform(0, 1.0)
        if index + 1 < len(arrivals) and t >= arrivals[index + 1]:
            continue
        expected = int(np.sum((arrivals[: index + 1] <= t) & (departures[: index + 1] > t)))
        assert replay.in_system(t) == expected


def departures_of(server: MultiSlotServer, arrivals, services) -> np.ndarray:
    """Each job's departure epoch through ``server`` (the jobs arrive at ``arrivals``)."""
    departed: dict[int, float] = {}
    server.on_departure = departed.__setitem__
    jobs = [server.arrive(a, x) for a, x in zip(arrivals, services)]
    server.advance(math.inf)
    return np.array([departed[job] for job in jobs])


def test_multi_slot_server_by_hand():
    """shared, c = 2: jobs of 1 and 3 s at 0 share the rate (1/2 each), a third of 1 s at 1 waits
    (c full): the first leaves at 2; then the second (2 s left) and the third share until the
    third leaves at 4, and the second, alone for its last second, leaves at 5. independent,
    c = 2: M/M/c's servers: the third starts when the first leaves. saturating, alpha 1/2: two
    jobs in service each advance at phi(2) / 2 = 2/3."""
    shared = departures_of(MultiSlotServer(2, RateCurve("shared")), [0.0, 0.0, 1.0], [1.0, 3.0, 1.0])
    assert shared.tolist() == [2.0, 5.0, 4.0]
    independent = departures_of(MultiSlotServer(2, RateCurve("independent")), [0.0, 0.0, 0.5], [1.0, 3.0, 1.0])
    assert independent.tolist() == [1.0, 3.0, 2.0]
    saturating = departures_of(MultiSlotServer(3, RateCurve("saturating", alpha=0.5)), [0.0, 0.0], [1.0, 1.0])
    assert np.allclose(saturating, [1.5, 1.5])


@pytest.mark.parametrize(
    "concurrency, curve",
    [(3, RateCurve("independent")), (4, RateCurve("shared")), (8, RateCurve("saturating", alpha=0.3)),
     (UNLIMITED_CONCURRENCY, RateCurve("table", values=(1.0, 1.5, 1.8)))],
)  # fmt: skip
def test_multi_slot_server_against_its_definition(concurrency, curve):
    """A random sample path, checked job by job against the definition: the jobs in service at any
    moment are the earliest arrived min(n, c) of those present, and each job's attained service,
    the integral of phi(b(t)) / b(t) over the time it was in service, equals its size."""
    rng = np.random.default_rng(2)
    arrivals = np.cumsum(rng.exponential(0.4, 400))
    services = rng.exponential(1.0, 400)
    departures = departures_of(MultiSlotServer(concurrency, curve), arrivals, services)
    assert np.all(departures > arrivals)
    epochs = np.unique(np.concatenate([arrivals, departures]))
    attained = np.zeros(len(arrivals))
    for start, end in zip(epochs[:-1], epochs[1:]):
        middle = (start + end) / 2
        present = np.flatnonzero((arrivals <= middle) & (departures > middle))  # in arrival order
        serving = present[: min(len(present), concurrency)]
        if len(serving):
            attained[serving] += float(curve.per_job_rate(len(serving))) * (end - start)
    assert np.allclose(attained, services, rtol=1e-9, atol=1e-9)


def erlang_c_mean_sojourn(rate: float, mean_service: float, servers: int) -> float:
    """The M/M/c mean sojourn (Erlang's C formula)."""
    offered = rate * mean_service
    rho = offered / servers
    terms = sum(offered**k / math.factorial(k) for k in range(servers))
    last = offered**servers / math.factorial(servers) / (1 - rho)
    wait_probability = last / (terms + last)
    return mean_service + wait_probability * mean_service / (servers - rho * servers)


def birth_death_mean_sojourn(rate: float, mean_service: float, concurrency: int, curve: RateCurve) -> float:
    """The mean sojourn of one server of exponential sizes: the birth-death chain of births
    ``rate`` and deaths phi(min(n, c)) / mean_service, solved in a few lines, by Little's law."""
    n = np.arange(1, 20_000)
    deaths = curve.phi(np.minimum(n, concurrency)) / mean_service
    weights = np.concatenate([[0.0], np.cumsum(np.log(rate / deaths))])
    probabilities = np.exp(weights - weights.max())
    probabilities /= probabilities.sum()
    return float((np.arange(len(probabilities)) * probabilities).sum() / rate)


@pytest.mark.parametrize(
    "concurrency, curve, rate",
    [(4, RateCurve("independent"), 3.0), (4, RateCurve("shared"), 0.7), (8, RateCurve("saturating", alpha=0.3), 2.2)],
)
def test_multi_slot_server_means_against_closed_forms(concurrency, curve, rate):
    """M/M/c (Erlang C), M/M/1 (shared at any c: 1 / (1 - rate)) and the saturating birth-death
    chain against the timeline's mean sojourn of 100,000 jobs, within a 99.9% batch-means
    interval (20 batches); the closed forms agree with the chain's solution."""
    rng = np.random.default_rng(11)
    arrivals = np.cumsum(rng.exponential(1 / rate, 100_000))
    services = rng.exponential(1.0, 100_000)
    sojourns = departures_of(MultiSlotServer(concurrency, curve), arrivals, services) - arrivals
    exact = birth_death_mean_sojourn(rate, 1.0, concurrency, curve)
    if curve.kind == "independent":
        assert exact == pytest.approx(erlang_c_mean_sojourn(rate, 1.0, concurrency), rel=1e-9)
    if curve.kind == "shared":
        assert exact == pytest.approx(1 / (1 - rate), rel=1e-9)
    batch_means = sojourns[10_000:].reshape(20, -1).mean(axis=1)
    half = stats.t.ppf(1 - 0.001 / 2, 19) * batch_means.std(ddof=1) / math.sqrt(20)
    assert abs(batch_means.mean() - exact) < half


@pytest.mark.parametrize("kind, scv", [("exponential", 1.0), ("hyperexponential", 4.0), ("deterministic", 0.0)])
def test_service_times_have_the_mean_and_law(kind, scv):
    """Mean 20 ms / speed 0.5 = 40 ms within a 99.9% t interval (Bonferroni over the three laws);
    exponential by a KS test; the H2's second moment (1 + scv) mean^2 within its interval."""
    mean_s = 0.040
    times = ServiceTimes(JobSizes(kind, scv), mean_s, np.random.default_rng(7))
    sample = np.array([times.draw() for _ in range(20_000)])
    if kind == "deterministic":
        assert np.all(sample == mean_s)
        return
    half = stats.t.ppf(1 - 0.001 / 2 / 3, len(sample) - 1) * sample.std(ddof=1) / math.sqrt(len(sample))
    assert abs(sample.mean() - mean_s) < half
    if kind == "exponential":
        assert stats.kstest(sample, "expon", args=(0, mean_s)).pvalue > 0.001
    else:
        squares = (sample / mean_s) ** 2
        half = stats.t.ppf(1 - 0.001 / 2, len(sample) - 1) * squares.std(ddof=1) / math.sqrt(len(sample))
        assert abs(squares.mean() - (1 + scv)) < half


# --- real processes ------------------------------------------------------------------------------


def test_the_epoch_clock_wakes_each_future_at_its_epoch_never_before():
    """Futures set in any order are woken in the order of their epochs, none before its epoch on the
    host's monotonic clock; a cancelled one stays cancelled; stop() ends the thread."""

    async def run():
        loop = asyncio.get_running_loop()
        clock = EpochClock(loop)
        start = time.monotonic()
        offsets = [0.03, 0.01, 0.05, 0.02, 0.02, 0.0]
        woken: list[tuple[int, float]] = []
        futures = []
        for i, offset in enumerate(offsets):
            future = loop.create_future()
            future.add_done_callback(lambda f, i=i: woken.append((i, time.monotonic())))
            clock.wake_at(start + offset, future)
            futures.append(future)
        futures[2].cancel()
        await asyncio.gather(*(f for i, f in enumerate(futures) if i != 2))
        await asyncio.sleep(0.08)  # past the cancelled one's epoch
        clock.stop()
        return start, offsets, woken, futures, clock

    start, offsets, woken, futures, clock = asyncio.run(run())
    order = [i for i, _ in woken if i != 2]
    assert order == sorted(order, key=lambda i: (offsets[i], i))
    assert all(at >= start + offsets[i] for i, at in woken if i != 2)
    assert futures[2].cancelled() and not clock.thread.is_alive()


async def get(session, url, **kwargs):
    async with session.get(url, **kwargs) as response:
        return response.status, dict(response.headers), await response.read()


def test_one_at_a_time_in_arrival_order():
    """k requests sent together to a deterministic backend of service d: the i-th answer (i = 0..k-1)
    comes no earlier than (i + 1) d after the first was sent, and leaves k - 1 - i behind it."""
    d_ms, k = 40.0, 5

    async def scenario(url):
        async with aiohttp.ClientSession() as session:
            sent = time.monotonic()
            tasks = [asyncio.create_task(get(session, f"{url}/job/{i}")) for i in range(k)]
            await asyncio.sleep(d_ms / 4e3)
            _, _, load = await get(session, f"{url}/load")
            done = []
            for task in asyncio.as_completed(tasks):
                status, headers, _ = await task
                done.append((time.monotonic() - sent, status, headers))
            return load, done

    with backend_process("--listen", "127.0.0.1:0", "--job-sizes", "deterministic", "--mean-service-ms", str(d_ms)) as (
        _,
        (url,),
    ):
        load, done = asyncio.run(scenario(url))
    assert load == b'{"queue_length": %d}' % k
    done.sort(key=lambda item: item[0])
    for i, (elapsed, status, headers) in enumerate(done):
        assert status == 200
        assert float(headers["X-Service-Ms"]) == d_ms
        assert elapsed >= (i + 1) * d_ms / 1e3
        assert float(headers["X-Sojourn-Ms"]) >= d_ms
    assert sorted(int(headers["X-Queue-Length"]) for _, _, headers in done) == list(range(k))


def service_times_of(url: str, n: int) -> list[float]:
    async def scenario():
        async with aiohttp.ClientSession() as session:
            return [float((await get(session, url))[1]["X-Service-Ms"]) for _ in range(n)]

    return asyncio.run(scenario())


def test_same_seed_same_service_times_and_speed_scales_them():
    common = ["--mean-service-ms", "1"]
    with backend_process("--listen", "127.0.0.1:0", "--listen", "127.0.0.1:0,speed=4", *common, count=2) as (
        _,
        urls,
    ):
        first = service_times_of(urls[0], 20)
        fast = service_times_of(urls[1], 20)
    with backend_process("--listen", "127.0.0.1:0", *common, "--seed", "0") as (_, (url,)):
        again = service_times_of(url, 20)
    with backend_process("--listen", "127.0.0.1:0", *common, "--seed", "1") as (_, (url,)):
        other = service_times_of(url, 20)
    assert first == again and first != other
    assert len(set(first)) == 20 and not set(fast) & set(first)  # each backend its own stream


def test_faults_error_and_stall():
    async def scenario(url):
        async with aiohttp.ClientSession() as session:
            status, headers, _ = await get(session, url)
            assert status == 500 and "X-Queue-Length" in headers
            return status

    with backend_process("--listen", "127.0.0.1:0", "--mean-service-ms", "1", "--error-probability", "1") as (
        _,
        (url,),
    ):
        assert asyncio.run(scenario(url)) == 500

    async def stalled(url):
        async with aiohttp.ClientSession() as session:
            with pytest.raises(asyncio.TimeoutError):
                await get(session, url, timeout=aiohttp.ClientTimeout(total=0.3))
            status, headers, body = await get(session, f"{url}/load")
            return status, headers, body, await get(session, f"{url}/healthz")

    with backend_process("--listen", "127.0.0.1:0", "--stall-probability", "1") as (child, (url,)):
        status, headers, body, health = asyncio.run(stalled(url))
        assert (status, body) == (200, b'{"queue_length": 0}') and headers["X-Queue-Length"] == "0"
        assert health[0] == 200 and health[2] == b"ok"
        assert child.stop() == 0  # SIGTERM: exit 0, a stalled request does not hold it


def test_sigterm_exits_0_and_bad_input_is_one_line(capsys):
    from hetlb.cli import main

    assert main(["backend", "--listen", "127.0.0.1:0,speed=-1"]) == 2
    assert capsys.readouterr().err == "hetlb: error: --listen speed: must be a finite number > 0, got -1.0\n"
    assert main(["backend", "--listen", "127.0.0.1:0", "--error-probability", "2"]) == 2
    assert "--error-probability: must be a number in [0, 1]" in capsys.readouterr().err
    with backend_process("--listen", "127.0.0.1:0") as (child, (url,)):
        port = url.rsplit(":", 1)[1]
        assert main(["backend", "--listen", f"127.0.0.1:{port}"]) == 2
        assert capsys.readouterr().err.startswith(f"hetlb: error: --listen: cannot listen on 127.0.0.1:{port}")
        assert child.stop() == 0


def test_a_disconnected_clients_job_stays_in_the_queue():
    """Deterministic service d: a first request whose client gives up after d/4, then a second one;
    the second answer comes no earlier than 2d after the first was sent (the first job was served
    all the same), and /load counted both meanwhile."""
    d_ms = 200.0

    async def scenario(url):
        async with aiohttp.ClientSession() as session:
            sent = time.monotonic()
            with pytest.raises(asyncio.TimeoutError):
                await get(session, f"{url}/first", timeout=aiohttp.ClientTimeout(total=d_ms / 4e3))
            second = asyncio.create_task(get(session, f"{url}/second"))
            await asyncio.sleep(0.01)
            _, _, load = await get(session, f"{url}/load")
            status, headers, _ = await second
            return load, status, headers, time.monotonic() - sent

    with backend_process(
        "--listen", "127.0.0.1:0", "--job-sizes", "deterministic", "--mean-service-ms", str(d_ms)
    ) as (_, (url,)):  # fmt: skip
        load, status, headers, elapsed = asyncio.run(scenario(url))
    assert load == b'{"queue_length": 2}' and status == 200
    assert elapsed >= 2 * d_ms / 1e3 and float(headers["X-Sojourn-Ms"]) >= d_ms


def sojourn_interval(spec: LoadSpec, batches: int = 10) -> tuple[float, float, dict]:
    """Send ``spec``'s Poisson load: the 99.9% batch-means interval (``batches`` slices of the
    window, each several times the queue's relaxation time, so that their means are nearly
    independent) of the backend's sojourns (X-Sojourn-Ms, the model's timeline), in ms, and the
    load's result."""
    generator = LoadGenerator(spec, progress=False)
    result = asyncio.run(generator.run())
    m = generator.measurements
    offsets, sojourns = np.frombuffer(m.send_offset), np.frombuffer(m.sojourn)
    batch = np.minimum((offsets / spec.duration * batches).astype(int), batches - 1)
    means = np.bincount(batch, weights=sojourns, minlength=batches) / np.bincount(batch, minlength=batches)
    half = stats.t.ppf(1 - 0.001 / 2, batches - 1) * means.std(ddof=1) / math.sqrt(batches)
    return means.mean() - half, means.mean() + half, result


@pytest.mark.parametrize(
    "concurrency, curve, load",
    [(4, "independent", 0.7), (4, "shared", 0.5), (8, "saturating:alpha=0.3", 0.7)],
)
def test_a_multi_slot_backend_under_poisson_load(concurrency, curve, load):
    """One backend of concurrency c and a rate curve, mean 10 ms alone in service, fed by the load
    generator's Poisson arrivals for 5 s: its sojourns' interval holds the exact mean (M/M/c for
    independent, M/M/1 for shared, the birth-death chain for saturating: the formulas checked
    above), every request is answered, and the answers' path adds little (timer lateness and
    loopback: the mean overhead below 5 ms)."""
    mean_ms = 10.0
    rate_curve = RateCurve.parse(curve)
    rate = load * float(rate_curve.phi(concurrency)) / mean_ms * 1e3  # per second
    exact = birth_death_mean_sojourn(rate / 1e3, mean_ms, concurrency, rate_curve)  # ms
    arguments = ["--listen", "127.0.0.1:0", "--mean-service-ms", str(mean_ms), "--seed", "3"]
    with backend_process(*arguments, "--concurrency", str(concurrency), "--rate-curve", curve) as (_, (url,)):
        low, high, result = sojourn_interval(LoadSpec((url,), rate, duration=5.0, warmup=0.5, seed=4))
    assert result["answered"] == result["requests"] > 0.8 * rate * 5
    assert low < exact < high
    assert result["mean_overhead"] < 5.0
