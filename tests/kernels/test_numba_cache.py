"""hetlb.jit.cache_somewhere: numba gets a writable cache directory when it finds none
(a read-only install and home), so that hetlb still imports."""

import os
import stat

import pytest
from numba import config
from numba.core import caching

from hetlb import jit


@pytest.fixture
def nowhere_to_cache(monkeypatch, tmp_path):
    """numba's own places are not writable; the temporary directory is ``tmp_path``."""

    def no_locator(py_func):
        raise RuntimeError("cannot cache function: no locator available")

    monkeypatch.setattr(caching, "FunctionCache", no_locator)
    monkeypatch.setattr(config, "CACHE_DIR", "")
    monkeypatch.setattr(jit.tempfile, "tempdir", str(tmp_path))
    return tmp_path


@pytest.mark.skipif(not hasattr(os, "getuid") or config.DISABLE_JIT, reason="POSIX, compiled kernels")
def test_the_cache_goes_to_a_private_directory_of_the_temporary_directory(nowhere_to_cache):
    jit.cache_somewhere()
    directory = nowhere_to_cache / f"hetlb-numba-cache-{os.getuid()}"
    assert config.CACHE_DIR == str(directory)
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    jit.cache_somewhere()  # a second process (here: call) keeps it
    assert config.CACHE_DIR == str(directory)


@pytest.mark.skipif(not hasattr(os, "getuid") or config.DISABLE_JIT, reason="POSIX, compiled kernels")
def test_a_directory_others_may_write_to_is_not_used(nowhere_to_cache):
    shared = nowhere_to_cache / f"hetlb-numba-cache-{os.getuid()}"
    shared.mkdir()
    shared.chmod(0o777)
    jit.cache_somewhere()
    assert config.CACHE_DIR not in ("", str(shared))
    assert os.path.dirname(config.CACHE_DIR) == str(nowhere_to_cache)


def test_numba_finding_a_place_is_left_alone(monkeypatch):
    monkeypatch.setattr(config, "CACHE_DIR", "")
    jit.cache_somewhere()
    assert config.CACHE_DIR == ""
