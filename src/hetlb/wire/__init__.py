"""What every live process shares: listening addresses and free ports (:mod:`~hetlb.wire.addresses`),
the event loop and its clock (:mod:`~hetlb.wire.runtime`), and the vocabulary of what servers report
about their load and timing in headers and metrics (:mod:`~hetlb.wire.load_reports`). It sits below
the gateway, the engines, the load generators and the testbed, and imports none of them."""
