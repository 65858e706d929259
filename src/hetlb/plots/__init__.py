"""Matplotlib figures of simulation results."""

from hetlb.plots.figures import plot_metric, plot_panels

__all__ = ["plot_metric", "plot_panels"]
