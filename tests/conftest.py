"""The fixtures every test may use; the helpers the tests share are modules of tests/support/.

The tests mirror the package: tests/<package>/test_*.py for each package of src/hetlb, and
tests/test_<module>.py for its top-level modules.
"""

import pytest

from support.serve_processes import Processes


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
