"""Textbook formulas of queueing theory, written out for the oracles' self-checks (no hetlb)."""

import numpy as np


def erlang_b(servers, offered):
    """Erlang's loss formula B(c, a) for c servers and offered load a = lambda / mu, by its recursion."""
    blocking = 1.0
    for c in range(1, servers + 1):
        blocking = offered * blocking / (c + offered * blocking)
    return blocking


def erlang_c(servers, offered):
    """Erlang's delay formula C(c, a): the probability that an arrival of M/M/c waits (a < c)."""
    b = erlang_b(servers, offered)
    return servers * b / (servers - offered * (1.0 - b))


def erlang_c_response_time(servers, arrival_rate, service_rate):
    """Mean response time of M/M/c: C(c, a) / (c mu - lambda) + 1 / mu."""
    waiting = erlang_c(servers, arrival_rate / service_rate) / (servers * service_rate - arrival_rate)
    return waiting + 1.0 / service_rate


def birth_death_mean_number(arrival_rate, service_rates):
    """Mean of the birth-death chain on 0..K with births ``arrival_rate`` and deaths ``service_rates[n-1]``."""
    weights = np.cumprod([1.0] + [arrival_rate / rate for rate in service_rates])
    return float(np.arange(len(weights)) @ weights / weights.sum())


def pollaczek_khinchine_waiting_time(arrival_rate, speed, second_moment):
    """M/G/1 mean wait lambda E[S^2] / (2 (1 - rho)), service S = size / speed, E[size^2] = ``second_moment``."""
    rho = arrival_rate / speed
    return arrival_rate * second_moment / speed**2 / (2.0 * (1.0 - rho))
