"""hetlb serve: a reverse proxy that routes HTTP requests to backends with a policy."""

from __future__ import annotations

from hetlb.cli.flags import add_dispatcher_flags, add_health_flags, add_output_flags, dispatcher_overrides, quiet


def add_flags(parser) -> None:
    """The flags of ``hetlb serve``: the keys of hetlb.gateway.config.CONFIG_KEYS, and --quiet."""
    group = parser.add_argument_group("dispatcher (flags override --config)")
    add_dispatcher_flags(group, "where dispatcher 0 listens (default 127.0.0.1:8000)")
    group.add_argument(
        "--dispatchers", type=int, metavar="M", help="independent dispatcher processes on PORT+m (default 1)"
    )
    limits = parser.add_argument_group("limits and health")
    limits.add_argument(
        "--timeout",
        metavar="DURATION",
        help="longest silence of a backend: before its answer and between two chunks of it (default 30s)",
    )
    limits.add_argument("--connect-timeout", metavar="DURATION", help="upstream connect (default 1s)")
    add_health_flags(limits)
    limits.add_argument(
        "--retries", type=int, metavar="N", help="retries of idempotent requests after a failure (default 0)"
    )
    limits.add_argument(
        "--max-body-bytes", type=int, metavar="B", help="request body limit, 413 beyond (default 16 MiB)"
    )
    limits.add_argument(
        "--max-header-bytes", type=int, metavar="B", help="request line and header limit (default 8190)"
    )
    limits.add_argument(
        "--header-timeout", metavar="DURATION", help="a request's headers in full, else 408 (default 10s)"
    )
    limits.add_argument(
        "--body-timeout", metavar="DURATION", help="longest silence of a request's body, else 408 (default 30s)"
    )
    limits.add_argument(
        "--keep-alive-timeout", metavar="DURATION", help="an idle client connection is closed after (default 75s)"
    )
    limits.add_argument(
        "--trust-forwarded",
        action="store_const",
        const=True,
        help="keep a client's X-Forwarded-* and Forwarded headers (behind a trusted front proxy only)",
    )
    add_output_flags(parser, json_output=False, quiet=True)


def run(args) -> int:
    """Run the dispatcher of --config and the flags until it is stopped; its exit status."""
    from hetlb.gateway import load_config, serve
    from hetlb.gateway.fleet import ConfigSource

    overrides = {
        **dispatcher_overrides(args),
        "dispatchers": args.dispatchers,
        "timeout": args.timeout,
        "connect_timeout": args.connect_timeout,
        "retries": args.retries,
        "max_body_bytes": args.max_body_bytes,
        "max_header_bytes": args.max_header_bytes,
        "header_timeout": args.header_timeout,
        "body_timeout": args.body_timeout,
        "keep_alive_timeout": args.keep_alive_timeout,
        "trust_forwarded": args.trust_forwarded,
    }
    config = load_config(args.config, **overrides)
    source = ConfigSource(args.config, {key: value for key, value in overrides.items() if value is not None})
    return serve(config, announce=None if not quiet(args) else lambda line: None, source=source)
