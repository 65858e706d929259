"""``hetlb serve``'s HTTP/1.1 reverse proxy: the clients' side (:mod:`~hetlb.gateway.http.downstream`),
the backends' side (:mod:`~hetlb.gateway.http.upstream`), and between them the proxy
(:mod:`~hetlb.gateway.http.proxy`) that asks the routing core for each request's backend and relays
the answer byte for byte."""
