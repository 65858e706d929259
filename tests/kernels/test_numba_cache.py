"""hetlb.jit.cache_somewhere: numba caches the compiled functions in a directory named by a hash of
their sources (so that no function is loaded as compiled against an older callee), and gets a
writable one when the package is read-only, so that hetlb still imports."""

import os
import stat
from pathlib import Path

import pytest
from numba import config

from hetlb import jit

COMPILED = pytest.mark.skipif(not hasattr(os, "getuid") or config.DISABLE_JIT, reason="POSIX, compiled kernels")


@pytest.fixture
def read_only_package(monkeypatch, tmp_path):
    """The package's __pycache__ is not writable; the temporary directory is ``tmp_path``."""
    monkeypatch.setattr(config, "CACHE_DIR", "")
    monkeypatch.setattr(jit.os, "access", lambda path, mode: False)
    monkeypatch.setattr(jit.tempfile, "tempdir", str(tmp_path))
    return tmp_path


@COMPILED
def test_the_cache_goes_to_a_private_directory_of_the_temporary_directory(read_only_package):
    jit.cache_somewhere()
    directory = read_only_package / f"hetlb-numba-cache-{os.getuid()}"
    assert Path(config.CACHE_DIR).parent == directory
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    chosen = config.CACHE_DIR
    config.CACHE_DIR = ""
    jit.cache_somewhere()  # a second process (here: call) keeps it
    assert config.CACHE_DIR == chosen


@COMPILED
def test_a_directory_others_may_write_to_is_not_used(read_only_package):
    shared = read_only_package / f"hetlb-numba-cache-{os.getuid()}"
    shared.mkdir()
    shared.chmod(0o777)
    jit.cache_somewhere()
    assert not config.CACHE_DIR.startswith(str(shared))
    assert Path(config.CACHE_DIR).parent.parent == read_only_package


@COMPILED
def test_the_cache_is_the_packages_under_the_sources_stamp(monkeypatch):
    monkeypatch.setattr(config, "CACHE_DIR", "")
    jit.cache_somewhere()
    cache = Path(config.CACHE_DIR)
    assert cache.parent == jit.PACKAGE / "__pycache__" and cache.name.startswith("numba-")


def test_the_stamp_covers_the_callees_of_compiled_functions():
    """choose_server (policies/choice.py) calls selection_key (policies/rules.py): a change of
    either must change the stamp, and so the cache directory."""
    sources = jit.compiled_sources()
    rules, choice = jit.PACKAGE / "policies" / "rules.py", jit.PACKAGE / "policies" / "choice.py"
    assert {rules, choice, jit.PACKAGE / "kernels" / "continuous.py"} <= set(sources)
    without = [file for file in sources if file != rules]
    assert jit.source_stamp(sources) != jit.source_stamp(without)
    assert jit.source_stamp(sources, "numba 1") != jit.source_stamp(sources, "numba 2")


def test_a_cache_directory_the_user_set_is_left_alone(monkeypatch, tmp_path):
    monkeypatch.setattr(config, "CACHE_DIR", str(tmp_path))
    jit.cache_somewhere()
    assert config.CACHE_DIR == str(tmp_path)


@COMPILED
def test_an_installed_read_only_package_caches_in_the_users_cache_directory(monkeypatch, tmp_path):
    """So that the cache ``hetlb compile`` fills at set-up outlives the temporary directory."""
    monkeypatch.setattr(config, "CACHE_DIR", "")
    monkeypatch.setattr(jit.os, "access", lambda path, mode: not str(path).startswith(str(jit.PACKAGE)))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    jit.cache_somewhere()
    cache = Path(config.CACHE_DIR)
    assert cache.parent == tmp_path / "cache" / "hetlb" and cache.name.startswith("numba-")
