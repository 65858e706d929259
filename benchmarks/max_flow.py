"""The capacity check's max-flow: hetlb's compiled Dinic against scipy.sparse.csgraph.maximum_flow.

    python benchmarks/max_flow.py [--rounds 9] [--sizes 256,1024,2048,4096] [--ports-exponent 1.2]

`hetlb.graphs.connectivity.routable_load` (the capacity check of every system with a graph, and
`hetlb graph`) finds the largest theta such that theta * arrival_rate can be routed, by
Dinkelbach iterations that each solve one max-flow on integer-scaled capacities. This script
measures that max-flow against scipy's, on the graphs of Fig. 3 of paper 000:

- ``fig3``: N servers, a quarter each of speeds 1, 0.5, 0.25, 0.125; L = round(N^a) ports
  (a = 1.2, the default of ``hetlb reproduce weng-fig3``) of equal rates at load 0.9; every
  port-server pair an edge with the Fig. 3 probability p (built as ``--graph fig3:...`` builds
  it). These carry the load: one max-flow, at the total capacity, proves it.
- ``fig3 p/16``: the same with p / 16 (about 4 servers per port at N = 1024). These cannot
  carry the load; the bottleneck is found after 3 to 5 max-flows (N = 256 to 4096), the
  repeated-call pattern.
  (The Assumption 2 search, ``well_connectedness``, makes no max-flow call.)

Two measurements per graph, taken in one process, interleaved round by round (the order of the
two implementations alternates); reported are the median time over the rounds and the median of
the rounds' ratios scipy / hetlb. Compiled code is run once before timing, so no compilation is
timed:

- ``call``: one max-flow on identical integer inputs (the first Dinkelbach trial, at 1e-6 below
  routable_load's first bound on theta, scaled to 32-bit integers so that scipy can take them): hetlb's ``_max_flow`` against
  ``maximum_flow(method="dinic")`` with the network built as a CSR array and, when not all is
  routed, the minimum cut read off the residual graph by a breadth-first search; ``maximum_flow``
  alone on a network built beforehand (``core``); Edmonds-Karp too up to ``--edmonds-karp-max``
  servers. Both must give the same answer and the same cut.
- ``check``: the whole capacity check, ``routable_load`` against the same Dinkelbach iterations
  on scipy's max-flow (``scipy_routable_load`` below); the two thetas must agree to 1e-6.

scipy takes int32 capacities (larger ones wrap silently to garbage): the largest arc is scaled to
2^31 - 2 units (hetlb scales the total to 2^55 in 64 bits), so the rounding, up to one unit per
arc, blocks the trial at theta (1 - 1e-9) on these graphs. The scipy variant starts its trials
below the bound by twice the rounding's worst case on the all-ports cut instead (and, like
routable_load, retreats by factors of 10 if a trial is still blocked by rounding), which costs
it no extra max-flow here.
"""

import argparse
import os
import statistics
import time

import numpy as np
import scipy
from scipy.sparse import csr_array
from scipy.sparse.csgraph import breadth_first_order, maximum_flow

from hetlb.graphs.connectivity import _max_flow, routable_load
from hetlb.graphs.constructions import construct_graph, fig3_edge_probability, random_bipartite
from hetlb.progress import working

FIG3_SPEEDS = (1.0, 0.5, 0.25, 0.125)
LOAD = 0.9
INT32_UNITS = float(2**31 - 2)
AGREEMENT = 1e-6


# ---------------------------------------------------------------------------------------------
# The scipy variant


def scipy_network(indptr, indices, n_servers, supply, capacity):
    """The flow network as scipy takes it, a CSR array of int32 capacities. Nodes: source 0,
    ports 1..L, servers L+1..L+N, sink L+N+1; a port -> server arc has the port's supply as
    capacity (as good as unbounded)."""
    n_ports = supply.shape[0]
    n_nodes = n_ports + n_servers + 2
    degree = np.diff(indptr)
    row_length = np.concatenate(([n_ports], degree, np.ones(n_servers, dtype=np.int64), [0]))
    row_start = np.zeros(n_nodes + 1, dtype=np.int32)
    np.cumsum(row_length, out=row_start[1:])
    column = np.concatenate(
        (np.arange(1, n_ports + 1), indices + (n_ports + 1), np.full(n_servers, n_nodes - 1, dtype=np.int64))
    ).astype(np.int32)
    arc_capacity = np.concatenate((supply, np.repeat(supply, degree), capacity))
    if arc_capacity.max() > np.iinfo(np.int32).max:
        raise ValueError("a capacity does not fit in int32")
    return csr_array((arc_capacity.astype(np.int32), column, row_start), shape=(n_nodes, n_nodes))


def scipy_max_flow(indptr, indices, n_servers, supply, capacity, method="dinic"):
    """The answer of hetlb's ``_max_flow`` (all routed, ports and servers on the source side of a
    minimum cut) from ``scipy.sparse.csgraph.maximum_flow``. Capacities must fit in int32."""
    network = scipy_network(indptr, indices, n_servers, supply, capacity)
    n_ports, sink = supply.shape[0], network.shape[0] - 1
    result = maximum_flow(network, 0, sink, method=method)
    if int(result.flow_value) == int(supply.sum()):
        return True, None, None
    residual = (network - result.flow).tocsr()  # a reverse arc appears with the flow on its arc
    residual.data = (residual.data > 0).astype(np.int8)
    residual.eliminate_zeros()
    reached = np.zeros(sink + 1, dtype=bool)
    reached[breadth_first_order(residual, 0, directed=True, return_predecessors=False)] = True
    return False, reached[1 : n_ports + 1], reached[n_ports + 1 : sink]


def initial_bound(graph, rates, speeds):
    """routable_load's first upper bound on theta: the capacity of the servers with a port over
    the total rate, or a single port's capacity over its rate if smaller (no port without a
    server here)."""
    used = np.bincount(graph.indices, minlength=graph.n_servers) > 0
    port_capacity = np.add.reduceat(speeds[graph.indices], graph.indptr[:-1])
    return min(float(speeds[used].sum() / rates.sum()), float((port_capacity / rates).min()))


def scipy_routable_load(graph, rates, speeds, tolerance=1e-9):
    """theta of ``routable_load`` by the same Dinkelbach iterations, each max-flow by scipy on
    int32 capacities. Returns (theta, theta_lower, iterations)."""
    indptr, indices, n_servers = graph.indptr, graph.indices, graph.n_servers
    total_rate = float(rates.sum())
    theta_hi = initial_bound(graph, rates, speeds)
    # rounding costs up to one unit per arc out of the source and into the sink, L + N units in
    # all, more than theta (1 - 1e-9) leaves on the all-ports cut: start the trials below that
    units = theta_hi * total_rate * INT32_UNITS / max(theta_hi * rates.max(), speeds.max())
    gap = max(tolerance, 2.0 * (graph.n_types + n_servers) / units)
    theta_lo, iterations = 0.0, 0
    while iterations < 200:
        iterations += 1
        trial = theta_hi * (1.0 - gap)
        scale = INT32_UNITS / max(trial * rates.max(), speeds.max())
        supply = np.ceil(trial * rates * scale).astype(np.int64)
        capacity = np.floor(speeds * scale).astype(np.int64)
        routed, reach_port, reach_server = scipy_max_flow(indptr, indices, n_servers, supply, capacity)
        if routed:
            theta_lo = trial
            break
        ratio = float(speeds[reach_server].sum()) / float(rates[reach_port].sum())
        if ratio < theta_hi:
            theta_hi = ratio
        else:
            gap *= 10.0
            if gap > 1e-3:
                break
    return theta_hi, theta_lo, iterations


# ---------------------------------------------------------------------------------------------
# Graphs and timing


def fig3_case(n_servers, ports_exponent, sparse, seed=0):
    speeds = np.repeat(FIG3_SPEEDS, n_servers // 4)
    n_ports = max(1, round(n_servers**ports_exponent))
    rates = np.full(n_ports, LOAD * speeds.sum() / n_ports)
    if sparse:
        graph, _ = random_bipartite(n_ports, n_servers, fig3_edge_probability(n_servers, LOAD) / 16, seed)
    else:
        spec = {"kind": "fig3", "ports_exponent": ports_exponent, "seed": seed}
        graph, _ = construct_graph(spec, speeds, rates, 5)
    return graph, rates, speeds


def first_trial(graph, rates, speeds):
    """The integer inputs of the first max-flow of routable_load, scaled to int32."""
    trial = initial_bound(graph, rates, speeds) * (1.0 - 1e-6)
    scale = INT32_UNITS / max(trial * rates.max(), speeds.max())
    return np.ceil(trial * rates * scale).astype(np.int64), np.floor(speeds * scale).astype(np.int64)


def timed(function, repeat):
    started = time.perf_counter()
    for _ in range(repeat):
        out = function()
    return (time.perf_counter() - started) / repeat, out


def same_answer(a, b):
    if a[0] != b[0]:
        return False
    return a[0] or (np.array_equal(a[1], b[1]) and np.array_equal(a[2], b[2]))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9, help="interleaved rounds (median reported)")
    parser.add_argument("--sizes", default="256,1024,2048,4096", help="comma-separated numbers of servers")
    parser.add_argument("--ports-exponent", type=float, default=1.2, help="L = round(N^a) ports")
    parser.add_argument("--edmonds-karp-max", type=int, default=1024, help="time Edmonds-Karp up to this N")
    parser.add_argument("--min-seconds", type=float, default=0.02, help="repeat a call until about this long")
    args = parser.parse_args(argv)
    print(f"load average at start: {os.getloadavg()}; numpy {np.__version__}, scipy {scipy.__version__}")
    cases = []
    for n in (int(x) for x in args.sizes.split(",")):
        for sparse in (False, True):
            graph, rates, speeds = fig3_case(n, args.ports_exponent, sparse)
            supply, capacity = first_trial(graph, rates, speeds)
            flow_args = (graph.indptr, graph.indices, graph.n_servers, supply, capacity)
            network = scipy_network(*flow_args)
            methods = {
                "call hetlb": lambda a=flow_args: _max_flow(*a)[:3],
                "call scipy dinic": lambda a=flow_args: scipy_max_flow(*a),
                "core scipy dinic": lambda w=network: maximum_flow(w, 0, w.shape[0] - 1),
                "check hetlb": lambda g=graph, r=rates, s=speeds: routable_load(g, r, s),
                "check scipy": lambda g=graph, r=rates, s=speeds: scipy_routable_load(g, r, s),
            }
            if n <= args.edmonds_karp_max:
                methods["call scipy edmonds-karp"] = lambda a=flow_args: scipy_max_flow(*a, method="edmonds_karp")
            # warm up (numba loads or compiles here) and check that the answers agree
            answers = {name: f() for name, f in methods.items()}
            for name in methods:
                if name.startswith("call") and not same_answer(answers["call hetlb"], answers[name]):
                    raise SystemExit(f"N = {n}: {name} disagrees with hetlb's max-flow")
            theta, theta_scipy = answers["check hetlb"]["theta"], answers["check scipy"][0]
            difference = abs(theta - theta_scipy) / theta
            if difference > AGREEMENT:
                raise SystemExit(f"N = {n}: theta {theta!r} (hetlb) against {theta_scipy!r} (scipy)")
            seconds = timed(methods["call hetlb"], 1)[0]
            repeat = max(1, round(args.min_seconds / max(seconds, 1e-6)))
            cases.append(
                {
                    "n": n,
                    "case": "fig3 p/16" if sparse else "fig3",
                    "ports": graph.n_types,
                    "edges": graph.n_edges,
                    "routed": bool(answers["call hetlb"][0]),
                    "iterations": (answers["check hetlb"]["iterations"], answers["check scipy"][2]),
                    "difference": difference,
                    "methods": methods,
                    "repeat": repeat,
                    "times": {name: [] for name in methods},
                }
            )
    for round_number in range(args.rounds):
        for case in cases:
            names = list(case["methods"])
            if round_number % 2:
                names.reverse()
            for name in names:
                repeat = case["repeat"] if "edmonds" not in name else 1
                case["times"][name].append(timed(case["methods"][name], repeat)[0])
    print(
        f"\n{'N':>5} {'case':>9} {'ports':>6} {'edges':>9} {'its':>5} | {'call ms: hetlb':>14} {'scipy':>7} "
        f"{'ratio':>6} {'core':>7} {'ratio':>6} {'EK':>8} | {'check ms: hetlb':>15} {'scipy':>7} {'ratio':>6} "
        f"| {'theta diff':>10}"
    )
    for case in cases:
        times = case["times"]
        t = {name: statistics.median(values) * 1e3 for name, values in times.items()}
        ratio = {
            kind: statistics.median(s / h for s, h in zip(times[scipy_name], times[f"{hetlb} hetlb"]))
            for kind, scipy_name, hetlb in (
                ("call", "call scipy dinic", "call"),
                ("core", "core scipy dinic", "call"),
                ("check", "check scipy", "check"),
            )
        }
        ek = t.get("call scipy edmonds-karp")
        print(
            f"{case['n']:>5} {case['case']:>9} {case['ports']:>6} {case['edges']:>9} "
            f"{case['iterations'][0]:>2}/{case['iterations'][1]:<2} | {t['call hetlb']:>14.2f} "
            f"{t['call scipy dinic']:>7.2f} {ratio['call']:>6.1f} {t['core scipy dinic']:>7.2f} {ratio['core']:>6.1f} "
            f"{(f'{ek:.0f}' if ek is not None else '-'):>8} | {t['check hetlb']:>15.2f} {t['check scipy']:>7.2f} "
            f"{ratio['check']:>6.1f} | {case['difference']:>10.1e}"
        )
    print(
        "\nits: max-flows per capacity check (hetlb/scipy); call: one max-flow, first trial "
        "(fig3: all routed, p/16: not); core: scipy's maximum_flow alone on a network built beforehand; "
        "EK: scipy Edmonds-Karp; ms: medians of "
        f"{args.rounds} rounds; ratio: median of the rounds' scipy / hetlb"
    )
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    with working("benchmarks/max_flow.py ", live=False):
        main()
