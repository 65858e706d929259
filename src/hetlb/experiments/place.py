"""Placement: the sparsest compatibility graph whose simulated mean response time stays within a
tolerance of the speed lower bound C*/lambda (Proposition 1 of 000), by family (``hetlb place``).

Each family is a random graph with one size parameter, and the edges grow with it:

- ``fig3``: each port-server pair an edge with probability p = degree / N (the graph of Fig. 3 of
  000; its formula gives the reference degree);
- ``theorem2``, ``theorem3``: the constructions of Theorems 2 and 3 of 000 with their constant c
  scaled (c is the parameter; the printed c is the reference);
- ``typed``: each port takes k_m servers of speed class m uniformly without replacement, k_m
  proportional to the share of the jobs class m serves at the bound (the classes faster than K,
  part of class K, and one slower class for slack), scaled by a mean degree.

For each family a search on the parameter (a geometric scan from the reference, then bisection)
finds the least parameter whose graph passes: the upper end of the 95% interval of the mean
response time, over replications, below (1 + tolerance) C*/lambda. A graph whose interval
straddles the threshold gets more replications, up to MAX_ROUNDS, and otherwise counts as failing.
Every candidate sees the same arrivals and job sizes (common random numbers: one seed), so the
search compares graphs, not noise. Every evaluation is stored in the result store under a key of
everything that determines it, so an interrupted search resumes where it stopped; the time budget
stops the search (between evaluations) with the best graph found so far. The best graph is then
re-simulated with fresh seeds for the verdict (stored too). A parameter whose graph would have
more than ``max_edges`` edges (or need more memory than a computation may use) is not built: the scan down from the reference starts below it, and
the scan up stops under it (the notes list the parameters skipped).
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hetlb import validation
from hetlb.errors import InputError
from hetlb.experiments.store import ResultStore
from hetlb.graphs.constructions import (
    DEFAULT_MAX_EDGES,
    fig3_edge_probability,
    random_bipartite,
    theorem2_graph,
    theorem3_graph,
)
from hetlb.graphs.graph import CompatibilityGraph
from hetlb.model.system import System
from hetlb.progress import ProgressBar
from hetlb.simulation.simulate import simulate
from hetlb.stats.intervals import t_quantile
from hetlb.theory.bounds import speed_lower_bound_arrays
from hetlb.version import __version__

FAMILIES = {
    "fig3": "independent edges, p = degree / N (Fig. 3 of 000; reference: its formula)",
    "typed": "k_m servers of each speed class per port, k_m in proportion to the class's share at the bound",
    "theorem3": "the construction of Theorem 3 of 000, constant c scaled (reference: c = 6)",
    "theorem2": "the construction of Theorem 2 of 000, constant c scaled (reference: c = 2)",
}
PLACEMENT_POLICIES = ("jfsq", "jfiq")
MAX_ROUNDS = 3
"""Evaluations of one candidate (each doubling the replications) before an undecided verdict counts as failing."""
SCAN_STEPS = 8
BISECTIONS = 4
"""Geometric steps (factor 2) from the reference parameter, then bisections (on the log scale)."""
EXPECTED_EVALUATIONS = 1 + 2 + BISECTIONS
"""Evaluations a family's search takes, as the progress plans it: the reference, two scan steps,
the bisections (the progress's share done is that of the replications run over those planned)."""
DEFAULT_THEOREM_B = 5
"""b of the theorem constructions with infinite buffers (Assumption 2 of 000 needs a finite b)."""


@dataclass
class Candidate:
    """One evaluated graph: family, parameter, edges, degrees, and the simulated ratio T / bound."""

    family: str
    parameter: float
    edges: int
    mean_degree: float
    max_degree: int
    ratio: float
    ratio_ci: tuple[float, float]
    verdict: str
    replications: int
    cached: bool = False

    def to_dict(self) -> dict:
        return {
            "family": self.family,
            "parameter": self.parameter,
            "edges": self.edges,
            "mean_port_degree": self.mean_degree,
            "max_port_degree": self.max_degree,
            "ratio_to_bound": self.ratio,
            "ratio_ci": list(self.ratio_ci),
            "verdict": self.verdict,
            "replications": self.replications,
        }


@dataclass
class PlacementResult:
    """The search: every candidate, the least-edge passing one per family, the best overall and
    its re-simulation with fresh seeds."""

    bound: float
    tolerance: float
    candidates: list[Candidate]
    best_by_family: dict
    best: Candidate | None
    graph: CompatibilityGraph | None
    verification: dict | None
    reference: dict
    complete: bool
    notes: list[str] = field(default_factory=list)
    verifications: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "lower_bound": self.bound,
            "tolerance": self.tolerance,
            "best": None if self.best is None else self.best.to_dict(),
            "verification": self.verification,
            "verifications": self.verifications,
            "best_by_family": {name: (c.to_dict() if c else None) for name, c in self.best_by_family.items()},
            "reference": self.reference,
            "search_complete": self.complete,
            "notes": self.notes,
            "candidates": [c.to_dict() for c in self.candidates],
        }


def class_shares(speed: np.ndarray, total_rate: float) -> tuple[np.ndarray, np.ndarray]:
    """(class speeds decreasing, per-class weights of the typed family): the share of the jobs
    each class serves at the bound (C*_m mu_m / lambda), plus the next slower class with the
    share of class K, so that the graph keeps some slack."""
    bound = speed_lower_bound_arrays(speed, total_rate)
    share = bound.c_star_by_type * bound.type_speeds
    share = share / share.sum()
    if bound.K < share.size:
        share[bound.K] = share[bound.K - 1]
    return bound.type_speeds, share / share.sum()


def typed_graph(
    speed: np.ndarray, n_ports: int, total_rate: float, degree: float, rng, *, max_edges: int = DEFAULT_MAX_EDGES
) -> CompatibilityGraph:
    """Each port takes max(1, round(degree * w_m)) servers of class m (w_m of class_shares, no
    server of a class of weight 0), uniformly without replacement, independently per port.
    max_edges: refuse (InputError) a graph of more edges."""
    class_speed, weight = class_shares(speed, total_rate)
    per_port = sum(
        int(min(np.count_nonzero(speed == mu), max(1, round(degree * w)))) for mu, w in zip(class_speed, weight) if w
    )
    if n_ports * per_port > max_edges:
        raise InputError(
            "max_edges", f"a typed graph of degree {degree:g} has {n_ports * per_port} edges > {max_edges}"
        )
    generator = np.random.default_rng(rng)
    blocks = []
    for m, mu in enumerate(class_speed):
        if weight[m] == 0:
            continue
        members = np.flatnonzero(speed == mu)
        k = int(min(members.size, max(1, round(degree * weight[m]))))
        chosen = np.empty((n_ports, k), dtype=np.int64)
        chunk = max(1, 4_000_000 // members.size)
        for start in range(0, n_ports, chunk):
            stop = min(n_ports, start + chunk)
            keys = generator.random((stop - start, members.size))
            chosen[start:stop] = members[smallest_keys(keys, k)]
        blocks.append(chosen)
    indices = np.sort(np.concatenate(blocks, axis=1), axis=1)
    indptr = np.arange(0, indices.size + 1, indices.shape[1], dtype=np.int64)
    return CompatibilityGraph.from_csr(indptr, indices.ravel(), speed.size)


def smallest_keys(keys: np.ndarray, k: int) -> np.ndarray:
    """Per row of ``keys`` (uniform on [0, 1)), the columns of its k smallest keys, in no order:
    the set of ``np.argpartition(keys, k - 1, axis=1)[:, :k]``. When k is small against the row,
    only the keys below a threshold that about k + 6 sqrt(k) + 8 keys of a row fall under are
    partitioned; the rows with fewer than k of them (rare) take the full partition."""
    rows, width = keys.shape
    threshold = (k + 6.0 * math.sqrt(k) + 8.0) / width
    if threshold > 0.25:
        return np.argpartition(keys, k - 1, axis=1)[:, :k]
    row, column = np.nonzero(keys < threshold)  # row by row, columns increasing
    counts = np.bincount(row, minlength=rows)
    if counts.max() < k:
        return np.argpartition(keys, k - 1, axis=1)[:, :k]
    position = np.arange(column.size) - (np.cumsum(counts) - counts)[row]
    below = np.full((rows, int(counts.max())), np.inf)
    below[row, position] = keys[row, column]
    columns = np.zeros(below.shape, dtype=np.int64)
    columns[row, position] = column
    picked = np.take_along_axis(columns, np.argpartition(below, k - 1, axis=1)[:, :k], axis=1)
    short = counts < k
    if short.any():
        picked[short] = np.argpartition(keys[short], k - 1, axis=1)[:, :k]
    return picked


def family_graph(family, parameter, speed, rates, buffer, seed, max_edges=DEFAULT_MAX_EDGES) -> CompatibilityGraph:
    """The graph of ``family`` at ``parameter`` (degree for fig3 and typed, c for the theorems;
    none for ``complete``); InputError on field ``max_edges`` when it would have more edges."""
    n_servers, n_ports = speed.size, rates.size
    if family == "complete":  # one job type: on the complete graph the types are indistinguishable
        return CompatibilityGraph.complete(1, n_servers)
    if family == "fig3":
        return random_bipartite(n_ports, n_servers, min(1.0, parameter / n_servers), seed, max_edges=max_edges)[0]
    if family == "typed":
        return typed_graph(speed, n_ports, float(rates.sum()), parameter, seed, max_edges=max_edges)
    build = theorem3_graph if family == "theorem3" else theorem2_graph
    return build(rates, speed, None, buffer or DEFAULT_THEOREM_B, seed, c=parameter, max_edges=max_edges)[0]


def reference_parameter(family, speed, rates) -> float:
    if family == "fig3":
        return speed.size * fig3_edge_probability(speed.size, float(rates.sum() / speed.sum()))
    if family == "typed":
        return reference_parameter("fig3", speed, rates)
    return 6.0 if family == "theorem3" else 2.0


def interval(values: np.ndarray) -> tuple[float, float]:
    """95% Student-t interval of the mean of ``values``."""
    half = t_quantile(values.size - 1, 0.975) * values.std(ddof=1) / math.sqrt(values.size)
    return float(values.mean() - half), float(values.mean() + half)


@dataclass
class Search:
    """What every evaluation shares: the fleet, ports, buffer, policy, run lengths and seeds."""

    speed: np.ndarray
    rates: np.ndarray
    buffer: int | None
    policy: str
    tolerance: float
    jobs: int
    replications: int
    warmup: float
    seed: int
    graph_seed: int
    store: ResultStore | None
    bound: float
    deadline: float
    bar: ProgressBar
    max_edges: int = DEFAULT_MAX_EDGES
    events: int = 0
    replications_run: int = 0
    """Replications simulated so far (those read from the store cost nothing): the work done."""
    families_left: int = 0
    """Families whose search has not started (the progress plans EXPECTED_EVALUATIONS for each)."""
    family_evaluations: int = 0
    """Evaluations of the family being searched."""
    candidates: list = field(default_factory=list)
    too_large: dict = field(default_factory=dict)
    """Per family, the parameters whose graphs exceed max_edges (not built, not simulated)."""

    def key(self, family: str, parameter: float, replications: int, seed: int) -> str:
        described = {
            "what": "placement candidate",
            "hetlb": __version__,
            "family": family,
            "parameter": parameter,
            "speed": self.speed.tolist(),
            "rates": hashlib.sha256(self.rates.tobytes()).hexdigest(),
            "buffer": self.buffer,
            "policy": self.policy,
            "jobs": self.jobs,
            "replications": replications,
            "warmup": self.warmup,
            "seed": seed,
            "graph_seed": self.graph_seed,
        }
        return "place-" + hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()

    def run(self, graph: CompatibilityGraph, replications: int, seed: int) -> tuple[np.ndarray, int]:
        """Mean response times of the replications over the bound, and the events simulated."""
        rates = self.rates if graph.n_types == self.rates.size else np.array([self.rates.sum()])
        system = System.from_speeds(self.speed, arrival_rate=rates, graph=graph, buffer=self.buffer)
        result = simulate(system, self.policy, jobs=self.jobs, warmup=self.warmup, replications=replications, seed=seed)
        return np.array([run.mean_response_time for run in result.runs]) / self.bound, result.events

    def stored_run(self, graph: CompatibilityGraph, key: str, replications: int, seed: int, **row):
        """(the ratios of ``run``, whether read from the store): read under ``key`` when there,
        else simulated and stored (a graph that cannot carry the load: infinite ratios)."""
        stored = self.store.existing([key]).get(key) if self.store is not None else None
        if stored is not None:
            return np.array(stored["ratios"]), True
        try:
            ratios, events = self.run(graph, replications, seed)
        except InputError as error:  # a graph that cannot carry the load fails
            if not error.field.startswith("arrival_rate"):
                raise
            ratios, events = np.full(replications, math.inf), 0
        self.events += events
        if self.store is not None:
            self.store.put({key: {"ratios": [float(x) for x in ratios], **row}})
        return ratios, False

    def evaluate_or_skip(self, family: str, parameter: float) -> Candidate | None:
        """``evaluate``, or None when the graph would exceed max_edges or the memory a computation
        may use (recorded in too_large)."""
        try:
            return self.evaluate(family, parameter)
        except InputError as error:
            if error.field not in ("max_edges", "system.graph"):
                raise
            self.too_large.setdefault(family, []).append(float(parameter))
            return None

    def evaluate(self, family: str, parameter: float) -> Candidate:
        """Simulate the family's graph at ``parameter`` (with more replications while undecided)."""
        graph = family_graph(family, parameter, self.speed, self.rates, self.buffer, self.graph_seed, self.max_edges)
        degree = graph.degree() if family != "complete" else np.full(self.rates.size, self.speed.size)
        threshold = 1.0 + self.tolerance
        replications = self.replications
        self.family_evaluations += 1
        for _ in range(MAX_ROUNDS):
            key = self.key(family, parameter, replications, self.seed)
            ratios, cached = self.stored_run(graph, key, replications, self.seed, family=family, parameter=parameter)
            self.replications_run += 0 if cached else replications
            low, high = interval(ratios) if np.all(np.isfinite(ratios)) else (math.inf, math.inf)
            verdict = "pass" if high < threshold else "fail" if low > threshold else "undecided"
            self.bar.update(self.fraction_done(), self.events, detail=f"{family} {parameter:.4g}: {verdict}")
            if verdict != "undecided" or time.perf_counter() > self.deadline:
                break
            replications *= 2
        candidate = Candidate(
            family,
            float(parameter),
            int(degree.sum()),
            float(degree.mean()),
            int(degree.max()),
            float(ratios.mean()),
            (low, high),
            verdict,
            replications,
            cached,
        )
        self.candidates.append(candidate)
        return candidate

    def fraction_done(self) -> float:
        """The share of the search's work done: the replications run over those run and those
        planned (EXPECTED_EVALUATIONS per family left and the rest of this one's, the verification's).
        Not the share of the time budget spent: a search that ends long before its budget would
        see its time left as the budget's."""
        evaluations = max(EXPECTED_EVALUATIONS - self.family_evaluations, 1) + EXPECTED_EVALUATIONS * self.families_left
        planned = (evaluations + 2) * self.replications
        return self.replications_run / (self.replications_run + planned)

    def out_of_time(self) -> bool:
        return time.perf_counter() > self.deadline


def search_family(search: Search, family: str) -> tuple[Candidate | None, bool]:
    """The least-parameter passing candidate of ``family`` (None if none passed) and whether the
    search finished within the time budget. A parameter whose graph would exceed the search's
    max_edges is not built: the scan halves it (as if it had passed: a denser graph of the family
    only comes nearer the complete graph) and never goes above it."""
    parameter = reference_parameter(family, search.speed, search.rates)
    ceiling = float(search.speed.size) if family in ("fig3", "typed") else math.inf
    passing: Candidate | None = None
    failing: float | None = None
    steps = SCAN_STEPS
    first = search.evaluate_or_skip(family, parameter)
    while first is None and steps > 0:
        steps -= 1
        parameter /= 2.0
        first = search.evaluate_or_skip(family, parameter)
    if first is None:
        return None, True
    if first.verdict == "pass":
        passing = first
        for _ in range(steps):
            if search.out_of_time():
                return passing, False
            lower = search.evaluate_or_skip(family, passing.parameter / 2.0)
            if lower is None or lower.verdict != "pass":
                failing = passing.parameter / 2.0
                break
            passing = lower
    else:
        failing = parameter
        edges = first.edges
        for _ in range(SCAN_STEPS):
            if search.out_of_time() or failing >= ceiling:
                return passing, not search.out_of_time()
            if family in search.too_large and min(search.too_large[family]) <= failing * 2.0:
                return None, True  # the next step is a graph already known to be too large
            higher = search.evaluate_or_skip(family, min(ceiling, failing * 2.0))
            if higher is None:
                return None, True
            if higher.verdict == "pass":
                passing = higher
                break
            if higher.edges == edges:  # the construction is saturated: a larger c adds no edge
                return None, True
            failing, edges = higher.parameter, higher.edges
    if passing is None or failing is None:
        return passing, True
    for _ in range(BISECTIONS):
        if search.out_of_time():
            return passing, False
        middle = math.sqrt(passing.parameter * failing)
        if family in ("fig3", "typed"):
            middle = round(middle, 1)
        if middle in (passing.parameter, failing):
            break
        candidate = search.evaluate_or_skip(family, middle)
        if candidate is not None and candidate.verdict == "pass":
            passing = candidate
        else:
            failing = middle
    return passing, True


def place(
    speed,
    arrival_rate,
    *,
    buffer: int | None = None,
    policy: str = "jfsq",
    tolerance: float = 0.05,
    families=("fig3", "typed", "theorem3"),
    jobs: int = 100_000,
    replications: int = 3,
    warmup: float | None = None,
    seed: int = 0,
    graph_seed: int = 0,
    time_budget: float = 900.0,
    store=None,
    progress: bool = False,
    max_edges: int = DEFAULT_MAX_EDGES,
) -> PlacementResult:
    """Search each family for its sparsest graph within ``tolerance`` (a fraction, 0.05 = 5%) of
    C*/lambda under ``policy``; return every candidate, the best, and its re-simulation.

    speed: mu of each server; arrival_rate: lambda_l of each port (job type); buffer: b (None:
    infinite); jobs, replications, warmup: each candidate's runs (warm-up default 20 C*/lambda);
    seed: the common random numbers of every candidate (the verification uses seed + 1 and twice
    the replications); graph_seed: every graph's seed; time_budget: seconds, checked between
    evaluations; store: a ResultStore (or None) holding the evaluations and verifications, for
    resuming; max_edges: the largest graph built (denser candidates are skipped, with a note).
    """
    speed = validation.positive_finite_array("speed", speed, validation.RATE_RANGE, "a service rate")
    rates = validation.positive_finite_array("arrival_rate", arrival_rate, validation.RATE_RANGE, "a rate")
    policy = validation.choice("policy", policy, PLACEMENT_POLICIES)
    tolerance = validation.number("tolerance", tolerance, 0.0, strict=True, high=10.0)
    families = tuple(validation.choice("families", name, tuple(FAMILIES)) for name in families)
    if not families:
        raise InputError("families", f"give at least one of {', '.join(FAMILIES)}")
    validation.count("jobs", jobs)
    validation.count("replications", replications, low=2)
    time_budget = validation.number("time_budget", time_budget, 0.0, strict=True)
    max_edges = validation.count("max_edges", max_edges)
    bound = speed_lower_bound_arrays(speed, float(rates.sum()))
    if warmup is None:
        warmup = 20.0 * bound.lower_bound
    bar = ProgressBar("place ", enabled=progress)
    search = Search(
        speed=speed,
        rates=rates,
        buffer=buffer,
        policy=policy,
        tolerance=tolerance,
        jobs=jobs,
        replications=replications,
        warmup=float(warmup),
        seed=seed,
        graph_seed=graph_seed,
        store=store,
        bound=bound.lower_bound,
        deadline=time.perf_counter() + time_budget,
        bar=bar,
        max_edges=max_edges,
        families_left=len(families),
    )
    best_by_family: dict = {}
    complete = True
    notes = []
    full = search.evaluate("complete", math.nan)
    if full.verdict != "pass":
        notes.append(
            f"the complete graph itself is {full.ratio - 1:+.1%} from the bound (95% CI {full.ratio_ci[0] - 1:+.1%} to "
            f"{full.ratio_ci[1] - 1:+.1%}): {'no' if full.verdict == 'fail' else 'no certain'} graph meets "
            f"{tolerance:.1%} at this N; raise the tolerance or N"
        )
        families = ()
    for family in families:
        search.families_left -= 1
        search.family_evaluations = 0
        if search.out_of_time():
            notes.append(f"{family}: not searched (time budget spent)")
            complete = False
            best_by_family[family] = None
            continue
        try:
            best, finished = search_family(search, family)
        except InputError as error:
            notes.append(f"{family}: not applicable ({error})")
            best_by_family[family] = None
            continue
        best_by_family[family] = best
        if not finished:
            complete = False
            notes.append(f"{family}: search stopped by the time budget; its best may not be its least")
        if family in search.too_large:
            skipped = ", ".join(f"{value:.4g}" for value in sorted(search.too_large[family]))
            notes.append(
                f"{family}: not built at {skipped} (more than {max_edges} edges, or more memory than a computation "
                "may use)"
            )
    attempts: list = []
    best, graph, verification = verify(search, speed, rates, buffer, graph_seed, attempts)
    if verification is not None and verification["verdict"] != "pass":
        notes.append("no passing candidate was confirmed by the re-simulation with fresh seeds")
    search.bar.update(1.0, search.events)
    search.bar.close()
    fig3_degree = reference_parameter("fig3", speed, rates)
    reference = {
        "fig3_port_degree": fig3_degree,
        "fig3_edges": fig3_degree * rates.size,
        "n_servers": int(speed.size),
        "n_ports": int(rates.size),
    }
    return PlacementResult(
        bound=bound.lower_bound,
        tolerance=tolerance,
        candidates=search.candidates,
        best_by_family=best_by_family,
        best=best,
        graph=graph,
        verification=verification,
        reference=reference,
        complete=complete,
        notes=notes,
        verifications=attempts,
    )


MAX_VERIFICATIONS = 4


def verify(
    search: Search, speed, rates, buffer, graph_seed, attempts: list
) -> tuple[Candidate | None, CompatibilityGraph | None, dict | None]:
    """Re-simulate the passing candidates, fewest edges first, with fresh seeds (seed + 1) and
    twice the replications, until one passes (at most MAX_VERIFICATIONS): that one is the best.
    When none is confirmed, the last one tried is returned with its verdict. Every attempt is
    appended to ``attempts``."""
    passing = sorted(
        (c for c in search.candidates if c.verdict == "pass" and c.family != "complete"), key=lambda c: c.edges
    )
    best = graph = verification = None
    for candidate in passing[:MAX_VERIFICATIONS]:
        graph = family_graph(candidate.family, candidate.parameter, speed, rates, buffer, graph_seed, search.max_edges)
        key = search.key(candidate.family, candidate.parameter, 2 * search.replications, search.seed + 1)
        ratios, _ = search.stored_run(
            graph, key, 2 * search.replications, search.seed + 1, family=candidate.family, parameter=candidate.parameter
        )
        low, high = interval(ratios)
        threshold = 1.0 + search.tolerance
        best = candidate
        verification = {
            "seed": search.seed + 1,
            "replications": 2 * search.replications,
            "jobs": search.jobs,
            "ratio_to_bound": float(ratios.mean()),
            "ratio_ci": [low, high],
            "mean_response_time": float(ratios.mean() * search.bound),
            "verdict": "pass" if high < threshold else "fail" if low > threshold else "undecided",
        }
        attempts.append(
            {"family": candidate.family, "parameter": candidate.parameter, "edges": candidate.edges, **verification}
        )
        if verification["verdict"] == "pass":
            break
    return best, graph, verification


def write_graph(graph: CompatibilityGraph, path) -> Path:
    """Write ``graph`` as JSON {"servers": one list per port} for ``--graph explicit:file=PATH``."""
    path = validation.output_file("output", path, suffixes=("json",))
    with validation.os_errors("output", path):
        path.write_text(json.dumps({"servers": graph.to_lists()}))
    return path
