"""How late a test backend's answers reach a client: the time from each answer's departure epoch
(``X-Departure``, the host's monotonic clock) to the client's having read it, for a backend that
serves one request at a time and for one that serves up to c at once, whose timer moves whenever
the number in service changes.

Set-up, on 127.0.0.1: one ``hetlb backend`` process per case (mean service ``--mean-service-ms``
alone in service, exponential sizes), fed by Poisson arrivals from an aiohttp client in this
process at ``--load`` of the backend's capacity for ``--seconds``. The lateness holds the
backend's timer and event loop, the loopback and the client's own event loop; the model's
timeline, and so ``X-Sojourn-Ms``, holds none of it.

    python benchmarks/backend_lateness.py
    python benchmarks/backend_lateness.py --concurrency 32 --rate-curve saturating:alpha=0.1 --seconds 20
"""

from __future__ import annotations

import argparse
import asyncio
import time

import aiohttp
import numpy as np

from hetlb.model.servers import RateCurve
from hetlb.processes import ChildProcess, hetlb_command
from hetlb.progress import working


async def lateness_ms(url: str, rate: float, seconds: float, seed: int) -> np.ndarray:
    """Poisson requests at ``rate`` per second for ``seconds``: each answer's lateness in ms."""
    late: list[float] = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def one() -> None:
            async with session.get(url) as response:
                await response.read()
                late.append(time.monotonic() - float(response.headers["X-Departure"]))

        rng = np.random.default_rng(seed)
        tasks = []
        epoch = start = time.monotonic()
        while epoch < start + seconds:
            epoch += rng.exponential(1 / rate)
            await asyncio.sleep(max(0.0, epoch - time.monotonic()))
            tasks.append(asyncio.create_task(one()))
        await asyncio.gather(*tasks)
    return np.array(late) * 1e3


def measure(concurrency: int, curve: str, args) -> str:
    capacity = float(RateCurve.parse(curve).phi(concurrency)) / args.mean_service_ms * 1e3  # per second
    flags = ["--listen", "127.0.0.1:0", "--mean-service-ms", repr(args.mean_service_ms)]
    flags += ["--concurrency", str(concurrency), "--rate-curve", curve]
    child = ChildProcess("hetlb backend", hetlb_command("backend", *flags))
    try:
        (line,) = child.read_lines(1)
        late = asyncio.run(lateness_ms(line.split()[0], args.load * capacity, args.seconds, args.seed))
    finally:
        child.stop()
    return (
        f"c = {concurrency:<3} {curve:<24} {args.load * capacity:7.1f} requests/s  {len(late)} answers: lateness "
        f"mean {late.mean():.3f} ms, p50 {np.percentile(late, 50):.3f}, p99 {np.percentile(late, 99):.3f}, "
        f"max {late.max():.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=8, help="of the multi-slot backend (default 8)")
    parser.add_argument("--rate-curve", default="saturating:alpha=0.2", help="of the multi-slot backend")
    parser.add_argument("--mean-service-ms", type=float, default=10.0, help="alone in service (default 10)")
    parser.add_argument("--load", type=float, default=0.9, help="of each backend's capacity (default 0.9)")
    parser.add_argument("--seconds", type=float, default=8.0, help="of arrivals per case (default 8)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(measure(1, "independent", args))
    print(measure(args.concurrency, args.rate_curve, args))


if __name__ == "__main__":
    with working("benchmarks/backend_lateness.py ", live=False):
        main()
