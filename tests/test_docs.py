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
    "reference/prompts.md",
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
    from hetlb.testbed.scenario import CSV_COLUMNS, ENGINE_DEFAULTS, TESTBED_DEFAULTS

    text = (DOCS / "reference" / "testbed.md").read_text()
    for key in [*TESTBED_DEFAULTS, *ENGINE_DEFAULTS]:
        assert f"`testbed.{key}`" in text
    for column in CSV_COLUMNS:
        assert f"`{column}`" in text


# --- the commands of the docs ----------------------------------------------------------------------

COMMAND_PAGES = [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *sorted(DOCS.rglob("*.md"))]
OUTPUT_FLAGS = ("--out", "--output", "--store")
"""The flags that name where a command writes."""


def documented_commands() -> list[tuple[str, list[str]]]:
    """(page, argv) of every command in the bash, sh and console blocks of the docs: continued
    lines joined, a console block's ``$`` prompts and output lines told apart, comments, pipes,
    redirections and a trailing ``&`` left out, ``.venv/bin/`` dropped."""
    import shlex

    commands = []
    for page in COMMAND_PAGES:
        text = page.read_text()
        for language, block in re.findall(r"```(bash|sh|console)\n(.*?)```", text, flags=re.S):
            for line in re.sub(r"\\\n\s*", " ", block).splitlines():
                line = line.strip()
                if language == "console":
                    if not line.startswith("$ "):
                        continue  # output
                    line = line[2:]
                words = shlex.split(line, comments=True)
                for stop in ("|", ">", "2>", "&&", ";", "&"):
                    if stop in words:
                        words = words[: words.index(stop)]
                if words and words[0].startswith(".venv/bin/"):
                    words[0] = words[0].removeprefix(".venv/bin/")
                if words:
                    commands.append((str(page.relative_to(ROOT)), words))
    return commands


COMMANDS = documented_commands()
HETLB_COMMANDS = [(page, words[1:]) for page, words in COMMANDS if words[0] == "hetlb"]


def test_the_docs_have_commands_to_check():
    assert len(HETLB_COMMANDS) > 80 and any(page.endswith("live-comparisons.md") for page, _ in HETLB_COMMANDS)


@pytest.mark.parametrize(("page", "argv"), HETLB_COMMANDS, ids=[" ".join(a)[:60] for _, a in HETLB_COMMANDS])
def test_every_documented_hetlb_command_parses_and_its_files_exist(page, argv):
    """Checked for their parse only (many run for minutes, or start servers): the flags as written
    are the command's (a synopsis such as ``[--scale quick|paper]`` is not), and every file of the
    repository they read is there."""
    from hetlb.cli import build_parser

    try:
        build_parser().parse_args(argv)
    except SystemExit as error:
        pytest.fail(f"{page}: hetlb {' '.join(argv)}: does not parse (exit {error.code})")
    for word in argv:
        for path in re.findall(r"(?:^|[=,])((?:examples|docs|benchmarks)/[\w./-]+)", word):
            assert (ROOT / path).exists(), f"{page}: {path} does not exist"


def tracked_files() -> set[str]:
    import subprocess

    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=False)
    return set(listed.stdout.split()) if listed.returncode == 0 else set()


def test_no_documented_command_writes_into_the_repositorys_files():
    """Every folder or file a documented command writes to (--out, --output, --store) is neither a
    tracked file nor in a tracked folder of sources, examples, docs or recorded results: results
    go to out/ (or another folder of the user's)."""
    tracked = tracked_files()
    if not tracked:
        pytest.skip("not a git checkout")
    kept = ("src/", "examples/", "docs/", "benchmarks/", "tests/")
    offenders = []
    for page, words in COMMANDS:
        for flag, value in zip(words, words[1:]):
            if flag in OUTPUT_FLAGS and (value in tracked or value.startswith(kept)):
                offenders.append(f"{page}: {' '.join(words)}")
    assert not offenders


def test_the_benchmarks_write_their_results_under_out():
    """benchmarks/results/ holds the figures the docs quote; a script renews them only when told
    (--out benchmarks/results/...)."""
    for script in sorted((ROOT / "benchmarks").glob("*.py")):
        for default in re.findall(r"default=([^,)]*results[^,)]*)", script.read_text()):
            pytest.fail(f"{script.name}: an output's default is {default}")


def test_the_comparisons_testbed_file_is_the_example_with_the_pages_changes():
    with (ROOT / "examples" / "testbed.toml").open("rb") as handle:
        example = tomllib.load(handle)
    with (ROOT / "examples" / "testbed-compare.toml").open("rb") as handle:
        compare = tomllib.load(handle)
    changes = {"loads": [0.8], "policies": ["jfsq", "sed"], "compare": ["haproxy", "nginx"], "warmup": 5.0}
    changes |= {"duration": 90.0, "seed": 22}
    assert compare == {**example, "testbed": {**example["testbed"], **changes}}
    assert "hetlb testbed examples/testbed-compare.toml" in (DOCS / "background" / "live-comparisons.md").read_text()


def test_every_documented_script_exists():
    scripts = [words[1] for _, words in COMMANDS if words[0] in ("python", "python3") and len(words) > 1]
    assert scripts and all((ROOT / script).is_file() for script in scripts if script.endswith(".py"))
