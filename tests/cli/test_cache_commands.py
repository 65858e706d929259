"""The commands that take prefix caches: ``hetlb exact`` solves the chain with cache state (the same
figures as hetlb.theory.solve_exact_cache), and the commands and models without caches refuse
them in one line naming the field."""

import json

import pytest

import hetlb
from hetlb.cli import main
from hetlb.errors import InputError
from hetlb.theory import solve_exact_cache

CACHES = [
    "--cache-blocks",
    "2,3",
    "--prompts",
    "shared:count=2,blocks=2,zipf=1,unique=0",
    "--prefill-work",
    "1",
    "--prefill-law",
    "exponential",
]


def test_exact_with_caches_is_the_cache_chain(capsys):
    argv = ["exact", "--speeds", "2,1", "--arrival-rate", "1.5", "--buffer", "2", *CACHES, "--policy", "eft", "-q"]
    assert main([*argv, "--json"]) == 0
    values = json.loads(capsys.readouterr().out)
    popularity = hetlb.model.prompts.Prompts.parse("shared:count=2,blocks=2,zipf=1,unique=0").popularity()
    solution = solve_exact_cache(
        [2.0, 1.0], 1.5, 2, "eft", cache_blocks=[2, 3], popularity=popularity, blocks=2, prefill_work=1.0
    )
    assert values["mean_ttft"] == pytest.approx(solution.mean_ttft, rel=1e-12)
    assert values["cache_hit_ratio"] == pytest.approx(solution.block_hit_ratio, rel=1e-12)
    assert values["mean_response_time"] == pytest.approx(solution.mean_response_time, rel=1e-12)


@pytest.mark.parametrize(
    "extra,field",
    [
        (["--prefill-law", "deterministic"], "--prefill-law"),
        (["--prompts", "shared:count=2,blocks=2,zipf=1,unique=1"], "--prompts"),
        (["--concurrency", "2"], "--concurrency"),
        (["--prompts", "shared:count=2,blocks=2,zipf=0,unique=0"], "--prompts"),
        (["--cache-blocks", "0"], "--cache-blocks"),
        (["--prompts", "lines:count=2"], "--prompts"),
    ],
)
def test_exact_with_caches_refuses_what_its_chain_has_not(capsys, extra, field):
    argv = ["exact", "--speeds", "2,1", "--arrival-rate", "1.5", "--buffer", "2", *CACHES, "--policy", "eft", "-q"]
    assert main([*argv, *extra]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"hetlb: error: {field}") and error.count("\n") == 1, error


def test_prompts_without_caches_are_refused(capsys):
    assert (
        main(["bound", "--speeds", "2,1", "--load", "0.5", "--prompts", "shared:count=2,blocks=2,zipf=1,unique=0"]) == 2
    )
    assert capsys.readouterr().err.startswith("hetlb: error: --prompts: goes with the servers' caches")


@pytest.mark.parametrize("model", ["mean-field", "exact without caches"])
def test_models_without_caches_refuse_them(model):
    system = hetlb.System.from_speeds([2.0, 1.0], load=0.5, buffer=3, cache_blocks=4)
    with pytest.raises(InputError, match="^cache_blocks: "):
        if model == "mean-field":
            hetlb.theory.mean_field(system, "jsq")
        else:
            hetlb.theory.solve_exact(system, "jsq")
