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

The seam helpers (the functions named as in hetlb.kernels.server_state, and their ``slot_``
forms for servers of several slots) are inlined into the loops; each takes what it needs out of
the extension and calls a plain @njit function of those arrays, which holds every branch and
loop: numba's inlining of a function with branches into the helpers of the heap of jobs in service
(themselves inlined, with loops that end in ``break``) lost a store of one of them.
"""

import numpy as np

from hetlb.constants import PROMPTS_SHARED, PROMPTS_TRACE
from hetlb.jit import njit, records
from hetlb.kernels.arrivals import next_or_trace_epoch
from hetlb.kernels.batch_servers import curve_phi
from hetlb.kernels.continuous import arrival_batch, histogram_bin
from hetlb.kernels.prefix_cache import chain_block, hold_hit, insert_chain, leading_match, release_chain
from hetlb.kernels.sampling import alias_draw
from hetlb.policies.cache_rules import cache_keys, chash_server, ring_key
from hetlb.policies.registry import CHASH
from hetlb.policies.rules import least_key_server, uniform_index

JOB_DTYPE = np.dtype(
    [("start", "i8"), ("unique", "i8"), ("length", "i8"), ("missing", "i8"), ("factor", "f8"), ("decode", "f8")]
)
"""A job's prompt (module docstring), its prefill's factor and, for a trace's request, its decode
size (-1 otherwise: its size is the one drawn at its arrival) (48 bytes)."""

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

SLOT_JOB_DTYPE = np.dtype(
    [
        ("start", "i8"),
        ("unique", "i8"),
        ("threshold", "f8"),
        ("prefill", "f8"),
        ("prefill_end", "f8"),
        ("sequence", "i8"),
        ("length", "i4"),
        ("missing", "i4"),
        ("hit", "i4"),
        ("held", "i4"),
        ("pending", "i4"),
        ("spare", "i4"),
    ]
)
"""A job in service at a server of several slots (``service_jobs``, beside its entry of the heap of
hetlb.kernels.batch_servers): its prompt, its finishing threshold and its prefill's (readings of
the server's attained-work clock), when its prefill ended (once applied), its rank among the
services started (simultaneous prefill ends are applied in that order), its hit, the leading
blocks it holds, and whether the insertion of its blocks is pending (72 bytes)."""

RANKS = 64
"""Shared prefixes whose hits are counted by popularity rank (the most popular first)."""


# --- what every loop with caches shares -------------------------------------------------------------


def job_arrives(extension, arrival_index, rng):
    """The arriving job's prompt (module docstring), into ``incoming[0]``."""
    draw_prompt(
        extension.incoming,
        extension.prompt_kind,
        extension.prefix_blocks,
        extension.unique_blocks,
        extension.first_unique,
        extension.prefix_keep,
        extension.prefix_alias,
        extension.chain_indptr,
        extension.decode_sizes,
        extension.exponential_prefill,
        arrival_index,
        rng,
    )


@njit
def draw_prompt(
    incoming,
    kind,
    prefix_blocks,
    unique_blocks,
    first_unique,
    keep,
    alias,
    indptr,
    decode_sizes,
    exponential,
    arrival_index,
    rng,
):
    """:func:`job_arrives` on its arrays: the prefix by the alias table (no draw with one), or the
    trace's request ``arrival_index`` (its chain and decode size), then the prefill's unit
    exponential under an exponential law."""
    job = records(incoming)[0]
    job.decode = -1.0
    if kind == PROMPTS_SHARED:
        k = 0
        if len(keep) > 1:
            k = alias_draw(keep, alias, rng.random())
        job.start = k * prefix_blocks
        job.length = prefix_blocks + unique_blocks
        job.unique = first_unique + arrival_index * unique_blocks
    elif kind == PROMPTS_TRACE:
        job.start = indptr[arrival_index]
        job.length = indptr[arrival_index + 1] - job.start
        job.unique = 0
        job.decode = decode_sizes[arrival_index]
    else:
        job.start = 0
        job.length = 0
        job.unique = 0
    job.missing = 0
    job.factor = 1.0
    if exponential:
        job.factor = rng.exponential()


def next_epoch(extension, c, now, arrival_code, arrival_params, rng):
    """The next arrival epoch of a process other than Poisson, a trace's included
    (hetlb.kernels.arrivals.next_or_trace_epoch)."""
    return next_or_trace_epoch(c, now, arrival_code, arrival_params, rng)


def reads_cache(extension, policy_code):
    """Whether the run's policy reads the caches."""
    return extension.reads_cache


def route_by_cache(extension, policy_code, candidates, lo, hi, queue_len, now, rng):
    """The decision of a policy that reads the caches (module docstring)."""
    return decide_by_cache(extension, policy_code, candidates, lo, hi, queue_len, now, rng)


def slot_route_by_cache(extension, policy_code, candidates, lo, hi, queue_len, now, rng):
    """:func:`route_by_cache` on servers of several slots."""
    return slot_decide_by_cache(extension, policy_code, candidates, lo, hi, queue_len, now, rng)


@njit
def choose_by_cache(extension, policy_code, candidates, lo, hi, queue_len, rng):
    """The rule of hetlb.policies.cache_rules on the matches, works U_s and rates of the candidates
    (``extension.match``, ``work``, ``rate``); the arriving job keeps its uncached blocks there."""
    job = records(extension.incoming)[0]
    length = job.length
    n_prefix = min(length, extension.prefix_blocks)
    match, work, rate = extension.match, extension.work, extension.rate
    lists = records(extension.lists)
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


def job_joins(extension, s, now):
    """The arriving job is admitted to s: its uncached blocks join D_s."""
    extension.missing[s] += records(extension.incoming)[0].missing


def job_waits(extension, slot):
    """The arriving job waits in job slot ``slot``: its prompt goes there."""
    copy_job(extension.incoming, 0, extension.jobs, slot)


@njit(inline="always")
def copy_job(source, i, target, j):
    """Job record ``target[j]`` becomes ``source[i]``."""
    to = records(target)[j]
    of = records(source)[i]
    to.start = of.start
    to.unique = of.unique
    to.length = of.length
    to.missing = of.missing
    to.factor = of.factor
    to.decode = of.decode


@njit
def record_measured(
    counters,
    ttft_histogram,
    ttft_batches,
    server_hits,
    server_requested,
    rank_jobs,
    rank_hits,
    rank_requested,
    kind,
    prefix_blocks,
    s,
    ttft,
    hit,
    length,
    start,
    arrival,
    c,
    batch_close,
    n_batches,
):
    """A measured job that arrived at ``arrival`` leaves s: its time to first token ``ttft``, its
    ``hit`` blocks of ``length`` (its chain's ``start``: a shared prefix's rank)."""
    sums = records(counters)[0]
    sums.measured += 1
    sums.ttft_sum += ttft
    sums.ttft_sq_sum += ttft * ttft
    sums.hits += hit
    sums.requested += length
    ttft_histogram[histogram_bin(ttft)] += 1
    b = arrival_batch(c, arrival, batch_close, n_batches)
    ttft_batches[b, 0] += 1.0
    ttft_batches[b, 1] += ttft
    server_hits[s] += hit
    server_requested[s] += length
    if kind == PROMPTS_SHARED:
        rank = start // prefix_blocks
        if rank < len(rank_jobs):
            rank_jobs[rank] += 1
            rank_hits[rank] += hit
            rank_requested[rank] += length


@njit(inline="always")
def measured(extension, s, ttft, hit, length, start, arrival, c, batch_close, n_batches):
    """:func:`record_measured` on the extension's arrays."""
    record_measured(
        extension.counters,
        extension.ttft_histogram,
        extension.ttft_batches,
        extension.server_hits,
        extension.server_requested,
        extension.rank_jobs,
        extension.rank_hits,
        extension.rank_requested,
        extension.prompt_kind,
        extension.prefix_blocks,
        s,
        ttft,
        hit,
        length,
        start,
        arrival,
        c,
        batch_close,
        n_batches,
    )


# --- servers of concurrency 1 (a CacheExtension) -------------------------------------------------------


@njit
def apply_due(serving, lists, nodes, table, listed, prefix_blocks, s, now):
    """Apply server s's pending insertion if its prefill has ended by ``now``."""
    served = records(serving)[s]
    if served.pending == 1 and served.prefill_end <= now:
        served.held = insert_chain(
            lists,
            nodes,
            table,
            s,
            listed,
            served.start,
            min(served.length, prefix_blocks),
            served.unique,
            served.length,
            served.held,
        )
        served.pending = 0


@njit
def decide_by_cache(extension, policy_code, candidates, lo, hi, queue_len, now, rng):
    """The decision of a policy that reads the caches, servers of concurrency 1: each candidate's
    pending insertion if due, its match, U_s and rate mu_s, then :func:`choose_by_cache`."""
    job = records(extension.incoming)[0]
    length = job.length
    n_prefix = min(length, extension.prefix_blocks)
    match, work, rate = extension.match, extension.work, extension.rate
    for i in range(lo, hi):
        s = candidates[i]
        apply_due(
            extension.serving,
            extension.lists,
            extension.nodes,
            extension.table,
            extension.listed,
            extension.prefix_blocks,
            s,
            now,
        )
        match[s] = leading_match(extension.table, s, extension.listed, job.start, n_prefix, job.unique, length)
        work[s] = queue_len[s] + extension.prefill_work * extension.missing[s]
        rate[s] = extension.speed[s]
    return choose_by_cache(extension, policy_code, candidates, lo, hi, queue_len, rng)


def work_at_start(extension, s, now, size, slot, clock):
    """The job of job slot ``slot`` (-1: the arriving one) starts service at s (:func:`start_job`)."""
    return start_job(
        extension.incoming,
        extension.jobs,
        extension.serving,
        extension.lists,
        extension.nodes,
        extension.table,
        extension.listed,
        extension.inv_speed,
        extension.prefix_blocks,
        extension.prefill_work,
        s,
        now,
        size,
        slot,
    )


@njit
def start_job(incoming, jobs, serving, lists, nodes, table, listed, inv_speed, prefix_blocks, work, s, now, size, slot):
    """The job of job slot ``slot`` (-1: ``incoming[0]``) starts service at s: its hit, held; its
    work W (L - h) (times its factor) + size; its prefill's end, its insertion then pending."""
    job = records(incoming)[0] if slot < 0 else records(jobs)[slot]
    served = records(serving)[s]
    served.start = job.start
    served.unique = job.unique
    served.length = job.length
    served.missing = job.missing
    hit = hold_hit(lists, nodes, table, s, listed, job.start, min(job.length, prefix_blocks), job.unique, job.length)
    served.hit = hit
    served.held = hit
    served.pending = 1 if job.length > 0 else 0
    prefill = work * (job.length - hit) * job.factor
    served.prefill_end = now + prefill * inv_speed[s]
    return prefill + (job.decode if job.decode >= 0.0 else size)


def service_placed(extension, s, index):
    """No heap of jobs in service with concurrency 1."""


def service_moved(extension, source, target):
    """No heap of jobs in service with concurrency 1."""


def job_leaves(extension, s, now):
    """The job in service leaves s (:func:`leave_job`)."""
    leave_job(
        extension.serving,
        extension.lists,
        extension.nodes,
        extension.table,
        extension.listed,
        extension.missing,
        extension.prefix_blocks,
        s,
        now,
    )


@njit
def leave_job(serving, lists, nodes, table, listed, missing, prefix_blocks, s, now):
    """The job in service leaves s: its insertion (its prefill has ended), then the release of the
    blocks it holds; its uncached blocks leave D_s."""
    apply_due(serving, lists, nodes, table, listed, prefix_blocks, s, now)
    served = records(serving)[s]
    release_chain(
        lists, nodes, table, s, listed, served.start, min(served.length, prefix_blocks), served.unique, served.held
    )
    served.held = 0
    missing[s] -= served.missing


def job_measured(extension, s, now, arrival, c, batch_close, n_batches):
    """A measured job leaves s: its time to first token, hits and blocks requested."""
    served = records(extension.serving)[s]
    measured(
        extension,
        s,
        served.prefill_end - arrival,
        served.hit,
        served.length,
        served.start,
        arrival,
        c,
        batch_close,
        n_batches,
    )


# --- servers of several slots (a SlotCacheExtension) ---------------------------------------------------
#
# The jobs in service at s receive work at one rate, so a job's prefill ends when the server's
# attained-work clock reaches its prefill threshold (the clock at its start plus its prefill work):
# the pending insertions are those thresholds, applied in their order (the least first, simultaneous
# ones in the order their services started) when the clock has reached them at the moment of an
# access to the server's cache (a service starts, a job leaves, a decision reads it), each at the
# exact time the clock reached it: the rate has not changed since the clock's last reading (every
# change of the number in service is such an access, and applies the due ones first).


@njit
def apply_pending(slot_servers, service_jobs, next_prefill, lists, nodes, table, listed, prefix_blocks, s, limit):
    """Apply, in order, the insertions of the jobs in service at s whose prefill threshold is at most
    the clock reading ``limit``, each with the time its prefill ended."""
    slot = records(slot_servers)[s]
    jobs = records(service_jobs)
    while next_prefill[s] <= limit:
        base = slot.heap_offset
        best = -1
        for i in range(base, base + slot.in_service):
            if jobs[i].pending == 1:
                if best < 0 or jobs[i].prefill < jobs[best].prefill:
                    best = i
                elif jobs[i].prefill == jobs[best].prefill and jobs[i].sequence < jobs[best].sequence:
                    best = i
        job = jobs[best]
        job.held = insert_chain(
            lists,
            nodes,
            table,
            s,
            listed,
            job.start,
            min(job.length, prefix_blocks),
            job.unique,
            job.length,
            job.held,
        )
        job.pending = 0
        job.prefill_end = slot.clock_time + (job.prefill - slot.clock) * slot.inv_rate
        least = np.inf
        for i in range(base, base + slot.in_service):
            if jobs[i].pending == 1:
                least = min(least, jobs[i].prefill)
        next_prefill[s] = least


@njit
def slot_decide_by_cache(extension, policy_code, candidates, lo, hi, queue_len, now, rng):
    """The decision of a policy that reads the caches on servers of several slots: each candidate's
    insertions due by ``now``, its match, U_s and rate mu_s phi_s(min(n_s + 1, c_s)), then
    :func:`choose_by_cache`."""
    job = records(extension.incoming)[0]
    length = job.length
    n_prefix = min(length, extension.prefix_blocks)
    match, work, rate = extension.match, extension.work, extension.rate
    slots = records(extension.slot_servers)
    for i in range(lo, hi):
        s = candidates[i]
        least = extension.next_prefill[s]
        slot = slots[s]
        if least < np.inf and slot.clock_time + (least - slot.clock) * slot.inv_rate <= now:
            apply_pending(
                extension.slot_servers,
                extension.service_jobs,
                extension.next_prefill,
                extension.lists,
                extension.nodes,
                extension.table,
                extension.listed,
                extension.prefix_blocks,
                s,
                max(least, slot.clock + (now - slot.clock_time) / slot.inv_rate),
            )
        match[s] = leading_match(extension.table, s, extension.listed, job.start, n_prefix, job.unique, length)
        work[s] = queue_len[s] + extension.prefill_work * extension.missing[s]
        entering = min(queue_len[s] + 1, slot.concurrency)
        phi = curve_phi(extension.curve_phi, extension.curve_alpha, extension.curve_tail, slot.curve, entering)
        rate[s] = extension.speed[s] * phi
    return choose_by_cache(extension, policy_code, candidates, lo, hi, queue_len, rng)


def slot_work_at_start(extension, s, now, size, slot, clock):
    """The job of job slot ``slot`` (-1: the arriving one) starts service at s, whose clock reads
    ``clock`` (:func:`slot_start_job`)."""
    return slot_start_job(
        extension.incoming,
        extension.jobs,
        extension.entering,
        extension.starts,
        extension.slot_servers,
        extension.service_jobs,
        extension.next_prefill,
        extension.lists,
        extension.nodes,
        extension.table,
        extension.listed,
        extension.prefix_blocks,
        extension.prefill_work,
        s,
        now,
        size,
        slot,
        clock,
    )


@njit
def slot_start_job(
    incoming,
    jobs,
    entering_job,
    starts,
    slot_servers,
    service_jobs,
    next_prefill,
    lists,
    nodes,
    table,
    listed,
    prefix_blocks,
    work,
    s,
    now,
    size,
    slot,
    clock,
):
    """The due insertions first, then the starting job's hit, held; its work W (L - h) (times its
    factor) + size; its record, ``entering`` until the heap places it (:func:`slot_service_placed`),
    its insertion pending until the clock reaches clock + W (L - h)."""
    apply_pending(slot_servers, service_jobs, next_prefill, lists, nodes, table, listed, prefix_blocks, s, clock)
    job = records(incoming)[0] if slot < 0 else records(jobs)[slot]
    hit = hold_hit(lists, nodes, table, s, listed, job.start, min(job.length, prefix_blocks), job.unique, job.length)
    prefill = work * (job.length - hit) * job.factor
    total = prefill + (job.decode if job.decode >= 0.0 else size)
    entering = records(entering_job)[0]
    entering.start = job.start
    entering.unique = job.unique
    entering.length = job.length
    entering.missing = job.missing
    entering.hit = hit
    entering.held = hit
    entering.prefill = clock + prefill
    entering.threshold = clock + total
    entering.pending = 1 if job.length > 0 else 0
    entering.prefill_end = now if job.length == 0 else np.nan  # no prompt: its first token at once
    entering.sequence = starts[0]
    starts[0] += 1
    return total


@njit(inline="always")
def copy_service_job(source_jobs, source, target_jobs, target):
    """Record ``target_jobs[target]`` of a job in service becomes ``source_jobs[source]``."""
    to = records(target_jobs)[target]
    of = records(source_jobs)[source]
    to.start = of.start
    to.unique = of.unique
    to.threshold = of.threshold
    to.prefill = of.prefill
    to.prefill_end = of.prefill_end
    to.sequence = of.sequence
    to.length = of.length
    to.missing = of.missing
    to.hit = of.hit
    to.held = of.held
    to.pending = of.pending


def slot_service_placed(extension, s, index):
    """The entering job's record takes entry ``index``; its prefill threshold joins the pending ones."""
    place_entering(extension.service_jobs, extension.entering, extension.next_prefill, s, index)


@njit
def place_entering(service_jobs, entering_job, next_prefill, s, index):
    """:func:`slot_service_placed` on its arrays."""
    copy_service_job(entering_job, 0, service_jobs, index)
    entering = records(entering_job)[0]
    if entering.pending == 1:
        next_prefill[s] = min(next_prefill[s], entering.prefill)


def slot_service_moved(extension, source, target):
    """The record follows its job from entry ``source`` to ``target`` of the heap."""
    copy_service_job(extension.service_jobs, source, extension.service_jobs, target)


@njit
def settle_root(slot_servers, service_jobs, next_prefill, lists, nodes, table, listed, prefix_blocks, s):
    """The job of least threshold (the heap's root) leaves s now: the insertions due by its threshold
    (its own among them); returns its entry."""
    root = records(slot_servers)[s].heap_offset
    limit = records(service_jobs)[root].threshold
    apply_pending(slot_servers, service_jobs, next_prefill, lists, nodes, table, listed, prefix_blocks, s, limit)
    return root


def slot_job_leaves(extension, s, now):
    """The job of least threshold leaves s (:func:`slot_leave_job`)."""
    slot_leave_job(
        extension.slot_servers,
        extension.service_jobs,
        extension.next_prefill,
        extension.lists,
        extension.nodes,
        extension.table,
        extension.listed,
        extension.missing,
        extension.prefix_blocks,
        s,
    )


@njit
def slot_leave_job(slot_servers, service_jobs, next_prefill, lists, nodes, table, listed, missing, prefix_blocks, s):
    """The due insertions, then the release of the blocks the leaving job holds; its uncached
    blocks leave D_s."""
    root = settle_root(slot_servers, service_jobs, next_prefill, lists, nodes, table, listed, prefix_blocks, s)
    leaving = records(service_jobs)[root]
    release_chain(
        lists, nodes, table, s, listed, leaving.start, min(leaving.length, prefix_blocks), leaving.unique, leaving.held
    )
    leaving.held = 0
    missing[s] -= leaving.missing


def slot_job_measured(extension, s, now, arrival, c, batch_close, n_batches):
    """A measured job (the heap's root) leaves s: its time to first token, hits and blocks requested."""
    root = settle_root(
        extension.slot_servers,
        extension.service_jobs,
        extension.next_prefill,
        extension.lists,
        extension.nodes,
        extension.table,
        extension.listed,
        extension.prefix_blocks,
        s,
    )
    leaving = records(extension.service_jobs)[root]
    measured(
        extension,
        s,
        leaving.prefill_end - arrival,
        leaving.hit,
        leaving.length,
        leaving.start,
        arrival,
        c,
        batch_close,
        n_batches,
    )
