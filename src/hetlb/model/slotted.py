"""The slotted (discrete-time) model of paper 001: M dispatchers, N servers, one decision per slot.

Notation (001; docs/reference/slotted.md): in slot t dispatcher m receives A_m(t) jobs, i.i.d. over
slots with mean lambda_m = p_m lambda_Sigma; server n offers S_n(t) services, i.i.d. over slots
with mean mu_n = ``speed[n]`` (jobs per slot); Q_n(t+1) = max(Q_n(t) + A_n(t) - S_n(t), 0), so a job
can be served in the slot it arrives. With ``routing="slot"`` (the paper's rule) all of a
dispatcher's arrivals of a slot go to one server; with ``routing="job"`` each job is a separate
decision on the same start-of-slot information. With ``ties="shared"`` the dispatchers break ties
among least values (jsq, l-jsq) with one uniform draw per slot, so those that see the same values
pick the same server: the "single shortest queue" that 001 section 6 says all dispatchers join
under jsq. With ``ties="independent"`` (the default) each decision draws its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hetlb import validation
from hetlb.constants import COUNT_KINDS
from hetlb.errors import InputError
from hetlb.model.system import ServerSpeeds

MAX_PER_SLOT = 1e9
"""The largest mean count per slot (a speed, an arrival rate, a binomial's trials): counts per slot
and queue lengths stay exact 64-bit integers over any run of at most validation.MAX_COUNT slots."""
SLOTTED_RATE_RANGE = (validation.RATE_RANGE[0], MAX_PER_SLOT)
SLOTTED_RATE_RULE = "mean jobs per slot: choose the slot length to bring them there"

ROUTINGS = ("slot", "job")
TIES = ("independent", "shared")


@dataclass(frozen=True)
class CountDistribution:
    """Law of a per-slot count with a given mean: ``poisson`` (any mean), ``bernoulli`` (mean <= 1),
    or ``binomial`` with ``trials`` trials of success probability mean / trials (mean <= trials).

    Parameters
    ----------
    kind
        "poisson", "bernoulli" or "binomial".
    trials
        K, the trials of a binomial law.
    """

    kind: str = "poisson"
    trials: int = 1

    def __post_init__(self):
        if self.kind not in COUNT_KINDS:
            raise InputError("distribution", f"must be one of {', '.join(COUNT_KINDS)}, got {self.kind!r}")
        if self.kind == "binomial":
            validation.integer("trials", self.trials, high=int(MAX_PER_SLOT))
        elif self.trials != 1:
            raise InputError("trials", f"only a binomial has a number of trials, not a {self.kind}")

    @classmethod
    def parse(cls, value) -> CountDistribution:
        """A CountDistribution, or its kind name, with "binomial:K" for K trials.

        Parameters
        ----------
        value
            A CountDistribution, "poisson", "bernoulli" or "binomial:K".
        """
        if isinstance(value, cls):
            return value
        kind, colon, trials = str(value).partition(":")
        if colon and not trials:
            raise InputError("trials", f"binomial:K needs the number of trials K, got {validation.shown(value)}")
        if trials:
            try:
                count = int(trials)
            except ValueError:
                raise InputError(
                    "trials", f"must be an integer in {validation.shown(value)} (e.g. binomial:4)"
                ) from None
            return cls(kind, count)
        return cls(kind)

    @property
    def code(self) -> int:
        """The law's integer code, as the slotted kernel reads it (hetlb.constants)."""
        return COUNT_KINDS[self.kind]

    @property
    def max_mean(self) -> float:
        """The largest mean count per slot the law allows: 1 for Bernoulli, K for binomial:K, infinite for Poisson."""
        return {"poisson": math.inf, "bernoulli": 1.0, "binomial": float(self.trials)}[self.kind]

    def variance(self, mean):
        """Variance of a count with this law and mean ``mean`` (scalar or array).

        Parameters
        ----------
        mean
            The mean count per slot.
        """
        if self.kind == "poisson":
            return mean
        return mean * (1.0 - mean / self.trials)

    def describe(self) -> dict:
        """The law as the result's metadata records it: its kind, and the trials K of a binomial law."""
        return {"kind": self.kind, **({"trials": self.trials} if self.kind == "binomial" else {})}


@dataclass(frozen=True, eq=False)
class SlottedSystem(ServerSpeeds):
    """Servers, dispatchers and per-slot laws of the slotted model; build one with :meth:`from_speeds`.

    Parameters
    ----------
    speed
        mu_n, the mean offered service of each server per slot (jobs per slot).
    dispatchers
        M, the number of dispatchers.
    total_arrival_rate
        lambda_Sigma, the mean arrivals per slot over all dispatchers.
    dispatcher_share
        p_m, the fraction of lambda_Sigma at each dispatcher (summing to 1).
    arrivals, service
        The laws of the per-slot arrival and service counts.
    routing
        "slot" or "job" (see from_speeds).
    ties
        "independent" or "shared" (see from_speeds).
    """

    speed: np.ndarray  # mu_n: mean offered service per slot (jobs per slot)
    dispatchers: int  # M
    total_arrival_rate: float  # lambda_Sigma: mean arrivals per slot, all dispatchers
    dispatcher_share: np.ndarray  # p_m, summing to 1: lambda_m = p_m lambda_Sigma
    arrivals: CountDistribution  # law of A_m(t)
    service: CountDistribution  # law of S_n(t)
    routing: str = "slot"  # "slot": one server per dispatcher and slot; "job": one per job
    ties: str = "independent"  # "independent": a draw per decision; "shared": one draw per slot

    def __repr__(self) -> str:
        """One short line whatever the number of servers (the rest as ``describe()``)."""
        classes = [f"{row['count']}x{row['speed']:g}" for row in self.speed_class_table()]
        shown = ",".join(classes[:4]) + (f",... ({len(classes)} speeds)" if len(classes) > 4 else "")
        return (
            f"<SlottedSystem {self.n_servers} servers ({shown}), {self.dispatchers} dispatchers, "
            f"load {self.load:.4g}, routing {self.routing}, ties {self.ties}>"
        )

    @classmethod
    def from_speeds(
        cls,
        speeds,
        *,
        dispatchers: int = 1,
        arrival_rate: float | None = None,
        load: float | None = None,
        dispatcher_share=None,
        arrivals="poisson",
        service="poisson",
        routing: str = "slot",
        ties: str = "independent",
    ) -> SlottedSystem:
        """Build and validate a slotted system.

        Parameters
        ----------
        speeds
            mu_n, the mean offered service of each server per slot (jobs per slot).
        dispatchers
            M, the number of dispatchers.
        arrival_rate
            lambda_Sigma, the mean arrivals per slot over all dispatchers.
        load
            Instead of ``arrival_rate``, lambda_Sigma / mu_Sigma, which must be < 1.
        dispatcher_share
            p_m, the fraction of lambda_Sigma at dispatcher m (normalised to sum 1); default equal,
            p_m = 1/M. Dispatchers draw their arrivals independently.
        arrivals, service
            The law of the per-slot counts: "poisson" (default), "bernoulli" or "binomial:K" (or a
            CountDistribution).
        routing
            "slot" (all of a dispatcher's arrivals in a slot go to one server) or "job".
        ties
            How least-value decisions (jsq, l-jsq) choose among equal values: "independent" (a uniform
            draw per decision) or "shared" (one uniform draw per slot for every dispatcher).

        Returns
        -------
        SlottedSystem
            The validated system.
        """
        speed = validation.positive_finite_array("speeds", speeds, SLOTTED_RATE_RANGE, SLOTTED_RATE_RULE)
        dispatchers = validation.count("dispatchers", dispatchers)
        validation.check_memory("dispatchers", 8 * dispatchers, f"{validation.quantity(dispatchers)} dispatchers")
        if (arrival_rate is None) == (load is None):
            raise InputError("arrival_rate", "give exactly one of arrival_rate and load")
        name, value = ("load", load) if load is not None else ("arrival_rate", arrival_rate)
        value = validation.positive_number(name, value)
        total = value * float(speed.sum()) if name == "load" else value
        validation.positive_finite_array("arrival_rate", total, SLOTTED_RATE_RANGE, SLOTTED_RATE_RULE)
        if total >= speed.sum():
            raise InputError(
                name,
                f"the arrival rate {total:.6g} per slot must be below the total service rate "
                f"{speed.sum():.6g} per slot (load < 1), or the queues grow without bound",
            )
        if dispatcher_share is None:
            share = np.full(dispatchers, 1.0 / dispatchers)
        else:
            share = validation.positive_finite_array("dispatcher_share", dispatcher_share)
            if len(share) != dispatchers:
                raise InputError(
                    "dispatcher_share", f"needs one share per dispatcher ({dispatchers}), got {len(share)}"
                )
            share = share / share.sum()
        arrivals = CountDistribution.parse(arrivals)
        service = CountDistribution.parse(service)
        if routing not in ROUTINGS:
            raise InputError("routing", f"must be one of {', '.join(ROUTINGS)}, got {routing!r}")
        if ties not in TIES:
            raise InputError("ties", f"must be one of {', '.join(TIES)}, got {ties!r}")
        largest_rate = float((share * total).max())
        if largest_rate > arrivals.max_mean:
            raise InputError(
                "arrivals",
                f"a {arrivals.kind} count has mean <= {arrivals.max_mean:g}, but a "
                f"dispatcher receives {largest_rate:.6g} jobs per slot",
            )
        if speed.max() > service.max_mean:
            raise InputError(
                "service",
                f"a {service.kind} count has mean <= {service.max_mean:g}, but a server has speed {speed.max():.6g}",
            )
        return cls(speed, dispatchers, total, share, arrivals, service, routing, ties)

    @property
    def dispatcher_rate(self) -> np.ndarray:
        """lambda_m = p_m lambda_Sigma, jobs per slot."""
        return self.dispatcher_share * self.total_arrival_rate

    def pooled_variance(self) -> float:
        """zeta = sigma_Sigma^2 + nu_Sigma^2: the variance of A_Sigma(t) plus sum_n Var S_n(t) (001 Eq. (4)).
        In heavy traffic eps E[sum_n Q_n] -> zeta / 2 under a delta-tilted LED policy (001 Theorem 2; claim C13 of docs/reproductions/claims.md)."""
        return float(np.sum(self.arrivals.variance(self.dispatcher_rate)) + np.sum(self.service.variance(self.speed)))

    def describe(self) -> dict:
        """A JSON-ready summary for result metadata."""
        share = self.dispatcher_share
        return {
            "model": "slotted",
            "n_servers": self.n_servers,
            "speed_classes": self.speed_class_table(),
            "dispatchers": self.dispatchers,
            "total_arrival_rate": self.total_arrival_rate,
            "load": self.load,
            "dispatcher_share": "equal" if np.all(share == share[0]) else share.tolist(),
            "arrivals": self.arrivals.describe(),
            "service": self.service.describe(),
            "routing": self.routing,
            "ties": self.ties,
        }
