"""The command line under fuzzing (tests/fuzz/fuzz_cli.py): no traceback, no hang, no exit 0 on nonsense.

The fixed set is FIXED_CASES mutated invocations of every command from the seed FIXED_SEED, each
cheap whatever its outcome, run in child processes with a time limit per case and a capped address
space (about a minute). A campaign runs more cases, slow ones included:
``python tests/fuzz/fuzz_cli.py --cases 20000 --seed 2`` (docs/background/simulation-practice.md).
The first tests check the harness itself: that it catches a traceback, a hang, a memory bomb and a
dying process, and that it tells a clean error from a noisy or long one.
"""

import datetime
import os
import signal
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fuzz"))  # the runner beside its corpus
import fuzz_cli  # noqa: E402

import hetlb.cli.bound


def fake_case(command="bound", argv=None, invalid=()):
    argv = argv or [command, "--speeds", "2,1", "--load", "0.5"]
    return fuzz_cli.Case(0, 0, command, command, argv, {}, [], list(invalid), [])


def outcome(exit=2, stderr="", stdout="", **more):
    return {"exit": exit, "stderr": stderr, "stdout": stdout, "exception": None, "timeout": False, **more}


@pytest.mark.parametrize(
    "result,invalid,status",
    [
        (outcome(0, stdout="load 0.5: ..."), (), "ok"),
        (outcome(2, "hetlb: error: speeds: must be > 0\n"), (), "error"),
        (outcome(2, "hetlb bound: error: argument --load: invalid float value: 'x'\n"), (), "error"),
        (outcome(2, "usage: hetlb [-h] COMMAND\n\noptions:\n  -h, --help\n"), (), "error"),  # a bare hetlb
        (outcome(0, stdout="load 0.5: ..."), [("load: > 0", "-1")], "nonsense-accepted"),
        (outcome(0), (), "bad-exit"),  # exit 0 and nothing to show
        (outcome(1, "hetlb: error: x\n"), (), "bad-exit"),
        (outcome(2, "x.py:3: RuntimeWarning: overflow\n  y = 1\nhetlb: error: speeds: finite\n"), (), "unclean-error"),
        (outcome(2, "hetlb: error: speeds: one\ntwo\n"), (), "unclean-error"),
        (outcome(2, "Traceback (most recent call last):\n"), (), "unclean-error"),
        (outcome(2, "hetlb: error: speeds: " + "x" * 500 + "\n"), (), "long-error"),
        (outcome(timeout=True, where="hetlb/cli/__init__.py:1 in main"), (), "hang"),
        (outcome(killed=True, seconds=30.0), (), "hang"),
        (outcome(crashed="signal 9"), (), "crash"),
        (outcome(exception={"type": "ValueError", "message": "m", "where": "hetlb/x.py:1 in f"}), (), "traceback"),
    ],
)
def test_outcomes_are_classified(result, invalid, status):
    assert fuzz_cli.classify(fake_case(invalid=invalid), result)[0] == status


def test_a_valid_enormous_run_out_of_time_is_too_slow_not_a_hang():
    timed_out = outcome(timeout=True, where="hetlb/simulation/continuous.py:1 in run")
    enormous = fuzz_cli.Case(0, 0, "simulate", "simulate", ["simulate"], {}, [], [], ["run.jobs 2147483648"])
    assert fuzz_cli.classify(enormous, timed_out)[0] == "too-slow"
    unread = fuzz_cli.Case(0, 0, "simulate", "simulate", ["simulate"], {}, [], [], ["the judge could not read"])
    assert fuzz_cli.classify(unread, timed_out)[0] == "hang"


def test_servers_are_stopped_as_soon_as_they_take_sigterm_and_exit_0():
    """SIGTERM as soon as the server has its handler: with several dispatchers that is while the
    parent forks them (a stop then must reach every child, which exits 0 before it serves)."""
    port = fuzz_cli.serve_port(fuzz_cli.random.Random(5))
    serve = ["serve", "--listen", f"127.0.0.1:{port}", "--backend", "http://127.0.0.1:9"]
    argvs = [serve, [*serve, "--dispatchers", "3"], ["backend", "--listen", "127.0.0.1:0"]]
    cases = [fuzz_cli.Case(0, index, argv[0], argv[0], argv, {}, [], [], []) for index, argv in enumerate(argvs)]
    report = fuzz_cli.run_cases(cases)
    assert [report.outcomes[case.id]["status"] for case in cases] == ["ok", "ok", "ok"], report.summary()
    assert all(report.outcomes[case.id]["stopped"] for case in cases)


def test_a_verdict_is_exit_1_of_policies_check_and_reproduce():
    assert fuzz_cli.classify(fake_case("policies"), outcome(1, stdout="jsq FAILS"))[0] == "verdict"
    assert fuzz_cli.classify(fake_case("bound"), outcome(1, stdout="?"))[0] == "bad-exit"


def test_the_corpus_notation_writes_out_what_toml_cannot_hold():
    assert fuzz_cli.expand("$(2**64)") == "18446744073709551616"
    assert fuzz_cli.expand("d=$(2**63-1)") == "d=9223372036854775807"
    assert fuzz_cli.expand("$(x*3),$(1*2)") == "xxx,11"
    assert os.fsencode(fuzz_cli.expand("a$bytes(ff fe)")) == b"a\xff\xfe"
    assert fuzz_cli.expand(["$int(10**30)", "$range(3)", {"k": "$int(2**63+1)"}]) == [
        10**30,
        [0, 1, 2],
        {"k": 2**63 + 1},
    ]
    utc = datetime.UTC
    assert fuzz_cli.expand(datetime.datetime(1979, 5, 27, 7, 32, tzinfo=utc)) == fuzz_cli.Raw("1979-05-27T07:32:00Z")
    assert fuzz_cli.expand(datetime.time(7, 32)) == fuzz_cli.Raw("07:32:00")
    assert fuzz_cli.expand("1.5") == "1.5"
    kept = fuzz_cli.option(fuzz_cli.random.Random(1), "!--jobs 200|300")
    assert (kept.flag, kept.value in ("200", "300"), kept.keep, kept.kind) == ("--jobs", True, True, "count")
    assert fuzz_cli.options(None, ["--json", "--set d=2"]) == [
        fuzz_cli.Arg("--json"),
        fuzz_cli.Arg("--set", "d=2", "set"),
    ]
    for typo in ["$(2**x)", "$int(2**63)!", "$(x*)", "$"]:
        with pytest.raises(ValueError, match="notation"):
            fuzz_cli.expand(typo)


def test_the_corpus_pools_hold_what_the_runner_needs():
    assert set(fuzz_cli.POOLS) | {"enum", "set", "config", "store", "out"} >= set(fuzz_cli.FLAG_KINDS.values())
    assert {value[0] for value in fuzz_cli.GENERIC if len(value) == 5000 and len(set(value)) == 1} == {"9", "x"}
    assert fuzz_cli.NON_UTF8 in fuzz_cli.GENERIC and not fuzz_cli.NON_UTF8.isprintable()
    assert set(fuzz_cli.TINY_REPRODUCTIONS) <= set(fuzz_cli.registry()["reproductions"])


def test_cases_are_reproducible_from_their_id():
    for index in range(20):
        first, again = fuzz_cli.generate(7, index), fuzz_cli.generate(7, index)
        assert (first.argv, first.files, first.invalid, first.costly) == (
            again.argv,
            again.files,
            again.invalid,
            again.costly,
        )


def test_the_fixed_set_covers_every_command_and_only_cheap_cases():
    cases = fuzz_cli.fixed_cases()
    assert len(cases) == fuzz_cli.FIXED_CASES
    assert not [case.id for case in cases if case.costly]
    assert set(fuzz_cli.command_flags()) <= {case.command for case in cases}
    assert sum(bool(case.invalid) for case in cases) > len(cases) / 3
    assert sum(not case.labels for case in cases) > 20  # unmutated, valid invocations too


def test_the_judge_knows_nonsense_when_it_sees_it():
    def judge(argv, files=None):
        draft = fuzz_cli.Draft("t", argv[0], [fuzz_cli.Arg(None, token) for token in argv[1:]])
        return fuzz_cli.Judge(draft, files or {}).run()

    assert judge(["bound", "--speeds", "2,1", "--load", "0.5"]) == ([], [])
    for argv in [
        ["simulate", "--speeds", "2,1", "--load", "0.5", "--jobs", "-1"],
        ["simulate", "--speeds", "2,1", "--load", "nan", "--jobs", "100"],
        ["simulate", "--speeds", "99999999999999999999x1", "--load", "0.5"],
        ["simulate", "--speeds", "1;2", "--load", "0.5"],
        ["simulate", "--speeds", "2,1", "--load", "0.5", "--policy", "nope"],
        ["simulate", "--speeds", "2,1", "--load", "0.5", "--policy", "l-jsq"],
        ["simulate", "--model", "slotted", "--speeds", "1,1", "--load", "0.5", "--p-hat", "1.5", "--policy", "l-jsq"],
        ["tune", "--speeds", "2,1", "--load", "0.5", "--grid", "1"],
        ["exact", "--speeds", "2,1", "--load", "0.5"],  # infinite buffers
        ["simulate", "--config", "scenario.toml"],
    ]:
        invalid, _ = judge(argv, {"scenario.toml": ("bytes", "[system]\n".encode("utf-16"))})
        assert invalid, argv
    _, costly = judge(["simulate", "--speeds", "2,1", "--load", "0.5", "--jobs", "100000000"])
    assert costly


def test_the_unmutated_templates_run_fine():
    cases = []
    for seed in range(3):
        for template, _ in fuzz_cli.TEMPLATES:
            draft = template(fuzz_cli.random.Random(seed))
            argv = draft.argv()
            files = {
                n: ("bytes", fuzz_cli.toml_text(s[1]).encode()) if s[0] == "toml" else s for n, s in draft.files.items()
            }
            invalid, costly = fuzz_cli.Judge(draft, files).run()
            if draft.base == "testbed":  # valid, it runs for seconds: campaigns only
                assert not invalid and costly, (argv, invalid, costly)
                continue
            if draft.base != "top-level":
                assert not invalid and not costly, (argv, invalid, costly)
            cases.append(
                fuzz_cli.Case(seed, len(cases), draft.base, draft.command or "", argv, files, [], invalid, costly)
            )
    report = fuzz_cli.run_cases(cases)
    assert not report.failures(), report.summary()
    assert {report.outcomes[c.id]["status"] for c in cases if c.base != "top-level"} <= {"ok", "verdict"}


def test_the_harness_catches_a_traceback_a_hang_a_memory_bomb_and_a_dying_process(monkeypatch):
    def misbehave(args):
        how = args.speeds
        if how == "bug":
            raise ZeroDivisionError("a bug")
        if how == "sleep":
            time.sleep(60)  # interrupted by the time limit
        if how == "deaf":
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
            time.sleep(60)  # deaf to the time limit: killed
        if how == "bomb":
            return len(bytearray(4 << 30))  # 4 GB: over the address-space limit
        if how == "die":
            os.kill(os.getpid(), signal.SIGKILL)
        if how == "late":
            try:
                time.sleep(60)
            finally:  # dies after its time limit, as compiled code interrupted by it may
                os.kill(os.getpid(), signal.SIGKILL)
        print("fine")
        return 0

    monkeypatch.setattr(hetlb.cli.bound, "run", misbehave)  # the children are forks of this process
    behaviours = ["ok", "bug", "sleep", "ok", "die", "ok", "deaf", "bomb", "late", "ok"]
    cases = [fake_case(argv=["bound", "--speeds", how, "--load", "0.5"]) for how in behaviours]
    for index, case in enumerate(cases):
        case.index = index
    report = fuzz_cli.run_cases(cases, seconds=2, grace=1, batch=len(cases))
    statuses = [report.outcomes[case.id]["status"] for case in cases]
    assert statuses == ["ok", "traceback", "hang", "ok", "crash", "ok", "hang", "traceback", "hang", "ok"]
    assert report.outcomes["0:1"]["cause"].startswith("ZeroDivisionError at ")
    assert report.outcomes["0:2"]["cause"].startswith("time limit at ")
    assert "killed" in report.outcomes["0:6"]["cause"]
    assert report.outcomes["0:7"]["exception"]["type"] == "MemoryError"
    assert report.outcomes["0:8"]["cause"].startswith("time limit at ") and "died" in report.outcomes["0:8"]["detail"]
    assert "ZeroDivisionError" in report.summary()


@pytest.fixture(scope="module")
def fixed_report():
    # two cases at a time, one per core: a case's time limit (CASE_SECONDS) is 20 times a valid one's
    return fuzz_cli.run_cases(fuzz_cli.fixed_cases(), workers=2, label=f" (fixed set, seed {fuzz_cli.FIXED_SEED})")


@pytest.mark.fuzz
def test_the_fixed_set_has_no_traceback_hang_or_nonsense(fixed_report):
    serious = [
        o for _, o in fixed_report.failures() if o["status"] in ("traceback", "hang", "crash", "nonsense-accepted")
    ]
    assert not serious, fixed_report.summary()


@pytest.mark.fuzz
def test_the_fixed_set_errors_are_one_short_line(fixed_report):
    assert not fixed_report.failures(), fixed_report.summary()
