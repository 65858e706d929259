"""What the commands share: the parser class, the flags of a scenario, a policy, the output and
the model, the scenario they build, and the notices and progress on standard error.

A flag group's heading says which model reads its flags. The module imports argparse and what
importing hetlb has loaded already; a helper that needs more imports it when it runs.
"""

from __future__ import annotations

import argparse
import json
import re
import sys

from hetlb import validation
from hetlb.cli.text import result_line
from hetlb.documentation import page
from hetlb.errors import InputError, one_line

EXIT_INPUT_ERROR = 2
"""The exit status of a user error, argparse's included."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line, takes flags only as written (no prefixes:
    ``--b`` is not ``--buffer``), whose ``epilog`` may be a function called when the help is
    shown (to read a registry only then), and whose help ends with the file of the command's page
    of the docs, ``documentation``, on a line of its own (not wrapped, so that it can be copied)."""

    def __init__(self, *args, documentation: str | None = None, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self.documentation = documentation

    def error(self, message):
        head = f"{self.prog}: error: "
        self.exit(EXIT_INPUT_ERROR, f"{head}{one_line(message, 400 - len(head))}\n")  # 400 characters at most

    def format_help(self) -> str:
        if callable(self.epilog):
            self.epilog = self.epilog()
        text = super().format_help()
        return f"{text}\ndocumentation: {self.documentation}\n" if self.documentation else text


def add_scenario_flags(
    parser,
    *,
    rate: bool = True,
    buffer: bool = True,
    job_sizes: bool = True,
    graph: bool = True,
    servers: bool = True,
    caches: bool = False,
) -> None:
    """The flags that describe a system (and --config), as far as the command uses them:
    ``servers`` adds the servers' concurrency and rate curve, ``rate`` the arrival rate and
    process, ``caches`` the servers' prefix caches and the jobs' prompts."""
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
        group.add_argument(
            "--arrivals",
            metavar="PROCESS",
            help="arrival process: poisson (default), batch:mean=B or mmpp:ratio=R,on=T1,off=T2; "
            "in the slotted model the per-slot counts: poisson, bernoulli, binomial:K",
        )
    if servers:
        group.add_argument(
            "--concurrency",
            metavar="SPEC",
            help='jobs a server serves at once, in the speeds\' syntax: "8" or "50x8,50x32" (inf: unlimited; default 1)',
        )
        group.add_argument(
            "--rate-curve",
            metavar="CURVE",
            help="total rate with b jobs in service, in units of the speed: independent (b, default), shared (1), "
            "saturating:alpha=A (b/(1+A(b-1))) or table:v1,v2,...",
        )
    if caches:
        group.add_argument(
            "--cache-blocks",
            metavar="SPEC",
            help='blocks of each server\'s prefix cache, in the speeds\' syntax: "64" or "8x64,8x16" (default: no cache)',
        )
        group.add_argument(
            "--prompts",
            metavar="KIND",
            help="the jobs' prompts as chains of blocks: shared:count=K,blocks=B,zipf=S,unique=U, "
            "sessions:turns=T,blocks=B,think=Z or trace:FILE (Mooncake JSONL); with --cache-blocks",
        )
        group.add_argument(
            "--prefill-work",
            type=float,
            metavar="W",
            help="prefill work of one block not in the cache, in units of the mean job size (default 0)",
        )
        group.add_argument(
            "--prefill-law",
            choices=("deterministic", "exponential"),
            help="a job's prefill work: exactly W per missing block (default) or exponential of that mean",
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
            metavar="KIND",
            help="job-size distribution, mean 1: exponential (default), deterministic, hyperexponential, "
            "lognormal, pareto, weibull (these four with --scv) or empirical:FILE",
        )
        group.add_argument(
            "--scv",
            type=float,
            help="squared coefficient of variation of hyperexponential, lognormal, pareto or weibull sizes",
        )
    if graph:
        group.add_argument(
            "--graph",
            metavar="KIND[:KEY=VALUE,...]",
            help="a graph construction, e.g. fig3:ports_exponent=1.2,seed=1 or random:p=0.1,ports=50 "
            "(kinds: complete, random, fig3, theorem2, theorem3)",
        )


def add_policy_flags(parser) -> None:
    """--policy, --d and --set: the policy and its parameters."""
    group = parser.add_argument_group("policy (flags override --config)")
    group.add_argument("--policy", metavar="ID", help="policy id (see `hetlb policies`); default jsq")
    group.add_argument("--d", type=int, metavar="D", help="servers sampled by pod")
    group.add_argument(
        "--set",
        action="append",
        metavar="NAME=VALUE",
        help="a policy parameter, e.g. --set p_fast=0.3 or --set p_hat=0.01 (repeatable)",
    )
    add_plugin_flag(group)


def add_plugin_flag(parser) -> None:
    """--plugin: a module or .py file that registers policies of its own (hetlb.load_plugins)."""
    parser.add_argument(
        "--plugin",
        action="append",
        metavar="MODULE",
        help=f"import a module or a .py file that registers policies (repeatable; {page('how-to/your-own-policy.md')})",
    )


def load_plugin_flags(args) -> None:
    """Import the modules of --plugin, before any policy id is read."""
    if getattr(args, "plugin", None):
        from hetlb.policies.plugins import load_plugins

        load_plugins(args.plugin, "--plugin")


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


def add_model_flags(parser) -> None:
    """--model and the flags of each model, under headings that say which model reads them: the
    dispatchers and their updates (both models), the herd window (the continuous model), the
    slotted model's arrivals, services, slots and LED parameters (paper 001)."""
    both = parser.add_argument_group("model and dispatchers (both models)")
    both.add_argument(
        "--model",
        choices=["continuous", "slotted"],
        help="continuous time (default) or the slotted model (hetlb.simulate_slotted)",
    )
    both.add_argument(
        "--dispatchers",
        type=int,
        metavar="M",
        help="number of dispatchers (default 1); in the continuous model each decides on its own estimates",
    )
    from hetlb.signals import update_help

    both.add_argument("--update", metavar="SIGNALS", help=update_help())
    continuous = parser.add_argument_group("continuous model with dispatchers")
    continuous.add_argument(
        "--herd-window",
        type=float,
        metavar="T",
        help="continuous model with dispatchers: a decision herds when another dispatcher chose its server "
        "less than T earlier (default 0.1 N / arrival rate)",
    )
    slotted = parser.add_argument_group(
        "slotted model of paper 001 (with --model slotted; --speeds are mean "
        "services per slot, --arrival-rate is jobs per slot, --warmup counts slots)"
    )
    slotted.add_argument("--service", help="per-slot services: poisson (default), bernoulli, binomial:K")
    slotted.add_argument("--routing", help="slot (one server per dispatcher and slot, default) or job")
    slotted.add_argument(
        "--ties",
        help="independent (a tie-break draw per decision, default) or shared (one per "
        "slot: dispatchers seeing the same least values agree, as a herd)",
    )
    slotted.add_argument("--slots", type=int, help="measured slots after the warm-up (default 100000)")
    slotted.add_argument("--preference", action="store_true", help="measure the dispatching preference Delta")
    led = parser.add_argument_group("LED policies of paper 001 (slotted model)")
    for flag, kind in (
        ("--p-hat", float),
        ("--push-d", int),
        ("--push-trigger", str),
        ("--pull-trigger", str),
        ("--average", str),
        ("--empty-set", str),
    ):
        led.add_argument(flag, type=kind, help=policy_parameter_help(flag))
    for flag in ("--increment-on-dispatch", "--inclusive"):
        led.add_argument(flag, action="store_true", default=None, help=policy_parameter_help(flag))


def policy_parameter_help(flag: str) -> str:
    """The help of a flag that sets a policy parameter, from the policy registry."""
    from hetlb.policies import POLICIES

    name = flag.removeprefix("--").replace("-", "_")
    users = [spec for spec in POLICIES.values() if name in spec.parameters]
    if not users:
        return "a policy parameter (see `hetlb policies`)"
    default, text, _ = users[0].parameters[name]
    return f"{text} (default {default}; a parameter of {', '.join(spec.id for spec in users)})"


def scenario_from_args(args, continuous_only: bool = False, with_policy: bool = True):
    """Merge --config and the flags into a Scenario (either model, unless ``continuous_only``);
    without ``with_policy``, the system and run alone (the policy left to the default: a command
    that reads the policy itself, as ``meanfield`` with policies only the theory has)."""
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
            "concurrency",
            "rate_curve",
            "model",
            "dispatchers",
            "arrivals",
            "service",
            "routing",
            "ties",
            "cache_blocks",
            "prompts",
            "prefill_work",
            "prefill_law",
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
    load_plugin_flags(args)
    policy = policy_from_args(args, data, system.get("model", "continuous")) if with_policy else {}
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


def policy_from_args(args, data: dict, model: str = "continuous") -> dict:
    """The [policy] table of --config (``data``) with --policy, --d, --set and the LED flags over it;
    ``model``: the system's (in continuous time the updates are --update, never ``--set update``)."""
    flag = lambda name: getattr(args, name, None)  # noqa: E731
    policy = dict(validation.table("policy", data.get("policy", {})))
    if flag("policy") is not None:  # a new policy keeps only the plugins of --config
        policy = {"id": args.policy, **({"plugins": policy["plugins"]} if "plugins" in policy else {})}
    if flag("d") is not None:
        policy["d"] = args.d
    assignments = dict(parse_assignment(text, "--set") for text in flag("set") or [])
    if "update" in assignments and model != "slotted":
        raise InputError(
            "--set update", "the updates of dispatchers in continuous time are --update, not a policy parameter"
        )
    policy.update(assignments)
    policy.update({name: flag(name) for name in LED_FLAGS if flag(name) is not None})
    return policy


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
"""The flags of ``add_model_flags`` that become keys of [policy]: the update (both models) and the
parameters of the LED policies (slotted model)."""


FIELD_FLAGS = {
    "speed": ("--speeds",),
    "arrival_rate": ("--arrival-rate", "--load", "--excess-capacity"),
    "speed_mix": ("--n-servers",),
    "n_types": ("--graph",),
}
"""The flags that set a field of hetlb's Python and TOML names, where its flag is not the field's
own name written ``--like-this`` (the key ``run.jobs`` is --jobs): the first of them that the user typed
names the error (``arrival_rate`` is --load when the rate came from --load)."""


def flag_field(field: str, argv) -> str:
    """The flag of ``argv`` (a command line, as typed) that set the value an InputError's ``field``
    names: the key's own flag or one of FIELD_FLAGS (``run.jobs`` is --jobs); for a key inside a
    flag's value, that flag and the key (``--graph random:p=3``: ``--graph p``; ``--update
    push:p_hat=2``: ``--update push.p_hat``); for a field that starts with a flag's name, that flag
    (``backend 2.url`` is ``--backend 2.url``). ``field`` itself when the user typed none of them:
    the value came from --config or a default."""
    if field.startswith("-"):  # a command's own check that names its flag already
        return field
    typed: dict[str, list] = {}
    words = list(argv)
    for i, word in enumerate(words):
        if word.startswith("--"):
            flag, sep, value = word.partition("=")
            given = value if sep else (words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("--") else "")
            typed.setdefault(flag, []).append(given)
    first, rest = re.match(r"([a-z_]*)[ .]?(.*)", field).groups()  # type: ignore[union-attr]
    head = f"--{first.replace('_', '-')}"
    own = f"{head} {rest}" if rest else head  # the field, named by the flag its first word is
    name = re.split(r"[ .]", field)[-1]  # system.speeds, run.jobs, policy pod.d: the key itself
    for flag in (f"--{name.replace('_', '-')}", *FIELD_FLAGS.get(name, ())):
        if flag in typed:
            return flag
    key = re.compile(rf"(^|[:,])\s*{re.escape(name)}\s*=")
    for flag, values in typed.items():
        if any(key.search(value) for value in values):
            return own if flag == head else f"{flag} {name}"
    return own if head in typed else field


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


def quiet(args) -> bool:
    """Whether --quiet was given (False for a command without it)."""
    return bool(getattr(args, "quiet", False))


def verbose(args) -> bool:
    """Whether --verbose was given (False for a command without it)."""
    return bool(getattr(args, "verbose", False))


def say(args, text: str) -> None:
    """A notice on standard error, unless --quiet."""
    if not quiet(args):
        print(f"hetlb: {text}", file=sys.stderr, flush=True)


def notify_compiling(args, models=("continuous",)) -> None:
    """Say so when the simulation kernels of ``models`` have no compiled code in numba's cache:
    their first call then compiles them, which takes seconds (once; later processes load them).
    Silent with --quiet; --verbose adds the cache's folder."""
    from hetlb.simulation.simulate import MODELS, announce_compiling, announced

    announce_compiling(models, enabled=not quiet(args), where=verbose(args), again=True)
    if quiet(args):  # nor the simulations the command runs
        announced.update(MODELS)


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


# --- hetlb serve and hetlb pick ------------------------------------------------------------------


def add_dispatcher_flags(group, listen_help: str) -> None:
    """The flags of a dispatcher's state and decisions, those of hetlb serve and hetlb pick alike."""
    group.add_argument("--config", metavar="FILE", help="TOML file with the same keys as these flags")
    group.add_argument(
        "--backend",
        action="append",
        metavar="SPEC",
        help="URL[,speed=S|auto][,types=A|B|discover][,buffer=B] (repeatable; defaults: speed 1, every type, "
        "no buffer; discover: the ids its GET /v1/models lists)",
    )
    group.add_argument(
        "--backends-file",
        metavar="FILE",
        help="TOML or JSON file with a backends list, applied again each time it changes (instead of --backend)",
    )
    group.add_argument(
        "--discover-interval",
        metavar="DURATION",
        help="how often types=discover backends' GET /v1/models is read again (default 5s)",
    )
    group.add_argument("--listen", metavar="HOST:PORT", help=listen_help)
    group.add_argument(
        "--admin", metavar="HOST:PORT", help="admin listener of dispatcher 0: /metrics, /status, /ready, /backends"
    )
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
        "--type-body-field",
        metavar="FIELD",
        help="the top-level field of a JSON body naming the job type, before the header (model for OpenAI APIs)",
    )
    group.add_argument(
        "--type-prefix",
        action="append",
        metavar="PREFIX=TYPE",
        help="a path prefix that gives the job type (repeatable)",
    )
    group.add_argument("--seed", type=int, metavar="S", help="seed of the decisions (default: from the system)")


def add_health_flags(limits) -> None:
    """The flags of health checks, ejection, draining and overload, of hetlb serve and hetlb pick alike."""
    limits.add_argument("--drain", metavar="DURATION", help="time the requests in flight get at a stop (default 10s)")
    limits.add_argument(
        "--health-interval", metavar="DURATION", help="active GET /healthz checks, 0 for none (default 0.5s)"
    )
    limits.add_argument("--eject-after", type=int, metavar="K", help="consecutive failures that eject (default 3)")
    limits.add_argument(
        "--max-in-flight", type=int, metavar="N", help="concurrent requests, 503 beyond (default 10000)"
    )


def dispatcher_overrides(args) -> dict:
    """The configuration's keys that the flags of add_dispatcher_flags and add_health_flags give."""
    if args.set and args.policy is None:
        raise InputError("--set", "give the policy with --policy ID")
    parameters = dict(parse_assignment(text, "--set") for text in args.set or [])
    policy = None if args.policy is None else {"id": args.policy, **parameters}
    return {
        "backends": args.backend,
        "backends_file": args.backends_file,
        "discover_interval": args.discover_interval,
        "policy": policy,
        "listen": args.listen,
        "admin": args.admin,
        "signals": args.signals,
        "p_hat": args.p_hat,
        "d": args.d,
        "default_type": args.default_type,
        "type_header": args.type_header,
        "type_body_field": args.type_body_field,
        "type_prefixes": args.type_prefix,
        "seed": args.seed,
        "drain": args.drain,
        "health_interval": args.health_interval,
        "eject_after": args.eject_after,
        "max_in_flight": args.max_in_flight,
    }
