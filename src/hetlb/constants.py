"""Codes shared by the model (which writes them) and the kernels (which read them).

They live below both layers, so that neither imports the other for a number.
"""

import numpy as np

INFINITE_BUFFER = int(np.iinfo(np.int64).max)
"""Value of ``buffer[s]`` for a server without a buffer limit."""

COUNT_POISSON = 0
COUNT_BERNOULLI = 1
COUNT_BINOMIAL = 2
COUNT_KINDS = {"poisson": COUNT_POISSON, "bernoulli": COUNT_BERNOULLI, "binomial": COUNT_BINOMIAL}
"""Laws of the number of arrivals (or service completions) in one slot of the slotted model (001)."""

UNLIMITED_CONCURRENCY = int(np.iinfo(np.int64).max)
"""Value of ``concurrency[s]`` for a server that serves every job it holds at once."""

ARRIVALS_POISSON = 0
ARRIVALS_BATCH = 1
ARRIVALS_MMPP = 2
ARRIVAL_KINDS = {"poisson": ARRIVALS_POISSON, "batch": ARRIVALS_BATCH, "mmpp": ARRIVALS_MMPP}
"""Arrival processes of the continuous-time model (hetlb.model.arrivals)."""
ARRIVALS_TRACE = 3
"""The kernels' code of the arrival times of a trace (the prompts ``trace:FILE``, rescaled to the
system's arrival rate; hetlb.kernels.arrivals), which no arrival process of a system names."""

PROMPTS_NONE = 0
PROMPTS_SHARED = 1
PROMPTS_SESSIONS = 2
PROMPTS_TRACE = 3
PROMPT_KINDS = {"none": PROMPTS_NONE, "shared": PROMPTS_SHARED, "sessions": PROMPTS_SESSIONS, "trace": PROMPTS_TRACE}
"""The prompts of jobs as chains of cache blocks (hetlb.model.prompts)."""
