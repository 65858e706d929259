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
        ("system.load", "load rho (arrival rate / total capacity)"),
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
    assert axes.get_xlabel() == "load rho (arrival rate / total capacity)"
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
    assert axis_label(drawn["xlabel"]) == "load rho (arrival rate / total capacity)"
    assert axis_label(drawn["ylabel"]) == "mean response time (time units)"
    assert drawn["legend_title"] == "policy.id" and "2 replications per point" in drawn["title"]
