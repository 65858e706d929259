"""The package's structure holds (docs/background/design.md): the live side's packages import one
way (the testbed uses the gateway, the engines and the load; the engines and the load know nothing
of the gateway, and the gateway nothing of them), ``theory`` never reaches the kernels, nothing but
the deprecated stand-ins reads ``hetlb.live``, top-level imports run in no circle, and no module is
over MAX_LINES lines."""

import ast
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[1] / "src"
MAX_LINES = 900

NEVER_IMPORTS = {
    "hetlb.wire": ("hetlb.gateway", "hetlb.engines", "hetlb.load", "hetlb.testbed", "hetlb.cli", "hetlb.live"),
    "hetlb.gateway": ("hetlb.engines", "hetlb.load", "hetlb.testbed", "hetlb.cli", "hetlb.live"),
    "hetlb.engines": ("hetlb.gateway", "hetlb.load", "hetlb.testbed", "hetlb.cli", "hetlb.live"),
    "hetlb.load": ("hetlb.gateway", "hetlb.engines", "hetlb.testbed", "hetlb.cli", "hetlb.live"),
    "hetlb.testbed": ("hetlb.cli", "hetlb.live"),
    "hetlb.theory": ("hetlb.kernels", "hetlb.simulation"),
    "hetlb.model": ("hetlb.kernels", "hetlb.simulation", "hetlb.experiments", "hetlb.gateway", "hetlb.cli"),
    "hetlb.kernels": ("hetlb.simulation", "hetlb.experiments", "hetlb.gateway", "hetlb.testbed", "hetlb.cli"),
}
"""A package (the key) and the packages none of its modules may import, at its top or in a function."""


def module_name(path: Path) -> str:
    parts = path.relative_to(SOURCE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(SOURCE.rglob("*.py"))}


def imported(path: Path, top_level_only: bool = False) -> set[str]:
    """The hetlb modules ``path`` imports (``from X import name`` counts X and X.name when that is a module)."""
    known = modules()
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(
                f"{node.module}.{alias.name}" for alias in node.names if f"{node.module}.{alias.name}" in known
            )
    return {name for name in names if name.startswith("hetlb")}


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


@pytest.mark.parametrize("package", sorted(NEVER_IMPORTS))
def test_a_package_imports_nothing_of_the_layers_it_must_not_know(package):
    wrong = []
    for name, path in modules().items():
        if within(name, package):
            wrong += [
                f"{name} imports {target}"
                for target in sorted(imported(path))
                if any(within(target, forbidden) for forbidden in NEVER_IMPORTS[package])
            ]
    assert wrong == []


def test_only_the_deprecated_stand_ins_read_hetlb_live():
    readers = [
        name
        for name, path in modules().items()
        if not within(name, "hetlb.live") and any(within(target, "hetlb.live") for target in imported(path))
    ]
    assert readers == []


def test_top_level_imports_run_in_no_circle():
    graph = {
        name: {target for target in imported(path, top_level_only=True) if target in modules()}
        for name, path in modules().items()
    }
    state: dict[str, int] = {}
    circle: list[str] = []

    def visit(node: str, path: list[str]) -> bool:
        state[node] = 1
        for target in sorted(graph[node]):
            if state.get(target) == 1 and target != node:
                if not within(node, target):  # a module that imports its own package is the parent's business
                    circle.extend(path[path.index(target) :] + [node, target] if target in path else [node, target])
                    return True
            elif state.get(target) is None and visit(target, path + [node]):
                return True
        state[node] = 2
        return False

    for node in sorted(graph):
        if state.get(node) is None and visit(node, []):
            break
    assert circle == []


def test_no_module_is_over_the_line_limit():
    long = {
        name: lines for name, path in modules().items() if (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}
