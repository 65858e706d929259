"""The documentation runs: every python block of the pages below executes, in order, in one
namespace per page (from the project's root, so paths such as examples/ resolve); the policy
reference covers every registered policy; and the scenario reference covers every key a scenario
file accepts, with examples that load."""

import inspect
import re
import tomllib
from pathlib import Path

import pytest

from hetlb.experiments.spec import SPEC_KEYS, SweepSpec
from hetlb.graphs.constructions import _GRAPH_KEYS, GRAPH_KINDS
from hetlb.model.speed_distributions import SPEED_DISTRIBUTIONS
from hetlb.policies import POLICIES
from hetlb.scenario import RUN_KEYS, SYSTEM_KEYS, Scenario

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
EXAMPLE_SCENARIO = ROOT / "examples" / "scenario.toml"
PAGES_WITH_CODE = [
    "tutorial.md",
    "reference/scenario.md",
    "reference/exact.md",
    "reference/diffusion.md",
    "reference/slotted.md",
    "reference/dispatchers.md",
    "reference/bounding-systems.md",
    "how-to/placement.md",
    "how-to/add-a-policy.md",
    "how-to/your-own-policy.md",
    "background/tie-breaking.md",
    "background/mean-field.md",
    "background/batch-servers.md",
    "reference/serve.md",
    "reference/testbed.md",
    "reference/engine.md",
    "reference/pick.md",
]


@pytest.mark.parametrize("page", PAGES_WITH_CODE)
def test_python_blocks_run(page, monkeypatch, restore_registry):
    """... and every simulation they run in this process finishes without a warning (a Little's-law
    gap, a trend: SimulationResult.warnings), so that no example teaches a biased measurement."""
    from hetlb.simulation import simulate as entry

    monkeypatch.chdir(ROOT)
    text = (DOCS / page).read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks
    results = []

    def recorded(run):
        def recording(*args, **kwargs):
            result = run(*args, **kwargs)
            if not any(frame.filename.endswith("conformance.py") for frame in inspect.stack()):
                results.append(result)  # not check_policy's own probes (overloads, tiny windows)
            return result

        return recording

    for name in ("simulate_one_dispatcher", "simulate_dispatchers"):
        monkeypatch.setattr(entry, name, recorded(getattr(entry, name)))
    namespace = {}
    for block in blocks:
        exec(compile(block, page, "exec"), namespace)
    warned = [(result.describe(), result.warnings) for result in results if result.warnings]
    assert not warned, warned


def test_policy_reference_lists_every_policy():
    text = (DOCS / "reference" / "policies.md").read_text()
    for policy_id in POLICIES:
        assert f"| `{policy_id}` |" in text


def toml_blocks(page: str) -> list[dict]:
    text = (DOCS / page).read_text()
    return [tomllib.loads(block) for block in re.findall(r"```toml\n(.*?)```", text, flags=re.S)]


def test_example_scenario_simulates():
    scenario = Scenario.from_toml(EXAMPLE_SCENARIO)
    result = scenario.simulate(jobs=2_000, warmup=0.0, replications=1)
    assert result.mean_response_time > 0
    assert result.runs[0].counters["arrivals"] >= 2_000


def test_scenario_reference_shows_the_example_file():
    with EXAMPLE_SCENARIO.open("rb") as handle:
        assert toml_blocks("reference/scenario.md")[0] == tomllib.load(handle)


def test_your_own_policy_shows_the_example_files():
    text = (DOCS / "how-to" / "your-own-policy.md").read_text()
    assert re.findall(r"```python\n(.*?)```", text, flags=re.S)[0] == (ROOT / "examples" / "fiq_sed.py").read_text()
    assert (
        re.findall(r"```toml\n(.*?)```", text, flags=re.S)[0] == (ROOT / "examples" / "fiq-sed-sweep.toml").read_text()
    )


def test_batch_servers_page_shows_the_example_fleet():
    with (ROOT / "examples" / "two-gpu-generations.toml").open("rb") as handle:
        assert toml_blocks("background/batch-servers.md")[0] == tomllib.load(handle)


def test_scenario_reference_examples_load(restore_registry, monkeypatch):
    monkeypatch.chdir(ROOT)
    for data in toml_blocks("reference/scenario.md"):
        if "base" in data:
            assert SweepSpec.from_mapping(data).points()
        else:
            Scenario.from_mapping(data)


def test_scenario_reference_lists_every_key():
    text = (DOCS / "reference" / "scenario.md").read_text()
    keys = set().union(*SYSTEM_KEYS.values(), *RUN_KEYS.values(), SPEC_KEYS, *SPEED_DISTRIBUTIONS.values())
    keys |= set().union(*_GRAPH_KEYS.values()) | {"kind", "seed", "id"}
    keys |= {f'"{kind}"' for kind in (*GRAPH_KINDS, *SPEED_DISTRIBUTIONS)}
    missing = sorted(key for key in keys if f"`{key}`" not in text)
    assert not missing


def test_testbed_reference_lists_every_key():
    from hetlb.live.testbed import CSV_COLUMNS, ENGINE_DEFAULTS, TESTBED_DEFAULTS

    text = (DOCS / "reference" / "testbed.md").read_text()
    for key in [*TESTBED_DEFAULTS, *ENGINE_DEFAULTS]:
        assert f"`testbed.{key}`" in text
    for column in CSV_COLUMNS:
        assert f"`{column}`" in text
