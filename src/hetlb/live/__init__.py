"""hetlb on real HTTP traffic: the dispatcher (``hetlb serve``), the model's test backends, a load
generator and the testbed.

``hetlb serve`` is a reverse proxy that routes HTTP requests to backends with the registered
policies, deciding by the same rule as the simulator (hetlb.policies.choice.choose_server) on its
load estimates (docs/reference/serve.md):

>>> from hetlb.live import ServeConfig
>>> config = ServeConfig.from_mapping({"backends": ["http://127.0.0.1:9001,speed=2", "http://127.0.0.1:9002"],
...                                    "policy": "jfsq", "listen": "127.0.0.1:8000"})
>>> config.policy.id, [backend.speed for backend in config.backends], config.signals.names()
('jfsq', [2.0, 1.0], ['inflight', 'piggyback'])

``hetlb.live.serve(config)`` runs it until SIGTERM or SIGINT.
"""

from hetlb.live.config import Backend, ServeConfig, Signals, load_config

__all__ = ["Backend", "ServeConfig", "Signals", "load_config", "serve"]


def serve(config: ServeConfig, **options) -> int:
    """Run ``hetlb serve`` with ``config`` until SIGTERM or SIGINT (hetlb.live.serving.serve): the
    exit status, 0 after a clean stop.

    Parameters
    ----------
    config
        The checked configuration.
    **options
        The options of hetlb.live.serving.serve.
    """
    from hetlb.live.serving import serve as run

    return run(config, **options)
