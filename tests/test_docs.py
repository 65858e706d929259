"""The documentation runs: every python block of the tutorial executes, and the policy reference
covers every registered policy."""

import re
from pathlib import Path

from hetlb.policies import POLICIES

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_tutorial_code_runs():
    text = (DOCS / "tutorial.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) >= 5
    namespace = {}
    for block in blocks:
        exec(compile(block, "tutorial.md", "exec"), namespace)


def test_policy_reference_lists_every_policy():
    text = (DOCS / "reference" / "policies.md").read_text()
    for policy_id in POLICIES:
        assert f"| `{policy_id}` |" in text


def test_diffusion_reference_example_runs():
    text = (DOCS / "reference" / "diffusion.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "diffusion.md", "exec"), {})
