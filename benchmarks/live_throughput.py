"""Requests per second and CPU time per request through one dispatcher process with instant
backends: hetlb serve against HAProxy and nginx, measured in the same run, as ratios.

Set-up, all on 127.0.0.1:
- instant backends: 8 ports of one nginx instance answering ``200 ok`` at once with
  ``X-Queue-Length: 0`` (so hetlb serve's piggyback path runs too); without nginx, ``hetlb backend``
  with a deterministic service of 1 us (one Python process: then the backends may be the limit);
- the balancers, each one process with one thread or worker: ``hetlb serve --policy jsq`` (default
  signals, no admin), HAProxy ``balance leastconn`` (``nbthread 1``), nginx ``least_conn``
  (``worker_processes 1``), all with weight 1 on the 8 backends;
- the load: wrk (closed loop: ``--connections`` connections each sending its next request when the
  last is answered, for ``--seconds``) when installed, else an aiohttp client of the same kind in a
  process of its own. Closed loop is right here: it measures the most a balancer can pass, not
  latency under a given load.

The balancers take turns, round after round (``--rounds``), so a change in what else the shared
machine runs touches them alike; per balancer the median over rounds is reported, and the ratios
hetlb / HAProxy and hetlb / nginx of the medians. The CPU time per request is the balancer's
process tree's user and system time (``/proc/PID/stat``, its workers included) over the run,
divided by the requests answered: what each proxied request costs, whatever else the machine runs.
Goals: hetlb serve >= 2,000 requests/s, and at most 5 times nginx's CPU time per request. With nginx
and uvloop installed, ``python-floor`` runs too: a proxy of Python on uvloop that does nothing but
pass the bytes on (:data:`PYTHON_FLOOR`), the event loop's own share of a request's cost.

    python benchmarks/live_throughput.py                   # 3 rounds of 10 s per balancer
    python benchmarks/live_throughput.py --rounds 5 --seconds 5 --connections 32

Writes out/benchmarks/live-throughput.json (--output benchmarks/results/live-throughput.json renews the
figures the docs quote; with the machine's load average before and after).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

from hetlb.cli import build_parser  # noqa: E402
from hetlb.processes import ChildProcess, hetlb_command, program_path, wait_listening  # noqa: E402
from hetlb.progress import working  # noqa: E402
from hetlb.testbed.peers import PEERS, start_peer  # noqa: E402
from hetlb.wire.addresses import free_ports  # noqa: E402

N_BACKENDS = 8


def instant_backends_nginx(folder: Path) -> tuple[ChildProcess, list[str]]:
    """One nginx (one worker) answering 200 at once on N_BACKENDS ports."""
    ports = free_ports(N_BACKENDS)
    servers = "\n".join(
        f"""    server {{
        listen 127.0.0.1:{port};
        location / {{ add_header X-Queue-Length 0; return 200 "ok"; }}
    }}"""
        for port in ports
    )
    config = folder / "instant.conf"
    config.write_text(
        f"""daemon off;
worker_processes 1;
pid {folder}/instant.pid;
error_log {folder}/instant-error.log warn;
events {{ worker_connections 8000; }}
http {{
    access_log off;
    keepalive_requests 1000000;
    client_body_temp_path {folder}/body;
    proxy_temp_path {folder}/proxy;
    fastcgi_temp_path {folder}/fastcgi;
    uwsgi_temp_path {folder}/uwsgi;
    scgi_temp_path {folder}/scgi;
{servers}
}}
"""
    )
    binary = program_path("nginx")
    assert binary is not None
    child = ChildProcess("instant nginx", [binary, "-p", str(folder), "-e", str(folder / "e.log"), "-c", str(config)])
    for port in ports:
        wait_listening("127.0.0.1", port, child)
    return child, [f"http://127.0.0.1:{port}" for port in ports]


def instant_backends_hetlb() -> tuple[ChildProcess, list[str]]:
    listen = [argument for _ in range(N_BACKENDS) for argument in ("--listen", "127.0.0.1:0")]
    child = ChildProcess(
        "hetlb backend",
        hetlb_command("backend", *listen, "--job-sizes", "deterministic", "--mean-service-ms", "0.001"),
    )
    return child, [line.split()[0] for line in child.read_lines(N_BACKENDS)]


def instant_backends(folder: Path) -> tuple[ChildProcess, list[str], str]:
    """The instant backends (nginx's, else hetlb backend's), their URLs and what they are."""
    if program_path("nginx"):
        return (*instant_backends_nginx(folder), "nginx return 200")
    return (*instant_backends_hetlb(), "hetlb backend, 1 us deterministic service")


def load_tool():
    """The load generator's name and its measure(url, seconds, connections): wrk, else aiohttp."""
    return ("wrk", measure_wrk) if shutil.which("wrk") else ("aiohttp", measure_aiohttp)


def start_hetlb(port: int, backends: list[str]) -> ChildProcess:
    arguments = ["serve", "--listen", f"127.0.0.1:{port}", "--policy", "jsq", "--quiet"]
    for url in backends:
        arguments += ["--backend", url]
    child = ChildProcess("hetlb serve", hetlb_command(*arguments))
    wait_listening("127.0.0.1", port, child)
    return child


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of a process and its descendants so far (Linux /proc)."""
    total = 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / ticks
            for task in Path(f"/proc/{current}/task").iterdir():
                pending.extend(int(child) for child in (task / "children").read_text().split())
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def measure_wrk(url: str, seconds: float, connections: int) -> dict:
    output = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{seconds:g}s", url], capture_output=True, text=True, check=True
    ).stdout
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))
    requests = int(re.search(r"(\d+) requests in", output).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    socket_errors = re.search(r"Socket errors: (.*)", output)
    return {
        "requests_per_s": rate,
        "requests": requests,
        "non_2xx": int(errors.group(1)) if errors else 0,
        "socket_errors": socket_errors and socket_errors.group(1),
    }


PYTHON_FLOOR = """
import asyncio, sys, uvloop
port, backends = int(sys.argv[1]), [int(p) for p in sys.argv[2:]]
idle = []
class Backend(asyncio.Protocol):
    def connection_made(self, transport): self.transport, self.client, self.data = transport, None, b""
    def data_received(self, data):
        self.data += data
        if b"\\r\\n\\r\\n" in self.data and self.data.endswith(b"ok"):  # the instant backends' whole answer
            client, self.client, answer, self.data = self.client, None, self.data, b""
            idle.append(self)
            client.transport.write(answer)
class Client(asyncio.Protocol):
    def connection_made(self, transport): self.transport, self.data, self.turn = transport, b"", 0
    def data_received(self, data):
        self.data += data
        if b"\\r\\n\\r\\n" in self.data:
            self.data = b""
            asyncio.get_running_loop().create_task(self.forward())
    async def forward(self):
        self.turn += 1
        backend = idle.pop() if idle else (await loop.create_connection(Backend, "127.0.0.1", backends[self.turn % len(backends)]))[1]
        backend.client = self
        backend.transport.write(b"GET / HTTP/1.1\\r\\nHost: backend\\r\\n\\r\\n")
async def main():
    global loop
    loop = asyncio.get_running_loop()
    await loop.create_server(Client, "127.0.0.1", port, backlog=1024)
    print("listening", flush=True)
    await asyncio.Event().wait()
uvloop.run(main())
"""
"""The reference of what Python on uvloop costs per proxied request at the least: a proxy that only
finds the end of each head and passes the bytes on (no parsing, no decision, no accounting; GET
only, the instant backends' answers only). Measured beside hetlb serve, it tells the event loop's
share of hetlb's cost from that of hetlb's own work."""


def start_python_floor(port: int, backends: list[str]) -> ChildProcess:
    ports = [url.rsplit(":", 1)[1] for url in backends]
    child = ChildProcess("python floor", [sys.executable, "-c", PYTHON_FLOOR, str(port), *ports])
    wait_listening("127.0.0.1", port, child)
    return child


CLIENT = """
import asyncio, sys, time, aiohttp
url, seconds, connections = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
async def main():
    done = bad = 0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=connections)) as session:
        end = time.monotonic() + seconds
        async def worker():
            nonlocal done, bad
            while time.monotonic() < end:
                async with session.get(url) as response:
                    await response.read()
                    done += 1
                    bad += response.status >= 300
        start = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(connections)))
        print(done / (time.monotonic() - start), bad, done)
asyncio.run(main())
"""


def measure_aiohttp(url: str, seconds: float, connections: int) -> dict:
    output = subprocess.run(
        [sys.executable, "-c", CLIENT, url, str(seconds), str(connections)], capture_output=True, text=True, check=True
    ).stdout.split()
    return {
        "requests_per_s": float(output[0]),
        "requests": int(output[2]),
        "non_2xx": int(output[1]),
        "socket_errors": None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--output", default=str(HERE.parent / "out" / "benchmarks" / "live-throughput.json"))
    args = parser.parse_args()

    tool, measure = load_tool()
    serve_available = "serve" in build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    balancers = (["hetlb"] if serve_available else []) + [
        peer_id for peer_id in ("haproxy-leastconn", "nginx-least_conn") if program_path(PEERS[peer_id].program)
    ]
    if program_path("nginx") and importlib.util.find_spec("uvloop"):
        balancers.append("python-floor")
    if not serve_available:
        print("note: hetlb serve is not part of this build; only the peers run", file=sys.stderr)
    load_before = os.getloadavg()
    rates: dict[str, list[float]] = {name: [] for name in balancers}
    cpu_us: dict[str, list[float]] = {name: [] for name in balancers}
    runs = []
    with tempfile.TemporaryDirectory(prefix="hetlb-bench-") as folder:
        folder_path = Path(folder)
        backend, urls, backend_kind = instant_backends(folder_path)
        try:
            for round_index in range(args.rounds):
                for name in balancers:
                    (port,) = free_ports(1)
                    if name == "hetlb":
                        child = start_hetlb(port, urls)
                    elif name == "python-floor":
                        child = start_python_floor(port, urls)
                    else:
                        child = start_peer(PEERS[name], port, [(url, 1.0) for url in urls], folder_path / name)
                    try:
                        before = cpu_seconds(child.process.pid)
                        result = measure(f"http://127.0.0.1:{port}/", args.seconds, args.connections)
                        result["cpu_us_per_request"] = (
                            1e6 * (cpu_seconds(child.process.pid) - before) / result["requests"]
                        )
                    finally:
                        child.stop()
                    rates[name].append(result["requests_per_s"])
                    cpu_us[name].append(result["cpu_us_per_request"])
                    runs.append({"round": round_index, "balancer": name, **result})
                    print(
                        f"round {round_index + 1}: {name:<18} {result['requests_per_s']:9.0f} requests/s, "
                        f"{result['cpu_us_per_request']:7.1f} us of CPU per request",
                        flush=True,
                    )
        finally:
            backend.stop()
    medians = {name: statistics.median(values) for name, values in rates.items() if values}
    cpu_medians = {name: statistics.median(values) for name, values in cpu_us.items() if values}
    ratios, cpu_ratios = {}, {}
    if "hetlb" in medians:
        ratios = {f"hetlb/{name}": medians["hetlb"] / medians[name] for name in medians if name != "hetlb"}
        cpu_ratios = {f"hetlb/{name}": cpu_medians["hetlb"] / cpu_medians[name] for name in medians if name != "hetlb"}
    print()
    for name, value in medians.items():
        print(
            f"{name:<18} median {value:9.0f} requests/s, {cpu_medians[name]:7.1f} us of CPU per request "
            f"over {len(rates[name])} rounds"
        )
    for name, value in ratios.items():
        print(f"{name:<30} throughput {value:.3f}, CPU per request {cpu_ratios[name]:.2f}")
    document = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "load_tool": tool,
        "backends": f"{N_BACKENDS} x {backend_kind}",
        "connections": args.connections,
        "seconds": args.seconds,
        "medians_requests_per_s": medians,
        "medians_cpu_us_per_request": cpu_medians,
        "ratios": ratios,
        "cpu_per_request_ratios": cpu_ratios,
        "runs": runs,
    }
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(document, indent=2) + "\n")
    print(f"written: {args.output}")


if __name__ == "__main__":
    with working("benchmarks/live_throughput.py ", live=False):
        main()
