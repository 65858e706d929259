"""Listening addresses: ``HOST:PORT`` (port 0: one the system chooses) and ``HOST:FIRST-LAST``."""

from __future__ import annotations

import ipaddress

from hetlb.errors import InputError

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
