"""hetlb pick: an endpoint picker for Envoy (the Endpoint Picker Protocol over ext_proc)."""

from __future__ import annotations

from hetlb.cli.flags import add_dispatcher_flags, add_health_flags, add_output_flags, dispatcher_overrides, quiet


def add_flags(parser) -> None:
    """The flags of ``hetlb pick``: those of a dispatcher (as hetlb serve's), --fallbacks and --quiet."""
    group = parser.add_argument_group("picker (flags override --config)")
    add_dispatcher_flags(group, "where the ext_proc gRPC service listens (default 127.0.0.1:9002)")
    group.add_argument(
        "--fallbacks",
        type=int,
        metavar="N",
        help="endpoints named after the picked one, the policy's next choices, for the proxy's retries (default 0)",
    )
    add_health_flags(parser.add_argument_group("health"))
    add_output_flags(parser, json_output=False, quiet=True)


def run(args) -> int:
    """Run the picker of --config and the flags until it is stopped; its exit status."""
    from hetlb.gateway.envoy.picker import PickSource, load_pick_config, pick

    overrides = {**dispatcher_overrides(args), "fallbacks": args.fallbacks}
    config = load_pick_config(args.config, **overrides)
    source = PickSource(args.config, {key: value for key, value in overrides.items() if value is not None})
    return pick(config, announce=None if not quiet(args) else lambda line: None, source=source)
