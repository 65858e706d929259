"""``hetlb compile``: every event loop compiled into numba's on-disk cache before its first use.

numba compiles a kernel for the argument types of its call and keeps the machine code in its cache
(``cache=True``, in the directory hetlb.jit.cache_somewhere picks: the package's __pycache__, or
the user's cache directory when the package is read-only, as an installed one often is), so that a
later process loads it in milliseconds instead of compiling it for seconds. :func:`warm_cache`
makes the calls that fill it: a few small runs that take every shape of the continuous model
(:func:`sample_calls`), one of the many-dispatcher model and one of the slotted model. A short run
needs none of it (hetlb.simulation.fast_start runs it as plain Python).
"""

from __future__ import annotations

import time

from hetlb import jit


def sample_calls() -> None:
    """Small runs that take every shape of the continuous model: a complete graph with infinite
    buffers, a sparse graph with finite buffers and hyperexponential sizes, a run to a horizon,
    traces, state distributions, key buckets, the tree, the scan, and the fast and slow samples of
    jsq-df-ds; then one of several dispatchers and one slotted."""
    from hetlb.model.job_sizes import JobSizes
    from hetlb.model.slotted import SlottedSystem
    from hetlb.model.system import System
    from hetlb.simulation.simulate import simulate
    from hetlb.simulation.slotted import simulate_slotted

    sparse = System.from_speeds(
        [2.0, 1.0, 1.0, 0.5],
        arrival_rate=[1.0, 1.0],
        graph=[[0, 1, 2], [1, 2, 3]],
        buffer=[3, 3, 4, 2],
        job_sizes=JobSizes("hyperexponential", 4.0),
    )
    complete = System.from_speeds([2.0, 1.0, 1.0, 0.5, 0.5], load=0.7)
    for policy in ("jsq", "jfsq", "sed", "pod", "jsq-df-ds", "weighted-random", "jsq-lisf"):
        simulate(complete, policy, jobs=200, seed=1)
        simulate(sparse, policy, jobs=200, seed=1, trace=50, state_distribution=True)
    simulate(complete, "jiq", horizon=50.0, warmup=5.0, seed=1)
    simulate(System.from_speeds([1.0, 1.0], arrival_rate=0.5), "l-jsq", jobs=20, dispatchers=2)
    simulate_slotted(SlottedSystem.from_speeds([1.0], dispatchers=1, load=0.5), "jsq", slots=20)


def event_loops() -> list:
    """The numba functions of the event loops that :func:`sample_calls` runs."""
    from hetlb.kernels import continuous, dispatchers, slotted

    return [continuous.advance, continuous.finish, dispatchers.advance, slotted.advance]


def warm_cache() -> str:
    """Compile the event loops into numba's cache with :func:`sample_calls`, unless each is there
    already; a line that says which and where."""
    from hetlb.progress import needs_compiling

    if jit.DISABLED:
        return "not compiled: the kernels run as plain Python (NUMBA_DISABLE_JIT)"
    jit.compile_everything()
    if not needs_compiling(*event_loops()):
        return f"up to date: numba's cache in {jit.cache_directory()}"
    from hetlb.simulation import fast_start, simulate

    simulate.announced.update(simulate.MODELS)  # this says it compiles, not each sample run
    fast_start.before_compiled_run(None)
    started = time.process_time()
    sample_calls()
    return f"compiled into numba's cache in {jit.cache_directory()} in {time.process_time() - started:.1f} s of CPU"
