"""The canonical benchmark system written the way a typical Ciw (3.x) user would write it.

Following Ciw's guide "How to Set Join-Shortest-Queue Routing": node 1 is a dummy node
(zero service time, infinitely many servers) that receives the Poisson arrivals and routes
each customer with ``ciw.routing.LoadBalancing`` to one of nodes 2..N+1. ``LoadBalancing``
counts the customers present at a node, including the one in service, and breaks ties
uniformly at random: that is JSQ as defined here. (``ciw.routing.JoinShortestQueue`` would
count waiting customers only.) Server node s has one server with exponential service of
rate ``speed[s]`` (size Exp(1) divided by the speed). The run stops when ``jobs`` customers
have left the system.
"""

import time

import ciw

from hetlb.progress import working


def build_network(speeds, arrival_rate):
    """The Ciw network: a routing node followed by one single-server node per server."""
    n = len(speeds)
    return ciw.create_network(
        arrival_distributions=[ciw.dists.Exponential(rate=arrival_rate)] + [None] * n,
        service_distributions=[ciw.dists.Deterministic(value=0.0)]
        + [ciw.dists.Exponential(rate=float(v)) for v in speeds],
        number_of_servers=[float("inf")] + [1] * n,
        routing=ciw.routing.NetworkRouting(
            routers=[ciw.routing.LoadBalancing(destinations=list(range(2, n + 2)), tie_break="random")]
            + [ciw.routing.Leave() for _ in range(n)]
        ),
    )


def run_ciw(speeds, arrival_rate, jobs, seed):
    """Simulate JSQ in Ciw until ``jobs`` customers have left.

    Returns ``(mean_response_time, events, seconds)`` where events = arrivals + departures
    (model events; the zero-time pass through the routing node is not counted) and seconds is
    the wall time of the simulation, building the network and reading the records included.
    """
    ciw.seed(seed)
    t0 = time.perf_counter()
    sim = ciw.Simulation(build_network(speeds, float(arrival_rate)))
    sim.simulate_until_max_customers(int(jobs), method="Finish")
    records = [r for r in sim.get_all_records() if r.node != 1]
    seconds = time.perf_counter() - t0
    completed = len(records)
    # Time in the routing node is zero, so the response time is the time at the server node.
    mean_response = sum(r.exit_date - r.arrival_date for r in records) / completed
    events = sim.nodes[0].number_of_individuals + completed
    return mean_response, events, seconds


if __name__ == "__main__":
    with working("benchmarks/ciw_model.py ", live=False):
        speeds = [1.0] * 5 + [0.5] * 5
        m, ev, sec = run_ciw(speeds, 0.9 * sum(speeds), 20_000, seed=1)
        print(f"N=10: mean response {m:.4f}, {ev} events in {sec:.2f} s, {ev / sec:,.0f} events/s")
