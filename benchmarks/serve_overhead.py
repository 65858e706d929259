"""Proxy overhead of hetlb serve at low load: the latency it adds to a request, measured against
direct requests to the same backend in the same run, alternated one by one.

    PYTHONPATH=src python benchmarks/serve_overhead.py [--requests 3000] [--throughput-seconds 5]

One ``hetlb backend`` with (nearly) instant service (deterministic, 1 us) and one ``hetlb serve``
dispatcher (jsq, default signals) in front of it, both real processes on 127.0.0.1. A client sends
one request at a time (low load), alternately direct and through the proxy, and prints the median
(p50) and p90 of each, their difference (the added latency; goal: p50 <= 1 ms) and ratio. With
``--throughput-seconds`` it then keeps 32 requests outstanding for that long through the proxy and
directly, and prints requests per second (the client shares the machine's cores with both).
"""

import argparse
import asyncio
import contextlib
import socket
import sys
import time
from pathlib import Path

import aiohttp
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from live_fleet import backend_process  # noqa: E402

from hetlb.processes import ChildProcess, hetlb_command, wait_listening  # noqa: E402


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def latencies(direct: str, proxied: str, requests: int) -> tuple[np.ndarray, np.ndarray]:
    times = {direct: [], proxied: []}
    async with aiohttp.ClientSession() as session:
        for i in range(requests + 200):
            for url in (direct, proxied) if i % 2 else (proxied, direct):
                start = time.perf_counter()
                async with session.get(url) as answer:
                    await answer.read()
                    assert answer.status == 200, answer.status
                if i >= 200:  # the first 200 warm the connections up
                    times[url].append(time.perf_counter() - start)
    return np.array(times[direct]) * 1000.0, np.array(times[proxied]) * 1000.0


async def throughput(url: str, seconds: float, outstanding: int = 32) -> float:
    done = 0
    deadline = time.perf_counter() + seconds
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=outstanding)) as session:

        async def worker():
            nonlocal done
            while time.perf_counter() < deadline:
                async with session.get(url) as answer:
                    await answer.read()
                done += 1

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(outstanding)))
    return done / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000, help="measured requests per path")
    parser.add_argument("--throughput-seconds", type=float, default=0.0, help="also measure requests per second")
    args = parser.parse_args()
    with backend_process("--listen", "127.0.0.1:0", "--mean-service-ms", "0.001", "--job-sizes", "deterministic") as (
        _,
        urls,
    ):
        port = free_port()
        serve = ChildProcess(
            "hetlb serve", hetlb_command("serve", "--listen", f"127.0.0.1:{port}", "--backend", urls[0])
        )
        try:
            wait_listening("127.0.0.1", port, serve)
            direct, proxied = asyncio.run(latencies(urls[0] + "/x", f"http://127.0.0.1:{port}/x", args.requests))
            print(f"{args.requests:,} requests each, one at a time, alternated (milliseconds)")
            print(f"{'':<10}{'p50':>8}{'p90':>8}")
            for name, values in (("direct", direct), ("proxied", proxied)):
                print(f"{name:<10}{np.median(values):>8.3f}{np.percentile(values, 90):>8.3f}")
            added = np.median(proxied) - np.median(direct)
            print(
                f"added latency (p50 difference): {added:.3f} ms; ratio of p50s {np.median(proxied) / np.median(direct):.2f}"
            )
            if args.throughput_seconds > 0:
                through = asyncio.run(throughput(f"http://127.0.0.1:{port}/x", args.throughput_seconds))
                alone = asyncio.run(throughput(urls[0] + "/x", args.throughput_seconds))
                print(f"requests per second, 32 outstanding: proxied {through:,.0f}, direct {alone:,.0f}")
        finally:
            serve.stop()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
