"""The job-size laws of hetlb.model.job_sizes: mean 1 and the asked scv, within sampling error."""

import numpy as np
import pytest

from hetlb.model.job_sizes import JobSizes, weibull_shape

Z = 4.0  # a wide normal quantile: a law that fails this is wrong, not unlucky


@pytest.mark.parametrize("kind,scv", [("lognormal", 0.5), ("lognormal", 3.0), ("weibull", 0.3), ("weibull", 2.0)])
def test_sampled_moments(kind, scv):
    sizes = JobSizes(kind, scv)
    x = sizes.sample(np.random.default_rng(11), 400_000)
    assert abs(x.mean() - 1.0) < Z * x.std() / np.sqrt(len(x))
    squares = x**2
    assert abs(squares.mean() - sizes.second_moment()) < Z * squares.std() / np.sqrt(len(x))


@pytest.mark.parametrize("scv", [0.2, 1.0, 5.0])
def test_pareto_is_its_formula(scv):
    shape, scale = JobSizes("pareto", scv).kernel_parameters()[:2]
    assert np.isclose(shape * scale / (shape - 1), 1.0)  # mean of a type I Pareto
    assert np.isclose(1 / (shape * (shape - 2)), scv)  # its scv
    x = JobSizes("pareto", scv).sample(np.random.default_rng(3), 200_000)
    assert x.min() >= scale
    tail = (x > 2 * scale).mean()  # P(X > 2 x_m) = 2^-a
    assert abs(tail - 2.0**-shape) < Z * np.sqrt(tail * (1 - tail) / len(x))


def test_weibull_shape_solves_its_equation():
    assert np.isclose(weibull_shape(1.0), 1.0)  # the exponential


def test_empirical_sizes_scaled_to_mean_one(tmp_path):
    path = tmp_path / "sizes.txt"
    path.write_text("2 4\n6, 8\n")
    sizes = JobSizes.parse(f"empirical:{path}")
    assert np.allclose(sizes.values, [0.4, 0.8, 1.2, 1.6])
    assert np.isclose(sizes.scv, np.mean(sizes.values**2) - 1)
    assert set(sizes.sample(np.random.default_rng(1), 100)) <= set(sizes.values)
