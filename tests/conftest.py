"""The fixtures every test may use; the helpers the tests share are modules of tests/support/.

The tests mirror the package: tests/<package>/test_*.py for each package of src/hetlb, and
tests/test_<module>.py for its top-level modules.
"""

import shutil
import tempfile
from pathlib import Path

import pytest

from support.serve_processes import Processes

LIVE_FOLDERS = ("gateway", "engines", "load", "testbed")
"""The folders of tests/ whose tests run real processes on loopback ports: marked ``live``."""
TESTS = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items):
    """Mark the tests of LIVE_FOLDERS ``live``: make test runs the others in parallel
    (pytest-xdist), then these in a phase of their own, so that the live timings they compare with
    predictions never share the cores with a CPU-bound test."""
    live = pytest.mark.live
    for item in items:
        parts = Path(item.path).resolve().relative_to(TESTS).parts if Path(item.path).is_relative_to(TESTS) else ()
        if parts and parts[0] in LIVE_FOLDERS:
            item.add_marker(live)


@pytest.fixture
def restore_registry():
    """Leave the policy registry as it was, whatever a test or a page of the docs registers, and
    forget the plugins it imported (so that the next import registers them again)."""
    from hetlb.policies import plugins, registry

    policies, by_code, loaded = dict(registry.POLICIES), dict(registry.BY_CODE), dict(plugins._loaded)
    yield
    registry.POLICIES.clear()
    registry.POLICIES.update(policies)
    registry.BY_CODE.clear()
    registry.BY_CODE.update(by_code)
    plugins._loaded.clear()
    plugins._loaded.update(loaded)


@pytest.fixture
def processes():
    """The processes a test starts, every one stopped at its end (also when it fails)."""
    started = Processes()
    try:
        yield started
    finally:
        started.stop_all()


@pytest.fixture
def short_tmp_path():
    """A temporary folder with a short path (/tmp/hetlb-XXXXXXXX), for the tests that hold an error
    message to the whole path it names: a message shortens a path of more than
    hetlb.validation.MESSAGE_WIDTH characters, and a pytest-xdist worker's tmp_path is longer than
    one pytest's alone."""
    folder = Path(tempfile.mkdtemp(prefix="hetlb-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
