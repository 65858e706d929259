"""hetlb simulate: one scenario in either model, its results as text or JSON."""

from __future__ import annotations

import sys

from hetlb.cli.flags import (
    add_model_flags,
    add_output_flags,
    add_policy_flags,
    add_scenario_flags,
    notify_compiling,
    number,
    quiet,
    scenario_from_args,
    verbose,
)
from hetlb.cli.text import format_result, format_slotted_result, result_line


def add_flags(parser) -> None:
    """The flags of ``hetlb simulate``."""
    add_scenario_flags(parser, caches=True)
    add_policy_flags(parser)
    run_group = parser.add_argument_group("run")
    stop = run_group.add_mutually_exclusive_group()
    stop.add_argument(
        "--jobs", type=int, metavar="N", help="measured jobs: admitted arrivals after the warm-up (default 100000)"
    )
    stop.add_argument("--horizon", type=float, metavar="T", help="measure the arrivals up to time T instead")
    run_group.add_argument(
        "--warmup",
        type=number,
        metavar="T",
        help="simulated time discarded first (default 0; slots in the slotted model)",
    )
    run_group.add_argument("--replications", type=int, metavar="R", help="independent replications (default 1)")
    run_group.add_argument("--seed", type=int, metavar="S", help="root seed (default 0)")
    run_group.add_argument(
        "--speed-bins", type=int, metavar="K", help="report eta and xi_2 of 002 in K equal-width speed bins"
    )
    run_group.add_argument(
        "--state-distribution",
        action="store_true",
        help="record the time-distribution of jobs and waiting jobs (CCDFs of X_{+1}, X_{+2} of 002; in --json)",
    )
    add_model_flags(parser)
    add_output_flags(parser, quiet=True, verbose="one line per replication on standard error (mean, events, seconds)")
    output = [group for group in parser._action_groups if group.title == "output"][0]
    output.add_argument("--compact", action="store_true", help="with --json, on one line")
    output.add_argument(
        "--per-server",
        action="store_true",
        help="also list every server (speed, utilisation, mean queue length); with --json, the per-server "
        "arrays whatever the number of servers (by default up to 1000)",
    )


def run(args) -> int:
    """Simulate the scenario of --config and the flags; print its results (text or --json)."""
    scenario = scenario_from_args(args)
    notify_compiling(args, (scenario.model,))
    result = scenario.simulate(progress=not quiet(args))
    if verbose(args):
        for i, run in enumerate(result.runs):
            print(f"hetlb: replication {i + 1} of {result.replications}: {result_line(run)}", file=sys.stderr)
    for warning in getattr(result, "warnings", []):  # not silenced by --quiet: they qualify the results
        print(f"hetlb: warning: {warning}", file=sys.stderr)
    if args.json:
        print(result.to_json(per_server=True if args.per_server else None, indent=None if args.compact else 2))
        return 0
    formatter = format_slotted_result if scenario.model == "slotted" else format_result
    print(formatter(result, scenario.system.speed, per_server=args.per_server))
    return 0
