"""The result family (hetlb.results.base.Result): every result of a simulation, a bounding system,
a load generator or a testbed, and their serialisation."""

from hetlb.results.base import Result
from hetlb.results.bounding import BoundingResult
from hetlb.results.dispatchers import DispatcherRunResult, DispatchersResult
from hetlb.results.load import InferenceLoadResult, LoadResult
from hetlb.results.run import RunResult, SimulationResult, response_time_quantile
from hetlb.results.slotted import SlottedResult, SlottedRunResult

__all__ = [
    "BoundingResult",
    "DispatcherRunResult",
    "DispatchersResult",
    "InferenceLoadResult",
    "LoadResult",
    "Result",
    "RunResult",
    "SimulationResult",
    "SlottedResult",
    "SlottedRunResult",
    "response_time_quantile",
]
