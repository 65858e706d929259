"""The project stands on its own: no tracked file cites notes that are not part of it, and every
relative link of the Markdown pages (README.md, docs/, benchmarks/) leads to a file that exists,
and to a heading of it when the link names one."""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

OUTSIDE_NOTES = ("MODEL" + "-SPEC", "DESIGN" + ".md")
"""Names of working notes that are not part of the project (spelled in two parts so that this
file does not match itself)."""

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", flags=re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")


def tracked_files() -> list[Path]:
    try:
        listing = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [ROOT / name for name in listing.split("\0") if name]


def markdown_pages() -> list[Path]:
    return [path for path in tracked_files() if path.suffix == ".md"]


def test_no_file_cites_outside_notes():
    offenders = []
    for path in tracked_files():
        if not path.is_file():
            continue
        data = path.read_bytes()
        offenders += [f"{path.relative_to(ROOT)}: {name}" for name in OUTSIDE_NOTES if name.encode() in data]
    assert not offenders, "cite the papers or docs/ instead:\n" + "\n".join(offenders)


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = INLINE_CODE.sub(lambda match: match.group(0).strip("`"), heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    return {slug(line.lstrip("#")) for line in text.splitlines() if re.match(r"#{1,6} ", line)}


def links(page: Path) -> list[str]:
    text = INLINE_CODE.sub("", FENCE.sub("", page.read_text()))
    return LINK.findall(text)


def test_relative_links_resolve():
    broken = []
    for page in markdown_pages():
        for target in links(page):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            path_part, _, anchor = target.partition("#")
            destination = (page.parent / path_part).resolve() if path_part else page
            where = f"{page.relative_to(ROOT)}: ({target})"
            if not destination.exists():
                broken.append(f"{where} no such file")
            elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
                broken.append(f"{where} no such heading")
    assert not broken, "\n".join(broken)


def test_the_checks_see_links_and_headings():
    readme = ROOT / "README.md"
    assert "docs/tutorial.md" in links(readme)
    assert slug("Stopping, warm-up and seeds") == "stopping-warm-up-and-seeds"
    assert slug("`[system]` of the slotted model") == "system-of-the-slotted-model"
