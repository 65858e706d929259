"""Closed forms for the M/M/1, M/M/1/K and M/M/c queues.

Rates are in jobs per unit time, times in time units. ``arrival_rate`` is lambda, ``service_rate``
is the rate mu of one server (a job's mean service time is 1/mu). Every function validates its
arguments and raises :class:`hetlb.errors.InputError` on invalid input.
"""

import math

import numpy as np

from hetlb import validation
from hetlb.errors import InputError

__all__ = [
    "mm1_mean_response_time",
    "mm1_mean_waiting_time",
    "mm1_p_wait",
    "mm1_mean_number_in_system",
    "mm1_response_time_quantile",
    "mm1k_stationary_distribution",
    "mm1k_blocking_probability",
    "mm1k_mean_number_in_system",
    "mm1k_mean_response_time",
    "mm1k_p_wait",
    "erlang_b",
    "erlang_c",
    "mmc_p_wait",
    "mmc_mean_waiting_time",
    "mmc_mean_response_time",
    "mmc_mean_number_in_system",
    "mxm1_mean_number_in_system",
    "mxm1_mean_response_time",
]


def _stable_rates(arrival_rate, service_rate, n_servers: int = 1) -> tuple[float, float]:
    lam = validation.positive_number("arrival_rate", arrival_rate)
    mu = validation.positive_number("service_rate", service_rate)
    if lam >= n_servers * mu:
        raise InputError(
            "arrival_rate",
            f"must be below the capacity n_servers * service_rate = {n_servers * mu} for a queue "
            f"with infinite buffer (load rho = {lam / (n_servers * mu):.6g} >= 1)",
        )
    return lam, mu


# --- M/M/1 -------------------------------------------------------------------------------------


def mm1_mean_response_time(arrival_rate, service_rate) -> float:
    """Mean response time (sojourn) of M/M/1: 1 / (mu - lambda), in time units.

    Parameters
    ----------
    arrival_rate : float
        lambda, the Poisson arrival rate of jobs (jobs per unit time).
    service_rate : float
        mu, the service rate of one server (jobs per unit time).

    Raises
    ------
    InputError
        When a rate is not positive, or the queue is not stable (lambda >= c mu).
    """
    lam, mu = _stable_rates(arrival_rate, service_rate)
    return 1.0 / (mu - lam)


def mm1_mean_waiting_time(arrival_rate, service_rate) -> float:
    """Mean time in the waiting room of M/M/1: rho / (mu - lambda), in time units.

    Parameters
    ----------
    arrival_rate : float
        lambda, the Poisson arrival rate of jobs (jobs per unit time).
    service_rate : float
        mu, the service rate of one server (jobs per unit time).

    Raises
    ------
    InputError
        When a rate is not positive, or the queue is not stable (lambda >= c mu).
    """
    lam, mu = _stable_rates(arrival_rate, service_rate)
    return (lam / mu) / (mu - lam)


def mm1_p_wait(arrival_rate, service_rate) -> float:
    """Probability that an arrival to M/M/1 finds the server busy: rho = lambda / mu.

    Parameters
    ----------
    arrival_rate : float
        lambda, the Poisson arrival rate of jobs (jobs per unit time).
    service_rate : float
        mu, the service rate of one server (jobs per unit time).

    Raises
    ------
    InputError
        When a rate is not positive, or the queue is not stable (lambda >= c mu).
    """
    lam, mu = _stable_rates(arrival_rate, service_rate)
    return lam / mu


def mm1_mean_number_in_system(arrival_rate, service_rate) -> float:
    """Mean number of jobs in M/M/1, the one in service included: rho / (1 - rho).

    Parameters
    ----------
    arrival_rate : float
        lambda, the Poisson arrival rate of jobs (jobs per unit time).
    service_rate : float
        mu, the service rate of one server (jobs per unit time).

    Raises
    ------
    InputError
        When a rate is not positive, or the queue is not stable (lambda >= c mu).
    """
    lam, mu = _stable_rates(arrival_rate, service_rate)
    return lam / (mu - lam)


def mm1_response_time_quantile(arrival_rate, service_rate, probability) -> float:
    """The ``probability``-quantile of the M/M/1 response time, which is Exp(mu - lambda).

    Parameters
    ----------
    arrival_rate : float
        lambda, the Poisson arrival rate of jobs (jobs per unit time).
    service_rate : float
        mu, the service rate of one server (jobs per unit time).
    probability : float
        p in (0, 1).

    Raises
    ------
    InputError
        When a rate is not positive, or the queue is not stable (lambda >= c mu).
    """
    lam, mu = _stable_rates(arrival_rate, service_rate)
    p = float(probability)
    if not 0.0 <= p < 1.0:
        raise InputError("probability", f"must lie in [0, 1), got {probability}")
    return -math.log1p(-p) / (mu - lam)


# --- M/M/1/K -----------------------------------------------------------------------------------


def mm1k_stationary_distribution(arrival_rate, service_rate, buffer) -> np.ndarray:
    """Stationary law of the number in M/M/1/K, as an array indexed 0..K.

    ``buffer`` is K, the most jobs the station holds, the one in service included (b in 000).
    pi_n is proportional to rho^n; any load rho > 0 is allowed.

    Parameters
    ----------
    arrival_rate : float
        lambda, the Poisson arrival rate of jobs (jobs per unit time).
    service_rate : float
        mu, the service rate of one server (jobs per unit time).
    buffer : int
        K, the most jobs the station holds, the one in service included (b in 000).
    """
    lam = validation.positive_number("arrival_rate", arrival_rate)
    mu = validation.positive_number("service_rate", service_rate)
    capacity = validation.integer("buffer", buffer, low=1)
    log_weight = np.arange(capacity + 1) * math.log(lam / mu)
    weight = np.exp(log_weight - log_weight.max())
    return weight / weight.sum()


def mm1k_blocking_probability(arrival_rate, service_rate, buffer) -> float:
    """Fraction of arrivals to M/M/1/K that find K jobs and are lost: pi_K (PASTA).

    Parameters
    ----------
    arrival_rate : float
        lambda, the Poisson arrival rate of jobs (jobs per unit time).
    service_rate : float
        mu, the service rate of one server (jobs per unit time).
    buffer : int
        K, the most jobs the station holds, the one in service included (b in 000).
    """
    return float(mm1k_stationary_distribution(arrival_rate, service_rate, buffer)[-1])


def mm1k_mean_number_in_system(arrival_rate, service_rate, buffer) -> float:
    """Mean number of jobs in M/M/1/K, the one in service included.

    Parameters
    ----------
    arrival_rate : float
        lambda, the Poisson arrival rate of jobs (jobs per unit time).
    service_rate : float
        mu, the service rate of one server (jobs per unit time).
    buffer : int
        K, the most jobs the station holds, the one in service included (b in 000).
    """
    pi = mm1k_stationary_distribution(arrival_rate, service_rate, buffer)
    return float(np.arange(pi.size) @ pi)


def mm1k_mean_response_time(arrival_rate, service_rate, buffer) -> float:
    """Mean response time of admitted jobs in M/M/1/K: L / (lambda (1 - pi_K)) by Little's law.

    Parameters
    ----------
    arrival_rate : float
        lambda, the Poisson arrival rate of jobs (jobs per unit time).
    service_rate : float
        mu, the service rate of one server (jobs per unit time).
    buffer : int
        K, the most jobs the station holds, the one in service included (b in 000).
    """
    pi = mm1k_stationary_distribution(arrival_rate, service_rate, buffer)
    admitted_rate = float(arrival_rate) * (1.0 - pi[-1])
    return float(np.arange(pi.size) @ pi) / admitted_rate


def mm1k_p_wait(arrival_rate, service_rate, buffer) -> float:
    """Fraction of admitted jobs that find the server busy: P(1 <= n < K) / P(n < K).

    Parameters
    ----------
    arrival_rate : float
        lambda, the Poisson arrival rate of jobs (jobs per unit time).
    service_rate : float
        mu, the service rate of one server (jobs per unit time).
    buffer : int
        K, the most jobs the station holds, the one in service included (b in 000).
    """
    pi = mm1k_stationary_distribution(arrival_rate, service_rate, buffer)
    return float(pi[1:-1].sum() / (1.0 - pi[-1]))


# --- M/M/c -------------------------------------------------------------------------------------


def erlang_b(n_servers, offered_load) -> float:
    """Erlang B blocking probability of M/M/c/c with offered load a = lambda / mu (in Erlangs).

    Uses the recursion B(0) = 1, B(j) = a B(j-1) / (j + a B(j-1)), stable for any c.

    Parameters
    ----------
    n_servers : int
        c, the number of servers.
    offered_load : float
        a = lambda / mu, in Erlangs.
    """
    c = validation.integer("n_servers", n_servers, low=1)
    a = validation.positive_number("offered_load", offered_load)
    blocking = 1.0
    for j in range(1, c + 1):
        blocking = a * blocking / (j + a * blocking)
    return blocking


def erlang_c(n_servers, arrival_rate, service_rate) -> float:
    """Erlang C: probability that an arrival to M/M/c waits, C = B / (1 - rho (1 - B)).

    Parameters
    ----------
    n_servers : int
        c, the number of servers.
    arrival_rate : float
        lambda, the Poisson arrival rate of jobs (jobs per unit time).
    service_rate : float
        mu, the service rate of one server (jobs per unit time).

    Raises
    ------
    InputError
        When a rate is not positive, or the queue is not stable (lambda >= c mu).
    """
    c = validation.integer("n_servers", n_servers, low=1)
    lam, mu = _stable_rates(arrival_rate, service_rate, c)
    rho = lam / (c * mu)
    blocking = erlang_b(c, lam / mu)
    return blocking / (1.0 - rho * (1.0 - blocking))


def mmc_p_wait(arrival_rate, service_rate, n_servers) -> float:
    """Probability that an arrival to M/M/c finds all c servers busy (Erlang C).

    Parameters
    ----------
    arrival_rate : float
        lambda, the Poisson arrival rate of jobs (jobs per unit time).
    service_rate : float
        mu, the service rate of one server (jobs per unit time).
    n_servers : int
        c, the number of servers.

    Raises
    ------
    InputError
        When a rate is not positive, or the queue is not stable (lambda >= c mu).
    """
    return erlang_c(n_servers, arrival_rate, service_rate)


def mmc_mean_waiting_time(arrival_rate, service_rate, n_servers) -> float:
    """Mean time in the waiting room of M/M/c: C / (c mu - lambda), in time units.

    Parameters
    ----------
    arrival_rate : float
        lambda, the Poisson arrival rate of jobs (jobs per unit time).
    service_rate : float
        mu, the service rate of one server (jobs per unit time).
    n_servers : int
        c, the number of servers.

    Raises
    ------
    InputError
        When a rate is not positive, or the queue is not stable (lambda >= c mu).
    """
    p_wait = erlang_c(n_servers, arrival_rate, service_rate)
    return p_wait / (int(n_servers) * float(service_rate) - float(arrival_rate))


def mmc_mean_response_time(arrival_rate, service_rate, n_servers) -> float:
    """Mean response time of M/M/c: mean waiting time + 1 / mu, in time units.

    Parameters
    ----------
    arrival_rate : float
        lambda, the Poisson arrival rate of jobs (jobs per unit time).
    service_rate : float
        mu, the service rate of one server (jobs per unit time).
    n_servers : int
        c, the number of servers.

    Raises
    ------
    InputError
        When a rate is not positive, or the queue is not stable (lambda >= c mu).
    """
    return mmc_mean_waiting_time(arrival_rate, service_rate, n_servers) + 1.0 / float(service_rate)


def mmc_mean_number_in_system(arrival_rate, service_rate, n_servers) -> float:
    """Mean number of jobs in M/M/c, those in service included: lambda T (Little).

    Parameters
    ----------
    arrival_rate : float
        lambda, the Poisson arrival rate of jobs (jobs per unit time).
    service_rate : float
        mu, the service rate of one server (jobs per unit time).
    n_servers : int
        c, the number of servers.

    Raises
    ------
    InputError
        When a rate is not positive, or the queue is not stable (lambda >= c mu).
    """
    return float(arrival_rate) * mmc_mean_response_time(arrival_rate, service_rate, n_servers)


def mxm1_mean_number_in_system(arrival_rate, service_rate, mean_batch) -> float:
    """Mean number of jobs in M^X/M/1 with geometric batches of mean B on {1, 2, ...}, jobs
    arriving at the long-run rate lambda (batches at rate lambda / B): L = B rho / (1 - rho),
    rho = lambda / mu (the general L = rho (E[X^2] + E[X]) / (2 E[X] (1 - rho)), whose factor is
    B for geometric X).

    Parameters
    ----------
    arrival_rate : float
        lambda, the Poisson arrival rate of jobs (jobs per unit time).
    service_rate : float
        mu, the service rate of one server (jobs per unit time).
    mean_batch : float
        B >= 1, the mean batch size (geometric on {1, 2, ...}).

    Raises
    ------
    InputError
        When a rate is not positive, or the queue is not stable (lambda >= c mu).
    """
    rate, mu = _stable_rates(arrival_rate, service_rate)
    rho = rate / mu
    return float(mean_batch) * rho / (1.0 - rho)


def mxm1_mean_response_time(arrival_rate, service_rate, mean_batch) -> float:
    """Mean response time of M^X/M/1 with geometric batches of mean B: L / lambda (Little).

    Parameters
    ----------
    arrival_rate : float
        lambda, the Poisson arrival rate of jobs (jobs per unit time).
    service_rate : float
        mu, the service rate of one server (jobs per unit time).
    mean_batch : float
        B >= 1, the mean batch size (geometric on {1, 2, ...}).

    Raises
    ------
    InputError
        When a rate is not positive, or the queue is not stable (lambda >= c mu).
    """
    return mxm1_mean_number_in_system(arrival_rate, service_rate, mean_batch) / float(arrival_rate)
