"""hetlb.live, split into hetlb.gateway, hetlb.engines, hetlb.load, hetlb.testbed and hetlb.wire,
keeps its import paths for one release: each old module is a stand-in for its new one and warns
with the new path."""

import importlib
import sys

import pytest

from hetlb import live


def fresh(name: str):
    """Import ``name`` anew (a stand-in warns when it is made, once per process otherwise)."""
    sys.modules.pop(name, None)
    return importlib.import_module(name)


@pytest.mark.parametrize("old", sorted(live.MOVED))
def test_every_old_module_is_its_new_one_and_says_where(old):
    new = importlib.import_module(live.MOVED[old])
    with pytest.warns(DeprecationWarning, match=f"hetlb.live.{old} is deprecated .* use {live.MOVED[old]}$"):
        stand_in = fresh(f"hetlb.live.{old}")
    public = [name for name in dir(new) if not name.startswith("_")]
    assert public and all(getattr(stand_in, name) is getattr(new, name) for name in public)


def test_the_old_packages_names_are_the_gateways():
    import hetlb.gateway

    for name in live.GATEWAY_NAMES:
        with pytest.warns(DeprecationWarning, match=f"use hetlb.gateway.{name}$"):
            assert getattr(live, name) is getattr(hetlb.gateway, name)


def test_names_that_moved_out_of_their_module_are_found():
    from hetlb import validation
    from hetlb.gateway import answers
    from hetlb.testbed import commands, peers, scenario

    with pytest.warns(DeprecationWarning):
        old_testbed, old_envoy, old_config, old_proxy = (
            fresh(f"hetlb.live.{name}") for name in ("testbed", "envoy_config", "config", "proxy")
        )
    assert old_testbed.backend_specs is commands.backend_specs and old_testbed.CSV_COLUMNS is scenario.CSV_COLUMNS
    assert old_envoy.balancer_bootstrap is peers.balancer_bootstrap
    assert old_config.job_type is validation.job_type_name and old_proxy.lags is answers.lags
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        old_config.no_such_name  # noqa: B018


def test_an_unknown_old_module_is_not_found():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("hetlb.live.no_such_module")
