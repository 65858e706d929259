"""Fixtures of the live tests."""

import pytest

from support.serve_processes import Processes


@pytest.fixture
def processes():
    """The processes a test starts, every one stopped at its end (also when it fails)."""
    started = Processes()
    try:
        yield started
    finally:
        started.stop_all()
