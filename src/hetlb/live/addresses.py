"""Listening addresses: ``HOST:PORT`` (port 0: one the system chooses) and ``HOST:FIRST-LAST``, and
ports free now for the testbed's children."""

from __future__ import annotations

import ipaddress
import socket

from hetlb.errors import InputError
from hetlb.processes import ChildFailed

MAX_PORT = 65535


def host_ports(field: str, text: str) -> tuple[str, list[int]]:
    """(host, ports) of ``HOST:PORT`` or ``HOST:FIRST-LAST`` (a range of ports, both ends included);
    an IPv6 host is written in brackets, ``[::1]:8080``."""
    host, separator, ports = text.rpartition(":")
    if not separator or not host or not ports:
        raise InputError(field, f"must be HOST:PORT or HOST:FIRST-LAST, got {text!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        if ":" in host:
            ipaddress.IPv6Address(host)
    except ValueError:
        raise InputError(field, f"{host!r} is not an IPv6 address (write it in brackets, [::1]:8080)") from None
    first, dash, last = ports.partition("-")
    if not (first.isdigit() and (not dash or last.isdigit())):
        raise InputError(field, f"the port must be an integer or a range FIRST-LAST, got {ports!r}")
    low, high = int(first), int(last) if dash else int(first)
    if not (0 <= low <= MAX_PORT and 0 <= high <= MAX_PORT):
        raise InputError(field, f"ports lie in [0, {MAX_PORT}], got {ports!r}")
    if dash and not 0 < low <= high:
        raise InputError(field, f"a port range needs 0 < FIRST <= LAST, got {ports!r}")
    return host, list(range(low, high + 1))


def url(host: str, port: int) -> str:
    """The http URL of a listening address (an IPv6 host in brackets)."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct ports free on ``host`` now (the system's choice; another program may take
    one before it is used, so a child that cannot listen must be reported, not retried silently)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((host, 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def free_port_block(count: int, host: str = "127.0.0.1", attempts: int = 50) -> int:
    """The first of ``count`` consecutive ports free on ``host`` now (for ``--dispatchers M``, whose
    dispatcher m listens on PORT + m)."""
    for _ in range(attempts):
        (first,) = free_ports(1, host)
        if first + count - 1 > MAX_PORT:
            continue
        sockets = []
        try:
            for port in range(first, first + count):
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sockets.append(sock)
                sock.bind((host, port))
            return first
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
    raise ChildFailed(f"found no {count} consecutive free ports on {host}")
