"""hetlb loadgen: the arrival process it achieves (Poisson at the rate, open loop, spread over targets
and job types by their proportions; batches and an MMPP against their laws, and their bursts as
sent), M/M/1 through a real backend, its counts of blocking, errors and requests it could not send,
and its bad input."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import math

import numpy as np
import pytest
from aiohttp import web
from scipy import stats

from hetlb.cli import main
from hetlb.engines.backend import BackendFleet, BackendSpec
from hetlb.errors import InputError
from hetlb.load.open_loop import LoadGenerator, LoadSpec, format_load_result

from support.live_fleet import backend_process

ALPHA = 0.001
"""Level of each statistical check (its chance of a false alarm)."""
SEND_LAG_S = 0.005
"""The lateness the M/M/1 check allows a send and a backend's arrival (scheduling on a shared
machine)."""


def run(spec: LoadSpec, on_send=None) -> dict:
    return asyncio.run(LoadGenerator(spec, progress=False, on_send=on_send).run())


def test_poisson_spread_over_targets_and_types():
    """100 arrivals per second for 3 s on two backends: the number sent is Poisson(rate x time); the
    actual send epochs, given their number, are uniform on the window (KS) and their counts in 50 ms
    slices have the dispersion of Poisson counts (chi-square index of dispersion, two-sided: a
    periodic or closed-loop sender is too regular, a bursty one too variable); targets and job
    types follow their proportions (chi-square). The send lag (timer lateness, scheduling on a
    shared machine) moves a send by milliseconds: small against the window and the slices."""
    rate, seconds, slice_s = 100.0, 3.0, 0.05
    sends = []
    with backend_process(
        "--listen", "127.0.0.1:0", "--listen", "127.0.0.1:0", "--job-sizes", "deterministic",
        "--mean-service-ms", "0.5", count=2,
    ) as (_, urls):  # fmt: skip
        spec = LoadSpec(
            targets=tuple(urls), rate=rate, duration=seconds, seed=3, job_types={"a": 3, "b": 1}, shares=(1.0, 3.0)
        )
        generator = LoadGenerator(spec, progress=False, on_send=lambda *send: sends.append(send))
        result = asyncio.run(generator.run())
    n = result["requests"]
    assert abs(n - rate * seconds) < stats.norm.ppf(1 - ALPHA / 2) * math.sqrt(rate * seconds)
    assert result["answered"] == n == len(sends) and result["errors"] == 0 and result["blocking_probability"] == 0
    epochs = np.array([at for at, _, _ in sends])
    offsets = epochs - (epochs[0] - (epochs[1] - epochs[0]) / 2)  # the window starts about half a gap before
    assert stats.kstest(offsets / seconds, "uniform").pvalue > ALPHA
    counts = np.bincount((offsets // slice_s).astype(int), minlength=int(seconds / slice_s))[: int(seconds / slice_s)]
    dispersion = ((counts - counts.mean()) ** 2).sum() / counts.mean()
    low, high = stats.chi2.ppf([ALPHA / 2, 1 - ALPHA / 2], len(counts) - 1)
    assert low < dispersion < high
    targets = np.array([sum(target == url for _, target, _ in sends) for url in urls])
    types = np.array([sum(job_type == name for _, _, job_type in sends) for name in "ab"])
    for counts, probabilities in ((targets, [0.25, 0.75]), (types, [0.75, 0.25])):
        assert stats.chisquare(counts, np.array(probabilities) * counts.sum()).pvalue > ALPHA
    assert result["per_target"] == {url: int(count) for url, count in zip(urls, targets)}
    assert result["per_job_type"] == {"a": int(types[0]), "b": int(types[1])}
    assert result["per_backend"] == result["per_target"]  # no X-Backend: a direct hit counts its target


def drawn_epochs(spec: LoadSpec, count: int) -> np.ndarray:
    """The first ``count`` arrival epochs (s) the generator draws for ``spec``'s seed."""
    arrivals = LoadGenerator(spec, progress=False).arrivals(np.random.default_rng(spec.seed))
    return np.array([offset for offset, _, _ in itertools.islice(arrivals, count)])


def t_half_width(values: np.ndarray, level: float = ALPHA) -> float:
    return stats.t.ppf(1 - level / 2, len(values) - 1) * values.std(ddof=1) / math.sqrt(len(values))


def test_batch_arrivals_have_the_rate_and_geometric_sizes():
    """batch:mean=4 at 100 per second: the requests of a batch share its epoch; the batches' epochs
    are Poisson at 100 / 4 per second (their gaps exponential: KS), their sizes geometric of mean 4
    (mean within its interval, the law by chi-square), and the long-run rate 100 within the
    interval of batch means over 20 slices."""
    mean_batch, rate = 4.0, 100.0
    epochs = drawn_epochs(LoadSpec(("http://x",), rate, 1.0, seed=5, arrivals=f"batch:mean={mean_batch:g}"), 80_000)
    starts, sizes = np.unique(epochs, return_counts=True)
    starts, sizes = starts[:-1], sizes[:-1]  # the last batch may be cut
    gaps = np.diff(starts)
    assert stats.kstest(gaps, "expon", args=(0, mean_batch / rate)).pvalue > ALPHA
    assert abs(sizes.mean() - mean_batch) < t_half_width(sizes.astype(float))
    p = 1 / mean_batch
    k = np.arange(1, 16)
    expected = np.append((1 - p) ** (k - 1) * p, (1 - p) ** 15) * len(sizes)
    observed = np.append(np.bincount(np.minimum(sizes, 16), minlength=17)[1:16], np.sum(sizes >= 16))
    assert stats.chisquare(observed, expected).pvalue > ALPHA
    slices = np.array_split(sizes, 20), np.array_split(starts, 20)
    rates = np.array([s.sum() for s in slices[0]]) / np.array([t[-1] - t[0] for t in slices[1]])
    assert abs(rates.mean() - rate) < t_half_width(rates)


def mmpp_dispersion(rates: tuple[float, float], means: tuple[float, float], window: float) -> float:
    """Var N(t) / E N(t) of a two-phase MMPP's counts in a window of length t, from its definition:
    the rate process is a two-state Markov chain of stationary probabilities pi = means / sum, rates
    l1, l2 and autocovariance c exp(-s u), c = (l1 - l2)^2 pi1 pi2, s = 1/T1 + 1/T2; so
    Var N(t) = E N(t) + 2 c (t / s - (1 - exp(-s t)) / s^2)."""
    pi = np.array(means) / sum(means)
    mean_rate = float(pi @ np.array(rates))
    c = (rates[0] - rates[1]) ** 2 * pi[0] * pi[1]
    s = 1 / means[0] + 1 / means[1]
    variance = mean_rate * window + 2 * c * (window / s - (1 - math.exp(-s * window)) / s**2)
    return variance / (mean_rate * window)


def test_mmpp_arrivals_have_the_rate_and_the_dispersion():
    """mmpp:ratio=5,on=10,off=30 at 100 per second, time unit 20 ms (phases of 0.2 s and 0.6 s on
    average): the long-run rate is 100, and the index of dispersion of the counts in 0.5 s windows
    is the MMPP's (about 5.5, where Poisson counts give 1), each within a 99.9% interval of batch
    means over 20 slices of the run."""
    rate, unit_ms = 100.0, 20.0
    spec = LoadSpec(("http://x",), rate, 1.0, seed=6, arrivals="mmpp:ratio=5,on=10,off=30", time_unit_ms=unit_ms)
    epochs = drawn_epochs(spec, 400_000)
    window = 0.5
    counts = np.bincount((epochs // window).astype(int))[:-1]  # whole windows
    slices = np.array_split(counts, 20)
    rates = np.array([c.mean() / window for c in slices])
    dispersions = np.array([c.var(ddof=1) / c.mean() for c in slices])
    on_rate, off_rate = spec.arrivals.phase_rates(rate)
    expected = mmpp_dispersion((on_rate, off_rate), (10 * unit_ms / 1e3, 30 * unit_ms / 1e3), window)
    assert expected > 5
    assert abs(rates.mean() - rate) < t_half_width(rates)
    assert abs(dispersions.mean() - expected) < t_half_width(dispersions)


@pytest.mark.parametrize("arrivals", ["batch:mean=3", "mmpp:ratio=8,on=5,off=20"])
def test_bursts_are_sent_as_drawn(arrivals):
    """2 s of batches or MMPP traffic at 60 per second on a fast backend: every drawn arrival is sent
    (the count of sends is that of the drawn epochs in the window), on time (less the median lag,
    as the clocks' origins differ: half within 2 ms of their epoch, 95% within 20 ms, on a shared
    machine, against 50 ms between batches and phases of 100 ms and more), and a batch's requests leave
    together: one after the other as the event loop starts them, a median gap under 2 ms, against
    50 ms between batches."""
    sends = []
    with backend_process(
        "--listen", "127.0.0.1:0", "--job-sizes", "deterministic", "--mean-service-ms", "0.5"
    ) as (_, (url,)):  # fmt: skip
        spec = LoadSpec((url,), 60.0, 2.0, seed=8, arrivals=arrivals)
        generator = LoadGenerator(spec, progress=False, on_send=lambda at, *_: sends.append(at))
        result = asyncio.run(generator.run())
    epochs = drawn_epochs(spec, 2_000)
    epochs = epochs[epochs < spec.duration]
    sent = np.array(sends)
    assert len(sent) == len(epochs) == result["answered"]
    deviation = np.abs((sent - epochs) - np.median(sent - epochs))
    assert np.median(deviation) < 0.002 and np.percentile(deviation, 95) < 0.02
    if arrivals.startswith("batch"):
        _, first, sizes = np.unique(epochs, return_index=True, return_counts=True)
        gaps = [(sent[i + n - 1] - sent[i]) / (n - 1) for i, n in zip(first, sizes) if n > 1]
        assert len(gaps) > 10 and np.median(gaps) < 0.002


def test_open_loop_does_not_wait_for_answers():
    """Service 100 ms, one at a time, 60 arrivals per second for 0.5 s: the sends go on while the
    answers queue (a closed loop would keep one request outstanding per connection)."""
    peak = []

    with backend_process(
        "--listen", "127.0.0.1:0", "--job-sizes", "deterministic", "--mean-service-ms", "100"
    ) as (_, (url,)):  # fmt: skip
        spec = LoadSpec(targets=(url,), rate=60.0, duration=0.5, timeout=30.0)
        generator = LoadGenerator(
            spec, progress=False, on_send=lambda *_: peak.append(generator.measurements.in_flight)
        )
        result = asyncio.run(generator.run())
    assert max(peak) >= 10 and result["answered"] == result["requests"]


def model_path_sojourn_ms(spec: LoadSpec, backend_seed: int, mean_service_ms: float) -> float:
    """The mean sojourn (ms) of the measured requests on the model's own sample path: the scheduled
    arrival epochs of ``spec``'s seed through a FIFO server that serves them one at a time with the
    service times hetlb backend draws for ``backend_seed`` (the Lindley recursion)."""
    fleet = BackendFleet([BackendSpec("127.0.0.1", 0)], mean_service_ms=mean_service_ms, seed=backend_seed)
    service_times = fleet.backends[0].service_times
    departure, sojourns = -math.inf, []
    for offset, _, _ in LoadGenerator(spec, progress=False).arrivals(np.random.default_rng(spec.seed)):
        if offset >= spec.warmup + spec.duration:
            break
        departure = max(offset, departure) + service_times.draw()
        if offset >= spec.warmup:
            sojourns.append(departure - offset)
    return 1e3 * float(np.mean(sojourns))


def test_mm1_through_a_backend():
    """Poisson arrivals at 40/s on an exponential backend of mean 10 ms (M/M/1, rho = 0.4). With the
    seeds fixed, the backend's queue is the model's sample path for them (whose mean, for these
    seeds, lies below the law's 1 / (mu - lambda) = 16.67 ms, as a run of 244 jobs may): the
    measured mean's interval (batch means) meets [W, W + the measured path overhead + SEND_LAG_S],
    W that path's mean sojourn, since the path to the backend and the timers only add time."""
    rate, mean_service_ms, seed = 40.0, 10.0, 5
    spec = LoadSpec(targets=("http://127.0.0.1:1",), rate=rate, duration=6.0, warmup=0.5, seed=seed, batches=16)
    path_ms = model_path_sojourn_ms(spec, seed, mean_service_ms)
    with backend_process("--listen", "127.0.0.1:0", "--mean-service-ms", str(mean_service_ms), "--seed", str(seed)) as (
        _,
        (url,),
    ):
        result = run(dataclasses.replace(spec, targets=(url,)))
    low, high = result["mean_response_time_ci"]
    assert low <= path_ms + result["mean_overhead"] + SEND_LAG_S * 1e3 and high >= path_ms
    sojourn_low = result["mean_backend_sojourn"] - (result["mean_response_time"] - low)
    assert sojourn_low <= path_ms + SEND_LAG_S * 1e3


async def in_process_server(handler):
    runner = web.ServerRunner(web.Server(handler), shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"


def test_blocking_errors_timeouts_and_the_in_flight_bound():
    async def answer(request):
        status = {"/full": 503, "/broken": 500, "/hang": 0}[request.path]
        if status == 0:
            await asyncio.sleep(5)
        return web.Response(status=status, headers={"X-Backend": "http://b"})

    async def scenario():
        runner, url = await in_process_server(answer)
        try:
            full = await LoadGenerator(LoadSpec((url,), 200.0, 0.3, path="/full"), progress=False).run()
            broken = await LoadGenerator(LoadSpec((url,), 200.0, 0.3, path="/broken"), progress=False).run()
            hang = await LoadGenerator(
                LoadSpec((url,), 200.0, 0.3, path="/hang", timeout=1.0, max_in_flight=3), progress=False
            ).run()
        finally:
            await runner.cleanup()
        refused = await LoadGenerator(LoadSpec((url,), 200.0, 0.2), progress=False).run()
        return full, broken, hang, refused

    full, broken, hang, refused = asyncio.run(scenario())
    assert full["blocking_probability"] == 1.0 and full["blocked"] == full["requests"] > 0 and full["errors"] == 0
    assert broken["errors_by_kind"] == {"500": broken["requests"]} and broken["blocked"] == 0
    assert hang["errors_by_kind"] == {"timeout": 3} and hang["requests"] == 3 and hang["not_sent"] > 0
    assert refused["errors_by_kind"] == {"connection": refused["requests"]}
    assert refused["mean_response_time"] is None and refused["mean_response_time_ci"] == [None, None]
    assert "mean response time  n/a ms" in format_load_result(refused)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--rate", "0"], "--rate: must be a finite number > 0"),
        (["--shares", "1,2"], "--shares: give one share per target (1), got 2"),
        (["--job-types", "a=x"], "--job-types: the proportion of 'a' must be a number"),
        (["--job-types", "a=0"], "--job-types: every value must be finite and > 0"),
        (["--path", "x"], "--path: must start with /"),
        (["--method", "G ET"], "--method: must be an HTTP method"),
        (["--target", "ftp://x"], "--target: must be an http:// or https:// URL"),
        (["--arrivals", "mmpp:ratio=2"], "--arrivals: mmpp takes ratio=...,on=...,off=..."),
        (["--arrivals", "batch:mean=0.5"], "--arrivals mean: must be a finite number >= 1"),
        (["--time-unit-ms", "0"], "--time-unit-ms: must be a finite number > 0"),
    ],
)
def test_bad_input_is_one_line(argv, message, capsys):
    defaults = {"--target": "http://127.0.0.1:9", "--rate": "10", "--duration": "1"}
    for flag, value in defaults.items():
        if flag not in argv:
            argv = [flag, value, *argv]
    assert main(["loadgen", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hetlb: error: {message}") and err.count("\n") == 1


def test_spec_checks_itself():
    with pytest.raises(InputError, match="--batches"):
        LoadSpec(("http://x",), 1.0, 1.0, batches=1)
