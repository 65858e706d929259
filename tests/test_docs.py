"""The documentation runs: every python block of the pages below executes, in order, in one
namespace per page; and the policy reference covers every registered policy."""

import re
from pathlib import Path

import pytest

from hetlb.policies import POLICIES

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGES_WITH_CODE = [
    "tutorial.md",
    "reference/diffusion.md",
    "reference/slotted.md",
    "reference/bounding-systems.md",
    "how-to/placement.md",
    "background/tie-breaking.md",
]


@pytest.mark.parametrize("page", PAGES_WITH_CODE)
def test_python_blocks_run(page):
    text = (DOCS / page).read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks
    namespace = {}
    for block in blocks:
        exec(compile(block, page, "exec"), namespace)


def test_policy_reference_lists_every_policy():
    text = (DOCS / "reference" / "policies.md").read_text()
    for policy_id in POLICIES:
        assert f"| `{policy_id}` |" in text
