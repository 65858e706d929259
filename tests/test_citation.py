"""CITATION.cff holds the facts the rest of the project states: hetlb's version and license, and
the three papers as docs/reference/papers.md names them."""

import re
import tomllib
from pathlib import Path

import yaml

from hetlb.version import __version__

ROOT = Path(__file__).resolve().parents[1]


def test_citation_matches_the_package_and_the_papers():
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert citation["cff-version"] == "1.2.0"
    assert citation["version"] == __version__
    assert citation["license"] == project["license"] == "MIT"
    assert [author["name"] for author in citation["authors"]] == [author["name"] for author in project["authors"]]
    papers = (ROOT / "docs" / "reference" / "papers.md").read_text()
    listed = re.findall(r"^\*\*\[(\d{3})\]\*\* (.+?)\. \*(.+?)\.\*", papers, flags=re.M | re.S)
    assert [number for number, _, _ in listed] == ["000", "001", "002"]
    references = citation["references"]
    assert [reference["title"] for reference in references] == [" ".join(title.split()) for _, _, title in listed]
    for (_, authors, _), reference in zip(listed, references):
        family_names = [author["family-names"] for author in reference["authors"]]
        assert [name.split()[-1] for name in re.split(r", ", " ".join(authors.split()))] == family_names
    for reference in references:
        for identifier in reference.get("identifiers", []):
            assert identifier["value"] in papers


def test_license_is_mit_for_the_hetlb_developers():
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License\n")
    assert "Copyright (c) 2026 the hetlb developers" in text
