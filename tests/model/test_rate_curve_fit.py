"""Rate curves fitted to measured throughput (hetlb.fit_rate_curve).

The checks are the model's own facts: saturating data of a known alpha give that alpha back, a
table keeps phi(1) = 1, phi non-decreasing and phi(b) / b non-increasing exactly (in decimal
arithmetic on its text), is linear between measured batch sizes, and bad input is refused with
one line that names the field."""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hetlb
from hetlb.errors import InputError
from hetlb.model.rate_curve_fit import fit_rate_curve

POWERS_OF_TWO = [1, 2, 4, 8, 16, 32, 64]


def saturating_phi(sizes, alpha):
    sizes = np.asarray(sizes, dtype=float)
    return sizes / (1.0 + alpha * (sizes - 1.0))


def alpha_of(curve: str) -> float:
    kind, _, parameter = curve.partition(":alpha=")
    assert kind == "saturating"
    return float(parameter)


def table_of(curve: str) -> list[Fraction]:
    kind, _, values = curve.partition(":")
    assert kind == "table"
    return [Fraction(value) for value in values.split(",")]


def assert_on_rules(values: list[Fraction]):
    assert values[0] == 1
    for b in range(2, len(values) + 1):
        assert values[b - 1] >= values[b - 2]
        assert values[b - 1] / b <= values[b - 2] / (b - 1)


@pytest.mark.parametrize("alpha", [0.0, 0.0013578, 0.05, 0.3, 1.0])
def test_saturating_recovers_a_known_alpha_from_exact_data(alpha):
    throughputs = 137.5 * saturating_phi(POWERS_OF_TWO, alpha)  # any unit: tokens/s
    fit = fit_rate_curve(POWERS_OF_TWO, throughputs)
    assert alpha_of(fit.curve) == pytest.approx(alpha, rel=1e-5, abs=1e-12)
    assert fit.residual < 1e-5


def test_saturating_fit_takes_the_batch_sizes_in_any_order():
    sizes = [8, 1, 32, 2]
    throughputs = 3.0 * saturating_phi(sizes, 0.1)
    assert fit_rate_curve(sizes, throughputs) == fit_rate_curve(sorted(sizes), 3.0 * saturating_phi(sorted(sizes), 0.1))


def test_saturating_least_squares_fit_of_noisy_data():
    # an exact alpha = 0.05 curve with +-1% alternating noise: the fit lands close, the residual
    # is the noise's size
    phi = saturating_phi(POWERS_OF_TWO, 0.05) * (1 + 0.01 * np.array([0, 1, -1, 1, -1, 1, -1]))
    fit = fit_rate_curve(POWERS_OF_TWO, phi)
    assert alpha_of(fit.curve) == pytest.approx(0.05, rel=0.02)
    assert 0.001 < fit.residual < 0.1


def test_saturating_alpha_is_clipped_to_zero_and_one():
    # slightly superlinear (the best unconstrained alpha is < 0) and slightly falling (> 1), both
    # within the tolerance of the rules
    assert alpha_of(fit_rate_curve([1, 2, 4], [1.0, 2.02, 4.04]).curve) == 0.0
    assert alpha_of(fit_rate_curve([1, 2, 4], [100.0, 99.0, 98.5]).curve) == 1.0


def test_table_of_exact_saturating_data_gives_phi_at_every_batch_size():
    sizes = list(range(1, 9))
    fit = fit_rate_curve(sizes, saturating_phi(sizes, 0.2), kind="table")
    values = table_of(fit.curve)
    assert np.array([float(value) for value in values]) == pytest.approx(saturating_phi(sizes, 0.2), rel=1e-5)
    assert fit.residual < 1e-5


def test_table_is_linear_between_measured_batch_sizes():
    assert fit_rate_curve([1, 4, 6], [10.0, 25.0, 30.0], kind="table").curve == "table:1,1.5,2,2.5,2.75,3"


def test_table_keeps_the_rules_exactly_on_noisy_measurements():
    rng = np.random.default_rng(7)
    sizes = [1, 2, 3, 5, 8, 13, 21, 34, 55, 89]
    for alpha in (0.0, 0.02, 0.3, 1.0):
        noisy = saturating_phi(sizes, alpha) * (1 + rng.uniform(-0.01, 0.01, len(sizes)))
        noisy[0] = 1.0
        fit = fit_rate_curve(sizes, noisy, kind="table")
        values = table_of(fit.curve)
        assert len(values) == sizes[-1]
        assert_on_rules(values)
        assert fit.residual < 0.05 * sizes[-1]


@st.composite
def measurements_on_the_rules(draw):
    """Batch sizes from 1 and a phi on the rules: each value between its predecessor and its
    predecessor times b_i / b_(i-1), drawn as a fraction of that interval."""
    sizes = [1, *sorted(draw(st.sets(st.integers(2, 300), min_size=1, max_size=12)))]
    phi = [1.0]
    for previous, size in zip(sizes, sizes[1:]):
        share = draw(st.floats(0.0, 1.0))
        phi.append(phi[-1] * (1.0 + share * (size / previous - 1.0)))
    return sizes, phi


@settings(max_examples=200, deadline=None)
@given(measurements_on_the_rules(), st.floats(0.5, 5000.0))
def test_a_table_of_measurements_on_the_rules_keeps_them(measurement, unit):
    sizes, phi = measurement
    fit = fit_rate_curve(sizes, [unit * value for value in phi], kind="table")
    values = table_of(fit.curve)
    assert len(values) == sizes[-1]
    assert_on_rules(values)
    assert np.array([float(values[b - 1]) for b in sizes]) == pytest.approx(phi, rel=1e-5)


@settings(max_examples=200, deadline=None)
@given(st.sets(st.integers(2, 1000), min_size=1, max_size=8), st.floats(0.0, 1.0), st.floats(0.5, 5000.0))
def test_saturating_recovers_any_alpha_from_exact_data(sizes, alpha, unit):
    sizes = [1, *sorted(sizes)]
    fit = fit_rate_curve(sizes, unit * saturating_phi(sizes, alpha))
    assert alpha_of(fit.curve) == pytest.approx(alpha, rel=1e-5, abs=1e-7)


def test_table_moves_points_onto_the_rules():
    # 2% faster than linear at b = 2 is lowered to phi(2) = 2; a 3% dip at b = 8 is raised to phi(4)
    values = table_of(fit_rate_curve([1, 2, 4, 8], [1.0, 2.04, 3.0, 2.91], kind="table").curve)
    assert values[1] == 2
    assert values[7] == values[3] == 3
    assert_on_rules(values)


def test_table_of_a_constant_ratio_keeps_exact_ties():
    # phi(b) = 0.8 b beyond b = 1 hits the ceiling phi(b - 1) b / (b - 1) at every step
    values = table_of(fit_rate_curve([1, 2, 3, 4], [1.0, 1.6, 2.4, 3.2], kind="table").curve)
    assert values == [1, Fraction("1.6"), Fraction("2.4"), Fraction("3.2")]


def test_the_package_exports_the_fit():
    assert hetlb.fit_rate_curve is fit_rate_curve
    assert "fit_rate_curve" in hetlb.__all__


@pytest.mark.parametrize(
    "arguments, field, words",
    [
        (([1, 2], [1.0, 1.5], "linear"), "kind", "must be one of saturating, table"),
        (([2, 4], [1.0, 1.5]), "batch_sizes", "must include 1"),
        (([1, 2, 2], [1.0, 1.5, 1.5]), "batch_sizes", "got 2 twice"),
        (([1], [1.0]), "batch_sizes", "at least two"),
        (([1, 2.5], [1.0, 1.5]), "batch_sizes[1]", "integer"),
        (([1, 0], [1.0, 1.5]), "batch_sizes[1]", "integer"),
        (([1, True], [1.0, 1.5]), "batch_sizes[1]", "integer"),
        (([1, 10**6], [1.0, 1.5]), "batch_sizes[1]", "integer in [1, 65536]"),
        (("1,2", [1.0, 1.5]), "batch_sizes", "list of integers"),
        ((5, [1.0, 1.5]), "batch_sizes", "list of integers"),
        (([1, 2], [1.0]), "throughputs", "one value per batch size (2), got 1"),
        (([1, 2], [1.0, -1.5]), "throughputs", "finite and > 0"),
        (([1, 2], [1.0, float("nan")]), "throughputs", "finite and > 0"),
        (([1, 2, 4], [10.0, 12.0, 6.0]), "throughputs", "at batch size 4"),
        (([1, 2, 4], [10.0, 12.0, 6.0]), "throughputs", "must not fall as the batch grows"),
        (([1, 2], [10.0, 30.0]), "throughputs", "must not grow faster than the batch"),
    ],
)
@pytest.mark.parametrize("kind", ["saturating", "table"])
def test_bad_input_is_refused_in_one_line_naming_the_field(arguments, field, words, kind):
    batch_sizes, throughputs, *chosen = arguments
    with pytest.raises(InputError) as error:
        fit_rate_curve(batch_sizes, throughputs, *(chosen or [kind]))
    message = str(error.value)
    assert error.value.field == field
    assert words in message
    assert "\n" not in message


def test_the_tolerance_decides_what_noise_is_taken():
    sizes, throughputs = [1, 2, 4], [10.0, 12.0, 11.0]  # an 8% dip at b = 4
    with pytest.raises(InputError, match="within tolerance 0.05"):
        fit_rate_curve(sizes, throughputs)
    assert fit_rate_curve(sizes, throughputs, kind="table", tolerance=0.1).curve == "table:1,1.2,1.2,1.2"
    for tolerance in (-0.1, 1.5, float("nan"), "0.1"):
        with pytest.raises(InputError) as error:
            fit_rate_curve(sizes, throughputs, tolerance=tolerance)
        assert error.value.field == "tolerance"
