"""The server model of hetlb.model.servers: the curves' definitions, capacity, load, parsing."""

import math

import numpy as np
import pytest

import hetlb
from hetlb.constants import UNLIMITED_CONCURRENCY
from hetlb.model.arrivals import ArrivalProcess
from hetlb.model.servers import RateCurve, concurrency_array

CURVES = ["independent", "shared", "saturating:alpha=0.3", "table:1,1.8,2.4,2.8"]


@pytest.mark.parametrize("text", CURVES)
def test_curves_keep_the_rules(text):
    curve = RateCurve.parse(text)
    b = np.arange(1, 40)
    phi = curve.phi(b)
    assert phi[0] == 1.0
    assert np.all(np.diff(phi) >= 0)
    assert np.all(np.diff(phi / b) <= 1e-15)
    assert RateCurve.parse(curve.text) == curve


def test_curves_are_their_formulas():
    b = np.arange(1, 10)
    assert np.array_equal(RateCurve.parse("independent").phi(b), b)
    assert np.array_equal(RateCurve.parse("shared").phi(b), np.ones(9))
    np.testing.assert_allclose(RateCurve.parse("saturating:alpha=0.25").phi(b), b / (1 + 0.25 * (b - 1)))
    assert np.array_equal(RateCurve.parse("saturating:alpha=0").phi(b), b)
    assert np.array_equal(RateCurve.parse("saturating:alpha=1").phi(b), np.ones(9))
    assert list(RateCurve.parse("table:1,1.5,1.75").phi(b)) == [1, 1.5, 1.75] + [1.75] * 6
    assert RateCurve.parse("saturating:alpha=0.25").limit == 4.0
    assert math.isinf(RateCurve.parse("independent").limit)


def test_capacity_and_load_count_the_curves():
    system = hetlb.System.from_speeds(
        "2x2,1x1", load=0.5, concurrency="2x4,1x8", rate_curve=[[2, "saturating:alpha=0.5"], [1, "table:1,1.5"]]
    )
    phi4 = 4 / (1 + 0.5 * 3)
    np.testing.assert_allclose(system.server_capacity, [2 * phi4, 2 * phi4, 1.5])
    assert math.isclose(system.total_arrival_rate, 0.5 * (4 * phi4 + 1.5))
    assert system.describe()["servers"][0] == {
        "speed": 2.0,
        "concurrency": 4,
        "rate_curve": "saturating:alpha=0.5",
        "count": 2,
    }


def test_one_slot_is_the_papers_server():
    plain = hetlb.System.from_speeds([2.0, 1.0], load=0.7)
    slotted = hetlb.System.from_speeds([2.0, 1.0], load=0.7, concurrency=1, rate_curve="shared")
    assert plain.has_single_slots and slotted.has_single_slots
    assert plain.total_arrival_rate == slotted.total_arrival_rate == 0.7 * 3.0
    assert "servers" not in plain.describe() and "arrivals" not in plain.describe()


def test_unlimited_concurrency():
    assert concurrency_array("inf", 2).tolist() == [UNLIMITED_CONCURRENCY] * 2
    assert concurrency_array("1x2,2xinf", 3).tolist() == [2, UNLIMITED_CONCURRENCY, UNLIMITED_CONCURRENCY]
    system = hetlb.System.from_speeds([1.0], load=0.5, concurrency="inf", rate_curve="saturating:alpha=0.5")
    assert system.capacity == 2.0


def test_mmpp_phase_rates_keep_the_long_run_rate():
    process = ArrivalProcess.parse("mmpp:ratio=5,on=2,off=6")
    on, off = process.phase_rates(3.0)
    assert math.isclose(on, 5 * off)
    assert math.isclose((on * 2 + off * 6) / 8, 3.0)
    assert process.on_probability() == 0.25
    assert ArrivalProcess.parse(process.text) == process
    assert ArrivalProcess.parse("batch:mean=3").mean_batch == 3.0


def test_scenario_gives_curves_per_group_of_speeds():
    from hetlb.scenario import Scenario

    system = Scenario.from_mapping(
        {
            "system": {
                "speeds": "2x2,3x1",
                "load": 0.5,
                "concurrency": [4, 8],
                "rate_curve": ["shared", "saturating:alpha=0.5"],
            }
        }
    ).system
    assert system.concurrency.tolist() == [4, 4, 8, 8, 8]
    assert [curve.text for curve in system.rate_curve] == ["shared"] * 2 + ["saturating:alpha=0.5"] * 3
