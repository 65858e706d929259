"""Plugins: modules, or Python files, that register policies of their own when imported.

A plugin is any module that calls :func:`hetlb.register_policy` at import
(docs/how-to/your-own-policy.md). :func:`load_plugins` imports each one once per process: a
scenario's ``plugins`` key in [policy] (docs/reference/scenario.md) and ``hetlb simulate
--plugin`` call it, and the workers of a sweep, which rebuild each scenario, call it again
through the scenario, so a policy of a plugin runs wherever its scenario does.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from hetlb import validation
from hetlb.errors import InputError

_loaded: dict[str, ModuleType] = {}
"""The plugins imported in this process, by the name or resolved path they were given as."""


def load_plugins(names, field: str = "plugins") -> list[ModuleType]:
    """Import each of ``names`` (a module name such as ``mylab.policies``, or the path of a ``.py``
    file, relative to the working directory) once per process; returns the modules. A module that
    cannot be found, or that fails while it is imported (a bad registration among them), is a
    one-line :class:`hetlb.errors.InputError` naming it.

    Parameters
    ----------
    names
        Module names or paths of .py files.
    field
        The field an error names (the key or flag the names came from).

    Returns
    -------
    list of module
        The imported modules, in order.
    """
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, (list, tuple)):
        raise InputError(field, f"must be a list of module names or .py files, got {validation.shown(names)}")
    return [load_plugin(name, f"{field}[{i}]") for i, name in enumerate(names)]


def load_plugin(name, field: str = "plugin") -> ModuleType:
    """Import one plugin (see :func:`load_plugins`)."""
    if not isinstance(name, str) or not name.strip():
        raise InputError(field, f"must be a module name or the path of a .py file, got {validation.shown(name)}")
    is_file = name.endswith(".py") or "/" in name or "\\" in name
    key = str(Path(name).resolve()) if is_file else name
    if key not in _loaded:
        _loaded[key] = _import_file(Path(key), field) if is_file else _import_module(name, field)
    return _loaded[key]


def _import_module(name: str, field: str) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    try:
        found = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        found = None
    if found is None:
        raise InputError(field, f"no module {name!r} to import (give a module on the Python path or a .py file)")
    return _run(lambda: importlib.import_module(name), name, field)


def _import_file(path: Path, field: str) -> ModuleType:
    if not path.is_file():
        raise InputError(field, f"no file {str(path)!r} to import")
    module_name = f"hetlb_plugin_{path.stem}_{hashlib.sha256(str(path).encode()).hexdigest()[:8]}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise InputError(field, f"{str(path)!r} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    loader = spec.loader

    def run():
        loader.exec_module(module)
        return module

    try:
        return _run(run, str(path), field)
    except InputError:
        del sys.modules[module_name]
        raise


def _run(load, name: str, field: str) -> ModuleType:
    """``load()``, with any error it raises as one line naming the plugin."""
    try:
        return load()
    except InputError as error:
        raise InputError(field, f"plugin {name}: {error}") from None
    except Exception as error:  # noqa: BLE001 (a plugin is the user's code; any failure is theirs to read)
        import traceback  # only when a plugin fails

        where = traceback.extract_tb(error.__traceback__)[-1]
        raise InputError(
            field,
            f"plugin {name} failed at {Path(where.filename).name}:{where.lineno}: {type(error).__name__}: {error}",
        ) from None
