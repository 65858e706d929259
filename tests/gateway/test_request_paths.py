"""The paths hetlb serve forwards (hetlb.gateway.http.proxy.normalised_path), against a backend that
decodes %2e, %2f and %5c and removes dot segments (tests/support/serve_faults.resolved_path): what
the proxy forwards never leaves a backend's prefix, and names the resource the client asked for."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hetlb.gateway.http.proxy import normalised_path

from support.serve_faults import resolved_path

SEGMENTS = ["a", "b.c", "", ".", "..", "%2e", "%2E%2e", ".%2e", "..%2f", "%2f..", "a%2Fb", "..%5c", "a\\..", "%41"]
paths = st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=8).map(lambda segments: "/" + "/".join(segments))


def backend_path(path: str) -> str:
    """What a backend that also takes a backslash for a separator serves."""
    return resolved_path(path.replace("%5c", "/").replace("%5C", "/").replace("\\", "/"))


@given(paths)
def test_a_forwarded_path_never_leaves_the_prefix_and_names_the_same_resource(path):
    forwarded = normalised_path(path)
    if forwarded is None:
        return
    assert backend_path("/prefix" + forwarded).startswith("/prefix")
    assert backend_path(forwarded).rstrip("/") == backend_path(path).rstrip("/")
    assert normalised_path(forwarded) == forwarded  # nothing left to normalise


@given(st.lists(st.sampled_from(["a", "b.c", "", "%41", "x..y"]), min_size=1, max_size=8))
def test_a_path_without_dot_segments_is_forwarded_as_sent(segments):
    path = "/" + "/".join(segments)
    assert normalised_path(path) == path


def test_the_dot_segments_of_rfc_3986_and_what_climbs_above_the_root():
    assert normalised_path("/a/./b/../c") == "/a/c"
    assert normalised_path("/a/b/..") == "/a/"
    assert normalised_path("/a/%2E/b/%2e%2E/c") == "/a/c"
    for refused in ("/../etc/passwd", "/%2e%2e/x", "/a/../../x", "/..%2fetc", "/a\\..\\..", "*", "x"):
        assert normalised_path(refused) is None, refused
