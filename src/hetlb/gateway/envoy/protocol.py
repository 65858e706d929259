"""The names of the Gateway API Inference Extension's Endpoint Picker Protocol that the picker
(hetlb.gateway.envoy.picker) and Envoy's bootstrap (hetlb.gateway.envoy.bootstrap) share: the header and the
metadata that carry the picked endpoints, the subset a proxy passes, and an endpoint's form.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from hetlb import validation
from hetlb.errors import InputError

DESTINATION = "x-gateway-destination-endpoint"
"""The request header (and key of the ``envoy.lb`` metadata) naming the picked endpoints."""
DESTINATION_NAMESPACE = "envoy.lb"
SUBSET = "x-gateway-destination-endpoint-subset"
SUBSET_NAMESPACE = "envoy.lb.subset_hint"
SERVED = "x-gateway-destination-endpoint-served"


def endpoint(name: str, url: str) -> str:
    """A backend's ``IP:PORT`` (``[IPv6]:PORT``) as Envoy's original-destination cluster takes it:
    the URL must be http://IP:PORT with no path; else InputError naming ``name``."""
    parts = urlsplit(url)
    try:
        ipaddress.ip_address(parts.hostname or "")
    except ValueError:
        raise InputError(
            name, f"an endpoint picker names backends by IP:PORT: give http://IP:PORT, got {validation.shown(url)}"
        ) from None
    if parts.scheme != "http" or parts.path.strip("/"):
        raise InputError(name, f"a backend of hetlb pick is http://IP:PORT with no path, got {validation.shown(url)}")
    return parts.netloc
