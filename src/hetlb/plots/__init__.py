"""Matplotlib figures of simulation results."""

from hetlb.plots.figures import plot_metric

__all__ = ["plot_metric"]
