"""A slow, obvious simulator of the slotted model of paper 001, used as a test oracle for hetlb.

Plain Python lists, one slot at a time; it shares no code with ``hetlb``. It follows the same
draw protocol as ``hetlb.kernels.slotted`` (the order in which each of the four generators is
used), so that for the same generators the two must agree exactly:

* environment: per slot, A_m for m = 0..M-1, then S_n for n = 0..N-1. Poisson of mean < 10: by
  inversion of one random(), the least k with u < P(X <= k), P(X = 0) = exp(-mean) and
  P(X = k) = P(X = k - 1) * mean / k; of mean >= 10: ``poisson(mean)``; Bernoulli: ``random() < mean``; binomial: ``binomial(trials, mean / trials)``.
* dispatch: with ties "shared", first one random() for the slot; then one decision per dispatcher
  with arrivals (one per job with routing "job"), m in order. A uniform index of 0..k-1 is
  ``int(random() * k)``.
  - random: a uniform index. weighted-random: u = random() * mu_Sigma, the first server whose
    running sum of speeds exceeds u.
  - jsq, l-jsq: the minimum's tied servers in index order, one uniform index among them; with
    ties "shared", the index int(u * k) of the slot's u instead.
  - pod, l-pod: Floyd's sample of d distinct indices (for i = 0..d-1: j = N - d + i, t = a uniform
    index of 0..j, replaced by j if already taken); then the first least value in sample order,
    each later tie replacing it when random() * ties < 1.
  - l-jba: B = servers below the mean estimate; u = random() * (speed of B), the first server of B
    (index order) at which u minus the running speed of B is < 0. Empty B: the fallback.
  - jiq: with tokens, a uniform index into the dispatcher's token list, which is then filled by
    its last token; without, a uniform index.
* update: per server n in order, its pull chances (one coin random() < p_hat each, then a uniform
  dispatcher index) or, for jiq, a token to a uniform dispatcher if it is idle and has no token out;
  then per dispatcher m in order, its push: a coin, then Floyd's sample of push_d servers.
"""

from __future__ import annotations

import math


def uniform_index(rng, k):
    return min(int(rng.random() * k), k - 1)


def poisson_by_inversion(mean, u):
    k, probability = 0, math.exp(-mean)
    cumulative = probability
    while u >= cumulative and probability > 0.0:
        k += 1
        probability *= mean / k
        cumulative += probability
    return k


def draw_count(kind, trials, mean, rng):
    if kind == "poisson":
        return poisson_by_inversion(mean, rng.random()) if mean < 10.0 else int(rng.poisson(mean))
    if kind == "bernoulli":
        return 1 if rng.random() < mean else 0
    return int(rng.binomial(trials, mean / trials))


def floyd_sample(n, d, rng):
    if d >= n:
        return list(range(n))
    sample = []
    for i in range(d):
        j = n - d + i
        t = uniform_index(rng, j + 1)
        sample.append(j if t in sample else t)
    return sample


def choose(policy, params, view, speed, tokens, rng, slot_tie=None):
    """The server of one decision on ``view`` (a list of queue lengths or estimates); ``slot_tie``:
    the slot's shared tie-break uniform, or None to draw one."""
    n = len(view)
    if policy == "random":
        return uniform_index(rng, n)
    if policy == "weighted-random":
        u = rng.random() * sum(speed)
        running = 0.0
        for s in range(n):
            running += speed[s]
            if running > u:
                return s
        return n - 1
    if policy in ("pod", "l-pod"):
        sample = floyd_sample(n, params["d"], rng)
        chosen, ties = sample[0], 1
        for s in sample[1:]:
            if view[s] < view[chosen]:
                chosen, ties = s, 1
            elif view[s] == view[chosen]:
                ties += 1
                if rng.random() * ties < 1.0:
                    chosen = s
        return chosen
    if policy == "jiq":
        if tokens:
            i = uniform_index(rng, len(tokens))
            chosen = tokens[i]
            tokens[i] = tokens[-1]
            tokens.pop()
            return chosen
        return uniform_index(rng, n)
    if policy == "l-jba":
        weights = speed if params["average"] == "rate-weighted" else [1.0] * n
        total = sum(w * v for w, v in zip(weights, view))
        scale = sum(weights)
        below = [s for s in range(n) if (scale * view[s] <= total if params["inclusive"] else scale * view[s] < total)]
        if below:
            u = rng.random() * sum(speed[s] for s in below)
            for s in below:
                u -= speed[s]
                if u < 0.0:
                    return s
            return below[-1]
        if params["empty_set"] == "weighted-random":
            return choose("weighted-random", params, view, speed, tokens, rng)
    least = min(view)
    tied = [s for s in range(n) if view[s] == least]
    if slot_tie is None:
        return tied[uniform_index(rng, len(tied))]
    return tied[min(int(slot_tie * len(tied)), len(tied) - 1)]


def simulate(
    speed, dispatcher_rate, arrivals, service, routing, policy, params, slots, warmup, generators, ties="independent"
):
    """Run ``warmup + slots`` slots from empty queues; return the counts of the measured slots.

    arrivals, service: (kind, trials); ties: "independent" or "shared"; params: the policy's parameters (hetlb.make_policy(...).params);
    generators: (environment, dispatch, update, measurement) numpy Generators.
    """
    environment, dispatch, update, _ = generators
    n, m_count = len(speed), len(dispatcher_rate)
    local = policy.startswith("l-")
    queue = [0] * n
    estimate = [[0] * n for _ in range(m_count)]
    tokens = [[] for _ in range(m_count)]
    token_out = [False] * n
    out = {
        "arrivals": 0,
        "departures": 0,
        "decisions": 0,
        "queue_area": 0,
        "error_area": 0,
        "probes": 0,
        "replies": 0,
        "reports": 0,
        "tokens": 0,
        "queue_area_by_server": [0] * n,
        "trace": [],
    }
    for t in range(warmup + slots):
        measuring = t >= warmup
        arrived = [draw_count(*arrivals, dispatcher_rate[m], environment) for m in range(m_count)]
        offered = [draw_count(*service, speed[s], environment) for s in range(n)]
        incoming = [0] * n
        slot_tie = dispatch.random() if ties == "shared" else None
        for m in range(m_count):
            batches = [1] * arrived[m] if routing == "job" else ([arrived[m]] if arrived[m] else [])
            for jobs in batches:
                view = list(estimate[m]) if local else list(queue)
                held = len(tokens[m])
                s = choose(policy, params, view, speed, tokens[m], dispatch, slot_tie)
                if len(tokens[m]) < held:  # jiq used the token of server s
                    token_out[s] = False
                out["trace"].append((t, m, jobs, s))
                incoming[s] += jobs
                if params.get("increment_on_dispatch"):
                    estimate[m][s] += jobs
                if measuring:
                    out["decisions"] += 1
                    if policy == "jsq":
                        out["probes"] += n
                        out["replies"] += n
                    if policy == "pod":
                        out["probes"] += min(params["d"], n)
                        out["replies"] += min(params["d"], n)
            if measuring:
                out["arrivals"] += arrived[m]
        for s in range(n):
            before = queue[s] + incoming[s]
            queue[s] = max(before - offered[s], 0)
            departed = before - queue[s]
            if measuring:
                out["departures"] += departed
                out["queue_area_by_server"][s] += queue[s]
            if local and params["update"] == "pull":
                chances = {"departure": departed, "every-slot": 1, "departure-slot": min(departed, 1)}[
                    params["pull_trigger"]
                ]
                for _ in range(chances):
                    if update.random() < params["p_hat"]:
                        estimate[uniform_index(update, m_count)][s] = queue[s]
                        out["reports"] += measuring
            if policy == "jiq" and queue[s] == 0 and not token_out[s]:
                tokens[uniform_index(update, m_count)].append(s)
                token_out[s] = True
                out["tokens"] += measuring
        if local and params["update"] == "push":
            for m in range(m_count):
                if (params["push_trigger"] == "every-slot" or arrived[m] > 0) and update.random() < params["p_hat"]:
                    for s in floyd_sample(n, params["push_d"], update):
                        estimate[m][s] = queue[s]
                        out["probes"] += measuring
                        out["replies"] += measuring
        if measuring:
            out["queue_area"] += sum(queue)
            if local:
                out["error_area"] += sum(abs(queue[s] - estimate[m][s]) for m in range(m_count) for s in range(n))
    out["queue"] = queue
    return out
