"""The command line: ``hetlb simulate | exact | bound | meanfield | place | graph | tune | diffusion | policies | sweep | store |
plot | reproduce | demo``.

Every user error ends in one line on standard error naming the field and the rule, and exit
status 2; so does a bare ``hetlb`` (after the usage). Each command takes only the flags it uses,
so argparse refuses the others. Results go to standard output (text, or JSON with ``--json``);
progress, notices and ``--verbose`` detail go to standard error, and ``--quiet`` silences them.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from pathlib import Path

import numpy as np

from hetlb import validation
from hetlb.errors import InputError, one_line
from hetlb.version import __version__

EXIT_INPUT_ERROR = 2

MAX_CLASS_ROWS = 10
"""The text output of ``simulate`` lists the speed classes when there are at most this many;
more (e.g. i.i.d. speeds, one class per server) are left to --per-server and --speed-bins."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line, takes flags only as written (no prefixes:
    ``--b`` is not ``--buffer``), and whose ``epilog`` may be a function called when the help is
    shown (to read a registry only then)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message):
        head = f"{self.prog}: error: "
        self.exit(EXIT_INPUT_ERROR, f"{head}{one_line(message, 400 - len(head))}\n")  # 400 characters at most

    def format_help(self) -> str:
        if callable(self.epilog):
            self.epilog = self.epilog()
        return super().format_help()


def reproductions_epilog() -> str:
    """The registered reproductions, one per line (importing the registry takes a second)."""
    from hetlb.experiments import REPRODUCTIONS

    width = max(len(name) for name in REPRODUCTIONS) + 2
    return "reproductions:\n" + "\n".join(
        f"  {name:<{width}}{reproduction.title}" for name, reproduction in REPRODUCTIONS.items()
    )


# --- flags ---------------------------------------------------------------------------------------


def add_scenario_flags(
    parser,
    *,
    rate: bool = True,
    buffer: bool = True,
    job_sizes: bool = True,
    graph: bool = True,
) -> None:
    """The flags that describe a system (and --config), as far as the command uses them."""
    group = parser.add_argument_group("system (flags override --config)")
    group.add_argument("--config", metavar="FILE", help="scenario TOML file ([system], [policy], [run])")
    group.add_argument("--speeds", help='server speeds: "2,1,0.5" or "50x1.0,50x0.5" (COUNTxSPEED)')
    group.add_argument("--n-servers", type=int, metavar="N", help="number of servers, with --speed-distribution")
    group.add_argument(
        "--speed-distribution",
        metavar="KIND[:KEY=VALUE,...]",
        help="i.i.d. speeds, e.g. uniform:low=0.7,high=1.3,seed=1 (kinds: uniform, discrete, lognormal, empirical)",
    )
    if rate:
        rates = group.add_mutually_exclusive_group()
        rates.add_argument("--arrival-rate", type=float, metavar="X", help="total Poisson arrival rate lambda")
        rates.add_argument("--load", type=float, metavar="RHO", help="arrival rate as a fraction of sum(speeds)")
        rates.add_argument(
            "--excess-capacity",
            type=float,
            metavar="C",
            help="arrival rate sum(speeds) - C sqrt(N) (the Halfin-Whitt regime of paper 002)",
        )
    if buffer:
        group.add_argument(
            "--buffer",
            type=int,
            metavar="B",
            help="jobs a server holds, the one in service included (omit for infinite)",
        )
    if job_sizes:
        group.add_argument(
            "--job-sizes",
            choices=["exponential", "hyperexponential", "deterministic"],
            help="job-size distribution, mean 1 (default exponential)",
        )
        group.add_argument("--scv", type=float, help="squared coefficient of variation of hyperexponential sizes")
    if graph:
        group.add_argument(
            "--graph",
            metavar="KIND[:KEY=VALUE,...]",
            help="a graph construction, e.g. fig3:ports_exponent=1.2,seed=1 or random:p=0.1,ports=50 "
            "(kinds: complete, random, fig3, theorem2, theorem3)",
        )


def add_policy_flags(parser) -> None:
    group = parser.add_argument_group("policy (flags override --config)")
    group.add_argument("--policy", metavar="ID", help="policy id (see `hetlb policies`); default jsq")
    group.add_argument("--d", type=int, metavar="D", help="servers sampled by pod")
    group.add_argument(
        "--set",
        action="append",
        metavar="NAME=VALUE",
        help="a policy parameter, e.g. --set p_fast=0.3 or --set p_hat=0.01 (repeatable)",
    )


def add_output_flags(parser, *, json_output: bool = True, quiet: bool = False, verbose: str | None = None) -> None:
    """--json (``json_output``), and --quiet / --verbose for the commands that write progress or
    notices; ``verbose`` says what --verbose adds."""
    group = parser.add_argument_group("output")
    if json_output:
        group.add_argument("--json", action="store_true", help="print the results as JSON instead of text")
    if not (quiet or verbose):
        return  # argparse cannot format the usage of an empty exclusive group
    talk = group.add_mutually_exclusive_group()
    if quiet:
        talk.add_argument("-q", "--quiet", action="store_true", help="no progress bar or notices on standard error")
    if verbose:
        talk.add_argument("-v", "--verbose", action="store_true", help=verbose)


def scenario_from_args(args, continuous_only: bool = False):
    """Merge --config and the flags into a Scenario (either model, unless ``continuous_only``)."""
    from hetlb.scenario import Scenario, read_toml

    flag = lambda name: getattr(args, name, None)  # noqa: E731 - commands take only the flags they use
    data = read_toml(args.config) if args.config is not None else {}
    system = dict(validation.table("system", data.get("system", {})))
    flags = {
        key: flag(key)
        for key in (
            "speeds",
            "buffer",
            "job_sizes",
            "scv",
            "n_servers",
            "model",
            "dispatchers",
            "arrivals",
            "service",
            "routing",
            "ties",
        )
    }
    system.update({key: value for key, value in flags.items() if value is not None})
    rates = {key: flag(key) for key in ("load", "arrival_rate", "excess_capacity")}
    if any(value is not None for value in rates.values()):
        for key, value in rates.items():
            system.pop(key, None)
            if value is not None:
                system[key] = value
    if args.speed_distribution is not None:
        system["speed_distribution"] = parse_construction(args.speed_distribution)
    if flag("graph") is not None:
        system["graph"] = parse_construction(args.graph)
    policy = dict(validation.table("policy", data.get("policy", {})))
    if flag("policy") is not None:
        policy = {"id": args.policy}
    if flag("d") is not None:
        policy["d"] = args.d
    policy.update(parse_assignment(text, "--set") for text in flag("set") or [])
    policy.update({name: flag(name) for name in LED_FLAGS if flag(name) is not None})
    run = dict(validation.table("run", data.get("run", {})))
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
        "herd_window",
    ):
        value = flag(key)
        if value is not None and value is not False:
            run[key] = value
    if "jobs" in run and "horizon" in run:
        run.pop("horizon" if flag("jobs") is not None else "jobs")
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


def parse_assignment(text: str, flag: str = "--set") -> tuple[str, object]:
    """NAME=VALUE, the value read as JSON when it parses (numbers, lists), else as a string."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise InputError(flag, f"must be NAME=VALUE, got {text!r}")
    try:
        return name.strip(), json.loads(value)
    except json.JSONDecodeError:
        return name.strip(), value


# --- feedback on standard error -------------------------------------------------------------------


def quiet(args) -> bool:
    return bool(getattr(args, "quiet", False))


def verbose(args) -> bool:
    return bool(getattr(args, "verbose", False))


def say(args, text: str) -> None:
    """A notice on standard error, unless --quiet."""
    if not quiet(args):
        print(f"hetlb: {text}", file=sys.stderr, flush=True)


def notify_compiling(args, models=("continuous",)) -> None:
    """Say so when the simulation kernels of ``models`` have no compiled code in numba's cache:
    their first call then compiles them, which takes seconds (once; later processes load them)."""
    if quiet(args):
        return
    from hetlb.progress import needs_compiling
    from hetlb.simulation.ahead_of_time import compiled_kernels

    kernels = []
    if "continuous" in models and compiled_kernels() is None:
        from hetlb.kernels import continuous

        kernels += [continuous.advance, continuous.finish]
    if "slotted" in models:
        from hetlb.kernels import slotted

        kernels += [slotted.advance]
    if kernels and needs_compiling(*kernels):
        where = ""
        if verbose(args):
            where = f" into {getattr(getattr(kernels[0], '_cache', None), '_cache_path', 'numba cache')}"
        say(args, f"compiling the simulation kernels{where}: a few seconds to a minute, once (later runs load them)")


def run_reporter(args, label: str, unit: str):
    """A ProgressBar and the ``report(done, total, label, result)`` callback that drives it: the
    fraction of runs done, their events, and with --verbose one line per finished run. The bar
    closes at the last run; close it too when the work ends otherwise."""
    from hetlb.progress import ProgressBar

    bar = ProgressBar(label, enabled=not quiet(args))
    events = 0

    def report(done, total, what, result):
        nonlocal events
        events += result.events
        bar.update(done / total, events, detail=f"{done}/{total} {unit}s")
        if verbose(args):
            bar.message(f"hetlb: {unit} {done} of {total}, {what}: {result_line(result)}")
        if done == total:  # before the caller prints its results
            bar.close()

    return bar, report


def result_line(result) -> str:
    """One result's headline in a line (a replication, or a result of one or more)."""
    if hasattr(result, "mean_delay"):
        head = f"mean delay {result.mean_delay:.6g} slots"
    else:
        head = f"mean response time {result.mean_response_time:.6g}, blocking {result.blocking_probability:.3g}"
    return f"{head}, {result.events:,} events in {result.wall_seconds:.2f} s"


# --- text output ----------------------------------------------------------------------------------


def fmt(value) -> str:
    """A value for the text output: numbers to 6 significant digits (44 for 43.99999999999999),
    a table {kind, ...} as "kind (key value, ...)", other tables and lists as comma lists."""
    if value is None:
        return "none"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.6g}"
    if isinstance(value, dict):
        rest = ", ".join(f"{key.replace('_', ' ')} {fmt(item)}" for key, item in value.items() if key != "kind")
        if "kind" in value:
            return f"{value['kind']} ({rest})" if rest else str(value["kind"])
        return rest
    if isinstance(value, (list, tuple, np.ndarray)):
        return "[" + ", ".join(fmt(item) for item in value) + "]"
    return str(value)


def policy_text(policy: dict) -> str:
    """``{"id": "pod", "d": 2}`` as "pod (d=2)", the NAME=VALUE of --set."""
    params = ", ".join(f"{key}={fmt(value)}" for key, value in policy.items() if key != "id")
    return f"{policy['id']} ({params})" if params else str(policy["id"])


def speed_classes_text(classes: list) -> str:
    """ "50x1, 50x0.5", or for many classes their range."""
    if len(classes) <= MAX_CLASS_ROWS:
        return ", ".join(f"{c['count']}x{c['speed']:.6g}" for c in classes)
    speeds = [c["speed"] for c in classes]
    return f"speeds {min(speeds):.4g} to {max(speeds):.4g}, {len(classes)} distinct"


def interval_text(summary: dict, key: str) -> str:
    ci = summary.get(key + "_ci")
    return f"  95% CI [{ci[0]:.5g}, {ci[1]:.5g}]" if ci is not None and np.all(np.isfinite(ci)) else ""


def format_result(result, speeds=None, per_server: bool = False) -> str:
    """A readable table of a SimulationResult: headline figures, the speed classes (when few),
    eta and xi_2 by speed bin (with --speed-bins) and, with ``per_server``, one row per server."""
    meta = result.metadata
    system = meta["system"]
    summary = result.summary
    buffer = "infinite" if system["buffer"] is None else system["buffer"]
    stopping = meta["stopping"]
    stop = f"{stopping['jobs']:,} jobs" if stopping["jobs"] else f"horizon {stopping['horizon']:g}"
    lines = [
        f"policy {policy_text(meta['policy'])}: {meta['policy_definition']}",
        f"servers {system['n_servers']} ({speed_classes_text(system['speed_classes'])}), "
        f"job types {system['n_types']}, load {system['load']:.4f}, buffer {buffer}, "
        f"sizes {fmt(system['job_sizes'])}",
        f"{result.replications} replication(s), {stop} after warm-up {stopping['warmup']:g}, seed {fmt(meta['seed'])}",
        "",
    ]
    for label, key in (
        ("mean response time", "mean_response_time"),
        ("mean waiting time", "mean_waiting_time"),
        ("P(wait)", "p_wait"),
        ("blocking probability", "blocking_probability"),
        ("mean number in system", "mean_number_in_system"),
        ("response time p50", "response_time_p50"),
        ("response time p95", "response_time_p95"),
        ("response time p99", "response_time_p99"),
    ):
        lines.append(f"  {label:<26}{summary[key]:>12.6g}{interval_text(summary, key)}")
    if "dispatchers" in meta:
        lines += ["", *dispatcher_lines(meta["dispatchers"], summary)]
    classes = summary["occupancy_by_class"]
    if len(classes) <= MAX_CLASS_ROWS:
        lines += ["", "  per speed class:   speed  servers  utilisation   s_1      s_2      s_3      C_m"]
        for c in classes:
            s = (c["s_m"] + [float("nan")] * 3)[:3]
            lines.append(
                f"  {'':<14}{c['speed']:>9.4g}{c['servers']:>9d}{c['utilisation']:>12.4f}"
                f"{s[0]:>9.4f}{s[1]:>9.4f}{s[2]:>9.4f}{c['C_m']:>9.4f}"
            )
    else:
        lines += [
            "",
            f"  {len(classes)} speed classes, not listed: --speed-bins K groups them, --per-server lists "
            "every server, --json has them all (occupancy_by_class)",
        ]
    profiles = [run.speed_profile for run in result.runs if run.speed_profile is not None]
    if profiles:
        lines += ["", *speed_bins_lines(profiles)]
    scaled = summary["halfin_whitt"]
    lines += ["", "  scaled as in 002:  " + "  ".join(f"{name} {value:.4g}" for name, value in scaled.items())]
    lines += [
        "",
        f"  events {summary['events']:,} in {summary['wall_seconds']:.2f} s "
        f"({summary['events_per_second'] / 1e6:.2f}M events/s); "
        f"Little's law gap {100 * summary['littles_law_gap']:.3f}%",
    ]
    if per_server:
        utilisation = np.mean([run.utilisation for run in result.runs], axis=0)
        queue = np.mean([run.mean_queue_length for run in result.runs], axis=0)
        lines += ["", *per_server_lines(speeds, queue, utilisation)]
    return "\n".join(lines)


def dispatcher_lines(dispatchers: dict, summary: dict) -> list:
    """The dispatchers' figures of a DispatchersResult: messages per job by kind, the estimates'
    error and age, the herd."""
    per_job = summary["messages_per_job"]
    kinds = ", ".join(f"{kind} {value:.4g}" for kind, value in per_job.items() if value and kind != "total")
    lines = [f"  {dispatchers['dispatchers']} dispatcher(s), updates {dispatchers['update_text']}"]
    lines.append(f"  {'messages per job':<26}{per_job['total']:>12.6g}  ({kinds or 'none'})")
    for label, key in (
        ("mean estimate error", "mean_estimate_error"),
        ("mean estimate bias", "mean_estimate_bias"),
        ("mean estimate age", "mean_estimate_age"),
        ("herd fraction", "herd_fraction"),
    ):
        lines.append(f"  {label:<26}{summary[key]:>12.6g}{interval_text(summary, key)}")
    lines.append(f"  {'':<26}(decisions onto another dispatcher's choice within {dispatchers['herd_window']:.4g})")
    return lines


def speed_bins_lines(profiles: list) -> list:
    """eta and xi_2 of 002 by speed bin, averaged over the replications."""
    first = profiles[0]
    edges = first["edges"]
    eta = np.mean([p["eta"] for p in profiles], axis=0)
    xi2 = np.mean([p["xi2"] for p in profiles], axis=0)
    lines = [
        "  by speed bin (002): eta = share of the idle server-time, TB = its speed-blind benchmark,",
        "  xi_2 = n^(-1/2) x mean number of servers holding 2 or more jobs",
        f"  {'speeds':>22}{'servers':>9}{'eta':>10}{'eta (TB)':>10}{'xi_2':>10}",
    ]
    for i in range(len(eta)):
        close = "]" if i == len(eta) - 1 else ")"
        span = f"[{edges[i]:.4g}, {edges[i + 1]:.4g}{close}"
        lines.append(f"  {span:>22}{first['servers'][i]:>9d}{eta[i]:>10.4f}{first['tb_eta'][i]:>10.4f}{xi2[i]:>10.4f}")
    return lines


def per_server_lines(speeds, queue, utilisation=None) -> list:
    """One row per server: its speed, utilisation (continuous model) and mean queue length."""
    head = f"  {'server':>8}{'speed':>10}" + (f"{'utilisation':>13}" if utilisation is not None else "")
    lines = ["  per server (averaged over the replications):", head + f"{'mean queue':>12}"]
    for s, mean_queue in enumerate(queue):
        row = f"  {s:>8d}{speeds[s]:>10.4g}" + (f"{utilisation[s]:>13.4f}" if utilisation is not None else "")
        lines.append(row + f"{mean_queue:>12.4f}")
    return lines


def format_slotted_result(result, speeds=None, per_server: bool = False) -> str:
    """A readable table of a SlottedResult."""
    meta, summary = result.metadata, result.summary
    system = dict(meta["system"])
    rate, load = system.pop("total_arrival_rate"), system.pop("load")
    classes, n_servers = system.pop("speed_classes"), system.pop("n_servers")
    system.pop("model", None)
    options = ", ".join(f"{key.removeprefix('n_').replace('_', ' ')} {fmt(value)}" for key, value in system.items())
    lines = [
        f"policy {policy_text(meta['policy'])}",
        f"  {meta['policy_definition']}",
        f"decides on: {meta['information']}",
        f"system: {n_servers} servers ({speed_classes_text(classes)}), arrival rate {rate:.6g} per slot, "
        f"load {load:.6g}",
        f"  {options}",
        f"{result.replications} replication(s), seed {fmt(meta['seed'])}",
        "",
    ]
    for label, key in (
        ("mean delay (slots)", "mean_delay"),
        ("mean number in system", "mean_number_in_system"),
        ("mean estimate error", "mean_estimate_error"),
        ("messages per arrival", "messages_per_arrival"),
        ("messages per decision", "messages_per_decision"),
    ):
        lines.append(f"  {label:<26}{summary[key]:>12.6g}{interval_text(summary, key)}")
    messages = ", ".join(
        f"{kind} {count:,}" if isinstance(count, (int, np.integer)) else f"{kind} {fmt(count)}"
        for kind, count in summary["messages"].items()
    )
    lines.append(f"  {'messages':<26}{messages}")
    if result.preference is not None:
        lines.append(
            f"  preference: tilted {fmt(summary['preference_tilted'])}, delta-tilted "
            f"{fmt(summary['preference_delta_tilted'])}, delta {summary['preference_delta_min']:.4g}"
        )
    lines.append(f"\n  {summary['slots_per_second']:,.0f} slots/s, {summary['events_per_second'] / 1e6:.2f}M events/s")
    if per_server:
        lines += ["", *per_server_lines(speeds, result.mean_queue_length)]
    return "\n".join(lines)


# --- commands -------------------------------------------------------------------------------------


def print_json(value, indent: int | None = 2) -> None:
    """Strict JSON: numpy values become numbers and non-finite floats null."""
    from hetlb.results.base import finite_or_null, json_default

    print(json.dumps(finite_or_null(value), indent=indent, default=json_default, allow_nan=False))


def command_simulate(args) -> int:
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


def command_exact(args) -> int:
    from hetlb.theory import solve_exact

    scenario = scenario_from_args(args, continuous_only=True)
    system, policy = scenario.system, scenario.policy
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
        print_json(values)
    else:
        print(
            f"load {bound.load:.6g}: K = {bound.K}, C* = {bound.c_star:.6g}, "
            f"mean response time >= C*/lambda = {bound.lower_bound:.6g}  (Proposition 1 of paper 000)"
        )
    return 0


def meanfield_policy(args) -> tuple[str, dict]:
    """--policy (default jsq), --d and --set of ``hetlb meanfield`` (its policies include
    jiq-df-ds, which only the theory has)."""
    params = dict(parse_assignment(text, "--set") for text in args.set or [])
    if args.d is not None:
        params["d"] = args.d
    return args.policy or "jsq", params


def command_meanfield(args) -> int:
    from hetlb.theory.meanfield import mean_field

    policy, params = meanfield_policy(args)
    args.policy, args.d, args.set = None, None, None  # the system alone: the policy may be theory-only
    scenario = scenario_from_args(args, continuous_only=True)
    system = scenario.system
    if system.graph.n_edges != system.graph.n_types * system.n_servers:
        raise InputError("graph", "the mean-field limit is for the complete graph; omit --graph")
    buffers = np.unique(system.buffer)
    if buffers.size > 1:
        raise InputError("buffer", "the mean-field limit takes one buffer size for all servers")
    buffer = None if system.has_infinite_buffers else int(buffers[0])
    limit = mean_field(system.speed, load=system.load, policy=policy, buffer=buffer, **params)
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


def format_meanfield(values: dict) -> str:
    """The text output of ``hetlb meanfield``: the limit's figures, per class, and the simulation
    beside them with --compare."""
    limit = values.get("limit", values)
    simulation = values.get("simulation")
    lines = [
        f"mean-field limit N -> infinity of {limit['policy']} {fmt(limit['parameters']) if limit['parameters'] else ''}".rstrip()
        + f": load {limit['load']:.6g}, lambda {limit['arrival_rate_per_server']:.6g} per server, "
        + f"buffer {limit['buffer'] if limit['buffer'] is not None else 'infinite'}",
        f"  {limit['description']}",
    ]
    if not limit["stable"]:
        lines.append("  unstable: some queues grow without bound in the limit (mean response time infinite)")
        return "\n".join(lines)
    rows = [
        ("mean response time", "mean_response_time"),
        ("mean waiting time", "mean_waiting_time"),
        ("P(wait)", "p_wait"),
        ("blocking probability", "blocking_probability"),
    ]
    header = f"  {'':<24}{'limit':>12}"
    if simulation:
        header += f"{'N = ' + str(simulation['n_servers']):>14}  95% CI"
    lines.append(header)
    for label, key in rows:
        line = f"  {label:<24}{limit[key]:>12.6g}"
        if simulation:
            line += f"{simulation[key]:>14.6g}"
            if key == "mean_response_time":
                low, high = simulation["mean_response_time_ci"]
                line += f"  [{low:.6g}, {high:.6g}], gap {values['gap']['mean_response_time']:+.2%}"
        lines.append(line)
    width = 24 if simulation else 10
    lines.append(
        f"  {'class speed':>12}{'fraction':>10}{'busy':>{width}}{'job share':>11}  s_{{m,i}} for i = 1, 2, ..."
    )
    for m, row in enumerate(limit["classes"]):
        occupancy = ", ".join(f"{x:.4g}" for x in row["s_m"][:8]) + (", ..." if len(row["s_m"]) > 8 else "")
        busy = f"{row['utilisation']:.4g}"
        if simulation:
            busy += f" (sim {simulation['utilisation'][m]:.4g})"
        lines.append(
            f"  {row['speed']:>12.6g}{row['fraction']:>10.4g}{busy:>{width}}{row['job_share']:>11.4g}  {occupancy}"
        )
    lines.append(f"  the N-server system approaches the limit at rate {limit['finite_n_error']}")
    return "\n".join(lines)


def command_place(args) -> int:
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
        print(format_placement(values, args))
    return 0


def format_placement(values: dict, args) -> str:
    """The text output of ``hetlb place``: the best graph, its verification, the least graph of
    each family against the Fig. 3 formula."""
    reference = values["reference"]
    lines = [
        f"placement of {reference['n_ports']} job types on {reference['n_servers']} servers: mean response time "
        f"within {values['tolerance']:.1%} of C*/lambda = {values['lower_bound']:.6g}",
        f"  Fig. 3 formula of 000: port degree {reference['fig3_port_degree']:.1f}, "
        f"{reference['fig3_edges']:.0f} edges",
        f"  {'family':<10}{'parameter':>11}{'edges':>11}{'edges/Fig.3':>12}{'mean deg':>10}{'max deg':>9}"
        f"{'T / bound (95% CI)':>28}",
    ]
    for name, best in values["best_by_family"].items():
        if best is None:
            lines.append(f"  {name:<10}{'none passed':>11}")
            continue
        low, high = best["ratio_ci"]
        lines.append(
            f"  {name:<10}{best['parameter']:>11.4g}{best['edges']:>11}{best['edges'] / reference['fig3_edges']:>12.3f}"
            f"{best['mean_port_degree']:>10.1f}{best['max_port_degree']:>9}"
            f"{best['ratio_to_bound']:>12.4f} [{low:.4f}, {high:.4f}]"
        )
    for attempt in values["verifications"]:
        low, high = attempt["ratio_ci"]
        lines.append(
            f"re-simulated with fresh seeds: {attempt['family']} {attempt['parameter']:.4g} ({attempt['edges']} edges): "
            f"T / bound {attempt['ratio_to_bound']:.4f} [{low:.4f}, {high:.4f}] -> {attempt['verdict']}"
        )
    if values["verification"] is not None:
        lines.append(f"best: {values['best']['family']} ({values['best']['edges']} edges)")
        if "graph_file" in values:
            lines.append(f"graph written to {values['graph_file']} (hetlb simulate --graph explicit:file=...)")
    else:
        lines.append("no graph met the tolerance")
    lines += [f"note: {note}" for note in values["notes"]]
    if not values["search_complete"]:
        lines.append("the search stopped at its time budget; run the same command again to resume from the store")
    return "\n".join(lines)


def command_compile(args) -> int:
    from hetlb.simulation.precompile import compile_command

    print(compile_command(quiet=args.quiet))
    return 0


def command_policies(args) -> int:
    from hetlb.policies import POLICIES

    if args.check is not None:
        return check_policies(args, args.check or list(POLICIES))
    if args.json:
        print_json([describe_policy(spec) for spec in POLICIES.values()])
        return 0
    for spec in POLICIES.values():
        params = ", ".join(f"{name}={default} ({text})" for name, (default, text, _) in spec.parameters.items())
        print(f"{spec.id:<16}{spec.definition}")
        print(
            f"{'':<16}source: {spec.reference}; models: {', '.join(spec.models)}"
            + (f"; parameters: {params}" if params else "")
        )
    return 0


def describe_policy(spec) -> dict:
    """A registry entry as JSON: every field but the exact rule, which is said by whether it exists."""
    from hetlb.policies.registry import describe_kind

    return {
        "id": spec.id,
        "definition": spec.definition,
        "reference": spec.reference,
        "models": list(spec.models),
        "parameters": {
            name: {"default": default, "description": text, "rule": describe_kind(rule)}
            for name, (default, text, rule) in spec.parameters.items()
        },
        "ranks_whole_set": spec.ranks_whole_set,
        "integer_keys": spec.integer_keys,
        "idle_order": spec.idle_order,
        "on_local_estimates": spec.on_local_estimates,
        "exact_solver": spec.exact_rule is not None,
        "tie_break": spec.tie_break,
        "diffusion_limit": spec.diffusion_limit,
        "slotted_information": spec.slotted_information,
    }


def check_policies(args, policy_ids: list) -> int:
    """``hetlb policies --check``: the conformance check of each policy; exit 1 if one fails."""
    from hetlb.conformance import check_policy

    reports = [check_policy(policy_id) for policy_id in policy_ids]
    if args.json:
        print_json(
            [
                {
                    "policy": report.policy,
                    "passed": report.passed,
                    "checks": [{"name": c.name, "passed": c.passed, "detail": c.detail} for c in report.checks],
                }
                for report in reports
            ]
        )
    else:
        print("\n".join(report.summary for report in reports))
    return 0 if all(report.passed for report in reports) else 1


DEMO_MAX_JOBS = 10**8
DEMO_MAX_REPLICATIONS = 100
"""The demo's 30 points at most: 30 x 100 x 10^8 jobs is days of computing already; larger
studies are sweeps (resumable, on every core)."""


def command_demo(args) -> int:
    from hetlb.demo import run_demo

    out = validation.output_folder("--out", args.out)
    validation.integer("--jobs", args.jobs, low=100, high=DEMO_MAX_JOBS)
    validation.integer("--replications", args.replications, low=1, high=DEMO_MAX_REPLICATIONS)
    notify_compiling(args)
    bar, report = run_reporter(args, "demo ", "run")
    rows = run_demo(out, jobs=args.jobs, replications=args.replications, report=report, echo=not args.json)
    bar.close()
    if args.json:
        print_json({"out": args.out, "rows": rows})
    return 0


def command_sweep(args) -> int:
    from hetlb.experiments import SweepSpec, sweep

    spec = SweepSpec.from_toml(args.spec)
    base_model = spec.base.get("system", {}).get("model", "continuous")
    notify_compiling(args, tuple(spec.axes.get("system.model", [base_model])))
    result = sweep(
        spec,
        executor=args.executor,
        store=args.store,
        out=args.out,
        force=args.force,
        progress=not quiet(args),
    )
    summary = result.summary
    if args.json:
        print_json(
            {
                "computed": result.computed,
                "reused": result.reused,
                "wall_seconds": result.wall_seconds,
                "store": args.store,
                "out": args.out,
                "summary": summary.to_dict(orient="records"),
            }
        )
        return 0
    axes = [c for c in summary.columns if "." in c]
    shown = summary[axes + [c for c in SWEEP_COLUMNS if c in summary.columns]]
    print(shown.to_string(index=False, float_format=lambda v: f"{v:.5g}"))
    print(
        f"\n{result.computed} runs computed, {result.reused} reused from {args.store}, "
        f"{result.wall_seconds:.1f} s; tables in {args.out}"
    )
    return 0


SWEEP_COLUMNS = (
    "replications",
    "mean_response_time",
    "mean_response_time_ci_low",
    "mean_response_time_ci_high",
    "blocking_probability",
    "speed_lower_bound",
    "mean_delay",
    "mean_delay_ci_low",
    "mean_delay_ci_high",
    "messages_per_arrival",
)
"""The summary columns `hetlb sweep` prints after the axes, those of the sweep's model (the
continuous model's first, then the slotted model's: a sweep over system.model has both)."""


def command_store(args) -> int:
    from hetlb.experiments import ResultStore
    from hetlb.experiments.store import resume_note
    from hetlb.validation import input_file, shorten

    path = input_file("store", args.store)  # listing makes no store; a read-only one is read as it is
    with ResultStore(path, readonly=not os.access(path, os.W_OK)) as store:
        if args.name is None:
            sweeps = store.sweeps()
            if args.json:
                print_json(sweeps)
                return 0
            for entry in sweeps:
                print(f"{entry['name']:<32}{entry['finished']:>8} of {entry['runs']} runs finished{resume_note(entry)}")
            return 0
        rows = store.load(validation.text("name", args.name))
    if not rows:
        raise InputError("name", f"no finished runs of a sweep named {shorten(repr(args.name))} in {store.name}")
    if args.json:
        print_json(rows)
        return 0
    import pandas as pd

    print(pd.DataFrame.from_records(rows).to_csv(index=False), end="")
    return 0


def command_plot(args) -> int:
    from hetlb import validation
    from hetlb.plots import plot_metric
    from hetlb.plots.figures import axis_label, image_formats

    folder = validation.path("sweep_dir", args.sweep_dir)
    table = read_summary(folder)
    x, by, metric = plot_columns(table, args.x, args.by, args.metric)
    output = validation.output_file("--output", args.output or folder / f"{metric}.png", suffixes=image_formats())
    xs, series, bound = plot_series(table, x, by, metric, args.bound)
    try:
        plot_metric(
            xs,
            series,
            output,
            xlabel=x,
            ylabel=metric.replace("_", " "),
            title=f"{folder.resolve().name}: {axis_label(metric)} by {axis_label(x).split(' (')[0]}",
            legend_title=axis_label(by) if by else None,
            bound=bound,
            bound_label=BOUND_LABEL,
        )
    except OSError as error:
        raise InputError(
            "--output", f"cannot write {validation.shorten(str(output))}: {error.strerror or error}"
        ) from None
    print(f"wrote {output}")
    return 0


BOUND_LABEL = "C*/lambda (000, Prop. 1)"


def read_summary(folder: Path):
    """The summary table a sweep wrote to ``folder`` (summary.parquet), checked to be one."""
    import pandas as pd
    import pyarrow

    from hetlb.validation import shorten

    path = folder / "summary.parquet"
    if not path.is_file():
        raise InputError("sweep_dir", f"no summary.parquet in {shorten(str(folder))} (run hetlb sweep --out DIR first)")
    try:
        table = pd.read_parquet(path)
    except (OSError, ValueError, TypeError, NotImplementedError, pyarrow.ArrowException) as error:
        reason = shorten(str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__)
        raise InputError("sweep_dir", f"{shorten(str(path))} is not a readable Parquet table ({reason})") from None
    if len(table) == 0 or not all(isinstance(column, str) for column in table.columns):
        raise InputError("sweep_dir", f"{shorten(str(path))} is not the summary table of a sweep")
    return table


def plot_columns(table, x: str, by: str | None, metric: str) -> tuple:
    """The columns of a plot, checked: ``x`` an axis of the sweep, ``by`` another axis ('' for one
    line, None for the default), ``metric`` a numeric column other than the axes."""
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    from hetlb.validation import shown

    axes = [c for c in table.columns if "." in c]
    if x not in axes:
        raise InputError("--x", f"must be an axis of the sweep ({', '.join(axes) or 'it has none'}), got {shown(x)}")
    if by is None:  # the default: a line per policy when the sweep varies the policy
        by = "policy.id" if "policy.id" in axes and x != "policy.id" else ""
    by = by or None
    others = [c for c in axes if c != x]
    if by is not None and by not in others:
        rule = f"must be another axis of the sweep ({', '.join(others) or 'it has none'}) or '' for one line"
        raise InputError("--by", f"{rule}, got {shown(by)}")
    figures = [c for c in table.columns if f"{c}_ci_low" in table.columns]
    column = table[metric] if metric in table.columns else None
    identity = metric in axes or metric in ("point", "replications") or metric.endswith(("_ci_low", "_ci_high"))
    if identity or column is None or not is_numeric_dtype(column) or is_bool_dtype(column):
        raise InputError(
            "--metric",
            f"must be a figure of the sweep such as {', '.join(figures[:4]) or 'events'} (a numeric column of "
            f"summary.csv other than the axes, point, replications and the interval bounds), got {shown(metric)}",
        )
    for flag, name in (("--x", x), ("--by", by)):
        if name is not None and not table[name].map(lambda v: isinstance(v, (str, int, float, np.number))).all():
            raise InputError(flag, f"the values of {name} must be numbers or texts to plot against")
    return x, by, metric


def plot_series(table, x: str, by: str | None, metric: str, with_bound: bool) -> tuple:
    """The x values, the series {label: (mean, ci_low, ci_high)} on them (NaN where a line has
    no point) and the speed lower bound on them (with ``with_bound``, else None)."""
    xs = sorted(table[x].dropna().unique())
    groups = list(table.groupby(by, sort=False, dropna=False)) if by else [(metric, table)]
    axes = [c for c in table.columns if "." in c and c not in (x, by)]
    series, aligned = {}, []
    for label, rows in groups:
        rows = rows.dropna(subset=[x])
        if rows[x].duplicated().any():
            varying = [c for c in axes if rows[c].map(repr).nunique() > 1]
            rule = (
                f"the axis {varying[0]} varies too: give --by {varying[0]}"
                if len(varying) == 1
                else (f"the axes {', '.join(varying)} vary too: plot a sweep that varies one axis besides --x")
            )
            raise InputError("--by", f"a line has one point per value of {x}, but {rule}")
        rows = rows.set_index(x).reindex(xs)
        aligned.append(rows)
        band = [
            rows[f"{metric}_ci_{end}"] if f"{metric}_ci_{end}" in rows else np.nan * rows[metric]
            for end in ("low", "high")
        ]
        series[str(label)] = tuple(np.asarray(values, dtype=float) for values in (rows[metric], *band))
    bound = None
    if with_bound:
        if "speed_lower_bound" not in table.columns:
            raise InputError("--bound", "this sweep has no speed lower bound (C*/lambda is for the continuous model)")
        bound = aligned[0]["speed_lower_bound"].to_numpy(dtype=float)
    return xs, series, bound


def command_reproduce(args) -> int:
    from hetlb.experiments.reproduce import reproduce

    options = dict(parse_assignment(text) for text in args.set or [])
    notify_compiling(args, ("continuous", "slotted"))  # a reproduction may use either model
    report = reproduce(
        args.name,
        scale=args.scale,
        out=args.out,
        executor=args.executor,
        store=args.store,
        progress=not quiet(args),
        **options,
    )
    if args.json:
        print_json(report)
        return 0 if report["all_claims_hold"] else 1
    for claim in report["claims"]:
        status = "FAILS" if claim["status"] == "fails" else claim["status"]
        print(f"{status:<9} {claim['id']:<10}{claim['statement']}")
        if claim["cause"]:
            print(f"{'':<20}cause: {claim['cause']}\n{'':<20}evidence: {claim['evidence']}")
    out = args.out or f"reproductions/{args.name}"
    print(f"\n{report['title']}: {report['wall_seconds']:.0f} s; points.csv, {args.name}.png and claims.json in {out}")
    return 0 if report["passes"] else 1


def command_graph(args) -> int:
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
    values = {"construction": construction, "routable": routable_load(system.graph, system.arrival_rate, system.speed)}
    if search:
        if system.has_infinite_buffers:
            raise InputError(
                "--buffer", "the Assumption 2 search needs the buffer size b of paper 000: give --buffer B, e.g. 5"
            )
        check_assumption2_search(system, args.epsilon, int(system.buffer.max()))
        values["assumption2"] = well_connectedness(
            system.graph, system.arrival_rate, system.speed, args.epsilon, int(system.buffer.max()), rng=args.seed or 0
        )
    if args.json:
        print_json(values)
    else:
        print(format_graph(values))
    return 0


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


def counted(n: int, noun: str) -> str:
    """ "1 server", "1,024 servers"."""
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def format_graph(values: dict) -> str:
    """The graph report as text: the construction, the load it carries, the Assumption 2 search."""
    construction, routable = values["construction"], values["routable"]
    stats = construction["statistics"]
    seed = f", seed {construction['seed']}" if construction.get("seed") is not None else ""
    lines = [
        f"graph {construction['construction']}{seed}: {counted(stats['n_types'], 'job type')}, "
        f"{counted(stats['n_servers'], 'server')}, {counted(stats['edges'], 'edge')}",
        f"  servers per job type  {fmt(stats['port_degree'])}",
        f"  job types per server  {fmt(stats['server_degree'])}",
    ]
    if stats["ports_without_server"] or stats["servers_without_port"]:
        lines.append(
            f"  job types without a server {stats['ports_without_server']}, "
            f"servers without a job type {stats['servers_without_port']}"
        )
    bottleneck = routable["bottleneck"]
    verdict = "carries" if routable["can_carry_offered_load"] else "cannot carry"
    lines += [
        "",
        f"capacity: the graph {verdict} the offered load {routable['offered_load_fraction']:.4g} of the total speed; "
        f"it carries up to {routable['max_load_fraction']:.6g} with this mix of job types",
        f"  bottleneck ({bottleneck['kind']}): {counted(bottleneck['ports'], 'job type')} on "
        f"{counted(bottleneck['servers'], 'server')}, "
        f"arrival rate {bottleneck['arrival_rate']:.6g} against speed {bottleneck['capacity']:.6g}",
    ]
    search = values.get("assumption2")
    if search is not None:
        verdict = "holds for every subset tried" if search["holds_for_subsets_tried"] else "fails"
        lines += [
            "",
            f"Assumption 2 of 000 (epsilon {search['epsilon']:.4g}, b {search['b']}, K {search['K']}): {verdict}",
        ]
        for group in search["groups"]:
            head = (
                f"  condition {group['condition']} (servers of {group['servers']}, {group['candidate_servers']} "
                f"candidates, subsets of {group['min_subset_size']})"
            )
            if group["vacuous"]:
                lines.append(f"{head}: vacuous, no subset that large")
                continue
            lines.append(
                f"{head}: worst D_I found {group['worst_D_found']:.6g} against the threshold "
                f"{group['threshold']:.4g} ({'holds' if group['holds_for_subsets_tried'] else 'fails'}; "
                f"{group['subsets_evaluated']:,} subsets, {group['found_by']})"
            )
        lines.append(f"  {search['note']}")
    return "\n".join(lines)


def command_tune(args) -> int:
    from hetlb.experiments import tune_jsq_df_ds

    scenario = scenario_from_args(args, continuous_only=True)
    grid = validation.count("--grid", args.grid, low=2)
    validation.check_memory("--grid", 8 * grid, f"a grid of {grid:,} values", "use a smaller grid")
    configured = scenario.policy.params if scenario.policy.id == "jsq-df-ds" else {}  # a [policy] of --config
    notify_compiling(args)
    bar, report = run_reporter(args, "tune ", "grid point")
    tuning = tune_jsq_df_ds(
        scenario.system,
        grid=np.linspace(0.0, 1.0, grid),
        d_fast=args.d_fast if args.d_fast is not None else configured.get("d_fast", 2),
        d_slow=args.d_slow if args.d_slow is not None else configured.get("d_slow", 2),
        jobs=args.jobs,
        warmup=args.warmup,
        seed=args.seed,
        max_blocking=args.max_blocking,
        report=report,
    )
    bar.close()
    if args.json:
        print_json(
            {
                "p_fast": tuning.p_fast,
                "p_slow": tuning.p_slow,
                "mean_response_time": tuning.mean_response_time,
                "table": [
                    dict(zip(("p_fast", "p_slow", "mean_response_time", "blocking_probability"), row))
                    for row in tuning.table
                ],
            }
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


DIFFUSION_SPEED_LAWS = {"uniform": ("low", "high"), "discrete": ("speeds", "probabilities")}
"""The --speed-distribution kinds the diffusion command takes, with their keys: the law F itself."""


def diffusion_speed_law(text: str):
    """F of the diffusion limit from KIND:KEY=VALUE,... (the syntax of simulate --speed-distribution)."""
    from hetlb.theory.diffusion import continuous_speeds, speed_pools

    spec = parse_construction(text)
    kind = spec.pop("kind")
    if kind not in DIFFUSION_SPEED_LAWS:
        raise InputError(
            "--speed-distribution",
            f"the diffusion limit takes the law of the speeds itself: uniform:low=L,high=H or "
            f"discrete:speeds=[...],probabilities=[...], got kind {kind!r}",
        )
    allowed = DIFFUSION_SPEED_LAWS[kind]
    unknown = sorted(set(spec) - set(allowed))
    if unknown:
        raise InputError("--speed-distribution", f"{unknown[0]}: unknown key for {kind}; allowed: {', '.join(allowed)}")
    missing = [key for key in allowed if key not in spec]
    if missing:
        raise InputError("--speed-distribution", f"{kind} needs {' and '.join(missing)}")
    if kind == "uniform":
        return continuous_speeds(spec["low"], spec["high"])
    return speed_pools(spec["speeds"], spec["probabilities"])


def command_diffusion(args) -> int:
    from hetlb.theory.diffusion import policy_diffusion, speed_pools, stationary_diffusion

    if args.speed_distribution is not None:
        speeds = diffusion_speed_law(args.speed_distribution)
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
        print_json(
            {
                "policy": args.policy,
                "excess_capacity": args.excess_capacity,
                "paths": args.paths,
                "step": stationary.step,
                "burn_in": stationary.burn_in,
                "horizon": stationary.horizon,
                "stationary": values,
            }
        )
        return 0
    print(
        f"diffusion limit of {args.policy} (002), c = {args.excess_capacity:g}: stationary means over "
        f"{args.paths} paths, step {stationary.step:.3g}, burn-in {stationary.burn_in:.3g}, "
        f"horizon {stationary.horizon:.3g}"
    )
    for name, value in values.items():
        print(f"  {name:<20}{value['mean']:>10.4f}  +- {value['standard_error']:.4f} (standard error)")
    return 0


def command_serve(args) -> int:
    from hetlb.live import load_config, serve

    if args.set and args.policy is None:
        raise InputError("--set", "give the policy with --policy ID")
    parameters = dict(parse_assignment(text, "--set") for text in args.set or [])
    policy = None if args.policy is None else {"id": args.policy, **parameters}
    overrides = {
        "backends": args.backend,
        "policy": policy,
        "listen": args.listen,
        "admin": args.admin,
        "signals": args.signals,
        "p_hat": args.p_hat,
        "d": args.d,
        "default_type": args.default_type,
        "type_header": args.type_header,
        "type_prefixes": args.type_prefix,
        "dispatchers": args.dispatchers,
        "seed": args.seed,
        "timeout": args.timeout,
        "connect_timeout": args.connect_timeout,
        "drain": args.drain,
        "health_interval": args.health_interval,
        "eject_after": args.eject_after,
        "retries": args.retries,
        "max_body_bytes": args.max_body_bytes,
        "max_header_bytes": args.max_header_bytes,
        "max_in_flight": args.max_in_flight,
    }
    config = load_config(args.config, **overrides)
    return serve(config, announce=None if not quiet(args) else lambda line: None)


def live_command(args) -> int:
    from hetlb.live import commands

    return getattr(commands, f"run_{args.command}")(args)


def add_live_commands(commands) -> None:
    """``hetlb backend``, ``loadgen`` and ``testbed``; their handlers import the live modules (and
    aiohttp) only when they run."""
    backend = commands.add_parser(
        "backend", help="test backends: the model's FIFO servers on HTTP, several on several ports"
    )
    backend.set_defaults(handler=live_command)
    backend.add_argument(
        "--listen",
        action="append",
        required=True,
        metavar="HOST:PORT[,speed=S]",
        help="a backend (repeatable); HOST:FIRST-LAST: one per port; port 0: a free port; speed default 1",
    )
    backend.add_argument(
        "--mean-service-ms",
        type=float,
        default=20.0,
        metavar="MS",
        help="mean service time at speed 1, milliseconds (default %(default)s): a backend of speed S takes MS/S",
    )
    backend.add_argument(
        "--job-sizes",
        choices=["exponential", "hyperexponential", "deterministic"],
        default="exponential",
        help="service-time law (default %(default)s)",
    )
    backend.add_argument("--scv", type=float, help="squared coefficient of variation of hyperexponential times")
    backend.add_argument("--seed", type=int, default=0, help="seed of the service times and faults (default 0)")
    backend.add_argument(
        "--error-probability",
        type=float,
        default=0.0,
        metavar="P",
        help="answer a job 500 after serving it (default 0)",
    )
    backend.add_argument(
        "--stall-probability", type=float, default=0.0, metavar="P", help="never answer a request (default 0)"
    )

    loadgen = commands.add_parser("loadgen", help="open-loop Poisson load on one or several URLs; simulator's keys")
    loadgen.set_defaults(handler=live_command)
    loadgen.add_argument(
        "--target", action="append", required=True, metavar="URL", help="a target URL (repeatable: arrivals spread)"
    )
    loadgen.add_argument("--rate", type=float, required=True, help="arrivals per second, over all targets")
    loadgen.add_argument("--duration", type=float, required=True, metavar="S", help="measured seconds")
    loadgen.add_argument("--warmup", type=float, default=0.0, metavar="S", help="seconds sent before (default 0)")
    loadgen.add_argument("--seed", type=int, default=0, help="seed of the arrivals, targets and types (default 0)")
    loadgen.add_argument(
        "--job-types", nargs="+", metavar="TYPE=P", help="X-Job-Type of each request, drawn by proportion: a=3 b=1"
    )
    loadgen.add_argument("--shares", help="share of each target, comma-separated (default equal)")
    loadgen.add_argument("--path", default="/", help="path of every request (default /)")
    loadgen.add_argument("--method", default="GET", help="method of every request (default GET)")
    loadgen.add_argument("--timeout", type=float, default=30.0, metavar="S", help="per request (default 30)")
    loadgen.add_argument(
        "--max-in-flight", type=int, default=10_000, metavar="N", help="outstanding requests at most (default 10000)"
    )
    loadgen.add_argument("--batches", type=int, default=20, help="batches of the interval (default 20)")
    loadgen.add_argument("--output", metavar="FILE", help="also write the JSON result to FILE")
    loadgen.add_argument("--json", action="store_true", help="print the result as JSON")
    loadgen.add_argument("-q", "--quiet", action="store_true", help="no progress line on standard error")

    testbed = commands.add_parser(
        "testbed", help="a scenario live (backends, hetlb serve, loadgen) and simulated, side by side"
    )
    testbed.set_defaults(handler=live_command)
    testbed.add_argument("scenario", metavar="SCENARIO.toml", help="[system], [testbed] and [run] tables")
    testbed.add_argument(
        "--compare", metavar="LIST", help="also HAProxy and/or nginx on the same backends: haproxy,nginx"
    )
    testbed.add_argument("--out", default="testbed-out", help="folder for the CSV, JSON and PNG (default %(default)s)")
    testbed.add_argument("-q", "--quiet", action="store_true", help="no progress on standard error")


# --- the parser -----------------------------------------------------------------------------------


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
    group.add_argument(
        "--dispatchers",
        type=int,
        metavar="M",
        help="number of dispatchers (default 1); in the continuous model each decides on its own estimates",
    )
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
    from hetlb.signals import update_help

    group.add_argument("--update", metavar="SIGNALS", help=update_help())
    group.add_argument(
        "--herd-window",
        type=float,
        metavar="T",
        help="continuous model with dispatchers: a decision herds when another dispatcher chose its server "
        "less than T earlier (default 0.1 N / arrival rate)",
    )
    for flag, kind in (
        ("--p-hat", float),
        ("--push-d", int),
        ("--push-trigger", str),
        ("--pull-trigger", str),
        ("--average", str),
        ("--empty-set", str),
    ):
        group.add_argument(flag, type=kind, help=policy_parameter_help(flag))
    for flag in ("--increment-on-dispatch", "--inclusive"):
        group.add_argument(flag, action="store_true", default=None, help=policy_parameter_help(flag))


def policy_parameter_help(flag: str) -> str:
    """The help of a flag that sets a policy parameter, from the policy registry."""
    from hetlb.policies import POLICIES

    name = flag.removeprefix("--").replace("-", "_")
    users = [spec for spec in POLICIES.values() if name in spec.parameters]
    if not users:
        return "a policy parameter (see `hetlb policies`)"
    default, text, _ = users[0].parameters[name]
    return f"{text} (default {default}; a parameter of {', '.join(spec.id for spec in users)})"


def add_serve_flags(parser) -> None:
    """The flags of ``hetlb serve``: the keys of hetlb.live.config.CONFIG_KEYS."""
    group = parser.add_argument_group("dispatcher (flags override --config)")
    group.add_argument("--config", metavar="FILE", help="TOML file with the same keys as these flags")
    group.add_argument(
        "--backend",
        action="append",
        metavar="SPEC",
        help="URL[,speed=S|auto][,types=A|B][,buffer=B] (repeatable; defaults: speed 1, every type, no buffer)",
    )
    group.add_argument("--listen", metavar="HOST:PORT", help="where dispatcher 0 listens (default 127.0.0.1:8000)")
    group.add_argument("--admin", metavar="HOST:PORT", help="admin listener of dispatcher 0: /metrics, /status, /ready")
    group.add_argument("--policy", metavar="ID", help="a live policy (hetlb policies lists them); default jsq")
    group.add_argument("--set", action="append", metavar="NAME=VALUE", help="a policy parameter (repeatable)")
    group.add_argument(
        "--d", type=int, metavar="D", help="servers pod and l-pod sample, and backends a push probes (default 2)"
    )
    group.add_argument("--p-hat", type=float, metavar="P", help="probability of a push probe per request (default 1)")
    from hetlb.signals import live_help

    group.add_argument("--signals", metavar="LIST", help=live_help())
    group.add_argument("--default-type", metavar="T", help="job type of a request without the type header")
    group.add_argument("--type-header", metavar="NAME", help="the header naming the job type (default X-Job-Type)")
    group.add_argument(
        "--type-prefix",
        action="append",
        metavar="PREFIX=TYPE",
        help="a path prefix that gives the job type (repeatable)",
    )
    group.add_argument(
        "--dispatchers", type=int, metavar="M", help="independent dispatcher processes on PORT+m (default 1)"
    )
    group.add_argument("--seed", type=int, metavar="S", help="seed of the decisions (default: from the system)")
    limits = parser.add_argument_group("limits and health")
    limits.add_argument("--timeout", metavar="DURATION", help="whole upstream call, e.g. 30s (default 30s)")
    limits.add_argument("--connect-timeout", metavar="DURATION", help="upstream connect (default 1s)")
    limits.add_argument("--drain", metavar="DURATION", help="time the requests in flight get at a stop (default 10s)")
    limits.add_argument(
        "--health-interval", metavar="DURATION", help="active GET /healthz checks, 0 for none (default 0.5s)"
    )
    limits.add_argument("--eject-after", type=int, metavar="K", help="consecutive failures that eject (default 3)")
    limits.add_argument(
        "--retries", type=int, metavar="N", help="retries of idempotent requests after a failure (default 0)"
    )
    limits.add_argument(
        "--max-body-bytes", type=int, metavar="B", help="request body limit, 413 beyond (default 16 MiB)"
    )
    limits.add_argument(
        "--max-header-bytes", type=int, metavar="B", help="request line and header limit (default 8190)"
    )
    limits.add_argument(
        "--max-in-flight", type=int, metavar="N", help="concurrent requests, 503 beyond (default 10000)"
    )


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="hetlb",
        description="Load balancing in heterogeneous server systems.",
        epilog="`hetlb COMMAND --help` lists a command's flags. Results go to standard output; progress and "
        "notices to standard error (--quiet silences them).",
    )
    parser.add_argument("--version", action="version", version=f"hetlb {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=ArgumentParser)

    simulate = commands.add_parser("simulate", help="simulate one scenario")
    simulate.set_defaults(handler=command_simulate)
    add_scenario_flags(simulate)
    add_policy_flags(simulate)
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
    run.add_argument(
        "--speed-bins", type=int, metavar="K", help="report eta and xi_2 of 002 in K equal-width speed bins"
    )
    run.add_argument(
        "--state-distribution",
        action="store_true",
        help="record the time-distribution of jobs and waiting jobs (CCDFs of X_{+1}, X_{+2} of 002; in --json)",
    )
    add_slotted_flags(simulate)
    add_output_flags(simulate, quiet=True, verbose="one line per replication on standard error (mean, events, seconds)")
    output = [group for group in simulate._action_groups if group.title == "output"][0]
    output.add_argument("--compact", action="store_true", help="with --json, on one line")
    output.add_argument(
        "--per-server",
        action="store_true",
        help="also list every server (speed, utilisation, mean queue length); with --json, the per-server "
        "arrays whatever the number of servers (by default up to 1000)",
    )

    exact = commands.add_parser("exact", help="exact CTMC solution of a small system (finite buffers)")
    exact.set_defaults(handler=command_exact)
    add_scenario_flags(exact, job_sizes=False)
    add_policy_flags(exact)
    add_output_flags(exact)

    bound = commands.add_parser("bound", help="the lower bound C*/lambda of Proposition 1 (000)")
    bound.set_defaults(handler=command_bound)
    add_scenario_flags(bound, buffer=False, job_sizes=False, graph=False)
    add_output_flags(bound)

    meanfield = commands.add_parser(
        "meanfield", help="the many-server (N -> infinity) limit on the complete graph, optionally beside a simulation"
    )
    meanfield.set_defaults(handler=command_meanfield)
    add_scenario_flags(meanfield, job_sizes=False, graph=False)
    add_policy_flags(meanfield)
    compare = meanfield.add_argument_group("comparison with the simulator")
    compare.add_argument("--compare", type=int, metavar="N", help="also simulate the fleet at N servers")
    compare.add_argument("--jobs", type=int, default=200_000, help="measured jobs per replication (default 200000)")
    compare.add_argument("--replications", type=int, default=5, help="replications (default 5)")
    compare.add_argument("--warmup", type=float, help="time discarded first (default: the limit ODE's relaxation time)")
    compare.add_argument("--seed", type=int, default=0, help="root seed (default 0)")
    add_output_flags(meanfield, quiet=True)

    placement = commands.add_parser(
        "place",
        help="the sparsest compatibility graph whose jfsq/jfiq mean response time stays within x%% of C*/lambda",
    )
    placement.set_defaults(handler=command_place)
    add_scenario_flags(placement, job_sizes=False, graph=False)
    group = placement.add_argument_group("placement")
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
    add_output_flags(placement, quiet=True)

    policies = commands.add_parser("policies", help="list the policies and their definitions")
    policies.set_defaults(handler=command_policies)
    policies.add_argument(
        "--check",
        nargs="*",
        metavar="ID",
        help="run the conformance check (hetlb.check_policy) of these policies, or of all; exit 1 if one fails",
    )
    add_output_flags(policies)

    sweep = commands.add_parser("sweep", help="run a sweep spec (TOML) on a process pool or a Dask cluster")
    sweep.set_defaults(handler=command_sweep)
    sweep.add_argument("spec", help="sweep spec TOML file")
    sweep.add_argument(
        "--executor", default=None, help="processes (default, all cores), processes:N, serial, or dask://host:port"
    )
    sweep.add_argument("--store", default="hetlb-results.sqlite", help="result store (default %(default)s)")
    sweep.add_argument(
        "--out", default="sweep-out", help="folder for runs/summary CSV and Parquet (default %(default)s)"
    )
    sweep.add_argument("--force", action="store_true", help="recompute runs already in the store")
    add_output_flags(sweep, quiet=True)

    store = commands.add_parser("store", help="list the sweeps in a result store, or print one as CSV")
    store.set_defaults(handler=command_store)
    store.add_argument("name", nargs="?", help="a sweep name (omit to list them)")
    store.add_argument("--store", default="hetlb-results.sqlite", help="result store (default %(default)s)")
    add_output_flags(store)

    plot = commands.add_parser("plot", help="plot a metric of a finished sweep against an axis")
    plot.set_defaults(handler=command_plot)
    plot.add_argument("sweep_dir", help="the --out folder of hetlb sweep")
    plot.add_argument("--x", required=True, help="axis column, e.g. system.load")
    plot.add_argument("--metric", default="mean_response_time", help="column to plot (default %(default)s)")
    plot.add_argument(
        "--by", help="one line per value of this axis (default policy.id when the sweep varies it; '' for one line)"
    )
    plot.add_argument("--bound", action="store_true", help="draw the speed lower bound C*/lambda")
    plot.add_argument("--output", help="PNG path (default SWEEP_DIR/METRIC.png)")

    reproduce = commands.add_parser(
        "reproduce",
        help="reproduce a paper's figure: CSV, PNG and claims.json",
        epilog=reproductions_epilog,  # type: ignore[arg-type]  # called by Parser.format_help, when help is shown
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    reproduce.set_defaults(handler=command_reproduce)
    reproduce.add_argument("name", help="the reproduction (listed below)")
    reproduce.add_argument(
        "--scale", choices=["quick", "paper"], default="quick", help="quick (default) or the paper's sizes"
    )
    reproduce.add_argument("--out", help="folder for the outputs (default reproductions/NAME)")
    reproduce.add_argument(
        "--set", action="append", metavar="NAME=VALUE", help="set an option, e.g. --set load=0.95 (repeatable)"
    )
    reproduce.add_argument(
        "--executor", default=None, help="processes (default), processes:N, serial or dask://host:port"
    )
    reproduce.add_argument("--store", default="hetlb-results.sqlite", help="result store (default %(default)s)")
    add_output_flags(reproduce, quiet=True)

    graph = commands.add_parser(
        "graph", help="a compatibility graph's statistics, the load it can carry and a search for Assumption 2 of 000"
    )
    graph.set_defaults(handler=command_graph)
    add_scenario_flags(graph, job_sizes=False)
    search = graph.add_argument_group("Assumption 2 of 000 (needs --buffer: b is the buffer size)")
    search.add_argument("--assumption2", action="store_true", help="search for the worst D_I of Assumption 2")
    search.add_argument(
        "--epsilon", type=float, help="epsilon of Assumption 2 (default beta_hat); implies --assumption2"
    )
    search.add_argument("--seed", type=int, help="seed of the search's random restarts (default 0)")
    add_output_flags(graph)

    tune = commands.add_parser(
        "tune", help="tune (p_fast, p_slow) of jsq-df-ds by a grid of simulations with common random numbers"
    )
    tune.set_defaults(handler=command_tune)
    add_scenario_flags(tune)
    grid = tune.add_argument_group("tuning")
    grid.add_argument("--d-fast", type=int, metavar="D", help="fast servers sampled, d_F (default 2)")
    grid.add_argument("--d-slow", type=int, metavar="D", help="slow servers sampled, d_S (default 2)")
    grid.add_argument("--grid", type=int, default=6, help="values of p_fast and of p_slow on [0, 1] (default 6)")
    grid.add_argument("--jobs", type=int, default=50_000, help="jobs per grid point (default 50000)")
    grid.add_argument("--warmup", type=float, default=0.0, help="warm-up, time units (default 0)")
    grid.add_argument("--seed", type=int, default=0, help="seed of every grid point (default 0)")
    grid.add_argument(
        "--max-blocking",
        type=float,
        default=1e-3,
        help="grid points losing more jobs than this are not eligible (default 0.001)",
    )
    add_output_flags(tune, quiet=True, verbose="one line per grid point on standard error")

    diffusion = commands.add_parser(
        "diffusion",
        help="stationary means of the diffusion limits of 002 (JFSQ, "
        "random ties, JFIQ, ...) in the Halfin-Whitt regime",
    )
    diffusion.set_defaults(handler=command_diffusion)
    diffusion.add_argument("--policy", default="jfsq", help="jfsq, jsq, jsq-lisf, jsq-fiq or jssq (default jfsq)")
    law = diffusion.add_mutually_exclusive_group(required=True)
    law.add_argument(
        "--speed-distribution",
        metavar="KIND:KEY=VALUE,...",
        help="the law F of the speeds: uniform:low=0.7,high=1.3, or discrete:speeds=[0.8,1.2],probabilities=[0.5,0.5]",
    )
    law.add_argument("--speeds", help='or the empirical F of speeds such as "250x0.8,250x1.2"')
    diffusion.add_argument(
        "--excess-capacity", type=float, default=1.0, metavar="C", help="c = varsigma + nu (default 1)"
    )
    diffusion.add_argument("--buffer", type=int, help="b (1: the loss system; default infinite)")
    diffusion.add_argument("--paths", type=int, default=256, help="independent paths (default 256)")
    diffusion.add_argument("--seed", type=int, default=0, help="seed of the paths (default 0)")
    add_output_flags(diffusion)

    compile_parser = commands.add_parser(
        "compile",
        help="compile the continuous-time kernel ahead of time, so that short simulations start without numba",
        description="Compile the continuous-time kernel ahead of time for this machine and hetlb's sources "
        "(seconds to a minute, once); later `hetlb simulate` runs start without importing numba. "
        "Also compiles the many-dispatcher kernel into numba's cache. Does nothing for a kernel that "
        "is up to date.",
    )
    compile_parser.set_defaults(handler=command_compile)
    compile_parser.add_argument("--quiet", action="store_true", help="no compiler output")

    demo = commands.add_parser("demo", help="compare policies on a heterogeneous system: table and plot")
    demo.set_defaults(handler=command_demo)
    demo.add_argument("--out", default="out", help="folder for the CSV and PNG (default out)")
    demo.add_argument("--jobs", type=int, default=100_000, help="jobs per run (default 100000)")
    demo.add_argument("--replications", type=int, default=3, help="replications per point (default 3)")
    add_output_flags(demo, quiet=True, verbose="one line per finished run on standard error")

    serve = commands.add_parser(
        "serve",
        help="a reverse proxy that routes HTTP requests to backends with a policy (docs/reference/serve.md)",
    )
    serve.set_defaults(handler=command_serve)
    add_serve_flags(serve)
    add_output_flags(serve, json_output=False, quiet=True)
    add_live_commands(commands)  # backend, loadgen, testbed
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:  # a bare `hetlb`: the usage, and the exit status of a usage error
        parser.print_help(sys.stderr)
        return EXIT_INPUT_ERROR
    args = parser.parse_args(argv)
    if args.command is None:
        parser.error("give a command (hetlb --help lists them)")
    try:
        return args.handler(args)
    except InputError as error:
        print(f"hetlb: error: {error}", file=sys.stderr)
        return EXIT_INPUT_ERROR
    except KeyboardInterrupt as interrupt:  # Ctrl-C; during a sweep SIGTERM too, with what it stored
        print(f"hetlb: {str(interrupt) or 'interrupted'}", file=sys.stderr)
        return getattr(interrupt, "exit_status", 130)
    except BrokenPipeError:  # the reader of standard output stopped early (e.g. `| head`)
        sys.stdout = open(os.devnull, "w")
        return 0


if __name__ == "__main__":
    sys.exit(main())
