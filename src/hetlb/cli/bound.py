"""hetlb bound: the lower bound C*/lambda of Proposition 1 of paper 000."""

from __future__ import annotations

from hetlb.cli.flags import add_output_flags, add_scenario_flags, scenario_from_args
from hetlb.cli.text import format_bound, print_json


def add_flags(parser) -> None:
    """The flags of ``hetlb bound``."""
    add_scenario_flags(parser, buffer=False, job_sizes=False, graph=False)
    add_output_flags(parser)


def run(args) -> int:
    """Print the lower bound C*/lambda of Proposition 1 of 000 for the scenario's speeds and arrival
    rate, on multi-slot servers its extension (hetlb.theory.bounds.slot_lower_bound)."""
    from hetlb.theory import speed_lower_bound

    scenario = scenario_from_args(args, continuous_only=True)
    system = scenario.system
    bound = speed_lower_bound(system)
    values = {
        "load": bound.load,
        "K": bound.K,
        "c_star": bound.c_star,
        "c_star_by_type": bound.c_star_by_type.tolist(),
        "type_speeds": bound.type_speeds.tolist(),
        "lower_bound": bound.lower_bound,
        **({"multi_slot": True} if system.has_multi_slot_servers else {}),
    }
    if args.json:
        print_json(values)
    else:
        print(format_bound(values))
    return 0
