"""hetlb diffusion: stationary means of the diffusion limits of paper 002."""

from __future__ import annotations

from hetlb.cli.flags import add_output_flags, parse_construction, quiet
from hetlb.cli.text import format_diffusion, print_json
from hetlb.errors import InputError


def add_flags(parser) -> None:
    """The flags of ``hetlb diffusion``."""
    parser.add_argument("--policy", default="jfsq", help="jfsq, jsq, jsq-lisf, jsq-fiq or jssq (default jfsq)")
    law = parser.add_mutually_exclusive_group(required=True)
    law.add_argument(
        "--speed-distribution",
        metavar="KIND:KEY=VALUE,...",
        help="the law F of the speeds: uniform:low=0.7,high=1.3, or discrete:speeds=[0.8,1.2],probabilities=[0.5,0.5]",
    )
    law.add_argument("--speeds", help='or the empirical F of speeds such as "250x0.8,250x1.2"')
    parser.add_argument("--excess-capacity", type=float, default=1.0, metavar="C", help="c = varsigma + nu (default 1)")
    parser.add_argument("--buffer", type=int, help="b (1: the loss system; default infinite)")
    parser.add_argument("--paths", type=int, default=256, help="independent paths (default 256)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the paths (default 0)")
    add_output_flags(parser, quiet=True)


def run(args) -> int:
    """Print the stationary means of the policy's diffusion limit (002), over --paths paths."""
    from hetlb.theory.diffusion import policy_diffusion, speed_pools, stationary_diffusion

    if args.speed_distribution is not None:
        speeds = diffusion_speed_law(args.speed_distribution)
    else:
        from hetlb.model import parse_speeds

        speeds = speed_pools(parse_speeds(args.speeds))
    from hetlb.progress import working

    limit = policy_diffusion(args.policy, speeds, args.excess_capacity, buffer=args.buffer)
    with working(f"diffusion: {args.paths} paths ", enabled=not quiet(args)):
        stationary = stationary_diffusion(limit, n_paths=args.paths, seed=args.seed)
    values = {
        "policy": args.policy,
        "excess_capacity": args.excess_capacity,
        "paths": args.paths,
        "step": stationary.step,
        "burn_in": stationary.burn_in,
        "horizon": stationary.horizon,
        "stationary": {
            name: {"mean": stationary.mean[name], "standard_error": stationary.standard_error[name]}
            for name in stationary.mean
        },
    }
    if args.json:
        print_json(values)
    else:
        print(format_diffusion(values))
    return 0


DIFFUSION_SPEED_LAWS = {"uniform": ("low", "high"), "discrete": ("speeds", "probabilities")}
"""The --speed-distribution kinds the diffusion command takes, with their keys: the law F itself."""


def diffusion_speed_law(text: str):
    """F of the diffusion limit from KIND:KEY=VALUE,... (the syntax of simulate --speed-distribution)."""
    from hetlb.theory.diffusion import continuous_speeds, speed_pools

    spec = parse_construction(text)
    kind = spec.pop("kind")
    if kind not in DIFFUSION_SPEED_LAWS:
        raise InputError(
            "--speed-distribution",
            f"the diffusion limit takes the law of the speeds itself: uniform:low=L,high=H or "
            f"discrete:speeds=[...],probabilities=[...], got kind {kind!r}",
        )
    allowed = DIFFUSION_SPEED_LAWS[kind]
    unknown = sorted(set(spec) - set(allowed))
    if unknown:
        raise InputError("--speed-distribution", f"{unknown[0]}: unknown key for {kind}; allowed: {', '.join(allowed)}")
    missing = [key for key in allowed if key not in spec]
    if missing:
        raise InputError("--speed-distribution", f"{kind} needs {' and '.join(missing)}")
    if kind == "uniform":
        return continuous_speeds(spec["low"], spec["high"])
    return speed_pools(spec["speeds"], spec["probabilities"])
