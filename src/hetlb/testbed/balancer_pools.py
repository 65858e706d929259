"""A fleet as the balancers of comparison see it (HAProxy, nginx, Envoy alone): a static weight per
backend in proportion to its speed, and, in front of engines that hold only some models, one pool
of backends per model, chosen by a request header. hetlb.testbed.peers writes HAProxy's and nginx's
configurations from it, hetlb.gateway.envoy.bootstrap Envoy's.
"""

from __future__ import annotations

from urllib.parse import urlsplit

MAX_WEIGHT = 256
"""HAProxy's largest server weight; the fastest backend gets it, the others in proportion (at least 1)."""
ROUTE_HEADER = "X-Model"
"""The request header that names a request's pool (its model) when the balancer has pools."""


def weight_of(speeds) -> list[int]:
    """Integer weights in proportion to the speeds, the fastest MAX_WEIGHT, each at least 1."""
    fastest = max(speeds)
    return [max(1, round(MAX_WEIGHT * speed / fastest)) for speed in speeds]


def host_port(url: str) -> str:
    return urlsplit(url).netloc


def weighted_pools(backends: list[tuple[str, float]], pools: dict[str, list[int]] | None):
    """Each pool's name and its servers as (index in ``backends``, HOST:PORT, weight), the weights in
    proportion to the speeds within the pool; one pool ``fleet`` of every backend without ``pools``."""
    for name, members in ({"fleet": list(range(len(backends)))} if pools is None else pools).items():
        weights = weight_of([backends[s][1] for s in members])
        yield name, [(s, host_port(backends[s][0]), weight) for s, weight in zip(members, weights)]
