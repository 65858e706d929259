"""hetlb backend: test backends, the model's servers on HTTP."""

from __future__ import annotations


def add_flags(parser) -> None:
    """The flags of ``hetlb backend``."""
    parser.add_argument(
        "--listen",
        action="append",
        required=True,
        metavar="HOST:PORT[,speed=S][,concurrency=C][,rate_curve=CURVE]",
        help="a backend (repeatable); HOST:FIRST-LAST: one per port; port 0: a free port; speed default 1; "
        "concurrency and rate_curve default to --concurrency and --rate-curve",
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
        default=20.0,
        metavar="MS",
        help="mean service time at speed 1, milliseconds (default %(default)s): a backend of speed S takes MS/S",
    )
    parser.add_argument(
        "--job-sizes",
        default="exponential",
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


def job_sizes_of(args):
    from hetlb.model.job_sizes import JobSizes

    return JobSizes.parse(args.job_sizes, args.scv)


def run(args) -> int:
    """Run the test backends of --listen until they are stopped."""
    from hetlb.live.backend import BackendFleet, parse_listen, run_backends

    specs = [spec for text in args.listen for spec in parse_listen(text)]
    fleet = BackendFleet(
        specs,
        mean_service_ms=args.mean_service_ms,
        job_sizes=job_sizes_of(args),
        seed=args.seed,
        error_probability=args.error_probability,
        stall_probability=args.stall_probability,
        concurrency=args.concurrency,
        rate_curve=args.rate_curve,
    )
    return run_backends(fleet)
