"""Confidence intervals: Student-t over batch means within a run or over independent replications."""

from __future__ import annotations

import math

import numpy as np
from scipy.special import stdtrit

CONFIDENCE = 0.95


def t_interval(samples, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Mean and half-width of the Student-t interval of i.i.d. ``samples``.

    The half-width is nan with fewer than two finite samples.
    """
    values = np.asarray(samples, dtype=np.float64)
    values = values[np.isfinite(values)]
    if len(values) == 0:
        return math.nan, math.nan
    mean = float(values.mean())
    if len(values) < 2:
        return mean, math.nan
    quantile = stdtrit(len(values) - 1, 0.5 + confidence / 2.0)
    return mean, float(quantile * values.std(ddof=1) / math.sqrt(len(values)))


def interval(samples, confidence: float = CONFIDENCE) -> list[float]:
    """[low, high] of the t interval; [nan, nan] when it is undefined."""
    mean, half = t_interval(samples, confidence)
    return [mean - half, mean + half]


def ratio_per_batch(numerator_cumulative, denominator_cumulative) -> np.ndarray:
    """Per-batch ratios from cumulative snapshots (e.g. response-time sum over completions)."""
    numerator = np.diff(np.concatenate([[0.0], numerator_cumulative]))
    denominator = np.diff(np.concatenate([[0.0], denominator_cumulative]))
    with np.errstate(invalid="ignore", divide="ignore"):
        return numerator / denominator


def growth_between_halves(area_cumulative, time_cumulative) -> float:
    """The time average after the middle batch boundary divided by that before it, minus 1, from
    cumulative snapshots at the batch ends (of an integral, e.g. of the number in system, and of
    the elapsed time): about 0 for a stationary run, clearly positive for one that keeps growing."""
    middle = len(time_cumulative) // 2 - 1
    with np.errstate(invalid="ignore", divide="ignore"):
        first = area_cumulative[middle] / time_cumulative[middle]
        second = (area_cumulative[-1] - area_cumulative[middle]) / (time_cumulative[-1] - time_cumulative[middle])
        return float(second / first - 1.0)
