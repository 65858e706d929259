"""hetlb graph: a compatibility graph's statistics, the load it carries, a search for Assumption 2."""

from __future__ import annotations

import math

from hetlb import validation
from hetlb.cli.flags import add_output_flags, add_scenario_flags, quiet, say, scenario_from_args
from hetlb.cli.text import format_graph, print_json
from hetlb.errors import InputError


def add_flags(parser) -> None:
    """The flags of ``hetlb graph``."""
    add_scenario_flags(parser, job_sizes=False)
    search = parser.add_argument_group("Assumption 2 of 000 (needs --buffer: b is the buffer size)")
    search.add_argument("--assumption2", action="store_true", help="search for the worst D_I of Assumption 2")
    search.add_argument(
        "--epsilon", type=float, help="epsilon of Assumption 2 (default beta_hat); implies --assumption2"
    )
    search.add_argument("--seed", type=int, help="seed of the search's random restarts (default 0)")
    add_output_flags(parser, quiet=True)


def run(args) -> int:
    """Print the graph's statistics and the load it can carry, and with --assumption2 the search's result."""
    from hetlb.progress import working

    with working("graph ", enabled=not quiet(args)) as bar:
        values = graph_values(args, bar)
    if args.json:
        print_json(values)
    else:
        print(format_graph(values))
    return 0


def notify_graph_compiling(args) -> None:
    """Say so (once the inputs are checked) when the graph kernels (the constructions' and the
    Assumption 2 search's) are not in numba's cache: their first call compiles them, about 10 s."""
    if quiet(args):
        return
    from hetlb.graphs import connectivity, constructions
    from hetlb.progress import needs_compiling

    kernels = [constructions._fill_subsets, connectivity._max_flow, connectivity._grow, connectivity._local_swaps]
    if needs_compiling(*kernels):
        say(args, "compiling the graph kernels: about 10 s, once (later runs load them)")


def graph_values(args, bar) -> dict:
    """What ``hetlb graph`` prints; the Assumption 2 search reports its share done to ``bar``."""
    from hetlb.graphs.connectivity import routable_load, well_connectedness
    from hetlb.graphs.constructions import graph_statistics

    scenario = scenario_from_args(args, continuous_only=True)
    system = scenario.system
    construction = system.graph_construction or {
        "construction": "complete" if system.graph.is_complete() else "explicit",
        "statistics": graph_statistics(system.graph),
    }
    search = args.epsilon is not None or args.assumption2
    if args.seed is not None:
        validation.seed("--seed", args.seed)
        if not search:
            raise InputError(
                "--seed",
                "seeds the Assumption 2 search only: give --assumption2 too (a random graph takes its seed "
                "in --graph, e.g. random:p=0.1,seed=3)",
            )
    if search:
        if system.has_infinite_buffers:
            raise InputError(
                "--buffer", "the Assumption 2 search needs the buffer size b of paper 000: give --buffer B, e.g. 5"
            )
        check_assumption2_search(system, args.epsilon, int(system.buffer.max()))
    notify_graph_compiling(args)
    values = {"construction": construction, "routable": routable_load(system.graph, system.arrival_rate, system.speed)}
    if search:
        values["assumption2"] = well_connectedness(
            system.graph,
            system.arrival_rate,
            system.speed,
            args.epsilon,
            int(system.buffer.max()),
            rng=args.seed or 0,
            report=lambda done, what: bar.update(done, None, detail=f"Assumption 2 search, {what}"),
        )
    return values


ASSUMPTION2_MAX_WORK = 10**10
"""The most steps the Assumption 2 search may take (about a minute): each of its greedy runs
(2 + 8 restarts) adds or removes the servers of a subset one at a time, scanning every candidate
server for each, so its cost grows with subset size x candidates, that is with N^2."""


def check_assumption2_search(system, epsilon, b: int, restarts: int = 8) -> None:
    """Refuse an Assumption 2 search (hetlb.graphs.connectivity.well_connectedness) that would
    take more than ASSUMPTION2_MAX_WORK steps; conditions it decides by trying every subset (at
    most 100,000 of them) or that are vacuous cost little."""
    from hetlb.graphs.constructions import assumption2_parameters

    params = assumption2_parameters(system.arrival_rate, system.speed, epsilon, b)
    server_type, k = params["server_type"], params["K"] - 1
    work = 0
    for size, candidates in zip(params["min_subset_size"], (server_type < k, server_type <= k)):
        n = int(candidates.sum())
        if size > n or math.lgamma(n + 1) - math.lgamma(size + 1) - math.lgamma(n - size + 1) <= math.log(1e5):
            continue
        work += (restarts + 2) * size * n
    if work > ASSUMPTION2_MAX_WORK:
        raise InputError(
            "--assumption2",
            f"the search on {system.n_servers:,} servers would take about {validation.quantity(work)} steps "
            f"(its greedy runs scan every server for each of the subset's), more than "
            f"{validation.quantity(ASSUMPTION2_MAX_WORK)}; use fewer servers",
        )
