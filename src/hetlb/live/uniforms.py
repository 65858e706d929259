"""The uniform numbers of a live dispatcher's decisions, in a form numba passes cheaply.

hetlb.policies.choice.choose_server draws with ``rng.random()``. A numpy Generator costs about 4 us
to hand to a compiled function on every call (numba unboxes its bit generator through ctypes),
more than the decision itself; a :class:`UniformSource` (a numba StructRef, passed as one pointer)
has the same ``random()`` method, drawing from numba's own generator of this process, seeded by
:func:`seed_uniforms`. It counts its draws.
"""

import numpy as np
from numba import njit, types
from numba.experimental import structref
from numba.extending import overload_method


@structref.register
class UniformSourceType(types.StructRef):
    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


class UniformSource(structref.StructRefProxy):
    """``random()``: a uniform number on [0, 1) (numba's generator of this process)."""

    def __new__(cls, draws: int = 0):
        return structref.StructRefProxy.__new__(cls, draws)

    @property
    def draws(self) -> int:
        return source_draws(self)


structref.define_proxy(UniformSource, UniformSourceType, ["draws"])


@overload_method(UniformSourceType, "random")
def _random(source):
    def draw(source):
        source.draws += 1
        return np.random.random()

    return draw


@njit(cache=True)
def source_draws(source):
    return source.draws


@njit(cache=True)
def seed_uniforms(seed):
    """Seed the generator the compiled code of this process draws from (numba's, not numpy's)."""
    np.random.seed(seed)
