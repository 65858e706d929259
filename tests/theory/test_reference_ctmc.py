"""Self-checks of the reference CTMC solver (tests/support/reference_ctmc.py) against closed forms.

Erlang B and C, M/M/1 and M/M/1/K for limited processor sharing at any concurrency, M^X/M/1 with
geometric batches, a batch chain truncated at the buffer built by hand, MMPP/M/1 by its
matrix-geometric solution, the product form of weighted-random routing, and the multi-slot
routing laws worked out by hand. Nothing here imports hetlb.
"""

import math

import numpy as np
import pytest
from scipy import linalg

from support.closed_forms import birth_death_mean_number, erlang_b, erlang_c_response_time
from support.reference_ctmc import POLICIES, routing_probabilities, solve_reference_ctmc
from support.reference_model import Arrivals, make_servers

EXACT = 1e-9  # relative tolerance of a solve against a closed form
NEGLIGIBLE = 1e-12  # truncation mass and truncation losses that leave the means exact to EXACT


def assert_truncation_negligible(result):
    assert result["truncation_mass"] < NEGLIGIBLE
    assert result["truncation_loss_probability"] < NEGLIGIBLE


# --------------------------------------------------------------------------------------------
# One server
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("servers, arrival_rate, speed", [(2, 1.5, 1.0), (3, 2.1, 1.0), (4, 5.0, 2.0)])
def test_erlang_c(servers, arrival_rate, speed):
    result = solve_reference_ctmc(
        [speed], [arrival_rate], concurrency=servers, rate_curve="independent", truncation=250
    )
    assert_truncation_negligible(result)
    assert result["mean_response_time"] == pytest.approx(
        erlang_c_response_time(servers, arrival_rate, speed), rel=EXACT
    )
    assert result["mean_waiting_time"] == pytest.approx(result["mean_response_time"] - 1.0 / speed, rel=EXACT)


@pytest.mark.parametrize("servers, offered", [(1, 0.5), (3, 2.0), (5, 6.0)])
def test_erlang_b(servers, offered):
    result = solve_reference_ctmc([1.0], [offered], buffer=servers, concurrency=servers, rate_curve="independent")
    assert result["blocking_probability"] == pytest.approx(erlang_b(servers, offered), rel=EXACT)
    assert result["throughput"] == pytest.approx(offered * (1.0 - result["blocking_probability"]), rel=EXACT)


@pytest.mark.parametrize("concurrency", [1, 2, 5, math.inf])
def test_shared_is_mm1_at_any_concurrency(concurrency):
    arrival_rate, speed = 1.2, 2.0
    result = solve_reference_ctmc([speed], [arrival_rate], concurrency=concurrency, rate_curve="shared", truncation=200)
    assert_truncation_negligible(result)
    assert result["mean_response_time"] == pytest.approx(1.0 / (speed - arrival_rate), rel=EXACT)
    rho = arrival_rate / speed
    assert result["mean_number_in_system"] == pytest.approx(rho / (1.0 - rho), rel=EXACT)
    assert result["utilisation"][0] == pytest.approx(rho, rel=EXACT)


@pytest.mark.parametrize("buffer, concurrency", [(1, 1), (3, 1), (3, 2), (6, math.inf)])
def test_mm1k_blocking(buffer, concurrency):
    arrival_rate, speed = 0.9, 1.0
    rho = arrival_rate / speed
    p = rho ** np.arange(buffer + 1)
    p /= p.sum()
    result = solve_reference_ctmc([speed], [arrival_rate], buffer=buffer, concurrency=concurrency, rate_curve="shared")
    assert result["blocking_probability"] == pytest.approx(p[buffer], rel=EXACT)
    assert result["mean_number_in_system"] == pytest.approx(float(np.arange(buffer + 1) @ p), rel=EXACT)
    assert result["truncation_mass"] == 0.0


@pytest.mark.parametrize("curve", ["saturating:alpha=0.4", "table:1,1.7,2.2,2.4"])
def test_one_server_is_its_birth_death_chain(curve):
    servers = make_servers([1.5], 5, curve)
    level = 120
    result = solve_reference_ctmc([1.5], [2.0], concurrency=5, rate_curve=curve, truncation=level)
    assert_truncation_negligible(result)
    expected = birth_death_mean_number(2.0, [servers[0].work_rate(n) for n in range(1, level + 1)])
    assert result["mean_number_in_system"] == pytest.approx(expected, rel=EXACT)


# --------------------------------------------------------------------------------------------
# Bursty arrivals on one server
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mean_batch, arrival_rate", [(1.0, 0.5), (2.0, 0.5), (4.0, 0.3)])
def test_mx_m1_geometric_batches(mean_batch, arrival_rate):
    """M^X/M/1: L = rho / (1 - rho) (E[X^2] + E[X]) / (2 E[X]), which is B rho / (1 - rho) for geometric X."""
    rho = arrival_rate
    result = solve_reference_ctmc([1.0], [arrival_rate], arrivals=f"batch:mean={mean_batch}", truncation=400)
    assert_truncation_negligible(result)
    second_moment = mean_batch * (2.0 * mean_batch - 1.0)  # E[X^2] = (2 - p) / p^2
    expected = rho / (1.0 - rho) * (second_moment + mean_batch) / (2.0 * mean_batch)
    assert result["mean_number_in_system"] == pytest.approx(expected, rel=EXACT)
    assert expected == pytest.approx(mean_batch * rho / (1.0 - rho))
    assert result["throughput"] == pytest.approx(arrival_rate, rel=EXACT)


def batch_chain_with_buffer(arrival_rate, mean_batch, buffer):
    """M^X/M/1/K by hand: from n a batch of size j leads to min(n + j, K); returns (L, blocking)."""
    p = 1.0 / mean_batch
    batch_rate = arrival_rate / mean_batch
    generator = np.zeros((buffer + 1, buffer + 1))
    admitted = np.zeros(buffer + 1)
    for n in range(buffer + 1):
        for m in range(n + 1, buffer + 1):
            jump = p * (1 - p) ** (m - n - 1) if m < buffer else (1 - p) ** (buffer - n - 1)
            generator[n, m] += batch_rate * jump
            admitted[n] += jump * (m - n)
        if n > 0:
            generator[n, n - 1] += 1.0
        generator[n, n] = -generator[n].sum()
    pi = linalg.null_space(generator.T)[:, 0]
    pi /= pi.sum()
    return float(np.arange(buffer + 1) @ pi), 1.0 - batch_rate * float(pi @ admitted) / arrival_rate


@pytest.mark.parametrize("buffer", [1, 2, 5])
def test_batches_beyond_the_buffer_are_lost(buffer):
    result = solve_reference_ctmc([1.0], [0.8], buffer=buffer, arrivals="batch:mean=3")
    mean_number, blocking = batch_chain_with_buffer(0.8, 3.0, buffer)
    assert result["mean_number_in_system"] == pytest.approx(mean_number, rel=EXACT)
    assert result["blocking_probability"] == pytest.approx(blocking, rel=EXACT)
    assert result["throughput"] == pytest.approx(0.8 * (1.0 - blocking), rel=EXACT)


def mmpp_m1_mean_number(arrival_rate, speed, process):
    """MMPP/M/1 by the matrix-geometric method: pi_n = pi_0 R^n, R the least solution of
    A0 + R A1 + R^2 A2 = 0 (A0 = the phase arrival rates, A1 = D - A0 - mu I, A2 = mu I), pi_0
    (D - A0 + mu R) = 0 and pi_0 (I - R)^{-1} 1 = 1; L = pi_0 R (I - R)^{-2} 1."""
    rate_on, rate_off = process.phase_rates(arrival_rate)
    phases = np.array([[-1.0 / process.on, 1.0 / process.on], [1.0 / process.off, -1.0 / process.off]])
    up, down = np.diag([rate_on, rate_off]), speed * np.eye(2)
    local = phases - up - down
    rate_matrix = np.zeros((2, 2))
    for _ in range(100_000):
        updated = -(up + rate_matrix @ rate_matrix @ down) @ np.linalg.inv(local)
        if np.abs(updated - rate_matrix).max() < 1e-15:
            break
        rate_matrix = updated
    boundary = np.linalg.svd((phases - up + rate_matrix @ down).T)[2][-1]  # its null vector
    inverse = np.linalg.inv(np.eye(2) - rate_matrix)
    boundary /= boundary @ inverse @ np.ones(2)
    return float(boundary @ rate_matrix @ inverse @ inverse @ np.ones(2))


@pytest.mark.parametrize("spec", ["mmpp:ratio=4,on=5,off=10", "mmpp:ratio=10,on=2,off=20", "mmpp:ratio=1,on=1,off=1"])
def test_mmpp_m1_matrix_geometric(spec):
    arrival_rate, speed = 0.6, 1.0
    result = solve_reference_ctmc([speed], [arrival_rate], arrivals=spec, truncation=600)
    assert_truncation_negligible(result)
    expected = mmpp_m1_mean_number(arrival_rate, speed, Arrivals.parse(spec))
    assert result["mean_number_in_system"] == pytest.approx(expected, rel=1e-8)
    assert result["throughput"] == pytest.approx(arrival_rate, rel=EXACT)
    if spec.endswith("ratio=1,on=1,off=1"):  # no modulation: M/M/1
        assert expected == pytest.approx(arrival_rate / (speed - arrival_rate))
    # the phase is in the state: its marginal is the stationary law of the phase chain
    process = Arrivals.parse(spec)
    on = result["distribution"][result["states"][:, -1] == 0].sum()
    assert on == pytest.approx(process.on_probability(), rel=EXACT)


def test_mmpp_phase_rates_average_to_lambda():
    process = Arrivals.parse("mmpp:ratio=4,on=5,off=10")
    rate_on, rate_off = process.phase_rates(0.6)
    assert rate_on == pytest.approx(4 * rate_off)
    assert process.on_probability() * rate_on + (1 - process.on_probability()) * rate_off == pytest.approx(0.6)


# --------------------------------------------------------------------------------------------
# Many servers
# --------------------------------------------------------------------------------------------


def test_weighted_random_is_a_product_of_birth_death_chains():
    """Weighted-random routing splits the Poisson stream: server s is its own chain at rate lambda C_s / sum C,
    C_s = mu_s phi_s(c_s) its capacity."""
    speed, concurrency, curves = [2.0, 1.0, 0.5], [3, 1, 2], ["saturating:alpha=0.5", "shared", "table:1,1.6"]
    arrival_rate, level = 2.0, 18  # truncated servers lose their own arrivals: the product form stays exact
    result = solve_reference_ctmc(
        speed, [arrival_rate], policy="weighted-random", concurrency=concurrency, rate_curve=curves, truncation=level
    )
    servers = make_servers(speed, concurrency, curves)
    for s, server in enumerate(servers):
        share = arrival_rate * server.full_capacity() / sum(other.full_capacity() for other in servers)
        expected = birth_death_mean_number(share, [server.work_rate(n) for n in range(1, level + 1)])
        assert result["mean_number_per_server"][s] == pytest.approx(expected, rel=1e-8)


def test_random_over_identical_servers_is_erlang_c_each():
    result = solve_reference_ctmc([1.0, 1.0], [2.4], policy="random", concurrency=2, truncation=70)
    assert result["truncation_mass"] < 1e-10
    assert result["mean_response_time"] == pytest.approx(erlang_c_response_time(2, 1.2, 1.0), rel=1e-8)


HETERO = dict(
    speed=[2.0, 1.0, 0.5],
    arrival_rate=[1.4, 0.8],
    compat=[[0, 1, 2], [1, 2]],
    buffer=[4, 3, 5],
    concurrency=[2, 3, 1],
    rate_curve=["saturating:alpha=0.3", "table:1,1.5,1.8", "shared"],
)


@pytest.mark.parametrize("arrivals", ["poisson", "batch:mean=2.5", "mmpp:ratio=5,on=3,off=6"])
@pytest.mark.parametrize("policy", POLICIES)
def test_conservation(policy, arrivals):
    result = solve_reference_ctmc(**HETERO, policy=policy, arrivals=arrivals)
    total = sum(HETERO["arrival_rate"])
    assert result["distribution"].sum() == pytest.approx(1.0)
    assert result["throughput"] == pytest.approx(total * (1.0 - result["blocking_probability"]), rel=1e-9)
    assert 0.0 < result["blocking_probability"] < 1.0
    assert result["truncation_mass"] == 0.0 and result["truncation_loss_probability"] == 0.0
    assert result["mean_number_in_system"] == pytest.approx(result["mean_number_per_server"].sum())
    assert result["mean_response_time"] > result["mean_waiting_time"] >= 0.0


@pytest.mark.parametrize("arrivals", ["poisson", "batch:mean=2", "mmpp:ratio=3,on=2,off=4"])
def test_policies_that_coincide(arrivals):
    """On identical servers jlu, lew, sed, jfsq and jssq send each job where jsq does."""
    identical = dict(
        speed=[1.0, 1.0, 1.0], arrival_rate=[2.0], buffer=4, concurrency=2, rate_curve="saturating:alpha=0.5"
    )
    jsq = solve_reference_ctmc(**identical, policy="jsq", arrivals=arrivals)
    for policy in ("jlu", "lew", "sed", "jfsq", "jssq"):
        other = solve_reference_ctmc(**identical, policy=policy, arrivals=arrivals)
        assert other["mean_number_in_system"] == pytest.approx(jsq["mean_number_in_system"], rel=1e-12), policy
    # equal capacities mu phi(c) but unequal c: lew is still jsq, jlu is not
    unequal = dict(speed=[1.0, 2.0], arrival_rate=[1.5], buffer=4, concurrency=[2, 1], rate_curve="independent")
    jsq = solve_reference_ctmc(**unequal, policy="jsq", arrivals=arrivals)
    lew = solve_reference_ctmc(**unequal, policy="lew", arrivals=arrivals)
    jlu = solve_reference_ctmc(**unequal, policy="jlu", arrivals=arrivals)
    assert lew["mean_number_in_system"] == pytest.approx(jsq["mean_number_in_system"], rel=1e-12)
    assert abs(jlu["mean_number_in_system"] - jsq["mean_number_in_system"]) > 1e-3


def test_batch_of_one_is_poisson():
    poisson = solve_reference_ctmc(**HETERO, policy="jfsq")
    batch = solve_reference_ctmc(**HETERO, policy="jfsq", arrivals="batch:mean=1")
    for key in ("mean_number_in_system", "blocking_probability", "throughput"):
        assert batch[key] == pytest.approx(poisson[key], rel=1e-12)


def test_infinite_buffer_needs_a_truncation():
    with pytest.raises(ValueError, match="truncation"):
        solve_reference_ctmc([1.0], [0.5])


def test_truncation_is_reported():
    close = solve_reference_ctmc([1.0], [0.9], truncation=10)
    far = solve_reference_ctmc([1.0], [0.9], truncation=300)
    assert close["truncation_mass"] > 0.01 and close["truncation_loss_probability"] > 0.01
    assert far["truncation_mass"] < NEGLIGIBLE
    assert far["mean_number_in_system"] == pytest.approx(9.0, rel=EXACT)


# --------------------------------------------------------------------------------------------
# Routing laws on multi-slot servers, by hand
# --------------------------------------------------------------------------------------------

# speeds, concurrencies and curves of four servers
SERVERS = make_servers(
    [1.0, 1.0, 2.0, 0.5], [4, 1, 2, math.inf], ["shared", "independent", "saturating:alpha=0.5", "shared"]
)


def law(policy, n, candidates=(0, 1, 2, 3), d=2):
    return {s: pytest.approx(p) for s, p in routing_probabilities(policy, list(candidates), n, SERVERS, d).items()}


def test_rates_and_keys_by_hand():
    n = [2, 0, 1, 3]
    # new job's rate mu phi(b')/b': 1 * 1/3, 1, 2 * (2 / 1.5) / 2, 0.5 / 4
    assert [SERVERS[s].new_job_rate(n[s]) for s in range(4)] == pytest.approx([1 / 3, 1.0, 4 / 3, 0.125])
    # sed: (n + 1) / (mu phi(min(n + 1, c))): 3, 1, 2 / (8/3), 4 / 0.5
    assert [SERVERS[s].expected_delay(n[s]) for s in range(4)] == pytest.approx([3.0, 1.0, 0.75, 8.0])
    # lew: n / (mu phi(c)), phi of unlimited shared = its limit 1
    assert [SERVERS[s].expected_work_key(n[s]) for s in range(4)] == pytest.approx([2.0, 0.0, 0.375, 6.0])
    assert [SERVERS[s].has_free_slot(n[s]) for s in range(4)] == [True, True, True, True]


def test_routing_laws_by_hand():
    n = [2, 1, 1, 3]
    assert law("jsq", n) == {1: 0.5, 2: 0.5}
    assert law("jfsq", n) == {2: 1.0}  # rates 1 (c = 1, joins a queue: 1 * phi(1)) vs 4/3
    assert law("jssq", n) == {1: 1.0}
    assert law("jiq", n) == {0: 1 / 3, 2: 1 / 3, 3: 1 / 3}  # server 1 (c = 1) has no free slot
    assert law("jfiq", n) == {2: 1.0}  # free-slot rates: 1/3, 4/3, 0.125
    assert law("jsq-fiq", n) == {2: 1.0}
    assert law("sed", n) == {2: 1.0}  # delays 3, 2, 0.75, 8
    assert law("lew", n) == {2: 1.0}  # 2, 1, 0.375, 6
    assert law("jlu", n, candidates=(0, 1, 2)) == {0: 0.5, 2: 0.5}  # 2/4, 1/1, 1/2
    assert law("random", n) == {s: 0.25 for s in range(4)}
    # by capacity mu phi(c): 1, 1, 2 * 2/1.5 = 8/3 and 0.5, of sum 31/6
    assert law("weighted-random", n) == {0: 6 / 31, 1: 6 / 31, 2: 16 / 31, 3: 3 / 31}
    # pod, d = 2 over three servers: each pair equally likely, the shortest of the pair
    assert law("pod", [2, 1, 0], candidates=(0, 1, 2)) == {1: 1 / 3, 2: 2 / 3}


def test_jlu_ties_and_fallbacks():
    n = [2, 1, 1, 3]
    assert law("jlu", n, candidates=(0, 1)) == {0: 1.0}
    with pytest.raises(ValueError, match="concurrency"):
        routing_probabilities("jlu", [0, 3], n, SERVERS)
    full = [4, 1, 2, 3]  # no free slot on servers 0, 1, 2
    assert law("jiq", full, candidates=(0, 1, 2)) == {s: 1 / 3 for s in range(3)}
    assert law("jfiq", full, candidates=(0, 1, 2)) == {s: 1 / 3 for s in range(3)}
    assert law("jsq-fiq", full, candidates=(0, 1, 2)) == {1: 1.0}


def test_single_slot_servers_give_the_papers_rules():
    one_slot = make_servers([1.0, 1.0, 2.0, 3.0, 3.0])
    n = [1, 0, 0, 2, 0]
    everyone = list(range(5))

    def support(policy):
        return set(routing_probabilities(policy, everyone, n, one_slot))

    assert support("jsq") == {1, 2, 4}
    assert support("jfsq") == {4}
    assert support("jssq") == {1}
    assert support("jiq") == {1, 2, 4}
    assert support("jfiq") == {4}
    assert support("sed") == {4}  # (q + 1) / speed = 2, 1, 0.5, 1, 1/3
    assert support("lew") == {1, 2, 4}  # q / speed
    assert support("jlu") == {1, 2, 4}  # q / 1
