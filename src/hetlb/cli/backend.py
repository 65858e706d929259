"""hetlb backend: test backends, the model's servers on HTTP; with --openai, emulated inference
engines (OpenAI-compatible, docs/reference/engine.md)."""

from __future__ import annotations

from hetlb.documentation import page
from hetlb.errors import InputError

PLAIN_FLAGS = ("mean_service_ms", "job_sizes", "scv")
"""The flags of the plain backends only (without --openai)."""
ENGINE_FLAGS = ("models", "engine", "token_time_ms", "prefill_cost", "max_model_len", "abort_probability")
"""The flags of the emulated engines only (with --openai); hetlb.engines.inference.EngineFleet's defaults apply."""


def add_flags(parser) -> None:
    """The flags of ``hetlb backend``."""
    parser.add_argument(
        "--listen",
        action="append",
        required=True,
        metavar="HOST:PORT[,speed=S][,concurrency=C][,rate_curve=CURVE][,models=A|B]",
        help="a backend (repeatable); HOST:FIRST-LAST: one per port; port 0: a free port; speed default 1; "
        "concurrency and rate_curve default to --concurrency and --rate-curve; models (with --openai) to --models",
    )
    parser.add_argument(
        "--concurrency",
        metavar="SPEC",
        help='requests a backend serves at once, in the speeds\' syntax over the backends in order: "8" or '
        '"2x8,2x32" (inf: unlimited; default 1, one at a time)',
    )
    parser.add_argument(
        "--rate-curve",
        metavar="CURVE",
        help="total rate with b requests in service, in units of the speed: independent (b, default), shared (1), "
        "saturating:alpha=A (b/(1+A(b-1))) or table:v1,v2,...",
    )
    parser.add_argument(
        "--mean-service-ms",
        type=float,
        metavar="MS",
        help="mean service time at speed 1, milliseconds (default 20): a backend of speed S takes MS/S",
    )
    parser.add_argument(
        "--job-sizes",
        metavar="KIND",
        help="service-time law, mean 1: exponential (default), deterministic, hyperexponential, lognormal, pareto, "
        "weibull (these four with --scv) or empirical:FILE",
    )
    parser.add_argument(
        "--scv", type=float, help="squared coefficient of variation of hyperexponential, lognormal, pareto or weibull"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the service times and faults (default 0)")
    parser.add_argument(
        "--error-probability",
        type=float,
        default=0.0,
        metavar="P",
        help="answer a job 500 after serving it (default 0)",
    )
    parser.add_argument(
        "--stall-probability", type=float, default=0.0, metavar="P", help="never answer a request (default 0)"
    )
    engine = parser.add_argument_group(f"emulated inference engines (--openai, {page('reference/engine.md')})")
    engine.add_argument(
        "--openai",
        action="store_true",
        help="serve the OpenAI API (/v1/models, /v1/chat/completions, /v1/completions, /metrics) with the token law",
    )
    engine.add_argument(
        "--models", metavar="A,B", help="the base models every engine serves (or models=A|B in --listen)"
    )
    engine.add_argument("--engine", metavar="NAME", help="whose metric names /metrics uses: vllm (default) or sglang")
    engine.add_argument(
        "--token-time-ms",
        type=float,
        metavar="MS",
        help="tau: one output token's time alone in service at speed 1, milliseconds (default 20)",
    )
    engine.add_argument(
        "--prefill-cost",
        type=float,
        metavar="X",
        help="prefill work per prompt token, in output-token times (default 0.02)",
    )
    engine.add_argument(
        "--max-model-len",
        type=int,
        metavar="N",
        help="the most tokens a request's prompt and max_tokens may hold together (default 8192)",
    )
    engine.add_argument(
        "--abort-probability",
        type=float,
        metavar="P",
        help="close a request's connection once half its tokens are out (default 0)",
    )


def given(args, names) -> dict:
    """The flags of ``names`` that were given, with their values."""
    return {name: getattr(args, name) for name in names if getattr(args, name) is not None}


def refuse_flags(args, names, rule: str) -> None:
    """One line naming the first flag of ``names`` that was given, which ``rule`` forbids."""
    for name in given(args, names):
        raise InputError("--" + name.replace("_", "-"), rule)


def run(args) -> int:
    """Run the test backends (or, with --openai, the emulated engines) of --listen until they are stopped."""
    from hetlb.engines.backend import BackendFleet, parse_listen, run_backends
    from hetlb.model.job_sizes import JobSizes

    specs = [spec for text in args.listen for spec in parse_listen(text)]
    common = {
        "seed": args.seed,
        "error_probability": args.error_probability,
        "stall_probability": args.stall_probability,
        "concurrency": args.concurrency,
        "rate_curve": args.rate_curve,
    }
    if args.openai:
        from hetlb.engines.inference import EngineFleet

        refuse_flags(args, PLAIN_FLAGS, "applies without --openai (an engine's times follow the token law)")
        return run_backends(EngineFleet(specs, **given(args, ENGINE_FLAGS), **common))
    refuse_flags(args, ENGINE_FLAGS, "applies with --openai only")
    if any(spec.models is not None for spec in specs):
        raise InputError("--listen models", "applies with --openai only")
    job_sizes = JobSizes.parse(args.job_sizes or "exponential", args.scv)
    return run_backends(BackendFleet(specs, **given(args, ("mean_service_ms",)), job_sizes=job_sizes, **common))
