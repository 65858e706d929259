"""Experiments: sweeps over scenarios, executors, the result store, paper reproductions."""

from hetlb.experiments import buke, weng, zhou  # register the reproductions of papers 000, 001 and 002
from hetlb.experiments.executors import resolve_executor
from hetlb.experiments.reproduce import REPRODUCTIONS, reproduce
from hetlb.experiments.spec import SweepSpec
from hetlb.experiments.store import ResultStore
from hetlb.experiments.sweep import SweepResult, comparable, paired_differences, sweep
from hetlb.experiments.tuning import tune_jsq_df_ds

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
