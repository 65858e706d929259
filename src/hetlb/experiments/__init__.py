"""Experiments: sweeps over scenarios, executors, the result store, paper reproductions.

Importing this package is cheap (no pandas, scipy.stats or matplotlib): the paper modules
buke, weng and zhou, which register their reproductions, are imported the first time
:data:`REPRODUCTIONS` is read or one of them is named, and tune_jsq_df_ds when first asked for.
"""

import importlib

from hetlb.experiments.executors import resolve_executor
from hetlb.experiments.reproduce import REPRODUCTIONS, reproduce
from hetlb.experiments.spec import SweepSpec
from hetlb.experiments.store import ResultStore
from hetlb.experiments.sweep import SweepResult, comparable, paired_differences, sweep

__all__ = [
    "REPRODUCTIONS",
    "ResultStore",
    "SweepResult",
    "SweepSpec",
    "buke",
    "comparable",
    "paired_differences",
    "reproduce",
    "weng",
    "zhou",
    "resolve_executor",
    "sweep",
    "tune_jsq_df_ds",
]


def __dir__() -> list:
    """Every public name, the ones loaded on first use too (for tab completion)."""
    return sorted(set(globals()) | set(__all__))


def __getattr__(name: str):
    if name in ("buke", "weng", "zhou"):
        return importlib.import_module(f"hetlb.experiments.{name}")
    if name == "tune_jsq_df_ds":
        from hetlb.experiments.tuning import tune_jsq_df_ds

        return tune_jsq_df_ds
    raise AttributeError(f"module 'hetlb.experiments' has no attribute {name!r}")
