"""hetlb loadgen: open-loop load (Poisson, batches or an MMPP) on one or several URLs: plain HTTP
requests, or streamed OpenAI chat completions with --openai."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hetlb.errors import InputError

if TYPE_CHECKING:
    from hetlb.results.load import LoadResult


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
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the arrivals and their draws: targets, types, models, tokens (default 0)",
    )
    parser.add_argument(
        "--job-types", nargs="+", metavar="TYPE=P", help="X-Job-Type of each request, drawn by proportion: a=3 b=1"
    )
    parser.add_argument("--shares", help="share of each target, comma-separated (default equal)")
    parser.add_argument("--path", help="path of every request (default /)")
    parser.add_argument("--method", help="method of every request (default GET)")
    parser.add_argument(
        "--timeout", type=float, metavar="S", help="per request, to its answer's end (default 30; 300 with --openai)"
    )
    parser.add_argument(
        "--max-in-flight", type=int, default=10_000, metavar="N", help="outstanding requests at most (default 10000)"
    )
    parser.add_argument("--batches", type=int, default=20, help="batches of the interval (default 20)")
    openai = parser.add_argument_group("streamed chat completions (--openai)")
    openai.add_argument(
        "--openai",
        action="store_true",
        help="send POST /v1/chat/completions with stream true; report TTFT, TBT and e2e per model and backend",
    )
    openai.add_argument("--models", nargs="+", metavar="MODEL=P", help="the body's model, drawn by proportion: a=3 b=1")
    openai.add_argument("--prompt-tokens", type=float, metavar="MEAN", help="mean prompt length, words (default 128)")
    openai.add_argument(
        "--prompt-law",
        metavar="LAW",
        help="law of prompt lengths: deterministic (default), exponential, KIND:scv=S (hyperexponential, lognormal, "
        "pareto, weibull) or empirical:FILE; MEAN x a mean-1 draw, rounded, >= 1",
    )
    openai.add_argument("--output-tokens", type=float, metavar="MEAN", help="mean max_tokens (default 128)")
    openai.add_argument(
        "--output-law", metavar="LAW", help="law of max_tokens, as --prompt-law (default deterministic)"
    )
    parser.add_argument("--output", metavar="FILE", help="also write the JSON result to FILE")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress line on standard error")


PLAIN_ONLY = ("job_types", "path", "method")
OPENAI_ONLY = ("models", "prompt_tokens", "prompt_law", "output_tokens", "output_law")


def flag_of(name: str) -> str:
    return "--" + name.replace("_", "-")


def load_spec_of(args):
    """The LoadSpec, or with --openai the InferenceLoadSpec, of the flags."""
    from hetlb.load.inference import InferenceLoadSpec
    from hetlb.load.open_loop import LoadSpec, parse_proportions

    for name in OPENAI_ONLY if not args.openai else PLAIN_ONLY:
        if getattr(args, name) is not None:
            rule = "is for streamed chat completions: give --openai too" if not args.openai else "is not for --openai"
            raise InputError(flag_of(name), rule)
    shares = None
    if args.shares is not None:
        try:
            shares = tuple(float(share) for share in args.shares.split(","))
        except ValueError:
            raise InputError("--shares", f"must be numbers separated by commas, got {args.shares!r}") from None
    given = {name: getattr(args, name) for name in ("timeout", *(OPENAI_ONLY if args.openai else PLAIN_ONLY))}
    given = {name: value for name, value in given.items() if value is not None}
    if args.openai:
        if args.models is not None:
            given["models"] = parse_proportions("--models", args.models)
        spec_type = InferenceLoadSpec
    else:
        if args.job_types is not None:
            given["job_types"] = parse_proportions("--job-types", args.job_types)
        spec_type = LoadSpec
    return spec_type(
        targets=tuple(args.target),
        rate=args.rate,
        duration=args.duration,
        warmup=args.warmup,
        seed=args.seed,
        shares=shares,
        max_in_flight=args.max_in_flight,
        batches=args.batches,
        arrivals=args.arrivals,
        time_unit_ms=args.time_unit_ms,
        **given,
    )


def run(args) -> int:
    """Send the open-loop load, print its result (text or --json) and write it to --output."""
    from hetlb import validation

    spec = load_spec_of(args)
    output = None if args.output is None else validation.output_file("--output", args.output, suffixes=("json",))
    result: LoadResult
    if args.openai:
        from hetlb.load.inference import format_inference_load_result, generate_inference_load

        result = generate_inference_load(spec, progress=not args.quiet)
        readable = format_inference_load_result(result)
    else:
        from hetlb.load.open_loop import format_load_result, generate_load

        result = generate_load(spec, progress=not args.quiet)
        readable = format_load_result(result)
    text = result.to_json()
    if output is not None:
        output.write_text(text + "\n")
    print(text if args.json else readable)
    return 0
