"""A routing policy written outside hetlb, registered as a plugin.

fiq-sed: the fastest idle compatible server (ties at random); when none is idle, the server of
least expected delay (queue length + 1) / speed, ties at random. Import this file, or name it in
a scenario's ``plugins`` (docs/how-to/your-own-policy.md), and ``fiq-sed`` is a policy id like
any other.
"""

import numpy as np
from numba import njit

import hetlb


@njit
def fiq_sed_key(queue_len, speed_class, n_classes, speed, idle_since):
    """An idle server's key is its speed class minus the number of classes (negative, fastest
    least); a busy one's is its expected delay (q + 1) / mu, positive."""
    if queue_len == 0:
        return float(speed_class - n_classes)
    return (queue_len + 1.0) / speed


def fiq_sed_rule(queue_len, speed, is_fast, params, idle_rank):
    """The definition as routing probabilities, with numpy alone (the exact solver's oracle)."""
    idle = queue_len == 0
    idle_speed = np.where(idle, speed, -np.inf)
    fastest_idle = idle & (idle_speed == idle_speed.max(axis=1, keepdims=True))
    delay = (queue_len + 1) / speed
    least_delay = delay == delay.min(axis=1, keepdims=True)
    chosen = np.where(idle.any(axis=1, keepdims=True), fastest_idle, least_delay)
    return chosen / chosen.sum(axis=1, keepdims=True)


hetlb.register_policy(
    "fiq-sed",
    fiq_sed_key,
    "the fastest idle compatible server (ties at random); if none is idle, a compatible server "
    "minimising (queue length + 1) / speed, ties at random",
    "examples/fiq_sed.py (a plugin)",
    exact_rule=fiq_sed_rule,
)
