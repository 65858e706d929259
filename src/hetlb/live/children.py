"""Child processes of the testbed (backends, dispatchers, HAProxy, nginx): started with their output
captured, waited for until they announce themselves or listen, and always stopped (SIGTERM, then
SIGKILL after a grace period)."""

from __future__ import annotations

import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import hetlb

STOP_GRACE_S = 5.0
"""Seconds a child has to exit after SIGTERM before it is killed."""
START_TIMEOUT_S = 30.0
"""Seconds a child has to announce itself (importing hetlb's kernels can take a few seconds)."""


def hetlb_command(*args: str) -> list[str]:
    """The command line of ``hetlb ARGS`` with this Python and this copy of hetlb."""
    return [sys.executable, "-m", "hetlb", *args]


def child_environment() -> dict[str, str]:
    """This environment, with this copy of hetlb first on PYTHONPATH (so a child runs the same code)."""
    source = str(Path(hetlb.__file__).resolve().parents[1])
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [source, environment.get("PYTHONPATH")]))
    return environment


class ChildFailed(RuntimeError):
    """A child process that could not start, exited or stayed silent when it should have served."""


class ChildProcess:
    """One child: standard output read line by line (``read_lines``), standard error kept in a
    temporary file for the error message if it fails."""

    def __init__(self, name: str, command: Sequence[str], cwd: str | None = None):
        self.name = name
        self.command = list(command)
        self._stderr = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            self.command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            bufsize=0,  # unbuffered: a line read never pulls the next ones out of the selector's sight
            stderr=self._stderr,
            env=child_environment(),
            cwd=cwd,
            start_new_session=True,  # a Ctrl-C of the terminal reaches the parent, which stops it
        )

    def stderr_text(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace").strip()

    def failure(self, what: str) -> ChildFailed:
        return ChildFailed(f"{self.name} {what}: {self.stderr_text()[-2000:] or '(nothing on standard error)'}")

    def read_lines(self, count: int, timeout: float = START_TIMEOUT_S) -> list[str]:
        """The first ``count`` lines of standard output, or ChildFailed if the child exits or stays
        silent for ``timeout`` seconds."""
        assert self.process.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            while len(lines) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self.failure(f"did not start within {timeout:g} s")
                if selector.select(left):
                    line = self.process.stdout.readline()
                    if not line:
                        self.process.wait()
                        raise self.failure(f"exited with status {self.process.returncode}")
                    lines.append(line.decode().strip())
        return lines

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after STOP_GRACE_S; the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._stderr.close()
        return self.process.returncode


def wait_listening(host: str, port: int, child: ChildProcess, timeout: float = START_TIMEOUT_S) -> None:
    """Wait until something accepts connections on host:port (or ChildFailed if ``child`` exits)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            if child.process.poll() is not None:
                raise child.failure(f"exited with status {child.process.returncode}") from None
            if time.monotonic() > deadline:
                raise child.failure(f"does not listen on {host}:{port} after {timeout:g} s") from None
            time.sleep(0.05)


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct ports free on ``host`` now (the system's choice; another program may take
    one before it is used, so a child that cannot listen must be reported, not retried silently)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((host, 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def free_port_block(count: int, host: str = "127.0.0.1", attempts: int = 50) -> int:
    """The first of ``count`` consecutive ports free on ``host`` now (for ``--dispatchers M``, whose
    dispatcher m listens on PORT + m)."""
    for _ in range(attempts):
        (first,) = free_ports(1, host)
        if first + count - 1 > 65535:
            continue
        sockets = []
        try:
            for port in range(first, first + count):
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sockets.append(sock)
                sock.bind((host, port))
            return first
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
    raise ChildFailed(f"found no {count} consecutive free ports on {host}")
