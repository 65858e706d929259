"""The random source of a live dispatcher's decisions, held where numba reaches it cheaply.

hetlb.policies.choice.choose_server draws from a numpy Generator. Handing a Generator to a
compiled function costs about 4 us per call (numba unboxes its bit generator through ctypes),
more than the decision itself. A :class:`RandomSource` (a numba StructRef, passed as one pointer)
holds the dispatcher's Generator, unboxed once when it is made, and :func:`decide` calls
choose_server with it: the rule and its signature are those the kernels and the conformance check
use, so their compiled and cached code is shared, never specialised for the live side.

This module imports numba when it is imported (a StructRef type is a numba class); only the live
dispatcher imports it, never ``import hetlb``.
"""

import numpy as np
from numba import types
from numba.experimental import structref

from hetlb.jit import njit
from hetlb.policies.choice import choose_server


@structref.register
class RandomSourceType(types.StructRef):
    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


class RandomSource(structref.StructRefProxy):
    """A dispatcher's numpy Generator, for :func:`decide`."""

    def __new__(cls, generator: np.random.Generator):
        return new_source(generator)


@njit
def new_source(generator):
    return RandomSource(generator)


structref.define_constructor(RandomSource, RandomSourceType, ["generator"])
structref.define_boxing(RandomSourceType, RandomSource)


@njit
def decide(
    source, code, candidates, lo, hi, estimate, speed_class, n_classes, speed, cumulative_speed, idle_since, d,
    jba_rate_weighted, jba_inclusive, jba_fallback, keys, ties, sample,
):  # fmt: skip
    """hetlb.policies.choice.choose_server with the Generator held by ``source``."""
    return choose_server(
        code, candidates, lo, hi, estimate, speed_class, n_classes, speed, cumulative_speed, idle_since, d,
        jba_rate_weighted, jba_inclusive, jba_fallback, keys, ties, sample, source.generator,
    )  # fmt: skip
