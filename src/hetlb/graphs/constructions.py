"""Constructions of compatibility graphs (ports = job types, the left nodes L of paper 000; servers
= the right nodes R), each returning ``(CompatibilityGraph, report)``.

The report is a JSON-ready dict: the construction's name and parameters, the seed, edge and degree
statistics (:func:`graph_statistics`) and how ports left without a server were handled. A port
with no server is never passed on silently: ``empty_ports="resample"`` redraws that port's edges
until it has one (drawn exactly, from the construction's law conditioned on at least one edge),
``"add-edge"`` gives it one uniformly random server; the report counts the ports affected.

Constructions (000 sections 4 and 6.2; docs/reference/model.md):

- :func:`complete_graph`, :func:`explicit_graph`;
- :func:`random_bipartite`: every port-server pair is an edge independently with probability p;
  :func:`fig3_edge_probability` is the p of Fig. 3 of 000;
- :func:`theorem2_graph` (heterogeneous port rates) and :func:`theorem3_graph` (homogeneous port
  rates): port l connects to each server of types < K with probability
  min(1, lambda_l H_1 / (N d~_1)) and to each type-K server with probability
  min(1, lambda_l H_2 / (N d~_2)); servers of types > K are not used.
  :func:`assumption2_parameters` gives K, beta, p_j and d~_j of Assumption 2.

Sampling is vectorised: a port's number of edges in a group of n servers is Binomial(n, z), then
a uniform subset of that size is drawn without replacement (a compiled kernel writes it already
sorted), which is the same law as n independent Bernoulli(z) trials. A graph of N = 16384 servers
and L = N^1.5 ports with ~72 edges per port (150 million edges) builds in a few seconds.
"""

from __future__ import annotations

import copy
import json
import math

import numpy as np

from hetlb import validation
from hetlb.errors import InputError
from hetlb.graphs.graph import CompatibilityGraph
from hetlb.jit import njit

EMPTY_PORT_RULES = ("resample", "add-edge")
"""How a port left without any server is handled (see the module docstring)."""

DEFAULT_MAX_EDGES = 500_000_000
"""Constructions refuse to build more edges than this (8 bytes each) unless told otherwise."""

PORT_BYTES = 160
EDGE_BYTES = 24
"""Memory a construction takes per port (its rate, edge probabilities, counts and row pointer,
with the sampler's temporaries) and per edge (its server index, with the sorting and copying
around it): constructions refuse, before sampling, a graph whose estimate passes the machine's."""

_WORDS_PER_CALL = 1 << 22


# ---------------------------------------------------------------------------------------------
# Generic graphs


def graph_statistics(graph: CompatibilityGraph) -> dict:
    """Edges, port degrees |N_L(l)|, server degrees |N_R(r)|, ports with no server and servers
    with no port."""
    degree = graph.degree()
    server_degree = _count_values(graph.indices, graph.n_servers)
    return {
        "n_types": graph.n_types,
        "n_servers": graph.n_servers,
        "edges": graph.n_edges,
        "port_degree": _summary(degree),
        "server_degree": _summary(server_degree),
        "ports_without_server": int(np.count_nonzero(degree == 0)),
        "servers_without_port": int(np.count_nonzero(server_degree == 0)),
    }


def complete_graph(n_types: int, n_servers: int) -> tuple[CompatibilityGraph, dict]:
    """Every port may use every server."""
    n_types = validation.integer("n_types", n_types)
    n_servers = validation.integer("n_servers", n_servers)
    graph = CompatibilityGraph.complete(n_types, n_servers)
    return graph, _report("complete", {"n_types": n_types, "n_servers": n_servers}, None, graph, None, 0)


def explicit_graph(
    servers_by_type=None, *, edges=None, n_types: int | None = None, n_servers: int
) -> tuple[CompatibilityGraph, dict]:
    """A given graph: one list of server indices per port, or (port, server) ``edges`` with
    ``n_types``. Every port needs at least one server."""
    n_servers = validation.integer("n_servers", n_servers)
    if (servers_by_type is None) == (edges is None):
        raise InputError("graph", "give exactly one of servers_by_type and edges")
    if edges is not None:
        graph = CompatibilityGraph.from_edges(edges, validation.integer("n_types", n_types), n_servers)
    else:
        graph = CompatibilityGraph.from_lists(servers_by_type, n_servers)
    return graph, _report("explicit", {"n_types": graph.n_types, "n_servers": n_servers}, None, graph, None, 0)


# ---------------------------------------------------------------------------------------------
# Independent edges with one probability


def fig3_edge_probability(n_servers: int, load: float) -> float:
    """p = sqrt(ln N) / (N (1 - rho)) * ln(1 / (1 - rho)), capped at 1: the edge probability of
    Fig. 3 of paper 000 (section 6.2, "according to Theorem 3"). ``load`` is
    rho = lambda_Sigma / sum(speed), written lambda in that section."""
    n_servers = validation.integer("n_servers", n_servers)
    load = validation.number("load", load)
    if not 0.0 < load < 1.0:
        raise InputError("load", f"must lie in (0, 1), got {load!r}")
    p = math.sqrt(math.log(n_servers)) / (n_servers * (1.0 - load)) * math.log(1.0 / (1.0 - load))
    return min(1.0, p)


def random_bipartite(
    n_types: int, n_servers: int, p: float, rng, empty_ports: str = "resample", *, max_edges: int = DEFAULT_MAX_EDGES
) -> tuple[CompatibilityGraph, dict]:
    """Each port-server pair is an edge independently with probability ``p`` (0 < p <= 1).

    rng: a ``numpy.random.Generator`` or an int seed.
    empty_ports: "resample" (redraw a port's edges until it has one) or "add-edge" (give it one
        uniformly random server); the report says which and how many ports were affected.
    max_edges: refuse (InputError) when the expected number of edges exceeds it.
    """
    n_types = validation.integer("n_types", n_types)
    n_servers = validation.integer("n_servers", n_servers)
    p = validation.number("p", p)
    if not 0.0 < p <= 1.0:
        raise InputError("p", f"must lie in (0, 1], got {p!r}")
    _check_rule(empty_ports)
    generator, seed = _generator(rng)
    _check_size(n_types * n_servers * p, max_edges)
    group_size = np.array([n_servers], dtype=np.int64)
    prob = np.full((n_types, 1), p)
    counts = generator.binomial(n_servers, prob).astype(np.int64)
    affected = _fix_empty(counts, group_size, prob, empty_ports, generator)
    graph = _draw_graph(counts, group_size, [np.arange(n_servers, dtype=np.int64)], n_servers, generator, max_edges)
    parameters = {"n_types": n_types, "n_servers": n_servers, "p": p}
    report = _report("random-bipartite", parameters, seed, graph, empty_ports, affected)
    report["expected_edges"] = n_types * n_servers * p
    report["expected_port_degree"] = n_servers * p
    return graph, report


# ---------------------------------------------------------------------------------------------
# Theorems 2 and 3 of paper 000


def assumption2_parameters(
    arrival_rate,
    speed,
    epsilon: float | None,
    b: int,
    *,
    c1: float = 6.0,
    c2: float = 12.0,
    d1_b_power: float = 2.0,
    c_d2: float = 2.0,
    c_p2: float = 1.0,
) -> dict:
    """K, beta, beta_hat and the constants p_j, d~_j of Assumption 2 of paper 000 (section 4;
    docs/reference/model.md) for ports with rates ``arrival_rate`` (lambda_l) and servers with
    speeds ``speed`` (mu).

    Server types are the distinct speeds, fastest first (mu_1 > mu_2 > ...).
    K = min{k : sum_{m<=k} mu_m N_m > lambda_Sigma}; lambda_Sigma = (1 - beta) sum_{m<=K} mu_m N_m;
    beta_hat = beta sum_{m<=K} alpha_m; ``epsilon`` must lie in (0, beta_hat] (None: beta_hat).

    The extraction of 000 lost these constants; each is a parameter:

    - p_1 = epsilon / (c1 b). c1 = 6: the proof of Lemma 4 takes |I| >= N B_1 with
      B_1 = tau_K delta and delta = mu_K epsilon / (6 mu_1 b) (from eq. (58)), so B_1 = epsilon/(6b).
    - d~_1 = epsilon mu_K / (c2 b^d1_b_power). c2 = 12, power 2: eq. (68) needs
      d~_1 <= mu_1 delta / (2 b) = epsilon mu_K / (12 b^2). The statement of Assumption 2 prints
      epsilon mu_K/(c2 b) with the digits lost; d1_b_power=1 gives that form.
    - d~_2 = epsilon mu_K / (c_d2 b). c_d2 = 2: Lemma 5 has B_2 = epsilon/2 + tau_K delta and
      needs d~_2 <= epsilon mu_K / (2 b); the printed layout epsilon mu_K / b is c_d2 = 1.
    - p_2 = c_p2 beta_hat (c_p2 = 1).

    Returns a dict: K (1-based), beta, beta_hat, epsilon, tau_K, p = [p_1, p_2],
    d_tilde = [d~_1, d~_2], thresholds = [N d~_1, N d~_2], min_subset_size = ceil(N p_j), the
    constants, and ``server_type`` (a numpy array, each server's type index, 0 = fastest).
    """
    arrival_rate = validation.positive_finite_array("arrival_rate", arrival_rate)
    speed = validation.positive_finite_array("speed", speed)
    b = validation.integer("b", b)
    for name, value in (("c1", c1), ("c2", c2), ("d1_b_power", d1_b_power), ("c_d2", c_d2), ("c_p2", c_p2)):
        if not (validation.number(name, value) > 0):
            raise InputError(name, f"must be > 0, got {value!r}")
    n_servers = len(speed)
    class_speed, server_class = np.unique(-speed, return_inverse=True)
    class_speed = -class_speed
    class_count = np.bincount(server_class, minlength=len(class_speed))
    total_rate = float(arrival_rate.sum())
    cumulative = np.cumsum(class_speed * class_count)
    above = np.flatnonzero(cumulative > total_rate)
    if len(above) == 0:
        raise InputError("arrival_rate", f"total rate {total_rate:.6g} is not below the capacity {cumulative[-1]:.6g}")
    k = int(above[0])  # 0-based index of type K
    beta = 1.0 - total_rate / float(cumulative[k])
    alpha = class_count / n_servers
    beta_hat = beta * float(alpha[: k + 1].sum())
    if epsilon is None:
        epsilon = beta_hat
    epsilon = validation.number("epsilon", epsilon)
    if not 0.0 < epsilon <= beta_hat * (1.0 + 1e-12):
        raise InputError("epsilon", f"must lie in (0, beta_hat = {beta_hat:.6g}], got {epsilon!r}")
    mu_k = float(class_speed[k])
    tau_k = float(class_speed[0]) / mu_k
    p = [epsilon / (c1 * b), c_p2 * beta_hat]
    d_tilde = [epsilon * mu_k / (c2 * b**d1_b_power), epsilon * mu_k / (c_d2 * b)]
    return {
        "n_ports": len(arrival_rate),
        "n_servers": n_servers,
        "type_speeds": class_speed.tolist(),
        "type_counts": class_count.tolist(),
        "server_type": server_class.astype(np.int64),
        "total_arrival_rate": total_rate,
        "K": k + 1,
        "beta": beta,
        "beta_hat": beta_hat,
        "epsilon": epsilon,
        "b": b,
        "tau_K": tau_k,
        "assumption1_lower_bound_holds": bool(b >= math.sqrt(tau_k)),
        "p": p,
        "d_tilde": d_tilde,
        "min_subset_size": [_min_subset_size(n_servers, pj) for pj in p],
        "thresholds": [n_servers * d for d in d_tilde],
        "constants": {"c1": c1, "c2": c2, "d1_b_power": d1_b_power, "c_d2": c_d2, "c_p2": c_p2},
        "ordering_holds": bool(p[0] < p[1] and d_tilde[0] < d_tilde[1]),
    }


def theorem2_graph(
    arrival_rate,
    speed,
    epsilon: float | None,
    b: int,
    rng,
    c: float = 2.0,
    *,
    c1: float = 6.0,
    c2: float = 12.0,
    d1_b_power: float = 2.0,
    c_d2: float = 2.0,
    c_p2: float = 1.0,
    empty_ports: str = "resample",
    max_edges: int = DEFAULT_MAX_EDGES,
) -> tuple[CompatibilityGraph, dict]:
    """The random graph of Theorem 2 of paper 000 (heterogeneous port rates, section 4).

    H_j = c (N + L) / (N p_j) for j = 1, 2. The constant c was lost; c = 2 satisfies the proof's
    need exp(-H_j N p_j) <= 2^(-2(N+L)) (c >= 2 ln 2). Port l connects to each server of types < K
    with probability z_{l,1} = min(1, lambda_l H_1 / (N d~_1)) and to each type-K server with
    probability z_{l,2} = min(1, lambda_l H_2 / (N d~_2)); servers of types > K get no edge. With
    probability >= 1 - 2^-(N+L-1) the graph satisfies Assumption 2.

    arrival_rate: lambda_l, one per port; speed: mu of each server; epsilon, b and the constants
    c1, c2, d1_b_power, c_d2, c_p2 as in :func:`assumption2_parameters`; rng: Generator or int
    seed; empty_ports as in :func:`random_bipartite` (the added server is drawn from types <= K).
    """
    c = validation.number("c", c)
    if not c > 0:
        raise InputError("c", f"must be > 0, got {c!r}")
    params = assumption2_parameters(
        arrival_rate, speed, epsilon, b, c1=c1, c2=c2, d1_b_power=d1_b_power, c_d2=c_d2, c_p2=c_p2
    )
    n, n_ports = params["n_servers"], params["n_ports"]
    h = [c * (n + n_ports) / (n * pj) for pj in params["p"]]
    return _theorem_graph("theorem2", params, h, {"c": c}, arrival_rate, rng, empty_ports, max_edges)


def theorem3_graph(
    arrival_rate,
    speed,
    epsilon: float | None,
    b: int,
    rng,
    c: float = 6.0,
    *,
    c1: float = 6.0,
    c2: float = 12.0,
    d1_b_power: float = 2.0,
    c_d2: float = 2.0,
    c_p2: float = 1.0,
    empty_ports: str = "resample",
    max_edges: int = DEFAULT_MAX_EDGES,
) -> tuple[CompatibilityGraph, dict]:
    """The random graph of Theorem 3 of paper 000 (all ports share one rate lambda_bar).

    The construction of :func:`theorem2_graph` with
    H_j = c (-ln p_j + d~_j / (p_j lambda_bar) ln(mu_1 / d~_j)), c = 6 as printed (the mu in the
    logarithm read as mu_1, and "+" between the terms as in the statement; App. C). With
    probability >= 1 - 1/binom(N, N p_1) the graph satisfies Assumption 2. ``arrival_rate`` is one
    rate per port, all equal (or a list of equal rates).
    """
    c = validation.number("c", c)
    if not c > 0:
        raise InputError("c", f"must be > 0, got {c!r}")
    rates = validation.positive_finite_array("arrival_rate", arrival_rate)
    if rates.max() - rates.min() > 1e-9 * rates.max():
        raise InputError("arrival_rate", "Theorem 3 needs every port to have the same rate; use theorem2_graph")
    params = assumption2_parameters(rates, speed, epsilon, b, c1=c1, c2=c2, d1_b_power=d1_b_power, c_d2=c_d2, c_p2=c_p2)
    lam_bar = float(rates.mean())
    mu_1 = params["type_speeds"][0]
    h = [
        c * (-math.log(pj) + dj / (pj * lam_bar) * math.log(mu_1 / dj))
        for pj, dj in zip(params["p"], params["d_tilde"])
    ]
    if min(h) <= 0:
        raise InputError("epsilon", f"gives H_j = {h} <= 0 (p_j must be < 1 and d~_j < mu_1)")
    return _theorem_graph("theorem3", params, h, {"c": c, "lambda_bar": lam_bar}, rates, rng, empty_ports, max_edges)


def _theorem_graph(name, params, h, extra, arrival_rate, rng, empty_ports, max_edges):
    _check_rule(empty_ports)
    generator, seed = _generator(rng)
    rates = validation.positive_finite_array("arrival_rate", arrival_rate)
    n = params["n_servers"]
    server_type = params.pop("server_type")
    k = params["K"] - 1
    groups = [np.flatnonzero(server_type < k), np.flatnonzero(server_type == k)]
    group_size = np.array([len(g) for g in groups], dtype=np.int64)
    prob = np.empty((len(rates), 2))
    for j in range(2):
        prob[:, j] = np.minimum(1.0, rates * h[j] / (n * params["d_tilde"][j]))
    prob[:, group_size == 0] = 0.0
    expected = float((prob * group_size).sum())
    _check_size(expected, max_edges)
    counts = np.zeros(prob.shape, dtype=np.int64)
    for j in range(2):
        if group_size[j]:
            counts[:, j] = generator.binomial(group_size[j], prob[:, j])
    affected = _fix_empty(counts, group_size, prob, empty_ports, generator)
    graph = _draw_graph(counts, group_size, groups, n, generator, max_edges)
    parameters = {key: params[key] for key in ("epsilon", "b")}
    parameters.update(extra)
    parameters.update(params["constants"])
    report = _report(name, parameters, seed, graph, empty_ports, affected)
    variance = float((prob * (1.0 - prob) * group_size).sum())
    report.update(
        {
            "K": params["K"],
            "beta": params["beta"],
            "beta_hat": params["beta_hat"],
            "tau_K": params["tau_K"],
            "assumption1_lower_bound_holds": params["assumption1_lower_bound_holds"],
            "p": params["p"],
            "d_tilde": params["d_tilde"],
            "H": h,
            "thresholds": params["thresholds"],
            "min_subset_size": params["min_subset_size"],
            "group_sizes": {
                "types_below_K": int(group_size[0]),
                "type_K": int(group_size[1]),
                "unused_types_above_K": int(n - group_size.sum()),
            },
            "edge_probability": [_summary(prob[:, j]) for j in range(2)],
            "ports_fully_connected": [
                int(np.count_nonzero(prob[:, j] >= 1.0)) if group_size[j] else 0 for j in range(2)
            ],
            "expected_edges": expected,
            "expected_edges_sd": math.sqrt(variance),
            # the proof of Theorem 2 uses p_1 < p_2, d~_1 < d~_2 and z_{l,1} >= z_{l,2} for every port
            "proof_orderings_hold": bool(
                params["ordering_holds"] and h[0] / params["d_tilde"][0] >= h[1] / params["d_tilde"][1]
            ),
        }
    )
    return graph, report


# ---------------------------------------------------------------------------------------------
# Sampling


def _fix_empty(counts: np.ndarray, group_size: np.ndarray, prob: np.ndarray, rule: str, rng) -> int:
    """Give every port with no edge at least one (in place); returns how many ports that was.

    counts[l, j] edges of port l into group j (of group_size[j] servers, probability prob[l, j]).
    "resample": the law of a port's counts conditioned on at least one edge, which is what redrawing
    until non-empty gives: the first group with an edge is chosen with its conditional probability,
    its count is a zero-truncated binomial, earlier groups get none and later ones a fresh binomial.
    "add-edge": one server uniformly among all groups.
    """
    empty = np.flatnonzero(counts.sum(axis=1) == 0)
    if len(empty) == 0:
        return 0
    n_groups = len(group_size)
    if rule == "add-edge":
        group = rng.choice(n_groups, size=len(empty), p=group_size / group_size.sum())
        counts[empty, group] = 1
        return len(empty)
    z = prob[empty]
    with np.errstate(divide="ignore", invalid="ignore"):
        some = -np.expm1(group_size * np.log1p(-np.minimum(z, 1.0)))  # P(at least one edge in group j)
    some[:, group_size == 0] = 0.0
    none_before = np.cumprod(np.hstack([np.ones((len(empty), 1)), 1.0 - some[:, :-1]]), axis=1)
    first_weight = some * none_before
    total = first_weight.sum(axis=1)
    if np.any(total <= 0):
        raise InputError("graph", "a port has probability 0 of any edge; it cannot be resampled")
    u = rng.random(len(empty)) * total
    first = np.minimum((np.cumsum(first_weight, axis=1) <= u[:, None]).sum(axis=1), n_groups - 1)
    for j in range(n_groups):
        rows = first == j
        if not np.any(rows):
            continue
        counts[empty[rows], j] = _zero_truncated_binomial(group_size[j], z[rows, j], rng)
        for later in range(j + 1, n_groups):
            if group_size[later]:
                counts[empty[rows], later] = rng.binomial(group_size[later], z[rows, later])
    return len(empty)


def _zero_truncated_binomial(n: int, p: np.ndarray, rng) -> np.ndarray:
    """Binomial(n, p) conditioned on >= 1: the first success F is a geometric truncated to
    0..n-1, the rest Binomial(n - 1 - F, p)."""
    p = np.asarray(p, dtype=float)
    u = rng.random(len(p))
    full = p >= 1.0
    q = np.where(full, 0.5, p)
    some = -np.expm1(n * np.log1p(-q))
    first = np.floor(np.log1p(-u * some) / np.log1p(-q))
    first = np.clip(np.where(full, 0, first), 0, n - 1).astype(np.int64)
    return 1 + rng.binomial(n - 1 - first, np.minimum(p, 1.0))


def _draw_graph(counts, group_size, groups, n_servers, rng, max_edges) -> CompatibilityGraph:
    """Draw, for every port l and group j, a uniform subset of counts[l, j] servers of groups[j];
    return the CSR graph with each port's servers sorted."""
    n_ports, n_groups = counts.shape
    port_degree = counts.sum(axis=1)
    n_edges = int(port_degree.sum())
    _check_size(n_edges, max_edges)
    indptr = np.zeros(n_ports + 1, dtype=np.int64)
    np.cumsum(port_degree, out=indptr[1:])
    seg_count = counts.ravel()
    seg_n = np.tile(group_size, n_ports)
    starts = np.concatenate([[0], np.cumsum(group_size)[:-1]]).astype(np.int64)
    seg_map = np.tile(starts, n_ports)
    col_ids = np.concatenate([np.asarray(g, dtype=np.int64) for g in groups])
    seg_start = np.zeros(len(seg_count), dtype=np.int64)
    np.cumsum(seg_count[:-1], out=seg_start[1:])
    indices = np.empty(n_edges, dtype=np.int64)
    _draw_subsets(seg_count, seg_n, seg_map, col_ids, seg_start, indices, rng)
    ordered = all(
        len(groups[j]) == 0 or len(groups[i]) == 0 or groups[i][-1] < groups[j][0]
        for i in range(n_groups)
        for j in range(i + 1, n_groups)
    )
    if not ordered:
        _sort_rows(indptr, indices)
    return CompatibilityGraph(indptr, indices, int(n_servers))


def _draw_subsets(seg_count, seg_n, seg_map, col_ids, seg_start, out, rng) -> None:
    """Fill ``out`` segment by segment with sorted uniform subsets (see :func:`_fill_subsets`),
    feeding the kernel 64-bit words from ``rng`` in chunks."""
    n_seg = len(seg_count)
    take = np.minimum(seg_count, seg_n - seg_count)
    take[(seg_count == 0) | (seg_count == seg_n)] = 0
    width = np.ceil(np.log2(np.maximum(seg_n, 2))).astype(np.int64)
    per_word = 64 // width
    safe_n = np.maximum(seg_n, 1)
    draws = take * (2.0**width / safe_n) * (1.0 + take / safe_n)
    words = np.cumsum(draws / per_word + 0.05)
    bitmap = np.zeros((int(seg_n.max(initial=1)) + 63) // 64, dtype=np.uint64)
    summary = np.zeros((len(bitmap) + 63) // 64, dtype=np.uint64)
    first = 0
    boost = 1.0
    while first < n_seg:
        done_words = words[first - 1] if first else 0.0
        last = int(np.searchsorted(words, done_words + _WORDS_PER_CALL, side="right"))
        last = min(max(last, first + 1), n_seg)
        size = int((words[last - 1] - done_words) * 1.1 * boost) + 64
        block = rng.integers(0, np.iinfo(np.uint64).max, size=size, dtype=np.uint64, endpoint=True)
        reached, _ = _fill_subsets(
            seg_count, seg_n, seg_map, col_ids, seg_start, out, block, bitmap, summary, first, _CTZ_TABLE
        )
        boost = boost * 2.0 if reached == first else 1.0
        first = reached


_DEBRUIJN = np.uint64(0x022FDD63CC95386D)
_CTZ_TABLE = np.zeros(64, dtype=np.int64)
for _bit in range(64):
    _CTZ_TABLE[(((1 << _bit) * 0x022FDD63CC95386D) % (1 << 64)) >> 58] = _bit
del _bit


@njit
def _fill_subsets(seg_count, seg_n, seg_map, col_ids, seg_start, out, words, bitmap, summary, first, ctz_table):
    """For segments s = first, first+1, ...: write seg_count[s] distinct values drawn uniformly from
    col_ids[seg_map[s] : seg_map[s] + seg_n[s]] into out[seg_start[s]:], in increasing order
    (col_ids increasing within a segment). ``bitmap`` (n bits) and ``summary`` (one bit per
    bitmap word) are zero scratch arrays and are left zero.

    Random indices come from the bits of ``words``: w = ceil(log2 n) bits at a time, rejected when
    >= n (exact uniformity). Few draws: insertion into the sorted output; many: a bitmap, scanned
    in order (for more than n/2 values the n - k excluded ones are drawn). Returns the first
    segment not finished when the words ran out (its partial draws are discarded) and the words used.
    """
    n_seg = seg_count.shape[0]
    wpos = 0
    cur = np.uint64(0)
    left = 0
    s = first
    one = np.uint64(1)
    while s < n_seg:
        k = seg_count[s]
        n = seg_n[s]
        base = seg_start[s]
        m0 = seg_map[s]
        if k == 0:
            s += 1
            continue
        if k == n:
            for i in range(n):
                out[base + i] = col_ids[m0 + i]
            s += 1
            continue
        complement = 2 * k > n
        t = n - k if complement else k
        w = 1
        while (1 << w) < n:
            w += 1
        n_bitmap = (n + 63) >> 6
        if (not complement) and t * t <= 4 * n_bitmap + 16:
            filled = 0
            while filled < t:
                x, wpos, cur, left = _next_index(words, wpos, cur, left, w, n)
                if x < 0:
                    return s, wpos
                j = filled
                duplicate = False
                while j > 0:
                    y = out[base + j - 1]
                    if y == x:
                        duplicate = True
                        break
                    if y < x:
                        break
                    j -= 1
                if duplicate:
                    continue
                for i in range(filled, j, -1):
                    out[base + i] = out[base + i - 1]
                out[base + j] = x
                filled += 1
            for i in range(t):
                out[base + i] = col_ids[m0 + out[base + i]]
        else:
            got = 0
            while got < t:
                x, wpos, cur, left = _next_index(words, wpos, cur, left, w, n)
                if x < 0:
                    for i in range(n_bitmap):
                        bitmap[i] = 0
                    for i in range((n_bitmap + 63) >> 6):
                        summary[i] = 0
                    return s, wpos
                wi = x >> 6
                bit = one << np.uint64(x & 63)
                if bitmap[wi] & bit:
                    continue
                bitmap[wi] |= bit
                summary[wi >> 6] |= one << np.uint64(wi & 63)
                got += 1
            j = base
            if complement:
                for wi in range(n_bitmap):
                    v = ~bitmap[wi]
                    bitmap[wi] = 0
                    if wi == n_bitmap - 1 and (n & 63) != 0:
                        v &= (one << np.uint64(n & 63)) - one
                    j = _write_set_bits(v, wi, out, j, col_ids, m0, ctz_table)
                for i in range((n_bitmap + 63) >> 6):
                    summary[i] = 0
            else:
                # visit only the non-zero bitmap words, through the summary (one bit per word)
                for si in range((n_bitmap + 63) >> 6):
                    u = summary[si]
                    summary[si] = 0
                    while u != 0:
                        low_u = u & (~u + one)
                        wi = (si << 6) + ctz_table[(low_u * _DEBRUIJN) >> np.uint64(58)]
                        u ^= low_u
                        v = bitmap[wi]
                        bitmap[wi] = 0
                        j = _write_set_bits(v, wi, out, j, col_ids, m0, ctz_table)
        s += 1
    return s, wpos


@njit
def _next_index(words, wpos, cur, left, w, n):
    """The next index below ``n`` from the random bits of ``words``: w bits at a time from the
    current word ``cur`` (``left`` bits unread) then from ``words[wpos]`` on, an index >= n rejected.
    Returns (index, wpos, cur, left), the index -1 when the words ran out."""
    while True:
        if left < w:
            if wpos == words.shape[0]:
                return np.int64(-1), wpos, cur, left
            cur = words[wpos]
            wpos += 1
            left = 64
        x = np.int64(cur & np.uint64((1 << w) - 1))
        cur >>= np.uint64(w)
        left -= w
        if x < n:
            return x, wpos, cur, left


@njit
def _write_set_bits(v, wi, out, j, col_ids, m0, ctz_table):
    """Write ``col_ids[m0 + i]`` for every set bit i of bitmap word ``wi`` (value ``v``) to
    ``out[j:]``, in increasing order; return the next free position."""
    one = np.uint64(1)
    while v != 0:
        low = v & (~v + one)
        out[j] = col_ids[m0 + (wi << 6) + ctz_table[(low * _DEBRUIJN) >> np.uint64(58)]]
        j += 1
        v ^= low
    return j


@njit
def _count_values(values, size):
    counts = np.zeros(size, dtype=np.int64)
    for v in values:
        counts[v] += 1
    return counts


@njit
def _sort_rows(indptr, indices):
    for row in range(indptr.shape[0] - 1):
        indices[indptr[row] : indptr[row + 1]].sort()


# ---------------------------------------------------------------------------------------------
# A construction named in a scenario (TOML table or mapping)

GRAPH_KINDS = {
    "complete": "every port may use every server",
    "explicit": "servers = one list of servers per port, edges = [[port, server], ...], or file = a JSON "
    'file {"servers": [...]} (as hetlb place writes)',
    "random": "each port-server pair an edge with probability p",
    "fig3": "random with the p of Fig. 3 of 000 for this N and load",
    "theorem2": "the construction of Theorem 2 of 000 (epsilon, b, c)",
    "theorem3": "the construction of Theorem 3 of 000 (epsilon, b, c; equal port rates)",
}
_GRAPH_KEYS = {
    "complete": {"ports", "ports_exponent"},
    "explicit": {"servers", "edges", "ports", "file"},
    "random": {"p", "ports", "ports_exponent", "seed", "empty_ports"},
    "fig3": {"ports", "ports_exponent", "seed", "empty_ports"},
    "theorem2": {
        "epsilon",
        "b",
        "c",
        "c1",
        "c2",
        "d1_b_power",
        "c_d2",
        "c_p2",
        "ports",
        "ports_exponent",
        "seed",
        "empty_ports",
    },
}
_GRAPH_KEYS["theorem3"] = _GRAPH_KEYS["theorem2"]


def graph_ports(spec: dict, n_servers: int) -> int | None:
    """The number of ports L a graph table asks for: ``ports``, or ``ports_exponent`` a with
    L = round(N^a) (Fig. 3 of 000 has L = N^a); None when the table does not say."""
    kind = _graph_kind(spec)
    if kind == "explicit" and ("servers" in spec or "file" in spec):
        return len(explicit_servers(spec))
    if "ports" in spec and "ports_exponent" in spec:
        raise InputError("system.graph.ports", "give ports or ports_exponent, not both")
    if "ports" in spec:
        ports = validation.count("system.graph.ports", spec["ports"])
        _check_ports("system.graph.ports", ports)
        return ports
    if "ports_exponent" in spec:
        exponent = validation.number("system.graph.ports_exponent", spec["ports_exponent"])
        if exponent < 0:
            raise InputError("system.graph.ports_exponent", f"must be >= 0, got {exponent!r}")
        _check_ports("system.graph.ports_exponent", math.exp(min(exponent * math.log(n_servers), 700.0)))
        return max(1, round(n_servers**exponent))
    return None


def explicit_servers(spec: dict) -> list:
    """The servers of each port of an explicit graph: ``servers``, or read from the JSON ``file``
    ({"servers": [[...], ...]}, as hetlb place writes it)."""
    if "file" in spec and "servers" in spec:
        raise InputError("system.graph.file", "give servers or file, not both")
    if "servers" in spec:
        return spec["servers"]
    path = validation.input_file("system.graph.file", spec["file"])
    with validation.os_errors("system.graph.file", path):
        text = path.read_text()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError("system.graph.file", f"is not JSON ({error.msg} at line {error.lineno})") from None
    if not isinstance(data, dict) or not isinstance(data.get("servers"), list):
        raise InputError("system.graph.file", 'must hold {"servers": one list of servers per port}')
    return data["servers"]


def _check_ports(field: str, ports: float) -> None:
    """Refuse a number of ports whose graph would not fit in the machine's memory."""
    validation.check_memory(
        field, PORT_BYTES * ports, f"a graph of {validation.quantity(ports)} ports", "use fewer ports"
    )


_RECENT_GRAPHS: dict = {}
_RECENT_GRAPHS_KEPT = 4


def construct_graph(
    spec: dict, speed: np.ndarray, arrival_rate: np.ndarray, buffer: int | None
) -> tuple[CompatibilityGraph, dict]:
    """Build the graph a scenario's ``[system.graph]`` table describes (``kind`` one of
    GRAPH_KINDS), for servers of speeds ``speed`` and ports of rates ``arrival_rate`` (lambda_l);
    ``buffer`` is the default b of the theorem constructions. Random kinds take ``seed``
    (default 0) and ``empty_ports`` (default "resample"). The last few graphs are kept, since
    the points of a sweep that differ only in their policy share one graph."""
    key = (json.dumps(spec, sort_keys=True, default=str), speed.tobytes(), arrival_rate.tobytes(), buffer)
    if key not in _RECENT_GRAPHS:
        if len(_RECENT_GRAPHS) >= _RECENT_GRAPHS_KEPT:
            del _RECENT_GRAPHS[next(iter(_RECENT_GRAPHS))]
        _RECENT_GRAPHS[key] = _construct(spec, speed, arrival_rate, buffer)
    graph, report = _RECENT_GRAPHS[key]
    return graph, copy.deepcopy(report)


def _construct(spec, speed, arrival_rate, buffer):
    kind = _graph_kind(spec)
    unknown = sorted(set(spec) - _GRAPH_KEYS[kind] - {"kind"})
    if unknown:
        raise InputError(
            f"system.graph.{unknown[0]}",
            f"unknown key for kind {kind!r}; allowed: {', '.join(sorted(_GRAPH_KEYS[kind]))}",
        )
    n_servers, n_ports = len(speed), len(arrival_rate)
    if kind == "complete":
        return complete_graph(n_ports, n_servers)
    if kind == "explicit":
        servers = explicit_servers(spec) if "file" in spec or "servers" in spec else None
        return explicit_graph(servers, edges=spec.get("edges"), n_types=n_ports, n_servers=n_servers)
    seed = spec.get("seed", 0)
    empty_ports = spec.get("empty_ports", "resample")
    if kind in ("random", "fig3"):
        if kind == "fig3":
            p = fig3_edge_probability(n_servers, float(arrival_rate.sum() / speed.sum()))
        elif "p" not in spec:
            raise InputError("system.graph.p", "kind 'random' needs the edge probability p")
        else:
            p = spec["p"]
        graph, report = random_bipartite(n_ports, n_servers, p, seed, empty_ports)
        report["construction"] = kind
        return graph, report
    b = spec.get("b", buffer)
    if b is None:
        raise InputError("system.graph.b", f"kind {kind!r} needs the buffer size b (or a finite system.buffer)")
    constants = {key: spec[key] for key in ("c", "c1", "c2", "d1_b_power", "c_d2", "c_p2") if key in spec}
    build = theorem2_graph if kind == "theorem2" else theorem3_graph
    return build(arrival_rate, speed, spec.get("epsilon"), b, seed, empty_ports=empty_ports, **constants)


def _graph_kind(spec: dict) -> str:
    kind = spec.get("kind")
    if kind not in GRAPH_KINDS:
        raise InputError("system.graph.kind", f"must be one of {', '.join(GRAPH_KINDS)}, got {kind!r}")
    return kind


# ---------------------------------------------------------------------------------------------
# Validation and reporting


def _report(name, parameters, seed, graph, rule, affected) -> dict:
    statistics = graph_statistics(graph)
    return {
        "construction": name,
        "parameters": parameters,
        "seed": seed,
        "edges": statistics["edges"],
        "statistics": statistics,
        "empty_ports": {"rule": rule, "ports_affected": int(affected)},
    }


def _summary(values: np.ndarray) -> dict:
    if len(values) == 0:
        return {"min": None, "mean": None, "max": None}
    return {"min": _plain(values.min()), "mean": float(values.mean()), "max": _plain(values.max())}


def _plain(value):
    return int(value) if np.issubdtype(np.asarray(value).dtype, np.integer) else float(value)


def _generator(rng) -> tuple[np.random.Generator, int | None]:
    if isinstance(rng, np.random.Generator):
        return rng, None
    if validation.is_integer(rng) and rng >= 0:
        return np.random.default_rng(int(rng)), int(rng)
    raise InputError("rng", f"must be a numpy.random.Generator or an int seed >= 0, got {rng!r}")


def _check_rule(rule) -> None:
    if rule not in EMPTY_PORT_RULES:
        raise InputError("empty_ports", f"must be one of {', '.join(EMPTY_PORT_RULES)}, got {rule!r}")


def _check_size(edges: float, max_edges) -> None:
    validation.check_memory(
        "system.graph", EDGE_BYTES * edges, f"a graph of about {validation.quantity(edges)} edges", "use fewer edges"
    )
    if edges > max_edges:
        raise InputError(
            "max_edges",
            f"the construction would have about {edges:.4g} edges, more than "
            f"max_edges = {max_edges:.4g}; raise max_edges if memory allows (8 bytes an edge)",
        )


def _min_subset_size(n_servers: int, p: float) -> int:
    """Smallest integer size with |I| >= N p (at least 1)."""
    return max(1, int(math.ceil(n_servers * p - 1e-9)))
