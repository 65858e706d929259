"""hetlb place: the sparsest compatibility graph that keeps the mean response time near C*/lambda."""

from __future__ import annotations

import numpy as np

from hetlb import validation
from hetlb.cli.flags import add_output_flags, add_scenario_flags, notify_compiling, quiet, scenario_from_args
from hetlb.cli.text import format_placement, print_json
from hetlb.errors import InputError


def add_flags(parser) -> None:
    """The flags of ``hetlb place``."""
    add_scenario_flags(parser, job_sizes=False, graph=False)
    group = parser.add_argument_group("placement")
    ports = group.add_mutually_exclusive_group()
    ports.add_argument("--ports", type=int, metavar="L", help="job types, sharing the arrival rate equally")
    ports.add_argument(
        "--ports-exponent", type=float, metavar="A", help="L = N^A job types (default 1.25, as in Fig. 3 of 000)"
    )
    group.add_argument("--policy", choices=["jfsq", "jfiq"], help="the dispatching policy (default jfsq)")
    group.add_argument(
        "--tolerance", type=float, default=5.0, metavar="PCT", help="percent above C*/lambda (default 5)"
    )
    group.add_argument("--families", help="comma list of fig3, typed, theorem3, theorem2 (default fig3,typed,theorem3)")
    group.add_argument("--jobs", type=int, default=100_000, help="measured jobs per replication (default 100000)")
    group.add_argument("--replications", type=int, default=3, help="replications per candidate (default 3)")
    group.add_argument("--warmup", type=float, help="time discarded first (default 20 C*/lambda)")
    group.add_argument("--seed", type=int, default=0, help="seed of the common random numbers (default 0)")
    group.add_argument("--graph-seed", type=int, default=0, help="seed of every graph (default 0)")
    group.add_argument("--time-budget", type=float, default=900.0, metavar="S", help="seconds (default 900)")
    group.add_argument(
        "--max-edges",
        type=int,
        help="edges of the largest candidate graph built; denser ones are skipped (default 500000000)",
    )
    group.add_argument(
        "--store", default="hetlb-results.sqlite", help="result store, for resuming (default %(default)s)"
    )
    group.add_argument("--output", default="placement.json", help="the graph, as JSON (default %(default)s)")
    add_output_flags(parser, quiet=True)


def run(args) -> int:
    """Search the sparsest graph within --tolerance of C*/lambda, write it to --output and print the search."""
    from hetlb.experiments.place import FAMILIES, place, write_graph
    from hetlb.experiments.store import ResultStore
    from hetlb.graphs.constructions import DEFAULT_MAX_EDGES, graph_ports

    scenario = scenario_from_args(args, continuous_only=True)
    system = scenario.system
    if args.ports is not None and args.ports_exponent is not None:
        raise InputError("--ports", "give --ports or --ports-exponent, not both")
    spec = {"ports": args.ports} if args.ports is not None else {"ports_exponent": args.ports_exponent or 1.25}
    n_ports = graph_ports({"kind": "complete", **spec}, system.n_servers) or 1
    rates = np.full(n_ports, system.total_arrival_rate / n_ports)
    buffers = np.unique(system.buffer)
    if buffers.size > 1:
        raise InputError("buffer", "hetlb place takes one buffer size for all servers")
    buffer = None if system.has_infinite_buffers else int(buffers[0])
    families = tuple(args.families.split(",")) if args.families else ("fig3", "typed", "theorem3")
    for name in families:
        validation.choice("--families", name, tuple(FAMILIES))
    tolerance = validation.number("--tolerance", args.tolerance, 0.0, strict=True, high=1000.0)
    output = validation.output_file("--output", args.output, suffixes=("json",))
    notify_compiling(args)
    with ResultStore(args.store) as store:
        result = place(
            system.speed,
            rates,
            buffer=buffer,
            policy=args.policy or "jfsq",
            tolerance=tolerance / 100.0,
            families=families,
            jobs=validation.count("--jobs", args.jobs),
            replications=validation.count("--replications", args.replications, low=2),
            warmup=args.warmup,
            seed=validation.seed("--seed", args.seed),
            graph_seed=validation.seed("--graph-seed", args.graph_seed),
            time_budget=validation.number("--time-budget", args.time_budget, 0.0, strict=True),
            store=store,
            progress=not quiet(args),
            max_edges=DEFAULT_MAX_EDGES if args.max_edges is None else validation.count("--max-edges", args.max_edges),
        )
    values = result.to_dict()
    if result.graph is not None and result.verification is not None and result.verification["verdict"] == "pass":
        values["graph_file"] = str(write_graph(result.graph, output))
    if args.json:
        print_json(values)
    else:
        print(format_placement(values))
    return 0
