"""The system models: servers and their speeds, job types, compatibility graphs, buffers, job sizes;
the slotted model of paper 001 with its dispatchers."""

from hetlb.constants import INFINITE_BUFFER
from hetlb.graphs.graph import CompatibilityGraph
from hetlb.model.job_sizes import JobSizes
from hetlb.model.slotted import CountDistribution, SlottedSystem
from hetlb.model.system import System, parse_speeds

__all__ = [
    "CompatibilityGraph",
    "CountDistribution",
    "INFINITE_BUFFER",
    "JobSizes",
    "SlottedSystem",
    "System",
    "parse_speeds",
]
