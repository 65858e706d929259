"""The one vocabulary of update signals (hetlb.signals): every entry is read by each model that
declares it and refused by the others, every live signal maps to its simulated twin through its
entry, and no table of signal names is kept anywhere else in the package."""

import ast
from pathlib import Path

import pytest

import hetlb
from hetlb import signals
from hetlb.errors import InputError
from hetlb.gateway.config import ServeConfig, parse_signals
from hetlb.kernels import flights
from hetlb.kernels import updates as kernel
from hetlb.model.dispatchers import Updates
from hetlb.policies import POLICIES
from hetlb.scenario import Scenario
from hetlb.signals import CONTINUOUS, LED_UPDATE_PARAMETERS, LIVE_FORMS, LIVE_SIGNALS, SIGNALS, SLOTTED, LiveRun

PACKAGE = Path(hetlb.__file__).parent
CONTINUOUS_SIGNALS = signals.names_in(CONTINUOUS)
SLOTTED_SIGNALS = signals.names_in(SLOTTED)
LED_POLICIES = [policy_id for policy_id, spec in POLICIES.items() if spec.on_local_estimates]


def continuous_run(update: str, policy: str = "l-jsq"):
    system = hetlb.System.from_speeds([1.0, 1.0, 0.5, 0.5], load=0.7)
    return hetlb.simulate(system, policy, dispatchers=2, update=update, jobs=400, seed=3)


@pytest.mark.parametrize("name", CONTINUOUS_SIGNALS)
def test_every_continuous_signal_runs_and_is_counted(name):
    """Each signal the continuous model declares runs there: the signal alone (increment beside
    piggyback, since it alone never learns a departure), its messages counted under its name."""
    update = "increment,piggyback" if name == "increment" else name
    result = continuous_run(update)
    assert list(result.metadata["dispatchers"]["update"]) == update.split(",")
    if SIGNALS[name].counted:
        assert result.messages_per_job[name] > 0
    if SIGNALS[name].truth:
        assert result.mean_estimate_error == 0.0


@pytest.mark.parametrize(
    "name, parameter", [(n, p) for n in CONTINUOUS_SIGNALS for p in SIGNALS[n].parameters_in(CONTINUOUS)]
)
def test_every_continuous_parameter_is_read_with_its_default(name, parameter):
    entry = SIGNALS[name].parameters[parameter]
    assert Updates.parse(name).signals[name][parameter] == entry.default
    other = entry.kind[-1] if isinstance(entry.kind, tuple) else 0.5 if isinstance(entry.default, float) else 3
    assert Updates.parse({name: {parameter: other}}).signals[name][parameter] == other


@pytest.mark.parametrize("name", [n for n in CONTINUOUS_SIGNALS if SIGNALS[n].messages])
def test_message_signals_take_a_delay_in_the_continuous_model(name):
    updates = Updates.parse(f"{name}:mean_delay=0.25")
    assert updates.delays[name] == signals.Delay("exponential", 0.25)
    assert Updates.parse(updates.text()) == updates


def test_the_kernel_counts_the_kinds_the_entries_name():
    assert signals.MESSAGE_KINDS[kernel.PIGGYBACK] == "piggyback" and signals.MESSAGE_KINDS[kernel.PUSH] == "push"
    assert signals.MESSAGE_KINDS[kernel.PULL] == "pull" and signals.MESSAGE_KINDS[kernel.SNAPSHOT] == "snapshot"
    assert signals.MESSAGE_KINDS[kernel.PROBE] == "probe" and signals.MESSAGE_KINDS[kernel.INCREMENT] == "increment"
    assert all(SIGNALS[name].messages for name in signals.MESSAGE_KINDS[: flights.DELAYED_KINDS])


def slotted_run(policy: str = "l-jsq", **params):
    system = hetlb.SlottedSystem.from_speeds([1.0, 1.0, 0.5, 0.5], dispatchers=2, load=0.7)
    return hetlb.simulate_slotted(system, policy, slots=2000, seed=3, **params)


@pytest.mark.parametrize("name", SLOTTED_SIGNALS)
def test_every_slotted_signal_runs_as_the_led_parameters_it_names(name):
    """A strategy is the LED policies' ``update``; any other slotted signal is an LED flag, given
    beside a strategy; each runs, and the run's policy records it."""
    entry = SIGNALS[name]
    update = name if entry.strategy else f"{signals.LED_STRATEGIES[0]},{name}"
    policy = slotted_run(update=update).metadata["policy"]
    if entry.strategy:
        assert policy["update"] == name
    else:
        assert policy[entry.led_flag] is True


@pytest.mark.parametrize(
    "name, parameter", [(n, p) for n in SLOTTED_SIGNALS for p in SIGNALS[n].parameters_in(SLOTTED)]
)
def test_every_slotted_parameter_is_an_led_parameter_of_every_led_policy(name, parameter):
    entry = SIGNALS[name].parameters[parameter]
    assert LED_UPDATE_PARAMETERS[entry.led_name][0] == entry.default
    for policy_id in LED_POLICIES:
        assert POLICIES[policy_id].parameters[entry.led_name] == LED_UPDATE_PARAMETERS[entry.led_name]
    other = entry.kind[-1] if isinstance(entry.kind, tuple) else 0.5 if isinstance(entry.default, float) else 3
    given = slotted_run(update=f"{name}:{parameter}={other}").metadata["policy"]
    assert given[entry.led_name] == other
    beside = slotted_run(update=name, **{entry.led_name: other}).metadata["policy"]
    assert beside == given


def test_the_slotted_update_text_and_the_flags_give_the_same_run():
    by_text = slotted_run("l-pod", update="push:p_hat=0.3:d=3,increment")
    by_flags = slotted_run("l-pod", update="push", p_hat=0.3, push_d=3, increment_on_dispatch=True)
    assert by_text.mean_delay == by_flags.mean_delay and by_text.messages == by_flags.messages


def test_a_slotted_scenario_takes_the_update_as_text_or_table():
    system = {"model": "slotted", "speeds": "4x1.0", "dispatchers": 2, "load": 0.7}
    policies = [
        {"id": "l-jsq", "update": "pull:p_hat=0.5:trigger=departure"},
        {"id": "l-jsq", "update": {"pull": {"p_hat": 0.5, "trigger": "departure"}}},
        {"id": "l-jsq", "update": "pull", "p_hat": 0.5, "pull_trigger": "departure"},
    ]
    built = {sorted_params(Scenario.from_mapping({"system": system, "policy": p}).policy.params) for p in policies}
    assert len(built) == 1


def sorted_params(params: dict) -> str:
    return repr(sorted(params.items()))


@pytest.mark.parametrize("name", sorted(set(SIGNALS) - set(SLOTTED_SIGNALS)))
def test_a_model_refuses_a_signal_it_does_not_declare(name):
    with pytest.raises(InputError, match=f"{name} does not run in the slotted model") as error:
        slotted_run(update=f"push,{name}")
    assert error.value.field == "update"


@pytest.mark.parametrize(
    "update, field, words",
    [
        ("push,pull", "update", "one of push or pull"),
        ("push:p_hat=0.5", "update.p_hat", "given twice"),
        ("pull:delay=1", "update.pull", "no delay in the slotted model"),
        ("push:mean_delay=1", "update.push", "no delay in the slotted model"),
        ("pull:trigger=arrival", "update.pull.trigger", "departure-slot"),
    ],
)
def test_bad_slotted_updates_are_one_line_errors(update, field, words):
    with pytest.raises(InputError, match=words) as error:
        slotted_run(update=update, p_hat=0.5) if "given twice" in words else slotted_run(update=update)
    assert error.value.field == field


def test_the_continuous_model_refuses_a_slotted_only_parameter():
    with pytest.raises(InputError, match="no parameter 'trigger' in the continuous model") as error:
        Updates.parse("push:trigger=arrival")
    assert error.value.field == "update.push"


# --- live -> model -------------------------------------------------------------------------------

UNIT_MS = 5.0


@pytest.mark.parametrize("live_name", list(LIVE_SIGNALS))
@pytest.mark.parametrize("led", [False, True])
def test_every_live_signal_has_a_simulated_twin_the_continuous_model_runs(live_name, led):
    """With several dispatchers each live signal maps, through its entry, to update signals that
    the continuous model accepts, and each twin signal is counted in a run."""
    chosen = parse_signals("signals", LIVE_FORMS[live_name].example).chosen
    assert parse_signals("signals", parse_signals("signals", live_name).names()).chosen == chosen
    twin = signals.model_twin(chosen, LiveRun(UNIT_MS, dispatchers=3, led=led, p_hat=0.5, d=2, unseen_ms=1.0))
    assert twin is not None
    if not twin:  # an LED policy decides on updates only: its own counts enter nothing
        assert led and not LIVE_SIGNALS[live_name].messages
        return
    updates = Updates.parse(signals.text(twin))
    result = continuous_run(signals.text(twin), "l-jsq" if led else "jsq")
    for name in updates.signals:
        assert result.messages_per_job[name] > 0


def test_the_twins_say_what_the_live_signals_do():
    """Facts of the live dispatcher (docs/reference/serve.md), one per live signal."""
    run = LiveRun(UNIT_MS, dispatchers=2, p_hat=0.25, d=3, unseen_ms=1.0)
    twin = signals.model_twin(parse_signals("s", "inflight,piggyback,push,poll:tau=100ms").chosen, run)
    assert twin == {
        "increment": {},  # its own requests, counted as they are sent
        "piggyback": {"delay": 1.0 / UNIT_MS},  # answers seen after the unseen time
        "push": {"p_hat": 0.25, "d": 3},  # serve's --p-hat and --d
        "snapshot": {"tau": 100.0 / UNIT_MS, "phases": "independent"},  # every process on its own timer
    }
    alone = LiveRun(UNIT_MS, dispatchers=1)
    assert signals.model_twin(parse_signals("s", "inflight").chosen, alone) is None  # one dispatcher knows all
    assert signals.model_twin(parse_signals("s", "piggyback").chosen, alone) == {"piggyback": {}}


def test_a_snapshot_live_is_a_poll_or_a_scrape_late_by_its_measured_delay():
    """poll and metrics are both live forms of snapshot: each dispatcher on its own phase, every
    tau, its answers late by the snapshot delay measured live (send to report)."""
    assert [live.name for live in SIGNALS["snapshot"].live] == ["poll", "metrics"]
    assert all(live in LIVE_SIGNALS[name].live for name, live in LIVE_FORMS.items())
    run = LiveRun(UNIT_MS, dispatchers=4, unseen_ms=1.0, snapshot_delay_ms=2.0)
    snapshot = {"tau": 50.0 / UNIT_MS, "phases": "independent", "delay": 2.0 / UNIT_MS}
    for live in ("poll:tau=50ms", "metrics:vllm:tau=50ms", "metrics:sglang:tau=50ms"):
        twin = signals.model_twin(parse_signals("s", f"inflight,{live}").chosen, run)
        assert twin == {"increment": {}, "piggyback": {"delay": 1.0 / UNIT_MS}, "snapshot": snapshot}
        assert Updates.parse(signals.text(twin)).delays["snapshot"] == signals.Delay("constant", 2.0 / UNIT_MS)
    default = parse_signals("s", "metrics").chosen["metrics"]
    assert default == {"engine": "vllm", "tau": 0.05}  # the Inference Extension's 50 ms
    unmeasured = signals.model_twin({"metrics": default}, LiveRun(UNIT_MS, dispatchers=2))
    assert unmeasured == {"snapshot": {"tau": 50.0 / UNIT_MS, "phases": "independent"}}


def test_metrics_reports_so_an_led_policy_may_decide_on_it_alone():
    config = ServeConfig.from_mapping({"backends": ["http://127.0.0.1:9001"], "policy": "l-jsq", "signals": "metrics"})
    assert (
        config.signals.reports
        and config.signals.metrics == ("vllm", 0.05)
        and config.signals.names() == ["metrics:vllm:tau=50ms"]
    )


def test_serve_reads_its_signals_from_the_entries():
    config = ServeConfig.from_mapping({"backends": ["http://127.0.0.1:9001"]})
    assert config.signals.names() == [name for name, live in LIVE_FORMS.items() if live.default]
    assert config.signals.inflight and config.signals.piggyback and config.signals.reports
    with pytest.raises(InputError, match="choose from " + ", ".join(LIVE_FORMS)):
        parse_signals("signals", "smoke")
    assert parse_signals("signals", "poll").poll_interval == LIVE_FORMS["poll"].options["tau"].default


# --- one table -------------------------------------------------------------------------------------


def signal_name_tables(tree: ast.AST):
    """Literal tuples, lists, sets and dict keys holding two or more signal names (model or live),
    outside namedtuple field lists."""
    words = set(SIGNALS) | set(LIVE_SIGNALS)
    fields = {
        id(arg)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "namedtuple"
        for arg in node.args
    }
    for node in ast.walk(tree):
        if id(node) in fields:
            continue
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            items = node.elts
        elif isinstance(node, ast.Dict):
            items = [key for key in node.keys if key is not None]
        else:
            continue
        found = [item.value for item in items if isinstance(item, ast.Constant) and item.value in words]
        if len(found) >= 2:
            yield node.lineno, found


def test_no_table_of_signal_names_outside_the_signals_module():
    tables = [
        f"{path.relative_to(PACKAGE)}:{line}: {found}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != PACKAGE / "signals.py"
        for line, found in signal_name_tables(ast.parse(path.read_text()))
    ]
    assert tables == []


def test_the_table_check_finds_a_table():
    assert list(signal_name_tables(ast.parse('KINDS = ("push", "pull")\nX = {"poll": 1, "inflight": 2}')))
    assert not list(signal_name_tables(ast.parse('T = namedtuple("T", ["push", "pull"])')))


def test_an_entry_is_checked_when_it_is_declared():
    with pytest.raises(ValueError, match="belongs to the slotted model"):
        signals.Signal("scrape", "an engine's metrics", "1 per scrape", strategy=True)
    tau = signals.Parameter(0.05, "time between two scrapes", signals.DURATION)
    with pytest.raises(ValueError, match="its positional option is a word"):
        signals.LiveSignal("scrape", "an engine's metrics", lambda options, run: {}, {"tau": tau}, positional="tau")
