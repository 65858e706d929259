"""Experiments: sweeps over scenarios, executors, the result store."""

from hetlb.experiments.executors import resolve_executor
from hetlb.experiments.spec import SweepSpec
from hetlb.experiments.store import ResultStore
from hetlb.experiments.sweep import SweepResult, comparable, paired_differences, sweep

__all__ = ["ResultStore", "SweepResult", "SweepSpec", "comparable", "paired_differences", "resolve_executor",
           "sweep"]
