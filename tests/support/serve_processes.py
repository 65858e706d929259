"""Real processes on 127.0.0.1 for the live tests: free ports, processes started and always stopped,
and small HTTP helpers (standard library only, so that a test does not share the proxy's client)."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

from hetlb.processes import child_environment
from hetlb.wire.addresses import free_port_block

ROOT = Path(__file__).resolve().parents[2]
ECHO_BACKEND = Path(__file__).with_name("echo_backend.py")
START_TIMEOUT = 30.0


HANDED_OUT: set[int] = set()
"""Ports free_ports gave already in this test run (not bound yet, perhaps, but promised)."""


def free_ports(count: int = 1) -> int:
    """The first of ``count`` consecutive ports that are free now and were not handed out before."""
    for _ in range(200):
        base = free_port_block(count)
        wanted = set(range(base, base + count))
        if not wanted & HANDED_OUT:
            HANDED_OUT.update(wanted)
            return base
    raise RuntimeError("no free ports")


def listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.2)
        return probe.connect_ex(("127.0.0.1", port)) == 0


class Processes:
    """Processes started by a test; :meth:`stop_all` ends every one still running (the fixture's
    teardown calls it, also when the test failed)."""

    def __init__(self):
        self.running: list[subprocess.Popen] = []

    def start(self, argv: list[str], ready_port: int | None = None) -> subprocess.Popen:
        # output to files, not pipes: a long run never blocks on a full pipe
        errors = tempfile.TemporaryFile()
        process = subprocess.Popen(
            argv, env=child_environment(), stdout=subprocess.DEVNULL, stderr=errors, start_new_session=True
        )
        process.error_file = errors  # type: ignore[attr-defined]
        self.running.append(process)
        if ready_port is not None:
            deadline = time.monotonic() + START_TIMEOUT
            while not listening(ready_port):
                if process.poll() is not None:
                    raise RuntimeError(f"{argv[:4]} exited {process.returncode}: {error_text(process)}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{argv[:4]} did not listen on {ready_port}")
                time.sleep(0.05)
        return process

    def echo_backends(self, ports: list[int]) -> subprocess.Popen:
        process = self.start([sys.executable, str(ECHO_BACKEND), *map(str, ports)])
        for port in ports:
            self.wait_listening(process, port)
        return process

    def serve(self, *args: str, port: int, admin: int | None = None, ready: bool = True) -> subprocess.Popen:
        argv = [sys.executable, "-m", "hetlb", "serve", "--listen", f"127.0.0.1:{port}", *args]
        if admin is not None:
            argv += ["--admin", f"127.0.0.1:{admin}"]
        process = self.start(argv)
        if ready:
            self.wait_listening(process, admin if admin is not None else port)
            if admin is not None:
                assert get(f"http://127.0.0.1:{admin}/ready")[0] == 200
        return process

    def wait_listening(self, process, port: int) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while not listening(port):
            if process.poll() is not None:
                raise RuntimeError(f"exited {process.returncode}: {error_text(process)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"nothing listens on {port}")
            time.sleep(0.05)

    def stop(self, process: subprocess.Popen, timeout: float = 15.0) -> int:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        return process.returncode

    def stop_all(self) -> None:
        for process in reversed(self.running):
            self.stop(process, timeout=5.0)
            process.error_file.close()


def error_text(process: subprocess.Popen) -> str:
    """What a process wrote on standard error so far."""
    process.error_file.seek(0)
    return process.error_file.read().decode(errors="replace")


def finish(process: subprocess.Popen, timeout: float = 30.0) -> tuple[int, str]:
    """Wait for a process to end: (exit status, standard error)."""
    process.wait(timeout)
    return process.returncode, error_text(process)


def get(url: str, headers: dict | None = None, method: str = "GET", data: bytes | None = None, timeout=10.0):
    """(status, headers, body) of one request, its headers sent as given (http.client adds Host,
    Accept-Encoding and Content-Length only)."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        connection.request(method, parts.path + (f"?{parts.query}" if parts.query else ""), data, headers or {})
        answer = connection.getresponse()
        return answer.status, answer.headers, answer.read()
    finally:
        connection.close()


def status(admin: int) -> dict:
    code, _, body = get(f"http://127.0.0.1:{admin}/status")
    assert code == 200
    return json.loads(body)


def wait_for(condition, timeout: float = 10.0, step: float = 0.02):
    """Poll ``condition`` until it returns a true value (returned) or ``timeout`` passes (None)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(step)
    return None


def leftover_processes(marker: str) -> list[str]:
    """Command lines of running processes started by this test process (its descendants) that
    contain ``marker``: another test run on the same machine does not count."""
    parents, commands = {}, {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        parents[int(pid)] = int(stat.rsplit(")", 1)[1].split()[1])
        commands[int(pid)] = command

    def descends(pid: int) -> bool:
        seen = set()
        while pid > 1 and pid not in seen:
            seen.add(pid)
            pid = parents.get(pid, 0)
            if pid == os.getpid():
                return True
        return False

    return [command for pid, command in commands.items() if marker in command and descends(pid)]
