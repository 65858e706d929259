"""Statistics of simulation output: confidence intervals by batch means and by replications."""

from hetlb.stats.intervals import CONFIDENCE, interval, ratio_per_batch, t_interval

__all__ = ["CONFIDENCE", "interval", "ratio_per_batch", "t_interval"]
