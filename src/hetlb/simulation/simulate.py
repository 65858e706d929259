"""``hetlb.simulate``: the continuous-time model with one dispatcher that knows every queue
(hetlb.simulation.continuous), or with several that decide on their own estimates
(hetlb.simulation.dispatchers).

>>> import hetlb
>>> system = hetlb.System.from_speeds([2.0, 1.0, 0.5], load=0.8)
>>> result = hetlb.simulate(system, "jfsq", jobs=20_000, warmup=100.0, seed=1)
>>> round(result.mean_response_time, 1) > 0
True
"""

from __future__ import annotations

import multiprocessing
import sys

import numpy as np

from hetlb.model.system import System
from hetlb.policies.registry import Policy
from hetlb.results.dispatchers import DispatchersResult
from hetlb.results.run import SimulationResult
from hetlb.simulation import fast_start
from hetlb.simulation.continuous import simulate_one_dispatcher
from hetlb.simulation.dispatchers import simulate_dispatchers
from hetlb.simulation.options import RunOptions, options_of


def simulate(
    system: System,
    policy: str | Policy = "jsq",
    options: RunOptions | None = None,
    *,
    jobs: int | None = None,
    horizon: float | None = None,
    warmup: float = 0.0,
    replications: int = 1,
    seed: int | np.random.SeedSequence = 0,
    batches: int = 20,
    occupancy_levels: int = 10,
    state_distribution: bool = False,
    speed_bins: int | None = None,
    trace: int = 0,
    progress: bool = False,
    dispatchers: int | None = None,
    update=None,
    dispatcher_share=None,
    herd_window: float | None = None,
    **policy_params,
) -> SimulationResult | DispatchersResult:
    """Simulate ``system`` under ``policy``; return the replications and their aggregate.

    Parameters
    ----------
    system
        The servers, job types, graph, buffers, job sizes and arrivals (``hetlb.model.System``).
    policy
        A policy id of the registry (``hetlb policies`` lists them) or a ``hetlb.policies.Policy``.
    options
        The run options as one hetlb.simulation.options.RunOptions, instead of the keywords below
        (which it holds under the same names).
    jobs
        Measure the jobs arriving after the warm-up until this many have been admitted (default
        100,000 when ``horizon`` is not given). The run goes on until every measured job has left.
    horizon
        Measure instead the jobs arriving up to this simulated time (time units).
    warmup
        Simulated time discarded before statistics start (time units).
    replications
        Independent runs; replication r draws from ``SeedSequence(seed, spawn_key=(r,))``, split
        into an arrival stream and a policy stream, so every policy sees the same arrival epochs,
        job types and job sizes for the same seed (common random numbers).
    seed
        An integer >= 0, or a SeedSequence whose spawn key the replication index extends.
    batches
        Batches for the batch-means confidence intervals of each run.
    occupancy_levels
        How many levels i of s_{m,i} (000) to record.
    state_distribution
        Also record the time-distribution of the number of jobs in system and of waiting jobs (for
        the CCDFs of X_{+1} and X_{+2} of 002; ``hetlb.stats.halfin_whitt``).
    speed_bins
        Also report, in this many equal-width bins of speed, the share of idleness eta and the
        scaled occupancy xi_2 of 002 (``RunResult.speed_profile``).
    trace
        Record the first ``trace`` routing decisions (time, job type, server, queue length).
    progress
        Draw a progress bar on standard error (no effect on results).
    dispatchers, update, dispatcher_share, herd_window
        M dispatchers that decide on their own estimates, refreshed by update signals
        (hetlb.simulation.dispatchers.simulate_dispatchers, which returns a DispatchersResult); an
        LED policy (l-jsq, l-jba, l-pod) needs them. Without them, one dispatcher that knows every
        queue (hetlb.simulation.continuous). See RunOptions.
    **policy_params
        The policy's parameters, e.g. ``d=3`` for ``pod``.

    Returns
    -------
    SimulationResult or DispatchersResult
        The replications and their aggregate, with intervals.
    """
    keywords = dict(
        jobs=jobs,
        horizon=horizon,
        warmup=warmup,
        replications=replications,
        seed=seed,
        batches=batches,
        occupancy_levels=occupancy_levels,
        state_distribution=state_distribution,
        speed_bins=speed_bins,
        trace=trace,
        progress=progress,
        dispatchers=dispatchers,
        update=update,
        dispatcher_share=dispatcher_share,
        herd_window=herd_window,
    )
    options = options_of(RunOptions, options, keywords)
    announce_compiling(("dispatchers",) if options.many_dispatchers else ("continuous",))
    if options.many_dispatchers:
        return simulate_dispatchers(system, policy, options, **policy_params)
    return simulate_one_dispatcher(system, policy, options, **policy_params)


COMPILE_NOTICE = "compiling the simulation kernels: a few seconds to a minute, once (later runs load them)"
MODELS = ("continuous", "dispatchers", "slotted")
announced: set = set()
"""The MODELS whose kernels this process has looked at."""


def announce_compiling(
    models=("continuous",), *, enabled: bool = True, where: bool = False, again: bool = False
) -> None:
    """Once per process and model (each time with ``again``): when the kernels of ``models``
    ("continuous", "dispatchers", "slotted") have no compiled code in numba's cache, say so on
    standard error (``enabled``; ``where`` adds the cache's folder) before the first simulation
    that runs numba's kernels, whose first call compiles them; a short one runs as plain Python
    (hetlb.simulation.fast_start) and says nothing. hetlb.simulate and hetlb.simulate_slotted call
    it; each command calls it first, with its --quiet and --verbose."""
    models = [model for model in models if again or model not in announced]
    if not models or multiprocessing.parent_process() is not None:  # a sweep's workers: their parent says it
        return
    announced.update(models)
    fast_start.before_compiled_run((lambda: say_if_compiling(models, where)) if enabled else None)


def say_if_compiling(models, where: bool) -> None:
    """The notice of :func:`announce_compiling`, when a kernel of ``models`` is not in numba's cache."""
    from hetlb.progress import needs_compiling

    kernels = []
    if "continuous" in models:
        from hetlb.kernels import continuous

        kernels += [continuous.advance, continuous.finish]
    if "dispatchers" in models:
        from hetlb.kernels import dispatchers

        kernels += [dispatchers.advance]
    if "slotted" in models:
        from hetlb.kernels import slotted

        kernels += [slotted.advance]
    if kernels and needs_compiling(*kernels):
        folder = getattr(getattr(kernels[0], "_cache", None), "_cache_path", "numba cache")
        notice = COMPILE_NOTICE.replace(":", f" into {folder}:", 1) if where else COMPILE_NOTICE
        print(f"hetlb: {notice}", file=sys.stderr, flush=True)
