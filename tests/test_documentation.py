"""Each command's help names a page of the docs that exists: in the checkout here (the installed
wheel's copy is checked by tests/test_wheel.py)."""

import pytest

from hetlb.cli import COMMAND_PAGES, COMMANDS, build_parser
from hetlb.documentation import CHECKOUT_DOCS, docs_folder, page


def test_every_command_has_a_page_that_exists():
    assert docs_folder() == CHECKOUT_DOCS
    assert set(COMMAND_PAGES) == set(COMMANDS)
    for name, relative in COMMAND_PAGES.items():
        assert (CHECKOUT_DOCS / relative).is_file(), f"{name}: {relative}"


@pytest.mark.parametrize("name", ["serve", "reproduce", "simulate"])
def test_the_help_ends_with_the_page(name, capsys):
    with pytest.raises(SystemExit):
        build_parser(flags_of=(name,)).parse_args([name, "--help"])
    assert capsys.readouterr().out.rstrip().splitlines()[-1] == f"documentation: {page(COMMAND_PAGES[name])}"
