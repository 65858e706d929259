"""benchmarks/floor_batch.py, the floor of the batch path, against exact mean response times: one
server with c = 8 slots is M/M/1 with the shared curve, M/M/8 (Erlang C) with alpha = 0 and a
birth-death chain with the scenario's saturating curve; three servers under jsq are the exact
Markov chain of the numbers n_s (truncated, its truncated mass checked).

Tolerances: independent replications, Student t intervals at family level 1% split over the checks
(Bonferroni); the exact values come from queueing theory, never from a previous run.
"""

import itertools
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sparse
import scipy.sparse.linalg as sparse_linalg

from support.statistics import bonferroni_t_halfwidth

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from floor_batch import saturating_phi, simulate_batch  # noqa: E402

CHECKS = 4
FAMILY_ALPHA = 0.01
REPLICATIONS = 10
JOBS = 100_000
C = 8


def floor_means(speed, arrival_rate, alpha, seed):
    means = []
    for stream in np.random.SeedSequence(seed).spawn(REPLICATIONS):
        rng = np.random.Generator(np.random.PCG64(stream))
        events, total_response, completed = simulate_batch(np.array(speed), arrival_rate, C, alpha, JOBS, rng)
        assert completed == JOBS and JOBS <= events
        means.append(total_response / completed)
    return np.array(means)


def erlang_c_mean_response(c, mu, arrival_rate):
    """M/M/c: E[T] = C(c, a) / (c mu - lambda) + 1 / mu, a = lambda / mu (Erlang's C formula)."""
    a = arrival_rate / mu
    rho = a / c
    head = sum(a**k / math.factorial(k) for k in range(c))
    tail = a**c / math.factorial(c) / (1.0 - rho)
    return tail / (head + tail) / (c * mu - arrival_rate) + 1.0 / mu


def birth_death_mean_response(service_rate, arrival_rate, cap):
    """One server whose departure rate with n jobs is service_rate(n): E[N] / lambda of the chain
    truncated at ``cap`` jobs (p_n proportional to prod lambda / service_rate(k), k = 1..n)."""
    weight = np.ones(cap + 1)
    for n in range(1, cap + 1):
        weight[n] = weight[n - 1] * arrival_rate / service_rate(n)
    assert weight[-1] / weight.sum() < 1e-12
    return float(np.arange(cap + 1) @ weight / weight.sum() / arrival_rate)


def jsq_mean_response(speed, alpha, arrival_rate, cap):
    """Exact E[T] of jsq (ties uniformly at random) on servers of rates mu_s phi(min(n_s, C)): the
    CTMC of (n_1, ..., n_N), each n_s <= cap (an arrival to a full server is lost, its stationary
    probability checked negligible), E[T] = E[sum n] / lambda."""
    size = len(speed)
    states = list(itertools.product(range(cap + 1), repeat=size))
    index = {state: i for i, state in enumerate(states)}
    rows, cols, rates = [], [], []
    for state in states:
        i = index[state]
        least = min(state)
        ties = [s for s in range(size) if state[s] == least]
        for s in range(size):
            if s in ties and least < cap:
                rows.append(i)
                cols.append(index[state[:s] + (state[s] + 1,) + state[s + 1 :]])
                rates.append(arrival_rate / len(ties))
            if state[s] > 0:
                rows.append(i)
                cols.append(index[state[:s] + (state[s] - 1,) + state[s + 1 :]])
                rates.append(speed[s] * saturating_phi(min(state[s], C), alpha))
    generator = sparse.csr_matrix((rates, (rows, cols)), shape=(len(states), len(states)))
    generator = generator - sparse.diags(np.asarray(generator.sum(axis=1)).ravel())
    system = generator.T.tolil()
    system[0, :] = 1.0  # the normalisation replaces one balance equation
    rhs = np.zeros(len(states))
    rhs[0] = 1.0
    p = sparse_linalg.spsolve(system.tocsc(), rhs)
    full = sum(p[index[state]] for state in states if min(state) == cap)
    assert full < 1e-9
    return float(sum(p[index[state]] * sum(state) for state in states) / arrival_rate)


@pytest.mark.parametrize(
    ("alpha", "load"),
    [(1.0, 0.8), (0.0, 0.8), (0.2, 0.8)],
    ids=["shared-mm1", "independent-erlang-c", "saturating-birth-death"],
)
def test_one_server_matches_its_exact_mean(alpha, load):
    mu = 1.0
    capacity = mu * saturating_phi(C, alpha)
    arrival_rate = load * capacity
    if alpha == 1.0:
        exact = 1.0 / (mu - arrival_rate)
    elif alpha == 0.0:
        exact = erlang_c_mean_response(C, mu, arrival_rate)
    else:
        exact = birth_death_mean_response(lambda n: mu * saturating_phi(min(n, C), alpha), arrival_rate, 400)
    means = floor_means([mu], arrival_rate, alpha, seed=23)
    half = bonferroni_t_halfwidth(means, FAMILY_ALPHA, CHECKS)
    assert abs(means.mean() - exact) <= half, (means.mean(), half, exact)


def test_jsq_on_three_servers_matches_the_exact_chain():
    speed = [1.0, 1.0, 0.5]
    alpha = 0.2
    arrival_rate = 0.7 * sum(speed) * saturating_phi(C, alpha)
    exact = jsq_mean_response(speed, alpha, arrival_rate, 24)
    means = floor_means(speed, arrival_rate, alpha, seed=24)
    half = bonferroni_t_halfwidth(means, FAMILY_ALPHA, CHECKS)
    assert abs(means.mean() - exact) <= half, (means.mean(), half, exact)
