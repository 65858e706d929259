"""hetlb behind Envoy: ``hetlb pick``, the endpoint picker of the Gateway API Inference Extension over
Envoy's ext_proc (:mod:`~hetlb.gateway.envoy.picker`), the protocol's names
(:mod:`~hetlb.gateway.envoy.protocol`) and Envoy's bootstrap with pickers
(:mod:`~hetlb.gateway.envoy.bootstrap`)."""
