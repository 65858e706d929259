"""Statistics of simulation output: confidence intervals by batch means and by replications."""

from hetlb.stats.intervals import CONFIDENCE, interval, ratio_per_batch, t_interval
from hetlb.stats.preference import preference_report

__all__ = ["CONFIDENCE", "interval", "preference_report", "ratio_per_batch", "t_interval"]
