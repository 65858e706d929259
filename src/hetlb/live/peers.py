"""HAProxy and nginx in front of the same backends, for comparison: their configurations (written to a
folder of their own, never the system's), started in the foreground and stopped.

Each balancer knows a backend's speed only as its static weight (``weight_of``) and its load only
as its own count of open connections to it, as in production:

- ``haproxy-leastconn`` (``balance leastconn``): a busy server has the key (n + 1) / w, ``sed``'s
  rule on the balancer's own counts, but every idle server has the key 0, whatever its weight, and
  among equal keys the one queued first (the longest idle) wins: ``jsq-lisf`` while idle servers
  remain, ``sed`` when none does;
- ``haproxy-roundrobin`` (``balance roundrobin``): smooth weighted round robin, blind to the load;
- ``nginx-least_conn`` (``least_conn``): argmin n / w, ties by weighted round robin;
- ``nginx-random-two`` (``random two least_conn``): two servers drawn in proportion to their
  weights, the one with fewer connections relative to its weight.

With one worker (the default here) each balancer's counts are exact, as hetlb serve's own in-flight
counts are with one dispatcher.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from hetlb.processes import ChildFailed, ChildProcess, wait_listening

MAX_WEIGHT = 256
"""HAProxy's largest server weight; the fastest backend gets it, the others in proportion (at least 1)."""
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
    )
}
PROGRAMS = ("haproxy", "nginx")


def program_path(program: str) -> str | None:
    """Where ``program`` is installed (on PATH, or Debian's /usr/sbin), or None."""
    return shutil.which(program) or shutil.which(program, path="/usr/sbin:/usr/local/sbin")


def weight_of(speeds) -> list[int]:
    """Integer weights in proportion to the speeds, the fastest MAX_WEIGHT, each at least 1."""
    fastest = max(speeds)
    return [max(1, round(MAX_WEIGHT * speed / fastest)) for speed in speeds]


def host_port(url: str) -> str:
    parts = urlsplit(url)
    return parts.netloc


def haproxy_config(listen_port: int, backends: list[tuple[str, float]], method: str, workers: int = 1) -> str:
    """An HAProxy configuration: one frontend on 127.0.0.1:``listen_port``, one backend section whose
    servers are ``backends`` ((url, speed) pairs) with weights in proportion to speed; every answer
    carries ``X-Backend: http://IP:PORT`` of the server that produced it."""
    servers = "\n".join(
        f"    server s{index} {host_port(url)} weight {weight}"
        for index, ((url, _), weight) in enumerate(zip(backends, weight_of([speed for _, speed in backends])))
    )
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
    default_backend fleet

backend fleet
    balance {method}
    http-response set-header X-Backend "http://%si:%sp"
{servers}
"""


def nginx_config(
    listen_port: int, backends: list[tuple[str, float]], method: str, folder: Path, workers: int = 1
) -> str:
    """An nginx configuration (everything it writes goes to ``folder``): one server on
    127.0.0.1:``listen_port`` proxying to an upstream of ``backends`` with weights in proportion to
    speed, kept-alive connections, and ``X-Backend: http://IP:PORT`` on every answer."""
    servers = "\n".join(
        f"        server {host_port(url)} weight={weight};"
        for (url, _), weight in zip(backends, weight_of([speed for _, speed in backends]))
    )
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
    upstream fleet {{
        zone fleet 1m;
        {method};
{servers}
        keepalive 1024;
    }}
    server {{
        listen 127.0.0.1:{listen_port};
        location / {{
            proxy_pass http://fleet;
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
    peer: Peer, listen_port: int, backends: list[tuple[str, float]], folder: Path, workers: int = 1
) -> ChildProcess:
    """Write ``peer``'s configuration into ``folder``, start it in the foreground and wait until it
    listens on 127.0.0.1:``listen_port``. ChildFailed if its program is not installed or it fails."""
    binary = program_path(peer.program)
    if binary is None:
        raise ChildFailed(f"{peer.program} is not installed")
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / f"{peer.id}.conf"
    if peer.program == "haproxy":
        config.write_text(haproxy_config(listen_port, backends, peer.method, workers))
        command = [binary, "-db", "-f", str(config)]
    else:
        config.write_text(nginx_config(listen_port, backends, peer.method, folder, workers))
        command = [binary, "-p", str(folder), "-e", str(folder / "error.log"), "-c", str(config)]
    child = ChildProcess(peer.id, command, cwd=str(folder))
    try:
        wait_listening("127.0.0.1", listen_port, child)
    except BaseException:
        child.stop()
        raise
    return child
