"""The dispatching preference of paper 001 (section 3) measured from selection frequencies.

Delta_r = P(the chosen server has rank r of the dispatcher's information) - E[mu_{sigma(r)}] / mu_Sigma,
ranks r = 1..N by increasing local estimate (hetlb.kernels.slotted.rank_of_choice gives the tie
convention). A preference is *tilted* when some k has Delta_r >= 0 for r <= k and Delta_r <= 0 for
r > k, and *delta-tilted* when, in addition, Delta_1 >= delta and Delta_N <= -delta with delta > 0.
"""

from __future__ import annotations

import numpy as np

from hetlb.stats.intervals import CONFIDENCE, interval


def preference_report(delta, samples, confidence: float = CONFIDENCE) -> dict:
    """Judge a measured preference ``delta`` (one value per rank) from i.i.d. ``samples`` of it.

    Returns per-rank ``delta`` with its ``delta_ci`` at ``confidence``, and the verdicts on
    simultaneous (Bonferroni, over the N ranks) intervals: ``tilted`` (the time-averaged preference
    is consistent with a tilted one: some k has no rank <= k significantly negative and no rank > k
    significantly positive), ``delta`` = min(Delta_1, -Delta_N) and ``delta_tilted`` (tilted, with
    Delta_1 significantly > 0 and Delta_N significantly < 0). The paper's conditions hold state by
    state; a time average can only be consistent with them.

    Parameters
    ----------
    delta
        Delta_r of 001, one value per rank r = 1..N.
    samples
        Rows of i.i.d. samples of ``delta``: batches of one run, or replications.
    confidence
        The confidence level of the intervals, in (0, 1).
    """
    delta = np.asarray(delta, dtype=float)
    samples = np.asarray(samples, dtype=float)
    n_ranks = len(delta)
    per_rank = np.array([interval(samples[:, r], confidence) for r in range(n_ranks)])
    simultaneous = np.array([interval(samples[:, r], 1.0 - (1.0 - confidence) / n_ranks) for r in range(n_ranks)])
    # a rank with no spread in its samples is exactly its value
    low = np.where(np.isnan(simultaneous[:, 0]), delta, simultaneous[:, 0])
    high = np.where(np.isnan(simultaneous[:, 1]), delta, simultaneous[:, 1])
    head_ok = np.concatenate([[True], np.cumprod(high >= 0).astype(bool)])  # ranks < k not negative
    tail_ok = np.concatenate([np.cumprod((low <= 0)[::-1])[::-1].astype(bool), [True]])  # ranks >= k not positive
    tilted = bool(np.any(head_ok & tail_ok))
    return {
        "delta": delta.tolist(),
        "delta_ci": per_rank.tolist(),
        "tilted": tilted,
        "delta_min": float(min(delta[0], -delta[-1])),
        "delta_tilted": bool(tilted and low[0] > 0 and high[-1] < 0),
        "confidence": confidence,
    }
