"""The slotted event loop of paper 001: M dispatchers, N servers, local estimates and their updates.

``advance`` is pure: it reads a :class:`SlottedModel`, mutates a :class:`SlottedState` and draws
from four generators, so that what one policy draws never shifts what another sees:

* ``environment``: per slot, A_m(t) for m = 0..M-1, then S_n(t) for n = 0..N-1. Every policy
  sees the same arrivals and offered services for the same seed (common random numbers).
* ``dispatch``: per slot, with shared ties, the slot's tie-break uniform; then the decisions,
  dispatcher by dispatcher (m = 0..M-1), in job order with ``routing="job"``.
* ``update``: after the queues are updated, server by server (n = 0..N-1) its pull reports or
  its idle token; then dispatcher by dispatcher its push.
* ``measurement``: the dispatching-preference estimator only (it never changes the sample path).

One slot t (all times in slots):

1. draw A_m(t); each dispatcher with A_m(t) >= 1 decides on its information at the start of the
   slot: the true queues Q(t) (jsq, pod, jiq's tokens) or its estimates Q~^m(t) (l-*). With
   ``increment_on_dispatch`` it adds the jobs it sends to its own estimate of that server. A
   least-value choice (jsq, l-jsq) takes the tied server of rank floor(u k) among k ties, with u a
   fresh uniform, or with ``shared_ties`` the slot's uniform, the same for every dispatcher.
2. Q_n(t+1) = max(Q_n(t) + A_n(t) - S_n(t), 0); the departures are D_n(t) = Q_n(t) + A_n(t) - Q_n(t+1).
3. updates set estimates to Q_n(t+1): pull reports, jiq tokens, then pushes.
4. statistics of the slot ``t >= warmup``: sum_n Q_n(t+1), sum_{m,n} |Q_n(t+1) - Q~^m_n(t+1)| (the
   error the next decisions see), messages.

Cost per slot: O(N) for the services, plus O(N) per decision for l-jsq, l-jba and jsq, O(d) for
pod and l-pod, O(d) per push, O(N M) for the estimate error of an LED policy and
O(N log N) per decision when the preference is measured. Memory: O(N) per dispatcher.

Per-server state beyond the queue. A server changes in one place: step 2, where Q_n(t+1) is
computed from Q_n(t), the jobs sent to it in the slot (``arrivals_to[n]``) and its offered services
S_n(t); the decisions of step 1 only count the jobs they send. State that depends on those counts
alone (a server's departures, its idle slots) would join there. The model cannot carry state that
acts on a job, as the continuous loops' hetlb.kernels.server_state does (a cache of prompt blocks
whose hit, decided when a job starts service, sets its work): a job here has no size and no
identity, a queue is a number, and a service is a count of jobs that leave in a slot, with no
moment at which a given job starts service. Such state needs the continuous model.
"""

import math
from collections import namedtuple

import numpy as np

from hetlb.constants import COUNT_BERNOULLI, COUNT_POISSON
from hetlb.jit import njit, records
from hetlb.kernels.sampling import POISSON_INVERSION_MAX_MEAN, poisson_by_inversion
from hetlb.policies import registry, rules
from hetlb.policies.local_estimates import below_average_server, least_value_server
from hetlb.policies.registry import L_JBA, L_JSQ, L_POD

CODES = (registry.RANDOM, registry.WEIGHTED_RANDOM, registry.JSQ, registry.POD, registry.JIQ, L_JSQ, L_JBA, L_POD)
"""The policy codes advance() has a rule for (its decision's last branch is jsq's and l-jsq's);
hetlb.simulate_slotted refuses any other before it runs."""

RUNNING = 0
FINISHED = 1

UPDATE_NONE = 0
UPDATE_PUSH = 1
UPDATE_PULL = 2

PULL_DEPARTURE_SLOT = 0
PULL_DEPARTURE = 1
PULL_EVERY_SLOT = 2

BATCH_FIELDS = (
    "slot",
    "arrivals",
    "departures",
    "decisions",
    "queue_area",
    "error_area",
    "probes",
    "replies",
    "reports",
    "tokens",
)
"""Columns of the cumulative snapshot taken at the end of each batch of slots."""

COUNTER_DTYPE = np.dtype(
    [
        ("slot", "i8"),
        ("arrivals", "i8"),
        ("departures", "i8"),
        ("decisions", "i8"),
        ("queue_area", "i8"),
        ("error_area", "i8"),
        ("probes", "i8"),
        ("replies", "i8"),
        ("reports", "i8"),
        ("tokens", "i8"),
        ("arrivals_total", "i8"),
        ("departures_total", "i8"),
        ("batch_index", "i8"),
        ("trace_n", "i8"),
    ]
)
"""``slot`` is the next slot to run; the counts without ``_total`` cover the measured slots only."""

SlottedModel = namedtuple(
    "SlottedModel",
    [
        "speed",
        "total_speed",
        "cumulative_speed",
        "all_servers",
        "dispatcher_rate",
        "arrival_code",
        "arrival_trials",
        "service_code",
        "service_trials",
        "per_job",
        "policy_code",
        "local",
        "pod_d",
        "update_code",
        "p_hat",
        "push_d",
        "push_every_slot",
        "pull_trigger",
        "increment_on_dispatch",
        "shared_ties",
        "jba_rate_weighted",
        "jba_inclusive",
        "jba_fallback_jsq",
        "measure_preference",
        "warmup",
        "end_slot",
        "batch_ends",
    ],
)
SlottedModel.__doc__ = """Read-only arrays and parameters of one run (see hetlb.simulation.slotted.pack_model)."""

SlottedState = namedtuple(
    "SlottedState",
    [
        "counters",
        "queue_len",
        "arrivals_to",
        "dispatcher_arrivals",
        "estimate",
        "token_server",
        "token_count",
        "token_held",
        "queue_area",
        "preference_count",
        "preference_share",
        "batches",
        "batch_preference_count",
        "batch_preference_share",
        "sample",
        "trace_slot",
        "trace_dispatcher",
        "trace_jobs",
        "trace_server",
        "trace_seen",
        "trace_queue",
    ],
)
SlottedState.__doc__ = """Mutable state of one run. ``estimate[m, n]`` is Q~^m_n (LED policies; no rows
otherwise); ``token_server[m, :token_count[m]]`` are the idle tokens dispatcher m holds and
``token_held[n]`` marks a server whose token is out (jiq); ``queue_area[n]`` sums Q_n(t+1) over the
measured slots; ``preference_count[m, r]`` counts dispatcher m's decisions whose server had rank r
of its information and ``preference_share[m, r]`` sums mu_{sigma(r)} / mu_Sigma (no rows when the
preference is not measured); the ``trace_*`` arrays hold the first decisions."""


@njit(inline="always")
def draw_count(code, trials, mean, zero_probability, rng):
    """One per-slot count with mean ``mean``: Poisson, Bernoulli, or binomial(trials, mean / trials).
    A Poisson count of mean below POISSON_INVERSION_MAX_MEAN is drawn by inversion from one uniform
    number, with ``zero_probability`` = exp(-mean) (hetlb.kernels.sampling)."""
    if code == COUNT_POISSON:
        if mean < POISSON_INVERSION_MAX_MEAN:
            return poisson_by_inversion(mean, zero_probability, rng.random())
        return rng.poisson(mean)
    if code == COUNT_BERNOULLI:
        return 1 if rng.random() < mean else 0
    return rng.binomial(trials, mean / trials)


@njit
def least_ties(values, ties):
    """How many servers hold the least of ``values``; they are written to ``ties`` in index order.
    One scan without a branch: each server is written at the end of the least values so far, or at
    the start when its value is a new least. The tied server of rank floor(u k) is then the one
    hetlb.policies.local_estimates.least_value_server(values, u) picks, found without its second
    scan."""
    least = values[0]
    count = 0
    for n in range(len(values)):
        v = values[n]
        at = 0 if v < least else count
        ties[at] = n
        count = at + (v <= least)
        least = min(least, v)
    return count


@njit
def tied_server(ties, count, u):
    """The tied server of rank floor(u count) (``ties`` from :func:`least_ties`)."""
    return ties[min(int(u * count), count - 1)]


@njit
def take_token(m, token_server, token_count, token_held, rng):
    """jiq: dispatcher m uses one of its idle tokens, uniformly at random; -1 if it holds none."""
    count = token_count[m]
    if count == 0:
        return -1
    i = rules.uniform_index(rng, count)
    s = token_server[m, i]
    token_server[m, i] = token_server[m, count - 1]
    token_count[m] = count - 1
    token_held[s] = 0
    return s


@njit
def tied_candidates(code, view, chosen, ties, pod_d, jba_jsq_fallback, sample):
    """How many of the ``ties`` servers whose value equals the chosen one's the policy chose among by
    the order of its information: all of them for jsq and l-jsq (and l-jba's l-jsq fallback, taken
    when every value is equal), the sampled ones (``sample``) for pod and l-pod, and the chosen one
    alone for every other rule."""
    if code == registry.JSQ or code == L_JSQ or (code == L_JBA and jba_jsq_fallback and ties == len(view)):
        return ties
    if code == registry.POD or code == L_POD:
        count = 0
        for i in range(min(pod_d, len(view))):
            count += 1 if view[sample[i]] == view[chosen] else 0
        return count
    return 1


@njit
def rank_of_choice(view, chosen, code, pod_d, jba_jsq_fallback, sample, rng):
    """Rank (0 = least) of the chosen server in sigma, the order of ``view`` with equal values in a
    uniformly random order with which the policy's choice agrees: the chosen server precedes the
    other tied servers it was chosen among (j of the k tied servers, :func:`tied_candidates`), and
    the k - j others fall before it at random. One uniform draw: U, the number of those before it,
    has P(U >= x) = C(k - x, j) / C(k, j)."""
    value = view[chosen]
    less = 0
    ties = 0
    for n in range(len(view)):
        less += 1 if view[n] < value else 0
        ties += 1 if view[n] == value else 0
    candidates = tied_candidates(code, view, chosen, ties, pod_d, jba_jsq_fallback, sample)
    u = rng.random()
    before = 0
    tail = 1.0
    while before < ties - candidates:
        tail *= (ties - before - candidates) / (ties - before)
        if u >= tail:
            break
        before += 1
    return less + before


@njit
def add_rank_shares(view, speed, total_speed, share_row):
    """Add E[mu_{sigma(r)}] / mu_Sigma to ``share_row[r]`` for every rank r, sigma ordering ``view``
    with equal values in random order: each rank of a group of equal values gets the group's mean speed."""
    order = np.argsort(view, kind="mergesort")
    start = 0
    n_servers = len(view)
    while start < n_servers:
        end = start
        group_speed = 0.0
        while end < n_servers and view[order[end]] == view[order[start]]:
            group_speed += speed[order[end]]
            end += 1
        share = group_speed / (end - start) / total_speed
        for r in range(start, end):
            share_row[r] += share
        start = end


@njit
def estimate_error(queue_len, estimate):
    """sum_{m,n} |Q_n - Q~^m_n|."""
    total = 0
    for m in range(estimate.shape[0]):
        for n in range(len(queue_len)):
            total += abs(queue_len[n] - estimate[m, n])
    return total


@njit
def snapshot_batch(c, batches, preference_count, preference_share, batch_preference_count, batch_preference_share):
    """Record the cumulative counts at the end of a batch (columns of BATCH_FIELDS, and the preference
    pooled over the dispatchers)."""
    b = c.batch_index
    row = batches[b]
    row[0] = c.slot
    row[1] = c.arrivals
    row[2] = c.departures
    row[3] = c.decisions
    row[4] = c.queue_area
    row[5] = c.error_area
    row[6] = c.probes
    row[7] = c.replies
    row[8] = c.reports
    row[9] = c.tokens
    for r in range(batch_preference_count.shape[1]):
        batch_preference_count[b, r] = preference_count[:, r].sum()
        batch_preference_share[b, r] = preference_share[:, r].sum()
    c.batch_index += 1


@njit
def advance(model, state, environment_rng, dispatch_rng, update_rng, measurement_rng, max_slots):
    """Run up to ``max_slots`` slots; return RUNNING or FINISHED (at ``model.end_slot``).

    The arrays are taken out of the namedtuples once, here, so that the loop does no reference
    counting (as in hetlb.kernels.continuous)."""
    c = records(state.counters)[0]
    speed, total_speed, cumulative_speed, all_servers = (
        model.speed,
        model.total_speed,
        model.cumulative_speed,
        model.all_servers,
    )
    dispatcher_rate, per_job, local, code, pod_d = (
        model.dispatcher_rate,
        model.per_job,
        model.local,
        model.policy_code,
        model.pod_d,
    )
    jba_rate_weighted, jba_inclusive, jba_fallback_jsq = (
        model.jba_rate_weighted,
        model.jba_inclusive,
        model.jba_fallback_jsq,
    )
    update_code, p_hat, push_d, push_every_slot = model.update_code, model.p_hat, model.push_d, model.push_every_slot
    shared_ties = model.shared_ties
    queue_len, arrivals_to, dispatcher_arrivals, estimate = (
        state.queue_len,
        state.arrivals_to,
        state.dispatcher_arrivals,
        state.estimate,
    )
    token_server, token_count, token_held = state.token_server, state.token_count, state.token_held
    queue_area, sample = state.queue_area, state.sample
    preference_count, preference_share = state.preference_count, state.preference_share
    trace_slot, trace_dispatcher, trace_jobs = state.trace_slot, state.trace_dispatcher, state.trace_jobs
    trace_server, trace_seen, trace_queue = state.trace_server, state.trace_seen, state.trace_queue
    batch_ends = model.batch_ends
    n_servers, n_dispatchers, n_batches = len(speed), len(dispatcher_rate), len(batch_ends)
    tokens = code == registry.JIQ
    ties = np.empty(n_servers, np.int64)
    # P(count = 0) of a Poisson count with each mean, for the inversion of draw_count (math.exp, as in
    # plain Python, so that the kernel gives the same counts run either way)
    server_zero = np.empty(n_servers)
    for n in range(n_servers):
        server_zero[n] = math.exp(-speed[n])
    dispatcher_zero = np.empty(n_dispatchers)
    for m in range(n_dispatchers):
        dispatcher_zero[m] = math.exp(-dispatcher_rate[m])
    exact_messages = n_servers if code == registry.JSQ else (min(pod_d, n_servers) if code == registry.POD else 0)

    for _ in range(max_slots):
        if c.slot >= model.end_slot:
            return FINISHED
        measuring = 1 if c.slot >= model.warmup else 0

        # 1. arrivals and decisions on the information at the start of the slot
        for m in range(n_dispatchers):
            dispatcher_arrivals[m] = draw_count(
                model.arrival_code, model.arrival_trials, dispatcher_rate[m], dispatcher_zero[m], environment_rng
            )
        arrivals_to[:] = 0
        slot_tie = dispatch_rng.random() if shared_ties else 0.0
        # jsq: every decision of the slot sees the same queues, and so the same tied servers
        least_count = least_ties(queue_len, ties) if code == registry.JSQ else 0
        for m in range(n_dispatchers):
            arrived = dispatcher_arrivals[m]
            c.arrivals_total += arrived
            c.arrivals += measuring * arrived
            decisions, jobs = (arrived, 1) if per_job else (min(arrived, 1), arrived)
            view = estimate[m] if local else queue_len
            for _ in range(decisions):
                # the rules of docs/reference/policies.md on ``view``; jiq without tokens and l-jba with no
                # estimate below the mean (s = -1) fall back to uniform, and to weighted-random or l-jsq, below
                if code == registry.RANDOM:
                    s = rules.uniform_index(dispatch_rng, n_servers)
                elif code == registry.WEIGHTED_RANDOM:
                    s = rules.speed_weighted_server(all_servers, 0, n_servers, cumulative_speed, dispatch_rng)
                elif code == registry.POD or code == L_POD:
                    s = rules.power_of_d_server(all_servers, 0, n_servers, pod_d, view, sample, dispatch_rng)
                elif code == registry.JIQ:
                    s = take_token(m, token_server, token_count, token_held, dispatch_rng)
                    if s < 0:
                        s = rules.uniform_index(dispatch_rng, n_servers)
                elif code == L_JBA:
                    s = below_average_server(
                        all_servers, 0, n_servers, view, speed, jba_rate_weighted, jba_inclusive, dispatch_rng
                    )
                    if s < 0 and jba_fallback_jsq:
                        s = least_value_server(view, slot_tie if shared_ties else dispatch_rng.random())
                    elif s < 0:
                        s = rules.speed_weighted_server(all_servers, 0, n_servers, cumulative_speed, dispatch_rng)
                else:
                    if code != registry.JSQ:
                        least_count = least_ties(view, ties)
                    s = tied_server(ties, least_count, slot_tie if shared_ties else dispatch_rng.random())
                if c.trace_n < len(trace_slot):
                    i = c.trace_n
                    trace_slot[i] = c.slot
                    trace_dispatcher[i] = m
                    trace_jobs[i] = jobs
                    trace_server[i] = s
                    trace_seen[i] = view[s]
                    trace_queue[i] = queue_len[s]
                    c.trace_n += 1
                if measuring:
                    c.decisions += 1
                    c.probes += exact_messages
                    c.replies += exact_messages
                    if model.measure_preference:
                        rank = rank_of_choice(
                            view, s, code, pod_d, jba_fallback_jsq and not jba_inclusive, sample, measurement_rng
                        )
                        preference_count[m, rank] += 1
                        add_rank_shares(view, speed, total_speed, preference_share[m])
                arrivals_to[s] += jobs
                if model.increment_on_dispatch:
                    estimate[m, s] += jobs

        # 2. the queue recursion, with each server's pull reports or idle token (3.) as soon as it is done
        for n in range(n_servers):
            offered = draw_count(model.service_code, model.service_trials, speed[n], server_zero[n], environment_rng)
            before = queue_len[n] + arrivals_to[n]
            after = before - offered if before > offered else 0
            departed = before - after
            queue_len[n] = after
            c.departures_total += departed
            c.departures += measuring * departed
            queue_area[n] += measuring * after
            c.queue_area += measuring * after
            if update_code == UPDATE_PULL:
                if model.pull_trigger == PULL_DEPARTURE:
                    chances = departed
                elif model.pull_trigger == PULL_EVERY_SLOT:
                    chances = 1
                else:
                    chances = min(departed, 1)
                for _ in range(chances):
                    if update_rng.random() < p_hat:
                        estimate[rules.uniform_index(update_rng, n_dispatchers), n] = after
                        c.reports += measuring
            elif tokens and after == 0 and token_held[n] == 0:
                m = rules.uniform_index(update_rng, n_dispatchers)
                token_server[m, token_count[m]] = n
                token_count[m] += 1
                token_held[n] = 1
                c.tokens += measuring

        # 3. pushes
        if update_code == UPDATE_PUSH:
            for m in range(n_dispatchers):
                if (push_every_slot or dispatcher_arrivals[m] > 0) and update_rng.random() < p_hat:
                    taken = rules.sample_without_replacement(n_servers, push_d, sample, update_rng)
                    for i in range(taken):
                        estimate[m, sample[i]] = queue_len[sample[i]]
                    c.probes += measuring * taken
                    c.replies += measuring * taken

        # 4. statistics
        if measuring and local:
            c.error_area += estimate_error(queue_len, estimate)
        c.slot += 1
        if c.batch_index < n_batches and c.slot == batch_ends[c.batch_index]:
            snapshot_batch(
                c,
                state.batches,
                preference_count,
                preference_share,
                state.batch_preference_count,
                state.batch_preference_share,
            )
    return FINISHED if c.slot >= model.end_slot else RUNNING
