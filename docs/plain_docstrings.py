"""A griffe extension of the site's API reference: the docstrings as the reader of ``help()``
reads them. Sphinx roles (``:func:`name```, ``:class:`~hetlb.System```, ...) are shown as code, and
the papers' brackets (``<iota, eta^pi>``, an inner product) as text, not as HTML tags."""

import re

import griffe

ROLE = re.compile(r":(?:func|class|meth|mod|data|attr|exc|obj):`~?([^`]+)`")
CODE_SPAN = re.compile(r"(`+[^`]*`+)")
TAG_START = re.compile(r"<(?=[A-Za-z/!?])")


def as_text(line: str) -> str:
    """``line`` with each ``<`` that would open an HTML tag escaped, outside code spans."""
    if line.lstrip().startswith((">>>", "...")):
        return line
    return "".join(part if part.startswith("`") else TAG_START.sub("&lt;", part) for part in CODE_SPAN.split(line))


class PlainDocstrings(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            text = ROLE.sub(r"`\1`", obj.docstring.value)
            obj.docstring.value = "\n".join(as_text(line) for line in text.split("\n"))
