"""hetlb.jit: compiled functions are numba functions only once one is used, so that importing
hetlb (and running short runs as plain Python) does not import numba."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hetlb import jit

SRC = Path(__file__).resolve().parents[1] / "src"
ENV = {**os.environ, "PYTHONPATH": str(SRC)}


NUMBA_AT_THE_TOP = {"hetlb/jit.py", "hetlb/gateway/random_source.py"}
"""hetlb.jit, and the StructRef type of hetlb serve's random source (a numba class, defined when its
module is imported; only the live dispatcher imports it, and its compiled functions use hetlb.jit)."""


def test_no_module_but_hetlb_jit_imports_numba_at_its_top():
    """A module-level ``from numba import njit`` would import numba with hetlb, and its functions
    could not call hetlb's compiled functions before these are made numba functions."""
    offenders = []
    for path in sorted((SRC / "hetlb").rglob("*.py")):
        if path.relative_to(SRC).as_posix() in NUMBA_AT_THE_TOP:
            continue
        for node in ast.parse(path.read_text()).body:
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(name == "numba" or name.startswith("numba.") for name in names):
                offenders.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert not offenders, f"define compiled functions with hetlb.jit.njit, not numba's: {offenders}"


def test_importing_hetlb_and_its_commands_does_not_import_numba():
    code = "import sys, hetlb, hetlb.cli, hetlb.experiments; print('numba' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.skipif(jit.DISABLED, reason="compiled kernels")
def test_the_first_call_puts_numba_functions_in_place_of_the_stand_ins():
    code = (
        "import sys\n"
        "from hetlb.jit import LazyFunction\n"
        "from hetlb.policies import rules\n"
        "from hetlb.kernels import sampling\n"
        "assert type(rules.uniform_index) is LazyFunction and 'numba' not in sys.modules\n"
        "import numpy as np\n"
        "assert rules.uniform_index(np.random.default_rng(1), 5) in range(5)\n"
        "from numba.core.registry import CPUDispatcher\n"
        "assert isinstance(rules.uniform_index, CPUDispatcher) and isinstance(sampling.alias_draw, CPUDispatcher)\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr[-2000:]
