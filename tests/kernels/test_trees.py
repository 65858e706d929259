"""The tournament tree of departures (hetlb.kernels.trees): its root is the earliest time and the
first leaf holding it, whether it is kept by replaying matches (set_time, lower_time) or, in a
small system, by a scan of the leaves (set_time_by_scan, lower_time_at_root)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hetlb.jit import records
from hetlb.kernels.trees import lower_time, lower_time_at_root, new_tournament, set_time, set_time_by_scan


def first_least(times):
    return float(np.min(times)), int(np.argmin(times))


@settings(max_examples=100, deadline=None)
@given(
    n=st.integers(1, 16),
    steps=st.lists(
        st.tuples(st.integers(0, 15), st.sampled_from([0.0, 1.0, 2.0, 3.0, np.inf]), st.booleans()), max_size=40
    ),
)
def test_both_ways_give_the_first_least_time(n, steps):
    """Times from a few values, so that ties are common; a lowering only ever lowers."""
    times = np.full(n, np.inf)
    replayed = records(new_tournament(times))
    scanned = records(new_tournament(times))
    for leaf, value, lower in steps:
        leaf %= n
        if lower and value < times[leaf]:
            lower_time(replayed, leaf, value)
            lower_time_at_root(scanned, leaf, value)
        else:
            set_time(replayed, leaf, value)
            set_time_by_scan(scanned, leaf, value, n)
        times[leaf] = value
        expected = first_least(times)
        if np.isfinite(expected[0]):
            assert (replayed["time"][1], replayed["leaf"][1]) == expected
            assert (scanned["time"][1], scanned["leaf"][1]) == expected
        else:
            assert replayed["time"][1] == scanned["time"][1] == np.inf
