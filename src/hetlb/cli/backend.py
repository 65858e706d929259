"""hetlb backend: test backends, the model's FIFO servers on HTTP."""

from __future__ import annotations


def add_flags(parser) -> None:
    """The flags of ``hetlb backend``."""
    parser.add_argument(
        "--listen",
        action="append",
        required=True,
        metavar="HOST:PORT[,speed=S]",
        help="a backend (repeatable); HOST:FIRST-LAST: one per port; port 0: a free port; speed default 1",
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
        choices=["exponential", "hyperexponential", "deterministic"],
        default="exponential",
        help="service-time law (default %(default)s)",
    )
    parser.add_argument("--scv", type=float, help="squared coefficient of variation of hyperexponential times")
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

    return JobSizes(args.job_sizes, 1.0 if args.scv is None else args.scv)


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
    )
    return run_backends(fleet)
