"""Deprecated: ``hetlb.live`` was split into packages by what a reader comes for, and its import
paths work until the next release with a :class:`DeprecationWarning` that names the new one.

===========================================  ===============================================
old                                          new
===========================================  ===============================================
hetlb.live (Backend, ServeConfig, ...)       hetlb.gateway
hetlb.live.config, dispatcher, fleet, ...    hetlb.gateway.config, ... (the routing core)
hetlb.live.downstream, upstream, proxy, ...  hetlb.gateway.http.downstream, ...
hetlb.live.picker                            hetlb.gateway.envoy.picker
hetlb.live.endpoint_picker                   hetlb.gateway.envoy.protocol
hetlb.live.envoy_config                      hetlb.gateway.envoy.bootstrap
hetlb.live.backend, engine                   hetlb.engines.backend, hetlb.engines.inference
hetlb.live.loadgen, inference_load           hetlb.load.open_loop, hetlb.load.inference
hetlb.live.testbed, peers, balancer_pools    hetlb.testbed, hetlb.testbed.peers, ...
hetlb.live.addresses, runtime, load_reports  hetlb.wire.addresses, ...
===========================================  ===============================================

(:data:`MOVED` lists every module.) An old module is a stand-in that reads every name from its new
module, so ``from hetlb.live.config import ServeConfig`` gives the one class there is.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings

MOVED = {
    "addresses": "hetlb.wire.addresses",
    "runtime": "hetlb.wire.runtime",
    "load_reports": "hetlb.wire.load_reports",
    "config": "hetlb.gateway.config",
    "dispatcher": "hetlb.gateway.dispatcher",
    "random_source": "hetlb.gateway.random_source",
    "job_types": "hetlb.gateway.job_types",
    "fleet": "hetlb.gateway.fleet",
    "probing": "hetlb.gateway.probing",
    "metrics": "hetlb.gateway.metrics",
    "admin": "hetlb.gateway.admin",
    "answers": "hetlb.gateway.answers",
    "serving": "hetlb.gateway.serving",
    "downstream": "hetlb.gateway.http.downstream",
    "upstream": "hetlb.gateway.http.upstream",
    "proxy": "hetlb.gateway.http.proxy",
    "header_lines": "hetlb.gateway.http.header_lines",
    "picker": "hetlb.gateway.envoy.picker",
    "endpoint_picker": "hetlb.gateway.envoy.protocol",
    "envoy_config": "hetlb.gateway.envoy.bootstrap",
    "backend": "hetlb.engines.backend",
    "engine": "hetlb.engines.inference",
    "loadgen": "hetlb.load.open_loop",
    "inference_load": "hetlb.load.inference",
    "peers": "hetlb.testbed.peers",
    "balancer_pools": "hetlb.testbed.balancer_pools",
    "testbed": "hetlb.testbed",
}
"""Each module of the old ``hetlb.live`` and the module that holds its code now."""

ALSO_IN = {
    "testbed": ("hetlb.testbed.scenario", "hetlb.testbed.commands", "hetlb.testbed.report", "hetlb.testbed.runs"),
    "envoy_config": ("hetlb.testbed.peers",),
    "proxy": ("hetlb.gateway.answers", "hetlb.wire.load_reports"),
}
"""Where the names of an old module went that its new module does not hold (Envoy alone is a
balancer of comparison; what an answer tells and the report headers are shared)."""
RENAMED = {
    ("config", "job_type"): ("hetlb.validation", "job_type_name"),
    ("config", "TYPE_NAME"): ("hetlb.validation", "JOB_TYPE_NAME"),
}
"""Names that moved under another name."""

GATEWAY_NAMES = ("Backend", "ServeConfig", "Signals", "load_config", "serve")
"""The names the old ``hetlb.live`` exported, now hetlb.gateway's."""

__all__: list[str] = []


def deprecated(old: str, new: str) -> None:
    warnings.warn(f"{old} is deprecated and goes in the next release; use {new}", DeprecationWarning, stacklevel=3)


def __getattr__(name: str):
    if name in GATEWAY_NAMES:
        deprecated(f"hetlb.live.{name}", f"hetlb.gateway.{name}")
        return getattr(importlib.import_module("hetlb.gateway"), name)
    raise AttributeError(f"module 'hetlb.live' has no attribute {name!r}")


class MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``hetlb.live.X`` of :data:`MOVED` and makes it a stand-in for the new module."""

    def find_spec(self, fullname, path, target=None):
        package, _, name = fullname.rpartition(".")
        if package != __name__ or name not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec):
        return None  # a plain module, filled by exec_module

    def exec_module(self, module: types.ModuleType) -> None:
        new_name = MOVED[module.__name__.rpartition(".")[2]]
        deprecated(module.__name__, new_name)
        new = importlib.import_module(new_name)
        module.__doc__ = f"Deprecated: {module.__name__} is {new_name}."
        old = module.__name__.rpartition(".")[2]

        def moved_name(name: str):
            if (old, name) in RENAMED:
                where, new_attribute = RENAMED[old, name]
                return getattr(importlib.import_module(where), new_attribute)
            for where in (new_name, *ALSO_IN.get(old, ())):
                holder = importlib.import_module(where)
                if hasattr(holder, name):
                    return getattr(holder, name)
            raise AttributeError(f"module {module.__name__!r} ({new_name}) has no attribute {name!r}")

        module.__getattr__ = moved_name  # type: ignore[method-assign]
        module.__dir__ = lambda: dir(new)  # type: ignore[method-assign]


if not any(isinstance(finder, MovedModules) for finder in sys.meta_path):
    sys.meta_path.append(MovedModules())
