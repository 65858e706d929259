"""Experiments: sweeps over scenarios, executors, the result store, paper reproductions."""

from hetlb.experiments.executors import resolve_executor
from hetlb.experiments.spec import SweepSpec
from hetlb.experiments.store import ResultStore
from hetlb.experiments.sweep import SweepResult, comparable, paired_differences, sweep
from hetlb.experiments.reproduce import REPRODUCTIONS, reproduce  # noqa: E402
from hetlb.experiments import weng  # noqa: E402,F401  (registers the reproductions of paper 000)
from hetlb.experiments.tuning import tune_jsq_df_ds  # noqa: E402

__all__ = ["REPRODUCTIONS", "ResultStore", "SweepResult", "SweepSpec", "comparable", "paired_differences", "reproduce",
           "resolve_executor", "sweep", "tune_jsq_df_ds"]
