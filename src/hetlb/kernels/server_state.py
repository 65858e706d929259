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
kind of per-server state (a cache of prompt blocks, say, whose hit decides a job's work when its
service starts) joins in the three helpers below and in :class:`ServerExtension` alone, in every
loop at once, without a copy of any loop. At a departure ``job_leaves`` runs before the next job
starts (``leave_server`` comes before ``serve_next`` and ``end_slot_service``), so the next job sees
what the one that left did to the server.

``extension`` is the run's :class:`ServerExtension` (the ``extension`` field of
hetlb.kernels.continuous.KernelState), which each loop takes out of the state once, before its
loop, and passes down. It has no field today, and the helpers change nothing: a job's work is its
size, drawn at its arrival, so every result is what it was before the seam, bit for bit, and the
loops compile to the code they had (an empty tuple is no value at all in numba).

What state that joins here must respect (docs/background/performance.md):

* the helpers are ``inline="always"``: numba inlines them into the server-side helpers and those
  into the loops, so that an event costs no call;
* :func:`hetlb.kernels.batch_servers.advance` and :func:`hetlb.kernels.dispatchers.advance` are
  compiled without numba's runtime (``_nrt=False``): they may pass arrays in the extension freely,
  but nothing here may allocate; :func:`hetlb.kernels.continuous.advance` is compiled with the
  runtime, where an array an inlined helper takes is reference-counted at each call unless it is
  used on every path: measure that loop's floor ratio (benchmarks/floor_ratio.py) when an array
  joins;
* the job's own data beyond its size (the chain of blocks of its prompt, say) would travel with it
  as its size does: ``job_size[slot]`` while it waits, the server record's ``service_size`` (c = 1)
  or its SERVICE_DTYPE entry (c > 1) while served; these helpers take the size, and such data would
  join beside it.

The slotted model (hetlb.kernels.slotted) has no job that starts service: its module docstring
says what it can carry.
"""

from collections import namedtuple

from hetlb.jit import njit

ServerExtension = namedtuple("ServerExtension", [])
ServerExtension.__doc__ = """Per-server state beyond the queue, read and changed by :func:`job_joins`,
:func:`work_at_start` and :func:`job_leaves` only; no field today (module docstring)."""


@njit(inline="always")
def job_joins(extension, s, now):
    """A job is admitted to server s at ``now`` (it has passed the buffer's check and the server
    counts it); nothing to do today."""


@njit(inline="always")
def work_at_start(extension, s, now, size):
    """A job of ``size`` starts service at server s at ``now``: its work, fixed from now on (today
    its size)."""
    return size


@njit(inline="always")
def job_leaves(extension, s, now):
    """A job leaves server s at ``now`` (its service is complete); nothing to do today."""
