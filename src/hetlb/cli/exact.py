"""hetlb exact: the exact solution of a small system's Markov chain."""

from __future__ import annotations

from hetlb.cli.flags import add_output_flags, add_policy_flags, add_scenario_flags, quiet, scenario_from_args
from hetlb.cli.text import format_exact, print_json


def add_flags(parser) -> None:
    """The flags of ``hetlb exact``."""
    add_scenario_flags(parser, job_sizes=False)
    add_policy_flags(parser)
    add_output_flags(parser, quiet=True)


def run(args) -> int:
    """Solve the scenario's Markov chain exactly and print its figures (the continuous model, finite buffers)."""
    from hetlb.progress import working
    from hetlb.theory import solve_exact

    scenario = scenario_from_args(args, continuous_only=True)
    system, policy = scenario.system, scenario.policy
    with working("exact: building and solving the chain ", enabled=not quiet(args)):
        solution = solve_exact(system, policy)
    values = {
        "policy": policy.id,
        "n_states": solution.n_states,
        "mean_response_time": solution.mean_response_time,
        "mean_waiting_time": solution.mean_waiting_time,
        "p_wait": solution.p_wait,
        "blocking_probability": solution.blocking_probability,
        "mean_number_in_system": solution.mean_number_in_system,
        "throughput": solution.throughput,
        "utilisation": solution.utilisation.tolist(),
    }
    if args.json:
        print_json(values)
    else:
        print(format_exact(values))
    return 0
