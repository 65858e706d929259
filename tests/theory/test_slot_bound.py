"""The lower bound C*/lambda on multi-slot servers (hetlb.theory.bounds.slot_lower_bound): equal to
000's with one slot each, and below the exact mean response time of single servers whose chains
are solved here from the definition (M/M/c, processor sharing, a saturating batch server)."""

import numpy as np
import pytest

import hetlb
from hetlb import theory
from hetlb.errors import InputError
from hetlb.model.servers import RateCurve
from hetlb.theory.bounds import slot_increments, speed_lower_bound, speed_lower_bound_arrays


def birth_death_mean_response(rate, speed, concurrency, curve, levels=20_000) -> float:
    """A single server of c slots and curve phi: departures at speed phi(min(n, c)) in state n."""
    n = np.arange(1, levels)
    death = speed * RateCurve.parse(curve).phi(np.minimum(n, concurrency))
    log_weights = np.concatenate([[0.0], np.cumsum(np.log(rate / death))])
    weights = np.exp(log_weights - log_weights.max())
    probability = weights / weights.sum()
    assert probability[-1] < 1e-14
    return float(probability @ np.arange(levels)) / rate


def test_one_slot_is_proposition_1():
    rng = np.random.default_rng(4)
    for _ in range(20):
        speed = rng.choice([0.5, 1.0, 2.0, 3.0], size=7)
        rate = rng.uniform(0.05, 0.95) * speed.sum()
        plain = speed_lower_bound_arrays(speed, rate)
        for curve in ("shared", "saturating:alpha=0.4", "table:1,1.5"):
            same = speed_lower_bound_arrays(speed, rate, concurrency=1, rate_curve=curve)
            assert same.lower_bound == plain.lower_bound and same.K == plain.K


@pytest.mark.parametrize(
    "concurrency,curve", [(4, "independent"), (8, "shared"), (8, "saturating:alpha=0.2"), (6, "table:1,1.6,2,2.2")]
)
@pytest.mark.parametrize("load", [0.1, 0.5, 0.9])
def test_below_the_exact_single_server(concurrency, curve, load):
    capacity = 2.0 * RateCurve.parse(curve).phi(concurrency)
    rate = load * capacity
    bound = speed_lower_bound_arrays([2.0], rate, concurrency=concurrency, rate_curve=curve).lower_bound
    exact = birth_death_mean_response(rate, 2.0, concurrency, curve)
    assert bound <= exact * (1 + 1e-12)
    assert bound >= 1.0 / 2.0 - 1e-12  # never below a job's size at the full speed


def test_independent_slots_are_tight_in_light_traffic():
    """c parallel slots: a job alone is served at mu, so the bound is 1/mu (the M/M/c limit)."""
    bound = speed_lower_bound_arrays([1.0], 0.3, concurrency=8, rate_curve="independent").lower_bound
    assert bound == pytest.approx(1.0)
    assert bound <= theory.mmc_mean_response_time(0.3, 1.0, 8)


def test_a_saturating_server_fills_its_cheapest_slots():
    """phi(1) = 1 and phi(2) = 2/1.2: carrying 1.5 takes one slot and 0.75 of the second."""
    bound = speed_lower_bound_arrays([1.0], 1.5, concurrency=8, rate_curve="saturating:alpha=0.2")
    assert bound.c_star == pytest.approx(1.75)
    assert bound.lower_bound == pytest.approx(1.75 / 1.5)


def test_table_hull_skips_a_convex_corner():
    """phi = 1, 1.2, 1.44 is not concave (steps 0.2 then 0.24): the hull goes from b = 1 straight to
    b = 3, slope (1.44 - 1) / 2 = 0.22."""
    widths, slopes = slot_increments(1.0, 3, RateCurve("table", values=(1.0, 1.2, 1.44)), 10.0)
    assert widths.tolist() == [1.0, 2.0]
    np.testing.assert_allclose(slopes, [1.0, 0.22])


def test_unlimited_concurrency_near_capacity():
    bound = speed_lower_bound_arrays([1.0], 4.9, concurrency="inf", rate_curve="saturating:alpha=0.2")
    assert bound.lower_bound <= birth_death_mean_response(4.9, 1.0, 10**9, "saturating:alpha=0.2", 200_000)


def test_overload_is_refused():
    with pytest.raises(InputError, match="total_arrival_rate"):
        speed_lower_bound_arrays([1.0], 6.0, concurrency=8, rate_curve="saturating:alpha=0.2")


def test_the_bound_of_a_system_is_that_of_its_arrays():
    system = hetlb.System.from_speeds("3x2.0,5x0.5", load=0.8, concurrency="3x4,5x1", rate_curve="saturating:alpha=0.2")
    bound = speed_lower_bound(system)
    arrays = speed_lower_bound_arrays(
        system.speed, system.total_arrival_rate, concurrency=system.concurrency, rate_curve=system.rate_curve
    )
    assert bound.lower_bound == arrays.lower_bound and bound.K == arrays.K
    plain = hetlb.System.from_speeds("2x1.0,2x0.25", load=0.9)  # C* = 0.5 + 0.0625 / 0.25 = 0.75, lambda = 0.5625
    assert speed_lower_bound(plain).lower_bound == pytest.approx(0.75 / 0.5625, rel=1e-12)
