"""Result types of simulation runs and their serialisation."""

from hetlb.results.run import RunResult, SimulationResult, response_time_quantile
from hetlb.results.slotted import SlottedResult, SlottedRunResult

__all__ = ["RunResult", "SimulationResult", "SlottedResult", "SlottedRunResult", "response_time_quantile"]
