"""The system model: servers and their speeds, job types, compatibility graphs, buffers, job sizes."""

from hetlb.model.graph import CompatibilityGraph
from hetlb.model.job_sizes import JobSizes
from hetlb.model.system import INFINITE_BUFFER, System, parse_speeds

__all__ = ["CompatibilityGraph", "INFINITE_BUFFER", "JobSizes", "System", "parse_speeds"]
