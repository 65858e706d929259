"""The handlers of ``hetlb backend``, ``hetlb loadgen`` and ``hetlb testbed`` (their flags are in
hetlb.cli, which imports this module only when one of them runs)."""

from __future__ import annotations

import sys

from hetlb.errors import InputError


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
    text = result.to_json()
    if output is not None:
        output.write_text(text + "\n")
    print(text if args.json else format_load_result(result))
    return 0


def run_testbed(args) -> int:
    from hetlb import validation
    from hetlb.errors import one_line
    from hetlb.live import testbed
    from hetlb.processes import ChildFailed, signals_interrupt

    compare = None if args.compare is None else [name for name in args.compare.split(",") if name]
    out = validation.output_folder("--out", args.out)
    say = (lambda line: None) if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    try:
        with signals_interrupt():  # SIGTERM as Ctrl-C: the children are stopped on the way out (exit 143)
            bed = testbed.run_testbed(args.scenario, out, compare=compare, progress=False, say=say)
    except ChildFailed as failure:
        print(f"hetlb: testbed failed: {one_line(str(failure))}", file=sys.stderr)
        return 1
    print(testbed.format_table(bed.rows, bed.order_agreement()))
    print(f"written: {out / 'testbed.csv'}, {out / 'testbed.json'}, {out / 'testbed.png'}")
    return 0
