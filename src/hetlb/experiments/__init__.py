"""Experiments: sweeps over scenarios, executors, the result store, paper reproductions."""

from hetlb.experiments.executors import resolve_executor
from hetlb.experiments.spec import SweepSpec
from hetlb.experiments.store import ResultStore
from hetlb.experiments.sweep import SweepResult, comparable, paired_differences, sweep
from hetlb.experiments.reproduce import REPRODUCTIONS, reproduce
from hetlb.experiments.tuning import tune_jsq_df_ds
from hetlb.experiments import weng  # registers the reproductions of paper 000
from hetlb.experiments import zhou  # registers the reproductions of paper 001

__all__ = ["REPRODUCTIONS", "weng", "zhou", "ResultStore", "SweepResult", "SweepSpec", "comparable", "paired_differences", "reproduce",
           "resolve_executor", "sweep", "tune_jsq_df_ds"]
