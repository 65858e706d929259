"""The command line: ``hetlb simulate | exact | bound | graph | tune | diffusion | policies | sweep | store |
plot | reproduce | demo``.

Every user error ends in one line on standard error naming the field and the rule, and exit
status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

import numpy as np

from hetlb.errors import InputError

EXIT_INPUT_ERROR = 2


class ArgumentParser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line."""

    def error(self, message):
        self.exit(EXIT_INPUT_ERROR, f"{self.prog}: error: {message}\n")


def add_system_flags(parser) -> None:
    group = parser.add_argument_group("system (flags override --config)")
    group.add_argument("--config", metavar="FILE", help="scenario TOML file ([system], [policy], [run])")
    group.add_argument("--speeds", help='server speeds: "2,1,0.5" or "50x1.0,50x0.5" (COUNTxSPEED)')
    group.add_argument("--n-servers", type=int, metavar="N", help="number of servers, with --speed-distribution")
    group.add_argument(
        "--speed-distribution",
        metavar="KIND[:KEY=VALUE,...]",
        help="i.i.d. speeds, e.g. uniform:low=0.7,high=1.3,seed=1 (kinds: uniform, discrete, lognormal, empirical)",
    )
    rate = group.add_mutually_exclusive_group()
    rate.add_argument("--arrival-rate", type=float, metavar="X", help="total Poisson arrival rate lambda")
    rate.add_argument("--load", type=float, metavar="RHO", help="arrival rate as a fraction of sum(speeds)")
    rate.add_argument(
        "--excess-capacity",
        type=float,
        metavar="C",
        help="arrival rate sum(speeds) - C sqrt(N) (the Halfin-Whitt regime of paper 002)",
    )
    group.add_argument(
        "--buffer", type=int, metavar="B", help="jobs a server holds, the one in service included (omit for infinite)"
    )
    group.add_argument(
        "--job-sizes",
        choices=["exponential", "hyperexponential", "deterministic"],
        help="job-size distribution, mean 1 (default exponential)",
    )
    group.add_argument("--scv", type=float, help="squared coefficient of variation of hyperexponential sizes")
    group.add_argument("--policy", metavar="ID", help="policy id (see `hetlb policies`); default jsq")
    group.add_argument("--d", type=int, metavar="D", help="servers sampled by pod")
    group.add_argument(
        "--param",
        action="append",
        metavar="NAME=VALUE",
        help="a policy parameter, e.g. --param p_fast=0.3 or --param p_hat=0.01 (repeatable)",
    )
    group.add_argument(
        "--graph",
        metavar="KIND[:KEY=VALUE,...]",
        help="a graph construction, e.g. fig3:ports_exponent=1.2,seed=1 or random:p=0.1,ports=50 "
        "(kinds: complete, random, fig3, theorem2, theorem3)",
    )


def scenario_from_args(args, continuous_only: bool = False):
    """Merge --config and the flags into a Scenario (either model, unless ``continuous_only``)."""
    from hetlb.scenario import Scenario, read_toml

    data = read_toml(args.config) if args.config else {}
    system = dict(data.get("system", {}))
    flags = {
        "speeds": args.speeds,
        "buffer": args.buffer,
        "job_sizes": args.job_sizes,
        "scv": args.scv,
        "n_servers": args.n_servers,
        "model": getattr(args, "model", None),
        "dispatchers": getattr(args, "dispatchers", None),
        "arrivals": getattr(args, "arrivals", None),
        "service": getattr(args, "service", None),
        "routing": getattr(args, "routing", None),
        "ties": getattr(args, "ties", None),
    }
    system.update({key: value for key, value in flags.items() if value is not None})
    rates = {"load": args.load, "arrival_rate": args.arrival_rate, "excess_capacity": args.excess_capacity}
    if any(value is not None for value in rates.values()):
        for key, value in rates.items():
            system.pop(key, None)
            if value is not None:
                system[key] = value
    if args.speed_distribution is not None:
        system["speed_distribution"] = parse_construction(args.speed_distribution)
    if args.graph is not None:
        system["graph"] = parse_construction(args.graph)
    policy = dict(data.get("policy", {}))
    if args.policy is not None:
        policy = {"id": args.policy}
    if args.d is not None:
        policy["d"] = args.d
    policy.update(parse_assignment(text, "--param") for text in args.param or [])
    policy.update({name: getattr(args, name) for name in LED_FLAGS if getattr(args, name, None) is not None})
    run = dict(data.get("run", {}))
    for key in (
        "jobs",
        "horizon",
        "warmup",
        "replications",
        "seed",
        "slots",
        "preference",
        "speed_bins",
        "state_distribution",
    ):
        value = getattr(args, key, None)
        if value is not None and value is not False:
            run[key] = value
    if "jobs" in run and "horizon" in run:
        run.pop("horizon" if args.jobs is not None else "jobs")
    scenario = Scenario.from_mapping({**data, "system": system, "policy": policy, "run": run})
    if continuous_only and scenario.model != "continuous":
        raise InputError("system.model", f"`hetlb {args.command}` applies to the continuous model only")
    return scenario


LED_FLAGS = (
    "update",
    "p_hat",
    "push_d",
    "push_trigger",
    "pull_trigger",
    "increment_on_dispatch",
    "average",
    "inclusive",
    "empty_set",
)
"""Flags of the slotted model that set parameters of the LED policies."""


def number(text: str) -> int | float:
    """A number from the command line, kept an integer when written as one (slots count whole)."""
    try:
        return int(text)
    except ValueError:
        return float(text)


def parse_construction(text: str) -> dict:
    """KIND[:KEY=VALUE,...] as a table {kind = KIND, KEY = VALUE, ...}."""
    kind, _, settings = text.partition(":")
    items = re.split(r",(?=\s*[A-Za-z_]\w*\s*=)", settings)  # commas inside [..] belong to a value
    return {"kind": kind, **dict(parse_assignment(item, kind) for item in items if item)}


def command_simulate(args) -> int:
    scenario = scenario_from_args(args)
    result = scenario.simulate(progress=sys.stderr.isatty())
    if args.json:
        print(result.to_json(indent=None if args.compact else 2))
    else:
        print(format_slotted_result(result) if scenario.model == "slotted" else format_result(result))
    return 0


def add_slotted_flags(parser) -> None:
    group = parser.add_argument_group(
        "slotted model of paper 001 (with --model slotted; --speeds are mean "
        "services per slot, --arrival-rate is jobs per slot, --warmup counts slots)"
    )
    group.add_argument(
        "--model",
        choices=["continuous", "slotted"],
        help="continuous time (default) or the slotted model (hetlb.simulate_slotted)",
    )
    group.add_argument("--dispatchers", type=int, metavar="M", help="number of dispatchers (default 1)")
    group.add_argument("--arrivals", help="per-slot arrivals: poisson (default), bernoulli, binomial:K")
    group.add_argument("--service", help="per-slot services: poisson (default), bernoulli, binomial:K")
    group.add_argument("--routing", help="slot (one server per dispatcher and slot, default) or job")
    group.add_argument(
        "--ties",
        help="independent (a tie-break draw per decision, default) or shared (one per "
        "slot: dispatchers seeing the same least values agree, as a herd)",
    )
    group.add_argument("--slots", type=int, help="measured slots after the warm-up (default 100000)")
    group.add_argument("--preference", action="store_true", help="measure the dispatching preference Delta")
    for flag, kind in (
        ("--update", str),
        ("--p-hat", float),
        ("--push-d", int),
        ("--push-trigger", str),
        ("--pull-trigger", str),
        ("--average", str),
        ("--empty-set", str),
    ):
        group.add_argument(flag, type=kind, help="LED parameter (see `hetlb policies`)")
    for flag in ("--increment-on-dispatch", "--inclusive"):
        group.add_argument(flag, action="store_true", default=None, help="LED parameter (see `hetlb policies`)")


def format_slotted_result(result) -> str:
    """A readable table of a SlottedResult."""
    meta, summary = result.metadata, result.summary()
    lines = [
        f"policy {meta['policy']}  ({meta['policy_definition']})",
        f"decides on: {meta['information']}",
        f"system {meta['system']}",
        f"{result.replications} replication(s), seed {meta['seed']}",
        "",
    ]
    for label, key in (
        ("mean delay (slots)", "mean_delay"),
        ("mean number in system", "mean_number_in_system"),
        ("mean estimate error", "mean_estimate_error"),
        ("messages per arrival", "messages_per_arrival"),
        ("messages per decision", "messages_per_decision"),
    ):
        ci = summary.get(key + "_ci")
        shown = f"  95% CI [{ci[0]:.5g}, {ci[1]:.5g}]" if ci is not None and np.all(np.isfinite(ci)) else ""
        lines.append(f"  {label:<26}{summary[key]:>12.6g}{shown}")
    lines.append(f"  messages                  {summary['messages']}")
    if result.preference is not None:
        lines.append(
            f"  preference: tilted {summary['preference_tilted']}, delta-tilted "
            f"{summary['preference_delta_tilted']}, delta {summary['preference_delta_min']:.4g}"
        )
    lines.append(f"\n  {summary['slots_per_second']:,.0f} slots/s, {summary['events_per_second'] / 1e6:.2f}M events/s")
    return "\n".join(lines)


def format_result(result) -> str:
    """A readable table of a SimulationResult."""
    meta = result.metadata
    system = meta["system"]
    summary = result.summary()
    classes = ", ".join(f"{c['count']}x{c['speed']:g}" for c in system["speed_classes"])
    buffer = "infinite" if system["buffer"] is None else system["buffer"]
    stopping = meta["stopping"]
    stop = f"{stopping['jobs']:,} jobs" if stopping["jobs"] else f"horizon {stopping['horizon']:g}"
    lines = [
        f"policy {meta['policy']['id']}  ({meta['policy_definition']})",
        f"servers {system['n_servers']} ({classes}), job types {system['n_types']}, load {system['load']:.4f}, "
        f"buffer {buffer}, sizes {system['job_sizes']['kind']}",
        f"{result.replications} replication(s), {stop} after warm-up {stopping['warmup']:g}, seed {meta['seed']}",
        "",
    ]

    def row(label, key):
        value = summary[key]
        ci = summary.get(key + "_ci")
        interval = f"  95% CI [{ci[0]:.5g}, {ci[1]:.5g}]" if ci is not None and np.all(np.isfinite(ci)) else ""
        lines.append(f"  {label:<26}{value:>12.6g}{interval}")

    row("mean response time", "mean_response_time")
    row("mean waiting time", "mean_waiting_time")
    row("P(wait)", "p_wait")
    row("blocking probability", "blocking_probability")
    row("mean number in system", "mean_number_in_system")
    for p in ("p50", "p95", "p99"):
        row(f"response time {p}", f"response_time_{p}")
    lines += ["", "  per speed class:   speed  servers  utilisation   s_1      s_2      s_3      C_m"]
    for c in summary["occupancy_by_class"]:
        s = (c["s_m"] + [float("nan")] * 3)[:3]
        lines.append(
            f"  {'':<14}{c['speed']:>9.4g}{c['servers']:>9d}{c['utilisation']:>12.4f}"
            f"{s[0]:>9.4f}{s[1]:>9.4f}{s[2]:>9.4f}{c['C_m']:>9.4f}"
        )
    scaled = summary["halfin_whitt"]
    lines += ["", "  scaled as in 002:  " + "  ".join(f"{name} {value:.4g}" for name, value in scaled.items())]
    lines += [
        "",
        f"  events {summary['events']:,} in {summary['wall_seconds']:.2f} s "
        f"({summary['events_per_second'] / 1e6:.2f}M events/s); "
        f"Little's law gap {100 * summary['littles_law_gap']:.3f}%",
    ]
    return "\n".join(lines)


def command_exact(args) -> int:
    from hetlb.theory import solve_exact

    scenario = scenario_from_args(args, continuous_only=True)
    system, policy = scenario.system, scenario.policy
    if system.job_sizes.kind != "exponential":
        raise InputError("job_sizes", "the exact solver needs exponential job sizes")
    if not np.all(system.buffer < np.iinfo(np.int64).max):
        raise InputError("buffer", "the exact solver needs a finite buffer on every server")
    solution = solve_exact(
        system.speed, system.arrival_rate, system.graph.to_lists(), system.buffer, policy=policy.id, **policy.params
    )
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
        print(json.dumps(values, indent=2))
    else:
        for key, value in values.items():
            shown = (
                ", ".join(f"{v:.6g}" for v in value)
                if isinstance(value, list)
                else (f"{value:.8g}" if isinstance(value, float) else value)
            )
            print(f"{key:<24}{shown}")
    return 0


def command_bound(args) -> int:
    from hetlb.theory import speed_lower_bound

    scenario = scenario_from_args(args, continuous_only=True)
    system = scenario.system
    bound = speed_lower_bound(system.speed, system.total_arrival_rate)
    values = {
        "load": bound.load,
        "K": bound.K,
        "c_star": bound.c_star,
        "c_star_by_type": bound.c_star_by_type.tolist(),
        "type_speeds": bound.type_speeds.tolist(),
        "lower_bound": bound.lower_bound,
    }
    if args.json:
        print(json.dumps(values, indent=2))
    else:
        print(
            f"load {bound.load:.6g}: K = {bound.K}, C* = {bound.c_star:.6g}, "
            f"mean response time >= C*/lambda = {bound.lower_bound:.6g}  (Proposition 1 of paper 000)"
        )
    return 0


def command_policies(args) -> int:
    from hetlb.policies import POLICIES

    for spec in POLICIES.values():
        params = ", ".join(f"{name}={default} ({text})" for name, (default, text, _) in spec.parameters.items())
        print(f"{spec.id:<16}{spec.definition}")
        print(
            f"{'':<16}source: {spec.reference}; models: {', '.join(spec.models)}"
            + (f"; parameters: {params}" if params else "")
        )
    return 0


def command_demo(args) -> int:
    from hetlb.demo import run_demo

    run_demo(Path(args.out), jobs=args.jobs, replications=args.replications)
    return 0


def command_sweep(args) -> int:
    from hetlb.experiments import sweep

    result = sweep(
        args.spec,
        executor=args.executor,
        store=args.store,
        out=args.out,
        force=args.force,
        progress=sys.stderr.isatty(),
    )
    summary = result.summary
    axes = [c for c in summary.columns if "." in c]
    shown = summary[
        axes
        + [
            "replications",
            "mean_response_time",
            "mean_response_time_ci_low",
            "mean_response_time_ci_high",
            "blocking_probability",
            "speed_lower_bound",
        ]
    ]
    print(shown.to_string(index=False, float_format=lambda v: f"{v:.5g}"))
    print(
        f"\n{result.computed} runs computed, {result.reused} reused from {args.store}, "
        f"{result.wall_seconds:.1f} s; tables in {args.out}"
    )
    return 0


def command_store(args) -> int:
    from hetlb.experiments import ResultStore

    if not Path(args.store).exists():
        raise InputError("store", f"no result store at {args.store}")
    with ResultStore(args.store) as store:
        if args.name is None:
            for entry in store.sweeps():
                print(f"{entry['name']:<32}{entry['finished']:>8} of {entry['runs']} runs finished")
            return 0
        rows = store.load(args.name)
    if not rows:
        raise InputError("name", f"no finished runs of a sweep named {args.name!r} in {args.store}")
    import pandas as pd

    print(pd.DataFrame.from_records(rows).to_csv(index=False), end="")
    return 0


def command_plot(args) -> int:
    import pandas as pd

    from hetlb.plots import plot_metric

    path = Path(args.sweep_dir) / "summary.parquet"
    if not path.exists():
        raise InputError("sweep_dir", f"no summary.parquet in {args.sweep_dir} (run hetlb sweep --out DIR first)")
    table = pd.read_parquet(path)
    for column in (args.x, args.metric) + ((args.by,) if args.by else ()):
        if column not in table.columns:
            raise InputError(column, f"is not a column of the sweep; columns: {', '.join(table.columns)}")
    groups = table.groupby(args.by, sort=False) if args.by else [(args.metric, table)]
    series = {}
    for label, rows in groups:
        rows = rows.sort_values(args.x)
        series[str(label)] = (
            rows[args.metric].to_numpy(),
            rows[args.metric + "_ci_low"].to_numpy(),
            rows[args.metric + "_ci_high"].to_numpy(),
        )
    bound = None
    if args.bound and "speed_lower_bound" not in table.columns:
        raise InputError("--bound", "this sweep has no speed lower bound (C*/lambda is for the continuous model)")
    if args.bound:
        first = next(iter(groups))[1] if args.by else table
        bound = first.sort_values(args.x)["speed_lower_bound"].to_numpy()
    x = sorted(table[args.x].unique())
    out = Path(args.output or Path(args.sweep_dir) / f"{args.metric}.png")
    plot_metric(
        x,
        series,
        out,
        xlabel=args.x,
        ylabel=args.metric.replace("_", " "),
        bound=bound,
        bound_label="C*/lambda (000, Prop. 1)",
    )
    print(f"wrote {out}")
    return 0


def command_reproduce(args) -> int:
    from hetlb.experiments.reproduce import reproduce

    options = dict(parse_assignment(text) for text in args.set or [])
    report = reproduce(
        args.name,
        scale=args.scale,
        out=args.out,
        executor=args.executor,
        store=args.store,
        progress=sys.stderr.isatty(),
        **options,
    )
    for claim in report["claims"]:
        status = "FAILS" if claim["status"] == "fails" else claim["status"]
        print(f"{status:<9} {claim['id']:<10}{claim['statement']}")
        if claim["cause"]:
            print(f"{'':<20}cause: {claim['cause']}\n{'':<20}evidence: {claim['evidence']}")
    out = args.out or f"reproductions/{args.name}"
    print(f"\n{report['title']}: {report['wall_seconds']:.0f} s; points.csv, {args.name}.png and claims.json in {out}")
    return 0 if report["passes"] else 1


def parse_assignment(text: str, flag: str = "--set") -> tuple[str, object]:
    """NAME=VALUE, the value read as JSON when it parses (numbers, lists), else as a string."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise InputError(flag, f"must be NAME=VALUE, got {text!r}")
    try:
        return name.strip(), json.loads(value)
    except json.JSONDecodeError:
        return name.strip(), value


def command_graph(args) -> int:
    from hetlb.graphs.connectivity import routable_load, well_connectedness
    from hetlb.graphs.constructions import graph_statistics
    from hetlb.results.run import json_default

    scenario = scenario_from_args(args, continuous_only=True)
    system = scenario.system
    construction = system.graph_construction or {
        "construction": "complete" if system.graph.is_complete() else "explicit",
        "statistics": graph_statistics(system.graph),
    }
    values = {"construction": construction, "routable": routable_load(system.graph, system.arrival_rate, system.speed)}
    if args.epsilon is not None or args.assumption2:
        b = args.b or (int(system.buffer.max()) if not system.has_infinite_buffers else None)
        if b is None:
            raise InputError("--b", "the Assumption 2 search needs the buffer size b (or a finite --buffer)")
        values["assumption2"] = well_connectedness(
            system.graph, system.arrival_rate, system.speed, args.epsilon, b, rng=args.seed or 0
        )
    print(json.dumps(values, indent=2, default=json_default))
    return 0


def command_tune(args) -> int:
    from hetlb.experiments import tune_jsq_df_ds

    scenario = scenario_from_args(args, continuous_only=True)
    if args.grid < 2:
        raise InputError("--grid", f"must be an integer >= 2, got {args.grid}")
    samples = scenario.policy.params if scenario.policy.id == "jsq-df-ds" else {}  # d_F, d_S via --param
    tuning = tune_jsq_df_ds(
        scenario.system,
        grid=np.linspace(0.0, 1.0, args.grid),
        d_fast=samples.get("d_fast", 2),
        d_slow=samples.get("d_slow", 2),
        jobs=args.jobs,
        warmup=args.warmup,
        seed=args.seed,
        max_blocking=args.max_blocking,
    )
    if args.json:
        print(
            json.dumps(
                {
                    "p_fast": tuning.p_fast,
                    "p_slow": tuning.p_slow,
                    "mean_response_time": tuning.mean_response_time,
                    "table": [
                        dict(zip(("p_fast", "p_slow", "mean_response_time", "blocking_probability"), row))
                        for row in tuning.table
                    ],
                },
                indent=2,
            )
        )
        return 0
    print(
        f"jsq-df-ds on {scenario.system.n_servers} servers at load {scenario.system.load:.4g}: "
        f"{len(tuning.table)} grid points, {args.jobs:,} jobs each, common random numbers (seed {args.seed})"
    )
    print(f"  {'p_fast':>8}{'p_slow':>8}{'mean T':>12}{'blocking':>12}")
    for p_fast, p_slow, mean, blocking in tuning.table:
        mark = "  <- best" if (p_fast, p_slow) == (tuning.p_fast, tuning.p_slow) else ""
        print(f"  {p_fast:>8.3g}{p_slow:>8.3g}{mean:>12.5g}{blocking:>12.3g}{mark}")
    print("  (evaluate the best point on fresh seeds before reporting it: its tuning run is biased low)")
    return 0


def command_diffusion(args) -> int:
    from hetlb.theory.diffusion import continuous_speeds, policy_diffusion, speed_pools, stationary_diffusion

    if (args.uniform is None) == (args.speeds is None):
        raise InputError("--uniform", "give either --uniform LOW,HIGH or --speeds (pools)")
    if args.uniform is not None:
        try:
            low, high = (float(value) for value in args.uniform.split(","))
        except ValueError:
            raise InputError("--uniform", f"must be LOW,HIGH, got {args.uniform!r}") from None
        speeds = continuous_speeds(low, high)
    else:
        from hetlb.model import parse_speeds

        speeds = speed_pools(parse_speeds(args.speeds))
    limit = policy_diffusion(args.policy, speeds, args.excess_capacity, buffer=args.buffer)
    stationary = stationary_diffusion(limit, n_paths=args.paths, seed=args.seed)
    values = {
        name: {"mean": stationary.mean[name], "standard_error": stationary.standard_error[name]}
        for name in stationary.mean
    }
    if args.json:
        print(
            json.dumps(
                {
                    "policy": args.policy,
                    "excess_capacity": args.excess_capacity,
                    "paths": args.paths,
                    "step": stationary.step,
                    "burn_in": stationary.burn_in,
                    "horizon": stationary.horizon,
                    "stationary": values,
                },
                indent=2,
            )
        )
        return 0
    print(
        f"diffusion limit of {args.policy} (002), c = {args.excess_capacity}: stationary means over "
        f"{args.paths} paths, step {stationary.step:.3g}, burn-in {stationary.burn_in:.3g}, "
        f"horizon {stationary.horizon:.3g}"
    )
    for name, value in values.items():
        print(f"  {name:<20}{value['mean']:>10.4f}  +- {value['standard_error']:.4f} (standard error)")
    return 0


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="hetlb", description="Load balancing in heterogeneous server systems.")
    parser.add_argument("--version", action="version", version=f"hetlb {__import__('hetlb').__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=ArgumentParser)

    simulate = commands.add_parser("simulate", help="simulate one scenario")
    add_system_flags(simulate)
    run = simulate.add_argument_group("run")
    stop = run.add_mutually_exclusive_group()
    stop.add_argument(
        "--jobs", type=int, metavar="N", help="measured jobs: admitted arrivals after the warm-up (default 100000)"
    )
    stop.add_argument("--horizon", type=float, metavar="T", help="measure the arrivals up to time T instead")
    run.add_argument(
        "--warmup",
        type=number,
        metavar="T",
        help="simulated time discarded first (default 0; slots in the slotted model)",
    )
    run.add_argument("--replications", type=int, metavar="R", help="independent replications (default 1)")
    run.add_argument("--seed", type=int, metavar="S", help="root seed (default 0)")
    run.add_argument("--speed-bins", type=int, metavar="K", help="report eta and xi_2 of 002 in K speed bins")
    run.add_argument(
        "--state-distribution",
        action="store_true",
        help="record the time-distribution of jobs and waiting jobs (CCDFs of X_{+1}, X_{+2} of 002)",
    )
    simulate.add_argument("--json", action="store_true", help="print one JSON object")
    simulate.add_argument("--compact", action="store_true", help="with --json, on one line")
    add_slotted_flags(simulate)
    simulate.set_defaults(handler=command_simulate)

    exact = commands.add_parser("exact", help="exact CTMC solution of a small system (finite buffers)")
    add_system_flags(exact)
    exact.add_argument("--json", action="store_true")
    exact.set_defaults(handler=command_exact)

    bound = commands.add_parser("bound", help="the lower bound C*/lambda of Proposition 1 (000)")
    add_system_flags(bound)
    bound.add_argument("--json", action="store_true")
    bound.set_defaults(handler=command_bound)

    policies = commands.add_parser("policies", help="list the policies and their definitions")
    policies.set_defaults(handler=command_policies)

    sweep = commands.add_parser("sweep", help="run a sweep spec (TOML) on a process pool or a Dask cluster")
    sweep.add_argument("spec", help="sweep spec TOML file")
    sweep.add_argument(
        "--executor", default=None, help="processes (default, all cores), processes:N, serial, or dask://host:port"
    )
    sweep.add_argument("--store", default="hetlb-results.sqlite", help="result store (default %(default)s)")
    sweep.add_argument("--out", default="sweep-out", help="folder for runs/summary CSV and Parquet")
    sweep.add_argument("--force", action="store_true", help="recompute runs already in the store")
    sweep.set_defaults(handler=command_sweep)

    store = commands.add_parser("store", help="list the sweeps in a result store, or print one as CSV")
    store.add_argument("name", nargs="?", help="a sweep name (omit to list them)")
    store.add_argument("--store", default="hetlb-results.sqlite")
    store.set_defaults(handler=command_store)

    plot = commands.add_parser("plot", help="plot a metric of a finished sweep against an axis")
    plot.add_argument("sweep_dir", help="the --out folder of hetlb sweep")
    plot.add_argument("--x", required=True, help="axis column, e.g. system.load")
    plot.add_argument("--metric", default="mean_response_time")
    plot.add_argument("--by", default="policy.id", help="one line per value of this column ('' for one line)")
    plot.add_argument("--bound", action="store_true", help="draw the speed lower bound C*/lambda")
    plot.add_argument("--output", help="PNG path (default SWEEP_DIR/METRIC.png)")
    plot.set_defaults(handler=command_plot)

    reproduce = commands.add_parser("reproduce", help="reproduce a paper's figure: CSV, PNG and claims.json")
    reproduce.add_argument("name", help="weng-fig2, weng-fig3, weng-fig4 or weng-figD3")
    reproduce.add_argument("--scale", choices=["quick", "paper"], default="quick")
    reproduce.add_argument("--out", help="folder for the outputs (default reproductions/NAME)")
    reproduce.add_argument(
        "--set", action="append", metavar="NAME=VALUE", help="override an option, e.g. --set load=0.95 (repeatable)"
    )
    reproduce.add_argument(
        "--executor", default=None, help="processes (default), processes:N, serial or dask://host:port"
    )
    reproduce.add_argument("--store", default="hetlb-results.sqlite", help="result store (default %(default)s)")
    reproduce.set_defaults(handler=command_reproduce)

    graph = commands.add_parser(
        "graph", help="a compatibility graph's statistics, the load it can carry and a search for Assumption 2 of 000"
    )
    add_system_flags(graph)
    graph.add_argument("--assumption2", action="store_true", help="search for the worst D_I of Assumption 2")
    graph.add_argument("--epsilon", type=float, help="epsilon of Assumption 2 (default beta_hat)")
    graph.add_argument("--b", type=int, help="buffer size b of Assumption 2 (default the system's buffer)")
    graph.add_argument("--seed", type=int, help="seed of the search's random restarts")
    graph.set_defaults(handler=command_graph)

    tune = commands.add_parser(
        "tune", help="tune (p_fast, p_slow) of jsq-df-ds by a grid of simulations with common random numbers"
    )
    add_system_flags(tune)
    tune.add_argument("--grid", type=int, default=6, help="values of p_fast and of p_slow on [0, 1] (default 6)")
    tune.add_argument("--jobs", type=int, default=50_000, help="jobs per grid point (default 50000)")
    tune.add_argument("--warmup", type=float, default=0.0, help="warm-up, time units (default 0)")
    tune.add_argument("--seed", type=int, default=0)
    tune.add_argument(
        "--max-blocking",
        type=float,
        default=1e-3,
        help="grid points losing more jobs than this are not eligible (default 0.001)",
    )
    tune.add_argument("--json", action="store_true")
    tune.set_defaults(handler=command_tune)

    diffusion = commands.add_parser(
        "diffusion",
        help="stationary means of the diffusion limits of 002 (JFSQ, "
        "random ties, JFIQ, ...) in the Halfin-Whitt regime",
    )
    diffusion.add_argument("--policy", default="jfsq", help="jfsq, jsq, jsq-lisf, jsq-fiq or jssq (default jfsq)")
    diffusion.add_argument("--uniform", metavar="LOW,HIGH", help="speeds with F = U[LOW, HIGH]")
    diffusion.add_argument("--speeds", help='or pools: the empirical F of speeds such as "250x0.8,250x1.2"')
    diffusion.add_argument(
        "--excess-capacity", type=float, default=1.0, metavar="C", help="c = varsigma + nu (default 1)"
    )
    diffusion.add_argument("--buffer", type=int, help="b (1: the loss system; default infinite)")
    diffusion.add_argument("--paths", type=int, default=256, help="independent paths (default 256)")
    diffusion.add_argument("--seed", type=int, default=0)
    diffusion.add_argument("--json", action="store_true")
    diffusion.set_defaults(handler=command_diffusion)

    demo = commands.add_parser("demo", help="compare policies on a heterogeneous system: table and plot")
    demo.add_argument("--out", default="out", help="folder for the CSV and PNG (default out)")
    demo.add_argument("--jobs", type=int, default=100_000, help="jobs per run (default 100000)")
    demo.add_argument("--replications", type=int, default=3, help="replications per point (default 3)")
    demo.set_defaults(handler=command_demo)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except InputError as error:
        print(f"hetlb: error: {error}", file=sys.stderr)
        return EXIT_INPUT_ERROR
    except KeyboardInterrupt:
        print("hetlb: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader of standard output stopped early (e.g. `| head`)
        sys.stdout = open(os.devnull, "w")
        return 0


if __name__ == "__main__":
    sys.exit(main())
