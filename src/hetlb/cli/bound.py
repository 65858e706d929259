"""hetlb bound: the lower bound C*/lambda of Proposition 1 of paper 000; with prefix caches, the highest
arrival rate any policy can carry (every reusable prefix a hit) beside the rate with no hit."""

from __future__ import annotations

from hetlb.cli.flags import add_output_flags, add_scenario_flags, scenario_from_args
from hetlb.cli.text import format_bound, print_json


def add_flags(parser) -> None:
    """The flags of ``hetlb bound``."""
    add_scenario_flags(parser, buffer=False, job_sizes=False, graph=False, caches=True)
    add_output_flags(parser)


def run(args) -> int:
    """Print the lower bound C*/lambda of Proposition 1 of 000 for the scenario's speeds and arrival
    rate, on multi-slot servers its extension (hetlb.theory.bounds.slot_lower_bound)."""
    from hetlb.theory import cache_capacity, speed_lower_bound

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
    if system.caches is not None:
        capacity = cache_capacity(system)
        values["caches"] = {
            "least_work": capacity.least_work,
            "most_work": capacity.most_work,
            "rate_all_hits": capacity.rate_all_hits,
            "rate_no_hits": capacity.rate_no_hits,
            "load_all_hits": capacity.load_all_hits,
            "load_no_hits": capacity.load_no_hits,
        }
    if args.json:
        print_json(values)
    else:
        print(format_bound(values))
    return 0
