"""Properties of a compatibility graph that the papers' results depend on.

- :func:`routable_load`: the largest factor theta such that theta * arrival_rate can be routed
  through the graph within the servers' speeds (a max-flow), and the load it means.
- :func:`well_connectedness`: an adversarial search for subsets I of the fast servers that violate
  Assumption 2 of paper 000 (Weng, Zhou, Srikant), D_I <= N d~_j for every large enough I.
"""

from __future__ import annotations

import math

import numpy as np

from hetlb import validation
from hetlb.errors import InputError
from hetlb.graphs.constructions import _count_values, _generator, assumption2_parameters
from hetlb.graphs.graph import CompatibilityGraph
from hetlb.jit import njit

_FLOW_SCALE = float(2**55)


# ---------------------------------------------------------------------------------------------
# Routable load


def routable_load(graph: CompatibilityGraph, arrival_rate, speed, *, tolerance: float = 1e-9) -> dict:
    """The largest theta such that theta * arrival_rate can be routed through ``graph`` without any
    server receiving more than its speed, and the load that is.

    theta = min over sets A of ports of mu(N(A)) / lambda(A) (max-flow min-cut). It is found by
    Dinkelbach iterations: at a trial theta a max-flow (source -> port l with capacity
    theta lambda_l, port -> server unbounded, server -> sink with capacity mu_r) either routes all
    the supply, which proves the trial theta, or its minimum cut names a set A with a smaller
    ratio, the next trial. Capacities are scaled to 64-bit integers, supplies rounded up and
    speeds down, so a routed trial is a proof; trials are made at theta (1 - tolerance).

    Returns a JSON-ready dict:

    - ``theta``: mu(N(A)) / lambda(A) for the bottleneck set A found, the answer;
    - ``theta_lower``: a trial value proven routable (``theta`` (1 - gap));
    - ``max_load_fraction``: theta * lambda_Sigma / sum(speed), the largest total load as a
      fraction of the total speed the graph carries with this arrival mix;
    - ``offered_load_fraction`` = lambda_Sigma / sum(speed) and ``can_carry_offered_load``
      (theta > 1: the offered load is strictly inside the graph's capacity);
    - ``bottleneck``: size, arrival rate and capacity of the set A.
    """
    rates, speeds = _check_graph_arrays(graph, arrival_rate, speed)
    tolerance = float(tolerance)
    if not 0.0 < tolerance < 1e-2:
        raise InputError("tolerance", f"must lie in (0, 0.01), got {tolerance!r}")
    total_rate = float(rates.sum())
    total_speed = float(speeds.sum())
    degree = graph.degree()
    result = {
        "method": "max-flow on integer-scaled capacities (Dinic, greedy start), Dinkelbach iterations on "
        "mu(N(A)) / lambda(A)",
        "offered_load_fraction": total_rate / total_speed,
        "iterations": 0,
    }
    if np.any(degree == 0):
        ports = np.flatnonzero(degree == 0)
        return _routable_result(
            result,
            0.0,
            0.0,
            "ports without server",
            len(ports),
            0,
            float(rates[ports].sum()),
            0.0,
            total_rate,
            total_speed,
        )
    if graph.is_complete():
        return _routable_result(
            result,
            total_speed / total_rate,
            total_speed / total_rate,
            "all ports",
            graph.n_types,
            graph.n_servers,
            total_rate,
            total_speed,
            total_rate,
            total_speed,
        )
    indptr, indices = graph.indptr, graph.indices
    server_degree = _count_values(indices, graph.n_servers)
    used = server_degree > 0
    theta_hi = float(speeds[used].sum()) / total_rate
    bottleneck = ("all ports", graph.n_types, int(used.sum()), total_rate, float(speeds[used].sum()))
    port_capacity = _port_capacity(indptr, indices, speeds)
    single = port_capacity / rates
    worst = int(np.argmin(single))
    if single[worst] < theta_hi:
        theta_hi = float(single[worst])
        bottleneck = ("one port", 1, int(degree[worst]), float(rates[worst]), float(port_capacity[worst]))
    theta_lo = 0.0
    gap = tolerance
    for iteration in range(1, 200):
        result["iterations"] = iteration
        trial = theta_hi * (1.0 - gap)
        scale = _FLOW_SCALE / max(trial * total_rate, total_speed)
        supply = np.ceil(trial * rates * scale).astype(np.int64)
        capacity = np.floor(speeds * scale).astype(np.int64)
        routed, reach_port, reach_server, phases = _max_flow(indptr, indices, graph.n_servers, supply, capacity)
        result["phases"] = result.get("phases", 0) + phases
        if routed:
            theta_lo = trial
            break
        cut_rate = float(rates[reach_port].sum())
        cut_capacity = float(speeds[reach_server].sum())
        ratio = cut_capacity / cut_rate
        if ratio < theta_hi:
            theta_hi = ratio
            bottleneck = ("cut", int(reach_port.sum()), int(reach_server.sum()), cut_rate, cut_capacity)
        else:  # the integer rounding, not the graph, blocked the trial: try a little lower
            gap *= 10.0
            if gap > 1e-3:
                break
    return _routable_result(result, theta_hi, theta_lo, *bottleneck, total_rate, total_speed)


def _routable_result(result, theta, theta_lower, kind, n_ports, n_servers, rate, capacity, total_rate, total_speed):
    result.update(
        {
            "theta": theta,
            "theta_lower": theta_lower,
            "relative_gap": 0.0 if theta == 0 else 1.0 - theta_lower / theta,
            "max_load_fraction": theta * total_rate / total_speed,
            "can_carry_offered_load": bool(theta > 1.0),
            "bottleneck": {
                "kind": kind,
                "ports": int(n_ports),
                "servers": int(n_servers),
                "arrival_rate": rate,
                "capacity": capacity,
            },
        }
    )
    return result


@njit
def _max_flow(indptr, indices, n_servers, supply, capacity):
    """Can every port l send supply[l] to its servers with server r receiving at most capacity[r]?

    Greedy first-fit start (each port from a rotating first neighbour), then Dinic phases on the
    residual graph: port -> server arcs are unbounded, server -> port arcs carry the flow back.
    The server -> port arcs are only the edges with positive flow, kept in a list and regrouped by
    server at the start of each phase (arcs created during a phase point backwards in its levels).
    Returns (all routed, ports reachable from an unrouted port, servers reachable, phases); when
    not all is routed the reachable sets are the source side of a minimum cut.

    ``scipy.sparse.csgraph.maximum_flow`` was measured in its place on the Fig. 3 graphs of paper
    000 and is slower (about 2 to 8 times per max-flow with Dinic, far more with Edmonds-Karp); it also
    takes int32 capacities only. See benchmarks/max_flow.py and docs/background/performance.md.
    """
    n_ports = supply.shape[0]
    n_edges = indices.shape[0]
    flow = np.zeros(n_edges, dtype=np.int64)
    listed = np.zeros(n_edges, dtype=np.bool_)
    list_edge = np.empty(max(16, 2 * (n_ports + n_servers)), dtype=np.int64)
    list_port = np.empty(list_edge.shape[0], dtype=np.int64)
    n_list = 0
    excess = supply.copy()
    residual = capacity.copy()
    for port in range(n_ports):
        start = indptr[port]
        deg = indptr[port + 1] - start
        first = (port * 40503) % deg
        for step in range(deg):
            if excess[port] == 0:
                break
            e = start + (first + step) % deg
            r = indices[e]
            amount = min(excess[port], residual[r])
            if amount > 0:
                flow[e] += amount
                residual[r] -= amount
                excess[port] -= amount
                list_edge, list_port, n_list = _list_flow_edge(e, port, listed, list_edge, list_port, n_list)
    level_p = np.empty(n_ports, dtype=np.int64)
    level_s = np.empty(n_servers, dtype=np.int64)
    queue_p = np.empty(n_ports, dtype=np.int64)
    queue_s = np.empty(n_servers, dtype=np.int64)
    cur_p = np.empty(n_ports, dtype=np.int64)
    cur_s = np.empty(n_servers, dtype=np.int64)
    r_indptr = np.zeros(n_servers + 1, dtype=np.int64)
    path_node = np.empty(n_ports + n_servers + 2, dtype=np.int64)
    path_edge = np.empty(n_ports + n_servers + 2, dtype=np.int64)
    phases = 0
    while True:
        # the reverse arcs: edges with positive flow, grouped by server
        kept = 0
        for i in range(n_list):
            e = list_edge[i]
            if flow[e] > 0:
                list_edge[kept] = e
                list_port[kept] = list_port[i]
                kept += 1
            else:
                listed[e] = False
        n_list = kept
        r_indptr.fill(0)
        for i in range(n_list):
            r_indptr[indices[list_edge[i]] + 1] += 1
        for r in range(n_servers):
            r_indptr[r + 1] += r_indptr[r]
        r_edge = np.empty(n_list, dtype=np.int64)
        r_port = np.empty(n_list, dtype=np.int64)
        for r in range(n_servers):
            cur_s[r] = r_indptr[r]
        for i in range(n_list):
            r = indices[list_edge[i]]
            r_edge[cur_s[r]] = list_edge[i]
            r_port[cur_s[r]] = list_port[i]
            cur_s[r] += 1
        # BFS from the ports with unrouted supply, up to the first layer with a free server
        level_p.fill(-1)
        level_s.fill(-1)
        n_qp = 0
        for port in range(n_ports):
            if excess[port] > 0:
                level_p[port] = 0
                queue_p[n_qp] = port
                n_qp += 1
        n_sources = n_qp
        if n_sources == 0:
            return True, _visited(level_p), _visited(level_s), phases
        phases += 1
        target = -1
        layer_start = 0
        n_qs = 0
        depth = 0
        while True:
            server_start = n_qs
            found = False
            for i in range(layer_start, n_qp):
                port = queue_p[i]
                for e in range(indptr[port], indptr[port + 1]):
                    r = indices[e]
                    if level_s[r] < 0:
                        level_s[r] = depth + 1
                        queue_s[n_qs] = r
                        n_qs += 1
                        if residual[r] > 0:
                            found = True
            if found:
                target = depth + 1
                break
            if n_qs == server_start:
                break
            layer_start = n_qp
            for i in range(server_start, n_qs):
                r = queue_s[i]
                for a in range(r_indptr[r], r_indptr[r + 1]):
                    if flow[r_edge[a]] > 0:
                        port = r_port[a]
                        if level_p[port] < 0:
                            level_p[port] = depth + 2
                            queue_p[n_qp] = port
                            n_qp += 1
            if n_qp == layer_start:
                break
            depth += 2
        if target < 0:
            return False, _visited(level_p), _visited(level_s), phases
        # blocking flow: depth-first along the levels, with current-arc pointers
        for i in range(n_qp):
            port = queue_p[i]
            cur_p[port] = indptr[port]
        for r in range(n_servers):
            cur_s[r] = r_indptr[r]
        for i in range(n_sources):
            source = queue_p[i]
            while excess[source] > 0 and level_p[source] == 0:
                length = 0
                u = source
                at_port = True
                while True:
                    if at_port:
                        want = level_p[u] + 1
                        e = cur_p[u]
                        end = indptr[u + 1]
                        while e < end and level_s[indices[e]] != want:
                            e += 1
                        cur_p[u] = e
                        if e == end:
                            level_p[u] = -2
                            if length == 0:
                                break
                            length -= 1
                            u = path_node[length]
                            cur_s[u] += 1
                            at_port = False
                            continue
                        path_node[length] = u
                        path_edge[length] = e
                        length += 1
                        u = indices[e]
                        at_port = False
                    else:
                        if level_s[u] == target:
                            if residual[u] > 0:
                                amount = min(excess[source], residual[u])
                                for j in range(1, length, 2):
                                    amount = min(amount, flow[path_edge[j]])
                                for j in range(length):
                                    e = path_edge[j]
                                    if j % 2 == 0:
                                        flow[e] += amount
                                        list_edge, list_port, n_list = _list_flow_edge(
                                            e, path_node[j], listed, list_edge, list_port, n_list
                                        )
                                    else:
                                        flow[e] -= amount
                                excess[source] -= amount
                                residual[u] -= amount
                                break
                            level_s[u] = -2
                            length -= 1
                            u = path_node[length]
                            cur_p[u] += 1
                            at_port = True
                            continue
                        want = level_s[u] + 1
                        a = cur_s[u]
                        end = r_indptr[u + 1]
                        while a < end and not (flow[r_edge[a]] > 0 and level_p[r_port[a]] == want):
                            a += 1
                        cur_s[u] = a
                        if a == end:
                            level_s[u] = -2
                            length -= 1
                            u = path_node[length]
                            cur_p[u] += 1
                            at_port = True
                            continue
                        path_node[length] = u
                        path_edge[length] = r_edge[a]
                        length += 1
                        u = r_port[a]
                        at_port = True


@njit
def _visited(level):
    out = np.zeros(level.shape[0], dtype=np.bool_)
    for i in range(level.shape[0]):
        out[i] = level[i] >= 0
    return out


@njit
def _list_flow_edge(e, port, listed, list_edge, list_port, n_list):
    """Add edge ``e`` (from ``port``) to the list of edges that carry flow, unless ``listed[e]``;
    the list arrays double when full. Returns the list arrays and its new length."""
    if not listed[e]:
        if n_list == list_edge.shape[0]:
            list_edge = _grown(list_edge)
            list_port = _grown(list_port)
        listed[e] = True
        list_edge[n_list] = e
        list_port[n_list] = port
        n_list += 1
    return list_edge, list_port, n_list


@njit
def _grown(array):
    bigger = np.empty(2 * array.shape[0], dtype=np.int64)
    for i in range(array.shape[0]):
        bigger[i] = array[i]
    return bigger


# ---------------------------------------------------------------------------------------------
# Well-connectedness (Assumption 2 of paper 000)


def well_connectedness(
    graph: CompatibilityGraph,
    arrival_rate,
    speed,
    epsilon: float | None,
    b: int,
    restarts: int = 8,
    rng=0,
    *,
    c1: float = 6.0,
    c2: float = 12.0,
    d1_b_power: float = 2.0,
    c_d2: float = 2.0,
    c_p2: float = 1.0,
    max_swaps: int = 200,
    exhaustive_limit: int = 100_000,
    report=None,
) -> dict:
    """Search for subsets violating Assumption 2 of paper 000 (section 4).

    Condition j = 1: D_I <= N d~_1 for every I within the servers of types < K (R_{K-1}) with
    |I| >= N p_1; condition j = 2: D_I <= N d~_2 for every I within the servers of types <= K
    (R_K) with |I| >= N p_2. D_I is the total arrival rate of the ports with no neighbour in I.
    p_j, d~_j and the constants are those of :func:`~hetlb.graphs.constructions.assumption2_parameters`.

    D_I only shrinks as I grows, so the search looks at |I| = ceil(N p_j) and tries to make D_I
    large: a greedy that grows I with the server covering the least new port rate; a greedy that
    shrinks I from all candidates by giving up whole ports, the heaviest per server lost first;
    ``restarts`` randomised runs of both; each finished by local swaps (one server out, one in)
    while D_I grows. When there are at most ``exhaustive_limit`` subsets of that size, all are
    evaluated instead and the answer is exact.

    ``report(fraction_done, what)``, if given, is called after each greedy run and each condition.

    Returns, per condition: the worst D_I found, the subset, the threshold N d~_j, and whether
    the condition held for every subset tried. Unless ``exhaustive`` is true this is a search, not
    a proof: a pass means no violating subset was found.
    """
    rates, speeds = _check_graph_arrays(graph, arrival_rate, speed)
    restarts = validation.integer("restarts", restarts, low=0)
    max_swaps = validation.integer("max_swaps", max_swaps, low=0)
    exhaustive_limit = validation.integer("exhaustive_limit", exhaustive_limit, low=0)
    generator, seed = _generator(rng)
    params = assumption2_parameters(
        rates, speeds, epsilon, b, c1=c1, c2=c2, d1_b_power=d1_b_power, c_d2=c_d2, c_p2=c_p2
    )
    server_type = params.pop("server_type")
    k = params["K"] - 1
    indptr, indices = graph.indptr, graph.indices
    s_indptr, s_ports = _server_adjacency(indptr, indices, graph.n_servers)
    total_rate = float(rates.sum())
    groups = []
    for j, (candidates, label) in enumerate(((server_type < k, "types < K"), (server_type <= k, "types <= K"))):
        size = params["min_subset_size"][j]
        threshold = params["thresholds"][j]
        n_candidates = int(candidates.sum())
        entry = {
            "condition": j + 1,
            "servers": label,
            "candidate_servers": n_candidates,
            "min_subset_size": size,
            "threshold": threshold,
            "p": params["p"][j],
            "d_tilde": params["d_tilde"][j],
        }
        if n_candidates == 0 or size > n_candidates:
            entry.update(
                {
                    "vacuous": True,
                    "worst_D_found": None,
                    "worst_subset": [],
                    "exhaustive": True,
                    "subsets_evaluated": 0,
                    "found_by": None,
                    "holds_for_subsets_tried": True,
                }
            )
            groups.append(entry)
            continue
        n_subsets = math.comb(n_candidates, size)
        if n_subsets <= exhaustive_limit:
            best, subset = _exhaustive(indptr, indices, s_indptr, s_ports, rates, np.flatnonzero(candidates), size)
            found_by, exhaustive, evaluated = "exhaustive", True, n_subsets
        else:
            best, subset, found_by, evaluated = _search(
                indptr, indices, s_indptr, s_ports, rates, candidates, size, restarts, max_swaps, generator,
                None if report is None else lambda done, what, j=j: report((j + done) / 2, f"condition {j + 1}: {what}"),
            )  # fmt: skip
            exhaustive = False
        entry.update(
            {
                "vacuous": False,
                "worst_D_found": best,
                "worst_D_over_threshold": best / threshold,
                "worst_D_fraction_of_total_rate": best / total_rate,
                "worst_subset": subset.tolist(),
                "exhaustive": exhaustive,
                "subsets_evaluated": int(evaluated),
                "found_by": found_by,
                "holds_for_subsets_tried": bool(best <= threshold * (1.0 + 1e-12)),
            }
        )
        groups.append(entry)
        if report is not None:
            report((j + 1) / 2, f"condition {j + 1} done")
    holds = all(g["holds_for_subsets_tried"] for g in groups)
    proof = all(g["exhaustive"] for g in groups)
    note = (
        "every subset of the minimum size was evaluated: the result is exact"
        if proof
        else "adversarial search (greedy, randomised restarts, local swaps), not a proof: a pass means no "
        "violating subset was found, a failure exhibits one"
    )
    return {
        "holds_for_subsets_tried": holds,
        "note": note,
        "groups": groups,
        "K": params["K"],
        "beta": params["beta"],
        "beta_hat": params["beta_hat"],
        "epsilon": params["epsilon"],
        "b": params["b"],
        "constants": params["constants"],
        "total_arrival_rate": total_rate,
        "restarts": restarts,
        "max_swaps": max_swaps,
        "seed": seed,
    }


def _search(indptr, indices, s_indptr, s_ports, rates, candidates, size, restarts, max_swaps, rng, report=None):
    n_servers = len(candidates)
    n_ports = len(rates)
    best, best_set, found_by, evaluated = -1.0, None, None, 0
    runs = [("grow", -1, False), ("shrink", -1, False)]
    for i in range(restarts):
        runs.append(("grow" if i % 2 == 0 else "shrink", i, True))
    candidate_ids = np.flatnonzero(candidates)
    for kind, index, randomised in runs:
        tie = rng.random(n_servers) if randomised else np.arange(n_servers, dtype=np.float64) / n_servers
        if kind == "grow":
            seed_server = int(rng.choice(candidate_ids)) if randomised else -1
            in_set, cover = _grow(indptr, indices, s_indptr, s_ports, rates, candidates, size, tie, seed_server)
        else:
            noise = 1.0 + 0.2 * rng.random(n_ports) if randomised else np.ones(n_ports)
            in_set, cover = _shrink(indptr, indices, s_indptr, s_ports, rates, candidates, size, noise)
        value, swaps = _local_swaps(
            indptr, indices, s_indptr, s_ports, rates, candidates, in_set, cover, tie, max_swaps
        )
        evaluated += 1 + swaps
        label = kind + (f" (restart {index + 1})" if randomised else "") + (f" + {swaps} swaps" if swaps else "")
        if value > best:
            best, best_set, found_by = value, np.flatnonzero(in_set), label
        if report is not None:
            report((runs.index((kind, index, randomised)) + 1) / len(runs), label)
    # recompute the winner from scratch (the searches update D incrementally)
    best = _uncovered_rate(indptr, indices, s_indptr, s_ports, rates, best_set)
    return best, best_set, found_by, evaluated


def _uncovered_rate(indptr, indices, s_indptr, s_ports, rates, subset) -> float:
    covered = np.zeros(len(rates), dtype=bool)
    for r in subset:
        covered[s_ports[s_indptr[r] : s_indptr[r + 1]]] = True
    return float(rates[~covered].sum())


@njit
def _port_rate(r, s_indptr, s_ports, rates, cover, covered_times):
    """Total rate of server r's ports that are covered exactly ``covered_times`` times by I."""
    total = 0.0
    for a in range(s_indptr[r], s_indptr[r + 1]):
        port = s_ports[a]
        if cover[port] == covered_times:
            total += rates[port]
    return total


@njit
def _grow(indptr, indices, s_indptr, s_ports, rates, candidates, size, tie, seed_server):
    """Greedy: add, ``size`` times, the candidate server whose not yet covered ports carry the least
    rate (ties by ``tie``), starting from ``seed_server`` if >= 0. Returns (in_set, cover count)."""
    n_servers = candidates.shape[0]
    cover = np.zeros(rates.shape[0], dtype=np.int64)
    marginal = np.zeros(n_servers)
    for r in range(n_servers):
        if candidates[r]:
            marginal[r] = _port_rate(r, s_indptr, s_ports, rates, cover, 0)  # nothing is covered yet
    in_set = np.zeros(n_servers, dtype=np.bool_)
    count = 0
    if seed_server >= 0:
        _add_server(seed_server, indptr, indices, s_indptr, s_ports, rates, candidates, cover, marginal)
        in_set[seed_server] = True
        count = 1
    while count < size:
        pick = -1
        for r in range(n_servers):
            if candidates[r] and not in_set[r]:
                if pick < 0 or marginal[r] < marginal[pick] or (marginal[r] == marginal[pick] and tie[r] < tie[pick]):
                    pick = r
        _add_server(pick, indptr, indices, s_indptr, s_ports, rates, candidates, cover, marginal)
        in_set[pick] = True
        count += 1
    return in_set, cover


@njit
def _shrink(indptr, indices, s_indptr, s_ports, rates, candidates, size, noise):
    """Greedy from the other side: start from all candidates and repeatedly drop every remaining
    neighbour of the port with the largest rate per server dropped (times ``noise``), as long as
    ``size`` servers stay; then drop single servers, the one leaving the most rate uncovered first.
    Returns (in_set, cover count)."""
    n_ports = rates.shape[0]
    n_servers = candidates.shape[0]
    in_set = candidates.copy()
    remaining = 0
    for r in range(n_servers):
        if in_set[r]:
            remaining += 1
    cover = np.zeros(n_ports, dtype=np.int64)
    for r in range(n_servers):
        if in_set[r]:
            for a in range(s_indptr[r], s_indptr[r + 1]):
                cover[s_ports[a]] += 1
    while remaining > size:
        pick = -1
        best = -1.0
        for port in range(n_ports):
            c = cover[port]
            if c > 0 and c <= remaining - size:
                score = rates[port] * noise[port] / c
                if score > best:
                    best = score
                    pick = port
        if pick < 0:
            break
        for e in range(indptr[pick], indptr[pick + 1]):
            r = indices[e]
            if in_set[r]:
                in_set[r] = False
                remaining -= 1
                for a in range(s_indptr[r], s_indptr[r + 1]):
                    cover[s_ports[a]] -= 1
    while remaining > size:
        pick = -1
        best = -1.0
        for r in range(n_servers):
            if in_set[r]:
                alone = _port_rate(r, s_indptr, s_ports, rates, cover, 1)
                if alone > best:
                    best = alone
                    pick = r
        in_set[pick] = False
        remaining -= 1
        for a in range(s_indptr[pick], s_indptr[pick + 1]):
            cover[s_ports[a]] -= 1
    return in_set, cover


@njit
def _add_server(r, indptr, indices, s_indptr, s_ports, rates, candidates, cover, marginal):
    """Put server r into I; returns the rate of the ports it newly covers."""
    newly = 0.0
    for a in range(s_indptr[r], s_indptr[r + 1]):
        port = s_ports[a]
        if cover[port] == 0:
            rate = rates[port]
            newly += rate
            for e in range(indptr[port], indptr[port + 1]):
                marginal[indices[e]] -= rate
        cover[port] += 1
    return newly


@njit
def _remove_server(r, indptr, indices, s_indptr, s_ports, rates, candidates, cover, marginal):
    """Take server r out of I; returns the rate of the ports left uncovered."""
    newly = 0.0
    for a in range(s_indptr[r], s_indptr[r + 1]):
        port = s_ports[a]
        cover[port] -= 1
        if cover[port] == 0:
            rate = rates[port]
            newly += rate
            for e in range(indptr[port], indptr[port + 1]):
                marginal[indices[e]] += rate
    return newly


@njit
def _local_swaps(indptr, indices, s_indptr, s_ports, rates, candidates, in_set, cover, tie, max_swaps):
    """Improve a subset by swaps: take out a member whose ports covered by it alone carry the most
    rate (the 8 best are tried), put in the outside candidate covering the least uncovered rate;
    keep the swap if D_I grew. Returns (D_I, swaps made); in_set and cover are updated."""
    n_servers = candidates.shape[0]
    n_ports = rates.shape[0]
    uncovered = 0.0
    for port in range(n_ports):
        if cover[port] == 0:
            uncovered += rates[port]
    total = 0.0
    for port in range(n_ports):
        total += rates[port]
    marginal = np.zeros(n_servers)
    for r in range(n_servers):
        if candidates[r]:
            marginal[r] = _port_rate(r, s_indptr, s_ports, rates, cover, 0)
    members = np.empty(n_servers, dtype=np.int64)
    alone = np.empty(n_servers)
    tried = np.zeros(n_servers, dtype=np.bool_)
    swaps = 0
    tolerance = 1e-12 * total
    while swaps < max_swaps:
        n_members = 0
        for r in range(n_servers):
            if in_set[r]:
                members[n_members] = r
                alone[n_members] = _port_rate(r, s_indptr, s_ports, rates, cover, 1)
                tried[n_members] = False
                n_members += 1
        improved = False
        for _t in range(min(8, n_members)):
            best_i = -1
            for i in range(n_members):
                if not tried[i] and (best_i < 0 or alone[i] > alone[best_i]):
                    best_i = i
            tried[best_i] = True
            out = members[best_i]
            gain = _remove_server(out, indptr, indices, s_indptr, s_ports, rates, candidates, cover, marginal)
            in_set[out] = False
            pick = -1
            for r in range(n_servers):
                if candidates[r] and not in_set[r] and r != out:
                    if (
                        pick < 0
                        or marginal[r] < marginal[pick]
                        or (marginal[r] == marginal[pick] and tie[r] < tie[pick])
                    ):
                        pick = r
            if pick < 0:
                _add_server(out, indptr, indices, s_indptr, s_ports, rates, candidates, cover, marginal)
                in_set[out] = True
                break
            loss = _add_server(pick, indptr, indices, s_indptr, s_ports, rates, candidates, cover, marginal)
            in_set[pick] = True
            if gain - loss > tolerance:
                uncovered += gain - loss
                swaps += 1
                improved = True
                break
            _remove_server(pick, indptr, indices, s_indptr, s_ports, rates, candidates, cover, marginal)
            in_set[pick] = False
            _add_server(out, indptr, indices, s_indptr, s_ports, rates, candidates, cover, marginal)
            in_set[out] = True
        if not improved:
            break
    return uncovered, swaps


def _exhaustive(indptr, indices, s_indptr, s_ports, rates, candidate_ids, size):
    best, subset = _enumerate(s_indptr, s_ports, rates, candidate_ids.astype(np.int64), size)
    return float(best), candidate_ids[subset]


@njit
def _enumerate(s_indptr, s_ports, rates, ids, size):
    """Largest D_I over all subsets I of ``ids`` with ``size`` members (lexicographic order)."""
    n_ports = rates.shape[0]
    total = 0.0
    for port in range(n_ports):
        total += rates[port]
    stamp = np.empty(n_ports, dtype=np.int64)
    for port in range(n_ports):
        stamp[port] = -1
    pos = np.empty(size, dtype=np.int64)
    best_pos = np.empty(size, dtype=np.int64)
    for i in range(size):
        pos[i] = i
    best = -1.0
    number = 0
    n = ids.shape[0]
    while True:
        covered = 0.0
        for i in range(size):
            r = ids[pos[i]]
            for a in range(s_indptr[r], s_indptr[r + 1]):
                port = s_ports[a]
                if stamp[port] != number:
                    stamp[port] = number
                    covered += rates[port]
        value = total - covered
        if value > best:
            best = value
            for i in range(size):
                best_pos[i] = pos[i]
        number += 1
        i = size - 1
        while i >= 0 and pos[i] == n - size + i:
            i -= 1
        if i < 0:
            break
        pos[i] += 1
        for j in range(i + 1, size):
            pos[j] = pos[j - 1] + 1
    return best, best_pos


# ---------------------------------------------------------------------------------------------
# Shared


def _check_graph_arrays(graph, arrival_rate, speed):
    if not isinstance(graph, CompatibilityGraph):
        raise InputError("graph", f"must be a CompatibilityGraph, got {type(graph).__name__}")
    rates = validation.positive_finite_array("arrival_rate", arrival_rate)
    speeds = validation.positive_finite_array("speed", speed)
    if len(rates) != graph.n_types:
        raise InputError("arrival_rate", f"needs one rate per port ({graph.n_types}), got {len(rates)}")
    if len(speeds) != graph.n_servers:
        raise InputError("speed", f"needs one speed per server ({graph.n_servers}), got {len(speeds)}")
    return rates, speeds


@njit
def _port_capacity(indptr, indices, speeds):
    """mu(N_L(l)) for every port l."""
    out = np.zeros(indptr.shape[0] - 1)
    for port in range(out.shape[0]):
        total = 0.0
        for e in range(indptr[port], indptr[port + 1]):
            total += speeds[indices[e]]
        out[port] = total
    return out


@njit
def _server_adjacency(indptr, indices, n_servers):
    """The transpose of the CSR graph: the ports of server r are
    s_ports[s_indptr[r]:s_indptr[r+1]], increasing."""
    s_indptr = np.zeros(n_servers + 1, dtype=np.int64)
    for r in indices:
        s_indptr[r + 1] += 1
    for r in range(n_servers):
        s_indptr[r + 1] += s_indptr[r]
    fill = s_indptr[:-1].copy()
    s_ports = np.empty(indices.shape[0], dtype=np.int64)
    for port in range(indptr.shape[0] - 1):
        for e in range(indptr[port], indptr[port + 1]):
            r = indices[e]
            s_ports[fill[r]] = port
            fill[r] += 1
    return s_indptr, s_ports
