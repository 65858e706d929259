"""Open-loop load on real servers (``hetlb loadgen``): requests at the model's arrival process
(:mod:`~hetlb.load.open_loop`) and streamed chat completions with token counts
(:mod:`~hetlb.load.inference`), measured as the simulator measures. Nothing here knows the gateway."""
