"""HAProxy, nginx and Envoy in front of the same backends, for comparison: their configurations (written to a
folder of their own, never the system's), started in the foreground and stopped.

Each balancer knows a backend's speed only as its static weight (hetlb.testbed.balancer_pools) and its load only
as its own count of open connections to it, as in production:

- ``haproxy-leastconn`` (``balance leastconn``): a busy server has the key (n + 1) / w, ``sed``'s
  rule on the balancer's own counts, but every idle server has the key 0, whatever its weight, and
  among equal keys the one queued first (the longest idle) wins: ``jsq-lisf`` while idle servers
  remain, ``sed`` when none does;
- ``haproxy-roundrobin`` (``balance roundrobin``): smooth weighted round robin, blind to the load;
- ``nginx-least_conn`` (``least_conn``): argmin n / w, ties by weighted round robin;
- ``nginx-random-two`` (``random two least_conn``): two servers drawn in proportion to their
  weights, the one with fewer connections relative to its weight;
- ``envoy-least_request`` (``LEAST_REQUEST``, one worker): with unequal weights, a weighted
  round robin (Envoy's earliest-deadline schedule) whose weights are w / (n + 1) at each pick
  (active_request_bias 1); with equal weights the server of fewer requests among two drawn
  (choice_count 2); ``envoy-round_robin`` (``ROUND_ROBIN``): weighted round robin (the
  bootstraps of hetlb.gateway.envoy.bootstrap).

With one worker (the default here) each balancer's counts are exact, as hetlb serve's own in-flight
counts are with one dispatcher.

In front of inference engines that hold only some models, neither balancer reads the model in a
request's JSON body: each gets one pool of servers per model (``pools``: the backends that hold
it, weights by speed within the pool) and picks the pool by the request header ROUTE_HEADER, which
the load generator sets to the body's model. Each pool then has its own connection counts, as a
model's upstream of an nginx or HAProxy in front of such a fleet has; answers are relayed as they
arrive (nginx with ``proxy_buffering off``, HAProxy by default).

``vllm-router`` and ``sglang-router`` (PyPI) route OpenAI engines but not on the model in their
regular mode: one router per model is started (:func:`start_routers`) and each request is sent to
its model's.

- ``*-round_robin`` (``--policy round_robin``): blind to the load and the speeds;
- ``*-cache_aware`` (``--policy cache_aware``): a prompt's longest cached prefix picks
  the worker, unless the loads (its own counts of requests in flight) are imbalanced beyond its
  thresholds, then the least loaded; hetlb's prompts share no prefix.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from hetlb.errors import InputError
from hetlb.gateway.envoy.bootstrap import bootstrap, envoy_command, limits, listener, route_to, seconds, socket_address
from hetlb.gateway.envoy.protocol import endpoint
from hetlb.processes import ChildFailed, ChildProcess, program_path, wait_listening
from hetlb.testbed.balancer_pools import ROUTE_HEADER, weighted_pools
from hetlb.wire.addresses import Address

TIMEOUT_S = 60
"""Seconds either balancer waits for a backend (or a client) before it gives up."""


@dataclass(frozen=True)
class Peer:
    """One production balancer set-up: ``program`` (haproxy or nginx) with one balancing ``method``."""

    id: str
    program: str
    method: str
    rule: str


PEERS = {
    peer.id: peer
    for peer in (
        Peer("haproxy-leastconn", "haproxy", "leastconn", "longest idle first, else argmin (n+1)/w (sed)"),
        Peer("haproxy-roundrobin", "haproxy", "roundrobin", "weighted round robin"),
        Peer("nginx-least_conn", "nginx", "least_conn", "argmin n/w, ties by weighted round robin"),
        Peer("nginx-random-two", "nginx", "random two least_conn", "pod(2) drawn by weight, least n/w of the two"),
        Peer(
            "envoy-least_request",
            "envoy",
            "LEAST_REQUEST",
            "unequal weights: weighted round robin on w/(n+1); equal: least n of 2 drawn",
        ),
        Peer("envoy-round_robin", "envoy", "ROUND_ROBIN", "weighted round robin"),
        Peer("vllm-router-round_robin", "vllm-router", "round_robin", "round robin over the model's engines"),
        Peer("vllm-router-cache_aware", "vllm-router", "cache_aware", "prefix affinity, else its least own count"),
        Peer("sglang-router-round_robin", "sglang-router", "round_robin", "round robin over the model's engines"),
        Peer("sglang-router-cache_aware", "sglang-router", "cache_aware", "prefix affinity, else its least own count"),
    )
}
PROGRAMS = ("haproxy", "nginx", "envoy", "vllm-router", "sglang-router")
ROUTERS = {"vllm-router": (), "sglang-router": ("launch",)}
"""The inference routers among PROGRAMS (PyPI's vllm-router and sglang-router) and the subcommand
that runs a router alone: OpenAI engines only, one process per model (each knows one pool of
workers), since they do not route on the model (docs/background/inference-fleets.md)."""


LB_POLICIES = ("LEAST_REQUEST", "ROUND_ROBIN")
"""Envoy's own load balancers that ``hetlb envoy-config --lb`` and the testbed run."""


def start_routers(peer: Peer, ports: list[int], pools: dict[str, list[str]], folder: Path) -> list[ChildProcess]:
    """One router (``vllm-router``, ``sglang-router launch``) per pool (model: its engines' URLs) on 127.0.0.1:``ports[2m]``, its
    Prometheus listener on ``ports[2m + 1]``, with the peer's policy, started in the foreground (its
    log in ``folder``), each waited for until it listens; on a failure the ones started are stopped.
    ChildFailed if it is not installed or fails."""
    binary = program_path(peer.program)
    if binary is None:
        raise ChildFailed(f"{peer.program} is not installed")
    folder.mkdir(parents=True, exist_ok=True)
    children: list[ChildProcess] = []
    try:
        for m, (name, urls) in enumerate(pools.items()):
            port = ports[2 * m]
            command = [binary, *ROUTERS[peer.program], "--host", "127.0.0.1", "--port", str(port)]
            command += ["--policy", peer.method]
            command += ["--prometheus-host", "127.0.0.1", "--prometheus-port", str(ports[2 * m + 1])]
            command += ["--worker-urls", *urls, "--log-level", "error", "--log-dir", str(folder / name)]
            child = ChildProcess(f"{peer.id} ({name})", command, cwd=str(folder))
            children.append(child)
            wait_listening("127.0.0.1", port, child, timeout=60)
    except BaseException:
        for child in children:
            child.stop()
        raise
    return children


def haproxy_config(
    listen_port: int,
    backends: list[tuple[str, float]],
    method: str,
    workers: int = 1,
    pools: dict[str, list[int]] | None = None,
) -> str:
    """An HAProxy configuration: one frontend on 127.0.0.1:``listen_port``, one backend section whose
    servers are ``backends`` ((url, speed) pairs) with weights in proportion to speed, or with
    ``pools`` one section per pool chosen by ROUTE_HEADER (none for another value: 503); every answer
    carries ``X-Backend: http://IP:PORT`` of the server that produced it."""
    sections = []
    for name, members in weighted_pools(backends, pools):
        servers = "\n".join(f"    server s{s} {where} weight {weight}" for s, where, weight in members)
        sections.append(
            f"""backend pool_{name}
    balance {method}
    http-response set-header X-Backend "http://%si:%sp"
{servers}
"""
        )
    route = "default_backend pool_fleet" if pools is None else f"use_backend pool_%[req.hdr({ROUTE_HEADER})]"
    return f"""global
    nbthread {workers}
    maxconn 8000

defaults
    mode http
    timeout connect 5s
    timeout client {TIMEOUT_S}s
    timeout server {TIMEOUT_S}s
    option http-keep-alive

frontend balancer
    bind 127.0.0.1:{listen_port}
    {route}

{"".join(sections)}"""


def nginx_config(
    listen_port: int,
    backends: list[tuple[str, float]],
    method: str,
    folder: Path,
    workers: int = 1,
    pools: dict[str, list[int]] | None = None,
) -> str:
    """An nginx configuration (everything it writes goes to ``folder``): one server on
    127.0.0.1:``listen_port`` proxying to an upstream of ``backends`` with weights in proportion to
    speed, or with ``pools`` to one upstream per pool chosen by ROUTE_HEADER (another value: 502),
    answers relayed unbuffered; kept-alive connections, and ``X-Backend: http://IP:PORT`` on every
    answer."""
    upstreams = []
    for name, members in weighted_pools(backends, pools):
        servers = "\n".join(f"        server {where} weight={weight};" for _, where, weight in members)
        upstreams.append(
            f"""    upstream pool_{name} {{
        zone pool_{name} 1m;
        {method};
{servers}
        keepalive 1024;
    }}
"""
        )
    if pools is None:
        route, target = "", "http://pool_fleet"
    else:
        variable = "$http_" + ROUTE_HEADER.lower().replace("-", "_")
        route = f"    map {variable} $pool {{\n        default pool_none;\n"
        route += "".join(f"        {name} pool_{name};\n" for name in pools) + "    }\n"
        target = "http://$pool"
    buffering = "" if pools is None else "\n            proxy_buffering off;"
    return f"""daemon off;
worker_processes {workers};
pid {folder}/nginx.pid;
error_log {folder}/error.log warn;
events {{
    worker_connections 8000;
}}
http {{
    access_log off;
    client_body_temp_path {folder}/client_body;
    proxy_temp_path {folder}/proxy;
    fastcgi_temp_path {folder}/fastcgi;
    uwsgi_temp_path {folder}/uwsgi;
    scgi_temp_path {folder}/scgi;
{"".join(upstreams)}{route}    server {{
        listen 127.0.0.1:{listen_port};
        location / {{
            proxy_pass {target};{buffering}
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_next_upstream off;
            proxy_read_timeout {TIMEOUT_S}s;
            add_header X-Backend "http://$upstream_addr" always;
        }}
    }}
}}
"""


def start_peer(
    peer: Peer,
    listen_port: int,
    backends: list[tuple[str, float]],
    folder: Path,
    workers: int = 1,
    pools: dict[str, list[int]] | None = None,
) -> ChildProcess:
    """Write ``peer``'s configuration into ``folder`` (``pools``: one pool per model, see the module's
    docstring), start it in the foreground and wait until it listens on 127.0.0.1:``listen_port``.
    ChildFailed if its program is not installed or it fails."""
    binary = program_path(peer.program)
    if binary is None:
        raise ChildFailed(f"{peer.program} is not installed")
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / f"{peer.id}.conf"
    if peer.program == "haproxy":
        config.write_text(haproxy_config(listen_port, backends, peer.method, workers, pools))
        command = [binary, "-db", "-f", str(config)]
    elif peer.program == "envoy":
        config = folder / f"{peer.id}.json"
        envoy = balancer_bootstrap(Address("127.0.0.1", listen_port), backends, peer.method, pools=pools)
        config.write_text(json.dumps(envoy))
        command = envoy_command(str(config), binary)
    else:
        config.write_text(nginx_config(listen_port, backends, peer.method, folder, workers, pools))
        command = [binary, "-p", str(folder), "-e", str(folder / "error.log"), "-c", str(config)]
    child = ChildProcess(peer.id, command, cwd=str(folder))
    try:
        wait_listening("127.0.0.1", listen_port, child)
    except BaseException:
        child.stop()
        raise
    return child


def balancer_bootstrap(
    listen: Address,
    backends: list[tuple[str, float]],
    lb_policy: str,
    *,
    admin: Address | None = None,
    timeout: float = 30.0,
    connect_timeout: float = 1.0,
    pools: dict[str, list[int]] | None = None,
) -> dict:
    """Envoy alone on ``listen``, the same listener as with pickers but without ext_proc: ``lb_policy`` (LB_POLICIES) over ``backends`` ((url, speed)
    pairs, each http://IP:PORT), weights in proportion to the speeds; with ``pools`` (a model's
    name: the indices of the backends that hold it) one cluster per pool, chosen by the request
    header hetlb.testbed.balancer_pools.ROUTE_HEADER (another value: 404), as the testbed runs HAProxy and nginx."""

    if lb_policy not in LB_POLICIES:
        raise InputError("lb", f"must be one of {', '.join(LB_POLICIES)}, got {lb_policy!r}")
    if not backends:
        raise InputError("backend", "give at least one backend")
    for url, _ in backends:
        endpoint("backend", url)
    clusters, routes = [], []
    for name, members in weighted_pools(backends, pools):
        endpoints = []
        for _, where, weight in members:
            host, _, port = where.rpartition(":")
            address = socket_address(Address(host.strip("[]"), int(port)))
            endpoints.append({"endpoint": {"address": address}, "load_balancing_weight": weight})
        cluster = f"pool_{name}"
        clusters.append(
            {
                "name": cluster,
                "type": "STATIC",
                "lb_policy": lb_policy,
                "connect_timeout": seconds(connect_timeout),
                "circuit_breakers": limits(),
                "load_assignment": {"cluster_name": cluster, "endpoints": [{"lb_endpoints": endpoints}]},
            }
        )
        match: dict = {"prefix": "/"}
        if pools is not None:
            match["headers"] = [{"name": ROUTE_HEADER.lower(), "string_match": {"exact": name}}]
        routes.append({**route_to(cluster, timeout), "match": match})
    answer = [{"header": {"key": "x-backend", "value": "http://%UPSTREAM_REMOTE_ADDRESS%"}}]
    return bootstrap(admin, [listener(listen, routes, [], answer)], clusters)
