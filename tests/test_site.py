"""The documentation site renders in a real browser: it is built as `make docs` builds it (mkdocs,
warnings as errors), served on 127.0.0.1, and opened in headless Chromium (Debian's `chromium`,
driven by playwright). Every page of the navigation shows its title and its figures, the API
reference shows each public name with its parameters as a table, and search finds a page.

A screenshot of the first page of each section of the navigation is kept in
test-artefacts/site/ (not tracked), to look at.
"""

import functools
import inspect
import os
import re
import shutil
import subprocess
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ARTEFACTS = ROOT / "test-artefacts" / "site"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (Debian's package; .ci/run installs it)"),
]
mkdocs_config = pytest.importorskip("mkdocs.config", reason="mkdocs is not installed (pip install '.[docs]')")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install '.[docs]')")


def nav_sections() -> list[tuple[str, list[str]]]:
    """The navigation of mkdocs.yml as (section title, its pages' paths in docs/), in order; a page
    at the top level is a section of its own."""
    config = mkdocs_config.load_config(str(ROOT / "mkdocs.yml"))
    sections = []
    for entry in config["nav"]:
        ((title, value),) = entry.items()
        pages = [next(iter(item.values())) for item in value] if isinstance(value, list) else [value]
        sections.append((title, pages))
    return sections


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The base URL of the built site, served from a thread on 127.0.0.1 for this module."""
    directory = tmp_path_factory.mktemp("site")
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(directory)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=120,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(directory)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser):
    """A tab that runs the site's scripts (search, navigation); a script error fails the test."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.set_default_timeout(15_000)
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    page.close()
    assert errors == [], f"scripts failed on the page: {errors}"


@pytest.fixture
def static_page(browser):
    """A tab without scripts: the pages' content is static HTML, which renders without them (and
    several times faster)."""
    context = browser.new_context(java_script_enabled=False, viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()


def url_of(base: str, markdown_path: str) -> str:
    return base + re.sub(r"\.md$", ".html", markdown_path)


def title_of(markdown_path: str) -> str:
    """The page's first heading as the browser shows it (inline code marks dropped)."""
    first_line = (ROOT / "docs" / markdown_path).read_text().splitlines()[0]
    assert first_line.startswith("# "), markdown_path
    return first_line[2:].replace("`", "").strip()


def shows_title_and_figures(page, path: str) -> None:
    heading = page.locator("article h1").first.inner_text().removesuffix("¶").strip()  # the permalink
    assert heading == title_of(path), path
    broken = page.eval_on_selector_all(
        "article img", "images => images.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src)"
    )
    assert broken == [], f"{path}: figures that do not load"


def test_every_page_shows_its_title_and_figures(site, static_page):
    for _, pages in nav_sections():
        for path in pages:
            response = static_page.goto(url_of(site, path))
            assert response is not None and response.ok, path
            shows_title_and_figures(static_page, path)


def test_each_section_opens_with_its_scripts(site, page):
    """The first page of each section, as a reader's browser shows it; its screenshot is kept."""
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    for section, pages in nav_sections():
        page.goto(url_of(site, pages[0]))
        shows_title_and_figures(page, pages[0])
        assert page.locator("nav.md-nav--primary").count() >= 1, pages[0]  # the navigation is drawn
        page.screenshot(path=str(ARTEFACTS / f"{re.sub(r'[^a-z0-9]+', '-', section.lower())}.png"))


def test_every_page_is_in_the_navigation():
    listed = {path for _, pages in nav_sections() for path in pages}
    assert listed == {str(path.relative_to(ROOT / "docs")) for path in (ROOT / "docs").rglob("*.md")}


def parameter_table(page, anchor: str) -> list[str]:
    """The names in the parameters table of the object whose heading has id `anchor`."""
    heading = page.locator(f"[id='{anchor}']")
    assert heading.count() == 1, f"{anchor} is not on the page"
    table = heading.locator("xpath=following-sibling::div[contains(@class, 'doc-contents')][1]").locator("table").first
    assert "Name" in table.locator("thead").inner_text(), anchor
    return [cell.strip() for cell in table.locator("tbody tr td:first-child").all_inner_texts()]


def test_the_api_reference_shows_parameters_as_tables(site, page):
    import hetlb
    import hetlb.theory

    for path, anchor, function in [
        ("api/index.md", "hetlb.simulate", hetlb.simulate),
        ("api/model.md", "hetlb.model.System.from_speeds", hetlb.System.from_speeds),
        ("api/theory.md", "hetlb.theory.mean_field", hetlb.theory.mean_field),
    ]:
        page.goto(url_of(site, path))
        names = [name.lstrip("*") for name in parameter_table(page, anchor)]  # **policy_params: policy_params
        assert names == list(inspect.signature(function).parameters), anchor


def test_search_finds_a_page(site, page):
    page.goto(url_of(site, "index.md"))
    page.keyboard.press("s")  # the site's shortcut to the search box
    page.keyboard.type("Halfin")
    results = page.locator(".md-search-result__item")
    results.first.wait_for()
    titles = " ".join(results.all_inner_texts())
    assert "Diffusion limits (paper 002)" in titles
