"""The servers' prefix caches as per-server state of the event loops: the implementations of the
seam helpers of :mod:`hetlb.kernels.server_state` for a run with caches (a
:data:`~hetlb.kernels.server_state.CacheExtension`), on the caches of
:mod:`hetlb.kernels.prefix_cache` (docs/background/prefix-caches.md).

A job's prompt. At its arrival (``job_arrives``) a job draws its prompt from the arrival stream,
after its type and before its size: a shared prefix k by the alias table of the popularity (one
uniform number, none with one prefix), then, under an exponential prefill law, one unit
exponential; nothing more is drawn without caches, and every policy run on the same seed sees the
same prompts. The job's chain is kept as four integers (JOB_DTYPE: ``start``, ``unique``,
``length``, and ``missing``, its uncached blocks at the server it was sent to when the policy reads
the caches), with the prefill's factor (1, or the unit exponential): block j < n_prefix of the
chain is ``listed[start + j]`` (a trace) or ``start + j`` (a shared prefix: start = (k - 1) B),
block j >= n_prefix is ``unique + j - n_prefix`` (a shared prompt's blocks of its own, ``unique`` =
K B + r U for the r-th arrival); n_prefix = min(length, ``prefix_blocks``). The arriving job's
record is ``incoming[0]``; a waiting job's, ``jobs[slot]`` beside its size in the job slots.

Service (servers of concurrency 1). At the start of its service (``work_at_start``) the job's hit
h is the leading part of its chain cached at its server, which it touches and holds; its work is
W (L - h) (times its factor) of prefill, then its size, and its prefill ends at
t0 + W (L - h) / mu_s, known at once (SERVING_DTYPE, one record a server: the job in service). The
insertion of its blocks at that time is *pending*: it is applied, exactly as it would have been
at its time, before anything else reads or changes that server's cache at a time at or after it
(a decision of a policy that reads the caches, the job's departure), since nothing else touches
that cache in between; so no event is added. At its departure (``job_leaves``) the job releases
the blocks it holds.

Decisions. A policy that reads the caches decides on the true caches (one dispatcher: a precise
index): for each compatible server its match m_s (after its pending insertion if due), the blocks
it caches and holds, K_s, n_s, U_s = n_s + W D_s (D_s the sum of L_j - m_j over its jobs, each
job's m_j its match at its dispatch: an integer, kept exactly) and its rate mu_s, then the rules
of hetlb.policies.cache_rules.

Statistics of the measured jobs (those whose response time is measured), as they leave
(``job_measured``): the time to first token (sum, sum of squares, per batch, and a histogram in
the bins of the response times), per server the blocks hit and requested, and per popularity
rank of a shared prefix (the first RANKS ranks) the jobs, blocks hit and blocks requested.
"""

import numpy as np

from hetlb.constants import PROMPTS_SHARED, PROMPTS_TRACE
from hetlb.jit import njit, records
from hetlb.kernels.continuous import arrival_batch, histogram_bin
from hetlb.kernels.prefix_cache import chain_block, hold_hit, insert_chain, leading_match, release_chain
from hetlb.kernels.sampling import alias_draw
from hetlb.policies.cache_rules import cache_keys, chash_server, ring_key
from hetlb.policies.registry import CHASH
from hetlb.policies.rules import least_key_server, uniform_index

JOB_DTYPE = np.dtype([("start", "i8"), ("unique", "i8"), ("length", "i8"), ("missing", "i8"), ("factor", "f8")])
"""A job's prompt (module docstring) and its prefill's factor (40 bytes)."""

SERVING_DTYPE = np.dtype(
    [
        ("start", "i8"),
        ("unique", "i8"),
        ("prefill_end", "f8"),
        ("length", "i4"),
        ("missing", "i4"),
        ("hit", "i4"),
        ("held", "i4"),
        ("pending", "i4"),
        ("spare", "i4"),
    ]
)
"""The job in service at a server of concurrency 1: its prompt, when its prefill ends, its hit, the
leading blocks it holds, and whether the insertion of its blocks is pending (48 bytes)."""

CACHE_COUNTER_DTYPE = np.dtype(
    [("measured", "i8"), ("ttft_sum", "f8"), ("ttft_sq_sum", "f8"), ("hits", "i8"), ("requested", "i8")]
)
"""The sums over the measured jobs: how many, their times to first token and its squares, blocks
hit and requested."""

RANKS = 64
"""Shared prefixes whose hits are counted by popularity rank (the most popular first)."""


@njit
def job_arrives(extension, arrival_index, rng):
    """The arriving job's prompt (module docstring), into ``incoming[0]``."""
    job = records(extension.incoming)[0]
    kind = extension.prompt_kind
    if kind == PROMPTS_SHARED:
        k = 0
        if len(extension.prefix_keep) > 1:
            k = alias_draw(extension.prefix_keep, extension.prefix_alias, rng.random())
        job.start = k * extension.prefix_blocks
        job.length = extension.prefix_blocks + extension.unique_blocks
        job.unique = extension.first_unique + arrival_index * extension.unique_blocks
    elif kind == PROMPTS_TRACE:
        job.start = extension.chain_indptr[arrival_index]
        job.length = extension.chain_indptr[arrival_index + 1] - job.start
        job.unique = 0
    else:
        job.start = 0
        job.length = 0
        job.unique = 0
    job.missing = 0
    job.factor = rng.exponential() if extension.exponential_prefill else 1.0


@njit(inline="always")
def reads_cache(extension, policy_code):
    """Whether the run's policy reads the caches."""
    return extension.reads_cache


@njit
def apply_due(extension, s, now):
    """Apply server s's pending insertion if its prefill has ended by ``now``."""
    served = records(extension.serving)[s]
    if served.pending == 1 and served.prefill_end <= now:
        served.held = insert_chain(
            extension.lists,
            extension.nodes,
            extension.table,
            s,
            extension.listed,
            served.start,
            min(served.length, extension.prefix_blocks),
            served.unique,
            served.length,
            served.held,
        )
        served.pending = 0


@njit
def route_by_cache(extension, policy_code, candidates, lo, hi, queue_len, now, rng):
    """The decision of a policy that reads the caches (module docstring); the arriving job keeps its
    uncached blocks at the server chosen."""
    job = records(extension.incoming)[0]
    length = job.length
    n_prefix = min(length, extension.prefix_blocks)
    match, work, rate = extension.match, extension.work, extension.rate
    lists = records(extension.lists)
    for i in range(lo, hi):
        s = candidates[i]
        apply_due(extension, s, now)
        match[s] = leading_match(extension.table, s, extension.listed, job.start, n_prefix, job.unique, length)
        work[s] = queue_len[s] + extension.prefill_work * extension.missing[s]
        rate[s] = extension.speed[s]
    if policy_code == CHASH:
        ring = extension.ring_position
        if length > 0:
            position = ring_key(chain_block(extension.listed, job.start, n_prefix, job.unique, 0))
        else:  # no prompt: a uniform point of the ring
            position = ring[uniform_index(rng, len(ring))]
        s = chash_server(
            candidates,
            lo,
            hi,
            queue_len,
            extension.policy_params[0],
            position,
            ring,
            extension.ring_server,
            extension.eligible,
        )
    else:
        cache_keys(
            policy_code,
            extension.policy_params,
            candidates,
            lo,
            hi,
            queue_len,
            match,
            length,
            lists.cached,
            lists.held,
            lists.capacity,
            work,
            rate,
            extension.prefill_work,
            extension.key,
        )
        s = least_key_server(candidates, lo, hi, extension.key, extension.ties, rng)[0]
    job.missing = length - match[s]
    return s


@njit(inline="always")
def job_joins(extension, s, now):
    """The arriving job is admitted to s: its uncached blocks join D_s."""
    extension.missing[s] += records(extension.incoming)[0].missing


@njit(inline="always")
def job_waits(extension, slot):
    """The arriving job waits in job slot ``slot``: its prompt goes there."""
    waiting = records(extension.jobs)[slot]
    job = records(extension.incoming)[0]
    waiting.start = job.start
    waiting.unique = job.unique
    waiting.length = job.length
    waiting.missing = job.missing
    waiting.factor = job.factor


@njit
def work_at_start(extension, s, now, size, slot):
    """The job of job slot ``slot`` (-1: the arriving one) starts service at s: its hit, held; its
    work W (L - h) (times its factor) + size; its prefill's end, its insertion then pending."""
    job = records(extension.incoming)[0] if slot < 0 else records(extension.jobs)[slot]
    served = records(extension.serving)[s]
    served.start = job.start
    served.unique = job.unique
    served.length = job.length
    served.missing = job.missing
    hit = hold_hit(
        extension.lists,
        extension.nodes,
        extension.table,
        s,
        extension.listed,
        job.start,
        min(job.length, extension.prefix_blocks),
        job.unique,
        job.length,
    )
    served.hit = hit
    served.held = hit
    served.pending = 1 if job.length > 0 else 0
    prefill = extension.prefill_work * (job.length - hit) * job.factor
    served.prefill_end = now + prefill * extension.inv_speed[s]
    return prefill + size


@njit
def job_leaves(extension, s, now):
    """The job in service leaves s: its insertion (its prefill has ended), then the release of the
    blocks it holds; its uncached blocks leave D_s."""
    apply_due(extension, s, now)
    served = records(extension.serving)[s]
    release_chain(
        extension.lists,
        extension.nodes,
        extension.table,
        s,
        extension.listed,
        served.start,
        min(served.length, extension.prefix_blocks),
        served.unique,
        served.held,
    )
    served.held = 0
    extension.missing[s] -= served.missing


@njit
def job_measured(extension, s, now, arrival, c, batch_close, n_batches):
    """A measured job leaves s: its time to first token, hits and blocks requested."""
    served = records(extension.serving)[s]
    counters = records(extension.counters)[0]
    ttft = served.prefill_end - arrival
    counters.measured += 1
    counters.ttft_sum += ttft
    counters.ttft_sq_sum += ttft * ttft
    counters.hits += served.hit
    counters.requested += served.length
    extension.ttft_histogram[histogram_bin(ttft)] += 1
    b = arrival_batch(c, arrival, batch_close, n_batches)
    extension.ttft_batches[b, 0] += 1.0
    extension.ttft_batches[b, 1] += ttft
    extension.server_hits[s] += served.hit
    extension.server_requested[s] += served.length
    if extension.prompt_kind == PROMPTS_SHARED:
        rank = served.start // extension.prefix_blocks
        if rank < len(extension.rank_jobs):
            extension.rank_jobs[rank] += 1
            extension.rank_hits[rank] += served.hit
            extension.rank_requested[rank] += served.length
