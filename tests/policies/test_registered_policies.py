"""The registry is the one table of policies: a policy registered here, in the test, runs in every
model its entry declares and passes the conformance check without another file changing; an entry
whose kernel branch is missing in one model is refused there before anything runs, and the
conformance check fails it; a policy written in a file of its own is imported as a plugin; and no
module outside the registry keeps a table of policy ids."""

import ast
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from numba import njit

import hetlb
import hetlb.cli
from hetlb.errors import InputError
from hetlb.experiments import SweepSpec, sweep
from hetlb.policies import POLICIES, exact_rules, register_policy, registry, unregister_policy
from hetlb.policies.plugins import load_plugins
from hetlb.scenario import Scenario
from hetlb.theory import solve_exact

from support.statistics import bonferroni_t_halfwidth

ROOT = Path(__file__).resolve().parents[2]
SPARSE = dict(arrival_rate=[1.5, 1.2], graph=[[0, 1, 2], [1, 2, 3]], buffer=[2, 3, 4, 2])


@njit
def speed_squared_key(queue_len, speed_class, n_classes, speed, idle_since):
    return (queue_len + 1.0) / (speed * speed)


def speed_squared_rule(queue_len, speed, is_fast, params, idle_rank):
    """Least (q + 1) / mu^2, ties at random, from the definition with numpy alone."""
    delay = (queue_len + 1) / speed**2
    least = delay == delay.min(axis=1, keepdims=True)
    return least / least.sum(axis=1, keepdims=True)


@njit
def shortest_fast_class_first_key(queue_len, speed_class, n_classes, speed, idle_since):
    return float(2 * queue_len + (speed_class > 0))


def shortest_fast_class_first_rule(queue_len, speed, is_fast, params, idle_rank):
    """The shortest queues; among them the fastest servers of the system if any, else all."""
    shortest = queue_len == queue_len.min(axis=1, keepdims=True)
    fast = shortest & is_fast
    chosen = np.where(fast.any(axis=1, keepdims=True), fast, shortest)
    return chosen / chosen.sum(axis=1, keepdims=True)


THROWAWAY = {
    "sed-squared": (speed_squared_key, speed_squared_rule, False),
    "jsq-fast-class": (shortest_fast_class_first_key, shortest_fast_class_first_rule, True),
}


@pytest.mark.parametrize("policy_id", list(THROWAWAY))
def test_a_policy_registered_here_runs_everywhere_it_declares_and_conforms(restore_registry, policy_id):
    key, rule, integer_keys = THROWAWAY[policy_id]
    spec = register_policy(policy_id, key, "a rule of this test", "tests", integer_keys=integer_keys, exact_rule=rule)
    assert hetlb.POLICIES[policy_id] is spec and spec.models == ("continuous",)
    sparse = hetlb.System.from_speeds([2.0, 1.0, 1.0, 0.5], **SPARSE)
    complete = hetlb.System.from_speeds([2.0, 1.0, 1.0, 0.5, 0.5], load=0.8, buffer=4)
    for system in (sparse, complete):  # the scan; the tree (or the key buckets for integer keys)
        result = hetlb.simulate(system, policy_id, jobs=2000, seed=1)
        counters = result.runs[0].counters
        assert counters["arrivals"] == counters["admitted"] + counters["blocked"] > 0
    report = hetlb.check_policy(policy_id, seed=3)
    assert report.passed, report.summary
    names = {check.name for check in report.checks}
    assert {"kernel branches", "selection keys", "continuous decisions", "exact agreement"} <= names
    assert solve_exact(sparse, policy_id).mean_response_time > 0


def test_a_registered_key_gives_the_built_in_policy_bit_for_bit(restore_registry):
    register_policy("jsq-again", njit(lambda q, c, n, s, t: float(q)), "jsq", "tests", integer_keys=True)
    for system in (
        hetlb.System.from_speeds([2.0, 1.0, 1.0, 0.5], **SPARSE),
        hetlb.System.from_speeds([2.0, 1.0, 1.0, 0.5, 0.5, 0.25], load=0.8, buffer=6),
    ):
        mine = hetlb.simulate(system, "jsq-again", jobs=3000, seed=2, replications=2)
        built_in = hetlb.simulate(system, "jsq", jobs=3000, seed=2, replications=2)
        assert [run.mean_response_time for run in mine.runs] == [run.mean_response_time for run in built_in.runs]


def test_a_key_that_breaks_its_definition_is_caught_by_the_decisions(restore_registry):
    # a kernel that ranks by queue length alone where the definition sends ties to the fastest
    register_policy("wrong-jfsq", njit(lambda q, c, n, s, t: float(q)), "jfsq", "tests", exact_rule=exact_rules.jfsq)
    failed = {check.name for check in hetlb.check_policy("wrong-jfsq").checks if not check.passed}
    assert {"selection keys", "continuous decisions"} <= failed


def test_a_kernel_that_runs_another_rule_is_caught_where_conservation_holds(monkeypatch):
    # jsq's kernel branch checked against jiq's definition: every decision is one jiq may take,
    # conservation holds, but the frequencies on states with no idle server are not jiq's
    wrong = dataclasses.replace(POLICIES["jsq"], exact_rule=exact_rules.jiq)
    monkeypatch.setitem(POLICIES, "jsq", wrong)
    from hetlb import conformance

    assert conformance._continuous_invariants("jsq", 0).passed
    check = conformance._continuous_decisions("jsq", 0, 1e-3)
    assert not check.passed and "probabilities" in check.detail


def test_an_entry_without_its_kernel_branch_is_refused_before_it_runs(monkeypatch):
    spec = registry.PolicySpec(
        "jsq-elsewhere",
        99,
        "a ranking policy whose code no kernel knows",
        "tests",
        models=("continuous", "slotted"),
        ranks_whole_set=True,
        exact_rule=exact_rules.jsq,
        slotted_information="the true queues",
    )
    monkeypatch.setitem(POLICIES, spec.id, spec)
    monkeypatch.setitem(registry.BY_CODE, spec.code, spec)
    with pytest.raises(InputError, match="no branch in the continuous kernel"):
        hetlb.simulate(hetlb.System.from_speeds([1.0, 0.5], load=0.5), spec.id, jobs=100)
    with pytest.raises(InputError, match="no branch in the slotted kernel"):
        hetlb.simulate_slotted(hetlb.SlottedSystem.from_speeds([1.0, 0.5], dispatchers=1, load=0.5), spec.id)
    report = hetlb.check_policy(spec.id)
    failed = {check.name: check.detail for check in report.checks if not check.passed}
    assert "the continuous kernel" in failed["kernel branches"] and "the slotted kernel" in failed["kernel branches"]
    assert failed["slotted invariants"].startswith("refused")


def test_bad_registrations_are_one_line_errors(restore_registry):
    key = THROWAWAY["sed-squared"][0]
    with pytest.raises(InputError, match="jsq is a built-in policy"):
        register_policy("jsq", key, "a rule", "tests")
    with pytest.raises(InputError, match="must take 5 arguments"):
        register_policy("two", lambda q, c: 0.0, "a rule", "tests")
    with pytest.raises(InputError, match="policy id"):
        register_policy("a b", key, "a rule", "tests")
    with pytest.raises(InputError, match="definition: must be a non-empty text"):
        register_policy("ok", key, "", "tests")
    with pytest.raises(InputError, match="exact_rule: must take 5 arguments"):
        register_policy("ok", key, "a rule", "tests", exact_rule=lambda q: q)
    with pytest.raises(InputError, match="no policy registered"):
        unregister_policy("jsq")


EXAMPLE_PLUGIN = "examples/fiq_sed.py"


def test_a_plugin_file_registers_its_policy_for_scenarios_and_sweeps(restore_registry, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    scenario = Scenario.from_mapping(
        {
            "system": {"speeds": [2.0, 1.0, 1.0, 0.5], "load": 0.7, "buffer": 4},
            "policy": {"plugins": [EXAMPLE_PLUGIN], "id": "fiq-sed"},
            "run": {"jobs": 2000},
        }
    )
    assert scenario.policy.id == "fiq-sed" and scenario.simulate().mean_response_time > 0
    assert hetlb.check_policy("fiq-sed", seed=1).passed
    spec = SweepSpec.from_toml(ROOT / "examples" / "fiq-sed-sweep.toml")
    spec = dataclasses.replace(spec, replications=1)
    out = sweep(spec, out=tmp_path / "out", store=tmp_path / "store.sqlite", executor="serial", progress=False)
    assert set(out.summary["policy.id"]) == {"fiq-sed", "sed", "jfiq"}


def test_the_plugin_flag_runs_a_policy_of_a_file_and_the_exact_solver_agrees(restore_registry, monkeypatch, capsys):
    """``--plugin`` on the command line: the simulated mean response time and blocking of the
    example policy hold the exact solver's values in their 95% intervals (Bonferroni over the two)."""
    monkeypatch.chdir(ROOT)
    system = ["--speeds", "2,1,0.5", "--load", "0.8", "--buffer", "4", "--policy", "fiq-sed", "--json"]
    assert hetlb.cli.main(["exact", "--plugin", EXAMPLE_PLUGIN, *system]) == 0
    exact = json.loads(capsys.readouterr().out)
    run = ["--jobs", "20000", "--warmup", "20", "--replications", "8", "--seed", "3", "--quiet"]
    assert hetlb.cli.main(["simulate", "--plugin", EXAMPLE_PLUGIN, *system, *run]) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    for measure in ("mean_response_time", "blocking_probability"):
        values = [replication[measure] for replication in runs]
        half_width = bonferroni_t_halfwidth(values, 0.05, 2)
        assert abs(np.mean(values) - exact[measure]) <= half_width, measure


def test_a_policy_flag_keeps_the_plugins_of_the_config(restore_registry, monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(ROOT)
    config = tmp_path / "scenario.toml"
    config.write_text(
        f'[system]\nspeeds = [2.0, 1.0]\nload = 0.5\n[policy]\nid = "sed"\nplugins = ["{EXAMPLE_PLUGIN}"]\n'
    )
    assert hetlb.cli.main(["exact", "--config", str(config), "--policy", "fiq-sed", "--buffer", "3"]) == 0
    assert "fiq-sed" in capsys.readouterr().out


def test_plugins_that_cannot_load_are_one_line_errors(restore_registry, short_tmp_path):
    tmp_path = short_tmp_path
    with pytest.raises(InputError, match=r"plugins\[0\]: no module 'no_such_plugin_module'"):
        load_plugins(["no_such_plugin_module"])
    with pytest.raises(InputError, match="no file"):
        load_plugins([str(tmp_path / "missing.py")])
    bad = tmp_path / "bad_policy.py"
    bad.write_text("import hetlb\nhetlb.register_policy('jsq', lambda q, c, n, s, t: 0.0, 'x', 'y')\n")
    with pytest.raises(InputError, match="plugin .*bad_policy.py: policy id: jsq is a built-in policy") as caught:
        load_plugins([str(bad)])
    assert "\n" not in str(caught.value)
    broken = tmp_path / "broken_policy.py"
    broken.write_text("x = 1 / 0\n")
    with pytest.raises(InputError, match=r"broken_policy.py:1: ZeroDivisionError"):
        load_plugins([str(broken)])
    with pytest.raises(InputError, match="policy.plugins"):
        Scenario.from_mapping({"system": {"speeds": [1.0], "load": 0.5}, "policy": {"plugins": 3}})


# --- no table of policy ids outside the registry ---------------------------------------------------

PACKAGE = ROOT / "src" / "hetlb"
STUDIES = ("experiments/", "demo.py", "cli.py", "cli/")
"""The paper reproductions, the demo and the commands that front them name the policies their
figures and commands use: the design of a study, not facts about a policy."""
SAMPLES = ("simulation/precompile.py",)
"""Sample runs that take every path of the kernel, to compile it ahead of time."""
HOMONYMS = ("graphs/",)
"""The graph constructions have a kind "random", which is no policy."""


def _literals_outside_uses(tree: ast.AST):
    """String constants that are neither docstrings nor uses: a default value (of a parameter, of
    ``x or "id"``, of a ``*_DEFAULTS`` table) or an argument of a call, or inside one."""
    used: set[int] = set()

    def mark(node):
        used.update(id(inner) for inner in ast.walk(node))

    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            mark(body[0])
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            mark(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for default in [*node.args.defaults, *node.args.kw_defaults]:
                if default is not None:
                    mark(default)
        if isinstance(node, ast.Call):
            for argument in [*node.args, *(keyword.value for keyword in node.keywords)]:
                mark(argument)
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
            mark(node.values[-1])
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id.endswith("DEFAULTS") for target in node.targets
        ):
            mark(node.value)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in used:
            yield node


def test_no_module_outside_the_registry_keeps_a_table_of_policy_ids():
    ids = {spec.id for spec in POLICIES.values() if spec.selection_key is None}
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE).as_posix()
        if name in ("policies/registry.py", "signals.py") or name.startswith(STUDIES + SAMPLES + HOMONYMS):
            continue
        for node in _literals_outside_uses(ast.parse(path.read_text())):
            if node.value in ids:
                found.append(f"{name}:{node.lineno} {node.value!r}")
    assert not found, "policy ids outside the registry (derive them from it): " + ", ".join(found)
