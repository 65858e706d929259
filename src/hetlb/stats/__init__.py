"""Statistics of simulation output: confidence intervals by batch means and by replications."""

from hetlb.stats.intervals import CONFIDENCE, growth_between_halves, interval, ratio_per_batch, t_interval
from hetlb.stats.preference import preference_report

__all__ = ["CONFIDENCE", "growth_between_halves", "interval", "preference_report", "ratio_per_batch", "t_interval"]
