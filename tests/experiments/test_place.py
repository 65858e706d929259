"""hetlb place: the typed family, the search's verdicts, resuming from the store, the graph file."""

import json

import numpy as np
import pytest

from hetlb.cli import main
from hetlb.errors import InputError
from hetlb.experiments.place import class_shares, place, smallest_keys, typed_graph
from hetlb.experiments.store import ResultStore
from hetlb.theory import speed_lower_bound_arrays

SPEEDS = np.repeat([1.0, 0.5, 0.25, 0.125], 8)
RATES = np.full(48, 0.7 * SPEEDS.sum() / 48)
QUICK = {"jobs": 4_000, "replications": 2, "time_budget": 120.0}


def test_typed_graph_gives_each_port_its_class_quota():
    class_speed, weight = class_shares(SPEEDS, RATES.sum())
    bound = speed_lower_bound_arrays(SPEEDS, RATES.sum())
    # load 0.7 on 1, 1/2, 1/4, 1/8: K = 2; the shares at the bound, plus class K + 1 for slack
    assert bound.K == 2 and weight[3] == 0 and weight[2] > 0
    assert weight.sum() == pytest.approx(1.0)
    graph = typed_graph(SPEEDS, RATES.size, RATES.sum(), 8.0, rng=3)
    quota = [max(1, round(8.0 * w)) if w > 0 else 0 for w in weight]
    for port in range(RATES.size):
        servers = graph.servers_of(port)
        assert len(set(servers.tolist())) == servers.size
        counts = [int(np.sum(SPEEDS[servers] == mu)) for mu in class_speed]
        assert counts == quota


@pytest.mark.parametrize(
    ("rows", "width", "k"), [(300, 4096, 60), (50, 4096, 1), (40, 300, 40), (20, 64, 64), (7, 9, 3)]
)
def test_smallest_keys_is_the_set_of_the_full_partition(rows, width, k):
    keys = np.random.default_rng(k).random((rows, width))
    keys[::5] = 0.9 + 0.1 * keys[::5]  # rows with few keys below the threshold take the full partition
    expected = np.sort(np.argpartition(keys, k - 1, axis=1)[:, :k], axis=1)
    assert np.array_equal(np.sort(smallest_keys(keys, k), axis=1), expected)


def test_a_generous_tolerance_passes_with_fewer_edges_than_the_complete_graph(tmp_path):
    with ResultStore(tmp_path / "store.sqlite") as store:
        result = place(SPEEDS, RATES, tolerance=0.6, families=("fig3", "typed"), store=store, seed=2, **QUICK)
    assert result.best is not None and result.graph is not None
    assert result.best.edges == result.graph.n_edges < SPEEDS.size * RATES.size
    complete = result.candidates[0]  # the search starts with the complete graph
    assert complete.family == "complete" and complete.edges == SPEEDS.size * RATES.size
    for candidate in result.candidates:
        low, high = candidate.ratio_ci
        assert candidate.verdict == ("pass" if high < 1.6 else "fail" if low > 1.6 else "undecided")
    # resuming: the same search reads every evaluation back from the store
    with ResultStore(tmp_path / "store.sqlite") as store:
        again = place(SPEEDS, RATES, tolerance=0.6, families=("fig3", "typed"), store=store, seed=2, **QUICK)
    assert all(candidate.cached for candidate in again.candidates)
    assert [c.ratio for c in again.candidates] == [c.ratio for c in result.candidates]


def test_a_tolerance_the_complete_graph_misses_is_reported_infeasible():
    result = place(SPEEDS, RATES, tolerance=1e-6, families=("fig3",), **QUICK)
    assert result.best is None and result.graph is None
    assert any("complete graph itself" in note for note in result.notes)


def test_place_input_errors():
    with pytest.raises(InputError, match="policy"):
        place(SPEEDS, RATES, policy="jsq")
    with pytest.raises(InputError, match="families"):
        place(SPEEDS, RATES, families=("nope",))


def test_cli_place_writes_a_graph_that_simulate_reads(tmp_path, capsys):
    graph_file = tmp_path / "placement.json"
    argv = ["place", "--speeds", "8x1,8x0.5,8x0.25,8x0.125", "--load", "0.7", "--ports", "48"]
    argv += ["--tolerance", "60", "--jobs", "4000", "--replications", "2", "--families", "typed"]
    argv += ["--store", str(tmp_path / "s.sqlite"), "--output", str(graph_file), "--json", "-q"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    servers = json.loads(graph_file.read_text())["servers"]
    assert len(servers) == 48 and sum(len(s) for s in servers) == out["best"]["edges"]
    simulate = ["simulate", "--speeds", "8x1,8x0.5,8x0.25,8x0.125", "--load", "0.7", "--policy", "jfsq"]
    assert main([*simulate, "--graph", f"explicit:file={graph_file}", "--jobs", "2000", "--json", "-q"]) == 0
    assert json.loads(capsys.readouterr().out)["mean_response_time"] > 0


def test_cli_place_errors(capsys, tmp_path):
    argv = ["place", "--speeds", "8x1,8x0.5", "--load", "0.7", "--store", str(tmp_path / "s.sqlite")]
    assert main([*argv, "--families", "fig3,bogus"]) == 2
    assert capsys.readouterr().err.startswith("hetlb: error: --families")
    assert main([*argv, "--tolerance", "-1"]) == 2
    assert capsys.readouterr().err.startswith("hetlb: error: --tolerance")


def test_graphs_above_max_edges_are_skipped_and_the_rest_of_the_search_is_unchanged(tmp_path):
    options = {"tolerance": 0.6, "families": ("typed", "theorem3"), "seed": 1, **QUICK}
    with ResultStore(tmp_path / "store.sqlite") as store:
        free = place(SPEEDS, RATES, store=store, **options)
    reference = next(c for c in free.candidates if c.family == "theorem3")  # c = 6: every edge of the types <= K
    with ResultStore(tmp_path / "store.sqlite") as store:
        limited = place(SPEEDS, RATES, store=store, max_edges=reference.edges - 1, **options)
    seen = {(c.family, c.parameter): c.ratio for c in free.candidates}
    theorem3 = [c for c in limited.candidates if c.family == "theorem3"]
    assert theorem3 and all(c.edges < reference.edges for c in theorem3)
    for candidate in limited.candidates:  # the graphs built are the free search's, with the same runs
        assert seen[(candidate.family, candidate.parameter)] == candidate.ratio
    assert any(note.startswith("theorem3: not built at") for note in limited.notes)
    with pytest.raises(InputError, match="max_edges"):
        typed_graph(SPEEDS, RATES.size, RATES.sum(), 8.0, rng=3, max_edges=10)
    with pytest.raises(InputError, match="max_edges"):
        place(SPEEDS, RATES, max_edges=0)


def test_cli_place_max_edges_error(capsys, tmp_path):
    argv = ["place", "--speeds", "8x1,8x0.5", "--load", "0.7", "--store", str(tmp_path / "s.sqlite")]
    assert main([*argv, "--max-edges", "0"]) == 2
    assert capsys.readouterr().err.startswith("hetlb: error: --max-edges")
