"""The routing rules of production balancers on a heterogeneous fleet, in the model.

A small discrete-event simulator (pure Python and numpy, apart from hetlb's kernels: it takes from
hetlb only the testbed's weights, its input errors and its t intervals) of N FCFS single-server
queues of speeds mu_s: Poisson arrivals of rate lambda = load * sum(mu), exponential job sizes of
mean 1 (a job of size x takes x / mu_s at server s). The balancer sees every server's number of
requests in system n_s exactly and at once (one worker whose own connection counts are the truth).
Balancers that take weights get the testbed's (hetlb.testbed.balancer_pools.weight_of): the integers
round(256 * mu_s / max(mu)) (256, 128, 64, 32 for speeds 1, 1/2, 1/4, 1/8). A time unit is the mean service time of a job at speed 1.

Rules (the balancers' own selection code, as read in their sources; see benchmarks/README.md):

* ``haproxy-leastconn`` (HAProxy 2.x ``balance leastconn``, src/lb_fwlc.c): a tree ordered by
  key = 0 if n == 0 else (n + 1) * SRV_EWGHT_MAX // eweight, with SRV_EWGHT_MAX = 256 * 16 and
  eweight = 16 * weight; the first node is taken. The server is taken out and re-inserted on
  every connection start and end (server_take_conn / server_drop_conn = fwlc_srv_reposition),
  and equal keys are kept in insertion order, so among equal keys the one that got its key
  earliest wins (among idle servers: the one idle the longest).
* ``haproxy-roundrobin``: HAProxy's weighted round robin (lb_fwrr.c) approximated by the smooth
  weighted round robin below; both are state-blind and send each server a share w_s / sum(w) of
  the requests, evenly interleaved.
* ``nginx-least_conn`` (ngx_http_upstream_least_conn_module.c): the peer minimising conns / weight
  (compared as n_a * w_b < n_b * w_a, the first in configuration order on the scan); when several
  tie, the smooth weighted round robin over the tied peers, in configuration order from the first
  of them: current_weight += effective_weight for each, the largest current_weight wins (the
  earliest on equality), and the winner's current_weight drops by the sum of the tied weights.
* ``nginx-random-two-least_conn`` (ngx_http_upstream_random_module.c, ``random two least_conn``):
  a peer drawn with probability weight / total weight, a second drawn the same way and redrawn
  while it is the first (the request's tries count the first draw and every redraw; past 20,
  nginx falls back to its smooth weighted round robin, so after 19 redraws of the first peer);
  the second peer is taken unless its conns / weight is strictly larger than the first's.
* ``nginx-round-robin`` is not a separate row: it is the smooth weighted round robin above.
* References: ``weighted-random`` (probability mu_s / sum(mu); each server is then M/M/1 at load
  rho), ``jsq`` (least n, uniform ties), ``sed`` (least (n + 1) / mu, uniform ties) and ``jfsq``
  (least n, ties to the fastest, then uniform).

Usage:
    python benchmarks/balancer_rules.py [--speeds 1,0.5,0.25,0.125 --copies 4] [--loads 0.5,0.8]
        [--jobs 200000] [--warmup 20000] [--replications 5] [--seed 1] [--mean-service-ms 20]
        [--rules all] [--out out/benchmarks/balancer-rules.json]

Prints per load the mean response time of every rule with its 95% interval over the replications
(Student t), in time units and in ms, and the gain of jfsq over each rule, 1 - jfsq / rule, with
its paired 95% interval (every rule sees the same arrivals and sizes in a replication).
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import platform
import sys
import time
from bisect import bisect_right
from pathlib import Path

import numpy as np

from hetlb.errors import InputError
from hetlb.progress import working
from hetlb.stats.intervals import t_interval
from hetlb.testbed.balancer_pools import weight_of

BE_WEIGHT_SCALE = 16  # HAProxy: effective weight = user weight * BE_WEIGHT_SCALE (wmult = 1)
SRV_UWGHT_MAX = 256  # HAProxy 2.x: the largest user weight (SRV_UWGHT_RANGE)
SRV_EWGHT_MAX = SRV_UWGHT_MAX * BE_WEIGHT_SCALE
NGINX_RANDOM_TRIES = 20  # ngx_http_upstream_get_random2_peer falls back to round robin after this

BALANCER_RULES = ("haproxy-leastconn", "haproxy-roundrobin", "nginx-least_conn", "nginx-random-two-least_conn")
REFERENCE_RULES = ("weighted-random", "jsq", "sed", "jfsq")
RULES = BALANCER_RULES + REFERENCE_RULES

_CHUNK = 1 << 15


class _Uniforms:
    """Uniform numbers in [0, 1) drawn in blocks from one generator, one at a time."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.block: list[float] = []
        self.i = 0

    def __call__(self) -> float:
        if self.i == len(self.block):
            self.block = self.rng.random(_CHUNK).tolist()
            self.i = 0
        u = self.block[self.i]
        self.i += 1
        return u


class SmoothWRR:
    """nginx's smooth weighted round robin (ngx_http_upstream_get_peer) over all peers."""

    def __init__(self, weights):
        self.w = list(weights)
        self.current = [0] * len(self.w)
        self.total = sum(self.w)

    def pick(self) -> int:
        cur, w = self.current, self.w
        best = 0
        cur[0] += w[0]
        for s in range(1, len(w)):
            cur[s] += w[s]
            if cur[s] > cur[best]:
                best = s
        cur[best] -= self.total
        return best


def make_rule(rule: str, speeds, weights, uniform):
    """(choose, on_start, on_end) for a rule: choose(n) returns the server; on_start(s) and
    on_end(s) are called after n[s] has gone up (a request sent) or down (a response)."""
    N = len(speeds)
    if rule == "haproxy-leastconn":
        eweight = [w * BE_WEIGHT_SCALE for w in weights]
        counter = [N]
        # position = key * 2^48 + insertion number: the tree's order (key, then insertion order)
        pos = [s for s in range(N)]  # all idle, inserted in configuration order
        shift = 1 << 48

        def reposition(s, n_s):
            key = (n_s + 1) * SRV_EWGHT_MAX // eweight[s] if n_s else 0
            pos[s] = key * shift + counter[0]
            counter[0] += 1

        def choose(n):
            return pos.index(min(pos))

        return choose, reposition, reposition  # server_take_conn and server_drop_conn

    if rule == "haproxy-roundrobin":
        wrr = SmoothWRR(weights)
        return (lambda n: wrr.pick()), None, None

    if rule == "nginx-least_conn":
        # conns / weight compared exactly: conns * L / weight with L a common multiple of the weights
        lcm = math.lcm(*weights)
        scale = [lcm // w for w in weights]
        key = [0] * N
        current = [0] * N
        w = list(weights)

        def update(s, n_s):
            key[s] = n_s * scale[s]

        def choose(n):
            m = min(key)
            first = key.index(m)
            if key.count(m) == 1:
                return first
            best, total = first, 0
            for s in range(first, N):
                if key[s] != m:
                    continue
                current[s] += w[s]
                total += w[s]
                if current[s] > current[best]:
                    best = s
            current[best] -= total
            return best

        return choose, update, update

    if rule == "nginx-random-two-least_conn":
        w = list(weights)
        total_weight = sum(w)
        ranges = [0]
        for x in w[:-1]:
            ranges.append(ranges[-1] + x)
        fallback = SmoothWRR(w)

        def peek():
            x = int(uniform() * total_weight)  # ngx_random() % total_weight
            return bisect_right(ranges, x) - 1

        def choose(n):
            if N < 2:
                return fallback.pick()
            first = peek()
            tries = 1  # nginx counts the first draw as a try too
            while True:
                second = peek()
                if second != first:
                    break
                tries += 1
                if tries > NGINX_RANDOM_TRIES:  # the first draw and 20 redraws of the same peer
                    return fallback.pick()
            if n[second] * w[first] > n[first] * w[second]:
                return first
            return second

        return choose, None, None

    if rule == "weighted-random":
        cumulative = np.cumsum(speeds) / sum(speeds)
        edges = cumulative[:-1].tolist()
        return (lambda n: bisect_right(edges, uniform())), None, None

    if rule in ("jsq", "jfsq", "sed"):
        if rule == "jsq":
            rank = [0] * N
        else:  # speed classes ranked from the fastest (0)
            distinct = sorted(set(speeds), reverse=True)
            rank = [distinct.index(v) for v in speeds]
        key = [rank[s] for s in range(N)]
        if rule == "sed":
            # (n + 1) / mu as floats (exact for power-of-two speeds); ties within a relative 1e-12
            inv = [1.0 / v for v in speeds]
            fkey = inv[:]

            def update_sed(s, n_s):
                fkey[s] = (n_s + 1) * inv[s]

            def choose_sed(n):
                m = min(fkey)
                limit = m * (1 + 1e-12)
                ties = [s for s in range(N) if fkey[s] <= limit]
                if len(ties) == 1:
                    return ties[0]
                return ties[int(uniform() * len(ties))]

            return choose_sed, update_sed, update_sed

        def update(s, n_s):
            key[s] = n_s * N + rank[s]

        def choose_least(n):
            m = min(key)
            if key.count(m) == 1:
                return key.index(m)
            ties = [s for s in range(N) if key[s] == m]
            return ties[int(uniform() * len(ties))]

        return choose_least, update, update

    raise InputError("rule", f"unknown rule {rule!r} (one of {', '.join(RULES)})")


def simulate(rule: str, speeds, load: float, jobs: int, warmup: int, seed, weights=None) -> float:
    """Mean response time of the jobs warmup+1 ... warmup+jobs (in arrival order) of one run from
    an empty system. seed: an int or a numpy SeedSequence; the arrivals and sizes come from their
    own streams, so that every rule sees the same jobs for the same seed."""
    speeds = [float(v) for v in speeds]
    N = len(speeds)
    if weights is None:
        weights = weight_of(speeds)
    seq = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    arrivals_seq, sizes_seq, choice_seq = seq.spawn(3)
    arrivals_rng = np.random.default_rng(arrivals_seq)
    sizes_rng = np.random.default_rng(sizes_seq)
    uniform = _Uniforms(np.random.default_rng(choice_seq))
    choose, on_start, on_end = make_rule(rule, speeds, weights, uniform)
    lam = load * sum(speeds)

    n = [0] * N
    last_departure = [0.0] * N  # FCFS: a job leaves at max(arrival, previous departure) + size / mu
    departures: list[tuple[float, int]] = []
    heappush, heappop = heapq.heappush, heapq.heappop
    total = 0.0
    t = 0.0
    done = 0
    count = warmup + jobs
    while done < count:
        block = min(_CHUNK, count - done)
        gaps = arrivals_rng.exponential(1.0 / lam, block).tolist()
        sizes = sizes_rng.exponential(1.0, block).tolist()
        for j in range(block):
            t += gaps[j]
            while departures and departures[0][0] <= t:
                s = heappop(departures)[1]
                n[s] -= 1
                if on_end is not None:
                    on_end(s, n[s])
            s = choose(n)
            n[s] += 1
            if on_start is not None:
                on_start(s, n[s])
            start = last_departure[s] if last_departure[s] > t else t
            leave = start + sizes[j] / speeds[s]
            last_departure[s] = leave
            heappush(departures, (leave, s))
            if done + j >= warmup:
                total += leave - t
        done += block
    return total / jobs


def weighted_random_mean(speeds, load: float) -> float:
    """Exact mean response time of weighted-random: server s is M/M/1 with arrival rate
    lambda_s = lambda * mu_s / sum(mu); the mean is sum_s (lambda_s / lambda) / (mu_s - lambda_s)."""
    total = sum(speeds)
    lam = load * total
    return sum((v / total) / (v - lam * v / total) for v in speeds)


def _parse_floats(field: str, text: str) -> list[float]:
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(field, f"must be a comma-separated list of numbers, got {text!r}") from None
    if not values:
        raise InputError(field, "must list at least one number")
    return values


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--speeds", default="1,0.5,0.25,0.125", help="speed classes (comma-separated)")
    p.add_argument("--copies", type=int, default=4, help="servers per speed class (default 4)")
    p.add_argument("--loads", default="0.5,0.8", help="loads rho = lambda / sum(mu), in (0, 1)")
    p.add_argument("--jobs", type=int, default=200_000, help="measured jobs per replication")
    p.add_argument("--warmup", type=int, default=20_000, help="jobs discarded first in each replication")
    p.add_argument("--replications", type=int, default=5)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--mean-service-ms", type=float, default=20.0, help="ms per time unit")
    p.add_argument("--rules", default="all", help=f"comma-separated subset of: {', '.join(RULES)}")
    p.add_argument(  # benchmarks/results/ holds the figures the docs quote: give --out there to renew them
        "--out", default=str(Path(__file__).resolve().parents[1] / "out" / "benchmarks" / "balancer-rules.json")
    )
    args = p.parse_args(argv)
    speeds = _parse_floats("--speeds", args.speeds)
    if any(not (v > 0 and math.isfinite(v)) for v in speeds):
        raise InputError("--speeds", "every speed must be a positive finite number")
    if args.copies < 1:
        raise InputError("--copies", "must be at least 1")
    loads = _parse_floats("--loads", args.loads)
    if any(not 0 < x < 1 for x in loads):
        raise InputError("--loads", "every load must be in (0, 1)")
    if args.jobs < 1:
        raise InputError("--jobs", "must be at least 1")
    if args.warmup < 0:
        raise InputError("--warmup", "must be at least 0")
    if args.replications < 2:
        raise InputError("--replications", "must be at least 2 (for an interval)")
    if not args.mean_service_ms > 0:
        raise InputError("--mean-service-ms", "must be positive")
    rules = list(RULES) if args.rules == "all" else [r.strip() for r in args.rules.split(",") if r.strip()]
    unknown = [r for r in rules if r not in RULES]
    if unknown or not rules:
        raise InputError("--rules", f"unknown rule {unknown[0] if unknown else ''!r} (one of {', '.join(RULES)})")
    if "jfsq" not in rules:
        rules.append("jfsq")
    args.speed_list = [v for v in speeds for _ in range(args.copies)]
    args.load_list = loads
    args.rule_list = rules
    return args


def run(args) -> dict:
    speeds = args.speed_list
    weights = weight_of(speeds)
    ms = args.mean_service_ms
    result = {
        "model": "N FCFS single-server queues, Poisson arrivals, exponential sizes of mean 1, exact counts",
        "speeds": speeds,
        "weights": weights,
        "jobs": args.jobs,
        "warmup": args.warmup,
        "replications": args.replications,
        "seed": args.seed,
        "mean_service_ms": ms,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "loads": [],
    }
    for load in args.load_list:
        reps = np.random.SeedSequence([args.seed, int(round(load * 1e6))]).spawn(args.replications)
        means: dict[str, list[float]] = {}
        seconds: dict[str, float] = {}
        for rule in args.rule_list:
            started = time.process_time()
            means[rule] = [simulate(rule, speeds, load, args.jobs, args.warmup, r, weights) for r in reps]
            seconds[rule] = time.process_time() - started
        rows = []
        jf = np.array(means["jfsq"])
        for rule in args.rule_list:
            values = np.array(means[rule])
            mean, half = t_interval(values)
            gain, gain_half = t_interval(100.0 * (1.0 - jf / values))
            row = {
                "rule": rule,
                "mean": mean,
                "ci95": half,
                "mean_ms": mean * ms,
                "ci95_ms": half * ms,
                "replication_means": values.tolist(),
                "jfsq_gain_percent": gain,
                "jfsq_gain_ci95": gain_half,
                "cpu_seconds": seconds[rule],
            }
            if rule == "weighted-random":
                row["exact"] = weighted_random_mean(speeds, load)
            rows.append(row)
        result["loads"].append({"load": load, "rules": rows})
    return result


def print_table(result: dict) -> None:
    n = len(result["speeds"])
    print(
        f"N = {n} servers, speeds {sorted(set(result['speeds']), reverse=True)}, weights "
        f"{sorted(set(result['weights']), reverse=True)}; {result['replications']} x {result['jobs']:,} jobs "
        f"after {result['warmup']:,}; 1 time unit = {result['mean_service_ms']:g} ms"
    )
    for block in result["loads"]:
        print(f"\nload {block['load']:g}")
        print(f"{'rule':<30} {'mean (units)':>20} {'mean (ms)':>18} {'1 - jfsq/rule':>18}")
        for row in block["rules"]:
            extra = f"   exact {row['exact']:.4f}" if "exact" in row else ""
            print(
                f"{row['rule']:<30} {row['mean']:>10.4f} ± {row['ci95']:<7.4f} "
                f"{row['mean_ms']:>8.2f} ± {row['ci95_ms']:<6.2f} "
                f"{row['jfsq_gain_percent']:>8.1f}% ± {row['jfsq_gain_ci95']:<5.1f}{extra}"
            )


def main(argv=None) -> int:
    try:
        args = parse_args(argv)
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    result = run(args)
    print_table(result)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwritten {out}")
    return 0


if __name__ == "__main__":
    with working("benchmarks/balancer_rules.py ", live=False):
        status = main()
    sys.exit(status)
