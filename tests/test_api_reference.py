"""The API reference covers the public API: every name of the packages' ``__all__`` is on a page of
docs/api/, every public function, class and method has a docstring, and the docstrings document
their parameters in the numpy convention that the site renders as tables (parsed here by griffe,
the parser of the site's build).
"""

import dataclasses
import importlib
import inspect
import re
from pathlib import Path

import pytest

griffe = pytest.importorskip("griffe", reason="griffe comes with mkdocstrings (pip install '.[docs]')")

ROOT = Path(__file__).resolve().parents[1]
API_PAGES = ROOT / "docs" / "api"
PACKAGES = (
    "hetlb",
    "hetlb.model",
    "hetlb.graphs",
    "hetlb.policies",
    "hetlb.results",
    "hetlb.stats",
    "hetlb.theory",
    "hetlb.theory.meanfield",
    "hetlb.experiments",
    "hetlb.experiments.zhou",
    "hetlb.gateway",
    "hetlb.plots",
)
"""The public packages: each has an ``__all__``, and a page (or a section of one) in docs/api/."""


def public_names() -> list[tuple[str, str, object]]:
    """(package, name, object) for every name of every public package's ``__all__``."""
    names = []
    for package in PACKAGES:
        module = importlib.import_module(package)
        names += [(package, name, getattr(module, name)) for name in module.__all__]
    return names


def public_callables() -> dict[str, object]:
    """The public functions and classes, each once under the first public name that exports it,
    with the public methods and properties each class defines (not those it inherits)."""
    found: dict[str, object] = {}
    seen: set[int] = set()
    for package, name, value in public_names():
        if not (inspect.isclass(value) or inspect.isfunction(value)) or id(value) in seen:
            continue
        seen.add(id(value))
        found[f"{package}.{name}"] = value
        if inspect.isclass(value):
            for attribute, member in vars(value).items():
                function = member.__func__ if isinstance(member, classmethod | staticmethod) else member
                if not attribute.startswith("_") and (inspect.isfunction(function) or isinstance(function, property)):
                    found[f"{package}.{name}.{attribute}"] = function
    return found


def own_docstring(value) -> str | None:
    """The docstring written for ``value``: a class's own (not one generated or inherited); a
    function's, or for a method that overrides another, the one it inherits (the site shows it)."""
    if isinstance(value, property):
        return value.__doc__ or inspect.getdoc(value.fget)
    return value.__dict__.get("__doc__") if inspect.isclass(value) else inspect.getdoc(value)


def parameters(value) -> list[str]:
    """The parameters a caller passes (a class: its constructor's; a dataclass: the fields it
    declares, those it inherits being documented with the class that declares them), as numpy
    docstrings name them."""
    if isinstance(value, property):
        return []
    if dataclasses.is_dataclass(value):
        own = value.__dict__.get("__annotations__", {})
        return [field.name for field in dataclasses.fields(value) if field.name in own and field.init]
    try:
        signature = inspect.signature(value)
    except (TypeError, ValueError):
        return []
    stars = {inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.VAR_KEYWORD: "**"}
    return [stars.get(p.kind, "") + name for name, p in signature.parameters.items() if name not in ("self", "cls")]


def documented_parameters(docstring: str) -> list[str] | None:
    """The names of the numpy Parameters section of ``docstring``; None without one."""
    parsed = griffe.Docstring(inspect.cleandoc(docstring), parser=griffe.Parser.numpy).parse(warn_missing_types=False)
    sections = [section for section in parsed if section.kind is griffe.DocstringSectionKind.parameters]
    return [parameter.name for section in sections for parameter in section.value] if sections else None


def resolve(path: str):
    """The object at a dotted path: a module, or an attribute of one."""
    module_name, _, attribute = path.rpartition(".")
    if not module_name:
        return importlib.import_module(path)
    try:
        return getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError):
        return importlib.import_module(path)


def test_every_public_name_is_on_a_page_of_the_api_reference():
    pages = "\n".join(page.read_text() for page in API_PAGES.glob("*.md"))
    directives = set(re.findall(r"^::: (\S+)$", pages, flags=re.M))
    assert set(re.findall(r"\]\[([\w.]+)\]", pages)) <= directives  # the cross-references to names on another page
    documented = {id(resolve(path)) for path in directives}
    for package, name, value in public_names():
        shared = inspect.isclass(value) or inspect.isfunction(value)  # one page documents it for every package
        assert (id(value) in documented) if shared else (f"{package}.{name}" in directives), f"{package}.{name}"


def test_every_public_function_and_class_has_a_docstring():
    missing = [name for name, value in public_callables().items() if not (own_docstring(value) or "").strip()]
    assert missing == []


def test_docstrings_document_every_parameter():
    undocumented = {}
    for name, value in public_callables().items():
        wanted = parameters(value)
        documented = documented_parameters(own_docstring(value) or "")
        if wanted and documented != wanted:
            undocumented[name] = {"signature": wanted, "docstring": documented}
    assert undocumented == {}, "the Parameters section names each parameter once, in the signature's order"
