"""Proxy overhead of hetlb serve at low load: the latency it adds to a request, measured against
direct requests to the same backend in the same run, alternated one by one.

    PYTHONPATH=src python benchmarks/serve_overhead.py [--requests 3000] [--throughput-seconds 5]

One ``hetlb backend`` with (nearly) instant service (deterministic, 1 us) and one ``hetlb serve``
dispatcher (jsq, default signals) in front of it, both real processes on 127.0.0.1. A client sends
one request at a time (low load), alternately direct and through the proxy, and prints the median
(p50) and p90 of each, their difference (the added latency; goal: p50 <= 1 ms) and ratio. With
``--throughput-seconds`` it then keeps 32 requests outstanding for that long through the proxy and
directly, and prints requests per second (the client shares the machine's cores with both).

With ``--openai`` the backend is an emulated inference engine (``hetlb backend --openai``, one
output token per 2 ms) and the proxy routes on the body's model (``--type-body-field model``);
each request is a streamed chat completion of 8 tokens, and the time measured is its time to first
token (to the first body byte, the first event; goal: p50 within 1 ms of the direct one).
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

from hetlb.processes import ChildProcess, hetlb_command, wait_listening  # noqa: E402
from hetlb.progress import working  # noqa: E402

from support.live_fleet import backend_process  # noqa: E402


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


CHAT = {"model": "m", "messages": [{"role": "user", "content": "a b c d"}], "max_tokens": 8, "stream": True}


async def response_time(session, url: str) -> float:
    """Seconds from the send to the end of a GET's answer."""
    start = time.perf_counter()
    async with session.get(url) as answer:
        await answer.read()
        assert answer.status == 200, answer.status
    return time.perf_counter() - start


async def time_to_first_token(session, url: str) -> float:
    """Seconds from the send to the first event of a streamed chat completion (read to its end)."""
    start = time.perf_counter()
    async with session.post(url + "/v1/chat/completions", json=CHAT) as answer:
        assert answer.status == 200, answer.status
        await answer.content.readany()
        first = time.perf_counter() - start
        await answer.read()
    return first


async def latencies(direct: str, proxied: str, requests: int, measure=response_time) -> tuple[np.ndarray, np.ndarray]:
    times = {direct: [], proxied: []}
    async with aiohttp.ClientSession() as session:
        for i in range(requests + 200):
            for url in (direct, proxied) if i % 2 else (proxied, direct):
                elapsed = await measure(session, url)
                if i >= 200:  # the first 200 warm the connections up
                    times[url].append(elapsed)
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
    parser.add_argument("--openai", action="store_true", help="an emulated engine; time to first token")
    args = parser.parse_args()
    if args.openai:
        backend = ("--openai", "--models", "m", "--token-time-ms", "2", "--listen", "127.0.0.1:0")
        routing: tuple[str, ...] = ("--type-body-field", "model")
        measure, path = time_to_first_token, ""
    else:
        backend = ("--listen", "127.0.0.1:0", "--mean-service-ms", "0.001", "--job-sizes", "deterministic")
        routing, measure, path = (), response_time, "/x"
    with backend_process(*backend) as (_, urls):
        port = free_port()
        backend_spec = urls[0] + (",types=m" if args.openai else "")
        serve = ChildProcess(
            "hetlb serve", hetlb_command("serve", "--listen", f"127.0.0.1:{port}", "--backend", backend_spec, *routing)
        )
        try:
            wait_listening("127.0.0.1", port, serve)
            direct, proxied = asyncio.run(
                latencies(urls[0] + path, f"http://127.0.0.1:{port}{path}", args.requests, measure)
            )
            print(f"{args.requests:,} requests each, one at a time, alternated (milliseconds)")
            print(f"{'':<10}{'p50':>8}{'p90':>8}")
            for name, values in (("direct", direct), ("proxied", proxied)):
                print(f"{name:<10}{np.median(values):>8.3f}{np.percentile(values, 90):>8.3f}")
            added = np.median(proxied) - np.median(direct)
            print(
                f"added latency (p50 difference): {added:.3f} ms; ratio of p50s {np.median(proxied) / np.median(direct):.2f}"
            )
            if args.throughput_seconds > 0:
                assert not args.openai, "--throughput-seconds measures plain requests"
                through = asyncio.run(throughput(f"http://127.0.0.1:{port}/x", args.throughput_seconds))
                alone = asyncio.run(throughput(urls[0] + "/x", args.throughput_seconds))
                print(f"requests per second, 32 outstanding: proxied {through:,.0f}, direct {alone:,.0f}")
        finally:
            serve.stop()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt), working("benchmarks/serve_overhead.py ", live=False):
        main()
