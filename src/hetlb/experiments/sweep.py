"""The sweep runner: every (point, replication) of a spec, in parallel, resumable, as tidy tables.

>>> from hetlb.experiments import SweepSpec, sweep
>>> spec = SweepSpec(base={"system": {"speeds": "2,1", "load": 0.5}, "run": {"jobs": 2000}},
...                  axes={"policy.id": ["jsq", "jfsq"]}, replications=2, seed=1)
>>> result = sweep(spec, executor="serial", store=None)
>>> len(result.runs), len(result.summary)
(4, 2)
"""

from __future__ import annotations

import importlib
import itertools
import signal
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hetlb import validation
from hetlb.errors import InputError
from hetlb.experiments.executors import resolve_executor, stop
from hetlb.experiments.spec import SweepSpec
from hetlb.experiments.store import ResultStore
from hetlb.model.system import System
from hetlb.processes import Interrupted, signals_interrupt
from hetlb.progress import ProgressBar
from hetlb.results.table import (  # noqa: F401 (the table's columns, imported from here by the reproductions)
    CCDF_GRID,
    INTERVAL_COLUMNS,
    MAX_CLASS_COLUMNS,
    METRICS,
    SLOTTED_METRICS,
    point_row,
    run_row,
    speed_lower_bound_or_nan,
)
from hetlb.scenario import Scenario
from hetlb.simulation.options import RunOptions
from hetlb.stats import t_interval

if TYPE_CHECKING:
    import pandas as pd

TIMING_COLUMNS = ("wall_seconds", "events_per_second")
"""Columns that measure the machine, not the model: the only ones that differ between executors."""

EVENTS_PER_TASK = 4_000_000
"""Work is grouped into tasks of about this many events (a few seconds), enough to amortise
scheduling and transfer costs."""


@dataclass
class SweepResult:
    """``runs``: one row per point and replication; ``summary``: one row per point with 95%
    intervals (over replications, or the batch-means interval of a single replication).

    Parameters
    ----------
    runs
        One row per point and replication.
    summary
        One row per point, with 95% intervals.
    computed
        Runs computed by this sweep.
    reused
        Runs taken from the store.
    wall_seconds
        The sweep's wall-clock time (seconds).
    """

    runs: pd.DataFrame
    summary: pd.DataFrame
    computed: int
    reused: int
    wall_seconds: float

    def plot(self, metric: str = "mean_response_time", *, x: str | None = None, by=None, bound=False, path=None):
        """The matplotlib Figure of ``metric`` (a column of ``summary``) against the axis ``x`` (by
        default the first axis the sweep varies besides the policy), a line per value of ``by``
        (default "policy.id" when the sweep varies it), 95% bands, C*/lambda with ``bound``;
        written to ``path`` too when one is given (:func:`hetlb.plots.sweep_figure`).

        Parameters
        ----------
        metric
            A numeric column of ``summary``, e.g. "mean_response_time" (time units).
        x
            The axis on the horizontal, e.g. "system.load"; None: the first axis the sweep varies
            besides the policy.
        by
            The axis with a line per value; None: "policy.id" when the sweep varies it; "": one line.
        bound
            Whether to draw C*/lambda, the lower bound of Prop. 1 of 000 on the mean response time.
        path
            A file to write the figure to (its format by the extension); None: none written.

        Returns
        -------
        matplotlib.figure.Figure
            The figure.
        """
        from hetlb.plots import sweep_figure

        if x is None:
            varied = [c for c in self.summary.columns if "." in c and self.summary[c].map(repr).nunique() > 1]
            x = next((c for c in varied if c != "policy.id"), varied[0] if varied else "")
        return sweep_figure(self.summary, x=x, by=by, metric=metric, bound=bound, path=path)

    def __repr__(self) -> str:
        """A summary: points, runs (computed and reused), time and the metrics' columns."""
        metrics = [name for name in ("mean_response_time", "blocking_probability") if name in self.summary.columns]
        return (
            f"<SweepResult {len(self.summary)} points, {len(self.runs)} runs ({self.computed} computed, "
            f"{self.reused} reused) in {self.wall_seconds:.3g} s; summary columns {', '.join(metrics)}, ... "
            f"({len(self.summary.columns)} in all)>"
        )


@signals_interrupt()  # SIGTERM too raises KeyboardInterrupt (an Interrupted) while a sweep runs
def sweep(
    spec: SweepSpec | str | Path,
    *,
    executor=None,
    store=None,
    out=None,
    force: bool = False,
    progress: bool = True,
    events_per_task: int = EVENTS_PER_TASK,
) -> SweepResult:
    """Run every (point, replication) of ``spec`` not already in ``store`` and return the tables.

    Parameters
    ----------
    spec
        A ``SweepSpec``, or the path of its TOML file.
    executor
        See ``hetlb.experiments.executors.resolve_executor`` (default: all local cores).
    store
        Path of a result store (default None: nothing is written); finished runs are written as
        they complete, so an interrupted sweep resumes where it stopped (``hetlb sweep`` stores in
        hetlb-results.sqlite unless told otherwise).
    out
        A folder for runs.csv, runs.parquet, summary.csv and summary.parquet (None writes none).
    force
        Recompute the runs the store already holds.
    progress
        A progress bar on standard error (a log line every few seconds when it is not a terminal,
        as in a notebook); False for none.
    events_per_task
        The simulated events a task of the executor holds at most (tasks shrink as the work left
        does, so that every worker stays busy to the end).

    Returns
    -------
    SweepResult
        The tables of runs and of points.
    """
    spec = spec if isinstance(spec, SweepSpec) else SweepSpec.from_toml(spec)
    started = time.perf_counter()
    points = spec.points()
    units = spec.units(points)
    out = None if out is None else validation.output_folder("out", out)  # checked before any run
    results_store = ResultStore(store) if store is not None else None
    try:
        done = {} if force or results_store is None else results_store.existing(unit.key for unit in units)
        if results_store is not None:  # registered before any run, so a sweep stopped midway is listed
            results_store.register(
                spec.name,
                [(unit.key, unit.point_index, points[unit.point_index].values, unit.replication) for unit in units],
                spec=spec.to_mapping(),
                source=spec.source,
            )
        todo = [unit for unit in units if unit.key not in done]
        reused = len(units) - len(todo)

        bar = ProgressBar(f"{spec.name} ", enabled=progress)
        events = sum(row.get("events", 0) for row in done.values())
        if todo:
            pool, workers, close = resolve_executor(executor, kernels=tuple(sorted({point.kernel for point in points})))
            in_flight: set[Future] = set()
            prefetch: threading.Thread | None = None
            prefetching = False
            try:
                tasks = iter(group_units(todo, points, events_per_task, 2 * workers))
                while True:
                    # keep two tasks per worker submitted, so results are stored as they come
                    for task in itertools.islice(tasks, 2 * workers - len(in_flight)):
                        in_flight.add(pool.submit(run_units, task))
                    if not prefetching:  # after the first submissions: a forking pool has forked
                        prefetch, prefetching = import_in_background("pandas"), True
                    if not in_flight:
                        break
                    finished_futures, in_flight = wait(in_flight, return_when=FIRST_COMPLETED)
                    for future in finished_futures:
                        finished = dict(future.result())
                        if results_store is not None:
                            results_store.put(finished)
                        done.update(finished)
                        events += sum(row.get("events", 0) for row in finished.values())
                    bar.update((len(done) - reused) / len(todo), events, detail=f"{len(done)}/{len(units)} runs")
            except KeyboardInterrupt as interrupt:  # Ctrl-C or SIGTERM: stop the workers, keep what is stored
                stop(pool, in_flight)
                finished = {}  # tasks that ended before the interrupt was seen are kept too
                for future in in_flight:
                    if future.done() and not future.cancelled() and future.exception() is None:
                        finished.update(future.result())
                if finished and results_store is not None:
                    results_store.put(finished)
                done.update(finished)
                if bar.live:
                    bar.close()  # ends the bar's line
                stored = None if results_store is None else len(results_store.existing(unit.key for unit in units))
                raise interrupted(spec, len(units), stored, len(done), interrupt) from None
            finally:
                close()
                if prefetch is not None:
                    prefetch.join()
            bar.close()
    finally:
        if results_store is not None:
            results_store.close()

    runs = runs_table(points, units, done)
    summary = summary_table(points, runs)
    if out is not None:
        write_tables(out, runs, summary)
    return SweepResult(runs, summary, len(todo), reused, time.perf_counter() - started)


def import_in_background(name: str) -> threading.Thread | None:
    """Import module ``name`` in a thread of this process while the workers run (the sweep's
    owner mostly waits), so that building the tables does not pay for it at the end. None when
    it is imported already."""
    if name in sys.modules:
        return None
    thread = threading.Thread(target=importlib.import_module, args=(name,), name="hetlb-import", daemon=True)
    thread.start()
    return thread


def interrupted(spec: SweepSpec, runs: int, stored: int | None, finished: int, interrupt) -> Interrupted:
    """The :class:`Interrupted` of a sweep stopped by ``interrupt`` (its signal, SIGINT for a
    plain KeyboardInterrupt), saying how many of its ``runs`` are ``stored`` (None: no store,
    ``finished`` of them were done) and how to resume."""
    number = getattr(interrupt, "signal_number", signal.SIGINT)
    if stored is None:
        return Interrupted(f"interrupted: {finished} of {runs} runs finished, none stored (no result store)", number)
    again = f"`hetlb sweep {spec.source}`" if spec.source else f"running sweep {spec.name!r} again on the same store"
    return Interrupted(f"interrupted: {stored} of {runs} runs stored; {again} resumes", number)


def estimated_events(scenario: Scenario) -> float:
    """Arrivals plus departures a run will take, roughly."""
    run = scenario.run
    if not isinstance(run, RunOptions):  # the slotted model's
        return float(run.slots + run.warmup) * scenario.system.n_servers
    rate = scenario.system.total_arrival_rate
    if run.horizon is not None:
        return 2.0 * rate * run.horizon
    return 2.0 * ((run.jobs or 0) + rate * run.warmup)


def group_units(units, points, events_per_task: int, min_tasks: int) -> list[list]:
    """Units in tasks, longest first, so that the cores finish together.

    Units are taken in decreasing estimated cost (ties in their order), and each task gathers
    about min(``events_per_task``, remaining work / ``min_tasks``) events: tasks shrink as the
    work left does (guided scheduling), so the last ones are short and no core waits at the end
    of a sweep for another's long task; there are at least ``min_tasks`` tasks when there are
    that many units (so every worker has work)."""
    cost = {i: estimated_events(Scenario.from_mapping(point.scenario)) for i, point in enumerate(points)}
    ordered = sorted(units, key=lambda unit: -cost[unit.point_index])
    remaining = sum(cost[unit.point_index] for unit in ordered)
    groups: list[list] = []
    current: list = []
    size, target = 0.0, 0.0
    for unit in ordered:
        if not current:
            target = min(events_per_task, remaining / min_tasks)
        current.append(unit)
        size += cost[unit.point_index]
        if size >= target:
            groups.append(current)
            remaining -= size
            current, size = [], 0.0
    if current:
        groups.append(current)
    return groups


def run_units(units) -> list[tuple[str, dict]]:
    """Worker side: simulate each unit; return (store key, row) pairs."""
    rows = []
    for unit in units:
        result = Scenario.from_mapping(unit.scenario).simulate(seed=unit.seed)
        rows.append((unit.key, run_row(result)))
    return rows


def runs_table(points, units, done: dict) -> pd.DataFrame:
    import pandas as pd

    records = []
    for unit in units:
        if unit.key in done:
            records.append(
                {
                    "point": unit.point_index,
                    **points[unit.point_index].values,
                    "replication": unit.replication,
                    **done[unit.key],
                    "key": unit.key,
                }
            )
    return pd.DataFrame.from_records(records)


def summary_table(points, runs: pd.DataFrame) -> pd.DataFrame:
    """One row per point: its axis values, then its figures (hetlb.results.table.point_row), then
    the speed lower bound (continuous model)."""
    import pandas as pd

    records = []
    for index, point in enumerate(points):
        mine = runs[runs["point"] == index] if len(runs) else runs
        if len(mine) == 0:
            continue
        record = {"point": index, **point.values, **point_row(mine)}
        scenario = Scenario.from_mapping(point.scenario)
        system = scenario.system
        if isinstance(system, System):
            record["speed_lower_bound"] = speed_lower_bound_or_nan(
                system.speed, system.total_arrival_rate, system.concurrency, system.rate_curve
            )
        records.append(record)
    return pd.DataFrame.from_records(records)


def write_tables(out: Path, runs: pd.DataFrame, summary: pd.DataFrame) -> None:
    """runs.csv, runs.parquet, summary.csv and summary.parquet in folder ``out`` (made if missing)."""
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, table in (("runs", runs), ("summary", summary)):
            table.to_csv(out / f"{name}.csv", index=False)
            table.to_parquet(out / f"{name}.parquet", index=False)
    except OSError as error:
        where = validation.shorten(str(error.filename or out))
        raise InputError("out", f"cannot write {where}: {error.strerror or error}") from None


def comparable(table: pd.DataFrame) -> pd.DataFrame:
    """The table without the columns that measure the machine (for comparing executors).

    Parameters
    ----------
    table
        A runs or summary table of a sweep.
    """
    return table.drop(columns=[c for c in TIMING_COLUMNS if c in table.columns])


def paired_differences(runs: pd.DataFrame, metric: str, by: str, first, second) -> pd.DataFrame:
    """Per point (all axes but ``by``), the mean of ``metric`` under ``first`` minus ``second``
    over paired replications, with its 95% interval (common random numbers make pairs).

    Parameters
    ----------
    runs
        The runs table of a sweep (common random numbers).
    metric
        A column of it, e.g. ``mean_response_time``.
    by
        The axis whose two values are compared, e.g. ``policy.id``.
    first, second
        Its two values.
    """
    import pandas as pd

    keys = [c for c in runs.columns if c not in (by, "point", "key", "replication") and "." in c]
    a = runs[runs[by] == first].set_index(keys + ["replication"])[metric]
    b = runs[runs[by] == second].set_index(keys + ["replication"])[metric]
    difference = (a - b).dropna()
    records = []
    for group, values in difference.groupby(level=keys) if keys else [((), difference)]:
        mean, half = t_interval(values.to_numpy())
        group = group if isinstance(group, tuple) else (group,)
        records.append(
            {
                **dict(zip(keys, group)),
                "pairs": len(values),
                f"{metric}_difference": mean,
                "ci_low": mean - half,
                "ci_high": mean + half,
            }
        )
    return pd.DataFrame.from_records(records)
