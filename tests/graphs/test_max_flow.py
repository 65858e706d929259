"""The max-flow of the capacity check (hetlb.graphs.connectivity) against independent answers:
brute force over every cut of tiny graphs, and scipy.sparse.csgraph.maximum_flow on the Fig. 3
graphs of paper 000 (benchmarks/max_flow.py times the two).

For supplies s_l at the ports, capacities c_r at the servers and unbounded port -> server arcs, a
cut is a set A of ports on the source side with its neighbours N(A); its value is
s(L \\ A) + c(N(A)), and everything is routed iff no cut is below s(L). The largest routable
scale of the arrival rates is theta = min over non-empty A of mu(N(A)) / lambda(A).
"""

import numpy as np
import pytest
from scipy.sparse import csr_array
from scipy.sparse.csgraph import breadth_first_order, maximum_flow

from hetlb.graphs.connectivity import _max_flow, routable_load
from hetlb.graphs.constructions import fig3_edge_probability, random_bipartite

FIG3_SPEEDS = (1.0, 0.5, 0.25, 0.125)
SCIPY_AGREEMENT = 1e-6  # theta from routable_load, checked by scipy's max-flow on int32 capacities
INT32_UNITS = float(2**31 - 2)


def port_subsets(n_types):
    for mask in range(1, 2**n_types):
        yield np.array([(mask >> bit) & 1 for bit in range(n_types)], dtype=bool)


def neighbours(graph, ports):
    out = np.zeros(graph.n_servers, dtype=bool)
    for port in np.flatnonzero(ports):
        out[graph.servers_of(port)] = True
    return out


def tiny_graphs(rng, count):
    for _ in range(count):
        n_types, n_servers = int(rng.integers(1, 9)), int(rng.integers(1, 7))
        graph, _ = random_bipartite(n_types, n_servers, float(rng.uniform(0.1, 0.8)), int(rng.integers(10**6)))
        yield graph


def test_max_flow_finds_a_minimum_cut_checked_over_every_cut():
    rng = np.random.default_rng(5)
    outcomes = set()
    for graph in tiny_graphs(rng, 300):
        supply = rng.integers(1, 20, graph.n_types).astype(np.int64)
        capacity = rng.integers(0, 20, graph.n_servers).astype(np.int64)
        routed, reach_port, reach_server, _ = _max_flow(graph.indptr, graph.indices, graph.n_servers, supply, capacity)
        min_cut = min(
            int(supply[~ports].sum() + capacity[neighbours(graph, ports)].sum())
            for ports in port_subsets(graph.n_types)
        )
        min_cut = min(min_cut, int(supply.sum()))  # A empty
        assert routed == (min_cut == supply.sum())
        outcomes.add(bool(routed))
        if not routed:  # the source side is closed under neighbours and its cut is minimum
            assert np.array_equal(reach_server, neighbours(graph, reach_port))
            assert supply[~reach_port].sum() + capacity[reach_server].sum() == min_cut
    assert outcomes == {True, False}


def test_routable_load_equals_the_least_ratio_over_every_set_of_ports():
    rng = np.random.default_rng(9)
    for graph in tiny_graphs(rng, 150):
        rates = rng.uniform(0.1, 2.0, graph.n_types)
        speeds = rng.uniform(0.1, 2.0, graph.n_servers)
        brute = min(
            speeds[neighbours(graph, ports)].sum() / rates[ports].sum() for ports in port_subsets(graph.n_types)
        )
        result = routable_load(graph, rates, speeds)
        assert result["theta"] == pytest.approx(brute, rel=1e-12)
        assert result["theta_lower"] <= brute * (1 + 1e-12) and result["relative_gap"] < 1e-6
        bottleneck = result["bottleneck"]
        assert bottleneck["capacity"] / bottleneck["arrival_rate"] == pytest.approx(brute, rel=1e-12)


# ---------------------------------------------------------------------------------------------
# scipy.sparse.csgraph.maximum_flow


def scipy_max_flow(graph, supply, capacity):
    """(all routed, ports reachable from the source in the residual graph, servers reachable):
    source 0, ports 1..L, servers L+1..L+N, sink L+N+1; a port -> server arc carries at most the
    port's supply, as good as unbounded."""
    n_ports, n_servers = graph.n_types, graph.n_servers
    n_nodes = n_ports + n_servers + 2
    sink = n_nodes - 1
    degree = graph.degree()
    row_start = np.zeros(n_nodes + 1, dtype=np.int32)
    np.cumsum(np.concatenate(([n_ports], degree, np.ones(n_servers, dtype=np.int64), [0])), out=row_start[1:])
    column = np.concatenate((np.arange(1, n_ports + 1), graph.indices + n_ports + 1, np.full(n_servers, sink)))
    arc_capacity = np.concatenate((supply, np.repeat(supply, degree), capacity))
    assert arc_capacity.max() < 2**31  # scipy keeps capacities in int32
    network = csr_array((arc_capacity.astype(np.int32), column.astype(np.int32), row_start), shape=(n_nodes, n_nodes))
    result = maximum_flow(network, 0, sink, method="dinic")
    residual = (network - result.flow).tocsr()
    residual.data = (residual.data > 0).astype(np.int8)
    residual.eliminate_zeros()
    reached = np.zeros(n_nodes, dtype=bool)
    reached[breadth_first_order(residual, 0, directed=True, return_predecessors=False)] = True
    return int(result.flow_value) == int(supply.sum()), reached[1 : n_ports + 1], reached[n_ports + 1 : sink]


def scaled(theta, rates, speeds, prove_routable):
    """theta * rates and speeds in int32 units, rounded so that a routed flow proves theta routable
    (prove_routable) or a blocked one proves it is not."""
    scale = INT32_UNITS / max(theta * rates.max(), speeds.max())
    if prove_routable:
        return np.ceil(theta * rates * scale).astype(np.int64), np.floor(speeds * scale).astype(np.int64)
    return np.floor(theta * rates * scale).astype(np.int64), np.ceil(speeds * scale).astype(np.int64)


@pytest.mark.parametrize("p_factor", [1.0, 1.0 / 16.0])
def test_max_flow_and_routable_load_agree_with_scipy_on_fig3_graphs(p_factor):
    # Fig. 3 of 000 at N = 256, L = N^1.2, load 0.9: the graph carries the load; with p / 16 it
    # does not and routable_load needs several max-flows to find the bottleneck
    n_servers = 256
    n_ports = round(n_servers**1.2)
    speeds = np.repeat(FIG3_SPEEDS, n_servers // 4)
    rates = np.full(n_ports, 0.9 * speeds.sum() / n_ports)
    graph, _ = random_bipartite(n_ports, n_servers, fig3_edge_probability(n_servers, 0.9) * p_factor, 3)
    result = routable_load(graph, rates, speeds)
    theta = result["theta"]
    assert result["can_carry_offered_load"] == (p_factor == 1.0)
    if p_factor != 1.0:
        assert result["iterations"] > 1
    # the same integer inputs give the same answer and the same minimum cut, routed or not
    outcomes = set()
    for factor in (0.5, 1.0 - 1e-6, 1.0 + 1e-6, 2.0):
        supply, capacity = scaled(theta * factor, rates, speeds, prove_routable=True)
        ours = _max_flow(graph.indptr, graph.indices, n_servers, supply, capacity)
        theirs = scipy_max_flow(graph, supply, capacity)
        assert ours[0] == theirs[0]
        outcomes.add(bool(ours[0]))
        if not ours[0]:
            assert np.array_equal(ours[1], theirs[1]) and np.array_equal(ours[2], theirs[2])
    assert outcomes == {True, False}
    # scipy proves theta (1 - 1e-6) routable and theta (1 + 1e-6) not
    assert scipy_max_flow(graph, *scaled(theta * (1 - SCIPY_AGREEMENT), rates, speeds, prove_routable=True))[0]
    assert not scipy_max_flow(graph, *scaled(theta * (1 + SCIPY_AGREEMENT), rates, speeds, prove_routable=False))[0]
