"""The validated, array-backed description of a heterogeneous server system.

Notation (paper 000 unless stated): server ``s`` has speed ``speed[s]`` = mu_{t_s}, a service
rate in jobs per unit time for a job of size 1; job type ``k`` (a port l) arrives as a Poisson
stream of rate ``arrival_rate[k]`` = lambda_l; ``buffer[s]`` = b counts the job in service, and an
arrival routed to a full server is lost. Server ``s`` serves up to ``concurrency[s]`` = c_s jobs
at once at the total rate ``speed[s]`` phi_s(b) of its ``rate_curve[s]`` (hetlb.model.servers;
c_s = 1 is the papers' server), and jobs arrive by ``arrivals`` (hetlb.model.arrivals; Poisson
in the papers).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from hetlb import validation
from hetlb.constants import INFINITE_BUFFER
from hetlb.errors import InputError
from hetlb.graphs.graph import CompatibilityGraph
from hetlb.model.arrivals import ArrivalProcess
from hetlb.model.caches import PrefixCaches
from hetlb.model.job_sizes import JobSizes
from hetlb.model.servers import (
    capacity_factor,
    check_servers,
    concurrency_array,
    concurrency_text,
    rate_curve_tuple,
)

SYSTEM_BYTES_PER_SERVER = 64
"""A bound on the memory a System takes per server (its speed and buffer arrays, its speed classes,
the complete graph's row of one job type: about 25 bytes measured), for refusing a system too
large for the machine before building it."""

RATE_RULE = "rates in jobs per time unit: choose the time unit to bring them there"
"""Why speeds and arrival rates must lie in validation.RATE_RANGE, for the error message."""


class ServerSpeeds:
    """What a system derives from its servers' ``speed`` and its ``total_arrival_rate`` (jobs per
    time unit here, per slot in the slotted model)."""

    if TYPE_CHECKING:  # what the subclasses provide: speed as a field, total_arrival_rate as either
        speed: np.ndarray

        @property
        def total_arrival_rate(self) -> float: ...

    @property
    def n_servers(self) -> int:
        return len(self.speed)

    @property
    def server_capacity(self) -> np.ndarray:
        """Each server's capacity in jobs of mean size per time unit: its speed (one job at a time)."""
        return self.speed

    @property
    def capacity(self) -> float:
        """mu_Sigma = the sum of the servers' capacities (of their speeds, one job at a time)."""
        return float(self.server_capacity.sum())

    @property
    def load(self) -> float:
        """rho = lambda_Sigma / mu_Sigma."""
        return self.total_arrival_rate / self.capacity

    def speed_classes(self) -> tuple[np.ndarray, np.ndarray]:
        """Distinct speeds in decreasing order (mu_1 > mu_2 > ...) and each server's class index m."""
        return speed_classes(self.speed)

    def speed_class_table(self) -> list:
        """[{"speed", "count"}] per distinct speed, fastest first (result metadata)."""
        class_speed, server_class = self.speed_classes()
        return [{"speed": float(v), "count": int(c)} for v, c in zip(class_speed, np.bincount(server_class))]


def speed_classes(speed) -> tuple[np.ndarray, np.ndarray]:
    """Distinct speeds in decreasing order (mu_1 > mu_2 > ...) and each server's class index m."""
    class_speed, inverse = np.unique(-np.asarray(speed, dtype=float), return_inverse=True)
    return -class_speed, inverse.astype(np.int64)


@dataclass(frozen=True, eq=False)
class System(ServerSpeeds):
    """Servers, job types, their compatibility graph, buffers, job sizes, the servers'
    concurrency and rate curves, and the arrival process.

    Build one with :meth:`System.from_speeds`; the constructor expects already-valid arrays.

    Parameters
    ----------
    speed
        mu_s, one speed per server (jobs per unit time).
    arrival_rate
        lambda_l, one arrival rate per job type (jobs per unit time).
    graph
        The compatibility graph between job types and servers.
    buffer
        b_s, one per server, the jobs in service included (INFINITE_BUFFER: none).
    job_sizes
        The law of the job sizes (mean 1).
    graph_construction
        The report of the construction that built the graph, for the metadata.
    concurrency
        c_s, the jobs each server serves at once.
    rate_curve
        phi_s, each server's rate curve.
    arrivals
        The arrival process (Poisson, batch or MMPP).
    caches
        The servers' prefix caches and the jobs' prompts (hetlb.model.caches.PrefixCaches), or None:
        no cache.
    """

    speed: np.ndarray
    arrival_rate: np.ndarray
    graph: CompatibilityGraph
    buffer: np.ndarray
    job_sizes: JobSizes = field(default_factory=JobSizes)
    graph_construction: dict | None = None  # how a constructed graph was built (its report)
    concurrency: np.ndarray = None  # type: ignore[assignment]  # c_s, int64; None: 1 each
    rate_curve: tuple = None  # type: ignore[assignment]  # phi_s, one RateCurve per server
    arrivals: ArrivalProcess = field(default_factory=ArrivalProcess)
    caches: PrefixCaches | None = None

    def __post_init__(self):
        if self.concurrency is None:
            object.__setattr__(self, "concurrency", concurrency_array(None, len(self.speed)))
        if self.rate_curve is None:
            object.__setattr__(self, "rate_curve", rate_curve_tuple(None, len(self.speed)))

    @classmethod
    def from_speeds(
        cls,
        speeds,
        *,
        arrival_rate=None,
        load: float | None = None,
        excess_capacity: float | None = None,
        buffer=None,
        graph: CompatibilityGraph | list | None = None,
        n_types: int = 1,
        job_sizes: JobSizes | str | None = None,
        graph_construction: dict | None = None,
        concurrency=None,
        rate_curve=None,
        arrivals: ArrivalProcess | str | None = None,
        cache_blocks=None,
        prompts=None,
        prefill_work=None,
        prefill_law=None,
    ) -> System:
        """Build and validate a system.

        Parameters
        ----------
        speeds
            One speed per server (mu_s, jobs per unit time; the system's array ``speed[s]``), or a
            text such as "50x1.0,50x0.5" (:func:`parse_speeds`); :meth:`from_speed_mix` builds them
            from a number of servers and the fractions of each speed.
        arrival_rate
            The total rate, split equally over the job types, or one rate per job type (lambda_l, jobs
            per unit time).
        load
            Instead of ``arrival_rate``, the fraction rho of the total capacity (sum(speed) with one job
            at a time; sum of mu_s phi_s(c_s) in general), split equally over the job types.
        excess_capacity
            Or c, for the total rate sum(speed) - c sqrt(N) (Halfin-Whitt, 002).
        buffer
            b: None (infinite), one int for all servers, or one per server (counts the jobs in service).
        graph
            None (complete), a ``CompatibilityGraph``, or one list of servers per type.
        n_types
            Number of job types when neither ``graph`` nor a rate vector fixes it.
        job_sizes
            A ``JobSizes`` or its kind name (mean 1).
        graph_construction
            The report of the construction that built ``graph`` (``hetlb.graphs.constructions``),
            kept in the result's metadata.
        concurrency
            c_s, the jobs a server serves at once: None (1), one value for all, one per server, or a
            text such as "50x8,50x32" (``inf`` for unlimited).
        rate_curve
            phi_s (``hetlb.model.servers.RateCurve`` or its text, e.g. "saturating:alpha=0.2"): one
            for all servers, one per server, or [count, curve] pairs.
        arrivals
            The arrival process (``hetlb.model.arrivals.ArrivalProcess`` or its text: "poisson",
            "batch:mean=B", "mmpp:ratio=R,on=T1,off=T2").
        cache_blocks
            K_s, the blocks of each server's prefix cache: None (no cache), one for all, one per
            server, or a text in the speeds' syntax ("8x64,8x16") (docs/background/prefix-caches.md).
        prompts
            The jobs' prompts as chains of blocks (hetlb.model.prompts.Prompts or its text, e.g.
            "shared:count=16,blocks=8,zipf=1,unique=2"); with a cache.
        prefill_work
            W, the prefill work of one missing block in units of the mean job size; with a cache.
        prefill_law
            "deterministic" (W per missing block) or "exponential" (of that mean); with a cache.

        Returns
        -------
        System
            The validated system.
        """
        speed = validation.positive_finite_array(
            "speeds", parse_speeds(speeds) if isinstance(speeds, str) else speeds, validation.RATE_RANGE, RATE_RULE
        )
        n_servers = len(speed)
        if isinstance(graph, CompatibilityGraph):
            pass
        elif graph is not None:
            graph = CompatibilityGraph.from_lists(graph, n_servers)
        if graph is None:
            if arrival_rate is not None and np.ndim(arrival_rate) == 1:
                n_types = len(arrival_rate)
            n_types = validation.count("n_types", n_types)
            validation.check_memory(
                "n_types",
                8 * n_types * (n_servers + 2),
                f"the complete graph of {n_types:,} job types on {n_servers:,} servers",
            )
            graph = CompatibilityGraph.complete(n_types, n_servers)
        if graph.n_servers != n_servers:
            raise InputError("graph", f"is for {graph.n_servers} servers but {n_servers} speeds were given")
        concurrency = concurrency_array(concurrency, n_servers)
        rate_curve = rate_curve_tuple(rate_curve, n_servers)
        check_servers(concurrency, rate_curve)
        capacity = speed * capacity_factor(concurrency, rate_curve)
        arrival_rate = port_arrival_rates(capacity, graph.n_types, arrival_rate, load, excess_capacity)
        if isinstance(job_sizes, str):
            job_sizes = JobSizes.parse(job_sizes)
        caches = None
        if cache_blocks is not None:
            caches = PrefixCaches.build(n_servers, cache_blocks, prompts, prefill_work, prefill_law)
        else:
            for name, value in (("prompts", prompts), ("prefill_work", prefill_work), ("prefill_law", prefill_law)):
                if value is not None:
                    raise InputError(name, "goes with the servers' caches: give cache_blocks too")
        system = cls(
            speed,
            arrival_rate,
            graph,
            buffer_array(buffer, n_servers),
            job_sizes or JobSizes(),
            graph_construction,
            concurrency,
            rate_curve,
            ArrivalProcess.parse(arrivals or "poisson"),
            caches,
        )
        system.check_stability()
        return system

    @classmethod
    def from_speed_mix(cls, n_servers: int, speed_mix, **system) -> System:
        """:meth:`from_speeds` of ``n_servers`` servers in exact pools, as the [system] keys
        ``n_servers`` and ``speed_mix`` of a scenario.

        Parameters
        ----------
        n_servers
            N, the number of servers.
        speed_mix
            A list of (speed, fraction) pairs (mu in jobs per time unit, alpha_m; fractions > 0
            summing to 1, fraction x n_servers whole).
        **system
            The other keywords of :meth:`from_speeds` (``load=``, ``buffer=``, ...).

        Returns
        -------
        System
            The system of those servers.

        Examples
        --------
        >>> System.from_speed_mix(10, [(1.0, 0.5), (0.5, 0.5)], load=0.8).speed_class_table()
        [{'speed': 1.0, 'count': 5}, {'speed': 0.5, 'count': 5}]
        """
        return cls.from_speeds(speeds_from_mix(n_servers, speed_mix), **system)

    @property
    def n_types(self) -> int:
        """The number of job types K (one arrival rate each)."""
        return len(self.arrival_rate)

    @property
    def total_arrival_rate(self) -> float:
        """lambda_Sigma, jobs per unit time."""
        return float(self.arrival_rate.sum())

    @property
    def server_capacity(self) -> np.ndarray:
        """mu_s phi_s(c_s) per server (jobs of mean size per time unit)."""
        if self.has_single_slots:
            return self.speed
        return self.speed * capacity_factor(self.concurrency, self.rate_curve)

    @property
    def has_single_slots(self) -> bool:
        """Whether every server serves one job at a time (c_s = 1): the papers' servers."""
        return bool(np.all(self.concurrency == 1))

    @property
    def has_multi_slot_servers(self) -> bool:
        """Whether some server serves more than one job at a time (some c_s > 1) or has a rate curve."""
        return not self.has_single_slots

    def rate_curve_classes(self) -> tuple[tuple, np.ndarray]:
        """The distinct rate curves and each server's index into them."""
        curves = list(dict.fromkeys(self.rate_curve))
        index = {curve: i for i, curve in enumerate(curves)}
        return tuple(curves), np.array([index[curve] for curve in self.rate_curve], dtype=np.int64)

    def server_groups(self) -> list:
        """[{"speed", "concurrency", "rate_curve", "count"}] per distinct server, fastest first."""
        groups: dict = {}
        for s in np.argsort(-self.speed, kind="stable"):
            key = (float(self.speed[s]), concurrency_text(self.concurrency[s]), self.rate_curve[s].text)
            groups[key] = groups.get(key, 0) + 1
        return [
            {"speed": speed, "concurrency": slots, "rate_curve": curve, "count": count}
            for (speed, slots, curve), count in groups.items()
        ]

    @property
    def has_infinite_buffers(self) -> bool:
        """Whether every buffer is infinite (no job is ever lost)."""
        return bool(np.all(self.buffer == INFINITE_BUFFER))

    def max_routable_scale(self) -> float:
        """Largest theta such that theta * arrival_rate can be routed through the graph without
        exceeding any server's speed (a max-flow, :func:`hetlb.graphs.connectivity.routable_load`)."""
        if self.graph.is_complete():
            return self.capacity / self.total_arrival_rate
        from hetlb.graphs.connectivity import routable_load

        return routable_load(self.graph, self.arrival_rate, self.server_capacity)["theta"]

    def __repr__(self) -> str:
        """One short line whatever the number of servers: the speed classes (COUNTxSPEED, fastest
        first, the first few), job types, load, buffer and graph; the rest as ``describe()``."""
        classes = [f"{row['count']}x{row['speed']:g}" for row in self.speed_class_table()]
        shown = ",".join(classes[:4]) + (f",... ({len(classes)} speeds)" if len(classes) > 4 else "")
        finite = self.buffer[self.buffer != INFINITE_BUFFER]
        buffer = "infinite" if finite.size == 0 else (str(finite[0]) if np.all(self.buffer == finite[0]) else "mixed")
        graph = "complete" if self.graph.is_complete() else f"{self.graph.n_edges} edges"
        extra = "" if self.has_single_slots else ", multi-slot servers"
        extra += "" if self.arrivals.is_poisson else f", {self.arrivals.text} arrivals"
        return (
            f"<System {self.n_servers} servers ({shown}), {self.n_types} job type{'s' * (self.n_types != 1)}, "
            f"load {self.load:.4g}, buffer {buffer}, {graph} graph{extra}>"
        )

    def check_stability(self) -> None:
        """With infinite buffers the offered load must be below the capacity reachable through the graph."""
        if not self.has_infinite_buffers:
            return
        scale = self.max_routable_scale() / self.least_work_per_job
        if scale <= 1.0:
            work = (
                ""
                if self.caches is None
                else (
                    f" with every reusable prefix a hit (a job's work {self.least_work_per_job:.6g}, "
                    "docs/background/prefix-caches.md)"
                )
            )
            raise InputError(
                "arrival_rate",
                f"unstable with infinite buffers: the graph can carry at most {scale:.6g} times the offered "
                f"load (load {self.load:.6g} of total capacity){work}; lower the load or set a buffer",
            )

    @property
    def least_work_per_job(self) -> float:
        """The least mean work of a job any policy can achieve: 1 (its decode work) without caches;
        with caches 1 + W (E[L] - E[reusable]), every block an earlier prompt can have left a hit."""
        if self.caches is None:
            return 1.0
        return self.caches.work_per_job(self.caches.mean_reusable_blocks)

    def check_supported(self, model: str, *, arrivals=("poisson",), job_sizes=None, caches: bool = False) -> None:
        """Refuse, in one line naming the field, what ``model`` (e.g. "the mean-field limit") does
        not have: an arrival process not in ``arrivals``, job sizes not in ``job_sizes`` (None: any),
        prefix caches unless ``caches``.

        Parameters
        ----------
        model
            What is asked of the system, as the error says it (e.g. "the mean-field limit").
        arrivals
            The arrival processes it supports.
        job_sizes
            The job-size kinds it supports (None: any).
        caches
            Whether it carries the servers' prefix caches (docs/background/prefix-caches.md).

        Raises
        ------
        InputError
            Naming the field the system has and the model does not support.
        """
        if self.caches is not None and not caches:
            raise InputError(
                "cache_blocks", f"{model} has no prefix caches (docs/background/prefix-caches.md says which models do)"
            )
        if self.arrivals.kind not in arrivals:
            raise InputError("arrivals", f"{model} takes {' or '.join(arrivals)} arrivals, not {self.arrivals.text}")
        if job_sizes is not None and self.job_sizes.kind not in job_sizes:
            raise InputError(
                "job_sizes", f"{model} takes {' or '.join(job_sizes)} job sizes, not {self.job_sizes.kind}"
            )

    def describe(self) -> dict:
        """A JSON-ready summary for result metadata."""
        finite = self.buffer[self.buffer != INFINITE_BUFFER]
        return {
            "n_servers": self.n_servers,
            "speed_classes": self.speed_class_table(),
            "n_types": self.n_types,
            "total_arrival_rate": self.total_arrival_rate,
            "load": self.load,
            "buffer": None
            if len(finite) == 0
            else (
                int(finite[0])
                if len(finite) == self.n_servers and np.all(finite == finite[0])
                else self.buffer.tolist()
            ),
            "graph": self.graph.describe(),
            "job_sizes": self.job_sizes.describe(),
            **({"graph_construction": self.graph_construction} if self.graph_construction else {}),
            **({"servers": self.server_groups()} if self.has_multi_slot_servers else {}),
            **({"arrivals": self.arrivals.describe()} if not self.arrivals.is_poisson else {}),
            **({"caches": self.caches.describe()} if self.caches is not None else {}),
        }


def checked_system(field: str, system) -> System:
    """``system`` when it is a :class:`System`; else a one-line error that says how to build one
    (the functions that take a system have a lower-level form on arrays, named ``..._arrays``)."""
    if not isinstance(system, System):
        raise InputError(
            field,
            f"must be a hetlb.System (System.from_speeds(...)), got {type(system).__name__}; "
            "for speeds and rates as arrays use the function's _arrays form",
        )
    return system


def arrival_rate_for_excess_capacity(speed, excess_capacity: float) -> float:
    """n lambda^n = sum(mu_k) - c sqrt(n): the total arrival rate at diffusion-scaled excess
    capacity c = varsigma + nu (the Halfin-Whitt regime of 002 section 3 and the identity of its
    App. C.2; docs/reference/diffusion.md). With infinite buffers the system is stable iff c > 0
    (System refuses c <= 0 then); with finite buffers any c is allowed."""
    speed = np.asarray(speed, dtype=float)
    excess_capacity = validation.number(
        "excess_capacity", excess_capacity, -validation.RATE_RANGE[1], high=validation.RATE_RANGE[1]
    )
    rate = float(speed.sum()) - excess_capacity * math.sqrt(len(speed))
    if rate <= 0:
        raise InputError(
            "excess_capacity",
            f"c sqrt(n) = {excess_capacity * math.sqrt(len(speed)):.6g} leaves no "
            f"arrivals (total speed {speed.sum():.6g})",
        )
    return rate


def port_arrival_rates(
    capacity: np.ndarray,
    n_types: int,
    arrival_rate=None,
    load: float | None = None,
    excess_capacity: float | None = None,
) -> np.ndarray:
    """lambda_l of each of ``n_types`` job types: ``arrival_rate`` (one total rate, split equally,
    or one per type), ``load`` rho = lambda_Sigma / sum(capacity), or ``excess_capacity`` c
    (:func:`arrival_rate_for_excess_capacity`), split equally. ``capacity``: each server's (its
    speed when it serves one job at a time)."""
    if sum(value is not None for value in (arrival_rate, load, excess_capacity)) != 1:
        raise InputError("arrival_rate", "give exactly one of arrival_rate, load and excess_capacity")
    if excess_capacity is not None:
        arrival_rate = arrival_rate_for_excess_capacity(capacity, excess_capacity)
    elif load is not None:
        arrival_rate = validation.positive_number("load", load) * float(capacity.sum())  # a float: no numpy warning
    rates = validation.positive_finite_array("arrival_rate", arrival_rate, validation.RATE_RANGE, RATE_RULE)
    if len(rates) == 1 and n_types > 1:
        validation.check_memory("types", 8 * n_types, f"the arrival rates of {validation.quantity(n_types)} job types")
        return np.full(n_types, rates[0] / n_types)
    if len(rates) != n_types:
        raise InputError("arrival_rate", f"needs one rate per job type ({n_types}), got {len(rates)}")
    return rates


def buffer_array(buffer, n_servers: int) -> np.ndarray:
    """Per-server buffer sizes b (counting the job in service); None means infinite."""
    if buffer is None:
        return np.full(n_servers, INFINITE_BUFFER, dtype=np.int64)
    values = np.atleast_1d(np.asarray(buffer, dtype=object))
    if len(values) not in (1, n_servers):
        raise InputError("buffer", f"give one size or one per server ({n_servers}), got {len(values)}")
    sizes = []
    for value in values:
        if value is None or (isinstance(value, (float, np.floating)) and math.isinf(value)):
            sizes.append(INFINITE_BUFFER)
        elif isinstance(value, (float, np.floating)) and float(value).is_integer():
            sizes.append(validation.count("buffer", int(value)))
        else:
            sizes.append(validation.count("buffer", value))
    return np.broadcast_to(np.array(sizes, dtype=np.int64), (n_servers,)).copy()


def server_count(name: str, n_servers) -> int:
    """A number of servers: a count whose system fits in memory (SYSTEM_BYTES_PER_SERVER each)."""
    n_servers = validation.count(name, n_servers)
    validation.check_memory(
        name,
        SYSTEM_BYTES_PER_SERVER * n_servers,
        f"a system of {validation.quantity(n_servers)} servers",
        "use fewer servers",
    )
    return n_servers


def speeds_from_mix(n_servers, speed_mix) -> np.ndarray:
    """Per-server speeds of ``n_servers`` servers in pools: ``speed_mix`` is (speed, fraction)
    pairs, the fractions > 0 summing to 1 and each fraction x n_servers a whole number."""
    n_servers = server_count("n_servers", n_servers)
    try:
        mix = np.asarray(speed_mix, dtype=float).reshape(-1, 2)
    except (TypeError, ValueError):
        raise InputError("speed_mix", "must be a list of [speed, fraction] pairs") from None
    if len(mix) == 0 or not np.isclose(mix[:, 1].sum(), 1.0) or np.any(mix[:, 1] <= 0):
        raise InputError("speed_mix", "fractions must be > 0 and sum to 1")
    counts = mix[:, 1] * n_servers
    if not np.allclose(counts, np.round(counts)):
        raise InputError("speed_mix", f"fraction x n_servers must be whole numbers, got {counts.tolist()}")
    return np.repeat(mix[:, 0], np.round(counts).astype(int))


def parse_speeds(text: str) -> np.ndarray:
    """Speeds from "2,1,0.5" or with counts "50x1.0,50x0.5" (count x speed).

    Parameters
    ----------
    text
        Comma-separated speeds (jobs per unit time), each optionally "COUNTxSPEED".

    Returns
    -------
    numpy.ndarray
        One speed per server, in the order written.
    """
    counts, speeds = speed_groups(text)
    server_count("speeds", sum(counts))
    return validation.positive_finite_array("speeds", np.repeat(np.array(speeds), counts))


def speed_groups(text: str) -> tuple[list, list]:
    """The groups of a speeds text "50x1.0,50x0.5": each item's count and speed."""
    counts, speeds = [], []
    for item in str(text).split(","):
        item = item.strip()
        count, _, value = item.rpartition("x") if "x" in item else ("1", "", item)
        try:
            count_int, speed = int(count), float(value)
        except ValueError:
            raise InputError(
                "speeds", f"each item must be a speed or COUNTxSPEED (e.g. 50x0.5), got {validation.shown(item)}"
            ) from None
        if count_int < 1:
            raise InputError("speeds", f"a count must be >= 1, got {validation.shown(item)}")
        counts.append(count_int)
        speeds.append(speed)
    return counts, speeds
