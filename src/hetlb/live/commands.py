"""The command lines of ``hetlb backend``, ``hetlb loadgen`` and ``hetlb testbed``: their flags, and
handlers that import the live modules (and aiohttp) only when they run."""

from __future__ import annotations

import json

from hetlb.errors import InputError
from hetlb.model.job_sizes import SIZE_KINDS


def add_live_commands(commands) -> None:
    """Add the live subcommands to the ``hetlb`` subparsers ``commands``."""
    backend = commands.add_parser(
        "backend", help="test backends: the model's FIFO servers on HTTP, several on several ports"
    )
    backend.set_defaults(handler=run_backend)
    backend.add_argument(
        "--listen",
        action="append",
        required=True,
        metavar="HOST:PORT[,speed=S]",
        help="a backend (repeatable); HOST:FIRST-LAST: one per port; port 0: a free port; speed default 1",
    )
    backend.add_argument(
        "--mean-service-ms",
        type=float,
        default=20.0,
        metavar="MS",
        help="mean service time at speed 1, milliseconds (default %(default)s): a backend of speed S takes MS/S",
    )
    backend.add_argument(
        "--job-sizes", choices=list(SIZE_KINDS), default="exponential", help="service-time law (default %(default)s)"
    )
    backend.add_argument("--scv", type=float, help="squared coefficient of variation of hyperexponential times")
    backend.add_argument("--seed", type=int, default=0, help="seed of the service times and faults (default 0)")
    backend.add_argument(
        "--error-probability",
        type=float,
        default=0.0,
        metavar="P",
        help="answer a job 500 after serving it (default 0)",
    )
    backend.add_argument(
        "--stall-probability", type=float, default=0.0, metavar="P", help="never answer a request (default 0)"
    )

    loadgen = commands.add_parser("loadgen", help="open-loop Poisson load on one or several URLs; simulator's keys")
    loadgen.set_defaults(handler=run_loadgen)
    loadgen.add_argument(
        "--target", action="append", required=True, metavar="URL", help="a target URL (repeatable: arrivals spread)"
    )
    loadgen.add_argument("--rate", type=float, required=True, help="arrivals per second, over all targets")
    loadgen.add_argument("--duration", type=float, required=True, metavar="S", help="measured seconds")
    loadgen.add_argument("--warmup", type=float, default=0.0, metavar="S", help="seconds sent before (default 0)")
    loadgen.add_argument("--seed", type=int, default=0, help="seed of the arrivals, targets and types (default 0)")
    loadgen.add_argument(
        "--job-types", nargs="+", metavar="TYPE=P", help="X-Job-Type of each request, drawn by proportion: a=3 b=1"
    )
    loadgen.add_argument("--shares", help="share of each target, comma-separated (default equal)")
    loadgen.add_argument("--path", default="/", help="path of every request (default /)")
    loadgen.add_argument("--method", default="GET", help="method of every request (default GET)")
    loadgen.add_argument("--timeout", type=float, default=30.0, metavar="S", help="per request (default 30)")
    loadgen.add_argument(
        "--max-in-flight", type=int, default=10_000, metavar="N", help="outstanding requests at most (default 10000)"
    )
    loadgen.add_argument("--batches", type=int, default=20, help="batches of the interval (default 20)")
    loadgen.add_argument("--output", metavar="FILE", help="also write the JSON result to FILE")
    loadgen.add_argument("--json", action="store_true", help="print the result as JSON")
    loadgen.add_argument("-q", "--quiet", action="store_true", help="no progress line on standard error")


def job_sizes_of(args):
    from hetlb.model.job_sizes import JobSizes

    return JobSizes(args.job_sizes, 1.0 if args.scv is None else args.scv)


def run_backend(args) -> int:
    from hetlb.live.backend import BackendFleet, parse_listen, run_backends

    specs = [spec for text in args.listen for spec in parse_listen(text)]
    fleet = BackendFleet(
        specs,
        mean_service_ms=args.mean_service_ms,
        job_sizes=job_sizes_of(args),
        seed=args.seed,
        error_probability=args.error_probability,
        stall_probability=args.stall_probability,
    )
    return run_backends(fleet)


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
    )


def run_loadgen(args) -> int:
    from hetlb import validation
    from hetlb.live.loadgen import format_load_result, generate_load

    spec = load_spec_of(args)
    output = None if args.output is None else validation.output_file("--output", args.output, suffixes=("json",))
    result = generate_load(spec, progress=not args.quiet)
    text = json.dumps(result, indent=2)
    if output is not None:
        output.write_text(text + "\n")
    print(text if args.json else format_load_result(result))
    return 0
