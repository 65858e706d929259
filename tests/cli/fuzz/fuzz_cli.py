"""Fuzzing the command line: seeded, mutated invocations of every ``hetlb`` command.

Each case starts from a small valid invocation of one command (a few servers, a few hundred jobs)
and applies up to three mutations: numbers (0, -1, 1e308, 1e-320, nan, inf, 2**64, '', 'x', long
strings), lists (empty, wrong separators, 99999999999999999999x1), ids (unknown policies, policies
of the other model), flags (missing values, repeated, unknown, abbreviated, of another command),
TOML files (wrong types, missing or unknown tables and keys, binary, UTF-16, deep nesting), paths
(missing, a directory, /dev/null, /dev/zero, a file where a folder is expected) and combinations.
These inputs, and the options of the small valid invocations, are data in corpus.toml beside this
file (its header explains the notation for values TOML cannot hold); this module holds the logic.
The live commands are among them: serve (flags, --config, a backends file) and backend are sent
SIGTERM as soon as they listen and must exit 0; loadgen sends to the discard port; a valid
testbed runs only in campaigns.

Cases run in-process through ``hetlb.cli.main`` in child processes, a fresh child per batch, each
child with a capped address space and each case under a time limit; a child that does not answer
in time is killed with every process it started, and its case counts as a hang. An outcome is
fine when the command exits 0 with output (or 1 with a verdict: ``policies --check`` and
``reproduce``), or exits 2 with one line ``hetlb: error: field: rule`` on standard error (after
argparse's usage, if any). It fails on a traceback, a hang, a crash of the child, exit 0 on an input
the generator knows is invalid, an error line over 400 characters, anything else on standard error
before the error line (a warning, a notice), or any other exit status.

Whether an input is certainly invalid is decided, conservatively, from the final command line: the
command's own argparse parser reads it (a usage error is invalid by definition), then rules that
hold whatever the implementation (a count below 1, a probability above 1, nan, an unknown policy,
a TOML file that tomllib cannot read...) judge the values. Cases whose valid reading would be
slow (a million jobs, a process pool, the paper scale) run only in campaigns, not in the fixed set.

    python tests/cli/fuzz/fuzz_cli.py --cases 3000 --seed 1   # a campaign: failures grouped by cause
    python tests/cli/fuzz/fuzz_cli.py --fixed                  # the set tests/cli/test_fuzz_cli.py runs
    python tests/cli/fuzz/fuzz_cli.py --replay 1:417           # one case again, with its full output
    python tests/cli/fuzz/fuzz_cli.py --cases 2000 --seed 26 --templates live   # the live commands and the newer ones
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import datetime
import io
import itertools
import json
import math
import multiprocessing
import os
import random
import re
import resource
import shlex
import shutil
import signal
import sys
import tempfile
import threading
import time
import tomllib
import traceback
import warnings
from collections import deque
from dataclasses import dataclass, field
from functools import cache
from multiprocessing.connection import wait
from pathlib import Path

if __name__ == "__main__":  # run as a script from a checkout: import hetlb from src/
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "src"))

FIXED_SEED = 20240
"""The seed of the fixed set of tests/cli/test_fuzz_cli.py."""
FIXED_CASES = 1000
CASE_SECONDS = 20.0
"""Time limit of one case: far above what a valid case of the generator takes (well under 1 s)."""
GRACE_SECONDS = 10.0
"""How much longer than the limit a child may stay silent before it is killed."""
MEMORY_MB = 3072
"""Address-space limit of each child (importing hetlb with numba takes about 800 MB of it)."""
BATCH = 50
"""Cases per child process."""
MAX_ERROR_CHARS = 400

SERVING = ("serve", "pick", "backend")
"""Commands that serve until they are stopped: a case of one is sent SIGTERM as soon as it has its
own handler for it (stop_when_serving), and is fine when it then exits 0."""
FAILURES = (
    "traceback",
    "hang",
    "too-slow",
    "crash",
    "nonsense-accepted",
    "long-error",
    "unclean-error",
    "bad-exit",
)
"""What a case may fail with; "too-slow" is a valid input that asks for a long run (the judge's
reason given: a billion jobs) and did not finish in the time limit, told apart from a hang."""
FINE = ("ok", "verdict", "error")
VERDICT_COMMANDS = ("policies", "reproduce")
"""Commands whose exit status 1 is a verdict (a failed conformance check or claim), not an error."""
ERROR_LINE = re.compile(r"^hetlb(?: [\w-]+)?: error: ")
NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")  # argparse's test for a negative number
INT64 = 2**63

# --- the project's registries --------------------------------------------------------------------


@cache
def registry() -> dict:
    """Ids, models and parameters of the policies, reproductions, graph and speed-law keys."""
    from hetlb.experiments.reproduce import REPRODUCTIONS
    from hetlb.graphs.constructions import _GRAPH_KEYS
    from hetlb.model.speed_distributions import SPEED_DISTRIBUTIONS
    from hetlb.policies import POLICIES
    from hetlb.policies.registry import describe_kind
    from hetlb.scenario import RUN_KEYS, SYSTEM_KEYS

    return {
        "policies": {
            pid: {
                "models": tuple(spec.models),
                "exact": spec.exact_rule is not None,
                "diffusion": spec.diffusion_limit is not None,
                "params": {name: describe_kind(rule) for name, (_, _, rule) in spec.parameters.items()},
                "on_estimates": spec.decides_on_estimates,
            }
            for pid, spec in POLICIES.items()
        },
        "reproductions": {name: dict(r.options) for name, r in REPRODUCTIONS.items()},
        "graph_keys": {kind: set(keys) for kind, keys in _GRAPH_KEYS.items()},
        "speed_laws": {kind: set(keys) for kind, keys in SPEED_DISTRIBUTIONS.items()},
        "system_keys": {model: set(keys) for model, keys in SYSTEM_KEYS.items()},
        "run_keys": {model: set(keys) for model, keys in RUN_KEYS.items()},
    }


def policy_ids(model: str | None = None) -> list[str]:
    return [pid for pid, p in registry()["policies"].items() if model is None or model in p["models"]]


@cache
def parser():
    from hetlb.cli import build_parser

    return build_parser()


@cache
def command_flags() -> dict[str, list[str]]:
    """Every command's option strings, from the parser."""
    (commands,) = [a for a in parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return {
        name: sorted({s for a in sub._actions for s in a.option_strings if s.startswith("--") and s != "--help"})
        for name, sub in commands.choices.items()
    }


# --- TOML ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Raw:
    """TOML text written as is (dates, times, deep nesting)."""

    text: str


BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def toml_key(key: str) -> str:
    return key if BARE_KEY.match(key) else json.dumps(key)


def toml_value(value) -> str:
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(value)


def toml_text(doc: dict) -> str:
    """A document: scalars first, then one [section] per table, nested tables as [a.b]."""
    lines: list[str] = []

    def emit(path, table):
        if path:
            lines.append("[" + ".".join(toml_key(p) for p in path) + "]")
        for key, value in table.items():
            if not isinstance(value, dict):
                lines.append(f"{toml_key(key)} = {toml_value(value)}")
        for key, value in table.items():
            if isinstance(value, dict):
                emit([*path, key], value)

    emit([], doc)
    return "\n".join(lines) + "\n"


# --- cases ----------------------------------------------------------------------------------------


@dataclass
class Arg:
    """One flag of a command line (``flag`` None: a positional; ``value`` None: no value)."""

    flag: str | None
    value: str | None = None
    kind: str = ""
    keep: bool = False  # never dropped: the cost of the valid case depends on it
    equals: bool = False  # written --flag=value

    def tokens(self) -> list[str]:
        if self.flag is None:
            return [self.value]
        if self.value is None:
            return [self.flag]
        return [f"{self.flag}={self.value}"] if self.equals else [self.flag, self.value]


@dataclass
class Draft:
    """A case being built: a command, its flags, the files it refers to."""

    base: str
    command: str | None
    args: list[Arg]
    files: dict = field(default_factory=dict)  # name -> ("toml", doc) | ("bytes", b) | ("dir",) | ...
    toml: str | None = None  # the file whose document the TOML mutations edit
    labels: list = field(default_factory=list)
    campaign: list = field(default_factory=list)  # why the case is left out of the fixed set

    def argv(self) -> list[str]:
        head = [self.command] if self.command else []
        return head + [token for arg in self.args for token in arg.tokens()]


@dataclass
class Case:
    """A command line with its files, reproducible from ``id`` (seed:index)."""

    seed: int
    index: int
    base: str
    command: str
    argv: list[str]
    files: dict  # name -> ("bytes", b) | ("dir",) | ("fifo",) | ("loop",) | ("fixture", name)
    labels: list[str]
    invalid: list[tuple[str, str]]  # (rule, detail): why the input is certainly invalid
    costly: list[str]  # why the valid reading could be slow: campaigns only

    @property
    def id(self) -> str:
        return f"{self.seed}:{self.index}"

    @property
    def label(self) -> str:
        return f"{self.base}" + (" | " + "; ".join(self.labels) if self.labels else "")

    def shell(self) -> str:
        return "hetlb " + " ".join(shell_quote(token) for token in self.argv)


def shell_quote(token: str, limit: int | None = None) -> str:
    """A token as the shell reads it; ``limit`` shortens long ones for a summary."""
    if limit and len(token) > limit:
        return shell_quote(token[: limit // 2]) + f"...[{len(token)} chars]"
    if token.isprintable():
        return shlex.quote(token)
    raw = os.fsencode(token)
    return "$'" + "".join(chr(b) if 32 <= b < 127 and chr(b) not in "\\'" else f"\\x{b:02x}" for b in raw) + "'"


def short_argv(argv: list[str], limit: int = 60) -> str:
    return "hetlb " + " ".join(shell_quote(token, limit) for token in argv)


# --- the corpus: the literal inputs, from corpus.toml beside this file ---------------------------------

CORPUS_FILE = Path(__file__).with_name("corpus.toml")
EXPANSION = re.compile(r"\$(?:\((\d+)\*\*(\d+)([+-]\d+)?\)|\(([^*()]+)\*(\d+)\)|bytes\(([0-9a-f ]+)\))")
WHOLE_INT = re.compile(r"^\$int\((\d+)\*\*(\d+)([+-]\d+)?\)$")
WHOLE_RANGE = re.compile(r"^\$range\((\d+)\)$")


def expand(value):
    """A corpus value with its notation written out (the notation is in corpus.toml's header)."""
    if isinstance(value, dict):
        return {key: expand(item) for key, item in value.items()}
    if isinstance(value, list):
        return [expand(item) for item in value]
    if isinstance(value, (datetime.date, datetime.time)):  # datetime is a date
        return Raw(value.isoformat().replace("+00:00", "Z"))
    if not isinstance(value, str) or "$" not in value:
        return value
    if whole := WHOLE_INT.match(value):
        base, exponent, offset = whole.groups()
        return int(base) ** int(exponent) + int(offset or 0)
    if whole := WHOLE_RANGE.match(value):
        return list(range(int(whole[1])))

    def written(part: re.Match) -> str:
        base, exponent, offset, text, times, hex_bytes = part.groups()
        if base:
            return str(int(base) ** int(exponent) + int(offset or 0))
        if text:
            return text * int(times)
        return os.fsdecode(bytes.fromhex(hex_bytes))

    text = EXPANSION.sub(written, value)
    if "$" in EXPANSION.sub("", value):
        raise ValueError(f"{CORPUS_FILE.name}: {value[:40]!r}: a '$' that is not of the notation")
    return text


def load_corpus(path: Path = CORPUS_FILE) -> dict:
    with path.open("rb") as file:
        return expand(tomllib.load(file))


CORPUS = load_corpus()
NON_UTF8 = CORPUS["non_utf8"]
GENERIC = CORPUS["generic"]
POOLS = CORPUS["pools"]
ENUMS = CORPUS["enums"]
BAD_ENUM = CORPUS["bad_enum"]
FLAG_KINDS = {flag: kind for kind, flags in CORPUS["flag_kinds"].items() for flag in flags} | dict.fromkeys(
    ENUMS, "enum"
)
TOML_VALUES = CORPUS["toml"]["values"]
"""Values a TOML mutation writes in place of a key's value."""
PATHS = CORPUS["paths"]
"""Paths a path mutation tries: each special name is made in the case's folder (ensure_special)."""
FIXTURE_SPEC = CORPUS["fixture"]["spec"]
FIXTURE_SWEEP = FIXTURE_SPEC["name"]
FIXTURE_COLUMNS = set(CORPUS["fixture"]["columns"])
"""Columns the fixture sweep's summary certainly has (others may exist)."""
FIXTURE_METRICS = set(CORPUS["fixture"]["metrics"])
"""Columns of the fixture summary that have an interval (_ci_low, _ci_high)."""
TINY_REPRODUCTIONS = CORPUS["tiny_reproductions"]
"""Options that make a reproduction run in about a second (its claims may then fail: exit 1)."""


# --- templates: small valid invocations of each command -----------------------------------------------

TEMPLATE = CORPUS["templates"]
"""The options of each template, in the corpus' form of an option (see option)."""


def A(flag, value=None, kind=None, keep=False) -> Arg:
    """An Arg of a template, its kind from FLAG_KINDS."""
    return Arg(flag, value, kind if kind is not None else FLAG_KINDS.get(flag, ""), keep)


def option(rng, text: str) -> Arg:
    """An Arg from the corpus' "--flag value" or "--flag": "a|b" draws the value from a and b, and
    a leading "!" marks an option never dropped (the cost of the valid case depends on it)."""
    keep = text.startswith("!")
    flag, _, value = text.removeprefix("!").partition(" ")
    if "|" in value:
        value = rng.choice(value.split("|"))
    return A(flag, value or None, keep=keep)


def options(rng, texts: list[str]) -> list[Arg]:
    return [option(rng, text) for text in texts]


def add_some(rng, args: list[Arg], groups: list[list[str]], counts: list[int]) -> None:
    """A few of ``groups`` (how many: drawn from ``counts``) appended to ``args``."""
    built = [options(rng, group) for group in groups]
    for extra in rng.sample(built, rng.choice(counts)):
        args += extra


def speeds_args(rng, model="continuous") -> list[Arg]:
    fleet = TEMPLATE["fleet"]
    if model == "continuous" and rng.random() < 0.2:
        law = rng.choice(POOLS["law"][:5])
        return [A("--n-servers", rng.choice(fleet["n_servers"])), A("--speed-distribution", law)]
    return [A("--speeds", rng.choice(fleet["speeds"] if model == "continuous" else fleet["slotted_speeds"]))]


def rate_arg(rng) -> Arg:
    rates = TEMPLATE["rates"]
    return rng.choice([A("--load", rng.choice(rates["loads"])), *options(rng, rates["others"])])


def continuous_policy_args(rng) -> list[Arg]:
    policy = TEMPLATE["policy"]
    pid = rng.choice(policy_ids("continuous"))
    args = [A("--policy", pid), *options(rng, policy["options"].get(pid, []))]
    if pid in policy["sets"] and rng.random() < 0.5:
        args.append(A("--set", rng.choice(policy["sets"][pid])))
    return args


def t_simulate(rng) -> Draft:
    template = TEMPLATE["simulate"]
    args = speeds_args(rng) + [rate_arg(rng)] + continuous_policy_args(rng)
    args += options(rng, template["length"] if rng.random() < 0.85 else template["other_length"])
    add_some(rng, args, template["extras"], [0, 1, 1, 2])
    if rng.random() < 0.6 and "-v" not in (arg.flag for arg in args):  # -q and -v exclude each other
        args.append(A("-q"))
    return Draft("simulate", "simulate", args)


def t_slotted(rng) -> Draft:
    template = TEMPLATE["slotted"]
    pid = rng.choice(policy_ids("slotted"))
    args = options(rng, template["base"]) + [A("--policy", pid)] + options(rng, template["length"])
    args += options(rng, template["policy_options"].get(pid, []))
    extras = list(template["extras"])
    if pid.startswith("l-"):
        extras += template["led_extras"]
    extras += template["policy_extras"].get(pid, [])
    add_some(rng, args, extras, [0, 1, 2, 3])
    args.append(A("-q"))
    return Draft("simulate-slotted", "simulate", args)


def scenario_doc(rng, command: str) -> dict:
    template = TEMPLATE["config"]
    system = {"speeds": rng.choice(template["speeds"]), "load": template["load"]}
    if rng.random() < 0.3:
        system = copy.deepcopy(template["by_arrival_rate"])
    if rng.random() < 0.2:
        system = copy.deepcopy(template["by_speed_mix"])
    if command in ("exact", "graph") or rng.random() < 0.3:
        system["buffer"] = template["exact_buffer" if command == "exact" else "buffer"]
    if command != "exact" and rng.random() < 0.2:
        system.update(template["hyperexponential"])
    doc = {"system": system, "policy": {"id": rng.choice(template["policies"])}}
    if rng.random() < 0.2:
        doc["policy"] = dict(template["pod"])
    if command == "simulate":
        doc["run"] = dict(template["run"])
        if rng.random() < 0.3:
            doc["run"].update(template["longer_run"])
    return doc


def t_config(rng) -> Draft:
    template = TEMPLATE["config"]
    command = rng.choice(template["commands"])
    args = [A("--config", "scenario.toml"), *options(rng, template["options"].get(command, []))]
    doc = scenario_doc(rng, command)
    if rng.random() < 0.3:
        args.append(A("--json"))
    return Draft(f"{command}-config", command, args, {"scenario.toml": ("toml", doc)}, toml="scenario.toml")


def t_exact(rng) -> Draft:
    template = TEMPLATE["exact"]
    args = options(rng, template["fleet"]) + [rate_arg(rng)] + options(rng, template["buffer"])
    args += continuous_policy_args(rng)
    if rng.random() < 0.2:
        args += options(rng, template["graph"])
    if rng.random() < 0.3:
        args.append(A("--json"))
    return Draft("exact", "exact", args)


def t_bound(rng) -> Draft:
    args = speeds_args(rng) + [rate_arg(rng)]
    if rng.random() < 0.3:
        args.append(A("--json"))
    return Draft("bound", "bound", args)


def t_policies(rng) -> Draft:
    args = []
    roll = rng.random()
    if roll < 0.5:
        args.append(A("--check", None, kind="ids"))
        for pid in rng.sample(policy_ids(), rng.choice([1, 1, 2])):
            args.append(Arg(None, pid, "ids"))
    if rng.random() < 0.4:
        args.append(A("--json"))
    return Draft("policies", "policies", args)


def spec_doc(rng) -> dict:
    template = TEMPLATE["sweep"]
    doc = copy.deepcopy(template["spec"])
    if rng.random() < 0.5:
        doc["axes"].update(copy.deepcopy(template["policy_axis"]))
    if rng.random() < 0.3:
        doc.update(template["without_common_random_numbers"])
    return doc


def t_sweep(rng) -> Draft:
    args = [Arg(None, "spec.toml", "spec"), *options(rng, TEMPLATE["sweep"]["options"])]
    if rng.random() < 0.3:
        args.append(A("--json"))
    if rng.random() < 0.2:
        args.append(A("--force"))
    return Draft("sweep", "sweep", args, {"spec.toml": ("toml", spec_doc(rng))}, toml="spec.toml")


def t_store(rng) -> Draft:
    args = [A("--store", "store.sqlite")]
    if rng.random() < 0.6:
        args.insert(0, Arg(None, FIXTURE_SWEEP, "store-name"))
    if rng.random() < 0.4:
        args.append(A("--json"))
    return Draft("store", "store", args, {"store.sqlite": ("fixture", "store.sqlite")})


def t_plot(rng) -> Draft:
    template = TEMPLATE["plot"]
    args = [Arg(None, "sweep-out", "sweep-dir"), *options(rng, template["base"])]
    if rng.random() < 0.5:
        args.append(A("--metric", rng.choice(sorted(FIXTURE_METRICS))))
    if rng.random() < 0.4:
        args += options(rng, template["by"])  # '' (one line) is among the mutations
    if rng.random() < 0.3:
        args.append(A("--bound"))
    if rng.random() < 0.5:
        args += options(rng, template["output"])
    return Draft("plot", "plot", args, {"sweep-out": ("fixture", "sweep-out")})


def t_reproduce(rng) -> Draft:
    name = rng.choice(sorted(TINY_REPRODUCTIONS))
    args = [Arg(None, name, "reproduction")]
    for key, value in TINY_REPRODUCTIONS[name].items():
        args.append(A("--set", f"{key}={json.dumps(value)}", keep=True))
    args += options(rng, TEMPLATE["reproduce"]["options"])
    if rng.random() < 0.3:
        args.append(A("--json"))
    return Draft("reproduce", "reproduce", args)


def t_graph(rng) -> Draft:
    template = TEMPLATE["graph"]
    args = options(rng, template["base"])
    roll = rng.random()
    if roll < 0.2:
        args += options(rng, template["dense"])
    elif roll < 0.4:  # a sparse graph: with finite buffers, as it may not carry the load
        args += options(rng, template["sparse"])
    if rng.random() < 0.4:
        if not any(a.flag == "--buffer" for a in args):
            args += options(rng, template["buffer"])
        args.append(A("--assumption2"))
        if rng.random() < 0.5:
            args += options(rng, template["epsilon"])
        if rng.random() < 0.5:
            args += options(rng, template["seed"])
    if rng.random() < 0.3:
        args.append(A("--json"))
    return Draft("graph", "graph", args)


def t_tune(rng) -> Draft:
    template = TEMPLATE["tune"]
    args = options(rng, template["base"])
    add_some(rng, args, template["extras"], [0, 1, 2])
    if not any(a.flag == "-v" for a in args):
        args.append(A("-q"))
    return Draft("tune", "tune", args)


def t_diffusion(rng) -> Draft:
    template = TEMPLATE["diffusion"]
    args = [rng.choice(options(rng, template["fleets"])), *options(rng, template["base"])]
    if rng.random() < 0.5:
        args += options(rng, template["policy"])
    if rng.random() < 0.3:
        args += options(rng, template["excess"])
    if rng.random() < 0.3:
        args += options(rng, template["buffer"])
    if rng.random() < 0.3:
        args += options(rng, template["seed"])
    if rng.random() < 0.3:
        args.append(A("--json"))
    return Draft("diffusion", "diffusion", args)


def t_demo(rng) -> Draft:
    args = options(rng, TEMPLATE["demo"]["base"])
    args.append(rng.choice([A("-q"), A("-v")]))
    if rng.random() < 0.3:
        args.append(A("--json"))
    return Draft("demo", "demo", args)


def t_meanfield(rng) -> Draft:
    template = TEMPLATE["meanfield"]
    policy = rng.choice(template["policies"])
    fleet = options(rng, template["two_classes"]) if policy.endswith("df-ds") else speeds_args(rng)
    args = fleet + [rate_arg(rng), A("--policy", policy)]
    if policy == "pod" and rng.random() < 0.5:
        args += options(rng, template["pod"])
    if rng.random() < 0.4:
        args += options(rng, template["buffer"])
    if rng.random() < 0.3:
        args += options(rng, template["compare"])
    if rng.random() < 0.4:
        args.append(A("--json"))
    args.append(A("-q"))
    return Draft("meanfield", "meanfield", args)


def t_place(rng) -> Draft:
    template = TEMPLATE["place"]
    args = options(rng, template["base"])
    if rng.random() < 0.3:
        args += options(rng, template["policy"])
    if rng.random() < 0.4:
        args.append(A("--json"))
    args.append(A("-q"))
    return Draft("place", "place", args)


def t_dispatchers(rng) -> Draft:
    """The many-dispatcher model: a policy on estimates, M dispatchers and their update signals."""
    template = TEMPLATE["dispatchers"]
    on_estimates = [
        pid for pid, p in registry()["policies"].items() if p["on_estimates"] and "continuous" in p["models"]
    ]
    args = speeds_args(rng) + [rate_arg(rng), A("--policy", rng.choice(on_estimates))]
    args += options(rng, template["count"]) + options(rng, template["length"])
    if rng.random() < 0.8:
        args.append(option(rng, rng.choice(template["update"])))
    add_some(rng, args, template["extras"], [0, 1, 2])
    args.append(A("-q"))
    return Draft("simulate-dispatchers", "simulate", args)


def serve_port(rng) -> int:
    """A port for a served case: drawn, so that the case is the same on every run (one in use is
    a clean error, never a failure)."""
    return rng.randrange(20000, 30000)


def t_serve(rng, command: str = "serve") -> Draft:
    """hetlb serve (or, with ``command``, pick: the same configuration keys) from flags, a --config
    file or a backends file; stopped as soon as it takes SIGTERM."""
    template = TEMPLATE[command]
    port = serve_port(rng)
    args = [A("--listen", f"127.0.0.1:{port}")]
    files = {}
    toml = None
    roll = rng.random()
    if roll < 0.25:
        doc = copy.deepcopy(template["config"])
        doc["listen"] = f"127.0.0.1:{port}"
        args, files, toml = [A("--config", "serve.toml")], {"serve.toml": ("toml", doc)}, "serve.toml"
    elif roll < 0.4:
        args.append(A("--backends-file", "backends.toml", "config"))
        files, toml = {"backends.toml": ("toml", copy.deepcopy(template["backends_file"]))}, "backends.toml"
    else:
        args += options(rng, rng.sample(template["backends"], rng.choice([1, 2])))
    if roll >= 0.25:
        args.append(A("--policy", rng.choice(template["policies"])))
    if rng.random() < 0.2:
        args.append(A("--admin", f"127.0.0.1:{port + 1}"))
    add_some(rng, args, template["extras"], [0, 1, 2])
    return Draft(command, command, args, files, toml=toml)


def t_pick(rng) -> Draft:
    return t_serve(rng, "pick")


def t_backend(rng) -> Draft:
    template = TEMPLATE["backend"]
    args = options(rng, template["listen"])
    if rng.random() < 0.3:
        args += options(rng, template["openai"])
        add_some(rng, args, template["openai_extras"], [0, 1, 2])
    else:
        add_some(rng, args, template["extras"], [0, 1, 2])
    return Draft("backend", "backend", args)


def t_loadgen(rng) -> Draft:
    template = TEMPLATE["loadgen"]
    args = options(rng, template["base"])
    if rng.random() < 0.25:
        args += options(rng, template["openai"])
        add_some(rng, args, template["openai_extras"], [0, 1])
    else:
        add_some(rng, args, template["extras"], [0, 1, 2])
    return Draft("loadgen", "loadgen", args)


def t_testbed(rng) -> Draft:
    """A testbed scenario: valid, it starts backends, a dispatcher and a load generator (campaigns
    only); mutated, its checks before anything starts."""
    args = [Arg(None, "bed.toml", "config"), *options(rng, TEMPLATE["testbed"]["options"])]
    doc = copy.deepcopy(TEMPLATE["testbed"]["scenario"])
    return Draft("testbed", "testbed", args, {"bed.toml": ("toml", doc)}, toml="bed.toml")


def t_envoy_config(rng) -> Draft:
    template = TEMPLATE["envoy-config"]
    args = options(rng, template["base"])
    args += options(rng, template["lb"] if rng.random() < 0.4 else template["pickers"])
    if rng.random() < 0.5:
        args += options(rng, template["times"])
    return Draft("envoy-config", "envoy-config", args)


def t_top(rng) -> Draft:
    argv = rng.choice(TEMPLATE["top-level"]["command_lines"])
    return Draft("top-level", None, [Arg(None, token, "top") for token in argv])


TEMPLATES = [
    (t_simulate, 16),
    (t_slotted, 8),
    (t_config, 10),
    (t_exact, 7),
    (t_bound, 5),
    (t_policies, 4),
    (t_sweep, 8),
    (t_store, 4),
    (t_plot, 5),
    (t_reproduce, 5),
    (t_graph, 6),
    (t_tune, 5),
    (t_diffusion, 6),
    (t_demo, 3),
    (t_meanfield, 6),
    (t_place, 3),
    (t_dispatchers, 6),
    (t_serve, 6),
    (t_pick, 4),
    (t_backend, 4),
    (t_loadgen, 6),
    (t_testbed, 3),
    (t_envoy_config, 2),
    (t_top, 2),
]


# --- mutations ----------------------------------------------------------------------------------------


def pool_for(arg: Arg, draft: Draft, rng) -> list[str]:
    """Values to try for ``arg``: those of its kind, and sometimes anything."""
    kind = arg.kind
    if kind == "enum" and arg.flag in ENUMS:
        pool = ENUMS[arg.flag] + BAD_ENUM
    elif kind == "policy":
        pool = policy_ids() + POOLS["policy"]
    elif kind == "set":
        pool = set_values(draft)
    elif kind in ("config", "spec", "store", "out", "sweep-dir"):
        pool = PATHS
    elif kind == "reproduction":
        pool = sorted(registry()["reproductions"]) + CORPUS["reproduction_names"]
    elif kind == "store-name":
        pool = [FIXTURE_SWEEP, *CORPUS["store_names"]]
    else:
        pool = POOLS.get(kind, GENERIC)
    if rng.random() < 0.15:
        pool = GENERIC
    return pool


def set_values(draft: Draft) -> list[str]:
    values = []
    for p in registry()["policies"].values():
        for name, rule in p["params"].items():
            values += [name + suffix for suffix in CORPUS["set"]["suffixes"]]
            if rule.startswith("one of"):
                values += [f"{name}={choice.strip()}" for choice in rule.removeprefix("one of ").split(",")]
    values += CORPUS["set"]["more"]
    if draft.command == "reproduce":
        values = []
        for options in registry()["reproductions"].values():
            for key in options:
                values += [key + suffix for suffix in CORPUS["set"]["reproduction_suffixes"]]
        values += CORPUS["set"]["reproduction_more"]
    return sorted(set(values))


def mutate_value(draft: Draft, rng) -> str | None:
    args = [a for a in draft.args if a.value is not None]
    if not args:
        return None
    arg = rng.choice(args)
    old = arg.value
    arg.value = rng.choice(pool_for(arg, draft, rng))
    if arg.kind in ("config", "spec", "store", "out", "sweep-dir"):
        ensure_special(draft, arg.value)
    return f"{arg.flag or 'positional'} {short(old)} -> {short(arg.value)}"


def short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:30] + f"...[{len(value)} chars]"


def mutate_drop(draft: Draft, rng) -> str | None:
    args = [a for a in draft.args if not a.keep]
    if not args:
        return None
    arg = rng.choice(args)
    draft.args.remove(arg)
    return f"drop {arg.flag or repr(arg.value)}"


def mutate_missing_value(draft: Draft, rng) -> str | None:
    args = [a for a in draft.args if a.flag and a.value is not None]
    if not args:
        return None
    arg = rng.choice(args)
    draft.args.remove(arg)
    draft.args.append(Arg(arg.flag, None, "bare", keep=arg.keep))
    return f"{arg.flag} without its value"


def mutate_repeat(draft: Draft, rng) -> str | None:
    args = [a for a in draft.args if a.flag]
    if not args:
        return None
    arg = rng.choice(args)
    twin = copy.copy(arg)
    if arg.value is not None:
        twin.value = rng.choice(pool_for(arg, draft, rng))
    draft.args.insert(rng.randrange(len(draft.args) + 1), twin)
    return f"{arg.flag} repeated" + (f" with {short(twin.value)}" if twin.value is not None else "")


def mutate_unknown_flag(draft: Draft, rng) -> str | None:
    own = set(command_flags().get(draft.command or "", []))
    foreign = sorted({f for flags in command_flags().values() for f in flags} - own)
    flag = rng.choice(CORPUS["unknown_flags"] + foreign)
    value = rng.choice([None, *CORPUS["unknown_flag_values"]])
    draft.args.insert(rng.randrange(len(draft.args) + 1), Arg(flag, value, "generic"))
    return f"add {flag}" + (f" {value}" if value else "")


def mutate_abbreviate(draft: Draft, rng) -> str | None:
    own = set(command_flags().get(draft.command or "", []))
    args = [a for a in draft.args if a.flag and a.flag.startswith("--") and len(a.flag) > 4]
    if not args:
        return None
    arg = rng.choice(args)
    prefixes = [arg.flag[:n] for n in range(3, len(arg.flag)) if arg.flag[:n] not in own]
    if not prefixes:
        return None
    old, arg.flag = arg.flag, rng.choice(prefixes)
    return f"{old} abbreviated to {arg.flag}"


def mutate_equals(draft: Draft, rng) -> str | None:
    args = [a for a in draft.args if a.flag and a.value is not None]
    if not args:
        return None
    arg = rng.choice(args)
    arg.equals = True
    return f"{arg.flag}=VALUE"


def mutate_help(draft: Draft, rng) -> str | None:
    flag = rng.choice(["-h", "--help"])
    draft.args.insert(rng.randrange(len(draft.args) + 1), Arg(flag, None, "help"))
    return f"add {flag}"


def mutate_positional(draft: Draft, rng) -> str | None:
    value = rng.choice(CORPUS["stray_positionals"])
    draft.args.insert(rng.randrange(len(draft.args) + 1), Arg(None, value, "stray"))
    return f"stray positional {short(value)}"


def mutate_shuffle(draft: Draft, rng) -> str | None:
    positions = [i for i, a in enumerate(draft.args) if a.flag]
    options = [draft.args[i] for i in positions]
    rng.shuffle(options)
    for i, arg in zip(positions, options):
        draft.args[i] = arg
    return "options shuffled"


def mutate_add_flag(draft: Draft, rng) -> str | None:
    flags = [f for f in command_flags().get(draft.command or "", []) if f not in ("--config",)]
    if not flags:
        return None
    flag = rng.choice(flags)
    kind = FLAG_KINDS.get(flag, "")
    arg = Arg(flag, None, kind)
    action = next(a for a in subparser(draft.command)._actions if flag in a.option_strings)
    if action.nargs != 0:
        arg.value = rng.choice(pool_for(arg, draft, rng))
    draft.args.insert(rng.randrange(len(draft.args) + 1), arg)
    return f"add {flag}" + (f" {short(arg.value)}" if arg.value is not None else "")


def mutate_command(draft: Draft, rng) -> str | None:
    if not draft.command:
        return None
    old = draft.command
    draft.command = rng.choice([*CORPUS["commands"], *sorted(command_flags())])
    return f"command {old} -> {draft.command!r}"


def mutate_non_utf8(draft: Draft, rng) -> str | None:
    args = [a for a in draft.args if a.value is not None]
    if not args:
        return None
    arg = rng.choice(args)
    arg.value = rng.choice([arg.value + NON_UTF8, NON_UTF8 + arg.value, NON_UTF8])
    if arg.kind in ("config", "spec", "store", "out", "sweep-dir"):
        ensure_special(draft, arg.value)
    return f"{arg.flag or 'positional'} with bytes that are not UTF-8"


def toml_leaves(doc, path=()):
    for key, value in doc.items():
        if isinstance(value, dict) and value:
            yield from toml_leaves(value, (*path, key))
        else:
            yield (*path, key)


def toml_tables(doc, path=()):
    for key, value in doc.items():
        if isinstance(value, dict):
            yield (*path, key)
            yield from toml_tables(value, (*path, key))


def toml_get(doc, path):
    for key in path[:-1]:
        doc = doc[key]
    return doc


def typed_values(old) -> list:
    """Replacements for a TOML value: of its own type and of others."""
    same = []
    if isinstance(old, bool):
        same = CORPUS["toml"]["bool"]
    elif isinstance(old, int):
        same = CORPUS["toml"]["int"]
    elif isinstance(old, float):
        same = CORPUS["toml"]["float"]
    elif isinstance(old, str):
        same = [*POOLS["speeds"][:20], *policy_ids(), *POOLS["policy"]]
    elif isinstance(old, list):
        same = CORPUS["toml"]["list"]
    return same + same + TOML_VALUES


def mutate_toml(draft: Draft, rng) -> str | None:
    if not draft.toml or draft.files.get(draft.toml, ("",))[0] != "toml":
        return None
    doc = draft.files[draft.toml][1]
    op = rng.choice(["set", "set", "set", "delete", "delete-table", "unknown-key", "table-scalar", "unknown-table"])
    leaves, tables = list(toml_leaves(doc)), list(toml_tables(doc))
    if op == "set" and leaves:
        path = rng.choice(leaves)
        parent = toml_get(doc, path)
        old = parent[path[-1]]
        parent[path[-1]] = rng.choice(typed_values(old))
        return f"{draft.toml}: {'.'.join(path)} = {short(toml_value(parent[path[-1]]))}"
    if op == "delete" and leaves:
        path = rng.choice(leaves)
        del toml_get(doc, path)[path[-1]]
        return f"{draft.toml}: delete {'.'.join(path)}"
    if op == "delete-table" and tables:
        path = rng.choice(tables)
        del toml_get(doc, path)[path[-1]]
        return f"{draft.toml}: delete [{'.'.join(path)}]"
    if op == "unknown-key":
        tables_or_top = [(), *tables]
        path = rng.choice(tables_or_top)
        target = doc
        for key in path:
            target = target[key]
        key = rng.choice(CORPUS["toml"]["unknown_keys"])
        target[key] = rng.choice(TOML_VALUES)
        return f"{draft.toml}: unknown key {'.'.join((*path, key))}"
    if op == "table-scalar" and tables:
        path = rng.choice(tables)
        toml_get(doc, path)[path[-1]] = rng.choice(CORPUS["toml"]["table_values"])
        return f"{draft.toml}: [{'.'.join(path)}] as a value"
    if op == "unknown-table":
        doc[rng.choice(CORPUS["toml"]["unknown_tables"])] = {"a": 1}
        return f"{draft.toml}: unknown table"
    return None


def mutate_file(draft: Draft, rng) -> str | None:
    """The bytes of a TOML file: an encoding, garbage, truncation, nesting, or another kind of file."""
    if not draft.toml or draft.files.get(draft.toml, ("",))[0] != "toml":
        return None
    text = toml_text(draft.files[draft.toml][1])
    op = rng.choice(
        [
            "utf-16",
            "bom",
            "crlf",
            "truncate",
            "garbage",
            "nul",
            "nesting",
            "duplicate",
            "empty",
            "dir",
            "missing",
            "loop",
            "latin-1",
            "big",
            "fifo",
        ]
    )
    name = draft.toml
    if op == "utf-16":
        data = text.encode("utf-16")
    elif op == "bom":
        data = b"\xef\xbb\xbf" + text.encode()
    elif op == "crlf":
        data = text.replace("\n", "\r\n").encode()
    elif op == "truncate":
        data = text.encode()[: rng.randrange(1, max(2, len(text)))]
    elif op == "garbage":
        data = bytes(rng.randrange(256) for _ in range(rng.choice([1, 16, 300])))
    elif op == "nul":
        data = text.encode().replace(b"\n", b"\n\x00", 1)
    elif op == "nesting":
        depth = rng.choice([100, 3000, 100000])
        data = (text + "deep = " + "[" * depth + "]" * depth + "\n").encode()
    elif op == "duplicate":
        data = (text + text).encode()
    elif op == "empty":
        data = b""
    elif op == "latin-1":
        data = text.encode() + '# caf\u00e9 "\u00e9t\u00e9"\n'.encode("latin-1")
    elif op == "big":
        data = (text + 'big = "' + "x" * 20_000_000 + '"\n').encode()
        draft.campaign.append("a 20 MB file")
    elif op == "fifo":
        draft.files[name] = ("fifo",)
        draft.campaign.append("a FIFO blocks until its writer comes")
        return f"{name} is a FIFO"
    else:
        draft.files[name] = {"dir": ("dir",), "missing": ("absent",), "loop": ("loop",)}[op]
        return f"{name} is {op}"
    draft.files[name] = ("bytes", data)
    return f"{name}: {op}"


def mutate_path(draft: Draft, rng) -> str | None:
    args = [a for a in draft.args if a.kind in ("config", "spec", "store", "out", "sweep-dir")]
    if not args:
        return None
    arg = rng.choice(args)
    old = arg.value
    arg.value = rng.choice(PATHS + CORPUS["more_paths"])
    ensure_special(draft, arg.value)
    return f"{arg.flag or 'positional'} {short(old)} -> {short(arg.value)}"


def ensure_special(draft: Draft, path: str) -> None:
    """Make the special names of PATHS exist in the case's folder as what their name says."""
    root = path.split("/")[0]
    special = CORPUS["special"].get(root)
    if special and root not in draft.files:
        kind, *text = special
        draft.files[root] = (kind, text[0].encode()) if text else (kind,)


MUTATIONS = [
    (mutate_value, 30),
    (mutate_drop, 6),
    (mutate_missing_value, 4),
    (mutate_repeat, 5),
    (mutate_unknown_flag, 4),
    (mutate_abbreviate, 3),
    (mutate_equals, 2),
    (mutate_help, 2),
    (mutate_positional, 3),
    (mutate_shuffle, 2),
    (mutate_add_flag, 8),
    (mutate_command, 2),
    (mutate_non_utf8, 2),
    (mutate_toml, 14),
    (mutate_file, 7),
    (mutate_path, 5),
]


@cache
def subparser(command: str):
    (commands,) = [a for a in parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return commands.choices[command]


# --- generation ----------------------------------------------------------------------------------------


LIVE_AND_NEWER = ("serve", "pick", "backend", "loadgen", "testbed", "meanfield", "place", "simulate-dispatchers")
"""The templates of ``--templates live``: the live commands, meanfield, place and the many-dispatcher model."""


def template_base(template) -> str:
    """The name a template gives its drafts (its function's name without t_, as --templates takes it)."""
    names = {"t_slotted": "simulate-slotted", "t_dispatchers": "simulate-dispatchers", "t_config": "config"}
    return {**names, "t_top": "top-level"}.get(
        template.__name__, template.__name__.removeprefix("t_").replace("_", "-")
    )


def generate(seed: int, index: int, bases: tuple[str, ...] | None = None) -> Case:
    """Case ``index`` of ``seed`` (of the templates ``bases``, default all): the same case on every
    run and machine."""
    rng = random.Random(f"hetlb-fuzz:{seed}:{index}")
    chosen = [(t, w) for t, w in TEMPLATES if bases is None or template_base(t) in bases]
    template = rng.choices([t for t, _ in chosen], weights=[w for _, w in chosen])[0]
    draft = template(rng)
    draft.files.setdefault("speeds.txt", ("bytes", CORPUS["case_files"]["speeds.txt"].encode()))
    draft.files.setdefault("utf16.txt", ("bytes", CORPUS["case_files"]["utf16.txt"].encode("utf-16")))
    draft.files.setdefault("binary.dat", ("bytes", bytes(range(256))))
    count = rng.choices([0, 1, 2, 3], weights=[8, 55, 25, 12])[0]
    functions, weights = [m for m, _ in MUTATIONS], [w for _, w in MUTATIONS]
    attempts = 0
    while len(draft.labels) < count and attempts < 20:
        attempts += 1
        label = rng.choices(functions, weights=weights)[0](draft, rng)
        if label:
            draft.labels.append(label)
    files = {}
    for name, spec in draft.files.items():
        files[name] = ("bytes", toml_text(spec[1]).encode()) if spec[0] == "toml" else spec
    judge = Judge(draft, files)
    invalid, costly = judge.run()
    argv = draft.argv()
    return Case(
        seed,
        index,
        draft.base,
        draft.command or "",
        argv,
        files,
        draft.labels,
        invalid,
        costly + draft.campaign,
    )


def generate_cases(seed: int, n: int, fixed: bool = False, bases: tuple[str, ...] | None = None) -> list[Case]:
    """``n`` cases of ``seed`` (of the templates ``bases``); ``fixed``: only those cheap whatever the
    outcome (the CI set)."""
    cases = []
    for index in itertools.count():
        if len(cases) == n:
            return cases
        case = generate(seed, index, bases)
        if not (fixed and case.costly):
            cases.append(case)


def fixed_cases() -> list[Case]:
    return generate_cases(FIXED_SEED, FIXED_CASES, fixed=True)


# --- the judge: is the input certainly invalid, would it be slow? ----------------------------------


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def json_or_text(text: str):
    """A value as the command line reads NAME=VALUE: JSON when it parses, else the text."""
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return text


class Judge:
    """Conservative rules that hold whatever the implementation: ``invalid`` collects (rule,
    detail) for inputs that must be refused, ``costly`` the reasons a valid reading could be slow."""

    def __init__(self, draft: Draft, files: dict):
        self.draft = draft
        self.files = files
        self.invalid: list[tuple[str, str]] = []
        self.costly: list[str] = []

    def bad(self, rule: str, detail: str = "") -> None:
        self.invalid.append((rule, detail))

    def slow(self, why: str) -> None:
        self.costly.append(why)

    def run(self):
        argv = self.draft.argv()
        ns, problem = self.parse(argv)
        if problem == "usage":
            self.bad("argparse refuses the command line")
        elif problem is None and ns is not None:
            if ns.command is None:
                self.bad("no command")
            else:
                try:
                    getattr(self, "command_" + ns.command.replace("-", "_"))(ns)
                except Exception as error:  # a rule that cannot read the value decides nothing
                    self.costly.append(f"the judge could not read the case ({type(error).__name__})")
        if not argv:
            self.bad("no command")
        return self.invalid, [c for c in self.costly if c]

    @staticmethod
    def parse(argv):
        """(namespace, None), or (None, "usage" | "exit" | "broken") when argparse stops."""
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            try:
                return parser().parse_args(argv), None
            except SystemExit as stop:
                return None, "usage" if stop.code == 2 else "exit"
            except Exception:
                return None, "broken"

    # numbers ---------------------------------------------------------------------------------------

    def count(self, name, value, *, low=1, slow_above=None):
        if value is None:
            return
        if not is_int(value):
            if is_number(value) and float(value).is_integer():
                return
            self.bad(f"{name}: must be an integer >= {low}", repr(value))
        elif value < low:
            self.bad(f"{name}: must be an integer >= {low}", repr(value))
        elif value >= INT64:
            self.bad(f"{name}: beyond a 64-bit integer", repr(value))
        elif slow_above is not None and value > slow_above:
            self.slow(f"{name} {value}")

    def seed(self, name, value):
        if value is None:
            return
        if not is_int(value) or value < 0:
            if is_number(value) and float(value).is_integer() and value >= 0:
                return
            self.bad(f"{name}: must be an integer >= 0", repr(value))

    def real(self, name, value, *, low=None, low_open=False, high=None, slow_outside=None):
        """A finite number in [low, high] (or (low, high] with ``low_open``)."""
        if value is None:
            return
        if not is_number(value):
            if isinstance(value, str):
                try:
                    float(value)
                    return  # a number written as text: not certainly refused
                except ValueError:
                    pass
            self.bad(f"{name}: must be a number", repr(value)[:60])
            return
        value = float(value)
        if not math.isfinite(value):
            self.bad(f"{name}: must be finite", repr(value))
        elif low is not None and (value < low or (low_open and value == low)):
            self.bad(f"{name}: must be {'>' if low_open else '>='} {low}", repr(value))
        elif high is not None and value > high:
            self.bad(f"{name}: must be <= {high}", repr(value))
        elif slow_outside and not (slow_outside[0] <= abs(value) <= slow_outside[1]) and value != 0:
            self.slow(f"{name} {value!r}")

    # paths ---------------------------------------------------------------------------------------

    def file_bytes(self, path: str):
        """The bytes a case's path holds: bytes, or "absent", "dir", "special" (a FIFO, a loop,
        /dev/zero), or None when unknown."""
        if path in ("/dev/null",):
            return b""
        if path in ("/dev/zero", "/dev/urandom"):
            return "special"
        spec = self.files.get(path)
        if spec is None:
            if path in (".", "") or path.startswith("/"):
                return "dir" if path in (".", "") else None
            return "absent"
        kind = spec[0]
        if kind == "bytes":
            return spec[1]
        if kind in ("dir", "fixture", "sweep-broken", "sweep-dir-summary"):
            return "dir" if kind != "fixture" or spec[1] == "sweep-out" else None
        if kind == "absent":
            return "absent"
        return "special"

    def read_toml(self, name: str, path: str):
        content = self.file_bytes(path)
        if content is None:
            return None
        if not isinstance(content, bytes):
            self.bad(f"{name}: not a readable file", content)
            return None
        try:
            doc = tomllib.loads(content.decode("utf-8-sig"))
        except (UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError) as error:
            self.bad(f"{name}: not TOML", type(error).__name__)
            return None
        return doc

    def output_folder(self, name: str, path: str):
        """A folder a command creates: refused when a file (or /dev/null) is in the way."""
        if path is None:
            return
        parts = path.split("/")
        in_the_way = not path.startswith("/") and any(
            self.files.get("/".join(parts[: i + 1]), ("",))[0] == "bytes" for i in range(len(parts))
        )
        if path == "/dev/null" or in_the_way:
            self.bad(f"{name}: a file is in the way of the folder", path[:40])
        if any(len(os.fsencode(part)) > 255 for part in parts):
            self.bad(f"{name}: a file name over 255 bytes")

    # scenarios ---------------------------------------------------------------------------------

    def scenario(self, ns, command: str):
        """The rules of scenario_from_args and Scenario.from_mapping that certainly hold."""
        from hetlb.cli.flags import LED_FLAGS

        flag = lambda name: getattr(ns, name, None)  # noqa: E731
        data = {}
        if flag("config"):
            data = self.read_toml("--config", ns.config)
            if data is None:
                return
        for table in data:
            if table not in ("system", "policy", "run"):
                self.bad("config: unknown table", table)
                return
            if not isinstance(data[table], dict):
                self.bad("config: a table given as a value", table)
                return
        system = dict(data.get("system", {}))
        for key in ("speeds", "buffer", "job_sizes", "scv", "n_servers", "model", "dispatchers"):
            if flag(key) is not None:
                system[key] = flag(key)
        for key in ("arrivals", "service", "routing", "ties"):
            if flag(key) is not None:
                system[key] = flag(key)
        rates = {key: flag(key) for key in ("load", "arrival_rate", "excess_capacity")}
        if any(v is not None for v in rates.values()):
            for key, value in rates.items():
                system.pop(key, None)
                if value is not None:
                    system[key] = value
        if flag("speed_distribution") is not None:
            system["speed_distribution"] = self.construction("--speed-distribution", ns.speed_distribution)
        if flag("graph") is not None:
            system["graph"] = self.construction("--graph", ns.graph)
        policy = dict(data.get("policy", {}))
        if flag("policy") is not None:
            policy = {"id": ns.policy}
        if flag("d") is not None:
            policy["d"] = ns.d
        for text in flag("set") or []:
            name, sep, value = text.partition("=")
            if not sep or not name:
                self.bad("--set: must be NAME=VALUE", text)
                return
            policy[name.strip()] = json_or_text(value)
        for name in LED_FLAGS:
            if flag(name) is not None:
                policy[name] = flag(name)
        run = dict(data.get("run", {}))
        for key in ("jobs", "horizon", "warmup", "replications", "seed", "slots", "speed_bins"):
            if flag(key) is not None:
                run[key] = flag(key)
        for key in ("preference", "state_distribution"):
            if flag(key):
                run[key] = True
        if "jobs" in run and "horizon" in run:
            run.pop("horizon" if flag("jobs") is not None else "jobs")
        if None in (system.get("speed_distribution", 0), system.get("graph", 0)):
            return  # a construction the judge could not read
        self.mapping({"system": system, "policy": policy, "run": run}, command)

    def construction(self, name, text):
        kind, _, settings = text.partition(":")
        items = re.split(r",(?=\s*[A-Za-z_]\w*\s*=)", settings)
        table = {"kind": kind}
        for item in items:
            if not item:
                continue
            key, sep, value = item.partition("=")
            if not sep or not key:
                self.bad(f"{name}: must be KIND:KEY=VALUE,...", item)
                return None
            table[key.strip()] = json_or_text(value)
        return table

    def mapping(self, data: dict, command: str):
        """A scenario mapping {system, policy, run} as ``command`` uses it."""
        reg = registry()
        system, policy, run = (dict(data.get(t, {})) for t in ("system", "policy", "run"))
        model = system.get("model", "continuous")
        if model not in ("continuous", "slotted"):
            self.bad("system.model: unknown", repr(model))
            return
        if command in ("exact", "bound", "graph", "tune") and model != "continuous":
            self.bad(f"{command}: the continuous model only")
        for key in system:
            if key not in reg["system_keys"][model]:
                self.bad("system: unknown key", key)
        for key in run:
            if key not in reg["run_keys"][model]:
                self.bad("run: unknown key", key)
        speeds = self.system_speeds(system)
        self.n_servers = len(speeds) if speeds else None
        infinite = "buffer" not in system or model == "slotted"
        self.rates(system, speeds, infinite, model)
        self.count("system.buffer", system.get("buffer"))
        if command == "exact" and "buffer" not in system:
            self.bad("exact: needs a finite buffer")
        if model == "continuous":
            sizes = system.get("job_sizes", "exponential")
            if sizes not in ("exponential", "hyperexponential", "deterministic"):
                self.bad("system.job_sizes: unknown", repr(sizes)[:40])
            self.real("system.scv", system.get("scv"), low=0.0, slow_outside=(1e-6, 1e6))
            if sizes == "hyperexponential" and is_number(system.get("scv")) and system["scv"] <= 1:
                self.bad("system.scv: hyperexponential sizes need scv > 1", repr(system["scv"]))
            if sizes == "exponential" and is_number(system.get("scv")) and system["scv"] != 1:
                self.bad("system.scv: exponential sizes have scv 1", repr(system["scv"]))
            if command == "exact" and sizes != "exponential":
                self.bad("exact: exponential sizes only", repr(sizes)[:40])
            graph = system.get("graph")
            if isinstance(graph, dict):
                self.graph(graph)
            self.count("system.dispatchers", system.get("dispatchers", 1), slow_above=100_000)  # O(M) results
        else:
            self.count("system.dispatchers", system.get("dispatchers", 1), slow_above=100)
            for key in ("arrivals", "service"):
                self.counts_law(f"system.{key}", system.get(key, "poisson"))
            if system.get("routing", "slot") not in ("slot", "job"):
                self.bad("system.routing: unknown", repr(system.get("routing"))[:40])
            if system.get("ties", "independent") not in ("independent", "shared"):
                self.bad("system.ties: unknown", repr(system.get("ties"))[:40])
        if command in ("simulate", "sweep", "exact", "bound", "graph", "tune"):
            self.policy(policy, model, command, with_dispatchers="dispatchers" in system)
        if command in ("simulate", "sweep"):
            self.run_table(run, model, system)

    def system_speeds(self, system):
        """The speeds, when the judge can tell them (else None)."""
        if "speeds" in system:
            return self.speeds("system.speeds", system["speeds"])
        if "n_servers" in system:
            n = system["n_servers"]
            self.count("system.n_servers", n, slow_above=2000)
            if "speed_distribution" in system:
                self.speed_law(system["speed_distribution"])
            elif "speed_mix" not in system:
                self.bad("system: n_servers without speed_mix or speed_distribution")
            return None
        if "speed_mix" in system or "speed_distribution" in system:
            self.bad("system: a speed_mix or speed_distribution needs n_servers")
            return None
        self.bad("system: no speeds")
        return None

    def speeds(self, name, value):
        if isinstance(value, list):
            if not value:
                self.bad(f"{name}: empty")
                return None
            if not all(is_number(v) for v in value):
                self.bad(f"{name}: must be numbers", repr(value)[:40])
                return None
            speeds = [float(v) for v in value]
        elif isinstance(value, str):
            speeds = []
            for item in value.split(","):
                item = item.strip()
                count, _, speed = item.rpartition("x") if "x" in item else ("1", "", item)
                try:
                    count_int, speed = int(count), float(speed)
                except ValueError:
                    self.bad(f"{name}: each item a speed or COUNTxSPEED", item[:40])
                    return None
                if count_int < 1:
                    self.bad(f"{name}: a count >= 1", item[:40])
                    return None
                if count_int >= INT64:
                    self.bad(f"{name}: a count beyond a 64-bit integer", item[:40])
                    return None
                if count_int > 2000:
                    self.slow(f"{count_int} servers")
                    return None
                speeds += [speed] * count_int
        else:
            self.bad(f"{name}: must be a text or a list", type(value).__name__)
            return None
        if not all(math.isfinite(s) and s > 0 for s in speeds):
            self.bad(f"{name}: finite and > 0", ",".join(map(repr, speeds))[:40])
            return None
        if len(speeds) > 2000:
            self.slow(f"{len(speeds)} servers")
        if any(s < 1e-6 or s > 1e6 for s in speeds) or not math.isfinite(sum(speeds)):
            self.slow("extreme speeds")
        return speeds

    def rates(self, system, speeds, infinite, model):
        given = [key for key in ("load", "arrival_rate", "excess_capacity") if key in system]
        if not given:
            self.bad("system: no arrival rate")
            return
        if len(given) > 1:
            self.bad("system: more than one of load, arrival_rate, excess_capacity", ",".join(given))
            return
        key = given[0]
        value = system[key]
        if key == "arrival_rate" and isinstance(value, list):
            if not value:
                self.bad("system.arrival_rate: empty")
            for v in value:
                self.real("system.arrival_rate", v, low=0.0, low_open=True, slow_outside=(1e-6, 1e4))
            return
        if key == "excess_capacity":
            self.real("system.excess_capacity", value, slow_outside=(1e-3, 1e3))
            if is_number(value) and math.isfinite(value):
                if infinite and value <= 0:
                    self.bad("system.excess_capacity: <= 0 is unstable with infinite buffers", repr(value))
                elif speeds and sum(speeds) - value * math.sqrt(len(speeds)) <= 0:
                    self.bad("system.excess_capacity: leaves no arrivals", repr(value))
            return
        self.real(f"system.{key}", value, low=0.0, low_open=True, slow_outside=(1e-6, 1e4 if key != "load" else 100))
        if key == "load" and infinite and is_number(value) and value >= 1:
            self.bad("system.load: >= 1 is unstable with infinite buffers", repr(value))
        if key == "arrival_rate" and infinite and speeds and is_number(value) and value >= sum(speeds):
            self.bad("system.arrival_rate: unstable with infinite buffers", repr(value))

    def counts_law(self, name, value):
        if not isinstance(value, str):
            self.bad(f"{name}: must be a text", repr(value)[:40])
            return
        kind, _, trials = value.partition(":")
        if kind not in ("poisson", "bernoulli", "binomial"):
            self.bad(f"{name}: unknown law", value[:40])
        elif kind == "binomial" and ":" in value:  # a bare "binomial" may mean a default K
            try:
                k = int(trials)
            except ValueError:
                self.bad(f"{name}: binomial:K needs an integer K", value[:40])
                return
            if k < 1:
                self.bad(f"{name}: binomial:K needs K >= 1", value[:40])
        elif trials:
            self.bad(f"{name}: only a binomial has trials", value[:40])

    def policy(self, policy, model, command, with_dispatchers: bool = False):
        """``with_dispatchers``: the continuous model's dispatchers, which run the policies on
        estimates (the LED policies of the slotted model included)."""
        pid = policy.get("id", "jsq")
        policies = registry()["policies"]
        if not isinstance(pid, str) or pid not in policies:
            self.bad("policy: unknown id", repr(pid)[:40])
            return
        spec = policies[pid]
        on_dispatchers = with_dispatchers and model == "continuous" and spec["on_estimates"]
        if command in ("simulate", "sweep") and model not in spec["models"] and not on_dispatchers:
            self.bad(f"policy: {pid} has no rule in the {model} model")
        if command == "exact" and not spec["exact"]:
            self.bad(f"policy: {pid} has no exact rule")
        for name, value in policy.items():
            if name == "id":
                continue
            if name == "update" and model == "continuous" and spec["on_estimates"]:
                continue  # the update signals of dispatchers deciding on estimates (hetlb.signals)
            if name not in spec["params"]:
                self.bad("policy: unknown parameter", f"{pid}.{name}")
                continue
            rule = spec["params"][name]
            if rule == "an integer >= 1":
                self.count(f"policy.{name}", value, slow_above=10_000)
            elif rule == "a number in [0, 1]":
                self.real(f"policy.{name}", value, low=0.0, high=1.0)
            elif rule == "a number in (0, 1]":
                self.real(f"policy.{name}", value, low=0.0, low_open=True, high=1.0)
            elif rule == "true or false":
                if not isinstance(value, bool):
                    self.bad(f"policy.{name}: true or false", repr(value)[:40])
            elif rule.startswith("one of "):
                if value not in [c.strip() for c in rule.removeprefix("one of ").split(",")]:
                    self.bad(f"policy.{name}: {rule}", repr(value)[:40])

    def run_table(self, run, model, system):
        self.count("run.replications", run.get("replications"), slow_above=4)
        self.seed("run.seed", run.get("seed"))
        self.real("run.warmup", run.get("warmup"), low=0.0, slow_outside=(1e-9, 1e5))
        if model == "slotted":
            self.count("run.slots", run.get("slots"), slow_above=20_000)
            return
        self.count("run.jobs", run.get("jobs"), slow_above=20_000)
        self.count("run.speed_bins", run.get("speed_bins"), slow_above=10_000)
        if "jobs" not in run and "horizon" in run:
            horizon = run["horizon"]
            self.real("run.horizon", horizon, low=0.0, low_open=True, slow_outside=(1e-6, 1e5))
            warmup = run.get("warmup", 0)
            if is_number(horizon) and is_number(warmup) and math.isfinite(horizon) and horizon <= warmup:
                self.bad("run.horizon: must exceed the warm-up")

    def graph(self, graph):
        kind = graph.get("kind")
        keys = registry()["graph_keys"]
        if kind not in keys:
            self.bad("graph: unknown kind", repr(kind)[:40])
            return
        for key in graph:
            if key != "kind" and key not in keys[kind]:
                self.bad("graph: unknown key", key)
        if "p" in graph:
            self.real("graph.p", graph["p"], low=0.0, low_open=True, high=1.0, slow_outside=(1e-3, 1))
        self.count("graph.ports", graph.get("ports"), slow_above=500)
        self.seed("graph.seed", graph.get("seed"))
        if "ports_exponent" in graph:
            self.real("graph.ports_exponent", graph["ports_exponent"])
            if is_number(graph["ports_exponent"]) and not 0 <= graph["ports_exponent"] <= 2:
                self.slow("ports_exponent")
        if kind in ("theorem2", "theorem3", "explicit"):
            self.slow(f"a {kind} graph")  # rules the judge does not know

    def speed_law(self, law, kinds=None):
        if law is None:
            return
        laws = registry()["speed_laws"]
        kinds = kinds or laws
        kind = law.get("kind")
        if kind not in kinds:
            self.bad("speed law: unknown kind", repr(kind)[:40])
            return
        allowed = set(kinds[kind]) | {"kind"} | ({"seed"} if kinds is laws else set())
        for key in law:
            if key not in allowed:
                self.bad("speed law: unknown key", key)
        self.seed("speed law seed", law.get("seed"))
        if kind == "uniform":
            low, high = law.get("low"), law.get("high")
            self.real("uniform.low", low, low=0.0, low_open=True)
            self.real("uniform.high", high, low=0.0, low_open=True)
            if low is None or high is None:
                self.bad("uniform: needs low and high")
            elif is_number(low) and is_number(high) and not low < high:
                self.bad("uniform: low < high")
        elif kind == "discrete":
            speeds, probabilities = law.get("speeds"), law.get("probabilities")
            if not isinstance(speeds, list) or not isinstance(probabilities, list):
                self.bad("discrete: needs lists speeds and probabilities")
            elif not speeds or len(speeds) != len(probabilities):
                self.bad("discrete: as many probabilities as speeds, not none")
            elif all(is_number(p) for p in probabilities) and (
                any(not 0 < p <= 1 for p in probabilities) or abs(sum(probabilities) - 1) > 1e-6
            ):
                self.bad("discrete: probabilities in (0, 1] summing to 1")
            else:
                for s in speeds:
                    self.real("discrete.speeds", s, low=0.0, low_open=True)
        elif kind == "lognormal":
            self.real("lognormal.mean", law.get("mean"), low=0.0, low_open=True, slow_outside=(1e-6, 1e6))
            self.real("lognormal.cv", law.get("cv"), low=0.0, low_open=True, slow_outside=(1e-6, 100))
            if law.get("mean") is None or law.get("cv") is None:
                self.bad("lognormal: needs mean and cv")
        elif kind == "empirical":
            if ("values" in law) == ("file" in law):
                self.bad("empirical: values or file")
            elif "values" in law:
                values = law["values"]
                if not isinstance(values, list) or not values:
                    self.bad("empirical.values: a non-empty list")
                else:
                    for v in values:
                        self.real("empirical.values", v, low=0.0, low_open=True)
            else:
                content = self.file_bytes(str(law["file"]))
                if not isinstance(content, bytes):
                    if content is not None:
                        self.bad("empirical.file: not a readable file of numbers", str(content))
                    return
                try:
                    words = [w for w in re.split(r"[\s,]+", content.decode("utf-8").strip()) if w]
                    values = [float(w) for w in words]
                except (UnicodeDecodeError, ValueError):
                    self.bad("empirical.file: numbers only")
                    return
                if not values or not all(math.isfinite(v) and v > 0 for v in values):
                    self.bad("empirical.file: finite numbers > 0, at least one")

    # commands ----------------------------------------------------------------------------------

    def command_simulate(self, ns):
        self.scenario(ns, "simulate")

    def command_exact(self, ns):
        self.scenario(ns, "exact")

    def command_bound(self, ns):
        self.scenario(ns, "bound")

    def command_graph(self, ns):
        self.scenario(ns, "graph")
        self.real("--epsilon", ns.epsilon, low=0.0, low_open=True)
        self.seed("--seed", ns.seed)
        if ns.assumption2 or ns.epsilon is not None:
            buffer = ns.buffer
            if buffer is None and ns.config:
                doc = self.read_toml("--config", ns.config) or {}
                buffer = (doc.get("system") or {}).get("buffer") if isinstance(doc.get("system"), dict) else None
            if buffer is None:
                self.bad("--assumption2: needs --buffer")
        if getattr(self, "n_servers", None) and self.n_servers > 100:
            self.slow("a large graph")

    def command_tune(self, ns):
        self.scenario(ns, "tune")
        if ns.grid < 2:
            self.bad("--grid: >= 2", repr(ns.grid))
        elif ns.grid > 4:
            self.slow(f"grid {ns.grid}")
        self.count("--jobs", ns.jobs, slow_above=5000)
        self.real("--warmup", ns.warmup, low=0.0, slow_outside=(1e-9, 1e5))
        self.seed("--seed", ns.seed)
        self.count("--d-fast", ns.d_fast)
        self.count("--d-slow", ns.d_slow)
        if ns.max_blocking is not None:
            self.real("--max-blocking", ns.max_blocking, low=0.0)

    def command_diffusion(self, ns):
        policies = registry()["policies"]
        if ns.policy not in policies or not policies[ns.policy]["diffusion"]:
            self.bad("diffusion --policy: a policy with a diffusion limit", repr(ns.policy)[:40])
        self.real("--excess-capacity", ns.excess_capacity, low=0.0, low_open=True, slow_outside=(0.05, 100))
        self.count("--buffer", ns.buffer)
        self.count("--paths", ns.paths, slow_above=64)
        if ns.paths is not None and ns.paths == 1:
            self.slow("one path (no standard error)")
        self.seed("--seed", ns.seed)
        if ns.speeds is not None:
            self.speeds("--speeds", ns.speeds)
        else:
            law = self.construction("--speed-distribution", ns.speed_distribution)
            kinds = {"uniform": {"low", "high"}, "discrete": {"speeds", "probabilities"}}
            self.speed_law(law, kinds)

    def command_meanfield(self, ns):
        from hetlb.theory.meanfield import MEANFIELD_POLICIES, SAMPLING

        self.scenario(ns, "meanfield")
        policy = ns.policy or "jsq"
        if policy not in MEANFIELD_POLICIES:
            self.bad("meanfield --policy: a policy with a mean-field limit", repr(policy)[:40])
        if ns.buffer is not None and is_int(ns.buffer) and ns.buffer > 100 and policy in SAMPLING:
            self.slow(f"buffer {ns.buffer}")
        if ns.compare is not None:
            self.count("--compare", ns.compare, slow_above=512)
            self.count("--jobs", ns.jobs, slow_above=5000)
            self.count("--replications", ns.replications, low=2, slow_above=4)
            self.real("--warmup", ns.warmup, low=0.0, slow_outside=(0.0, 1e3))
            self.seed("--seed", ns.seed)

    def command_place(self, ns):
        self.scenario(ns, "place")
        self.count("--ports", ns.ports, slow_above=64)
        self.real("--ports-exponent", ns.ports_exponent, low=0.0, slow_outside=(0.0, 1.3))
        self.count("--jobs", ns.jobs, slow_above=2000)
        self.count("--replications", ns.replications, low=2, slow_above=4)
        self.real("--time-budget", ns.time_budget, low=0.0, low_open=True, slow_outside=(0.0, 5.0))
        self.real("--tolerance", ns.tolerance, low=0.0, low_open=True)
        self.real("--warmup", ns.warmup, low=0.0, slow_outside=(0.0, 1e3))
        self.seed("--seed", ns.seed)
        self.seed("--graph-seed", ns.graph_seed)
        for name in (ns.families or "fig3,typed,theorem3").split(","):
            if name not in ("fig3", "typed", "theorem3", "theorem2"):
                self.bad("place --families: unknown", repr(name)[:40])
        if (ns.families or "theorem3") and "theorem" in (ns.families or "theorem3"):
            self.slow("a theorem construction")
        n_servers = getattr(self, "n_servers", None)
        if ns.ports is None and (n_servers is None or n_servers > 16):
            self.slow("N^1.25 ports")
        self.store_path(ns.store, must_exist=False)

    # the live commands ---------------------------------------------------------------------------

    def listen_address(self, name, text, *, port_zero: bool):
        """HOST:PORT (or HOST:FIRST-LAST with port_zero, the backends'): ASCII digits, a port in range."""
        if text is None:
            return
        address = text.split(",", 1)[0]
        host, sep, ports = address.rpartition(":")
        first, dash, last = ports.partition("-")
        digits = all(part.isascii() and part.isdigit() for part in ([first, last] if dash else [first]))
        if not sep or not host or not digits:
            self.bad(f"{name}: must be HOST:PORT with a port of digits 0-9", repr(text)[:60])
            return
        low, high = int(first), int(last or first)
        if high > 65535 or (not port_zero and low == 0) or low > high:
            self.bad(f"{name}: a port in range", repr(text)[:60])
        elif high - low >= 16:
            self.slow(f"{name}: {high - low + 1} ports")
        plain = host.strip("[]")
        if len(plain) > 253 or any(len(label) > 63 or not label for label in plain.split(".")) and ":" not in plain:
            self.bad(f"{name}: a host name IDNA cannot encode", repr(host)[:60])
        if any(not c.isprintable() or c.isspace() for c in host):
            self.bad(f"{name}: a host with spaces or control characters", repr(host)[:60])

    def url(self, name, text):
        if text is None:
            return
        if not text.startswith(("http://", "https://")):
            self.bad(f"{name}: an http:// or https:// URL", repr(text)[:60])
        elif not (text.isascii() and text.isprintable()) or " " in text:
            self.bad(f"{name}: a URL of printable ASCII without spaces", repr(text)[:60])

    def command_serve(self, ns):
        from hetlb.gateway.config import LIVE_POLICIES

        self.listen_address("--listen", ns.listen, port_zero=False)
        self.listen_address("--admin", ns.admin, port_zero=False)
        for backend in ns.backend or []:
            self.url("--backend", backend.split(",", 1)[0])
        if ns.policy is not None and ns.policy not in LIVE_POLICIES:
            self.bad("serve --policy: a live policy", repr(ns.policy)[:40])
        self.count("--dispatchers", getattr(ns, "dispatchers", None), slow_above=2)  # serve's, not pick's
        self.count("--d", ns.d)
        self.seed("--seed", ns.seed)
        if ns.config is not None:
            doc = self.read_toml("--config", ns.config)
            policy = (doc or {}).get("policy")
            if isinstance(policy, dict) and not isinstance(policy.get("id", ""), str):
                self.bad("policy.id: a text", repr(policy["id"])[:40])
            if isinstance(doc, dict) and isinstance(doc.get("listen"), str):
                self.listen_address("listen", doc["listen"], port_zero=False)
        if ns.backends_file is not None:
            self.read_toml("--backends-file", ns.backends_file)

    def command_pick(self, ns):
        self.command_serve(ns)

    def command_backend(self, ns):
        for text in ns.listen or []:
            self.listen_address("--listen", text, port_zero=True)
        if len(ns.listen or []) > 16:
            self.slow(f"{len(ns.listen)} backends")
        for name in ("error_probability", "stall_probability", "abort_probability"):
            self.real("--" + name.replace("_", "-"), getattr(ns, name), low=0.0, high=1.0)
        for name in ("mean_service_ms", "token_time_ms"):
            self.real("--" + name.replace("_", "-"), getattr(ns, name), low=0.0, low_open=True)
        self.seed("--seed", ns.seed)
        self.count("--max-model-len", ns.max_model_len)

    def command_loadgen(self, ns):
        for target in ns.target or []:
            self.url("--target", target)
        self.real("--rate", ns.rate, low=0.0, low_open=True, slow_outside=(0.0, 1000.0))
        self.real("--duration", ns.duration, low=0.0, low_open=True, slow_outside=(0.0, 2.0))
        self.real("--warmup", ns.warmup, low=0.0, slow_outside=(0.0, 2.0))
        self.real("--timeout", ns.timeout, low=0.0, low_open=True)
        self.real("--time-unit-ms", ns.time_unit_ms, low=0.0, low_open=True)
        self.count("--max-in-flight", ns.max_in_flight)
        self.count("--batches", ns.batches, low=2)
        self.seed("--seed", ns.seed)
        if is_number(ns.rate) and is_number(ns.duration) and ns.rate * ns.duration > 2000:
            self.slow(f"{ns.rate * ns.duration:g} requests")
        if ns.method is not None and (not re.fullmatch(r"[A-Za-z]{1,20}", ns.method) or ns.method.upper() == "CONNECT"):
            self.bad("--method: an HTTP method other than CONNECT", repr(ns.method)[:40])
        if ns.path is not None and not re.fullmatch(r"/[!-~]*", ns.path):
            self.bad("--path: / and printable ASCII", repr(ns.path)[:40])
        for item in ns.job_types or []:
            name = item.partition("=")[0]
            if not re.fullmatch(r"[A-Za-z0-9_.:/-]{1,64}", name):
                self.bad("--job-types: a job type of letters, digits and _.:/-", repr(item)[:40])
        if ns.shares is not None and len(ns.shares.split(",")) != len(ns.target or []):
            self.bad("--shares: one per target", repr(ns.shares)[:40])

    def command_testbed(self, ns):
        doc = self.read_toml("scenario", ns.scenario)
        if doc is not None and (set(doc) - {"system", "testbed", "run"}):
            self.bad("testbed: unknown table", repr(sorted(set(doc) - {"system", "testbed", "run"}))[:40])
        self.output_folder("--out", ns.out)
        if not self.invalid:  # refused, it is cheap: the fixed set has it
            self.slow("a testbed starts backends, a dispatcher and a load generator for seconds")

    def command_policies(self, ns):
        if ns.check == []:  # a bare --check checks every policy: tens of seconds
            self.slow("the conformance check of every policy")
        for pid in ns.check or []:
            if pid not in registry()["policies"]:
                self.bad("policies --check: unknown id", repr(pid)[:40])

    def command_envoy_config(self, ns):
        """Writes a file at most: never slow; its refusals are checked in tests/gateway/test_picker.py."""
        if ns.lb is not None and ns.lb not in ("LEAST_REQUEST", "ROUND_ROBIN"):
            self.bad("--lb: one of Envoy's LEAST_REQUEST, ROUND_ROBIN", ns.lb[:40])

    def command_demo(self, ns):
        self.count("--jobs", ns.jobs, slow_above=1000)
        self.count("--replications", ns.replications, slow_above=1)
        self.output_folder("--out", ns.out)

    def executor(self, value):
        if value == "serial":
            return
        if value is None or value == "processes" or value.startswith("dask://"):
            self.slow(f"executor {value}")
            return
        if value.startswith("processes:"):
            try:
                workers = int(value.split(":", 1)[1])
            except ValueError:
                self.bad("--executor: processes:N needs an integer N", value)
                return
            if workers < 1:
                self.bad("--executor: processes:N needs N >= 1", value)
            else:
                self.slow(f"executor {value}")
            return
        self.bad("--executor: unknown", repr(value)[:40])

    def store_path(self, path, must_exist: bool):
        content = self.file_bytes(path)
        if content == "dir":
            self.bad("--store: a folder, not a result store")
        elif content == "absent" and must_exist:
            self.bad("--store: no such file")
        elif isinstance(content, bytes) and content and not content.startswith(b"SQLite format 3"):
            self.bad("--store: not a result store")
        elif content == "special" and path != "/dev/zero":
            self.bad("--store: not a result store")

    def command_sweep(self, ns):
        self.executor(ns.executor)
        self.store_path(ns.store, must_exist=False)
        self.output_folder("--out", ns.out)
        doc = self.read_toml("spec", ns.spec)
        if doc is None:
            return
        from hetlb.experiments.spec import SPEC_KEYS

        for key in doc:
            if key not in SPEC_KEYS:
                self.bad("spec: unknown key", key)
        base = doc.get("base")
        if not isinstance(base, dict):
            self.bad("spec: needs a [base] table")
            return
        self.count("spec.replications", doc.get("replications", 1), slow_above=3)
        self.seed("spec.seed", doc.get("seed", 0))
        for key in ("replications", "seed"):
            if isinstance(base.get("run"), dict) and key in base["run"]:
                self.bad(f"spec: base.run.{key} belongs at the top")
        axes = doc.get("axes", {})
        if not isinstance(axes, dict):
            self.bad("spec: axes must be a table")
            return
        for path, values in axes.items():
            if path.split(".")[0] not in ("system", "policy", "run") or "." not in path:
                self.bad("spec: an axis is a dotted path into system, policy or run", path[:40])
                return
            if not isinstance(values, list) or not values:
                self.bad("spec: an axis needs a non-empty list", path[:40])
                return
        points = math.prod(len(v) for v in axes.values())
        if points * doc.get("replications", 1) > 16 if is_int(doc.get("replications", 1)) else True:
            self.slow(f"{points} points")
            return
        for combination in itertools.product(*axes.values()):
            scenario = copy.deepcopy(base)
            for path, value in zip(axes, combination):
                table, *keys = path.split(".")
                target = scenario.setdefault(table, {})
                for key in keys[:-1]:
                    if not isinstance(target, dict):
                        break
                    target = target.setdefault(key, {})
                if not isinstance(target, dict):
                    self.bad("spec: an axis into a value that is not a table", path[:40])
                    return
                target[keys[-1]] = value
            for table in scenario:
                if table not in ("system", "policy", "run") or not isinstance(scenario[table], dict):
                    self.bad("spec: base has an unknown or non-table entry", str(table)[:40])
                    return
            run = scenario.get("run", {})
            if "jobs" not in run and "horizon" not in run and "slots" not in run:
                self.slow("the default 100000 jobs per run")
            before = len(self.invalid)
            self.mapping(scenario, "sweep")
            if len(self.invalid) > before:
                return

    def command_store(self, ns):
        self.store_path(ns.store, must_exist=True)
        if self.files.get(ns.store, ("",))[0] == "fixture" and ns.name is not None and ns.name != FIXTURE_SWEEP:
            self.bad("store: no sweep of that name")

    def command_plot(self, ns):
        content = self.file_bytes(ns.sweep_dir)
        spec = self.files.get(ns.sweep_dir, ("",))
        if spec[0] != "fixture":
            if content in ("absent", "dir", "special") or isinstance(content, bytes):
                self.bad("plot: not a finished sweep folder", ns.sweep_dir[:40])
            return
        for name, column in (("--x", ns.x), ("--metric", ns.metric), ("--by", ns.by or None)):
            if column is not None and (column in ("", "nope", "system.nope") or len(column) > 200):
                self.bad(f"plot {name}: not a column")
        if ns.metric in FIXTURE_COLUMNS and ns.metric not in FIXTURE_METRICS and ns.metric != "mean_response_time":
            self.bad("plot --metric: a column without an interval", ns.metric)
        if ns.output:  # '' is the default path
            out = self.file_bytes(ns.output)
            if out == "dir":
                self.bad("plot --output: a folder")
            elif ns.output.endswith(".nope"):
                self.bad("plot --output: an unknown image format")

    def command_reproduce(self, ns):
        reproductions = registry()["reproductions"]
        self.executor(ns.executor)
        self.store_path(ns.store, must_exist=False)
        self.output_folder("--out", ns.out)
        if ns.scale == "paper":
            self.slow("the paper scale")
        if ns.name not in reproductions:
            self.bad("reproduce: unknown name", repr(ns.name)[:40])
            return
        options = reproductions[ns.name]
        given = {}
        for text in ns.set or []:
            name, sep, value = text.partition("=")
            if not sep or not name:
                self.bad("--set: must be NAME=VALUE", text[:40])
                return
            given[name.strip()] = json_or_text(value)
        tiny = TINY_REPRODUCTIONS.get(ns.name, {})
        if not tiny:
            self.slow("a reproduction without small options")
        for name, value in {**{k: options[k][0] for k in tiny}, **given}.items():
            if name not in options:
                self.bad("reproduce --set: unknown option", name)
                continue
            before = len(self.invalid)
            default = options[name][0]
            if isinstance(default, bool):
                if not isinstance(value, bool):
                    self.bad(f"reproduce {name}: true or false")
            elif isinstance(default, int):
                if not is_int(value):
                    self.bad(f"reproduce {name}: an integer")
                elif value < 0:
                    self.bad(f"reproduce {name}: >= 0")
            elif isinstance(default, float):
                if not is_number(value):
                    self.bad(f"reproduce {name}: a number")
                elif not math.isfinite(value) or value < 0:
                    self.bad(f"reproduce {name}: finite and >= 0")
            elif isinstance(default, str) and not isinstance(value, str):
                self.bad(f"reproduce {name}: a text")
            elif isinstance(default, list) and not isinstance(value, list):
                self.bad(f"reproduce {name}: a list")
            if len(self.invalid) > before or value == tiny.get(name, options[name][0]):
                continue
            limit = tiny.get(name)
            small = (is_number(value) and is_number(limit) and 0 < value <= limit) or (
                isinstance(value, list) and isinstance(limit, list) and len(value) <= len(limit)
            )
            if not small:
                self.slow(f"reproduce {name}={short(value)}")


# --- running a case -----------------------------------------------------------------------------------


class CaseTimeout(BaseException):
    """Raised in the case when its time is up (a BaseException: not caught as an error)."""


class ServerNotStopped(BaseException):
    """Raised in a served case by SIGTERM when the server has no handler of its own for it."""


def _not_stopped(signum, frame):
    raise ServerNotStopped(where_stack(frame))


def stop_when_serving(done: threading.Event, stopped: list) -> None:
    """Send SIGTERM to this process once the server of the case has its own handler for it (the
    server installs it before it listens, and is then stopped by it wherever it is in its start),
    unless the case ends first; a server that never installs one meets the case's time limit."""
    while not done.wait(0.02):
        handler = signal.getsignal(signal.SIGTERM)
        if callable(handler) and handler is not _not_stopped:
            stopped.append(time.monotonic())
            os.kill(os.getpid(), signal.SIGTERM)
            return


ON_TIMEOUT = []
"""Callbacks of the time limit, given where the case was: the worker tells its parent first, so a
crash that follows the exception (it interrupts compiled code) still counts as a hang."""


def _alarm(signum, frame):
    here = where_stack(frame)
    for callback in ON_TIMEOUT:
        callback(here)
    raise CaseTimeout(here)


def where_stack(frame) -> str:
    """``where`` for a running frame and its callers."""
    frames = traceback.extract_stack(frame)
    ours = [f for f in frames if "/hetlb/" in f.filename and "fuzz_cli" not in f.filename]
    if not frames:
        return "?"
    frame = (ours or frames)[-1]
    path = frame.filename
    path = "hetlb/" + path.rsplit("/hetlb/", 1)[1] if "/hetlb/" in path else "/".join(Path(path).parts[-2:])
    return f"{path}:{frame.lineno} in {frame.name}"


def materialize(case: Case, folder: Path, fixtures: Path) -> None:
    folder.mkdir(parents=True)
    for name, spec in case.files.items():
        path = folder / name
        kind = spec[0]
        if kind == "bytes":
            path.write_bytes(spec[1])
        elif kind == "dir":
            path.mkdir()
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "loop":
            path.symlink_to(name)
        elif kind == "fixture":
            source = fixtures / spec[1]
            if source.is_dir():
                shutil.copytree(source, path)
            else:
                shutil.copy2(source, path)
        elif kind == "sweep-broken":
            path.mkdir()
            (path / "summary.parquet").write_bytes(b"PAR1 not really\x00\x01")
        elif kind == "sweep-dir-summary":
            (path / "summary.parquet").mkdir(parents=True)


def where(tb) -> str:
    """The deepest frame in hetlb's source (else the deepest frame) as path:line in function."""
    frames = traceback.extract_tb(tb)
    if not frames:
        return "?"
    ours = [f for f in frames if "/hetlb/" in f.filename and "fuzz_cli" not in f.filename]
    frame = (ours or frames)[-1]
    path = frame.filename
    if "/hetlb/" in path:
        path = "hetlb/" + path.rsplit("/hetlb/", 1)[1]
    else:
        path = "/".join(Path(path).parts[-2:])
    return f"{path}:{frame.lineno} in {frame.name}"


def run_in_process(case: Case, folder: Path, fixtures: Path, seconds: float) -> dict:
    """Run one case through hetlb.cli.main in this process: exit status, output, exception."""
    from hetlb.cli import main

    materialize(case, folder, fixtures)
    out_bytes, err_bytes = io.BytesIO(), io.BytesIO()
    out = io.TextIOWrapper(out_bytes, encoding="utf-8", errors="strict", write_through=True)
    err = io.TextIOWrapper(err_bytes, encoding="utf-8", errors="backslashreplace", write_through=True)
    saved = sys.stdout, sys.stderr, sys.argv, os.getcwd()
    result = {"exit": None, "exception": None, "timeout": False}
    started = time.perf_counter()
    previous = signal.signal(signal.SIGALRM, _alarm)
    previous_term = signal.signal(signal.SIGTERM, _not_stopped)
    served, stopped = threading.Event(), []
    watcher = None
    if case.command in SERVING:
        watcher = threading.Thread(target=stop_when_serving, args=(served, stopped))
    try:
        os.chdir(folder)
        sys.stdout, sys.stderr, sys.argv = out, err, ["hetlb", *case.argv]
        signal.setitimer(signal.ITIMER_REAL, seconds)
        if watcher is not None:
            watcher.start()
        with warnings.catch_warnings():  # warnings shown once per case, as in a fresh process
            try:
                status = main(list(case.argv))
            except SystemExit as stop:
                status = stop.code
                if isinstance(status, str):
                    print(status, file=sys.stderr)
                    status = 1
                elif status is None:
                    status = 0
            result["exit"] = status if isinstance(status, int) else repr(status)
    except CaseTimeout as error:
        result.update(timeout=True, where=error.args[0] if error.args else where(error.__traceback__))
    except ServerNotStopped as error:
        result.update(timeout=True, where=f"SIGTERM not handled at {error.args[0]}")
    except BaseException as error:  # noqa: B036 - anything that escapes main is the finding
        result["exception"] = {
            "type": type(error).__name__,
            "message": str(error)[:500],
            "where": where(error.__traceback__),
            "traceback": "".join(traceback.format_exception(error))[-6000:],
        }
    finally:
        served.set()
        if watcher is not None and watcher.is_alive():
            watcher.join()
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        signal.signal(signal.SIGTERM, previous_term)
        sys.stdout, sys.stderr, sys.argv = saved[:3]
        os.chdir(saved[3])
    result["stopped"] = bool(stopped)
    result["seconds"] = time.perf_counter() - started
    result["stdout"] = out_bytes.getvalue().decode("utf-8", "replace")[:20000]
    result["stderr"] = err_bytes.getvalue().decode("utf-8", "replace")[-20000:]
    return result


def _worker(conn, cases, root, fixtures, seconds, memory_mb):
    """A child: its own process group (killed as a whole), a capped address space, cases in turn."""
    os.setpgrp()
    if memory_mb:
        limit = memory_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    null = os.open(os.devnull, os.O_RDWR)
    log = os.open(os.path.join(root, f"worker-{os.getpid()}.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.dup2(null, 0), os.dup2(log, 1), os.dup2(log, 2)
    current = [None]
    ON_TIMEOUT.append(lambda here: conn.send(("timeout", current[0], here)))
    for case in cases:
        current[0] = case.id
        conn.send(("start", case.id, None))
        folder = Path(root) / "cases" / case.id.replace(":", "-")
        try:
            outcome = run_in_process(case, folder, Path(fixtures), seconds)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        conn.send(("done", case.id, outcome))
        if outcome["timeout"]:  # interrupted anywhere (an import, a compilation): a fresh child goes on
            break
    conn.send(("bye", None, None))
    conn.close()


def _build_fixtures(conn, fixtures):
    """A finished sweep (its folder and result store) for plot and store; it also loads, or
    compiles, the simulation kernels once before the cases run."""
    from hetlb.cli import main

    os.setpgrp()
    fixtures = Path(fixtures)
    fixtures.mkdir(parents=True, exist_ok=True)
    (fixtures / "spec.toml").write_text(toml_text(FIXTURE_SPEC))
    argvs = [
        ["sweep", str(fixtures / "spec.toml"), "--executor", "serial", "--store", str(fixtures / "store.sqlite")]
        + ["--out", str(fixtures / "sweep-out"), "-q"],
        *CORPUS["fixture"]["warm_up"],
    ]
    log = io.StringIO()
    try:
        for argv in argvs:
            with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
                status = main(argv)
            if status != 0:
                raise RuntimeError(f"hetlb {' '.join(argv)} exited {status}")
        conn.send(("ok", log.getvalue()))
    except BaseException as error:  # noqa: B036 - reported to the parent
        conn.send(("fail", f"{log.getvalue()}\n{''.join(traceback.format_exception(error))}"))


@dataclass
class Slot:
    process: multiprocessing.Process
    conn: object
    remaining: deque
    current: str | None = None
    started: float = 0.0
    deadline: float = 0.0
    timed_out: str | None = None  # where the case was when its time was up


def kill_group(process) -> None:
    """Kill a child and every process it started (its process group)."""
    for kill in (lambda: os.killpg(process.pid, signal.SIGKILL), process.kill):
        with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
            kill()
    process.join(timeout=10)


@dataclass
class Report:
    cases: list[Case]
    outcomes: dict  # case id -> outcome (with "status" and "cause")
    seconds: float
    label: str = ""

    def counts(self) -> dict:
        counts = {}
        for outcome in self.outcomes.values():
            counts[outcome["status"]] = counts.get(outcome["status"], 0) + 1
        return counts

    def failures(self) -> list[tuple[Case, dict]]:
        return [(c, self.outcomes[c.id]) for c in self.cases if self.outcomes[c.id]["status"] in FAILURES]

    def groups(self) -> dict[str, list]:
        groups: dict[str, list] = {}
        for case, outcome in self.failures():
            groups.setdefault(outcome["cause"], []).append((case, outcome))
        return dict(sorted(groups.items(), key=lambda item: (FAILURES.index(item[1][0][1]["status"]), -len(item[1]))))

    def summary(self, examples: int = 1) -> str:
        counts = self.counts()
        fine = ", ".join(f"{counts.get(s, 0)} {s}" for s in FINE)
        bad = ", ".join(f"{counts[s]} {s}" for s in FAILURES if counts.get(s))
        lines = [
            f"hetlb fuzz{self.label}: {len(self.cases)} cases in {self.seconds:.0f} s: {fine}; "
            f"failures: {bad or 'none'}"
        ]
        for cause, members in self.groups().items():
            members = sorted(members, key=lambda m: len(" ".join(m[0].argv)))
            lines.append(f"\n[{members[0][1]['status']}] {cause}: {len(members)} case(s)")
            for case, outcome in members[:examples]:
                lines.append(f"    {case.id}  {short_argv(case.argv)}")
                detail = outcome.get("detail")
                if detail:
                    lines.append(f"        {detail}")
        notes = self.notes()
        if notes:
            lines.append("\nnot failures: exit 0 with text on standard error")
            for text, ids in notes.items():
                lines.append(f"    {len(ids)} x {text}  (e.g. {ids[0]})")
        return "\n".join(lines)

    def notes(self) -> dict:
        notes: dict[str, list] = {}
        for case in self.cases:
            outcome = self.outcomes[case.id]
            if outcome["status"] == "ok" and outcome.get("stderr", "").strip():
                first = noise_key(outcome["stderr"].strip().splitlines()[0])
                if "Warning" in first:
                    notes.setdefault(first, []).append(case.id)
        return notes

    def to_json(self, everything: bool = False) -> dict:
        return {
            "seconds": self.seconds,
            "counts": self.counts(),
            "cases": [
                {
                    "id": case.id,
                    "status": self.outcomes[case.id]["status"],
                    "label": case.label,
                    "argv": case.argv,
                    "invalid": case.invalid,
                    "costly": case.costly,
                    "exit": self.outcomes[case.id].get("exit"),
                    "seconds": self.outcomes[case.id].get("seconds"),
                    "stderr": self.outcomes[case.id].get("stderr", "")[-300:],
                }
                for case in self.cases
            ]
            if everything
            else [],
            "failures": [
                {
                    "id": case.id,
                    "status": outcome["status"],
                    "cause": outcome["cause"],
                    "argv": case.argv,
                    "label": case.label,
                    "invalid": case.invalid,
                    "files": sorted(case.files),
                    "exit": outcome.get("exit"),
                    "stderr": outcome.get("stderr", "")[-2000:],
                    "traceback": (outcome.get("exception") or {}).get("traceback", ""),
                }
                for case, outcome in self.failures()
            ],
        }


def noise_key(line: str) -> str:
    """A line of standard error, with what varies from case to case taken out."""
    match = re.match(r"^(\S+?):(\d+): (\w+Warning): (.*)$", line)
    if match:
        path = match.group(1)
        path = "hetlb/" + path.rsplit("/hetlb/", 1)[1] if "/hetlb/" in path else "/".join(Path(path).parts[-2:])
        return f"{match.group(3)} at {path}:{match.group(2)}: {match.group(4)[:60]}"
    return re.sub(r"\d+(\.\d+)?", "N", line)[:80]


def classify(case: Case, outcome: dict) -> tuple[str, str, str]:
    """(status, cause, detail) of an outcome: a fine one (FINE) or a failure (FAILURES)."""
    command = f"hetlb {case.command}".strip() if case.command in command_flags() else "hetlb"
    enormous = not case.invalid and any(not why.startswith("the judge could not") for why in case.costly)
    if outcome.get("killed") or outcome.get("timeout"):
        at = f"time limit at {outcome['where']}" if outcome.get("timeout") else "no answer in time, killed"
        after = outcome.get("after")
        then = f"then {'killed' if after.get('killed') else 'died: ' + after.get('crashed', '?')}" if after else ""
        if enormous:
            return "too-slow", f"{at} ({command}, valid but enormous input)", f"{case.costly[0]} {then}".strip()
        return "hang", f"{at} ({command})", then
    if outcome.get("crashed"):
        return "crash", f"the process died ({outcome['crashed']}): {command}", ""
    error = outcome.get("exception")
    if error:
        message = error["message"].splitlines()[0][:160] if error["message"] else ""
        return "traceback", f"{error['type']} at {error['where']}", f"{error['type']}: {message}"
    status = outcome["exit"]
    stderr_lines = [line for line in outcome.get("stderr", "").splitlines() if line.strip()]
    if status == 0 or (status == 1 and case.command in VERDICT_COMMANDS):
        if case.invalid:
            rule, detail = case.invalid[0]
            return "nonsense-accepted", f"exit {status} on invalid input ({rule}): {command}", detail
        if (
            status == 0
            and not outcome.get("stdout", "").strip()
            and case.command != "store"
            and not outcome.get("stopped")
        ):
            return "bad-exit", f"exit 0 without output: {command}", ""
        return ("ok" if status == 0 else "verdict"), "", ""
    if status == 2:
        errors = [i for i, line in enumerate(stderr_lines) if ERROR_LINE.match(line)]
        if not errors:
            if stderr_lines and stderr_lines[0].startswith("usage:"):
                return "error", "", ""
            first = noise_key(stderr_lines[-1]) if stderr_lines else "nothing"
            return "unclean-error", f"exit 2 without an error line ({first}): {command}", ""
        last = errors[-1]
        if len(errors) > 1 or last != len(stderr_lines) - 1:
            return "unclean-error", f"text after the error line: {command}", stderr_lines[last][:160]
        before = strip_usage(stderr_lines[:last])
        if {"-v", "--verbose"} & set(case.argv):  # the progress asked for may come before the error
            before = [line for line in before if not (line.startswith("hetlb: ") and ": warning:" not in line)]
        if before:
            return "unclean-error", f"'{noise_key(before[0])}' before the error line: {command}", ""
        line = stderr_lines[last]
        if len(line) > MAX_ERROR_CHARS:
            return "long-error", f"error line over {MAX_ERROR_CHARS} characters: {long_error_kind(line, case)}", ""
        return "error", "", ""
    return "bad-exit", f"exit {status}: {command}", (stderr_lines[-1][:160] if stderr_lines else "")


def long_error_kind(line: str, case: Case) -> str:
    """What a long error line is about, without the values that make it long."""
    field = line.split("error: ", 1)[1].split(":", 1)[0]
    command = f"hetlb {case.command}" if case.command in command_flags() else "hetlb"
    if field.startswith("unrecognized arguments"):
        return "argparse quotes the unrecognized arguments"
    if field.startswith("argument "):
        return "argparse quotes the invalid value" + (" (choices)" if "invalid choice" in line else "")
    shown = [token.encode("utf-8", "backslashreplace").decode() for token in case.argv]  # as printed
    if not field.strip():
        field = "an empty value"
    elif any(field in token for token in shown):
        field = "a value of the command line"
    return f"{field[:40]} ({command})"


def strip_usage(lines: list[str]) -> list[str]:
    """Lines other than argparse's usage block (a line "usage: ..." and its indented continuation)."""
    rest, in_usage = [], False
    for line in lines:
        if line.startswith("usage:"):
            in_usage = True
        elif not (in_usage and line.startswith(" ")):
            in_usage = False
            rest.append(line)
    return rest


def run_cases(
    cases: list[Case],
    *,
    workers: int = 1,
    seconds: float = CASE_SECONDS,
    memory_mb: int = MEMORY_MB,
    batch: int = BATCH,
    grace: float = GRACE_SECONDS,
    progress=None,
    label: str = "",
) -> Report:
    """Run ``cases`` in child processes (``workers`` at a time, a fresh one per ``batch`` cases);
    a child silent for ``seconds`` + ``grace`` is killed."""
    started = time.perf_counter()
    from hetlb.cli import COMMANDS

    commands = tuple(f"hetlb.cli.{name.replace('-', '_')}" for name in COMMANDS)
    for module in (*commands, "hetlb.scenario", "hetlb.simulation.continuous", "hetlb.simulation.slotted"):
        __import__(module)  # imported once here, so that each child starts with them
    for module in ("hetlb.experiments", "hetlb.theory", "hetlb.plots", "hetlb.demo", "pandas", "pyarrow.parquet"):
        __import__(module)
    for module in ("hetlb.gateway.serving", "hetlb.engines.backend", "hetlb.engines.inference", "hetlb.testbed"):
        __import__(module)  # the live commands' modules (aiohttp, the dispatcher's compiled rules)
    context = multiprocessing.get_context("fork")
    root = Path(tempfile.mkdtemp(prefix="hetlb-fuzz-"))
    outcomes: dict[str, dict] = {}
    running: dict = {}
    try:
        fixtures = root / "fixtures"
        receive, send = context.Pipe(duplex=False)
        builder = context.Process(target=_build_fixtures, args=(send, str(fixtures)))
        builder.start()
        send.close()
        try:
            if not receive.poll(600):
                raise RuntimeError("building the fixture sweep took over 600 s")
            kind, text = receive.recv()
        finally:
            kill_group(builder)
        if kind != "ok":
            raise RuntimeError(f"could not build the fixture sweep:\n{text}")
        by_id = {case.id: case for case in cases}
        queue = deque(cases)
        while queue or running:
            while queue and len(running) < workers:
                chunk = deque(queue.popleft() for _ in range(min(batch, len(queue))))
                receive, send = context.Pipe(duplex=False)
                process = context.Process(
                    target=_worker,
                    args=(send, list(chunk), str(root), str(fixtures), seconds, memory_mb),
                )  # not a daemon: a case may start a process pool
                process.start()
                send.close()
                now = time.perf_counter()
                running[receive] = Slot(process, receive, chunk, None, now, now + seconds + grace)
            now = time.perf_counter()
            timeout = max(0.0, min(slot.deadline for slot in running.values()) - now)
            for conn in wait(list(running), timeout=timeout):
                slot = running[conn]
                try:
                    kind, case_id, outcome = conn.recv()
                except (EOFError, OSError):
                    slot.process.join(timeout=5)
                    code = slot.process.exitcode
                    died = f"signal {-code}" if code is not None and code < 0 else f"exit status {code}"
                    end(slot, running, queue, outcomes, {"crashed": died})
                    continue
                now = time.perf_counter()
                if kind == "start":
                    slot.current, slot.started, slot.timed_out = case_id, now, None
                    slot.deadline = now + seconds + grace
                elif kind == "timeout":
                    slot.timed_out = outcome
                elif kind == "done":
                    outcomes[case_id] = outcome
                    slot.remaining.popleft()
                    slot.current = None
                    slot.deadline = now + seconds + grace
                    if progress:
                        progress(len(outcomes), len(cases))
                else:  # bye: the child is done; the cases it left (after a time limit) go to a fresh one
                    kill_group(slot.process)
                    del running[conn]
                    queue.extendleft(reversed(slot.remaining))
            now = time.perf_counter()
            for slot in list(running.values()):
                if now > slot.deadline:
                    end(slot, running, queue, outcomes, {"killed": True})
        for case_id, outcome in outcomes.items():
            outcome.setdefault("seconds", 0.0)
            outcome["status"], outcome["cause"], outcome["detail"] = classify(by_id[case_id], outcome)
    finally:
        for slot in running.values():
            kill_group(slot.process)
        shutil.rmtree(root, ignore_errors=True)
    return Report(cases, outcomes, time.perf_counter() - started, label)


def end(slot: Slot, running: dict, queue: deque, outcomes: dict, how: dict) -> None:
    """A child that died or hung: its case fails, the rest of its batch goes back to the queue."""
    kill_group(slot.process)
    del running[slot.conn]
    if slot.remaining:
        first = slot.remaining.popleft()
        if slot.timed_out and first.id == slot.current:  # it died or hung on after its time limit
            how = {"timeout": True, "where": slot.timed_out, "after": how}
        outcomes[first.id] = {**how, "seconds": time.perf_counter() - (slot.started or time.perf_counter())}
        queue.extendleft(reversed(slot.remaining))


# --- the command ----------------------------------------------------------------------------------------


def replay(case_id: str, seconds: float, memory_mb: int, bases: tuple[str, ...] | None = None) -> int:
    seed, index = (int(part) for part in case_id.split(":"))
    case = generate(seed, index, bases)
    report = run_cases([case], seconds=seconds, memory_mb=memory_mb)
    outcome = report.outcomes[case.id]
    print(f"case {case.id}: {case.label}")
    print(f"  {case.shell()}")
    for name, spec in sorted(case.files.items()):
        if not any(name in token for token in case.argv):
            continue  # the files every case has, not named by this one
        if spec[0] == "bytes":
            shown = repr(spec[1][:400]) + (f" ({len(spec[1])} bytes)" if len(spec[1]) > 400 else "")
        else:
            shown = " ".join(map(str, spec))
        print(f"  file {name}: {shown}")
    print(f"  certainly invalid: {'; '.join(f'{r} {d}'.strip() for r, d in case.invalid) or 'no'}")
    if case.costly:
        print(f"  slow if valid: {'; '.join(case.costly)}")
    print(f"outcome: {outcome['status']}" + (f" - {outcome['cause']}" if outcome["cause"] else ""))
    print(f"  exit {outcome.get('exit')}, {outcome.get('seconds', 0):.2f} s")
    for name in ("stdout", "stderr"):
        if outcome.get(name):
            print(f"--- {name}\n{outcome[name][-3000:]}")
    if outcome.get("exception"):
        print(f"--- traceback\n{outcome['exception']['traceback']}")
    return 0 if outcome["status"] in FINE else 1


def main(argv=None) -> int:
    options = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    options.add_argument("--cases", type=int, default=3000, help="cases to run (default 3000)")
    options.add_argument("--seed", type=int, default=1, help="the campaign's seed (default 1)")
    options.add_argument("--fixed", action="store_true", help="the fixed set of tests/cli/test_fuzz_cli.py")
    options.add_argument("--workers", type=int, default=1, help="child processes at a time (default 1)")
    options.add_argument("--seconds", type=float, default=CASE_SECONDS, help="time limit of a case")
    options.add_argument("--memory-mb", type=int, default=MEMORY_MB, help="address-space limit of a child")
    options.add_argument("--batch", type=int, default=BATCH, help="cases per child process")
    options.add_argument("--examples", type=int, default=1, help="example cases shown per cause")
    options.add_argument("--report", metavar="FILE", help="write every failure as JSON")
    options.add_argument("--all", action="store_true", help="with --report, every case and its outcome too")
    options.add_argument("--list", action="store_true", help="print the cases, do not run them")
    options.add_argument("--replay", metavar="SEED:INDEX", nargs="+", help="run these cases again, verbosely")
    options.add_argument(
        "--templates",
        metavar="LIST",
        help="only these templates, comma-separated (live: " + ",".join(LIVE_AND_NEWER) + "); the same with --replay",
    )
    args = options.parse_args(argv)
    bases = None
    if args.templates:
        bases = tuple(LIVE_AND_NEWER if args.templates == "live" else args.templates.split(","))
        unknown = set(bases) - {template_base(t) for t, _ in TEMPLATES}
        if unknown:
            options.error(f"unknown templates: {', '.join(sorted(unknown))}")
    if args.replay:
        return max(replay(case_id, args.seconds, args.memory_mb, bases) for case_id in args.replay)
    if args.fixed:
        cases, label = fixed_cases(), f" (fixed set, seed {FIXED_SEED})"
    else:
        cases = generate_cases(args.seed, args.cases, bases=bases)
        label = f" (seed {args.seed}" + (f", templates {args.templates})" if bases else ")")
    if args.list:
        for case in cases:
            flags = ("invalid " if case.invalid else "") + ("costly " if case.costly else "")
            print(f"{case.id:>10} {flags:<15}{case.label}\n{'':>11}{short_argv(case.argv)}")
        return 0

    def progress(done, total):
        if done % 100 == 0 or done == total:
            print(f"  {done}/{total} cases", file=sys.stderr, flush=True)

    report = run_cases(
        cases,
        workers=args.workers,
        seconds=args.seconds,
        memory_mb=args.memory_mb,
        batch=args.batch,
        progress=progress,
        label=label,
    )
    print(report.summary(args.examples))
    if args.report:
        Path(args.report).write_text(json.dumps(report.to_json(args.all), indent=1, ensure_ascii=True))
    return 1 if report.failures() else 0


if __name__ == "__main__":
    sys.exit(main())
