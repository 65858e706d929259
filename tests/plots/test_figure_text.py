"""Figure text is matplotlib mathtext: every label, legend and title that a figure of hetlb draws
parses, and none keeps the ASCII math it replaced (``varsigma``, ``E X_{+1}``, ``lambda_Sigma``)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from matplotlib.mathtext import MathTextParser

import hetlb
from hetlb.experiments.buke import MEASURE_LABELS
from hetlb.plots.figures import BAND_LABEL, LABELS

SOURCE = Path(hetlb.__file__).parent
FIGURE_KEYWORDS = {"xlabel", "ylabel", "title", "label", "bound_label", "band_label", "legend_title"}
FIGURE_MODULES = [
    "plots/figures.py",
    "plots/sweeps.py",
    "demo.py",
    "experiments/buke.py",
    "experiments/weng.py",
    "experiments/zhou/series.py",
    "experiments/zhou/heavy_traffic.py",
    "experiments/zhou/continuous.py",
    "results/bounding.py",
    "theory/diffusion.py",
    "theory/meanfield/transients.py",
    "theory/meanfield/limit.py",
    "results/run.py",
    "testbed/runs.py",
]
ASCII_MATH = [
    r"\bvarsigma\b",
    r"\blambda\b",
    r"\bmu\b",
    r"\brho\b",
    r"\bzeta\b",
    r"\beps\b",
    r"\beta\b",
    r"\bxi_",
    r"\bp_hat\b",
    r"C\*/",
    r"\bE ?\|",
    r"\bE X",
    r"_\{",
    r"\^",
    r">=",
    r"\+-",
    r"_Sigma",
]
"""ASCII forms of math that must not be left outside ``$...$``."""


def literal_text(node: ast.expr) -> str | None:
    """The text of a string literal; an f-string's placeholders drawn as ``1``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(literal_text(v) or "1" if isinstance(v, ast.Constant) else "1" for v in node.values)
    return None


def figure_texts() -> list[tuple[str, str]]:
    """(where, text) for every literal passed as figure text in the figure modules."""
    found = [("LABELS", text) for text in LABELS.values()]
    found += [("MEASURE_LABELS", text) for text in MEASURE_LABELS.values()]
    found.append(("BAND_LABEL", BAND_LABEL))
    for module in FIGURE_MODULES:
        tree = ast.parse((SOURCE / module).read_text())
        for node in ast.walk(tree):
            pairs = []
            if isinstance(node, ast.Call):
                pairs = [(k.arg, k.value) for k in node.keywords]
            elif isinstance(node, ast.Dict):
                pairs = [(k.value, v) for k, v in zip(node.keys, node.values) if isinstance(k, ast.Constant)]
            for key, value in pairs:
                text = literal_text(value) if key in FIGURE_KEYWORDS else None
                if text:
                    found.append((f"{module}:{value.lineno}", text))
    return found


TEXTS = figure_texts()


def test_the_figure_text_is_found():
    where = {w.split(":")[0] for w, _ in TEXTS}
    assert {"LABELS", "MEASURE_LABELS", "experiments/buke.py", "experiments/zhou/heavy_traffic.py"} <= where
    assert r"$c = \varsigma + \nu$" in [t for _, t in TEXTS]


@pytest.mark.parametrize("where, text", TEXTS, ids=[w for w, _ in TEXTS])
def test_figure_text_is_mathtext(where, text):
    parts = text.split("$")
    assert len(parts) % 2 == 1, f"{where}: unbalanced $ in {text!r}"
    parser = MathTextParser("agg")
    for math in parts[1::2]:
        parser.parse(f"${math}$")
    plain = " ".join(parts[0::2])
    left = [p for p in ASCII_MATH if re.search(p, plain)]
    assert not left, f"{where}: ASCII math {left} outside $...$ in {text!r}"
