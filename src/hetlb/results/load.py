"""The results of a load generator's run: plain HTTP requests (``hetlb loadgen``,
hetlb.load.open_loop), its figures as a mapping with the simulator's keys, and streamed chat
completions (``hetlb loadgen --openai``, hetlb.load.inference), its figures overall, per model
and per backend; in milliseconds, with their metadata.
"""

from __future__ import annotations

from hetlb.results.base import Result

LOAD_SUMMARY = (
    "mean_response_time",
    "mean_response_time_ci",
    "response_time_p50",
    "response_time_p95",
    "response_time_p99",
    "blocking_probability",
    "requests",
    "answered",
    "errors",
    "achieved_rate",
    "mean_overhead",
)
"""The headline figures of a load generator's run (its ``summary``)."""

INFERENCE_LOAD_SUMMARY = (
    "mean_ttft",
    "mean_ttft_ci",
    "ttft_p50",
    "ttft_p99",
    "mean_tbt",
    "mean_tbt_ci",
    "tbt_p99",
    "mean_e2e",
    "mean_e2e_ci",
    "e2e_p99",
    "output_tokens_per_s",
    "requests",
    "answered",
    "errors",
    "achieved_rate",
)
"""The headline figures of a run of streamed chat completions (its ``summary``)."""


class LoadResult(Result, dict):
    """One open-loop run of the load generator: a mapping of its figures (keys and units in
    hetlb.load.open_loop's docstring; a figure that cannot be computed is None), so that it is read,
    compared and dumped to JSON as before, with ``metadata`` (the LoadSpec and the versions).

    Parameters
    ----------
    figures
        The run's figures by name.
    metadata
        The LoadSpec and the versions.
    """

    def __init__(self, figures: dict, metadata: dict):
        dict.__init__(self, figures)
        self.metadata = metadata

    @property
    def summary(self) -> dict:
        """The headline figures of the load (LOAD_SUMMARY of hetlb.results.load)."""
        return {name: self[name] for name in LOAD_SUMMARY}

    def to_dict(self) -> dict:
        """The figures (the mapping itself) and the metadata."""
        return {**self, "metadata": self.metadata}

    def headline(self) -> tuple:
        return "mean response time (ms)", self["mean_response_time"], self["mean_response_time_ci"]

    def describe(self) -> str:
        targets = len(self.metadata["load"]["targets"])
        return f"{targets} target{'s' if targets != 1 else ''} at {self['offered_rate']:g}/s"

    def extent(self) -> str:
        return f"{self['requests']} requests in {self['duration']:g} s"


class InferenceLoadResult(LoadResult):
    """One open-loop run of streamed chat completions: a mapping of its figures (keys and units in
    hetlb.load.inference's docstring and docs/reference/testbed.md; a figure that cannot be
    computed is None), with ``metadata`` (the InferenceLoadSpec and the versions).

    Parameters
    ----------
    figures
        The run's figures by name.
    metadata
        The InferenceLoadSpec and the versions.
    """

    @property
    def summary(self) -> dict:
        """The headline figures of the streamed load (INFERENCE_LOAD_SUMMARY of hetlb.results.load)."""
        return {name: self[name] for name in INFERENCE_LOAD_SUMMARY}

    def headline(self) -> tuple:
        return "mean time to first token (ms)", self["mean_ttft"], self["mean_ttft_ci"]

    def describe(self) -> str:
        models = len(self.metadata["load"]["models"])
        return f"{models} model{'s' if models != 1 else ''} at {self['offered_rate']:g}/s"
