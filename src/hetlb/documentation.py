"""Where the documentation's pages are, so that a command's help names a file that exists: the
docs/ folder of a source checkout, or the copy that the wheel installs as data files under
``<prefix>/share/hetlb/docs`` (the same Markdown pages, figures included)."""

import functools
import sysconfig
from importlib import metadata
from pathlib import Path

CHECKOUT_DOCS = Path(__file__).resolve().parents[2] / "docs"
"""docs/ of the source checkout this module runs from (absent in an installed wheel)."""
INSTALLED_DOCS = Path(sysconfig.get_path("data")) / "share" / "hetlb" / "docs"
"""Where an installation into this environment puts the pages (its data files)."""


@functools.cache
def docs_folder() -> Path:
    """The folder of the pages: the checkout's docs/ when hetlb runs from a checkout, else the copy
    the installed distribution lists (wherever it went, a ``--user`` install included), else
    INSTALLED_DOCS."""
    if (CHECKOUT_DOCS / "index.md").is_file():
        return CHECKOUT_DOCS
    try:
        files = metadata.files("hetlb") or []
    except metadata.PackageNotFoundError:
        files = []
    for file in files:
        if file.as_posix().endswith("share/hetlb/docs/index.md"):
            return Path(str(file.locate())).resolve().parent
    return INSTALLED_DOCS


def page(relative: str) -> str:
    """The file of the page ``relative`` (a path inside docs/, e.g. ``"reference/serve.md"``).

    Parameters
    ----------
    relative : str
        The page's path relative to docs/, with forward slashes.

    Returns
    -------
    str
        Its absolute path in ``docs_folder()``.
    """
    return str(docs_folder() / relative)
