"""The continuous simulator with prefix caches (docs/background/prefix-caches.md), each figure held to
something independent of the kernels: LRU hit ratios under independent requests
(hetlb.theory.lru), M/M/1 and M/G/1 (Pollaczek-Khinchine), the exact solution of sed, conservation
laws, and the runs without caches, bit for bit.

Comparisons use Student-t intervals over independent replications, Bonferroni-corrected over the
comparisons of each test (family level FAMILY_ALPHA)."""

import math

import numpy as np
import pytest

import hetlb
from hetlb.errors import InputError
from hetlb.theory import queues
from hetlb.theory.exact import solve_exact
from hetlb.theory.lru import lru_hit_ratio, zipf_popularity

from support.statistics import bonferroni_t_halfwidth

FAMILY_ALPHA = 0.01


def within(samples, expected, comparisons=1) -> tuple[bool, str]:
    samples = np.asarray(samples, dtype=float)
    half = bonferroni_t_halfwidth(samples, FAMILY_ALPHA, comparisons)
    return abs(samples.mean() - expected) <= half, f"{samples.mean():.5g} +- {half:.3g} against {expected:.5g}"


# --- (a) without caches, every result is today's --------------------------------------------------

NO_EFFECT = dict(cache_blocks=[3, 5, 2, 4], prompts="shared:count=1,blocks=3,zipf=1,unique=2", prefill_work=0.0)
"""Caches that change no job's work (W = 0) and draw nothing (one prefix, deterministic prefill)."""


@pytest.mark.parametrize("policy", ["jsq", "jfsq", "sed", "pod", "random", "jiq", "jsq-lisf", "weighted-random"])
@pytest.mark.parametrize("graph", [None, [[0, 1, 2], [1, 2, 3]]])
@pytest.mark.parametrize("servers", [{}, dict(concurrency=[1, 3, 2, 4], rate_curve="saturating:alpha=0.3")])
def test_caches_that_change_nothing_give_the_run_without_caches_bit_for_bit(policy, graph, servers):
    """The loops with caches (the copy of concurrency 1's without numba's runtime, and the multi-slot
    loop following its heaps) with caches that change no job's work and draw no random number give
    exactly the numbers of the loops without them: the cache code adds no draw, no rounding and no
    event."""
    common = dict(
        speeds=[2.0, 1.0, 1.0, 0.5],
        arrival_rate=[1.2, 1.4] if graph else 2.6,
        graph=graph,
        buffer=[4, 3, 5, 2],
        **servers,
    )
    plain = hetlb.simulate(hetlb.System.from_speeds(**common), policy, jobs=4000, warmup=5.0, seed=7)
    cached = hetlb.simulate(hetlb.System.from_speeds(**common, **NO_EFFECT), policy, jobs=4000, warmup=5.0, seed=7)
    old, new = plain.runs[0].to_dict(), cached.runs[0].to_dict()
    for name in ("events", "wall_seconds", "events_per_second"):
        old.pop(name), new.pop(name)
    caches = new.pop("caches")
    for name in [key for key in new if key not in old]:
        new.pop(name)
    assert new == old
    assert np.array_equal(plain.runs[0].histogram, cached.runs[0].histogram)
    assert caches["blocks_hit"] > 0  # the caches did work: every job after the first hits its prefix


def test_a_result_without_caches_has_none_of_their_figures():
    system = hetlb.System.from_speeds([1.0, 0.5], load=0.6)
    result = hetlb.simulate(system, "jsq", jobs=2000, seed=1)
    assert not result.has_caches and result.mean_ttft is None and result.ttft_histogram is None
    text = result.to_json()
    for name in ("ttft", "cache", "prefill", "load_all_misses"):
        assert name not in text
    assert result.runs[0].ttft_p50 is None and result.runs[0].server_cache_hit_ratio is None


def test_eft_without_caches_is_sed_against_the_exact_solution():
    """No cache: every match 0, U_s = n_s, and eft's key is sed's (n_s + 1) / mu_s."""
    system = hetlb.System.from_speeds([2.0, 1.0, 0.5], arrival_rate=2.6, buffer=3)
    exact = solve_exact(system, "sed")
    result = hetlb.simulate(system, "eft", jobs=20_000, warmup=20.0, replications=10, seed=11)
    for measure in ("mean_response_time", "blocking_probability"):
        ok, detail = within([getattr(run, measure) for run in result.runs], getattr(exact, measure), 2)
        assert ok, f"{measure}: {detail}"


# --- (b) one server, prefixes of one block: Che's model exactly ------------------------------------


def test_one_server_hits_as_an_lru_under_independent_requests():
    """One server, K prefixes of one block, C blocks, W = 0: the jobs start in FIFO order, their
    prefixes i.i.d., so the block hit ratio is the LRU's under independent requests; and so is each
    popularity rank's."""
    count, zipf, capacity = 10, 0.8, 3
    system = hetlb.System.from_speeds(
        [1.0], load=0.7, cache_blocks=capacity, prompts=f"shared:count={count},blocks=1,zipf={zipf},unique=0"
    )
    theory = lru_hit_ratio(zipf_popularity(count, zipf), capacity)
    result = hetlb.simulate(system, "jsq", jobs=20_000, warmup=50.0, replications=10, seed=5)
    ranks = 3
    ok, detail = within([run.cache_hit_ratio for run in result.runs], theory.hit_ratio, 1 + ranks)
    assert ok, detail
    for k in range(ranks):
        rank_ratio = [run.rank_blocks_hit[k] / run.rank_blocks_requested[k] for run in result.runs]
        ok, detail = within(rank_ratio, theory.item_hit[k], 1 + ranks)
        assert ok, f"rank {k + 1}: {detail}"
    assert result.cache_hit_ratio == pytest.approx(np.mean([run.cache_hit_ratio for run in result.runs]))


# --- (c) one server, one prefix that always hits: M/M/1 --------------------------------------------


def test_one_prefix_that_every_job_after_the_first_hits_is_mm1():
    arrival_rate, speed, blocks, work = 0.6, 1.0, 4, 0.5
    system = hetlb.System.from_speeds(
        [speed],
        arrival_rate=arrival_rate,
        cache_blocks=blocks + 2,
        prompts=f"shared:count=1,blocks={blocks},zipf=1,unique=0",
        prefill_work=work,
    )
    result = hetlb.simulate(system, "eft", jobs=30_000, warmup=50.0, replications=10, seed=2)
    for run in result.runs:
        assert run.cache_hit_ratio == 1.0 and run.blocks_hit == blocks * run.completed_jobs
        assert run.mean_prefill_saved == pytest.approx(work * blocks)
        assert run.mean_ttft == pytest.approx(run.mean_waiting_time, rel=1e-9)  # no prefill left
    ok, detail = within(
        [run.mean_response_time for run in result.runs], queues.mm1_mean_response_time(arrival_rate, speed)
    )
    assert ok, detail


# --- (d) hits known exactly, deterministic or exponential prefill: M/G/1 ----------------------------


@pytest.mark.parametrize("law", ["deterministic", "exponential"])
def test_a_known_miss_per_job_gives_pollaczek_khinchine(law):
    """One prefix of B blocks (always a hit after the first job) and U blocks of its own (never a
    hit): the prefill is W U (or exponential of that mean), the service S = W U + X at speed mu, and
    the mean response time and time to first token are M/G/1's."""
    speed, blocks, unique, work, load = 1.0, 2, 3, 0.3, 0.7
    prefill = work * unique
    mean_s = (prefill + 1.0) / speed
    second_prefill = prefill**2 * (2.0 if law == "exponential" else 1.0)
    second_s = (second_prefill + 2.0 * prefill + 2.0) / speed**2  # X exponential of mean 1, independent
    arrival_rate = load / mean_s
    system = hetlb.System.from_speeds(
        [speed],
        arrival_rate=arrival_rate,
        cache_blocks=blocks,
        prompts=f"shared:count=1,blocks={blocks},zipf=1,unique={unique}",
        prefill_work=work,
        prefill_law=law,
    )
    waiting = arrival_rate * second_s / (2.0 * (1.0 - load))
    result = hetlb.simulate(system, "jsq", jobs=30_000, warmup=50.0, replications=10, seed=9)
    for run in result.runs:
        assert run.cache_hit_ratio == pytest.approx(blocks / (blocks + unique), rel=1e-12)
    ok, detail = within([run.mean_response_time for run in result.runs], waiting + mean_s, 2)
    assert ok, f"response: {detail}"
    ok, detail = within([run.mean_ttft for run in result.runs], waiting + prefill / speed, 2)
    assert ok, f"time to first token: {detail}"


# --- servers of several slots: processor sharing ------------------------------------------------------


@pytest.mark.parametrize("law", ["deterministic", "exponential"])
def test_processor_sharing_with_a_known_miss_per_job_is_mg1_ps(law):
    """One server sharing its speed among every job it holds (unlimited slots, shared curve): M/G/1-PS,
    whose mean response time is E[S] / (1 - rho) whatever the law of S, and whose jobs receive their
    first w units of work in w / (mu (1 - rho)) on average: the time to first token of a prefill of
    W U (every job after the first hits its prefix of B blocks and misses its U own). The prefill
    ends are thresholds of the server's attained-work clock, applied when the cache is next read."""
    speed, blocks, unique, work, load = 1.5, 2, 3, 0.3, 0.6
    prefill = work * unique
    mean_s = (prefill + 1.0) / speed
    arrival_rate = load / mean_s
    system = hetlb.System.from_speeds(
        [speed],
        arrival_rate=arrival_rate,
        concurrency="inf",
        rate_curve="shared",
        cache_blocks=64,
        prompts=f"shared:count=1,blocks={blocks},zipf=1,unique={unique}",
        prefill_work=work,
        prefill_law=law,
    )
    result = hetlb.simulate(system, "jsq", jobs=30_000, warmup=50.0, replications=10, seed=12)
    for run in result.runs:
        assert run.cache_hit_ratio == pytest.approx(blocks / (blocks + unique), rel=1e-12)
    ok, detail = within([run.mean_response_time for run in result.runs], mean_s / (1.0 - load), 2)
    assert ok, f"response: {detail}"
    ok, detail = within([run.mean_ttft for run in result.runs], prefill / speed / (1.0 - load), 2)
    assert ok, f"time to first token: {detail}"


# --- (e) random routing: each server an LRU under its own thinned stream ----------------------------


def test_random_routing_gives_each_server_the_lru_hit_ratio_of_its_size():
    count, zipf = 12, 1.0
    capacity = [2, 3, 4, 6]
    system = hetlb.System.from_speeds(
        [1.0, 1.0, 0.5, 0.5],
        load=0.6,
        cache_blocks=capacity,
        prompts=f"shared:count={count},blocks=1,zipf={zipf},unique=0",
    )
    popularity = zipf_popularity(count, zipf)
    result = hetlb.simulate(system, "random", jobs=40_000, warmup=50.0, replications=10, seed=4)
    for s, blocks in enumerate(capacity):
        expected = lru_hit_ratio(popularity, blocks).hit_ratio
        ok, detail = within([run.server_cache_hit_ratio[s] for run in result.runs], expected, len(capacity))
        assert ok, f"server {s} ({blocks} blocks): {detail}"


# --- (f) conservation ---------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["eft", "jsq", "cache-aware", "prefix-score", "chash", "balanced-pandas"])
@pytest.mark.parametrize("law", ["deterministic", "exponential"])
@pytest.mark.parametrize("servers", [{}, dict(concurrency=[4, 1, 2, 3], rate_curve="saturating:alpha=0.2")])
def test_hits_prefill_and_first_tokens_are_conserved(policy, law, servers):
    prompts = hetlb.model.prompts.Prompts.parse("shared:count=6,blocks=3,zipf=1.2,unique=2")
    work = 0.2
    system = hetlb.System.from_speeds(
        [2.0, 1.0, 1.0, 0.5],
        arrival_rate=[1.0, 1.1],
        graph=[[0, 1, 2], [1, 2, 3]],
        buffer=[6, 4, 4, 3],
        cache_blocks=[8, 6, 5, 4],
        prompts=prompts,
        prefill_work=work,
        prefill_law=law,
        **servers,
    )
    result = hetlb.simulate(system, policy, jobs=6000, warmup=10.0, seed=3, replications=2)
    for run in result.runs:
        counters = run.counters
        assert counters["admitted"] == counters["arrivals"] - counters["blocked"]
        assert counters["admitted"] == counters["departed"] + counters["in_system"]
        assert run.blocks_requested == run.completed_jobs * (prompts.blocks + prompts.unique)
        assert 0 <= run.blocks_hit <= prompts.blocks * run.completed_jobs  # a job's own blocks never hit
        assert run.server_blocks_hit.sum() == run.blocks_hit
        assert run.server_blocks_requested.sum() == run.blocks_requested
        assert np.all(run.server_blocks_hit <= run.server_blocks_requested)
        assert run.rank_jobs.sum() == run.completed_jobs and run.rank_blocks_hit.sum() == run.blocks_hit
        assert run.mean_prefill_saved == pytest.approx(work * run.blocks_hit / run.completed_jobs, rel=1e-12)
        assert run.ttft_histogram.sum() == run.histogram.sum() == run.completed_jobs
        # each job's first token comes before its departure: the CDF of the one lies above the other's
        assert np.all(np.cumsum(run.ttft_histogram) >= np.cumsum(run.histogram))
        assert run.mean_waiting_time <= run.mean_ttft <= run.mean_response_time
    load = result.metadata["load_all_misses"]
    expected = system.total_arrival_rate * (1 + work * (prompts.blocks + prompts.unique)) / system.capacity
    assert load == pytest.approx(expected)


def test_the_summary_and_json_carry_the_cache_figures():
    system = hetlb.System.from_speeds(
        [1.0, 0.5], load=0.5, cache_blocks=6, prompts="shared:count=4,blocks=2,zipf=1,unique=1", prefill_work=0.1
    )
    result = hetlb.simulate(system, "eft", jobs=3000, seed=1, replications=2)
    summary = result.summary
    for name in ("mean_ttft", "ttft_p50", "ttft_p90", "ttft_p99", "cache_hit_ratio", "mean_prefill_saved"):
        assert name in summary and name + "_ci" in summary
    assert summary["ttft_p50"] <= summary["ttft_p90"] <= summary["ttft_p99"]
    details = result.to_dict()["caches"]
    assert details["blocks_hit"] == sum(run.blocks_hit for run in result.runs)
    assert len(details["server_hit_ratio"]) == 2 and len(details["by_rank"]) == 4
    single = hetlb.simulate(system, "eft", jobs=3000, seed=1)
    assert single.runs[0].mean_ttft_ci[0] <= single.mean_ttft <= single.runs[0].mean_ttft_ci[1]
    assert "mean_ttft" in single.to_frame().columns
    assert result.to_json()  # strict JSON


def test_the_same_seed_gives_every_policy_the_same_prompts():
    """Common random numbers: the prompts come from the arrival stream, so two policies see the same
    prefixes (the per-rank counts of the jobs admitted, in a system that loses none, agree)."""
    system = hetlb.System.from_speeds(
        [1.0, 1.0], load=0.5, cache_blocks=4, prompts="shared:count=5,blocks=1,zipf=1,unique=0", prefill_work=0.1
    )
    counts = [hetlb.simulate(system, policy, horizon=500.0, seed=8).runs[0] for policy in ("jsq", "eft", "chash")]
    assert counts[0].arrivals == counts[1].arrivals == counts[2].arrivals
    assert np.array_equal(counts[0].rank_jobs, counts[1].rank_jobs)
    assert np.array_equal(counts[0].rank_jobs, counts[2].rank_jobs)


# --- (g) what is refused -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "build, run, field, words",
    [
        (dict(cache_blocks=0), {}, "cache_blocks", "integer in [1"),
        (dict(cache_blocks=4, prompts="lru:count=3"), {}, "prompts", "shared"),
        (dict(cache_blocks=4, prompts="sessions:turns=3,blocks=2,think=1"), {}, "prompts", "sessions"),
        (dict(prompts="shared:count=2,blocks=1,zipf=1,unique=0"), {}, "prompts", "cache_blocks"),
        (dict(cache_blocks=4), dict(dispatchers=2, policy="eft"), "cache_blocks", "several dispatchers"),
        (dict(cache_blocks=4), dict(dispatchers=2, policy="chash"), "cache_blocks", "approximate index"),
    ],
)
def test_what_the_simulator_does_not_carry_is_a_one_line_error(build, run, field, words):
    run = dict(run)
    policy = run.pop("policy", "jsq")
    with pytest.raises(InputError) as caught:
        system = hetlb.System.from_speeds([1.0, 1.0], load=0.5, **build)
        hetlb.simulate(system, policy, jobs=500, **run)
    assert caught.value.field == field and words in str(caught.value) and "\n" not in str(caught.value)


def test_the_command_line_prints_the_cache_figures(capsys):
    from hetlb.cli import main

    argv = [
        "simulate",
        "--speeds",
        "2x1,2x0.5",
        "--load",
        "0.5",
        "--cache-blocks",
        "8",
        "--prompts",
        "shared:count=16,blocks=4,zipf=1,unique=2",
        "--prefill-work",
        "0.1",
        "--policy",
        "eft",
        "--jobs",
        "2000",
        "--quiet",
    ]
    assert main(argv) == 0
    text = capsys.readouterr().out
    for words in ("mean time to first token", "time to first token p99", "cache hit ratio", "prefill saved",
                  "load with every prefill a miss"):  # fmt: skip
        assert words in text
    assert main([*argv, "--json"]) == 0
    import json

    figures = json.loads(capsys.readouterr().out)
    assert 0.0 <= figures["cache_hit_ratio"] <= 1.0 and figures["metadata"]["load_all_misses"] > 0.5
    assert math.isfinite(figures["mean_ttft"])


# --- trace prompts ----------------------------------------------------------------------------------------


def write_trace(path, n, seed, repeated=0, zipf=1.0, blocks=(1, 5), gap_ms=100.0):
    """A Mooncake-format trace of ``n`` requests at Poisson times (exponential gaps of mean ``gap_ms``),
    answers of geometric lengths (mean about 200 tokens): each request's chain is new (between
    ``blocks`` blocks, ids never seen before) or, with ``repeated`` = K, one block of K drawn with
    Zipf popularity. Returns the requests' (blocks, output tokens)."""
    import json

    rng = np.random.default_rng(seed)
    times = np.cumsum(rng.exponential(gap_ms, n))
    popularity = zipf_popularity(repeated, zipf) if repeated else None
    next_id = 7_000_000
    lengths, outputs = [], []
    with open(path, "w") as handle:
        for t in times:
            if repeated:
                ids = [int(rng.choice(repeated, p=popularity))]
            else:
                length = int(rng.integers(blocks[0], blocks[1] + 1))
                ids = list(range(next_id, next_id + length))
                next_id += length
            out = int(rng.geometric(1 / 200))
            lengths.append(len(ids))
            outputs.append(out)
            record = {"timestamp": float(t), "input_length": 512 * len(ids), "output_length": out, "hash_ids": ids}
            handle.write(json.dumps(record) + "\n")
    return np.array(lengths), np.array(outputs)


@pytest.mark.parametrize("law", ["deterministic", "exponential"])
def test_a_trace_of_new_chains_never_hits_and_is_mg1(tmp_path, law):
    """Every request's blocks are new, so nothing hits: at one server each job's service is W L_j + X_j,
    X_j its answer's length over the mean; the trace's times are Poisson, so the mean response time and
    time to first token are Pollaczek-Khinchine's with the trace's own moments (one run: its batch means)."""
    path = tmp_path / "new.jsonl"
    lengths, outputs = write_trace(path, 60_000, seed=3)
    work, speed, rate = 0.1, 1.0, 0.5
    system = hetlb.System.from_speeds(
        [speed], arrival_rate=rate, cache_blocks=16, prompts=f"trace:{path}", prefill_work=work, prefill_law=law
    )
    result = hetlb.simulate(system, "jsq", jobs=10**6, warmup=20.0, batches=30)
    run = result.runs[0]
    assert run.blocks_hit == 0 and run.counters["arrivals"] == len(lengths)
    sizes = outputs / outputs.mean()
    prefill = work * lengths
    mean_s = (prefill.mean() + 1.0) / speed
    second_prefill = np.mean(prefill**2) * (2.0 if law == "exponential" else 1.0)
    second_s = (second_prefill + 2.0 * prefill.mean() * sizes.mean() + np.mean(sizes**2)) / speed**2
    waiting = rate * second_s / (2.0 * (1.0 - rate * mean_s))
    low, high = run.mean_response_time_ci
    assert low <= waiting + mean_s <= high, (run.mean_response_time, waiting + mean_s)
    low, high = run.mean_ttft_ci
    assert low <= waiting + prefill.mean() / speed <= high, (run.mean_ttft, waiting + prefill.mean() / speed)


def test_a_trace_of_repeated_blocks_hits_as_an_lru(tmp_path):
    """Requests of one block drawn i.i.d. with Zipf popularity, no prefill work, one server: the
    block hit ratio is the LRU's under independent requests (independent traces as replications)."""
    count, zipf, capacity = 8, 1.0, 3
    ratios = []
    for seed in range(8):
        path = tmp_path / f"repeated{seed}.jsonl"
        write_trace(path, 12_000, seed=seed, repeated=count, zipf=zipf)
        system = hetlb.System.from_speeds([1.0], load=0.6, cache_blocks=capacity, prompts=f"trace:{path}")
        ratios.append(hetlb.simulate(system, "jsq", jobs=10**6, warmup=50.0).runs[0].cache_hit_ratio)
    ok, detail = within(ratios, lru_hit_ratio(zipf_popularity(count, zipf), capacity).hit_ratio)
    assert ok, detail


def test_a_trace_ends_the_run_where_it_ends(tmp_path):
    path = tmp_path / "short.jsonl"
    lengths, _ = write_trace(path, 500, seed=1)
    system = hetlb.System.from_speeds([1.0, 0.5], load=0.6, cache_blocks=8, prompts=f"trace:{path}", prefill_work=0.1)
    epochs = system.caches.prompts.trace.rescaled_arrivals(system.total_arrival_rate)
    for policy in ("jsq", "eft"):
        run = hetlb.simulate(system, policy, jobs=10**6, seed=2).runs[0]  # more jobs than the trace has
        assert run.counters["arrivals"] == run.completed_jobs == len(lengths)
        assert run.measured_time == pytest.approx(epochs[-1])
        assert run.blocks_requested == lengths.sum()
    run = hetlb.simulate(system, "jsq", horizon=epochs[200], seed=2).runs[0]  # a horizon inside the trace
    assert run.completed_jobs == 201
    run = hetlb.simulate(system, "jsq", jobs=100, seed=2).runs[0]  # a target inside the trace
    assert run.completed_jobs == 100


def test_what_a_trace_refuses(tmp_path):
    path = tmp_path / "t.jsonl"
    write_trace(path, 50, seed=1)
    with pytest.raises(InputError, match="arrivals: trace prompts arrive at the trace's own times"):
        system = hetlb.System.from_speeds(
            [1.0], load=0.5, cache_blocks=8, prompts=f"trace:{path}", arrivals="batch:mean=2"
        )
        hetlb.simulate(system, "jsq", jobs=20)
    system = hetlb.System.from_speeds([1.0], load=0.5, cache_blocks=8, prompts=f"trace:{path}")
    with pytest.raises(InputError, match="warmup: the trace's 50 requests end at time"):
        hetlb.simulate(system, "jsq", jobs=20, warmup=1e6)
    silent = tmp_path / "silent.jsonl"
    silent.write_text('{"timestamp": 0, "input_length": 5, "output_length": 0, "hash_ids": [1]}\n' * 2)
    with pytest.raises(InputError, match="no output tokens"):
        hetlb.simulate(hetlb.System.from_speeds([1.0], load=0.5, cache_blocks=8, prompts=f"trace:{silent}"), "jsq")


# --- several dispatchers: the caches under the policies on estimates -----------------------------------


@pytest.mark.parametrize(
    "policy, update", [("l-jsq", "push:p_hat=0.5:d=2"), ("jsq", "probe"), ("sed", "piggyback:delay=0.2")]
)
@pytest.mark.parametrize("servers", [{}, dict(concurrency=[1, 3, 2, 4], rate_curve="saturating:alpha=0.3")])
def test_caches_that_change_nothing_leave_several_dispatchers_bit_for_bit(policy, update, servers):
    common = dict(speeds=[2.0, 1.0, 1.0, 0.5], arrival_rate=2.6, buffer=[4, 3, 5, 2], **servers)
    run = dict(jobs=4000, warmup=5.0, seed=7, dispatchers=3, update=update)
    plain = hetlb.simulate(hetlb.System.from_speeds(**common), policy, **run).runs[0].to_dict()
    cached = hetlb.simulate(hetlb.System.from_speeds(**common, **NO_EFFECT), policy, **run).runs[0].to_dict()
    for name in ("events", "wall_seconds", "events_per_second"):
        plain.pop(name), cached.pop(name)
    assert cached.pop("caches")["blocks_hit"] > 0
    assert {name: value for name, value in cached.items() if name in plain} == plain


@pytest.mark.parametrize("servers", [{}, dict(concurrency=[3, 1, 2, 2], rate_curve="shared")])
def test_several_dispatchers_conserve_hits_and_first_tokens(servers):
    prompts = "shared:count=5,blocks=2,zipf=1,unique=1"
    system = hetlb.System.from_speeds(
        [2.0, 1.0, 1.0, 0.5], load=0.6, buffer=5, cache_blocks=6, prompts=prompts, prefill_work=0.2, **servers
    )
    result = hetlb.simulate(system, "l-jsq", jobs=5000, warmup=5.0, seed=4, dispatchers=3, update="push:p_hat=0.3:d=2")
    run = result.runs[0]
    assert run.counters["admitted"] == run.counters["departed"] + run.counters["in_system"]
    assert run.blocks_requested == 3 * run.completed_jobs and 0 < run.blocks_hit <= 2 * run.completed_jobs
    assert run.ttft_histogram.sum() == run.completed_jobs
    assert np.all(np.cumsum(run.ttft_histogram) >= np.cumsum(run.histogram))
    assert result.metadata["load_all_misses"] == pytest.approx(0.6 * (1 + 0.2 * 3))
    assert result.has_caches and "mean_ttft" in result.summary
