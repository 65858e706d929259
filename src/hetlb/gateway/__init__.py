"""The gateway: ``hetlb serve`` (a reverse proxy) and ``hetlb pick`` (Envoy's endpoint picker), which
route requests to a fleet with the registered policies on one routing core.

The routing core is this package's top level: the configuration (:mod:`hetlb.gateway.config`), the
dispatcher's load estimates and its decision by the simulator's own rule
(:mod:`hetlb.gateway.dispatcher`, hetlb.policies.choice.choose_server), a request's job type
(:mod:`hetlb.gateway.job_types`), the fleet that changes while it runs (:mod:`hetlb.gateway.fleet`),
the messages off the request's path (:mod:`hetlb.gateway.probing`), what the proxy learns from an
answer (:mod:`hetlb.gateway.answers`), the metrics and the admin listener. On that core sit the two
front ends: :mod:`hetlb.gateway.http`, serve's HTTP/1.1 proxy, and :mod:`hetlb.gateway.envoy`, the
picker behind Envoy's ext_proc with Envoy's bootstrap; so a policy decides the same in both
(docs/reference/serve.md, docs/reference/pick.md):

>>> from hetlb.gateway import ServeConfig
>>> config = ServeConfig.from_mapping({"backends": ["http://127.0.0.1:9001,speed=2", "http://127.0.0.1:9002"],
...                                    "policy": "jfsq", "listen": "127.0.0.1:8000"})
>>> config.policy.id, [backend.speed for backend in config.backends], config.signals.names()
('jfsq', [2.0, 1.0], ['inflight', 'piggyback'])

``hetlb.gateway.serve(config)`` runs it until SIGTERM or SIGINT. The gateway imports nothing of the
emulated engines, the load generators or the testbed.
"""

from hetlb.gateway.config import Backend, ServeConfig, Signals, load_config

__all__ = ["Backend", "ServeConfig", "Signals", "load_config", "serve"]


def serve(config: ServeConfig, **options) -> int:
    """Run ``hetlb serve`` with ``config`` until SIGTERM or SIGINT (hetlb.gateway.serving.serve): the
    exit status, 0 after a clean stop.

    Parameters
    ----------
    config
        The checked configuration.
    **options
        The options of hetlb.gateway.serving.serve.
    """
    from hetlb.gateway.serving import serve as run

    return run(config, **options)
