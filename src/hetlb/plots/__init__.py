"""Matplotlib figures of simulation results: each function returns its Figure and writes a file
only when given a path."""

from hetlb.plots.figures import plot_intervals, plot_metric, plot_panels
from hetlb.plots.sweeps import sweep_figure

__all__ = ["plot_intervals", "plot_metric", "plot_panels", "sweep_figure"]
