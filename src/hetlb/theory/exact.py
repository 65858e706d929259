"""Exact stationary solution of small heterogeneous systems as a continuous-time Markov chain.

Model (000 section 3 with a general compatibility graph, and the servers and arrivals of
hetlb.model.servers and hetlb.model.arrivals): server s holds at most ``buffer[s]`` jobs (b in
000), at most ``concurrency[s]`` = c_s of them in service; with n_s jobs it completes one at
exponential rate mu_s phi_s(min(n_s, c_s)) (``speed[s]`` is mu in 000, ``rate_curve[s]`` phi_s),
so each server is a birth-death chain. Job type k (a port of 000) arrives at rate
``arrival_rate[k]`` (lambda_l in 000) and may only use the servers in ``compat[k]`` (N_L(l) in
000). The state is the vector of queue lengths q, where q_s counts every job at s, in service or
waiting. The policy routes an arrival on queue lengths, speeds, concurrencies and rate curves
(``jsq-lisf`` also on the order in which servers gained a free slot, see below); if the chosen
server is full the job is lost. With every c_s = 1 this is 000's model, the server FCFS at rate mu.

Arrivals (``arrivals``):

- ``poisson``: type k as a Poisson stream of rate lambda_k;
- ``mmpp:ratio=R,on=T1,off=T2``: the state also holds the phase (on, off), which flips at rate
  1 / T1 from on and 1 / T2 from off; in a phase of total rate lambda_phase type k arrives at
  rate lambda_k lambda_phase / lambda;
- ``batch:mean=B``: batches at rate lambda / B of geometric size (mean B); its jobs draw their
  types (type k with probability lambda_k / lambda) and are routed in turn at the same instant,
  each seeing the ones before it. The batch is a second copy of every state, a *routing* state
  of a batch under way: a batch epoch moves q to its routing copy; the routing copy routes one
  job at rate nu and returns to the ordinary states with probability p = 1 / B (the batch is
  over) or stays a routing state with 1 - p. The time spent in routing states does not change
  the ordinary states' relative probabilities (the chain's jumps are those of the batch, and an
  ordinary state's holding time is unchanged), so their law, renormalised, is exact for any nu;
  a job sent to a full server is lost and the batch goes on, so a batch arriving when every
  buffer is full loses the rest of its jobs and leaves the state as it was.

Means over jobs (response, waiting and service times, blocking, the chance to wait) weigh each
state by the rate at which jobs arrive in it: its probability (Poisson, PASTA), its probability
times lambda_phase / lambda (mmpp), or the rate of routing in its routing copy (batch). The mean
response time is Little's, the mean number in system over the throughput of admitted jobs.

Policy ids and their tie-breaking follow docs/reference/policies.md (and its definitions on
multi-slot servers: a free slot n_s < c_s is "idle", the rate a new job would receive
mu_s phi_s(b') / b', b' = min(n_s + 1, c_s), is "fast"), which lacks these three:

- ``jsq-fiq`` (the JFIQ of 002): the fastest idle compatible server (ties at random), otherwise a
  shortest compatible queue (ties at random).
- ``jsq-df-ds`` (JSQ-(d_F, d_S), Gardner et al.): "fast" servers have the largest speed in the
  system, the others are "slow". Sample min(d_F, |F_k|) of the compatible fast servers F_k and
  min(d_S, |S_k|) of the compatible slow servers S_k, uniformly without replacement. Join an idle
  sampled fast server; else, if a sampled slow server is idle, join one with probability p_S and
  the shortest sampled fast queue with probability 1 - p_S; else join the shortest sampled fast
  queue with probability p_F and the shortest sampled slow queue with probability 1 - p_F. Choices
  among idle or shortest sampled servers are uniform. A choice of a fast server goes to the slow
  side when F_k is empty (p_S = 1, p_F = 0), and p_F = 1 when S_k is empty; with one speed in the
  system this is ``pod`` with d = d_F.
- ``jsq-lisf`` (longest idle server first, 002): a shortest compatible queue; if a compatible
  server is idle, the one that has been idle the longest. Servers idle since time 0 tie and are
  chosen among at random; otherwise ties among the shortest busy queues are at random.

Queue lengths alone do not determine where ``jsq-lisf`` sends a job, so its chain has the states
(q, the idle servers from the longest idle to the most recently idle): a server joins the end of
the order when a departure empties it and leaves it when it receives a job. There are sum over
idle sets I of |I|! prod_{s not in I} buffer[s] such states. The initial order does not matter for
the stationary law: every covered server (one that some job type may use) receives a job in
finite time, after which the covered servers are strictly ordered and the chain can reach every
order of them, so it has a single closed class (the random ties at time 0 only affect transient
states). Servers that no job type uses stay idle, are never chosen and never change place, so the
chain starts from the empty state with them first and the covered servers in index order, a state
of that closed class. On multi-slot servers "idle" is a free slot: a server joins the end of the
order when a departure leaves it one free slot (n_s = c_s - 1) and leaves the order when an
arrival fills its last one. A server whose buffer is below its concurrency is never full, so it
has had a free slot since time 0, ties with every such server and comes before the others; the
order holds the other servers alone.
"""

import itertools
import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order
from scipy.sparse.linalg import LinearOperator, bicgstab, spsolve

from hetlb import validation
from hetlb.constants import INFINITE_BUFFER, UNLIMITED_CONCURRENCY
from hetlb.errors import InputError
from hetlb.model.arrivals import ArrivalProcess
from hetlb.model.servers import check_servers, concurrency_array, rate_curve_tuple
from hetlb.model.system import System
from hetlb.policies.exact_rules import Slots
from hetlb.policies.registry import JLU, Policy, policies_where, resolve_policy

__all__ = [
    "EXACT_POLICIES",
    "MAX_STATES",
    "ExactSolution",
    "routing_probabilities",
    "solve_exact",
    "solve_exact_arrays",
]

MAX_STATES = 250_000
"""Default limit on the number of states, prod_s (buffer[s] + 1), that solve_exact accepts."""

_RESIDUAL_TOLERANCE = 1e-9
_DIRECT_SOLVE_LIMIT = 3000
_DIRECT_FALLBACK_LIMIT = 10_000
"""Chains up to this many states are solved by sparse LU when the iterative solver fails: the fill
of the LU of these chains grows fast (14,000 states of jsq-lisf fill 16.5 million entries, 36 s);
larger chains that the iterative solver cannot solve are refused."""
_SOLVER_WORK = 2 * 10**10
"""The iterative solver stops after this many multiply-adds (iterations x nonzeros x 2): under a
minute; the chains here converge in a few hundred iterations."""
MAX_ROUTING_WORK = 2 * 10**9
"""The most work the routing tables of a chain may take: states x compatible servers x the
samples a policy averages over (pod and jsq-df-ds average over every subset they may sample)."""


EXACT_POLICIES = policies_where(exact_rule=True)
"""Policy ids that the exact solver implements (those with a PolicySpec.exact_rule)."""


# --- validation ------------------------------------------------------------------------------


def _exact_policy(policy, policy_params: dict, caller: str, servers: "_Servers") -> Policy:
    policy = resolve_policy(policy, policy_params, caller)
    if policy.spec.exact_rule is None:
        raise InputError("policy", f"{policy.id} has no exact rule; the solver covers: {', '.join(EXACT_POLICIES)}")
    if servers.multi_slot and policy.spec.selection_key is not None:
        raise InputError(
            "concurrency",
            f"{policy.id}'s exact rule is written for servers of one slot; give every server concurrency 1",
        )
    if policy.code == JLU and np.any(servers.concurrency >= UNLIMITED_CONCURRENCY):
        raise InputError(
            "concurrency", "jlu ranks by n_s / c_s, which unlimited concurrency makes 0; give a finite one"
        )
    return policy


@dataclass(frozen=True, eq=False)
class _Servers:
    """The servers' concurrency c_s (int64, UNLIMITED_CONCURRENCY for unlimited) and rate curves phi_s."""

    concurrency: np.ndarray
    curves: tuple

    @classmethod
    def checked(cls, concurrency, rate_curve, n_servers: int) -> "_Servers":
        if isinstance(concurrency, np.ndarray) and np.issubdtype(concurrency.dtype, np.integer):
            concurrency = [math.inf if c >= UNLIMITED_CONCURRENCY else int(c) for c in concurrency]  # System's
        concurrency = concurrency_array(concurrency, n_servers)
        curves = rate_curve_tuple(rate_curve, n_servers)
        check_servers(concurrency, curves)
        return cls(concurrency, curves)

    @property
    def multi_slot(self) -> bool:
        return bool(np.any(self.concurrency > 1))

    def slots(self, compatible: np.ndarray, speed: np.ndarray) -> Slots | None:
        """The exact rules' view of the servers ``compatible``: None when every server has one slot."""
        if not self.multi_slot:
            return None
        return Slots(self.concurrency[compatible], tuple(self.curves[s] for s in compatible), speed[compatible])

    def completion_rates(self, speed: np.ndarray, buffer: np.ndarray) -> list:
        """For each server s, its completion rate mu_s phi_s(min(n, c_s)) at n = 0..buffer[s] jobs."""
        rates = []
        for s, curve in enumerate(self.curves):
            jobs = np.arange(1, int(buffer[s]) + 1)
            rates.append(np.concatenate([[0.0], speed[s] * curve.phi(np.minimum(jobs, self.concurrency[s]))]))
        return rates


def _check_server_set(field: str, servers, n_servers: int) -> np.ndarray:
    servers = list(servers)
    if not servers:
        raise InputError(field, "must list at least one compatible server")
    for s in servers:
        validation.integer(field, s, low=0)
        if s >= n_servers:
            raise InputError(field, f"server index {s} is out of range 0..{n_servers - 1}")
    if len(set(servers)) != len(servers):
        raise InputError(field, f"server indices must be distinct, got {servers}")
    return np.array(sorted(servers), dtype=np.int64)


def _check_buffer(buffer, n_servers: int) -> np.ndarray:
    sizes = [buffer] * n_servers if np.ndim(buffer) == 0 else list(buffer)
    if len(sizes) != n_servers:
        raise InputError("buffer", f"must be one integer or one per server ({n_servers}), got {len(sizes)}")
    return np.array([validation.count("buffer", b) for b in sizes], dtype=np.int64)


# --- routing ---------------------------------------------------------------------------------


def routing_probabilities(
    policy, q, compat_k, speed, *, idle_order=None, concurrency=None, rate_curve=None, **policy_params
) -> np.ndarray:
    """Probability that ``policy`` sends a job of a type with servers ``compat_k`` to each server.

    Parameters
    ----------
    policy
        A policy id of EXACT_POLICIES or a ``hetlb.Policy``.
    q
        ``q[s]``, the queue length of server s, every job there counted.
    compat_k
        The servers the job's type may use.
    speed
        ``speed[s]``, the speed mu_s of server s.
    idle_order
        The idle servers (those with a free slot) of ``jsq-lisf`` from the longest idle to the
        most recently idle (None: all idle since time 0, so tied).
    concurrency, rate_curve
        c_s and phi_s as ``hetlb.System.from_speeds`` takes them (None: one slot each).
    **policy_params
        The policy's parameters (e.g. ``d`` of ``pod``).

    Returns
    -------
    numpy.ndarray
        A length-N vector that sums to 1 and is zero outside ``compat_k``.
    """
    speed = validation.positive_finite_array("speed", speed)
    n_servers = speed.size
    servers = _Servers.checked(concurrency, rate_curve, n_servers)
    policy = _exact_policy(policy, policy_params, "theory.routing_probabilities", servers)
    queue_len = np.asarray(q)
    if queue_len.shape != (n_servers,) or not np.issubdtype(queue_len.dtype, np.integer) or np.any(queue_len < 0):
        raise InputError("q", f"must be {n_servers} non-negative integer queue lengths, one per server")
    compatible = _check_server_set("compat_k", compat_k, n_servers)
    idle_rank = _idle_rank(idle_order, queue_len < servers.concurrency) if policy.spec.idle_order else None
    return _policy_routing_table(policy, queue_len[None, :], compatible, speed, idle_rank, servers)[0]


def _idle_rank(idle_order, free) -> np.ndarray:
    """Position (1, N) of each server with a free slot in ``idle_order``; all 0 (tied) when it is None."""
    rank = np.zeros((1, free.size), dtype=np.int64)
    if idle_order is None:
        return rank
    order = [validation.integer("idle_order", s, low=0) for s in idle_order]
    if sorted(order) != np.flatnonzero(free).tolist():
        raise InputError("idle_order", f"must list each idle server (q[s] < its concurrency) once, got {order}")
    rank[0, order] = np.arange(len(order))
    return rank


def _policy_routing_table(policy: Policy, states, compatible, speed, idle_rank, servers: _Servers) -> np.ndarray:
    """Routing probabilities (n_states, N) of one job type in every state.

    ``idle_rank`` (n_states, N) gives the idle order of a policy that decides on it, else None.
    """
    table = np.zeros(states.shape, dtype=float)
    is_fast = speed[compatible] == speed.max()
    rule = policy.spec.exact_rule
    assert rule is not None, "_exact_policy admits only policies with an exact rule"
    arguments = (
        states[:, compatible],
        speed[compatible],
        is_fast,
        policy.params,
        None if idle_rank is None else idle_rank[:, compatible],
    )
    slots = servers.slots(compatible, speed)
    table[:, compatible] = rule(*arguments) if slots is None else rule(*arguments, slots=slots)
    return table


def _custom_routing_table(routing, k, states, compatible) -> np.ndarray:
    """Routing probabilities (n_states, N) of job type k from a user callable (q, k) -> vector."""
    n_servers = states.shape[1]
    incompatible = np.ones(n_servers, dtype=bool)
    incompatible[compatible] = False
    table = np.empty(states.shape, dtype=float)
    for i, state in enumerate(states):
        q = tuple(int(x) for x in state)
        row = np.asarray(routing(q, k), dtype=float)
        if row.shape != (n_servers,) or not np.all(np.isfinite(row)) or np.any(row < 0) or abs(row.sum() - 1.0) > 1e-9:
            raise InputError(
                "routing",
                f"must return {n_servers} non-negative probabilities summing to 1; got {row.tolist()} for q={q}, k={k}",
            )
        if np.any(row[incompatible] > 0):
            raise InputError("routing", f"sends job type {k} to a server outside compat[{k}] at q={q}")
        table[i] = row
    return table


# --- solution --------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class ExactSolution:
    """Stationary performance of the chain (rates in jobs per unit time, times in time units).

    Per-job means are over admitted jobs, weighted by the rate at which jobs arrive in each state
    (PASTA for Poisson arrivals; module docstring); the mean response time is Little's, the mean
    waiting time the time before a slot is free (on single-slot servers the response time less the
    mean service time 1 / mu_s). ``p_wait`` is the share of admitted jobs that find every slot of
    their server taken. ``utilisation[s]`` is P(n_s >= 1), the time server s is busy;
    ``mean_in_service[s]`` is E[min(n_s, c_s)], the mean jobs in service (utilisation when c_s = 1).
    ``states[i]`` is the queue-length vector whose probability is ``stationary[i]``; states are in
    C order over the shape ``buffer + 1``, so ``stationary.reshape(buffer + 1)`` is the joint law.
    ``n_states`` counts the states of the chain, which for ``jsq-lisf`` also hold the idle order,
    and are twice the queue states for mmpp (the phase) and batch arrivals (the routing states);
    ``stationary`` is the law of the queue lengths alone in time; ``residual`` is that chain's.

    Parameters
    ----------
    policy
        The policy's id.
    mean_response_time
        E[T] of admitted jobs (time units).
    mean_waiting_time
        The mean time before a slot is free (time units).
    mean_service_time
        The mean service time of admitted jobs (time units).
    blocking_probability
        The fraction of arrivals lost.
    blocking_probability_by_type
        The same per job type.
    p_wait
        See above.
    mean_number_in_system
        L.
    throughput
        Admitted jobs per unit time.
    utilisation
        See above.
    mean_in_service
        See above.
    admitted_rate_by_server
        Jobs admitted to each server per unit time.
    states, stationary
        See above.
    n_states
        See above.
    residual
        max |pi Q| of the solved chain relative to the largest total rate out of a state (a check of
        the solve).
    """

    policy: str
    mean_response_time: float
    mean_waiting_time: float
    mean_service_time: float
    blocking_probability: float
    blocking_probability_by_type: np.ndarray
    p_wait: float
    mean_number_in_system: float
    throughput: float
    utilisation: np.ndarray
    mean_in_service: np.ndarray
    admitted_rate_by_server: np.ndarray
    states: np.ndarray
    stationary: np.ndarray
    n_states: int
    residual: float

    def __repr__(self) -> str:
        return (
            f"<ExactSolution {self.policy}, {len(self.utilisation)} servers, {self.n_states:,} states: mean response "
            f"time {self.mean_response_time:.5g}, blocking {self.blocking_probability:.3g}>"
        )

    def plot(self, path=None):
        """The matplotlib Figure of each server's utilisation P(n_s >= 1) and admitted rate (jobs per
        time unit), exact (no interval); written to ``path`` when given.

        Parameters
        ----------
        path
            A file to write the figure to (its format by the extension); None: none written.

        Returns
        -------
        matplotlib.figure.Figure
            The figure.
        """
        from hetlb.plots.figures import plot_intervals

        def rows(values) -> list:
            return [(f"server {s}", float(v), math.nan, math.nan) for s, v in enumerate(values)]

        title = f"exact {self.policy}: mean response time {self.mean_response_time:.4g}"
        panels = [
            {"title": title, "ylabel": "utilisation P(n_s >= 1)", "rows": rows(self.utilisation)},
            {"title": "", "ylabel": "admitted rate (jobs per time unit)", "rows": rows(self.admitted_rate_by_server)},
        ]
        return plot_intervals(panels, path, sharey=False)


def _frozen(array) -> np.ndarray:
    """A read-only view, so that a frozen result cannot be changed in place."""
    array = np.asarray(array)
    array.setflags(write=False)
    return array


def _transitions(states, after_departure, after_arrival, completion_rate, buffer, routed_rate, offset=0, to=None):
    """The transitions (rows, cols, rates) of departures and admitted arrivals among the states
    ``offset + i``: a departure from server s at ``completion_rate[s][q_s]`` (none when
    ``completion_rate`` is None), an admission to s at ``routed_rate[i, s]``, to ``to`` +
    ``after_arrival`` (``offset`` when ``to`` is None).

    ``states[i]`` is the queue-length vector of state i; ``after_departure[i, s]`` and
    ``after_arrival[i, s]`` are the states that a departure from, or an admission to, server s
    leads to (read only where one can happen).
    """
    n_states, n_servers = states.shape
    index = np.arange(n_states)
    to = offset if to is None else to
    rows, cols, rates = [], [], []
    for s in range(n_servers):
        if completion_rate is not None:
            busy = states[:, s] >= 1
            rows.append(offset + index[busy])
            cols.append(offset + after_departure[busy, s])
            rates.append(completion_rate[s][states[busy, s]])
        admits = (states[:, s] < buffer[s]) & (routed_rate[:, s] > 0)
        rows.append(offset + index[admits])
        cols.append(to + after_arrival[admits, s])
        rates.append(routed_rate[admits, s])
    return rows, cols, rates


def _generator(states, after_departure, after_arrival, completion_rate, buffer, routed_rate, arrivals, total_rate):
    """Generator Q of the chain (module docstring) and the rate ``nu`` at which a batch's routing
    states route its jobs (None for the other arrivals).

    Poisson: one copy of the states. mmpp: the on copy (states 0..n-1) and the off copy (n..2n-1),
    their arrivals scaled by lambda_phase / lambda. batch: the ordinary states and their routing
    copies (n..2n-1). ``total_rate`` is lambda, the sum of the types' rates.
    """
    n_states = states.shape[0]
    index = np.arange(n_states)
    chain = (states, after_departure, after_arrival)
    if arrivals.kind == "poisson":
        return _from_parts(_transitions(*chain, completion_rate, buffer, routed_rate), n_states), None
    if arrivals.kind == "mmpp":
        flips = ([index, index + n_states], [index + n_states, index])
        parts = [(*flips, [np.full(n_states, 1.0 / arrivals.on), np.full(n_states, 1.0 / arrivals.off)])]
        for phase, phase_rate in enumerate(arrivals.phase_rates(total_rate)):
            scaled = routed_rate * (phase_rate / total_rate)
            parts.append(_transitions(*chain, completion_rate, buffer, scaled, offset=phase * n_states))
        return _from_parts(_joined(parts), 2 * n_states), None
    stop = 1.0 / arrivals.mean_batch
    routing_rate = total_rate + sum(float(rate.max()) for rate in completion_rate)
    share = routed_rate / total_rate
    lost = 1.0 - np.where(states < buffer, share, 0.0).sum(axis=1)
    lost_last = lost > 1e-15  # a job lost as the batch ends: back to the ordinary copy, unchanged
    parts = [
        _transitions(*chain, completion_rate, buffer, np.zeros_like(share)),
        ([index], [n_states + index], [np.full(n_states, total_rate * stop)]),  # a batch begins
        _transitions(*chain, None, buffer, routing_rate * stop * share, offset=n_states, to=0),
        _transitions(*chain, None, buffer, routing_rate * (1 - stop) * share, offset=n_states),
        ([n_states + index[lost_last]], [index[lost_last]], [routing_rate * stop * lost[lost_last]]),
    ]
    return _from_parts(_joined(parts), 2 * n_states), routing_rate


def _joined(parts) -> tuple[list, list, list]:
    """The (rows, cols, rates) lists of several parts of a chain, one after the other."""
    return tuple([array for part in parts for array in part[i]] for i in range(3))  # type: ignore[return-value]


def _from_parts(transitions, n_states: int) -> sp.csr_matrix:
    rows, cols, rates = transitions
    return generator_from_transitions(np.concatenate(rows), np.concatenate(cols), np.concatenate(rates), n_states)


def generator_from_transitions(rows, cols, rates, n_states: int) -> sp.csr_matrix:
    """The generator Q of a chain on ``n_states`` states from its transitions rows[k] -> cols[k]
    at rates[k]: the off-diagonal rates plus the diagonal minus each state's total out-rate."""
    index = np.arange(n_states)
    out_rate = np.bincount(rows, weights=rates, minlength=n_states)
    return sp.csr_matrix(
        (np.concatenate([rates, -out_rate]), (np.concatenate([rows, index]), np.concatenate([cols, index]))),
        shape=(n_states, n_states),
    )


def _stationary_distribution(generator: sp.csr_matrix) -> tuple[np.ndarray, float]:
    """Solve pi Q = 0, sum(pi) = 1 on the states reachable from the empty state (index 0).

    The reachable states form one closed communicating class (every state drains to empty), so
    pinning pi(empty) and dropping its balance equation leaves a nonsingular system. Small systems
    are solved by sparse LU; large ones by BiCGSTAB with a Jacobi preconditioner (the LU of a
    many-server chain fills in badly), falling back to LU. Unreachable states get probability 0.
    Returns pi and the residual max|pi Q| relative to the largest total rate out of a state.
    """
    n_states = generator.shape[0]
    reachable = np.sort(breadth_first_order(generator, 0, directed=True, return_predecessors=False))
    chain = generator[reachable][:, reachable]
    balance = chain.T.tocsr()
    system = balance[1:, 1:]
    rhs = -balance[1:, [0]].toarray().ravel()
    pinned = None
    if system.shape[0] > _DIRECT_SOLVE_LIMIT:
        inverse_diagonal = 1.0 / system.diagonal()
        jacobi = LinearOperator(system.shape, matvec=lambda v: inverse_diagonal * v, dtype=float)
        maxiter = int(min(20_000, max(100, _SOLVER_WORK // (2 * max(system.nnz, 1)))))
        # from zero, then (if that breaks down, as on some jsq-lisf chains) from a uniform start
        for start in (None, np.full(system.shape[0], 1.0)):
            solution, info = bicgstab(system, rhs, x0=start, rtol=1e-13, atol=0.0, maxiter=maxiter, M=jacobi)
            if info == 0 and _relative_residual(chain, _normalised(solution)) <= _RESIDUAL_TOLERANCE:
                pinned = solution
                break
    if pinned is None and system.shape[0] > _DIRECT_FALLBACK_LIMIT:
        raise InputError(
            "buffer",
            f"the iterative solver did not converge on this chain of {system.shape[0] + 1:,} states, and a "
            f"direct solve of more than {_DIRECT_FALLBACK_LIMIT:,} states could take hours and all the memory; "
            "use fewer servers or smaller buffers",
        )
    if pinned is None:
        pinned = np.atleast_1d(spsolve(system.tocsc(), rhs))
    if not np.all(np.isfinite(pinned)):
        raise InputError("speed", f"the stationary equations of the chain could not be solved: {_rate_span(chain)}")
    pi_reachable = _normalised(pinned)
    residual = _relative_residual(chain, pi_reachable)
    if residual > _RESIDUAL_TOLERANCE:
        raise InputError(
            "speed", f"the stationary solution is inaccurate (relative residual {residual:.3g}): {_rate_span(chain)}"
        )
    pi = np.zeros(n_states)
    pi[reachable] = pi_reachable
    return pi, residual


def _rate_span(chain: sp.csr_matrix) -> str:
    """What to change when the equations cannot be solved: the span of the chain's rates."""
    rates = np.abs(chain.data[chain.data != 0])
    return (
        f"its rates span {rates.min():.3g} to {rates.max():.3g}, too far apart for float64; bring the speeds "
        "and arrival rates closer together"
    )


def _normalised(pinned: np.ndarray) -> np.ndarray:
    """The distribution (1, pinned...) / sum, with round-off negatives set to 0."""
    pi = np.clip(np.concatenate([[1.0], pinned]), 0.0, None)
    return pi / pi.sum()


def _relative_residual(generator: sp.csr_matrix, pi: np.ndarray) -> float:
    scale = max(float(-generator.diagonal().min()), 1.0)
    return float(np.abs(generator.T @ pi).max()) / scale


def _short_count(n: int) -> str:
    """A count in a few characters: 250,000 as written, 6^100 as "about 6.5e77"."""
    if n < 10**7:
        return f"{n:,}"
    exponent = math.floor(math.log10(n))  # log10 takes ints of any size; the float may be off by one
    exponent += (10 ** (exponent + 1) <= n) - (10**exponent > n)
    mantissa = round(n // 10 ** (exponent - 2) / 10) / 10  # two significant digits
    if mantissa >= 10:
        mantissa, exponent = 1.0, exponent + 1
    return f"about {mantissa:.1f}e{exponent}"


def _free_and_full_counts(buffer, concurrency) -> tuple[list, list]:
    """For each server, how many queue lengths leave it a free slot (0..c-1) and how many fill it
    (c..buffer); a server whose buffer is below its concurrency is never full."""
    free = [int(min(c, b + 1)) for b, c in zip(buffer, concurrency)]
    return free, [int(b) + 1 - f for b, f in zip(buffer, free)]


def _idle_order_state_count(buffer, concurrency) -> int:
    """Number of (q, idle order) states: sum over the sets I of servers with a free slot of |I|!
    prod_{s in I} c_s prod_{s not in I} (buffer[s] - c_s + 1), the servers never full left out of
    the order (each contributes its buffer[s] + 1 queue lengths). With c = 1: sum over idle sets
    I of |I|! prod_{s not in I} buffer[s]."""
    free, full = _free_and_full_counts(buffer, concurrency)
    by_free_count = [1]  # entry j: sum over sets of j servers with a free slot of their count product
    never_full = 1
    for f, g in zip(free, full):
        if g == 0:
            never_full *= f
            continue
        by_free_count = [g * busy + f * idle for busy, idle in zip(by_free_count + [0], [0] + by_free_count)]
    return never_full * sum(math.factorial(j) * count for j, count in enumerate(by_free_count))


def _idle_order_chain(buffer, covered, concurrency):
    """States (q, idle order) of ``jsq-lisf`` and their transitions (module docstring).

    ``covered[s]`` says whether some job type may use server s. Returns the queue lengths
    (n_states, N), each server's position in the idle order (n_states, N; 0 for full servers, -1
    for the servers never full, which tie ahead of the others) and the states after a departure
    from and after an admission to each server (n_states, N; 0 where none can happen). State 0 is
    the empty start, uncovered servers first.
    """
    n_servers = buffer.size
    fills = [int(c) <= int(b) for b, c in zip(buffer, concurrency)]
    start_order = sorted((s for s in range(n_servers) if fills[s]), key=lambda s: (bool(covered[s]), s))
    keys = [
        (q, order)
        for q in itertools.product(*(range(int(b) + 1) for b in buffer))
        for order in itertools.permutations([s for s in start_order if q[s] < concurrency[s]])
    ]
    index = {key: i for i, key in enumerate(keys)}
    idle_rank = np.zeros((len(keys), n_servers), dtype=np.int64)
    idle_rank[:, [s for s in range(n_servers) if not fills[s]]] = -1
    after_departure = np.zeros((len(keys), n_servers), dtype=np.int64)
    after_arrival = np.zeros((len(keys), n_servers), dtype=np.int64)
    for i, (q, order) in enumerate(keys):
        idle_rank[i, list(order)] = range(len(order))
        for s in range(n_servers):
            if q[s] >= 1:
                order_after = order + (s,) if q[s] == concurrency[s] else order
                after_departure[i, s] = index[(q[:s] + (q[s] - 1,) + q[s + 1 :], order_after)]
            if q[s] < buffer[s]:
                order_after = tuple(x for x in order if x != s) if q[s] + 1 == concurrency[s] else order
                after_arrival[i, s] = index[(q[:s] + (q[s] + 1,) + q[s + 1 :], order_after)]
    return np.array([q for q, _ in keys], dtype=np.int64), idle_rank, after_departure, after_arrival


def _routing_samples(policy: Policy, m: int) -> int:
    """How many samples a policy's exact rule averages over for a job type with m servers: every
    subset of d (pod) or of d_F fast and d_S slow servers (jsq-df-ds, bounded by both subsets of m);
    one for the others."""
    params = policy.params
    if "d" in params:
        return math.comb(m, min(params["d"], m))
    if "d_fast" in params:
        return 2 * (math.comb(m, min(params["d_fast"], m)) + math.comb(m, min(params["d_slow"], m)))
    return 1


def _check_chain_size(
    n_states: int, n_queue_vectors: int, n_servers: int, compat: list, policy, tracks_idle_order: bool, phases: int
) -> None:
    """Refuse, before building it, a chain whose routing tables take more than MAX_ROUTING_WORK or
    whose arrays (by its states and its at most states x (2N + 1) transitions, in each of its
    ``phases`` copies of the states) pass the machine's memory. ``policy`` is None for a custom
    routing."""
    n_types = len(compat)
    if policy is not None:
        work = sum(_routing_samples(policy, len(c)) * (n_states * len(c) + 2000) for c in compat)
        if work > MAX_ROUTING_WORK:
            raise InputError(
                "policy",
                f"{policy.id} averages over the samples it may draw: its routing tables on {n_states:,} states "
                f"take about {validation.quantity(work)} steps, more than {validation.quantity(MAX_ROUTING_WORK)}; "
                "use fewer servers, smaller buffers or a smaller sample",
            )
    n_transitions = phases * n_states * (2 * n_servers + 2)
    n_chain_states = phases * n_states
    needed = (
        16 * n_queue_vectors * n_servers  # the queue-length vectors
        + (8 * 4 + 24) * n_states * n_servers  # states, idle ranks and successors, with temporaries
        + (n_states * (300 + 24 * n_servers) if tracks_idle_order else 0)  # the (q, order) keys in Python
        + 8 * (n_types + 8) * n_states * n_servers  # the routing tables, the routed rates and the rule's arrays
        + 160 * n_transitions  # the generator, its transpose and the reachable sub-chain, in COO, CSR and CSC
        + 8 * 16 * n_chain_states  # the solver's vectors
        + (16 * n_chain_states * min(n_chain_states, 2000) if n_chain_states <= _DIRECT_FALLBACK_LIMIT else 0)  # LU
    )
    validation.check_memory(
        "buffer",
        needed,
        f"the chain of {n_chain_states:,} states and up to {validation.quantity(n_transitions)} transitions",
        "use fewer servers or smaller buffers",
    )


def solve_exact(system: System, policy="jsq", *, routing=None, max_states=MAX_STATES, **policy_params) -> ExactSolution:
    """Exact stationary performance of ``system`` under ``policy``, as ``hetlb.simulate`` takes them.

    Parameters
    ----------
    system
        A ``hetlb.System`` with finite buffers and exponential job sizes; its servers' concurrency
        and rate curves and its arrival process (Poisson, batch or mmpp) are the chain's.
    policy
        A policy id of EXACT_POLICIES or a ``hetlb.Policy``.
    routing
        Optional callable (q, k) -> length-N probabilities that replaces ``policy``, as in
        ``solve_exact_arrays``.
    max_states
        The largest number of states of the chain accepted, as in ``solve_exact_arrays``.
    **policy_params
        The policy's parameters (e.g. ``d=3`` for ``pod``).

    Returns
    -------
    ExactSolution
        The stationary law and its measures.
    """
    if not isinstance(system, System):
        raise InputError("system", "must be a hetlb.System (or use solve_exact_arrays with the speeds and rates)")
    if np.any(system.buffer == INFINITE_BUFFER):
        raise InputError("buffer", "the exact solver needs a finite buffer on every server")
    if system.job_sizes.kind != "exponential":
        raise InputError("job_sizes", "the exact solver needs exponential job sizes")
    if system.caches is not None:
        raise InputError(
            "cache_blocks", "the chain over queue lengths has no caches: use hetlb.theory.solve_exact_cache"
        )
    return solve_exact_arrays(
        system.speed,
        system.arrival_rate,
        system.graph.to_lists(),
        system.buffer,
        policy,
        concurrency=system.concurrency,
        rate_curve=system.rate_curve,
        arrivals=system.arrivals,
        routing=routing,
        max_states=max_states,
        **policy_params,
    )


def solve_exact_arrays(
    speed,
    arrival_rate,
    compat,
    buffer,
    policy="jsq",
    *,
    concurrency=None,
    rate_curve=None,
    arrivals=None,
    routing=None,
    max_states=MAX_STATES,
    **policy_params,
) -> ExactSolution:
    """Exact stationary performance of a small system given by its arrays.

    Parameters
    ----------
    speed
        ``speed[s]``: speed of server s (mu in 000): with one job in service it completes jobs at
        this rate per unit time.
    arrival_rate
        ``arrival_rate[k]``: rate of job type k (lambda_l in 000), jobs per unit time.
    compat
        ``compat[k]``: the servers job type k may use (N_L(l) in 000).
    buffer
        The most jobs a server holds, those in service included (b in 000); one integer for all
        servers or one per server.
    policy
        A policy id of EXACT_POLICIES or a ``hetlb.Policy``.
    concurrency, rate_curve
        The servers' c_s and phi_s as ``hetlb.System.from_speeds`` takes them (None: one slot
        each, the papers' servers).
    arrivals
        A ``hetlb.model.arrivals.ArrivalProcess`` or its text ("poisson", "batch:mean=B",
        "mmpp:ratio=R,on=T1,off=T2"); None is Poisson.
    routing
        Optional callable (q, k) -> length-N probabilities that replaces ``policy``; ``q`` is a
        tuple of queue lengths and ``k`` the job type.
    max_states
        The largest number of states of the chain accepted: prod_s (buffer[s] + 1), or for
        ``jsq-lisf`` the count of (q, idle order) states in the module docstring, times 2 for the
        phases of mmpp arrivals or the routing states of batch arrivals.
    **policy_params
        The policy's parameters (e.g. ``d`` of ``pod``; ``d_fast``, ``d_slow``, ``p_fast``,
        ``p_slow`` of ``jsq-df-ds``).

    Returns
    -------
    ExactSolution
        The stationary law and its measures.
    """
    speed = validation.positive_finite_array("speed", speed)
    arrival_rate = validation.positive_finite_array("arrival_rate", arrival_rate)
    n_servers, n_job_types = speed.size, arrival_rate.size
    if len(compat) != n_job_types:
        raise InputError("compat", f"must list the compatible servers of each of the {n_job_types} job types")
    compat = [_check_server_set(f"compat[{k}]", servers, n_servers) for k, servers in enumerate(compat)]
    buffer = _check_buffer(buffer, n_servers)
    servers = _Servers.checked(concurrency, rate_curve, n_servers)
    arrivals = ArrivalProcess() if arrivals is None else ArrivalProcess.parse(arrivals)
    if routing is None:
        policy = _exact_policy(policy, policy_params, "theory.solve_exact_arrays", servers)
    elif not callable(routing):
        raise InputError("routing", "must be a callable (q, k) -> routing probabilities, or None")
    shape = tuple(int(b) + 1 for b in buffer)
    tracks_idle_order = routing is None and policy.spec.idle_order
    phases = 1 if arrivals.is_poisson else 2
    if tracks_idle_order:
        n_states, how_counted = (
            _idle_order_state_count(buffer, servers.concurrency),
            "(queue lengths, idle order) pairs",
        )
    else:
        n_states, how_counted = math.prod(shape), "prod(buffer + 1)"
    if phases > 1:
        how_counted += f" x 2 ({'phases' if arrivals.kind == 'mmpp' else 'ordinary and routing states'})"
    if phases * n_states > max_states:
        raise InputError(
            "buffer",
            f"the chain has {how_counted} = {_short_count(phases * n_states)} states, more than the limit "
            f"max_states = {max_states:,}; use fewer servers or smaller buffers",
        )
    _check_chain_size(
        n_states,
        math.prod(shape),
        n_servers,
        compat,
        policy if routing is None else None,
        tracks_idle_order,
        phases,
    )

    queue_vectors = np.indices(shape).reshape(n_servers, -1).T
    if tracks_idle_order:
        covered = np.isin(np.arange(n_servers), np.concatenate(compat))
        states, idle_rank, after_departure, after_arrival = _idle_order_chain(buffer, covered, servers.concurrency)
    else:
        states, idle_rank = queue_vectors, None
        stride = np.array([math.prod(shape[s + 1 :]) for s in range(n_servers)], dtype=np.int64)
        index = np.arange(n_states)[:, None]
        after_departure, after_arrival = index - stride, index + stride
    if routing is None:
        tables = [
            _policy_routing_table(policy, states, compat[k], speed, idle_rank, servers) for k in range(n_job_types)
        ]
    else:
        tables = [_custom_routing_table(routing, k, states, compat[k]) for k in range(n_job_types)]
        policy = "custom"

    total_rate = float(arrival_rate.sum())
    routed_rate = sum(rate * table for rate, table in zip(arrival_rate, tables))
    completion_rate = servers.completion_rates(speed, buffer)
    generator, routing_rate = _generator(
        states, after_departure, after_arrival, completion_rate, buffer, routed_rate, arrivals, total_rate
    )
    pi_chain, residual = _stationary_distribution(generator)
    pi, arrival_weight = _time_and_arrival_laws(pi_chain, n_states, arrivals, total_rate, routing_rate)
    queue_law = np.bincount(np.ravel_multi_index(states.T, shape), weights=pi, minlength=len(queue_vectors))

    full = states >= buffer
    waits = states >= servers.concurrency
    admitted = np.where(full, 0.0, routed_rate)
    throughput = float(arrival_weight @ admitted.sum(axis=1))
    blocking_by_type = np.array([arrival_weight @ np.where(full, table, 0.0).sum(axis=1) for table in tables])
    mean_number = float(pi @ states.sum(axis=1))
    mean_response = mean_number / throughput
    if servers.multi_slot:  # Little's law on the jobs waiting for a slot
        mean_waiting = float(pi @ np.maximum(states - servers.concurrency, 0).sum(axis=1)) / throughput
        mean_service = mean_response - mean_waiting
    else:  # a job's service time at s is exponential of mean 1 / mu_s
        mean_service = float(arrival_weight @ (admitted / speed).sum(axis=1)) / throughput
        mean_waiting = mean_response - mean_service
    p_wait = float(arrival_weight @ np.where(waits, admitted, 0.0).sum(axis=1)) / throughput

    return ExactSolution(
        policy=policy if isinstance(policy, str) else policy.id,
        mean_response_time=mean_response,
        mean_waiting_time=mean_waiting,
        mean_service_time=mean_service,
        blocking_probability=float(arrival_rate @ blocking_by_type / total_rate),
        blocking_probability_by_type=_frozen(blocking_by_type),
        p_wait=p_wait,
        mean_number_in_system=mean_number,
        throughput=throughput,
        utilisation=_frozen(pi @ (states >= 1)),
        mean_in_service=_frozen(pi @ np.minimum(states, servers.concurrency)),
        admitted_rate_by_server=_frozen(arrival_weight @ admitted),
        states=_frozen(queue_vectors),
        stationary=_frozen(queue_law),
        n_states=phases * n_states,
        residual=residual,
    )


def _time_and_arrival_laws(pi_chain, n_states: int, arrivals: ArrivalProcess, total_rate: float, routing_rate):
    """The law of the states in time (n_states) and the weights by which jobs arrive in them: a
    job arrives in state i, and is routed by its routing tables, at rate ``weight[i]`` lambda.

    Poisson: both are pi (PASTA). mmpp: the sum of the two phases, and each phase's probability
    times lambda_phase / lambda. batch: the ordinary states renormalised, and the routing copies'
    probabilities times nu over lambda times the ordinary states' mass (each routing step is one
    job; module docstring)."""
    if arrivals.kind == "poisson":
        return pi_chain, pi_chain
    first, second = pi_chain[:n_states], pi_chain[n_states:]
    if arrivals.kind == "mmpp":
        rate_on, rate_off = arrivals.phase_rates(total_rate)
        return first + second, first * (rate_on / total_rate) + second * (rate_off / total_rate)
    mass = first.sum()
    return first / mass, second * (routing_rate / (total_rate * mass))
