"""Figures: words for the axes, a legend entry for the shading, series that stay visible where
they coincide; the demo's table and figure under the names of a sweep's columns."""

import csv

import matplotlib.pyplot as plt
import numpy as np
import pytest

import hetlb
from hetlb import demo
from hetlb.plots import figures
from hetlb.plots.figures import BAND_LABEL, axis_label, draw_metric


@pytest.mark.parametrize(
    "text, label",
    [
        ("system.load", r"load $\rho$ (arrival rate / total capacity)"),
        ("mean_response_time", "mean response time (time units)"),
        ("mean response time", "mean response time (time units)"),  # as `hetlb plot` writes a metric
        ("mean_delay", "mean delay (slots)"),
        ("system.speed_ratio", "speed ratio"),  # an axis without words of its own: no prefix, no underscores
        ("E|X_1|", "E|X_1|"),  # any other text is kept
        ("number of servers N", "number of servers N"),
    ],
)
def test_axis_labels_are_words(text, label):
    assert axis_label(text) == label


def test_coinciding_series_stay_distinguishable_and_the_shading_is_named():
    x = [0.3, 0.5, 0.7]
    mean = np.array([1.0, 1.2, 1.9])
    series = {"jsq": (mean, mean - 0.1, mean + 0.1), "jiq": (mean, mean - 0.1, mean + 0.1)}  # jsq under jiq
    figure, axes = plt.subplots()
    draw_metric(axes, x, series, xlabel="system.load", ylabel="mean_response_time", legend_title="policy.id")
    jsq, jiq = axes.get_lines()
    assert jsq.get_marker() != jiq.get_marker() and jsq.get_linestyle() != jiq.get_linestyle()
    assert jsq.get_markerfacecolor() == "none"  # hollow: a marker drawn over another leaves it visible
    legend = axes.get_legend()
    assert [text.get_text() for text in legend.get_texts()] == ["jsq", "jiq", BAND_LABEL]
    assert legend.get_title().get_text() == "policy"
    assert axes.get_xlabel() == r"load $\rho$ (arrival rate / total capacity)"
    assert axes.get_ylabel() == "mean response time (time units)"
    plt.close(figure)

    figure, axes = plt.subplots()  # no interval (one replication of a metric without batch means): no band
    nan = np.full(3, np.nan)
    draw_metric(axes, x, {"jsq": (mean, nan, nan)}, xlabel="x", ylabel="y")
    assert [text.get_text() for text in axes.get_legend().get_texts()] == ["jsq"]
    plt.close(figure)


def test_demo_names_its_columns_as_a_sweep_does(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(demo, "LOADS", (0.5, 0.7))
    monkeypatch.setattr(demo, "POLICIES", (("jsq", {}), ("weighted-random", {})))
    monkeypatch.setattr(demo, "WARMUP", 5.0)
    drawn = {}

    def plot_metric(x, series, path, **options):
        drawn.update(options, series=series)
        figures.plot_metric(x, series, path, **options)

    monkeypatch.setattr(demo, "plot_metric", plot_metric)
    demo.run_demo(tmp_path, jobs=800, replications=2)
    capsys.readouterr()
    with (tmp_path / "demo.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 4 and (tmp_path / "demo.png").stat().st_size > 10_000
    # the same run, as a one-row table with a sweep's columns
    system = hetlb.System.from_speeds(demo.SPEEDS, load=0.7)
    result = hetlb.simulate(system, "jsq", jobs=800, warmup=5.0, replications=2, seed=2024)
    frame = result.to_frame()
    row = next(r for r in rows if r["policy.id"] == "jsq" and float(r["system.load"]) == 0.7)
    assert set(row) - set(frame.columns) == {"weighted_random_exact", "events_per_second"}
    for column in set(row) & set(frame.columns) - {"policy.id"}:
        assert float(row[column]) == pytest.approx(float(frame.loc[0, column]), rel=1e-12), column
    assert float(row["weighted_random_exact"]) == pytest.approx(100 / (0.3 * 46.875))  # N / ((1 - rho) sum mu)
    assert axis_label(drawn["xlabel"]) == r"load $\rho$ (arrival rate / total capacity)"
    assert axis_label(drawn["ylabel"]) == "mean response time (time units)"
    assert drawn["legend_title"] == "policy.id" and "2 replications per point" in drawn["title"]


def test_a_result_plots_its_occupancy_as_a_figure_and_writes_only_when_asked(tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    monkeypatch.chdir(tmp_path)
    system = hetlb.System.from_speeds([1.0], load=0.5)  # M/M/1: s_i = rho^i
    result = hetlb.simulate(system, "jsq", jobs=40_000, warmup=50.0, replications=4, seed=3)
    figure = result.plot()
    assert isinstance(figure, Figure) and list(tmp_path.iterdir()) == []
    (line,) = [line for line in figure.axes[0].get_lines()]
    levels, mean = line.get_data()
    assert list(levels[:3]) == [1, 2, 3] and mean[0] == pytest.approx(result.runs[0].utilisation.mean(), rel=0.05)
    outline = figure.axes[0].collections[0].get_paths()[0].vertices[:, 1]  # the band: lows, then highs back
    for i in range(3):  # the t interval over the 4 replications holds rho^i (exact)
        low, high = outline[1 + i], outline[-2 - i]
        assert min(low, high) <= 0.5 ** (i + 1) <= max(low, high)
    result.plot(tmp_path / "occupancy.svg")
    assert (tmp_path / "occupancy.svg").stat().st_size > 0


def test_a_sweep_plots_its_summary_writes_no_store_and_shows_progress(tmp_path, monkeypatch, capsys):
    from matplotlib.figure import Figure

    from hetlb.experiments import SweepSpec, sweep

    monkeypatch.chdir(tmp_path)
    spec = SweepSpec(
        base={"system": {"speeds": "2x1.0,2x0.5", "load": 0.5}, "run": {"jobs": 2000, "warmup": 20.0}},
        axes={"system.load": [0.4, 0.7], "policy.id": ["jsq", "jfsq"]},
        replications=2,
        seed=1,
    )
    result = sweep(spec, executor="serial")
    assert list(tmp_path.iterdir()) == [] and "2/2" not in capsys.readouterr().out
    shown = repr(result)
    assert shown.startswith("<SweepResult 4 points, 8 runs (8 computed, 0 reused)") and "\n" not in shown
    figure = result.plot(bound=True)
    assert isinstance(figure, Figure)
    lines = {line.get_label(): line.get_ydata() for line in figure.axes[0].get_lines()}
    for policy in ("jsq", "jfsq"):
        rows = result.summary[result.summary["policy.id"] == policy].sort_values("system.load")
        np.testing.assert_array_equal(lines[policy], rows["mean_response_time"].to_numpy())
    bound = [
        hetlb.theory.speed_lower_bound(hetlb.System.from_speeds("2x1.0,2x0.5", load=v)).lower_bound for v in (0.4, 0.7)
    ]
    np.testing.assert_allclose(lines["C*/lambda (000, Prop. 1)"], bound, rtol=1e-12)
    assert list(tmp_path.iterdir()) == []


def test_a_system_of_many_servers_has_a_short_repr():
    system = hetlb.System.from_speeds("25x1,25x0.5,25x0.25,25x0.125", load=0.9, buffer=5)
    assert repr(system) == (
        "<System 100 servers (25x1,25x0.5,25x0.25,25x0.125), 1 job type, load 0.9, buffer 5, complete graph>"
    )
    assert len(repr(hetlb.System.from_speeds(np.linspace(0.5, 2.0, 1000), load=0.5))) < 150


def test_the_first_simulation_in_python_says_that_it_compiles(monkeypatch, capsys):
    """(Of those that run numba's kernels: a short one runs as plain Python, fast_start.)"""
    from hetlb import progress
    from hetlb.simulation import fast_start
    from hetlb.simulation import simulate as entry

    monkeypatch.setattr(entry, "announced", set())
    monkeypatch.setattr(fast_start, "PLAIN_PYTHON_EVENTS", 0.0)
    monkeypatch.setattr(progress, "needs_compiling", lambda *kernels: True)  # as on a fresh install
    system = hetlb.System.from_speeds([1.0, 0.5], load=0.5)
    for _ in range(2):
        hetlb.simulate(system, "jsq", jobs=200)
    err = capsys.readouterr().err
    assert err.count("hetlb: compiling the simulation kernels") == 1 and err.count("\n") == 1


def test_the_mean_field_exact_and_slotted_results_plot_their_own_figures():
    from matplotlib.figure import Figure

    from hetlb.theory import mean_field, solve_exact

    limit = mean_field(hetlb.System.from_speeds([1.0] * 4, load=0.5), "random")  # independent M/M/1: s_i = rho^i
    (line,) = limit.plot().axes[0].get_lines()
    levels, values = line.get_data()
    np.testing.assert_allclose(values[:5], 0.5 ** levels[:5], rtol=1e-9)

    exact = solve_exact(hetlb.System.from_speeds([2.0, 1.0], load=0.6, buffer=3), "jsq")
    figure = exact.plot()
    assert isinstance(figure, Figure) and len(figure.axes) == 2
    shown = figure.axes[0].get_lines()[0].get_ydata()
    np.testing.assert_array_equal(shown, exact.utilisation)
    admitted = figure.axes[1].get_lines()[0].get_ydata()
    assert admitted.sum() == pytest.approx(exact.throughput, rel=1e-12)  # what is admitted is served

    slotted = hetlb.simulate_slotted(
        hetlb.SlottedSystem.from_speeds([0.5, 0.5, 0.2], load=0.5), "l-jsq", slots=5000, replications=3, seed=2
    )
    shown = slotted.plot().axes[0].get_lines()[0].get_ydata()
    assert shown.sum() == pytest.approx(slotted.mean_number_in_system, rel=1e-9)  # sum_n Q_n, the jobs in system


def test_a_mean_field_trajectory_plots_its_path():
    from hetlb.theory import mean_field_trajectory

    system = hetlb.System.from_speeds([1.0] * 2, load=0.5)
    path = mean_field_trajectory(system, "random", times=[0.5, 1.0, 400.0])  # relaxed: gap ~ exp(-t (1 - sqrt(rho))^2)
    figure = path.plot()
    jobs = figure.axes[0].get_lines()[0].get_ydata()
    np.testing.assert_array_equal(jobs, path.mean_number_in_system)
    assert jobs[-1] == pytest.approx(1.0, rel=1e-4)  # M/M/1 at rho = 0.5: rho / (1 - rho) jobs in steady state


def test_the_systems_and_solutions_have_one_line_reprs():
    from hetlb.theory import mean_field, solve_exact

    slotted = hetlb.SlottedSystem.from_speeds([1.0] * 1000, load=0.5, dispatchers=3)
    assert repr(slotted) == (
        "<SlottedSystem 1000 servers (1000x1), 3 dispatchers, load 0.5, routing slot, ties independent>"
    )
    system = hetlb.System.from_speeds("500x1,500x0.5", load=0.5)
    assert repr(system.graph) == "<CompatibilityGraph complete: 1 job types, 1000 servers, 1000 edges>"
    limit = mean_field(system, "jfsq")
    assert (
        repr(limit)
        == f"<MeanFieldLimit jfsq, 2 classes, load 0.5, buffer infinite: mean response time {limit.mean_response_time:.5g}>"
    )
    exact = solve_exact(hetlb.System.from_speeds([1.0, 0.5], load=0.5, buffer=3), "jsq")
    assert repr(exact).startswith("<ExactSolution jsq, 2 servers, 16 states: mean response time ")


def test_the_bounding_and_diffusion_results_plot_their_own_figures():
    from hetlb.theory import policy_diffusion, speed_pools, stationary_diffusion

    system = hetlb.System.from_speeds(np.linspace(0.7, 1.3, 20), excess_capacity=1.0, buffer=2)
    bounding = hetlb.simulate_bounding_system(system, "fsl", horizon=200.0, warmup=20.0, replications=2, seed=1)
    (line,) = bounding.plot().axes[0].get_lines()
    np.testing.assert_array_equal(line.get_ydata(), bounding.level_means)
    assert line.get_ydata()[0] == pytest.approx(bounding.estimates["Q_1"].mean, rel=1e-9)  # level 1 is Q_1

    limit = policy_diffusion("jfsq", speed_pools([1.2, 0.8]), 1.0)
    stationary = stationary_diffusion(limit, n_paths=16, horizon=10.0, seed=2)
    grid = [-1.0, 0.0, 1.0]
    (line,) = stationary.plot("x_plus1", grid).axes[0].get_lines()
    np.testing.assert_array_equal(line.get_ydata(), stationary.ccdf("x_plus1", grid)[0])
    assert np.all(np.diff(line.get_ydata()) <= 0)  # a ccdf does not rise
