"""Result types of simulation runs and their serialisation."""

from hetlb.results.run import RunResult, SimulationResult, response_time_quantile

__all__ = ["RunResult", "SimulationResult", "response_time_quantile"]
