"""hetlb serve's own work per proxied request, without the network: the proxy of one dispatcher
(hetlb.gateway.http.downstream, hetlb.gateway.http.proxy, hetlb.gateway.http.upstream) with in-memory transports on both
sides, so that what is counted is hetlb's Python and nothing of the kernel's.

A client connection sends ``GET / HTTP/1.1`` with a Host header, one at a time; the dispatcher
(``jsq`` over 8 backends, the default signals) picks a backend, whose kept-alive connection answers
as the instant nginx backends of benchmarks/live_throughput.py do (``200``, six header lines,
``X-Queue-Length: 0``, body ``ok``) at the next turn of the event loop.

Two measures:
- process CPU time per request, the best of ``--batches`` batches (noisy on a shared machine);
- with ``--callgrind``, the instructions per request as valgrind's callgrind counts them over the
  measured requests only (repeatable to a few instructions, whatever else the machine runs): the
  measure to compare two versions of the data path by.

    PYTHONPATH=src python benchmarks/proxy_work.py [--requests 20000]
    PYTHONPATH=src python benchmarks/proxy_work.py --callgrind [--requests 3000]   # takes 3 minutes
    PYTHONPATH=src python benchmarks/proxy_work.py --tasks      # every request as a task (no answer_now)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

from hetlb.gateway.config import ServeConfig  # noqa: E402
from hetlb.gateway.dispatcher import Dispatcher  # noqa: E402
from hetlb.gateway.http.downstream import ClientConnection, Limits  # noqa: E402
from hetlb.gateway.http.proxy import Proxy  # noqa: E402
from hetlb.gateway.http.upstream import Answer  # noqa: E402
from hetlb.gateway.metrics import Metrics  # noqa: E402
from hetlb.wire.runtime import freeze_heap, loop_factory  # noqa: E402

N_BACKENDS = 8
CONNECTIONS_PER_BACKEND = 4
REQUEST = b"GET / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n"
ANSWER = (
    b"HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Wed, 02 Dec 2026 13:17:15 GMT\r\n"
    b"Content-Type: text/plain\r\nContent-Length: 2\r\nConnection: keep-alive\r\nX-Queue-Length: 0\r\n\r\nok"
)
WARM_UP = 1000


class BackendTransport(asyncio.Transport):
    """A backend's kept-alive connection: each request written is answered at the loop's next turn."""

    def __init__(self, loop: asyncio.AbstractEventLoop, answer: Answer):
        super().__init__()
        self.loop, self.answer, self.closing = loop, answer, False

    def write(self, data) -> None:
        self.loop.call_soon(self.answer.data_received, ANSWER)

    def is_closing(self) -> bool:
        return self.closing

    def abort(self) -> None:
        self.closing = True

    close = abort


class ClientTransport(asyncio.Transport):
    """The client's connection: every answer written wakes the client."""

    def __init__(self):
        super().__init__()
        self.answered: asyncio.Future | None = None
        self.answers = 0

    def write(self, data) -> None:
        self.answers += 1
        if self.answered is not None and not self.answered.done():
            self.answered.set_result(None)

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 50000) if name == "peername" else default

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def measure(requests: int, batches: int, tasks: bool, callgrind: bool) -> None:
    loop = asyncio.get_running_loop()
    urls = [f"http://127.0.0.1:{9000 + s}" for s in range(N_BACKENDS)]
    config = ServeConfig.from_mapping({"backends": [{"url": url} for url in urls], "policy": "jsq"})
    dispatcher = Dispatcher(config, config.seed)
    dispatcher.warm_up()
    proxy = Proxy(config, dispatcher, Metrics(dispatcher))
    for s in range(N_BACKENDS):
        pool = proxy.upstream(s)[0]
        for _ in range(CONNECTIONS_PER_BACKEND):
            answer = Answer(pool)
            answer.connection_made(BackendTransport(loop, answer))
            pool.idle.append(answer)
    limits = Limits(config.max_header_bytes, config.header_timeout, config.body_timeout, config.keep_alive_timeout)
    connection = ClientConnection(proxy.handle, limits, proxy.on_server_error, set())
    if not tasks:
        connection.answer_now = proxy.answer_now
    client = ClientTransport()
    connection.connection_made(client)

    async def send(count: int) -> None:
        for _ in range(count):
            client.answered = loop.create_future()
            connection.data_received(REQUEST)
            await client.answered
            while connection.task is not None:  # (the request's task ends after its answer is written)
                await asyncio.sleep(0)

    await send(WARM_UP)
    freeze_heap()  # as hetlb serve does
    if callgrind:
        pid = str(os.getpid())
        subprocess.run(["callgrind_control", "--instr=on", pid], check=True, capture_output=True)
        await send(requests)
        subprocess.run(["callgrind_control", "--instr=off", pid], check=True, capture_output=True)
    else:
        best = float("inf")
        for _ in range(batches):
            start = time.process_time()
            await send(requests // batches)
            best = min(best, (time.process_time() - start) / (requests // batches))
        print(f"{1e6 * best:.2f} us of CPU per request (best of {batches} batches of {requests // batches})")
    in_flight = int(dispatcher.in_flight.sum())
    if client.answers != WARM_UP + requests - (0 if callgrind else requests % batches) or in_flight:
        sys.exit(f"proxy_work: {client.answers} answers, {in_flight} still in flight")


def under_callgrind(arguments: argparse.Namespace) -> None:
    """Run this benchmark again under callgrind, instrumenting the measured requests only."""
    if shutil.which("valgrind") is None:
        sys.exit("proxy_work: --callgrind needs valgrind (apt-get install valgrind)")
    with tempfile.TemporaryDirectory(prefix="hetlb-proxy-work-") as folder:
        command = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={folder}/out"]
        command += [sys.executable, __file__, "--requests", str(arguments.requests), "--counted"]
        command += ["--tasks"] if arguments.tasks else []
        run = subprocess.run(command, capture_output=True, text=True)
        found = re.search(r"Collected : (\d+)", run.stderr)
        if run.returncode != 0 or found is None:
            sys.exit(f"proxy_work: the run under callgrind failed:\n{run.stdout}{run.stderr[-2000:]}")
    print(f"{int(found.group(1)) / arguments.requests:,.0f} instructions per request ({arguments.requests} requests)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=None, help="measured requests (20000; 3000 with --callgrind)")
    parser.add_argument("--batches", type=int, default=7)
    parser.add_argument("--tasks", action="store_true", help="every request as a task (no answer_now)")
    parser.add_argument("--callgrind", action="store_true", help="count instructions with valgrind's callgrind")
    parser.add_argument("--counted", action="store_true", help=argparse.SUPPRESS)  # the run under callgrind
    arguments = parser.parse_args()
    if arguments.requests is None:
        arguments.requests = 3000 if arguments.callgrind or arguments.counted else 20000
    if arguments.callgrind:
        under_callgrind(arguments)
        return
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        runner.run(measure(arguments.requests, arguments.batches, arguments.tasks, arguments.counted))


if __name__ == "__main__":
    main()
