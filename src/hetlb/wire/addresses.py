"""Listening addresses: ``HOST:PORT`` (:class:`Address`) (port 0: one the system chooses) and ``HOST:FIRST-LAST``, and
ports free now for the testbed's children."""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from hetlb import validation
from hetlb.errors import InputError
from hetlb.processes import ChildFailed

MAX_PORT = 65535
HOST_NAME_MAX = 253
"""Characters of a host name at most (RFC 1035: 255 octets on the wire)."""


@dataclass(frozen=True)
class Address:
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def shifted(self, offset: int) -> Address:
        """The address of dispatcher ``offset``: the same host, port + offset."""
        return Address(self.host, self.port + offset)


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
    check_host(field, host)
    first, dash, last = ports.partition("-")
    if not (is_ascii_digits(first) and (not dash or is_ascii_digits(last))):
        raise InputError(field, f"the port must be an integer or a range FIRST-LAST, got {ports!r}")
    low, high = int(first), int(last) if dash else int(first)
    if not (0 <= low <= MAX_PORT and 0 <= high <= MAX_PORT):
        raise InputError(field, f"ports lie in [0, {MAX_PORT}], got {ports!r}")
    if dash and not 0 < low <= high:
        raise InputError(field, f"a port range needs 0 < FIRST <= LAST, got {ports!r}")
    return host, list(range(low, high + 1))


def is_ascii_digits(text: str) -> bool:
    """Digits 0-9 only (``str.isdigit`` takes any script's digits too: a full-width ``０``)."""
    return text.isascii() and text.isdigit()


def check_host(field: str, host: str) -> None:
    """Refuse a host name that cannot be looked up: one the IDNA codec refuses (a label over 63
    characters, an empty label, a name over 253), control characters or spaces."""
    if not host.isprintable() or any(character.isspace() for character in host):
        raise InputError(field, f"the host must be a name or address without spaces, got {validation.shown(host)}")
    try:
        encoded = host.encode("idna")
    except UnicodeError:
        rule = "each dot-separated label of a host name has 1 to 63 characters"
        raise InputError(field, f"{rule}, got {validation.shown(host)}") from None
    if len(encoded) > HOST_NAME_MAX:
        raise InputError(field, f"a host name has at most {HOST_NAME_MAX} characters, got {len(encoded)}")


def http_url(field: str, text: str, *, port: bool = False) -> str:
    """An http:// or https:// URL with a host (and, with ``port``, its port), printable ASCII with
    no spaces; ``text`` unchanged."""
    text = validation.text(field, text)
    if not (text.isascii() and text.isprintable()) or " " in text:
        raise InputError(field, f"must be a URL of printable ASCII without spaces, got {validation.shown(text)}")
    try:
        parts = urlsplit(text)
        given_port = parts.port
    except ValueError as error:
        raise InputError(field, f"not a URL ({error}): {validation.shown(text)}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(field, f"must be an http:// or https:// URL with a host, got {validation.shown(text)}")
    check_host(field, parts.hostname)
    if port and given_port is None:
        raise InputError(field, f"must name its port, e.g. http://127.0.0.1:9001, got {validation.shown(text)}")
    if given_port == 0:
        raise InputError(field, f"port 0 cannot be connected to, got {validation.shown(text)}")
    return text


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
