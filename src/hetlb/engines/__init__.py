"""Emulated servers to route to: the model's servers as HTTP backends (``hetlb backend``,
:mod:`~hetlb.engines.backend`) and OpenAI-compatible inference engines (``hetlb backend --openai``,
:mod:`~hetlb.engines.inference`), each serving on the simulator's law so that a live run can be
compared with a simulation. Nothing here knows the gateway."""
