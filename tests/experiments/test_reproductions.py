"""Reproductions (hetlb reproduce) and the jsq-df-ds tuner.

The reproductions' claims are checked by the reproductions themselves, at their own scale; these
tests check the machinery at a scale small enough for the test suite: the files, the claims'
contract (ids, statuses decided from the data, the exit status), and that the tuner finds an
optimum known in advance.
"""

import json
import subprocess
import sys

import pandas as pd
import pytest

import hetlb
from hetlb.cli import main
from hetlb.errors import InputError
from hetlb.experiments import REPRODUCTIONS, reproduce
from hetlb.experiments.reproduce import STATUSES, Claim, Explanation, decide
from hetlb.experiments.tuning import tune_jsq_df_ds


def check_claims_contract(name: str, report: dict) -> None:
    """The contract of a claims.json: distinct ids, each declared by the reproduction; a status
    of STATUSES, with a cause and evidence exactly when it deviates or is refuted; ``passes`` true
    exactly when no claim fails."""
    ids = [claim["id"] for claim in report["claims"]]
    assert len(set(ids)) == len(ids), ids
    assert set(ids) <= set(REPRODUCTIONS[name].claims)
    for claim in report["claims"]:
        assert claim["status"] in STATUSES
        explained = claim["status"] in ("deviates", "refuted")
        assert explained == bool(claim["cause"]) == bool(claim["evidence"]), claim
    statuses = [claim["status"] for claim in report["claims"]]
    assert report["passes"] == ("fails" not in statuses)
    assert report["all_claims_hold"] == all(status == "holds" for status in statuses)


TINY_GRAPH_RUN = {"n_min": 16, "n_max": 32, "jobs": 4000, "warmup": 20.0, "replications": 2}


def test_tuner_finds_the_known_optimum():
    # fast servers 100 times faster, with capacity for the whole load: the best jsq-df-ds never
    # sends a job to a slow server. With p_S = 0 an idle slow server is never chosen, so a slow
    # server never gets busy and p_F never comes into play: every (p_F, 0) is optimal, and with
    # common random numbers their runs are identical
    system = hetlb.System.from_speeds("5x10,5x0.1", load=0.4, buffer=50)
    tuning = tune_jsq_df_ds(system, grid=[0.0, 0.5, 1.0], jobs=20_000, seed=3)
    assert tuning.p_slow == 0.0
    assert len({row[2] for row in tuning.table if row[1] == 0.0}) == 1
    assert tuning.mean_response_time < min(row[2] for row in tuning.table if row[1] > 0.0)


def test_tuner_skips_unstable_points_and_rejects_a_bad_grid():
    system = hetlb.System.from_speeds("2x1,2x0.5", load=0.9)
    tuning = tune_jsq_df_ds(system, grid=[0.0, 1.0], jobs=5_000, seed=1)
    assert (1.0, 0.0) not in {(row[0], row[1]) for row in tuning.table}  # unstable: slow servers unused
    with pytest.raises(InputError):
        tune_jsq_df_ds(system, grid=[0.5, 1.5])


def test_weng_fig3_writes_points_figure_and_claims(tmp_path):
    report = reproduce(
        "weng-fig3", out=tmp_path, store=str(tmp_path / "store.sqlite"), executor="serial", **TINY_GRAPH_RUN
    )
    table = pd.read_csv(tmp_path / "points.csv")
    assert len(table) == 2 * 4 and set(table["policy"]) == {"jfsq", "jfiq", "jsq", "jiq"}
    assert (tmp_path / "weng-fig3.png").stat().st_size > 10_000
    written = json.loads((tmp_path / "claims.json").read_text())
    assert written["parameters"]["n_max"] == 32 and "load" in written["parameters_lost_by_the_paper"]
    assert {claim["id"] for claim in written["claims"]} == {"C1", "C2", "C3", "C4", "C7"}
    check_claims_contract("weng-fig3", written)
    assert report["claims"] == written["claims"]
    # C2's status follows its rule on the points' 95% intervals of the ratio to C*/lambda
    ratio = {
        (int(point.n_servers), point.policy): (
            point.mean_response_time_ci_low / point.speed_lower_bound,
            point.mean_response_time_ci_high / point.speed_lower_bound,
        )
        for point in table.itertuples()
    }
    falls = all(ratio[32, p][1] < ratio[16, p][0] for p in ("jfsq", "jfiq"))
    close = max(ratio[32, p][1] for p in ("jfsq", "jfiq")) - 1 <= (min(ratio[32, p][0] for p in ("jsq", "jiq")) - 1) / 2
    (c2,) = [claim for claim in written["claims"] if claim["id"] == "C2"]
    assert c2["status"] == ("holds" if falls and close else "fails")
    # the blocking figure reuses every run from the store
    reproduce(
        "weng-fig4", out=tmp_path / "fig4", store=str(tmp_path / "store.sqlite"), executor="serial", **TINY_GRAPH_RUN
    )
    blocking = json.loads((tmp_path / "fig4" / "claims.json").read_text())
    assert {claim["id"] for claim in blocking["claims"]} == {"C5a", "C5b"}
    check_claims_contract("weng-fig4", blocking)


def test_reproduce_cli_exit_status_follows_the_claims(tmp_path, capsys):
    settings = [f"--set={key}={value}" for key, value in TINY_GRAPH_RUN.items()]
    status = main(
        [
            "reproduce",
            "weng-fig4",
            "--out",
            str(tmp_path),
            "--store",
            str(tmp_path / "s.sqlite"),
            "--executor",
            "serial",
            *settings,
        ]
    )
    claims = json.loads((tmp_path / "claims.json").read_text())
    assert status == (0 if claims["passes"] else 1)
    printed = capsys.readouterr().out.splitlines()
    for claim in claims["claims"]:
        (line,) = [line for line in printed if claim["statement"] in line]
        assert line.split()[:2] == ["FAILS" if claim["status"] == "fails" else claim["status"], claim["id"]]


@pytest.mark.parametrize(
    "argv,message",
    [
        (["reproduce", "weng-fig9"], "name: unknown reproduction"),
        (["reproduce", "weng-fig3", "--set", "colour=red"], "colour: is not an option of weng-fig3"),
        (["reproduce", "weng-fig3", "--set", "load"], "--set: must be NAME=VALUE"),
    ],
)
def test_reproduce_input_errors(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_every_reproduction_documents_its_options():
    for reproduction in REPRODUCTIONS.values():
        for name, (quick, paper, description) in reproduction.options.items():
            assert description and type(quick) is type(paper), name


@pytest.mark.slow
@pytest.mark.parametrize(
    "name,options,claim_ids",
    [
        (
            "buke-fig41",
            {"n_servers": 60, "horizon": 300.0, "warmup": 30.0, "replications": 2},
            {"C15a", "C15b", "C15c", "C16", "C19"},
        ),
        (
            "buke-fig42",
            {
                "n_servers": 60,
                "horizon": 300.0,
                "warmup": 30.0,
                "replications": 3,
                "excess_capacities": [0.5, 1.0, 2.0],
            },
            {"C17a", "C17b", "C17c", "C17d"},
        ),
        (
            "buke-scaling",
            {
                "n_servers": [30, 60],
                "horizon": 300.0,
                "warmup": 30.0,
                "replications": 2,
                "sandwich_servers": 20,
                "sandwich_horizon": 200.0,
                "stability_servers": 40,
            },
            {"C18a", "C18b", "diffusion", "C20", "C21", "C22"},
        ),
    ],
)
def test_paper_002_reproductions_write_their_outputs(tmp_path, name, options, claim_ids):
    report = reproduce(name, out=tmp_path, store=None, executor="serial", **options)
    assert (tmp_path / f"{name}.png").stat().st_size > 10_000
    assert len(pd.read_csv(tmp_path / "points.csv")) > 0
    assert {claim["id"] for claim in report["claims"]} == claim_ids
    check_claims_contract(name, json.loads((tmp_path / "claims.json").read_text()))


@pytest.mark.parametrize(
    "argv,message",
    [
        (["reproduce", "zhou-fig1", "--set", "replications=abc"], "replications: must be an integer, got 'abc'"),
        (["reproduce", "weng-fig2", "--set", "loads=0.5"], "loads: must be a non-empty list of numbers, got 0.5"),
        (["reproduce", "buke-fig41", "--set", "bins=0", "--executor", "processes:1"], "speed_bins: must be an integer"),
    ],
)
def test_reproduction_options_are_checked_in_one_line(argv, message, tmp_path, capsys):
    assert main(argv + ["--store", str(tmp_path / "store.sqlite"), "--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err


def test_the_reproductions_are_listed_in_the_order_of_their_papers():
    papers = [reproduction.title[:3] for reproduction in REPRODUCTIONS.values()]  # "000 Fig. 2: ..."
    assert papers == sorted(papers) and set(papers) == {"000", "001", "002"}


def test_the_order_holds_whichever_paper_was_imported_first():
    script = (
        "import hetlb.experiments.buke, hetlb.experiments.zhou\n"
        "from hetlb.experiments import REPRODUCTIONS\n"
        "print(' '.join(reproduction.title[:3] for reproduction in REPRODUCTIONS.values()))"
    )
    finished = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    papers = finished.stdout.split()
    assert papers == sorted(papers) and set(papers) == {"000", "001", "002"}


def test_one_claim_per_id():
    # every reproduction declares the claims it checks; an id names one claim wherever it
    # appears (C1, the bound of 000, is checked on three figures, C10 on two)
    meaning = {}
    for reproduction in REPRODUCTIONS.values():
        assert reproduction.claims, reproduction.name
        for claim_id, description in reproduction.claims.items():
            assert meaning.setdefault(claim_id, description) == description, claim_id
    assert {
        "weng-fig2",
        "weng-fig3",
        "weng-fig4",
        "weng-figD3",
        "zhou-fig1",
        "zhou-fig2",
        "zhou-heavy-traffic",
        "buke-fig41",
        "buke-fig42",
        "buke-scaling",
    } <= set(REPRODUCTIONS)


def test_a_status_is_decided_from_the_data():
    known = Explanation("a documented cause", "docs/reproductions/page.md, a section; the figures of this run")
    assert decide("X", "s", {}, True, deviation=known).status == "holds"
    assert decide("X", "s", {}, False).status == "fails"
    deviates = decide("X", "s", {}, False, deviation=known)
    assert (deviates.status, deviates.cause, deviates.evidence) == ("deviates", known.cause, known.evidence)
    assert not deviates.holds and not deviates.fails
    assert decide("X", "s", {}, False, refutation=known).status == "refuted"
    assert decide("X", "s", {}, True, refutation=known).cause == ""
    with pytest.raises(ValueError, match="status must be one of"):
        Claim("X", "s", {}, "passes")
    with pytest.raises(ValueError, match="a cause and evidence"):
        Claim("X", "s", {}, "deviates")
    with pytest.raises(ValueError, match="a cause and evidence"):
        Claim("X", "s", {}, "fails", "a cause", "evidence")


def test_the_claims_page_lists_every_claim_with_its_reproductions():
    import re
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "reproductions" / "claims.md").read_text()
    rows = {
        claim_id: (text, set(re.findall(r"`([^`]+)`", names)))
        for claim_id, text, names in re.findall(r"^\| (\S+) \| (.*) \| (.*) \|$", page, flags=re.M)
        if claim_id != "id"
    }
    expected = {}
    for name, reproduction in REPRODUCTIONS.items():
        for claim_id, text in reproduction.claims.items():
            expected.setdefault(claim_id, (text, set()))[1].add(name)
    assert rows == expected
