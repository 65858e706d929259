"""HTTP/1.1 header lines as the proxy relays them: the hop-by-hop headers, and the lines of one
side written for the other as bytes, without decoding what it only passes on."""

from __future__ import annotations

HOP_BY_HOP = frozenset(
    name.lower().encode()
    for name in (
        "Connection",
        "Keep-Alive",
        "Proxy-Authenticate",
        "Proxy-Authorization",
        "Proxy-Connection",
        "TE",
        "Trailer",
        "Trailers",
        "Transfer-Encoding",
        "Upgrade",
    )
)
"""Headers of one connection (RFC 9110 section 7.6.1), never relayed; nor those named in Connection
(lower-case names, bytes)."""


def relayed(raw: list[tuple[bytes, bytes]], dropped: frozenset[bytes]) -> bytes:
    """The header lines of ``raw`` (name and value as received) but those named in ``dropped``
    (lower-case names, the hop-by-hop ones among them) or in a Connection header."""
    lowered = [(name.lower(), name, value) for name, value in raw]
    for lower, _, value in lowered:
        if lower == b"connection":
            dropped = dropped | {token.strip().lower() for token in value.split(b",")}
    return b"".join([b"%b: %b\r\n" % (name, value) for lower, name, value in lowered if lower not in dropped])


def encoded(pairs) -> bytes:
    """Header lines from pairs of str."""
    return "".join([f"{name}: {value}\r\n" for name, value in pairs]).encode("latin-1")
