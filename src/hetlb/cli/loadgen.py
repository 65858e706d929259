"""hetlb loadgen: open-loop load (Poisson, batches or an MMPP) on one or several URLs."""

from __future__ import annotations

from hetlb.errors import InputError


def add_flags(parser) -> None:
    """The flags of ``hetlb loadgen``."""
    parser.add_argument(
        "--target", action="append", required=True, metavar="URL", help="a target URL (repeatable: arrivals spread)"
    )
    parser.add_argument("--rate", type=float, required=True, help="arrivals per second, over all targets (long-run)")
    parser.add_argument(
        "--arrivals",
        default="poisson",
        metavar="PROCESS",
        help="poisson (default), batch:mean=B (a batch's requests at once) or mmpp:ratio=R,on=T1,off=T2 "
        "(phase means in units of --time-unit-ms)",
    )
    parser.add_argument(
        "--time-unit-ms",
        type=float,
        default=20.0,
        metavar="MS",
        help="the time unit of the MMPP's phase means: the backends' mean service time at speed 1 (default 20)",
    )
    parser.add_argument("--duration", type=float, required=True, metavar="S", help="measured seconds")
    parser.add_argument("--warmup", type=float, default=0.0, metavar="S", help="seconds sent before (default 0)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the arrivals, targets and types (default 0)")
    parser.add_argument(
        "--job-types", nargs="+", metavar="TYPE=P", help="X-Job-Type of each request, drawn by proportion: a=3 b=1"
    )
    parser.add_argument("--shares", help="share of each target, comma-separated (default equal)")
    parser.add_argument("--path", default="/", help="path of every request (default /)")
    parser.add_argument("--method", default="GET", help="method of every request (default GET)")
    parser.add_argument("--timeout", type=float, default=30.0, metavar="S", help="per request (default 30)")
    parser.add_argument(
        "--max-in-flight", type=int, default=10_000, metavar="N", help="outstanding requests at most (default 10000)"
    )
    parser.add_argument("--batches", type=int, default=20, help="batches of the interval (default 20)")
    parser.add_argument("--output", metavar="FILE", help="also write the JSON result to FILE")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress line on standard error")


def load_spec_of(args):
    from hetlb.live.loadgen import LoadSpec, parse_proportions

    shares = None
    if args.shares is not None:
        try:
            shares = tuple(float(share) for share in args.shares.split(","))
        except ValueError:
            raise InputError("--shares", f"must be numbers separated by commas, got {args.shares!r}") from None
    return LoadSpec(
        targets=tuple(args.target),
        rate=args.rate,
        duration=args.duration,
        warmup=args.warmup,
        seed=args.seed,
        job_types=None if args.job_types is None else parse_proportions("--job-types", args.job_types),
        shares=shares,
        path=args.path,
        method=args.method,
        timeout=args.timeout,
        max_in_flight=args.max_in_flight,
        batches=args.batches,
        arrivals=args.arrivals,
        time_unit_ms=args.time_unit_ms,
    )


def run(args) -> int:
    """Send the open-loop load, print its result (text or --json) and write it to --output."""
    from hetlb import validation
    from hetlb.live.loadgen import format_load_result, generate_load

    spec = load_spec_of(args)
    output = None if args.output is None else validation.output_file("--output", args.output, suffixes=("json",))
    result = generate_load(spec, progress=not args.quiet)
    text = result.to_json()
    if output is not None:
        output.write_text(text + "\n")
    print(text if args.json else format_load_result(result))
    return 0
