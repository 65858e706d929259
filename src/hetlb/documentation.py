"""Where the documentation's pages are, so that a command's help names a file that exists: the
docs/ folder of a source checkout, or the copy that the wheel installs under
``<prefix>/share/hetlb/docs`` (the same Markdown pages, figures included)."""

import sysconfig
from pathlib import Path

CHECKOUT_DOCS = Path(__file__).resolve().parents[2] / "docs"
"""docs/ of the source checkout this module runs from (absent in an installed wheel)."""
INSTALLED_DOCS = Path(sysconfig.get_path("data")) / "share" / "hetlb" / "docs"
"""The pages as the wheel installs them (its data files), under the environment's prefix."""


def docs_folder() -> Path:
    """The folder of the pages: the checkout's docs/ when hetlb runs from a checkout, else the
    installed copy."""
    return CHECKOUT_DOCS if (CHECKOUT_DOCS / "index.md").is_file() else INSTALLED_DOCS


def page(relative: str) -> str:
    """The file of the page ``relative`` (a path inside docs/, e.g. ``"reference/serve.md"``).

    Parameters
    ----------
    relative : str
        The page's path relative to docs/, with forward slashes.

    Returns
    -------
    str
        Its absolute path in :func:`docs_folder`.
    """
    return str(docs_folder() / relative)
