"""hetlb meanfield: the many-server limit on the complete graph, beside a simulation on request."""

from __future__ import annotations

import sys

from hetlb import validation
from hetlb.cli.flags import (
    add_output_flags,
    add_policy_flags,
    add_scenario_flags,
    notify_compiling,
    policy_from_args,
    quiet,
    scenario_from_args,
)
from hetlb.cli.text import format_meanfield, print_json


def add_flags(parser) -> None:
    """The flags of ``hetlb meanfield``."""
    add_scenario_flags(parser, job_sizes=False, graph=False)
    add_policy_flags(parser)
    compare = parser.add_argument_group("comparison with the simulator")
    compare.add_argument("--compare", type=int, metavar="N", help="also simulate the fleet at N servers")
    compare.add_argument("--jobs", type=int, default=200_000, help="measured jobs per replication (default 200000)")
    compare.add_argument("--replications", type=int, default=5, help="replications (default 5)")
    compare.add_argument("--warmup", type=float, help="time discarded first (default: the limit ODE's relaxation time)")
    compare.add_argument("--seed", type=int, default=0, help="root seed (default 0)")
    add_output_flags(parser, quiet=True)


def run(args) -> int:
    """Print the mean-field limit of the policy on the scenario's server classes (speed, concurrency,
    rate curve), beside a simulation with --compare."""
    from hetlb.theory.meanfield import mean_field

    policy, params = meanfield_policy(args)
    scenario = scenario_from_args(args, continuous_only=True, with_policy=False)  # the policy may be theory-only
    limit = mean_field(scenario.system, policy, **params)
    values = limit.to_dict()
    if args.compare is not None:
        from hetlb.experiments.meanfield import compare_with_simulation

        notify_compiling(args)
        values = compare_with_simulation(
            limit,
            validation.count("--compare", args.compare),
            jobs=validation.count("--jobs", args.jobs),
            replications=validation.count("--replications", args.replications, low=2),
            warmup=args.warmup,
            seed=validation.seed("--seed", args.seed),
            progress=not quiet(args),
        )
        for warning in values["simulation"]["warnings"]:
            print(f"hetlb: warning: simulation at N = {args.compare}: {warning}", file=sys.stderr)
    if args.json:
        print_json(values)
    else:
        print(format_meanfield(values))
    return 0


def meanfield_policy(args) -> tuple[str, dict]:
    """The policy id (default jsq) and parameters of ``hetlb meanfield``: the [policy] table of
    --config, with --policy, --d and --set over it (its policies include jiq-df-ds, which only the
    theory has)."""
    from hetlb.scenario import read_toml

    data = read_toml(args.config) if args.config is not None else {}
    params = policy_from_args(args, data)
    params.pop("plugins", None)  # loaded with --plugin's by scenario_from_args
    policy = validation.text("policy", params.pop("id", "jsq"))
    return policy, params
