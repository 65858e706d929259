"""Graph constructions (hetlb.graphs.constructions) and graph properties (hetlb.graphs.connectivity).

Random constructions are checked against their laws: counts against Binomial means with
tolerances from the binomial standard deviation (5 sd, or a Bonferroni-corrected quantile when
many counts are checked at once). The max-flow is checked against a linear programme over
edge flows (linear_programme_scale), the well-connectedness search against brute force and planted subsets.
"""

import itertools
import json
import math

import numpy as np
import pytest
from scipy import stats

from hetlb.errors import InputError
from hetlb.graphs.connectivity import routable_load, well_connectedness
from hetlb.graphs.constructions import (
    assumption2_parameters,
    complete_graph,
    explicit_graph,
    fig3_edge_probability,
    graph_statistics,
    random_bipartite,
    theorem2_graph,
    theorem3_graph,
)
from hetlb.graphs.graph import CompatibilityGraph

FIG3_SPEEDS = (1.0, 0.5, 0.25, 0.125)
Z = 5.0  # standard deviations allowed for a single count


def fig3_speeds(n_servers):
    return np.repeat(FIG3_SPEEDS, n_servers // 4)


def assert_valid_csr(graph):
    """Sorted, repeat-free rows, no empty port: from_csr re-checks all of it."""
    again = CompatibilityGraph.from_csr(graph.indptr, graph.indices, graph.n_servers)
    assert np.array_equal(again.indices, graph.indices)


def assert_binomial_count(observed, mean, variance, z=Z):
    assert abs(observed - mean) <= z * math.sqrt(max(variance, 1e-12)), (observed, mean, math.sqrt(variance))


# ---------------------------------------------------------------------------------------------
# random_bipartite


@pytest.mark.parametrize("n_types, n_servers, p", [(3000, 200, 0.07), (2000, 30, 0.8), (400, 5000, 0.004)])
def test_random_bipartite_counts_follow_the_binomial_law(n_types, n_servers, p):
    graph, report = random_bipartite(n_types, n_servers, p, 11)
    json.dumps(report)
    assert_valid_csr(graph)
    assert report["construction"] == "random-bipartite" and report["seed"] == 11
    assert report["edges"] == graph.n_edges == report["statistics"]["edges"]
    q_empty = (1 - p) ** n_servers
    assert_binomial_count(report["empty_ports"]["ports_affected"], n_types * q_empty, n_types * q_empty * (1 - q_empty))
    # total edges ~ Binomial(L N, p) (the rare resampled ports add at most a few edges)
    assert_binomial_count(graph.n_edges, n_types * n_servers * p, n_types * n_servers * p * (1 - p) + n_types * q_empty)
    # each server's degree ~ Binomial(L, p), independent across servers: chi-square of the deviations
    server_degree = graph.server_degree()
    deviation = ((server_degree - n_types * p) ** 2 / (n_types * p * (1 - p))).sum()
    assert stats.chi2.sf(deviation, n_servers) > 1e-6 and stats.chi2.cdf(deviation, n_servers) > 1e-6
    # port degrees: mean and variance of Binomial(N, p)
    degree = graph.degree()
    variance = n_servers * p * (1 - p)
    assert abs(degree.mean() - n_servers * p) <= Z * math.sqrt(variance / n_types) + q_empty
    relative_sd_of_variance = math.sqrt(2.0 / (n_types - 1) + (1 - 6 * p * (1 - p)) / (variance * n_types))
    assert abs(degree.var(ddof=1) / variance - 1) <= Z * relative_sd_of_variance
    statistics = graph_statistics(graph)
    assert statistics["port_degree"]["min"] >= 1 and statistics["ports_without_server"] == 0
    assert statistics["server_degree"]["max"] == server_degree.max()


def test_random_bipartite_is_reproducible_and_takes_a_generator():
    first, _ = random_bipartite(500, 300, 0.05, 7)
    second, report = random_bipartite(500, 300, 0.05, np.random.default_rng(7))
    assert np.array_equal(first.indptr, second.indptr) and np.array_equal(first.indices, second.indices)
    assert report["seed"] is None
    third, _ = random_bipartite(500, 300, 0.05, 8)
    assert not (np.array_equal(first.indptr, third.indptr) and np.array_equal(first.indices, third.indices))


def test_pairs_are_uniform_over_servers():
    """Edges of single-edge ports (the insertion path) and of dense ports (the bitmap paths) hit
    every server equally often."""
    for n_types, n_servers, p in [(40000, 50, 0.02), (3000, 100, 0.3), (3000, 100, 0.7)]:
        graph, _ = random_bipartite(n_types, n_servers, p, 5)
        counts = graph.server_degree()
        expected = graph.n_edges / n_servers
        assert stats.chisquare(counts, np.full(n_servers, expected)).pvalue > 1e-6


@pytest.mark.parametrize("rule", ["resample", "add-edge"])
def test_empty_ports_are_never_kept_and_are_counted(rule):
    n_types, n_servers, p = 6000, 10, 0.05
    graph, report = random_bipartite(n_types, n_servers, p, 3, empty_ports=rule)
    assert_valid_csr(graph)
    assert graph_statistics(graph)["ports_without_server"] == 0
    assert report["empty_ports"]["rule"] == rule
    q0 = (1 - p) ** n_servers
    affected = report["empty_ports"]["ports_affected"]
    assert_binomial_count(affected, n_types * q0, n_types * q0 * (1 - q0))
    # the degree law: Binomial conditioned on >= 1 (resample) or Binomial with 0 moved to 1 (add-edge)
    support = np.arange(n_servers + 1)
    pmf = stats.binom.pmf(support, n_servers, p)
    if rule == "resample":
        pmf[0] = 0.0
        pmf /= pmf.sum()
    else:
        pmf[1] += pmf[0]
        pmf[0] = 0.0
    mean = (support * pmf).sum()
    variance = ((support - mean) ** 2 * pmf).sum()
    degree = graph.degree()
    assert abs(degree.mean() - mean) <= Z * math.sqrt(variance / n_types)
    if rule == "add-edge":
        assert np.count_nonzero(degree == 1) >= affected


def test_invalid_random_bipartite_input():
    with pytest.raises(InputError) as error:
        random_bipartite(10, 10, 0.0, 1)
    assert error.value.field == "p"
    with pytest.raises(InputError) as error:
        random_bipartite(10, 10, 1.5, 1)
    assert error.value.field == "p"
    with pytest.raises(InputError) as error:
        random_bipartite(10, 10, 0.5, 1, empty_ports="keep")
    assert error.value.field == "empty_ports"
    with pytest.raises(InputError) as error:
        random_bipartite(10, 10, 0.5, None)
    assert error.value.field == "rng"
    with pytest.raises(InputError) as error:
        random_bipartite(10_000, 10_000, 0.5, 1, max_edges=1_000_000)
    assert error.value.field == "max_edges"


def test_fig3_edge_probability_formula_and_cap():
    for n_servers, load in [(2048, 0.9), (2048, 0.5), (256, 0.8)]:
        raw = math.sqrt(math.log(n_servers)) / (n_servers * (1 - load)) * math.log(1 / (1 - load))
        assert fig3_edge_probability(n_servers, load) == pytest.approx(raw, rel=1e-12)
        assert raw < 1
    # at small N the formula exceeds 1 and is capped: every port sees every server
    assert math.sqrt(math.log(16)) / (16 * 0.1) * math.log(10) > 1
    p = fig3_edge_probability(16, 0.9)
    assert p == 1.0
    graph, report = random_bipartite(64, 16, p, 1)
    assert graph.is_complete() and report["empty_ports"]["ports_affected"] == 0
    with pytest.raises(InputError):
        fig3_edge_probability(16, 1.0)


def test_complete_and_explicit_graphs():
    graph, report = complete_graph(3, 5)
    assert graph.is_complete() and report["edges"] == 15 and report["construction"] == "complete"
    graph, report = explicit_graph([[0, 2], [1]], n_servers=3)
    assert graph.to_lists() == [[0, 2], [1]] and report["statistics"]["servers_without_port"] == 0
    graph, _ = explicit_graph(edges=[(1, 0), (0, 2)], n_types=2, n_servers=3)
    assert graph.to_lists() == [[2], [0]]
    with pytest.raises(InputError):
        explicit_graph([[0], []], n_servers=2)


# ---------------------------------------------------------------------------------------------
# Theorems 2 and 3


def spec_parameters(rates, speeds, epsilon, b):
    """Assumption 2's quantities computed here from 000 section 4, with the default constants
    (c1 = 6, d~_1 = eps mu_K / (12 b^2), d~_2 = eps mu_K / (2 b), p_2 = beta_hat)."""
    mu = np.unique(speeds)[::-1]
    count = np.array([np.count_nonzero(speeds == m) for m in mu])
    total = rates.sum()
    k = next(i for i in range(len(mu)) if (mu[: i + 1] * count[: i + 1]).sum() > total)
    beta = 1 - total / (mu[: k + 1] * count[: k + 1]).sum()
    beta_hat = beta * count[: k + 1].sum() / len(speeds)
    epsilon = beta_hat if epsilon is None else epsilon
    p = [epsilon / (6 * b), beta_hat]
    d = [epsilon * mu[k] / (12 * b**2), epsilon * mu[k] / (2 * b)]
    groups = [speeds > mu[k], speeds == mu[k]]
    return k, beta_hat, p, d, groups


def test_assumption2_parameters_follow_the_spec():
    speeds = fig3_speeds(400)
    rates = np.full(1000, 0.9 * speeds.sum() / 1000)
    params = assumption2_parameters(rates, speeds, None, 5)
    k, beta_hat, p, d, _ = spec_parameters(rates, speeds, None, 5)
    assert params["K"] == k + 1 == 3
    assert params["beta_hat"] == pytest.approx(beta_hat)
    assert params["p"] == pytest.approx(p) and params["d_tilde"] == pytest.approx(d)
    assert params["thresholds"] == pytest.approx([400 * d[0], 400 * d[1]])
    assert params["ordering_holds"]
    with pytest.raises(InputError) as error:
        assumption2_parameters(rates, speeds, 2 * beta_hat, 5)
    assert error.value.field == "epsilon"
    with pytest.raises(InputError) as error:
        assumption2_parameters(rates * 10, speeds, None, 5)
    assert error.value.field == "arrival_rate"


def check_theorem_edges(graph, report, rates, probabilities, groups):
    """Edges into each group against sum over ports of |group| * z, per group and in total."""
    assert_valid_csr(graph)
    degree_in = np.zeros((graph.n_types, len(groups)), dtype=np.int64)
    rows = np.repeat(np.arange(graph.n_types), graph.degree())
    for j, members in enumerate(groups):
        degree_in[:, j] = np.bincount(rows[members[graph.indices]], minlength=graph.n_types)
    unused = ~(groups[0] | groups[1])
    assert not np.any(unused[graph.indices]), "servers of types > K must get no edge"
    expected = sum((members.sum() * probabilities[:, j]).sum() for j, members in enumerate(groups))
    variance = sum(
        (members.sum() * probabilities[:, j] * (1 - probabilities[:, j])).sum() for j, members in enumerate(groups)
    )
    assert report["expected_edges"] == pytest.approx(expected, rel=1e-12)
    assert report["expected_edges_sd"] == pytest.approx(math.sqrt(variance), rel=1e-9)
    # ports empty at the first draw: about sum over ports of P(no edge); each redraw adds a few edges
    q_empty = np.prod([(1 - probabilities[:, j]) ** members.sum() for j, members in enumerate(groups)], axis=0)
    affected = report["empty_ports"]["ports_affected"]
    assert_binomial_count(affected, q_empty.sum(), (q_empty * (1 - q_empty)).sum() + 1e-2)
    for j, members in enumerate(groups):
        n = members.sum()
        z = probabilities[:, j]
        slack = affected * (1 + (n * z).max())
        assert abs(degree_in[:, j].sum() - (n * z).sum()) <= Z * math.sqrt((n * z * (1 - z)).sum()) + slack
        full = z >= 1
        assert np.all(degree_in[full, j] == n)


def test_theorem2_edge_counts_match_their_expression():
    rng = np.random.default_rng(4)
    speeds = fig3_speeds(400)
    rates = rng.uniform(1.0, 4.0, 3000)
    rates[:30] *= 40.0  # a few heavy ports, connected to all of a group
    rates *= 0.9 * speeds.sum() / rates.sum()
    epsilon, b = 0.02, 3
    k, _, p, d, groups = spec_parameters(rates, speeds, epsilon, b)
    # c scaled so that the lightest port connects to about 6% of the fast group (z < 1 mostly)
    h_unit = [(400 + 3000) / (400 * pj) for pj in p]
    c = 0.06 / (rates.min() * h_unit[0] / (400 * d[0]))
    graph, report = theorem2_graph(rates, speeds, epsilon, b, 9, c=c)
    json.dumps(report)
    h = [c * hu for hu in h_unit]
    assert report["H"] == pytest.approx(h)
    probabilities = np.column_stack([np.minimum(1, rates * h[j] / (400 * d[j])) for j in range(2)])
    assert 0 < np.count_nonzero(probabilities[:, 0] >= 1) < len(rates)
    check_theorem_edges(graph, report, rates, probabilities, groups)
    assert report["ports_fully_connected"][0] == np.count_nonzero(probabilities[:, 0] >= 1)
    assert report["group_sizes"] == {"types_below_K": 200, "type_K": 100, "unused_types_above_K": 100}
    # the default c = 2 connects every port to every server of types <= K at this size
    dense, dense_report = theorem2_graph(rates, speeds, epsilon, b, 1)
    assert dense.n_edges == 3000 * 300 and dense_report["expected_edges_sd"] == 0


def test_theorem3_edge_counts_match_their_expression():
    speeds = fig3_speeds(400)
    n_ports = 4000
    rates = np.full(n_ports, 0.9 * speeds.sum() / n_ports)
    epsilon, b = None, 5
    k, _, p, d, groups = spec_parameters(rates, speeds, epsilon, b)
    lam = rates[0]
    h_unit = [-math.log(pj) + dj / (pj * lam) * math.log(1.0 / dj) for pj, dj in zip(p, d)]
    for c in (0.5 * 400 * d[0] / (lam * h_unit[0]), 6.0):  # about half the fast group, and the default
        graph, report = theorem3_graph(rates, speeds, epsilon, b, 2, c=c)
        h = [c * hu for hu in h_unit]
        assert report["H"] == pytest.approx(h)
        probabilities = np.column_stack([np.full(n_ports, min(1.0, lam * h[j] / (400 * d[j]))) for j in range(2)])
        check_theorem_edges(graph, report, rates, probabilities, groups)
    with pytest.raises(InputError) as error:
        theorem3_graph(rates * np.linspace(0.5, 1.5, n_ports), speeds, None, 5, 1)
    assert error.value.field == "arrival_rate"


@pytest.mark.parametrize("rule", ["resample", "add-edge"])
def test_theorem_construction_handles_ports_left_empty(rule):
    speeds = fig3_speeds(200)
    n_ports = 3000
    rates = np.full(n_ports, 0.9 * speeds.sum() / n_ports)
    params = assumption2_parameters(rates, speeds, None, 5)
    n = [np.count_nonzero(params["server_type"] < 2), np.count_nonzero(params["server_type"] == 2)]
    # c small enough that a port expects about one edge in the fast group (z is proportional to c)
    _, probe = theorem3_graph(rates, speeds, None, 5, 1, c=1e-3)
    c = 1e-3 / (n[0] * probe["edge_probability"][0]["mean"])
    graph, report = theorem3_graph(rates, speeds, None, 5, 3, c=c, empty_ports=rule)
    z = [report["edge_probability"][j]["mean"] for j in range(2)]
    q_empty = (1 - z[0]) ** n[0] * (1 - z[1]) ** n[1]
    assert 0.2 < q_empty < 0.5
    assert_valid_csr(graph)
    assert graph_statistics(graph)["ports_without_server"] == 0
    affected = report["empty_ports"]["ports_affected"]
    assert report["empty_ports"]["rule"] == rule
    assert_binomial_count(affected, n_ports * q_empty, n_ports * q_empty * (1 - q_empty))


# ---------------------------------------------------------------------------------------------
# well_connectedness


def brute_force_worst(graph, rates, candidates, size):
    best = -1.0
    neighbours = [set(graph.servers_of(port).tolist()) for port in range(graph.n_types)]
    for subset in itertools.combinations(np.flatnonzero(candidates).tolist(), size):
        chosen = set(subset)
        best = max(best, sum(rate for rate, ns in zip(rates, neighbours) if not ns & chosen))
    return best


def test_well_connectedness_exhaustive_mode_matches_brute_force():
    speeds = fig3_speeds(16)
    rates = np.random.default_rng(2).uniform(0.5, 1.5, 40)
    rates *= 0.9 * speeds.sum() / rates.sum()
    graph, _ = random_bipartite(40, 16, 0.15, 6)
    result = well_connectedness(graph, rates, speeds, None, 1, c1=0.1, c_p2=4.0)
    assert "exact" in result["note"]
    params = assumption2_parameters(rates, speeds, None, 1, c1=0.1, c_p2=4.0)
    k = params["K"] - 1
    for group, candidates in zip(result["groups"], (params["server_type"] < k, params["server_type"] <= k)):
        assert group["exhaustive"]
        assert group["worst_D_found"] == pytest.approx(
            brute_force_worst(graph, rates, candidates, group["min_subset_size"])
        )
        assert group["holds_for_subsets_tried"] == (group["worst_D_found"] <= group["threshold"])


@pytest.mark.slow
def test_well_connectedness_search_finds_a_planted_bad_subset():
    rng = np.random.default_rng(8)
    n_servers, n_ports = 64, 600
    speeds = fig3_speeds(n_servers)
    rates = np.full(n_ports, 0.9 * speeds.sum() / n_ports)
    params = assumption2_parameters(rates, speeds, None, 1)
    candidates = np.flatnonzero(params["server_type"] <= params["K"] - 1)
    size = 16
    c_p2 = (size - 0.5) / (n_servers * params["beta_hat"])
    planted = np.sort(rng.choice(candidates, size, replace=False))
    outside = np.setdiff1d(np.arange(n_servers), planted)
    bad = 150  # these ports never see a planted server
    lists = [np.sort(rng.choice(outside, 4, replace=False)) for _ in range(bad)]
    lists += [np.sort(rng.choice(n_servers, 6, replace=False)) for _ in range(n_ports - bad)]
    graph = CompatibilityGraph.from_lists(lists, n_servers)
    covered = np.zeros(n_ports, dtype=bool)
    for port, servers in enumerate(lists):
        covered[port] = np.isin(servers, planted).any()
    planted_d = rates[~covered].sum()
    assert planted_d >= rates[:bad].sum()
    result = well_connectedness(graph, rates, speeds, None, 1, restarts=6, rng=1, c_p2=c_p2, exhaustive_limit=0)
    json.dumps(result)
    group = result["groups"][1]
    assert group["min_subset_size"] == size and not group["exhaustive"]
    assert group["worst_D_found"] >= planted_d - 1e-9
    assert len(group["worst_subset"]) == size
    assert set(group["worst_subset"]) <= set(candidates.tolist())
    worst_covered = np.array([np.isin(s, group["worst_subset"]).any() for s in lists])
    assert rates[~worst_covered].sum() == pytest.approx(group["worst_D_found"])
    assert not group["holds_for_subsets_tried"] and not result["holds_for_subsets_tried"]
    assert "not a proof" in result["note"]


def test_well_connectedness_passes_on_a_complete_graph():
    speeds = fig3_speeds(200)
    rates = np.full(300, 0.9 * speeds.sum() / 300)
    graph, _ = complete_graph(300, 200)
    result = well_connectedness(graph, rates, speeds, None, 5, restarts=2)
    assert result["holds_for_subsets_tried"]
    for group in result["groups"]:
        assert group["worst_D_found"] == 0.0


# ---------------------------------------------------------------------------------------------
# routable_load


def linear_programme_scale(graph, rates, speeds) -> float:
    """The oracle: max theta such that theta * rates can be routed through ``graph`` within the
    servers' speeds, as a linear programme over the edge flows (HiGHS)."""
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix

    n_edges, n_types = graph.n_edges, graph.n_types
    edge_type = np.repeat(np.arange(n_types), graph.degree())
    edge_ids = np.arange(n_edges)
    # variables: one flow per edge, then theta; each type's flows sum to theta * its rate
    equality = coo_matrix(
        (
            np.concatenate([np.ones(n_edges), -rates]),
            (np.concatenate([edge_type, np.arange(n_types)]), np.concatenate([edge_ids, np.full(n_types, n_edges)])),
        ),
        shape=(n_types, n_edges + 1),
    )
    capacity = coo_matrix((np.ones(n_edges), (graph.indices, edge_ids)), shape=(graph.n_servers, n_edges + 1))
    cost = np.zeros(n_edges + 1)
    cost[-1] = -1.0
    solution = linprog(
        cost, A_ub=capacity, b_ub=speeds, A_eq=equality, b_eq=np.zeros(n_types), bounds=(0, None), method="highs"
    )
    assert solution.success
    return float(solution.x[-1])


def test_routable_load_equals_the_linear_programme_on_small_graphs():
    rng = np.random.default_rng(12)
    for _ in range(25):
        n_types, n_servers = int(rng.integers(1, 12)), int(rng.integers(2, 10))
        graph, _ = random_bipartite(n_types, n_servers, float(rng.uniform(0.1, 0.7)), int(rng.integers(10**6)))
        rates = rng.uniform(0.1, 2.0, n_types)
        speeds = rng.uniform(0.2, 2.0, n_servers)
        lp = linear_programme_scale(graph, rates, speeds)
        result = routable_load(graph, rates, speeds)
        json.dumps(result)
        assert result["theta"] == pytest.approx(lp, rel=1e-7)
        assert result["theta_lower"] <= result["theta"] and result["relative_gap"] < 1e-6
        assert result["max_load_fraction"] == pytest.approx(lp * rates.sum() / speeds.sum(), rel=1e-7)


def test_routable_load_on_a_complete_graph_is_capacity_over_rate():
    speeds = fig3_speeds(40)
    rates = np.random.default_rng(1).uniform(0.1, 1.0, 7)
    graph, _ = complete_graph(7, 40)
    result = routable_load(graph, rates, speeds)
    assert result["theta"] == speeds.sum() / rates.sum()
    assert result["max_load_fraction"] == pytest.approx(1.0)
    # the same graph given edge by edge takes the max-flow path and gives the same number
    listed = CompatibilityGraph(graph.indptr.copy(), graph.indices.copy(), 40)
    assert routable_load(listed, rates, speeds)["theta"] == pytest.approx(speeds.sum() / rates.sum(), rel=1e-12)


def test_routable_load_detects_a_graph_that_cannot_carry_the_load():
    # ports 0-2 (rate 1 each) may only use the slow servers 3 and 4 (speed 0.5 each): theta = 1/3
    speeds = np.array([2.0, 2.0, 2.0, 0.5, 0.5])
    rates = np.array([1.0, 1.0, 1.0, 0.5, 0.5])
    lists = [[3, 4], [3], [4], [0, 1, 2, 3], [0, 1, 2]]
    graph = CompatibilityGraph.from_lists(lists, 5)
    result = routable_load(graph, rates, speeds)
    assert result["theta"] == pytest.approx(1.0 / 3.0, rel=1e-12)
    assert not result["can_carry_offered_load"]
    assert result["bottleneck"]["ports"] == 3 and result["bottleneck"]["servers"] == 2
    assert result["max_load_fraction"] == pytest.approx(result["theta"] * 4.0 / 7.0)
    lp = linear_programme_scale(graph, rates, speeds)
    assert result["theta"] == pytest.approx(lp, rel=1e-7)
    # a sparse random graph at the Fig. 3 edge probability carries the Fig. 3 load (rho = 0.9)
    n_servers, n_ports = 256, 4096
    speeds = fig3_speeds(n_servers)
    rates = np.full(n_ports, 0.9 * speeds.sum() / n_ports)
    graph, _ = random_bipartite(n_ports, n_servers, fig3_edge_probability(n_servers, 0.9), 4)
    result = routable_load(graph, rates, speeds)
    assert result["can_carry_offered_load"] and result["theta"] <= 1 / 0.9 * (1 + 1e-12)


def test_routable_load_input_errors():
    graph, _ = complete_graph(2, 3)
    with pytest.raises(InputError) as error:
        routable_load(graph, [1.0], [1.0, 1.0, 1.0])
    assert error.value.field == "arrival_rate"
    with pytest.raises(InputError) as error:
        routable_load(graph, [1.0, 1.0], [1.0, -1.0, 1.0])
    assert error.value.field == "speed"


# ---------------------------------------------------------------------------------------------
# constructions named in scenarios


def fig3_scenario(graph, **system):
    return {
        "system": {
            "n_servers": 64,
            "speed_mix": [[1.0, 0.25], [0.5, 0.25], [0.25, 0.25], [0.125, 0.25]],
            "load": 0.9,
            "buffer": 5,
            "graph": graph,
            **system,
        }
    }


def test_a_scenario_builds_the_fig3_graph_and_keeps_its_report():
    from hetlb.scenario import Scenario

    system = Scenario.from_mapping(fig3_scenario({"kind": "fig3", "ports_exponent": 1.2, "seed": 3})).system
    report = system.describe()["graph_construction"]
    assert system.n_types == round(64**1.2) == report["parameters"]["n_types"]
    assert report["parameters"]["p"] == pytest.approx(fig3_edge_probability(64, 0.9), rel=1e-12)
    assert report["statistics"]["ports_without_server"] == 0
    assert np.allclose(system.arrival_rate, 0.9 * system.capacity / system.n_types)
    direct, _ = random_bipartite(system.n_types, 64, report["parameters"]["p"], 3)
    assert np.array_equal(direct.indices, system.graph.indices)


def test_a_scenario_builds_the_theorem_graphs_with_the_system_buffer():
    from hetlb.scenario import Scenario

    for kind in ("theorem2", "theorem3"):
        system = Scenario.from_mapping(fig3_scenario({"kind": kind, "ports": 40})).system
        report = system.graph_construction
        assert report["construction"] == kind and report["parameters"]["b"] == 5


@pytest.mark.parametrize(
    "graph,field",
    [
        ({"kind": "ring"}, "system.graph.kind"),
        ({"kind": "random", "ports": 4}, "system.graph.p"),
        ({"kind": "random", "p": 0.5, "degree": 3}, "system.graph.degree"),
        ({"kind": "fig3", "ports": 3, "ports_exponent": 1.0}, "system.graph.ports"),
        ({"kind": "random", "p": 1.5, "ports": 4}, "p"),
    ],
)
def test_bad_graph_tables_are_rejected_with_the_field(graph, field):
    from hetlb.errors import InputError
    from hetlb.scenario import Scenario

    with pytest.raises(InputError) as error:
        Scenario.from_mapping(fig3_scenario(graph))
    assert error.value.field == field


def test_the_capacity_check_rejects_a_graph_that_cannot_carry_the_load():
    from hetlb.errors import InputError
    from hetlb.model import System

    # port 0 (rate 1.5) may only use server 1 (speed 1): the graph carries at most 2/3 of the load
    with pytest.raises(InputError) as error:
        System.from_speeds([2.0, 1.0], arrival_rate=[1.5, 0.5], graph=[[1], [0, 1]])
    assert error.value.field == "arrival_rate"
    assert "the graph can carry at most 0.666667 times the offered load" in str(error.value)
