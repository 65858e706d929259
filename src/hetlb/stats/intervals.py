"""Confidence intervals: Student-t over batch means within a run or over independent replications,
and for a positive quantity whose batch means are skewed (heavy-tailed, slowly mixing runs) Cox's
interval on the log scale, which never reaches below zero."""

from __future__ import annotations

import math

import numpy as np

CONFIDENCE = 0.95

# fmt: off
T_975 = (
    12.706204736174694, 4.302652729749462, 3.1824463052837078, 2.7764451051977934,
    2.5705818356363146, 2.4469118511449786, 2.364624251592784, 2.306004135204166,
    2.262157162798205, 2.228138851986274, 2.200985160091639, 2.1788128296672284,
    2.1603686564627913, 2.144786687917804, 2.131449545559776, 2.1199052992212546,
    2.1098155778333156, 2.1009220402410382, 2.0930240544083087, 2.085963447265864,
    2.0796138447276795, 2.0738730679040254, 2.0686576104190486, 2.0638985616280245,
    2.0595385527532972, 2.0555294386428735, 2.0518305164802846, 2.0484071417952454,
    2.045229642132703, 2.0422724563012378, 2.039513446396408, 2.0369333434601016,
    2.0345152974493383, 2.0322445093177186, 2.030107928250343, 2.0280940009804502,
    2.0261924630291093, 2.0243941639119694, 2.022690920036761, 2.021075390306273,
    2.019540970441376, 2.0180817028184443, 2.016692199227824, 2.0153675744437636,
    2.014103388880846, 2.012895598919429, 2.0117405137297655, 2.010634757624232,
    2.0095752371292392, 2.008559112100761, 2.007583770315836, 2.006646805061688,
    2.0057459953178687, 2.0048792881880564, 2.0040447832891455, 2.003240718847872,
    2.002465459291007, 2.0017174841452356, 2.000995378088267, 2.0002978220142604,
    1.999623584994939, 1.9989715170333788, 1.998340542520741, 1.997729654317693,
    1.9971379083920038, 1.9965644189523117, 1.996008354025296, 1.9954689314298435,
    1.9949454151072374, 1.994437111771186, 1.9939433678456255, 1.9934635666618719,
    1.992997125889855, 1.992543495180932, 1.9921021540022417, 1.9916726096446642,
    1.9912543953883846, 1.9908470688116906, 1.9904502102301285, 1.990063421254446,
    1.9896863234569029, 1.989318557136572, 1.9889597801751624, 1.9886096669757083,
    1.9882679074772216, 1.98793420623902, 1.9876082815890708, 1.9872898648311692,
    1.986978699506281, 1.9866745407037683, 1.9863771544186177, 1.98608631695113,
    1.9858018143458227, 1.985523441866604, 1.9852510035054978, 1.984984311522457,
    1.9847231860139845, 1.9844674545084815, 1.9842169515864174, 1.9839715185235518,
    1.983731002955606, 1.9834952585628793, 1.9832641447734565, 1.9830375264837259,
    1.9828152737950475, 1.9825972617655006, 1.9823833701756908, 1.982173483307727,
    1.9819674897364825, 1.981765282132372, 1.9815667570749007, 1.9813718148763053,
    1.981180359414661, 1.9809922979758567, 1.9808075411039094, 1.9806260024590894,
    1.9804475986834025, 1.980272249272974, 1.9800998764569397, 1.9799304050824402,
    1.9797637625053868, 1.9795998784866382, 1.9794386850933035, 1.9792801166048548,
    1.9791241094237977, 1.9789706019906281, 1.9788195347028539, 1.978670849837835,
)
# fmt: on
"""Student-t quantiles at 0.975 (the 95% two-sided interval) for 1 to 128 degrees of freedom, as
scipy.special.stdtrit gives them: the usual intervals need no scipy import (about 0.1 s of CPU)."""


def t_quantile(df: int, probability: float) -> float:
    """The ``probability`` quantile of Student's t with ``df`` degrees of freedom."""
    if probability == 0.975 and 1 <= df <= len(T_975):
        return T_975[df - 1]
    from scipy.special import stdtrit

    return float(stdtrit(df, probability))


def t_interval(samples, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Mean and half-width of the Student-t interval of i.i.d. ``samples``.

    The half-width is nan with fewer than two finite samples.

    Parameters
    ----------
    samples
        i.i.d. samples (batch means or replications).
    confidence
        The confidence level, in (0, 1).
    """
    values = np.asarray(samples, dtype=np.float64)
    values = values[np.isfinite(values)]
    if len(values) == 0:
        return math.nan, math.nan
    mean = float(values.mean())
    if len(values) < 2:
        return mean, math.nan
    quantile = t_quantile(len(values) - 1, 0.5 + confidence / 2.0)
    return mean, float(quantile * values.std(ddof=1) / math.sqrt(len(values)))


def interval(samples, confidence: float = CONFIDENCE) -> list[float]:
    """[low, high] of the t interval; [nan, nan] when it is undefined.

    Parameters
    ----------
    samples
        i.i.d. samples (batch means or replications).
    confidence
        The confidence level, in (0, 1).
    """
    mean, half = t_interval(samples, confidence)
    return [mean - half, mean + half]


def positive_interval(samples, confidence: float = CONFIDENCE) -> list[float]:
    """[low, high], a 95% interval of the mean of positive, right-skewed ``samples`` (batch means
    or replication means of a response time): Cox's method on their logarithms y, exp(ybar + s^2/2
    +- t s_e) with s_e^2 = s^2/n + s^4/(2(n-1)), exact for log-normal samples to first order and
    always above zero. Where a sample is not positive (the quantity is not one), the t interval
    (:func:`interval`); [nan, nan] with fewer than two finite samples."""
    values = np.asarray(samples, dtype=np.float64)
    values = values[np.isfinite(values)]
    if len(values) < 2:
        return [math.nan, math.nan]
    if np.any(values <= 0.0):
        return interval(values, confidence)
    logs = np.log(values)
    n = len(logs)
    variance = float(logs.var(ddof=1))
    centre = float(logs.mean()) + variance / 2.0
    half = t_quantile(n - 1, 0.5 + confidence / 2.0) * math.sqrt(variance / n + variance**2 / (2.0 * (n - 1)))
    return [math.exp(centre - half), math.exp(centre + half)]


def ratio_per_batch(numerator_cumulative, denominator_cumulative) -> np.ndarray:
    """Per-batch ratios from cumulative snapshots (e.g. response-time sum over completions).

    Parameters
    ----------
    numerator_cumulative, denominator_cumulative
        The cumulative values at the batch ends.
    """
    numerator = np.diff(np.concatenate([[0.0], numerator_cumulative]))
    denominator = np.diff(np.concatenate([[0.0], denominator_cumulative]))
    with np.errstate(invalid="ignore", divide="ignore"):
        return numerator / denominator


def growth_between_halves(area_cumulative, time_cumulative) -> float:
    """The time average after the middle batch boundary divided by that before it, minus 1: about 0
    for a stationary run, clearly positive for one that keeps growing.

    Parameters
    ----------
    area_cumulative
        Cumulative snapshots at the batch ends of an integral (e.g. of the number in system, in
        jobs x time units).
    time_cumulative
        The elapsed time at the same batch ends (time units).
    """
    middle = len(time_cumulative) // 2 - 1
    with np.errstate(invalid="ignore", divide="ignore"):
        first = area_cumulative[middle] / time_cumulative[middle]
        second = (area_cumulative[-1] - area_cumulative[middle]) / (time_cumulative[-1] - time_cumulative[middle])
        return float(second / first - 1.0)
