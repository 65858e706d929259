"""The capacity bound with prefix caches (hetlb.theory.cache_capacity) against its closed forms,
and ``hetlb bound`` printing it beside Proposition 1's bound."""

import json

import pytest

import hetlb
from hetlb.cli import main
from hetlb.errors import InputError
from hetlb.theory import cache_capacity


def test_shared_prefixes_leave_only_the_unique_blocks_to_prefill():
    # E[L] = B + U = 10 blocks, E[reusable] = B = 8: least work 1 + W U, most 1 + W (B + U)
    system = hetlb.System.from_speeds(
        "8x2,8x1", load=0.5, cache_blocks=64, prompts="shared:count=16,blocks=8,zipf=1,unique=2", prefill_work=0.25
    )
    capacity = cache_capacity(system)
    assert capacity.least_work == pytest.approx(1 + 0.25 * 2) and capacity.most_work == pytest.approx(1 + 0.25 * 10)
    assert capacity.rate_all_hits == pytest.approx(24 / 1.5) and capacity.rate_no_hits == pytest.approx(24 / 3.5)
    assert capacity.load_all_hits == pytest.approx(1 / 1.5) and capacity.load_no_hits == pytest.approx(1 / 3.5)


def test_sessions_can_reuse_the_earlier_turns():
    # T = 4 turns of B = 3 blocks: E[L] = (T + 1) B / 2 = 7.5, E[reusable] = (T - 1) B / 2 = 4.5
    system = hetlb.System.from_speeds(
        [1.0, 1.0], load=0.3, cache_blocks=32, prompts="sessions:turns=4,blocks=3,think=1", prefill_work=0.1
    )
    assert cache_capacity(system).least_work == pytest.approx(1 + 0.1 * 3.0)


def test_a_sparse_graph_carries_its_max_flow():
    # type 0 on both, type 1 only on server 1 (speed 2): max flow 3 of rate 1 + 1 offered, so theta = 1.5
    system = hetlb.System.from_speeds(
        [1.0, 2.0],
        arrival_rate=[1.0, 1.0],
        graph=[[0, 1], [1]],
        cache_blocks=8,
        prompts="shared:count=2,blocks=4,zipf=1,unique=0",
        prefill_work=0.5,
    )
    capacity = cache_capacity(system)
    assert capacity.least_work == pytest.approx(1.0) and capacity.rate_all_hits == pytest.approx(3.0)
    assert capacity.rate_no_hits == pytest.approx(3.0 / 3.0)


def test_without_caches_it_says_what_it_needs():
    with pytest.raises(InputError, match="cache_blocks"):
        cache_capacity(hetlb.System.from_speeds([1.0], load=0.5))


def test_hetlb_bound_prints_the_capacity_with_caches(capsys):
    argv = [
        "bound",
        "--speeds",
        "8x2,8x1",
        "--load",
        "0.5",
        "--cache-blocks",
        "64",
        "--prompts",
        "shared:count=16,blocks=8,zipf=1,unique=2",
        "--prefill-work",
        "0.25",
    ]
    assert main([*argv, "--json"]) == 0
    values = json.loads(capsys.readouterr().out)
    assert values["caches"]["rate_all_hits"] == pytest.approx(16.0)
    assert main(argv) == 0
    assert "any policy carries at most lambda = 16" in capsys.readouterr().out
