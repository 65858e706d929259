"""The servers' prefix (KV) caches (docs/background/prefix-caches.md): K_s blocks a server, the
prefill work W a missing block costs, its law, and the prompts of the jobs.

Server s keeps an LRU of at most K_s blocks of prompts (``capacity``; absent: no cache, and every
result is the model's without caches, bit for bit). A job whose prompt is a chain of L blocks and
hits h of them at the start of its service does W (L - h) of prefill work (units of the mean job
size; ``prefill_law`` deterministic, or exponential of that mean) before its decode work (its job
size), both at the server's speed and rate curve; its time to first token ends with its prefill.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hetlb import validation
from hetlb.errors import InputError
from hetlb.model.prompts import Prompts
from hetlb.model.servers import per_server_values

PREFILL_LAWS = ("deterministic", "exponential")
"""The law of a job's prefill work given its uncached blocks: exactly W (L - h), or exponential of
that mean (the exact solver's form, hetlb.theory.exact_cache)."""
MAX_CACHE_BLOCKS = 2**31
"""The most blocks one server's cache may hold."""


@dataclass(frozen=True)
class PrefixCaches:
    """The servers' prefix caches and what a miss costs.

    Parameters
    ----------
    capacity
        K_s, the blocks each server's cache holds (int64, >= 1).
    prompts
        The prompts of the jobs as chains of blocks (hetlb.model.prompts.Prompts).
    prefill_work
        W, the prefill work of one missing block, in units of the mean job size (>= 0).
    prefill_law
        One of PREFILL_LAWS.
    """

    capacity: np.ndarray
    prompts: Prompts = field(default_factory=Prompts.none)
    prefill_work: float = 0.0
    prefill_law: str = "deterministic"

    @classmethod
    def build(cls, n_servers: int, cache_blocks, prompts=None, prefill_work=None, prefill_law=None) -> PrefixCaches:
        """Check and build the caches of ``n_servers`` servers.

        Parameters
        ----------
        n_servers
            N, the number of servers.
        cache_blocks
            K_s: one integer for all, one per server, or a text in the speeds' syntax ("8x64,8x16").
        prompts
            A Prompts or its text (``shared:count=K,blocks=B,zipf=S,unique=U``, ...); None: none.
        prefill_work
            W (>= 0; None: 0).
        prefill_law
            One of PREFILL_LAWS (None: deterministic).

        Returns
        -------
        PrefixCaches
            The checked caches.
        """
        capacity = cache_blocks_array(cache_blocks, n_servers)
        if prompts is None or isinstance(prompts, str):
            prompts = Prompts.none() if prompts is None else Prompts.parse(prompts)
        work = 0.0 if prefill_work is None else validation.number("prefill_work", prefill_work, 0.0, high=1e9)
        law = validation.choice("prefill_law", prefill_law or "deterministic", PREFILL_LAWS)
        return cls(capacity, prompts, work, law)

    @property
    def mean_prompt_blocks(self) -> float:
        """E[L], the mean blocks of a prompt."""
        return self.prompts.mean_prompt_blocks()

    @property
    def mean_reusable_blocks(self) -> float:
        """The mean blocks of a prompt that an earlier prompt can have left in a cache (its shared
        prefix, its session's earlier turns): the most a job can hit on average."""
        return self.prompts.mean_reusable_blocks()

    def work_per_job(self, hits: float) -> float:
        """The mean work of a job that hits ``hits`` blocks on average: 1 + W (E[L] - hits)."""
        return 1.0 + self.prefill_work * (self.mean_prompt_blocks - hits)

    def describe(self) -> dict:
        """A JSON-ready summary for result metadata."""
        blocks = self.capacity.tolist()
        return {
            "cache_blocks": blocks[0] if len(set(blocks)) == 1 else blocks,
            "prompts": self.prompts.text,
            "prefill_work": self.prefill_work,
            "prefill_law": self.prefill_law,
        }


def cache_blocks_array(value, n_servers: int) -> np.ndarray:
    """K_s per server (int64 >= 1) from one value, one per server, or a text in the speeds' syntax."""
    items = per_server_values("cache_blocks", value, n_servers, "K or COUNTxK (e.g. 8x64, K an integer >= 1)")
    blocks = []
    for item in items:
        if isinstance(item, str):
            try:
                item = int(item.strip())
            except ValueError:
                raise InputError(
                    "cache_blocks", f"a cache holds an integer >= 1 of blocks, got {validation.shown(item)}"
                ) from None
        blocks.append(validation.integer("cache_blocks", item, low=1, high=MAX_CACHE_BLOCKS))
    return np.broadcast_to(np.array(blocks, dtype=np.int64), (n_servers,)).copy()
