"""hetlb serve: a reverse proxy that routes HTTP requests to backends with a policy."""

from __future__ import annotations

from hetlb.cli.flags import add_output_flags, parse_assignment, quiet
from hetlb.errors import InputError


def add_flags(parser) -> None:
    """The flags of ``hetlb serve``: the keys of hetlb.live.config.CONFIG_KEYS, and --quiet."""
    group = parser.add_argument_group("dispatcher (flags override --config)")
    group.add_argument("--config", metavar="FILE", help="TOML file with the same keys as these flags")
    group.add_argument(
        "--backend",
        action="append",
        metavar="SPEC",
        help="URL[,speed=S|auto][,types=A|B|discover][,buffer=B] (repeatable; defaults: speed 1, every type, "
        "no buffer; discover: the ids its GET /v1/models lists)",
    )
    group.add_argument(
        "--backends-file",
        metavar="FILE",
        help="TOML or JSON file with a backends list, applied again each time it changes (instead of --backend)",
    )
    group.add_argument(
        "--discover-interval",
        metavar="DURATION",
        help="how often types=discover backends' GET /v1/models is read again (default 5s)",
    )
    group.add_argument("--listen", metavar="HOST:PORT", help="where dispatcher 0 listens (default 127.0.0.1:8000)")
    group.add_argument(
        "--admin", metavar="HOST:PORT", help="admin listener of dispatcher 0: /metrics, /status, /ready, /backends"
    )
    group.add_argument("--policy", metavar="ID", help="a live policy (hetlb policies lists them); default jsq")
    group.add_argument("--set", action="append", metavar="NAME=VALUE", help="a policy parameter (repeatable)")
    group.add_argument(
        "--d", type=int, metavar="D", help="servers pod and l-pod sample, and backends a push probes (default 2)"
    )
    group.add_argument("--p-hat", type=float, metavar="P", help="probability of a push probe per request (default 1)")
    from hetlb.signals import live_help

    group.add_argument("--signals", metavar="LIST", help=live_help())
    group.add_argument("--default-type", metavar="T", help="job type of a request without the type header")
    group.add_argument("--type-header", metavar="NAME", help="the header naming the job type (default X-Job-Type)")
    group.add_argument(
        "--type-body-field",
        metavar="FIELD",
        help="the top-level field of a JSON body naming the job type, before the header (model for OpenAI APIs)",
    )
    group.add_argument(
        "--type-prefix",
        action="append",
        metavar="PREFIX=TYPE",
        help="a path prefix that gives the job type (repeatable)",
    )
    group.add_argument(
        "--dispatchers", type=int, metavar="M", help="independent dispatcher processes on PORT+m (default 1)"
    )
    group.add_argument("--seed", type=int, metavar="S", help="seed of the decisions (default: from the system)")
    limits = parser.add_argument_group("limits and health")
    limits.add_argument(
        "--timeout",
        metavar="DURATION",
        help="longest silence of a backend: before its answer and between two chunks of it (default 30s)",
    )
    limits.add_argument("--connect-timeout", metavar="DURATION", help="upstream connect (default 1s)")
    limits.add_argument("--drain", metavar="DURATION", help="time the requests in flight get at a stop (default 10s)")
    limits.add_argument(
        "--health-interval", metavar="DURATION", help="active GET /healthz checks, 0 for none (default 0.5s)"
    )
    limits.add_argument("--eject-after", type=int, metavar="K", help="consecutive failures that eject (default 3)")
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
        "--max-in-flight", type=int, metavar="N", help="concurrent requests, 503 beyond (default 10000)"
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
    from hetlb.live import load_config, serve
    from hetlb.live.fleet import ConfigSource

    if args.set and args.policy is None:
        raise InputError("--set", "give the policy with --policy ID")
    parameters = dict(parse_assignment(text, "--set") for text in args.set or [])
    policy = None if args.policy is None else {"id": args.policy, **parameters}
    overrides = {
        "backends": args.backend,
        "backends_file": args.backends_file,
        "discover_interval": args.discover_interval,
        "policy": policy,
        "listen": args.listen,
        "admin": args.admin,
        "signals": args.signals,
        "p_hat": args.p_hat,
        "d": args.d,
        "default_type": args.default_type,
        "type_header": args.type_header,
        "type_body_field": args.type_body_field,
        "type_prefixes": args.type_prefix,
        "dispatchers": args.dispatchers,
        "seed": args.seed,
        "timeout": args.timeout,
        "connect_timeout": args.connect_timeout,
        "drain": args.drain,
        "health_interval": args.health_interval,
        "eject_after": args.eject_after,
        "retries": args.retries,
        "max_body_bytes": args.max_body_bytes,
        "max_header_bytes": args.max_header_bytes,
        "max_in_flight": args.max_in_flight,
        "header_timeout": args.header_timeout,
        "body_timeout": args.body_timeout,
        "keep_alive_timeout": args.keep_alive_timeout,
        "trust_forwarded": args.trust_forwarded,
    }
    config = load_config(args.config, **overrides)
    source = ConfigSource(args.config, {key: value for key, value in overrides.items() if value is not None})
    return serve(config, announce=None if not quiet(args) else lambda line: None, source=source)
