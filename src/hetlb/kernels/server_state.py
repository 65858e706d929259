"""Where per-server state beyond the queue joins the continuous-time event loops.

Three loops run the continuous model: :func:`hetlb.kernels.continuous.advance` (one dispatcher,
servers of concurrency 1), :func:`hetlb.kernels.batch_servers.advance` (one dispatcher, some server
of concurrency c_s > 1) and :func:`hetlb.kernels.dispatchers.advance` (M dispatchers, on either
kind of server). Each changes a server at three moments only, and at each moment every loop goes
through the one helper of this module that belongs to it:

========================================  =====================  ==========================================
the moment                                the helper             called from
========================================  =====================  ==========================================
a job is admitted to server s             :func:`job_joins`      ``continuous.admit_job``
a job starts service at s: its work is    :func:`work_at_start`  ``continuous.start_service`` (an arrival at
fixed                                                            an idle server), ``continuous.serve_next``
                                                                 (the first waiting job, at a departure),
                                                                 ``batch_servers.start_slot_service`` (an
                                                                 arrival at a free slot),
                                                                 ``batch_servers.end_slot_service`` (the
                                                                 first waiting job takes the departing
                                                                 job's slot)
a job leaves s                            :func:`job_leaves`     ``continuous.leave_server``
========================================  =====================  ==========================================

Those four server-side helpers are the only places where the loops start a job's service, and
``admit_job`` and ``leave_server`` the only places where a job joins or leaves a server, so a new
kind of per-server state joins in the helpers below, in every loop at once, without a copy of any
loop. At a departure ``job_leaves`` runs before the next job starts (``leave_server`` comes before
``serve_next`` and ``end_slot_service``), so the next job sees what the one that left did to the
server. A state that travels with a job (its prompt) needs four more moments, which the loops
that carry it call: the job's arrival (:func:`job_arrives`, after its type is drawn, from the
arrival stream), the routing decision of a policy that reads the state (:func:`reads_cache`,
:func:`route_by_cache`), the job's wait in a job slot (:func:`job_waits`, after ``queue_job``)
and the measurement of a measured job as it leaves (:func:`job_measured`).

``extension`` is the run's per-server state (the ``extension`` field of
hetlb.kernels.continuous.KernelState), which each loop takes out of the state once, before its
loop, and passes down. It is one of two types:

* :data:`ServerExtension` (no field): every helper does nothing (``work_at_start`` gives the job's
  size, drawn at its arrival), so every result is what it was before the seam, bit for bit, and
  the loops compile to the code they had (an empty tuple is no value at all in numba);
* :data:`CacheExtension`: the servers' prefix caches (docs/background/prefix-caches.md), whose
  helpers are those of :mod:`hetlb.kernels.server_caches`.

Each helper is one function for the loops, whose implementation numba picks by the extension's
type when it compiles the loop (hetlb.jit.by_types): a loop is compiled once per type, and the
one without caches has none of their code. Plain Python (hetlb.jit) picks by the value.

What state that joins here must respect (docs/background/performance.md):

* the implementations are inlined into the loops, so that an event costs no call;
* :func:`hetlb.kernels.batch_servers.advance` and :func:`hetlb.kernels.dispatchers.advance` are
  compiled without numba's runtime (``_nrt=False``): they may pass arrays in the extension freely,
  but nothing here may allocate; :func:`hetlb.kernels.continuous.advance` is compiled with the
  runtime, where an array an inlined helper takes is reference-counted at each call unless it is
  used on every path, so a run with caches runs its copy compiled without the runtime
  (``continuous.advance_with_caches``);
* the job's own data beyond its size (the chain of blocks of its prompt) travels with it as its
  size does: in the extension's job slots while it waits (``job_waits``), in its per-server
  record while served.

The slotted model (hetlb.kernels.slotted) has no job that starts service: its module docstring
says what it can carry.
"""

import functools
from collections import namedtuple

from hetlb.jit import by_types
from hetlb.kernels.arrivals import next_arrival_epoch

ServerExtension = namedtuple("ServerExtension", [])
ServerExtension.__doc__ = """No per-server state beyond the queue: every helper of
hetlb.kernels.server_state does nothing (module docstring)."""

CACHE_FIELDS = (
    # the prompts (hetlb.kernels.server_caches.new_cache_extension says what each holds)
    "prompt_kind",
    "prefix_blocks",
    "unique_blocks",
    "first_unique",
    "prefix_keep",
    "prefix_alias",
    "listed",
    "chain_indptr",
    "decode_sizes",
    "prefill_work",
    "exponential_prefill",
    "speed",
    "inv_speed",
    # the policy's, when it reads the caches
    "reads_cache",
    "policy_params",
    "ring_position",
    "ring_server",
    # the caches (hetlb.kernels.prefix_cache)
    "lists",
    "nodes",
    "table",
    # the jobs
    "missing",
    "jobs",
    "incoming",
    # a decision's scratch
    "match",
    "work",
    "rate",
    "key",
    "ties",
    "eligible",
    # the statistics
    "counters",
    "ttft_histogram",
    "ttft_batches",
    "server_hits",
    "server_requested",
    "rank_jobs",
    "rank_hits",
    "rank_requested",
)
"""What the caches' state holds in every loop (hetlb.simulation.caches.new_cache_extension)."""

CacheExtension = namedtuple(
    "CacheExtension",
    [
        "prompt_kind",
        "prefix_blocks",
        "unique_blocks",
        "first_unique",
        "prefix_keep",
        "prefix_alias",
        "listed",
        "chain_indptr",
        "decode_sizes",
        "prefill_work",
        "exponential_prefill",
        "speed",
        "inv_speed",
        "reads_cache",
        "policy_params",
        "ring_position",
        "ring_server",
        "lists",
        "nodes",
        "table",
        "missing",
        "jobs",
        "incoming",
        "match",
        "work",
        "rate",
        "key",
        "ties",
        "eligible",
        "counters",
        "ttft_histogram",
        "ttft_batches",
        "server_hits",
        "server_requested",
        "rank_jobs",
        "rank_hits",
        "rank_requested",
        "serving",
    ],
)
CacheExtension.__doc__ = """The servers' prefix caches and the prompts of the jobs, as per-server state
of the loop of servers of concurrency 1 (hetlb.kernels.server_caches); ``serving``: the job each
server serves."""

SlotCacheExtension = namedtuple(
    "SlotCacheExtension",
    [
        "prompt_kind",
        "prefix_blocks",
        "unique_blocks",
        "first_unique",
        "prefix_keep",
        "prefix_alias",
        "listed",
        "chain_indptr",
        "decode_sizes",
        "prefill_work",
        "exponential_prefill",
        "speed",
        "inv_speed",
        "reads_cache",
        "policy_params",
        "ring_position",
        "ring_server",
        "lists",
        "nodes",
        "table",
        "missing",
        "jobs",
        "incoming",
        "match",
        "work",
        "rate",
        "key",
        "ties",
        "eligible",
        "counters",
        "ttft_histogram",
        "ttft_batches",
        "server_hits",
        "server_requested",
        "rank_jobs",
        "rank_hits",
        "rank_requested",
        "slot_servers",
        "service_jobs",
        "entering",
        "next_prefill",
        "starts",
        "curve_phi",
        "curve_alpha",
        "curve_tail",
    ],
)
SlotCacheExtension.__doc__ = """The servers' prefix caches on servers of several slots
(hetlb.kernels.server_caches, its ``slot_`` functions): beside the fields of CacheExtension, the
multi-slot servers' records, the caches' data of the jobs in service (``service_jobs``, entry i
that of the job at entry i of hetlb.kernels.batch_servers' heaps, moved as it moves), the record of
the job entering service, each server's least pending prefill threshold, a count of services
started, and the rate curves' tables."""

CACHE_TYPES = (CacheExtension, SlotCacheExtension)


def on_extension(none_version):
    """The seam helper whose implementation without per-server state is ``none_version`` and
    with caches the function of the same name in hetlb.kernels.server_caches (looked up when a
    loop is compiled or a plain call made, which keeps this module free of that one's imports)."""
    name = none_version.__name__

    def cache_version(kind):
        from hetlb.kernels import server_caches

        if kind is SlotCacheExtension and hasattr(server_caches, "slot_" + name):
            return getattr(server_caches, "slot_" + name)
        return getattr(server_caches, name)

    @functools.wraps(none_version)
    def plain(extension, *args):
        kind = type(extension)
        if kind in CACHE_TYPES:
            return cache_version(kind)(extension, *args)
        return none_version(extension, *args)

    @functools.wraps(none_version)
    def choose(extension, *args):
        kind = getattr(extension, "instance_class", None)
        if kind in CACHE_TYPES:
            version = cache_version(kind)
            return getattr(version, "py_func", version)  # numba compiles it into the caller
        return none_version

    return by_types(plain, choose)


@on_extension
def job_arrives(extension, arrival_index, rng):
    """A job arrives (the ``arrival_index``-th, from 0), its type drawn: what else it brings is
    drawn from the arrival stream ``rng`` (its prompt); nothing without caches."""


@on_extension
def next_epoch(extension, c, now, arrival_code, arrival_params, rng):
    """The epoch of the arrival after the one at ``now`` of a process other than Poisson
    (hetlb.kernels.arrivals.next_arrival_epoch; with caches, a trace's too), in the loops compiled
    without numba's runtime (the loop of concurrency 1 for caches gets a trace's epochs from its
    copy's names instead: hetlb.kernels.continuous.advance_with_caches)."""
    return next_arrival_epoch(c, now, arrival_code, arrival_params, rng)


@on_extension
def reads_cache(extension, policy_code):
    """Whether the run's policy decides on the caches (:func:`route_by_cache`); never without them."""
    return False


@on_extension
def route_by_cache(extension, policy_code, candidates, lo, hi, queue_len, now, rng):
    """The server a policy that reads the caches sends the arriving job to, among
    ``candidates[lo:hi]`` (only called when :func:`reads_cache`)."""
    return candidates[lo]


@on_extension
def job_joins(extension, s, now):
    """A job is admitted to server s at ``now`` (it has passed the buffer's check and the server
    counts it); nothing to do without caches."""


@on_extension
def job_waits(extension, slot):
    """The arriving job waits in job slot ``slot``; nothing to do without caches."""


@on_extension
def work_at_start(extension, s, now, size, slot, clock):
    """A job of ``size`` starts service at server s at ``now`` (from job slot ``slot``, or -1 for
    the arriving job; ``clock``: the server's attained-work clock on a server of several slots, now
    on one of concurrency 1): its work, fixed from now on (its size without caches)."""
    return size


@on_extension
def service_placed(extension, s, index):
    """The job entering service at s takes entry ``index`` of the heap of jobs in service (servers
    of several slots); nothing to do without caches."""


@on_extension
def service_moved(extension, source, target):
    """The heap of jobs in service moves entry ``source`` to entry ``target`` (servers of several
    slots); nothing to do without caches."""


@on_extension
def job_leaves(extension, s, now):
    """A job leaves server s at ``now`` (its service is complete); nothing to do without caches."""


@on_extension
def job_measured(extension, s, now, arrival, c, batch_close, n_batches):
    """A measured job that arrived at ``arrival`` leaves server s at ``now`` (before
    :func:`job_leaves`; ``c``, ``batch_close``, ``n_batches``: the counters and batches the loop
    measures with); nothing more to measure without caches."""
