"""A griffe extension of the site's API reference: the docstrings' Sphinx roles (``:func:`name```,
``:class:`~hetlb.System```, ...) shown as code, as the reader of ``help()`` reads them."""

import re

import griffe

ROLE = re.compile(r":(?:func|class|meth|mod|data|attr|exc|obj):`~?([^`]+)`")


class SphinxRoles(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = ROLE.sub(r"`\1`", obj.docstring.value)
