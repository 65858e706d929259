"""The servers' prefix caches in a simulation (docs/background/prefix-caches.md): the checks, the
kernels' data (a hetlb.kernels.server_state.CacheExtension) and the figures they add.

A run has caches when its system has them (``System.caches``) or its policy reads them
(``PolicySpec.reads_cache``): a policy that reads the caches runs on a system without them as on
caches of no block, every match 0 (``eft`` is then ``sed``). Without either, nothing of this module
runs and every result is what it was without caches, bit for bit.

>>> import hetlb
>>> system = hetlb.System.from_speeds([1.0, 1.0], load=0.5, cache_blocks=8,
...     prompts="shared:count=4,blocks=2,zipf=1,unique=1", prefill_work=0.1)
>>> result = hetlb.simulate(system, "eft", jobs=2000, seed=1)
>>> 0.0 < result.cache_hit_ratio < 1.0 and result.mean_ttft < result.mean_response_time
True
"""

from __future__ import annotations

import math

import numpy as np

from hetlb.errors import InputError
from hetlb.kernels import continuous as kernel
from hetlb.kernels import prefix_cache, server_caches
from hetlb.kernels.sampling import alias_table
from hetlb.kernels.server_state import CACHE_TYPES, CacheExtension, SlotCacheExtension
from hetlb.model.system import System
from hetlb.policies import registry
from hetlb.policies.cache_rules import chash_ring
from hetlb.policies.registry import Policy
from hetlb.stats import interval

TRACE_PREFIX = 2**62
"""A trace's chains are listed whole: their prefix is as long as they are."""
MAX_UNIQUE_ID = 2**62
"""A shared prompt's blocks of its own take ids K B + r U, r the arrival's number: a run's arrivals
must keep them below this (int64)."""


def has_caches(system: System, policy: Policy) -> bool:
    """Whether a run of ``policy`` on ``system`` carries caches (module docstring)."""
    return system.caches is not None or policy.spec.reads_cache


def check_caches(system: System, policy: Policy, expected_arrivals: float, options=None) -> None:
    """Refuse, in one line naming the field, what the simulation of caches does not carry (yet):
    session prompts, ids beyond int64; a trace's arrivals with another arrival process, without
    answers, or that end before the warm-up (``options``: the run's, hetlb.simulation.options.RunOptions)."""
    caches = system.caches
    if caches is None:
        return
    prompts = caches.prompts
    if prompts.kind == "sessions":
        raise InputError(
            "prompts",
            "the continuous simulator does not carry sessions yet (their next turn waits on the previous answer); "
            "use shared or trace prompts",
        )
    if prompts.kind == "trace":
        check_trace(system, options)
    if int(caches.capacity.sum()) > prefix_cache.MAX_NODES:
        raise InputError(
            "cache_blocks", f"the caches may hold at most {prefix_cache.MAX_NODES:,} blocks in all (2^31 - 1)"
        )
    if prompts.kind == "shared":
        last = prompts.count * prompts.blocks + 2.0 * expected_arrivals * prompts.unique
        if last >= MAX_UNIQUE_ID:
            raise InputError(
                "prompts.unique",
                f"{prompts.unique} blocks of its own a request over about {expected_arrivals:.3g} arrivals take "
                "block ids beyond 2^62; take fewer, or a shorter run",
            )


def check_trace(system: System, options) -> None:
    """A trace's requests arrive at its own times (rescaled to the system's arrival rate), with its
    answers' lengths as decode sizes: refuse another arrival process, a trace whose answers are all
    empty, and a warm-up that outlasts it."""
    trace = system.caches.prompts.trace if system.caches is not None else None
    assert trace is not None
    if not system.arrivals.is_poisson:
        raise InputError(
            "arrivals",
            f"trace prompts arrive at the trace's own times (rescaled to the arrival rate), not as {system.arrivals.text}; "
            "leave the arrival process out",
        )
    if not trace.output_tokens.any():
        raise InputError(
            "prompts",
            f"the trace {trace.path} has no output tokens: its decode sizes (output / mean output) are undefined",
        )
    epochs = trace_epochs(system)
    assert epochs is not None
    if options is not None:
        measured = int(np.sum(epochs >= options.warmup))
        if measured < options.batches:
            raise InputError(
                "warmup",
                f"the trace's {trace.n_requests:,} requests end at time {epochs[-1]:.6g} (rescaled to the arrival rate "
                f"{system.total_arrival_rate:.6g}): {measured:,} arrive after the warm-up, fewer than the "
                f"{options.batches} batches; shorten the warm-up",
            )


def trace_epochs(system: System) -> np.ndarray | None:
    """The arrival epochs of a trace's requests, rescaled to the system's arrival rate (None
    without trace prompts)."""
    caches = system.caches
    if caches is None or caches.prompts.kind != "trace":
        return None
    trace = caches.prompts.trace
    assert trace is not None
    return trace.rescaled_arrivals(system.total_arrival_rate)


def decode_sizes(system: System) -> np.ndarray:
    """A trace's decode sizes, X_j = output tokens of request j over their mean (mean 1); empty
    without trace prompts."""
    caches = system.caches
    if caches is None or caches.prompts.kind != "trace":
        return np.zeros(0)
    trace = caches.prompts.trace
    assert trace is not None
    tokens = trace.output_tokens.astype(np.float64)
    return tokens / tokens.mean()


def offered_load_all_misses(system: System) -> float:
    """The offered load with every prefill a miss: lambda (1 + W E[L]) / sum_s mu_s phi_s(c_s)."""
    caches = system.caches
    assert caches is not None
    return system.total_arrival_rate * (1.0 + caches.prefill_work * caches.mean_prompt_blocks) / system.capacity


def cache_metadata(system: System) -> dict:
    """What a result's metadata adds for the caches: the offered load with every prefill a miss."""
    if system.caches is None:
        return {}
    return {"load_all_misses": offered_load_all_misses(system)}


def policy_parameters(policy: Policy) -> np.ndarray:
    """The parameters of a policy that reads the caches, in its registry entry's order (one 0 when
    it has none, or when the policy does not read the caches: the kernels take an array)."""
    if not policy.spec.reads_cache:
        return np.zeros(1)
    values = [float(policy.params[name]) for name in policy.spec.parameters]
    return np.array(values or [0.0], dtype=np.float64)


def new_cache_extension(
    system: System, policy: Policy, slots: int, n_batches: int, slot_model=None, slot_state=None
) -> CacheExtension | SlotCacheExtension:
    """The kernels' caches of ``system`` under ``policy``, empty, with room for ``slots`` waiting
    jobs and ``n_batches`` batches (caches of no block when the system has none); on servers of
    several slots (``slot_model`` and ``slot_state``, hetlb.simulation.batch_servers) a
    SlotCacheExtension that reads their records and follows their heaps of jobs in service."""
    n = system.n_servers
    caches = system.caches
    capacity = caches.capacity if caches is not None else np.zeros(n, np.int64)
    lists, nodes, table = prefix_cache.new_caches(capacity)
    kind, prefix_blocks, unique_blocks, first_unique = 0, 0, 0, 0
    keep, alias = np.ones(1), np.zeros(1, np.int64)
    listed, indptr = np.zeros(0, np.int64), np.zeros(1, np.int64)
    work, exponential = 0.0, False
    if caches is not None:
        prompts = caches.prompts
        kind = prompts.code
        work, exponential = float(caches.prefill_work), caches.prefill_law == "exponential"
        if prompts.kind == "shared":
            prefix_blocks, unique_blocks = prompts.blocks, prompts.unique
            first_unique = prompts.count * prompts.blocks
            keep, alias = alias_table(prompts.popularity())
        elif prompts.kind == "trace":
            assert prompts.trace is not None
            prefix_blocks = TRACE_PREFIX
            listed, indptr = prompts.trace.chain_blocks, prompts.trace.chain_indptr
    ring_position, ring_server = chash_ring(n) if policy.code == registry.CHASH else (np.zeros(0, np.uint64),) * 2
    common: dict = dict(
        prompt_kind=int(kind),
        prefix_blocks=int(prefix_blocks),
        unique_blocks=int(unique_blocks),
        first_unique=int(first_unique),
        prefix_keep=np.asarray(keep, dtype=np.float64),
        prefix_alias=np.asarray(alias, dtype=np.int64),
        listed=np.asarray(listed, dtype=np.int64),
        chain_indptr=np.asarray(indptr, dtype=np.int64),
        decode_sizes=decode_sizes(system),
        prefill_work=work,
        exponential_prefill=bool(exponential),
        speed=np.asarray(system.speed, dtype=np.float64),
        inv_speed=1.0 / np.asarray(system.speed, dtype=np.float64),
        reads_cache=bool(policy.spec.reads_cache),
        policy_params=policy_parameters(policy),
        ring_position=np.asarray(ring_position, dtype=np.uint64),
        ring_server=np.asarray(ring_server, dtype=np.int64),
        lists=lists,
        nodes=nodes,
        table=table,
        missing=np.zeros(n, np.int64),
        jobs=np.zeros(slots, server_caches.JOB_DTYPE),
        incoming=np.zeros(1, server_caches.JOB_DTYPE),
        match=np.zeros(n, np.int64),
        work=np.zeros(n),
        rate=np.zeros(n),
        key=np.zeros(n),
        ties=np.zeros(n, np.int64),
        eligible=np.zeros(n, np.int64),
        counters=np.zeros(1, server_caches.CACHE_COUNTER_DTYPE),
        ttft_histogram=np.zeros(kernel.HISTOGRAM_OCTAVES * kernel.HISTOGRAM_BINS_PER_OCTAVE, np.int64),
        ttft_batches=np.zeros((n_batches, 2)),
        server_hits=np.zeros(n, np.int64),
        server_requested=np.zeros(n, np.int64),
        rank_jobs=np.zeros(server_caches.RANKS, np.int64),
        rank_hits=np.zeros(server_caches.RANKS, np.int64),
        rank_requested=np.zeros(server_caches.RANKS, np.int64),
    )
    if slot_state is None:
        return CacheExtension(**common, serving=np.zeros(n, server_caches.SERVING_DTYPE))
    return SlotCacheExtension(
        **common,
        slot_servers=slot_state.slot_servers,
        service_jobs=new_service_jobs(len(slot_state.service)),
        entering=new_service_jobs(1),
        next_prefill=np.full(n, np.inf),
        starts=np.zeros(1, np.int64),
        curve_phi=slot_model.curve_phi,
        curve_alpha=slot_model.curve_alpha,
        curve_tail=slot_model.curve_tail,
    )


def new_service_jobs(n: int) -> np.ndarray:
    """Records of ``n`` jobs in service on servers of several slots (nothing pending)."""
    jobs = np.zeros(n, server_caches.SLOT_JOB_DTYPE)
    jobs["prefill_end"] = np.nan
    return jobs


def follow_service_room(extension, old_slot_state, slot_state):
    """After hetlb.simulation.batch_servers.grow_service_room laid the servers' regions of jobs in
    service out again (``old_slot_state`` before, ``slot_state`` after): the extension reads the new
    records, and its records of the jobs in service move as their heaps' entries did."""
    if not isinstance(extension, SlotCacheExtension):
        return extension
    jobs = new_service_jobs(len(slot_state.service))
    old_offset, new_offset = old_slot_state.slot_servers["heap_offset"], slot_state.slot_servers["heap_offset"]
    for s in np.flatnonzero(slot_state.slot_servers["in_service"]):
        held = int(slot_state.slot_servers["in_service"][s])
        jobs[new_offset[s] : new_offset[s] + held] = extension.service_jobs[old_offset[s] : old_offset[s] + held]
    return extension._replace(slot_servers=slot_state.slot_servers, service_jobs=jobs)


def grow_jobs(extension, slots: int):
    """The extension with room for ``slots`` waiting jobs (the job pool doubled)."""
    if not isinstance(extension, CACHE_TYPES):
        return extension
    jobs = np.zeros(slots, server_caches.JOB_DTYPE)
    jobs[: len(extension.jobs)] = extension.jobs
    return extension._replace(jobs=jobs)


def cache_memory(system: System, policy: Policy) -> int:
    """Bytes of a run's caches: the node pool and its hash table, and the per-server records."""
    if not has_caches(system, policy):
        return 0
    blocks = int(system.caches.capacity.sum()) if system.caches is not None else 0
    return (
        prefix_cache.NODE_DTYPE.itemsize * blocks
        + prefix_cache.ENTRY_DTYPE.itemsize * prefix_cache.table_size(blocks)
        + 200 * system.n_servers
    )


def cache_figures(system: System, extension, measured_time: float) -> dict:
    """The figures of the caches of one finished replication (RunResult's cache fields), or none
    without caches."""
    if not isinstance(extension, CACHE_TYPES):
        return {}
    counters = extension.counters[0]
    measured = int(counters["measured"])
    work = extension.prefill_work
    with np.errstate(invalid="ignore", divide="ignore"):
        batch_means = extension.ttft_batches[:, 1] / extension.ttft_batches[:, 0]
    mean = float(counters["ttft_sum"]) / measured if measured else math.nan
    spread = float(counters["ttft_sq_sum"]) / measured - mean**2 if measured else math.nan
    hits, requested = int(counters["hits"]), int(counters["requested"])
    figures = {
        "mean_ttft": mean,
        "mean_ttft_ci": interval(batch_means),
        "ttft_std": math.sqrt(max(spread, 0.0)) if measured else math.nan,
        "ttft_histogram": extension.ttft_histogram.copy(),
        "cache_hit_ratio": hits / requested if requested else math.nan,
        "blocks_hit": hits,
        "blocks_requested": requested,
        "mean_prefill_saved": work * hits / measured if measured else math.nan,
        "server_blocks_hit": extension.server_hits.copy(),
        "server_blocks_requested": extension.server_requested.copy(),
    }
    if system.caches is not None and system.caches.prompts.kind == "shared":
        ranks = min(system.caches.prompts.count, server_caches.RANKS)
        figures["rank_jobs"] = extension.rank_jobs[:ranks].copy()
        figures["rank_blocks_hit"] = extension.rank_hits[:ranks].copy()
        figures["rank_blocks_requested"] = extension.rank_requested[:ranks].copy()
    return figures
