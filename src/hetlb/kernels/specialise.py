"""Copies of a kernel compiled with a researcher's own selection key (hetlb.register_policy).

The cached kernels branch on a policy's code and rank servers by
:func:`hetlb.policies.rules.selection_key`, whose branches are the built-in policies' keys. A
policy registered from outside hetlb brings its own key, an @njit function
``key(queue_len, speed_class, n_classes, speed, idle_since)`` (registry.KEY_SIGNATURE). Passing
that function into the cached kernel would make numba compile the kernel again for every process
and every policy (docs/background/design.md), so the built-in kernels stay as they are and
:func:`with_key` builds a copy instead: the kernel's own Python function, compiled again with a
copy of the ``rules`` module in which ``selection_key`` calls the user's key and
``falls_back_to_uniform`` never falls back. Nothing else of the kernel changes, so the copy runs
the same event loop, the same trees and buckets, on the user's keys. The copy is compiled without
numba's cache (its code is the cached kernel's, so a cache entry of the copy would be taken for
the kernel's), once per process, and kept for the rest of the process.
"""

from __future__ import annotations

import types
from collections.abc import Callable

from hetlb import jit
from hetlb.policies import rules

_copies: dict[tuple[int, int], Callable] = {}
_rules: dict[int, types.ModuleType] = {}


def compiled_key(key: Callable) -> Callable:
    """``key`` as a numba function (an @njit function is kept as it is)."""
    if jit.DISABLED or hasattr(key, "py_func"):
        return key
    import numba

    return numba.njit(key)


def _user_selection_key(policy_code, queue_len, speed_class, n_classes, speed, idle_since):
    """rules.selection_key for a registered key: ``user_key`` of the server, whatever the code."""
    return float(user_key(queue_len, speed_class, n_classes, speed, idle_since))  # noqa: F821 (given by _compile)


def _never_uniform(policy_code, least_key, n_classes):
    """rules.falls_back_to_uniform for a registered key: a least-key server always gets the job."""
    return False


def rules_with_key(key: Callable) -> types.ModuleType:
    """A copy of hetlb.policies.rules whose ``selection_key(policy_code, ...)`` is ``key(...)``,
    whose ``selection_keys`` computes ``key`` for every server, and whose
    ``falls_back_to_uniform`` is False; one per key for the life of the process."""
    if id(key) not in _rules:
        jit.compile_everything()
        copy = types.ModuleType(f"{rules.__name__}_with_{getattr(key, '__name__', 'key')}")
        vars(copy).update({name: value for name, value in vars(rules).items() if not name.startswith("__")})
        names = vars(copy)
        names["selection_key"] = _compile(_user_selection_key, {"user_key": compiled_key(key)}, error_model="numpy")
        names["falls_back_to_uniform"] = _compile(_never_uniform, {})
        names["selection_keys"] = _compile(_plain(rules.selection_keys), names)
        _rules[id(key)] = copy
    return _rules[id(key)]


def _plain(function: Callable) -> Callable:
    """The Python function of a compiled one."""
    return getattr(function, "py_func", function)


def _compile(function: Callable, names: dict, **options) -> Callable:
    """``function`` with its global names looked up in ``names`` first, then in its own module,
    compiled by numba without its cache (it calls functions the cache does not know)."""
    copy = types.FunctionType(function.__code__, {**function.__globals__, **names}, function.__name__)
    copy.__doc__ = function.__doc__
    if jit.DISABLED:
        return copy
    import numba

    return numba.njit(**options)(copy)


def with_key(kernel: Callable, key: Callable) -> Callable:
    """``kernel`` (a compiled function that reaches the keys through the module ``rules``, like
    hetlb.kernels.continuous.advance, or hetlb.policies.rules.selection_keys itself) compiled
    again with ``key`` as its selection key; one copy per kernel and key for the life of the
    process."""
    memo = (id(_plain(kernel)), id(key))
    if memo not in _copies:
        user_rules = rules_with_key(key)
        if _plain(kernel) is _plain(rules.selection_keys):
            _copies[memo] = user_rules.selection_keys
        else:
            _copies[memo] = _compile(_plain(kernel), {"rules": user_rules})
    return _copies[memo]
