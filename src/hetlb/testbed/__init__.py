"""``hetlb testbed SCENARIO.toml``: a scenario run live and simulated, side by side.

The testbed starts the scenario's backends (``hetlb backend``: the model's servers, one process),
then for each load and policy a dispatcher (``hetlb serve``, M processes with ``dispatchers = M``)
and the open-loop load generator (``hetlb loadgen``'s engine, in this process) for a warm-up and a
measured window; and it simulates the same scenario (same speeds, graph, buffers, job sizes,
policy and load, time unit ``mean_service_ms``) with hetlb.simulate. With ``compare`` it also runs
the same backends behind HAProxy and nginx (hetlb.testbed.peers) at each load. Every child process is
stopped at the end, also when a run fails or the testbed is interrupted.

The scenario file is a simulator scenario whose load is set by the testbed, plus a [testbed] table::

    [system]                      # as in hetlb simulate (docs/reference/scenario.md), without load
    speeds = "4x1,4x0.5,4x0.25,4x0.125"
    concurrency = 8               # optional: the backends serve up to 8 requests at once,
    rate_curve = "saturating:alpha=0.2"  # at this rate curve
    arrivals = "mmpp:ratio=4,on=10,off=30"  # optional: the load generator's bursts

    [testbed]
    mean_service_ms = 20.0        # mean service time at speed 1: the time unit
    loads = [0.5, 0.8]
    policies = ["jsq", "jfsq"]    # ids, or tables such as {id = "pod", d = 2}
    warmup = 2.0                  # seconds sent before each measured window
    duration = 8.0                # measured seconds per run
    dispatchers = 1
    signals = "inflight,piggyback"
    compare = ["haproxy", "nginx"]
    seed = 1
    prediction_runs = 100         # simulated runs of the live run's length

    [run]                         # the simulator's run (hetlb.simulate's keywords)
    jobs = 100000
    replications = 5

Each hetlb run is simulated twice: in the steady state ([run]: the long-run mean and its
confidence interval), and as ``prediction_runs`` runs of the live run's own length (the same
warm-up and measured window from an empty system), whose 2.5% and 97.5% quantiles are the
interval one live run is predicted to fall in. A live mean response time is compared with it after
removing the path's overhead (the client's response time minus the backend's ``X-Sojourn-Ms``,
measured per request): it agrees when it lies within that prediction interval widened by
``AGREEMENT_MARGIN`` on each side. The prediction interval holds what the steady-state interval
leaves out: the live run is one finite run, and near saturation (a backend class close to its
capacity) a run of minutes scatters far more than the long-run mean's interval is wide.
"""

from __future__ import annotations

import sys
from pathlib import Path

from hetlb import validation
from hetlb.scenario import read_toml
from hetlb.testbed.peers import PROGRAMS
from hetlb.testbed.runs import Testbed
from hetlb.testbed.scenario import TestbedScenario

__all__ = ["Testbed", "TestbedScenario", "run_testbed", "run_testbed_mapping"]


def run_testbed(path, out, compare: list[str] | None = None, progress: bool = False, say=None) -> Testbed:
    """Run the testbed scenario file ``path``, writing testbed.csv, testbed.json and testbed.png in
    ``out``; ``compare`` (e.g. ["haproxy", "nginx"]) replaces the file's testbed.compare."""
    return run_testbed_mapping(read_toml(path, "scenario"), out, compare, progress, say)


def run_testbed_mapping(data: dict, out, compare: list[str] | None = None, progress: bool = False, say=None) -> Testbed:
    """:func:`run_testbed` on the tables of a scenario file."""
    if compare is not None:
        for program in compare:
            validation.choice("--compare", program, PROGRAMS)
        data = {**data, "testbed": {**validation.table("testbed", data.get("testbed", {})), "compare": compare}}
    scenario = TestbedScenario.from_mapping(data)
    testbed = Testbed(scenario, Path(out), say=say or (lambda line: print(line, file=sys.stderr)), progress=progress)
    testbed.run()
    return testbed
