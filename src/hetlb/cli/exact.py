"""hetlb exact: the exact solution of a small system's Markov chain; with prefix caches, the chain over
queues and cache orders (hetlb.theory.solve_exact_cache)."""

from __future__ import annotations

from hetlb.cli.flags import add_output_flags, add_policy_flags, add_scenario_flags, quiet, scenario_from_args
from hetlb.cli.text import format_exact, print_json


def add_flags(parser) -> None:
    """The flags of ``hetlb exact``."""
    add_scenario_flags(parser, job_sizes=False, caches=True)
    add_policy_flags(parser)
    add_output_flags(parser, quiet=True)


def run(args) -> int:
    """Solve the scenario's Markov chain exactly and print its figures (the continuous model, finite buffers)."""
    from hetlb.progress import working
    from hetlb.theory import solve_exact

    scenario = scenario_from_args(args, continuous_only=True)
    system, policy = scenario.system, scenario.policy
    if system.caches is not None:
        with working("exact: building and solving the chain with caches ", enabled=not quiet(args)):
            values = exact_with_caches(system, policy)
    else:
        with working("exact: building and solving the chain ", enabled=not quiet(args)):
            values = exact_values(solve_exact(system, policy), policy)
    if args.json:
        print_json(values)
    else:
        print(format_exact(values))
    return 0


def exact_values(solution, policy) -> dict:
    """The figures of an exact solution without caches."""
    return {
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


def exact_with_caches(system, policy) -> dict:
    """The exact chain of a system with prefix caches: one job type, concurrency 1, Poisson
    arrivals, shared prompts without unique blocks, exponential decode sizes and an exponential
    prefill law (or W = 0); anything else is refused in one line naming its field."""
    from hetlb.errors import InputError
    from hetlb.theory import solve_exact_cache

    system.check_supported("the exact chain with caches", job_sizes=("exponential",), caches=True)
    caches, prompts = system.caches, system.caches.prompts
    if system.n_types != 1 or not system.has_single_slots:
        field = "graph" if system.n_types != 1 else "concurrency"
        raise InputError(field, "the exact chain with caches takes one job type and servers of concurrency 1")
    if prompts.kind != "shared" or prompts.unique != 0:
        raise InputError("prompts", "the exact chain with caches takes shared:count=K,blocks=B,zipf=S,unique=0")
    if caches.prefill_work > 0 and caches.prefill_law != "exponential":
        raise InputError("prefill_law", "the exact chain needs an exponential prefill law (or prefill work 0)")
    solution = solve_exact_cache(
        system.speed,
        system.total_arrival_rate,
        system.buffer,
        policy.id,
        cache_blocks=caches.capacity,
        popularity=prompts.popularity(),
        blocks=prompts.blocks,
        prefill_work=caches.prefill_work,
        compatible=system.graph.servers_of(0).tolist(),
        **policy.params,
    )
    return {
        "policy": policy.id,
        "n_states": solution.n_states,
        "n_recurrent_states": solution.n_recurrent_states,
        "mean_response_time": solution.mean_response_time,
        "mean_ttft": solution.mean_ttft,
        "blocking_probability": solution.blocking_probability,
        "mean_number_in_system": solution.mean_number_in_system,
        "throughput": solution.throughput,
        "cache_hit_ratio": solution.block_hit_ratio,
        "cache_hit_ratio_by_server": solution.block_hit_ratio_by_server.tolist(),
        "prefill_saved": solution.prefill_work_saved,
        "utilisation": solution.utilisation.tolist(),
    }
