"""The command lines of the testbed's children: ``hetlb backend`` for the scenario's servers, and
``hetlb serve`` or ``hetlb pick`` for each run's dispatchers."""

from __future__ import annotations

from hetlb.model.job_sizes import SCV_KINDS
from hetlb.model.servers import RateCurve, concurrency_text
from hetlb.testbed.scenario import type_name


def curve_argument(curve: RateCurve) -> str:
    """A rate curve as ``hetlb backend`` reads it, every digit kept (its text rounds to 6)."""
    if curve.kind == "saturating":
        return f"saturating:alpha={curve.alpha!r}"
    if curve.kind == "table":
        return "table:" + ",".join(repr(value) for value in curve.values)
    return curve.kind


def listen_arguments(system, models: list[str] | None = None) -> list[str]:
    """``hetlb backend --listen`` of each server: its speed, and its concurrency and rate curve when
    it serves several requests at once; with ``models`` (one per job type) the models it holds."""
    held = types_of_servers(system, models) if models is not None else None
    arguments = []
    for s, speed in enumerate(system.speed.tolist()):
        spec = f"127.0.0.1:0,speed={speed!r}"
        if system.concurrency[s] != 1:
            concurrency = concurrency_text(system.concurrency[s])
            spec += f",concurrency={'inf' if concurrency == 'unlimited' else concurrency}"
            spec += f",rate_curve={curve_argument(system.rate_curve[s])}"
        if held is not None:
            spec += ",models=" + "|".join(held[s])
        arguments += ["--listen", spec]
    return arguments


def types_of_servers(system, names: list[str]) -> list[list[str]]:
    """The names of the job types each server may serve (the compatibility graph)."""
    types_of: list[list[str]] = [[] for _ in range(system.n_servers)]
    for k in range(system.n_types):
        for s in system.graph.servers_of(k):
            types_of[s].append(names[k])
    return types_of


def job_size_arguments(job_sizes) -> list[str]:
    """``hetlb backend --job-sizes`` (and ``--scv``) of the system's job sizes."""
    kind = job_sizes.kind if job_sizes.path is None else f"empirical:{job_sizes.path}"
    return ["--job-sizes", kind] + (["--scv", repr(job_sizes.scv)] if job_sizes.kind in SCV_KINDS else [])


def backend_specs(system, urls: list[str], names: list[str] | None = None) -> list[str]:
    """``hetlb serve --backend`` specs of the system's servers at ``urls``: speed, job types (when
    the graph is not complete, or always when ``names`` names them: an engine's models) and buffer
    (when finite)."""
    from hetlb.constants import INFINITE_BUFFER

    always = names is not None
    types_of = types_of_servers(system, names if names is not None else [type_name(k) for k in range(system.n_types)])
    specs = []
    for s, url in enumerate(urls):
        spec = f"{url},speed={system.speed[s]:g}"
        if always or not system.graph.is_complete():
            spec += ",types=" + "|".join(types_of[s])
        if system.buffer[s] != INFINITE_BUFFER:
            spec += f",buffer={int(system.buffer[s])}"
        specs.append(spec)
    return specs


def serve_arguments(policy: dict, listen_port: int, admin_port: int, specs: list[str], testbed) -> list[str]:
    """The command line of ``hetlb serve`` for one run."""
    arguments = ["serve", "--listen", f"127.0.0.1:{listen_port}", "--admin", f"127.0.0.1:{admin_port}"]
    arguments += ["--dispatchers", str(testbed.dispatchers)]
    return arguments + dispatcher_arguments(policy, specs, testbed, testbed.seed)


def pick_arguments(policy: dict, grpc_port: int, admin_port: int, specs: list[str], testbed, m: int) -> list[str]:
    """The command line of picker m's ``hetlb pick`` for one run (its seed the testbed's + m, as
    hetlb serve seeds its dispatcher m)."""
    arguments = ["pick", "--listen", f"127.0.0.1:{grpc_port}", "--admin", f"127.0.0.1:{admin_port}"]
    return arguments + dispatcher_arguments(policy, specs, testbed, testbed.seed + m)


def dispatcher_arguments(policy: dict, specs: list[str], testbed, seed: int) -> list[str]:
    """The flags of a dispatcher's policy, signals, job types and backends, hetlb serve's and hetlb pick's."""
    arguments = ["--policy", policy["id"], "--signals", testbed.signals_of(policy)]
    arguments += ["--seed", str(seed), "--quiet"]
    if testbed.engine is not None:
        arguments += ["--type-body-field", "model"]
    for name, value in policy.items():
        if name == "d":
            arguments += ["--d", str(value)]
        elif name == "p_hat":
            arguments += ["--p-hat", str(value)]
        elif name not in ("id", "signals"):
            arguments += ["--set", f"{name}={value}"]
    for spec in specs:
        arguments += ["--backend", spec]
    return arguments
