"""hetlb envoy-config: an Envoy bootstrap, with hetlb pickers or with Envoy's own balancer."""

from __future__ import annotations


def add_flags(parser) -> None:
    """The flags of ``hetlb envoy-config`` (docs/reference/pick.md)."""
    group = parser.add_argument_group("Envoy")
    group.add_argument("--listen", metavar="HOST:PORT", help="Envoy's HTTP listener (default 127.0.0.1:8080)")
    group.add_argument("--admin", metavar="HOST:PORT", help="Envoy's admin listener (default none)")
    group.add_argument(
        "--picker", action="append", metavar="HOST:PORT", help="a hetlb pick's gRPC address (repeatable)"
    )
    group.add_argument(
        "--body",
        action="store_true",
        help="send the request's body (buffered) to the picker: for pickers with --type-body-field",
    )
    group.add_argument(
        "--lb",
        metavar="POLICY",
        help="no picker: Envoy's own LEAST_REQUEST or ROUND_ROBIN over --backend (weights by speed)",
    )
    group.add_argument("--backend", action="append", metavar="URL[,speed=S]", help="a backend of --lb (repeatable)")
    group.add_argument(
        "--timeout", metavar="DURATION", help="longest silence of a backend (the route's idle timeout; default 30s)"
    )
    group.add_argument("--connect-timeout", metavar="DURATION", help="connect to a backend or picker (default 1s)")
    group.add_argument("--message-timeout", metavar="DURATION", help="longest wait for a picker's answer (default 1s)")
    parser.add_argument("--out", metavar="FILE", help="write the bootstrap here (default standard output)")


def run(args) -> int:
    """Print the bootstrap of the flags as JSON, or write it to --out (and say so)."""
    import json
    from pathlib import Path

    from hetlb.errors import InputError
    from hetlb.gateway.config import address, duration, parse_backend
    from hetlb.gateway.envoy.bootstrap import picker_bootstrap
    from hetlb.testbed.peers import balancer_bootstrap

    listen = address("--listen", args.listen or "127.0.0.1:8080")
    admin = None if args.admin is None else address("--admin", args.admin)
    timeout = duration("--timeout", args.timeout or 30.0)
    connect_timeout = duration("--connect-timeout", args.connect_timeout or 1.0)
    if args.lb is not None:
        if args.picker or args.body or args.message_timeout:
            raise InputError("--lb", "Envoy's own balancer takes no --picker, --body or --message-timeout")
        backends = [parse_backend("--backend", text) for text in args.backend or []]
        if any(backend.speed is None for backend in backends):
            raise InputError("--backend", "Envoy's weights need a number as speed, not auto")
        pairs = [(backend.url, float(backend.speed or 1.0)) for backend in backends]
        config = balancer_bootstrap(
            listen, pairs, args.lb, admin=admin, timeout=timeout, connect_timeout=connect_timeout
        )
    else:
        if args.backend:
            raise InputError("--backend", "the pickers know the backends; --backend goes with --lb")
        pickers = [address("--picker", text) for text in args.picker or []]
        message_timeout = duration("--message-timeout", args.message_timeout or 1.0)
        config = picker_bootstrap(
            listen,
            pickers,
            admin=admin,
            body=args.body,
            message_timeout=message_timeout,
            timeout=timeout,
            connect_timeout=connect_timeout,
        )
    text = json.dumps(config, indent=2) + "\n"
    if args.out is None:
        print(text, end="")
    else:
        try:
            Path(args.out).write_text(text)
        except OSError as error:
            raise InputError("--out", f"cannot write {args.out}: {error.strerror or error}") from None
        print(f"written: {args.out}")
    return 0
