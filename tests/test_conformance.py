"""The conformance check runs over every registered policy, and it can fail."""

import dataclasses

import pytest

import hetlb
from hetlb import conformance
from hetlb.errors import InputError, UnexpectedKeyword
from hetlb.policies import POLICIES, exact_rules
from hetlb.policies.registry import PolicySpec


@pytest.mark.parametrize("policy_id", list(POLICIES))
def test_every_registered_policy_conforms(policy_id):
    report = hetlb.check_policy(policy_id, seed=3)
    assert report.passed, report.summary
    names = {check.name for check in report.checks}
    spec = POLICIES[policy_id]
    assert ("exact agreement" in names) == ("continuous" in spec.models and spec.exact_rule is not None)
    assert ("slotted invariants" in names) == ("slotted" in spec.models)
    assert ("choice on estimates" in names) == ("live" in spec.models)


def test_a_key_that_contradicts_the_definition_is_caught(monkeypatch):
    # jfsq's kernel key with jssq's definition: the keys send ties to the fastest, the rule to the slowest
    wrong = dataclasses.replace(POLICIES["jfsq"], exact_rule=exact_rules.jssq)
    monkeypatch.setitem(POLICIES, "jfsq", wrong)
    monkeypatch.setitem(conformance.BY_CODE, wrong.code, wrong)
    report = hetlb.check_policy("jfsq")
    failed = {check.name for check in report.checks if not check.passed}
    assert "selection keys" in failed and not report.passed
    assert "FAILS" in report.summary


@pytest.mark.parametrize(
    ("policy_id", "wrong_rule"),
    [("jfsq", exact_rules.jssq), ("jiq", exact_rules.jsq), ("l-jba", exact_rules.weighted_random)],
)
def test_a_choice_on_estimates_that_contradicts_the_definition_is_caught(monkeypatch, policy_id, wrong_rule):
    rule = "estimate_rule" if POLICIES[policy_id].estimate_rule is not None else "exact_rule"
    monkeypatch.setitem(POLICIES, policy_id, dataclasses.replace(POLICIES[policy_id], **{rule: wrong_rule}))
    check = conformance._choice_on_estimates(policy_id, seed=3, alpha=1e-3)
    assert not check.passed and check.name == "choice on estimates"


def test_an_inconsistent_entry_is_refused_when_it_is_declared():
    with pytest.raises(ValueError, match="slotted_information"):
        PolicySpec("x", 99, "a rule", "nowhere", models=("slotted",))
    with pytest.raises(ValueError, match="ranking"):
        PolicySpec("x", 99, "a rule", "nowhere", integer_keys=True)


def test_unknown_policy_and_unknown_keyword_are_one_line_errors():
    with pytest.raises(InputError, match="unknown policy"):
        hetlb.check_policy("jsqq")
    system = hetlb.System.from_speeds([2.0, 1.0], load=0.5)
    with pytest.raises(TypeError, match="job: unexpected keyword argument of hetlb.simulate") as caught:
        hetlb.simulate(system, "jsq", job=1000)
    assert isinstance(caught.value, UnexpectedKeyword) and "\n" not in str(caught.value)
    assert "its parameters: none" in str(caught.value)
    # a parameter of another policy is no stranger: the chosen policy refuses it by name
    with pytest.raises(InputError, match="policy jsq: has no parameter 'd'"):
        hetlb.simulate(system, "jsq", d=2)


def test_the_command_line_runs_the_check_and_fails_with_it(monkeypatch, capsys):
    import json

    from hetlb.cli import main

    assert main(["policies", "--check", "jsq", "l-pod", "--json"]) == 0
    reports = json.loads(capsys.readouterr().out)
    assert [r["policy"] for r in reports] == ["jsq", "l-pod"] and all(r["passed"] for r in reports)
    wrong = dataclasses.replace(POLICIES["jfsq"], exact_rule=exact_rules.jssq)
    monkeypatch.setitem(POLICIES, "jfsq", wrong)
    monkeypatch.setitem(conformance.BY_CODE, wrong.code, wrong)
    assert main(["policies", "--check", "jfsq"]) == 1
    assert "FAIL selection keys" in capsys.readouterr().out
