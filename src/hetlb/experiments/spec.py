"""Sweep specifications: a base scenario, the axes to vary, replications and the root seed.

A spec file::

    name = "jsq-family"
    replications = 10
    seed = 2024
    common_random_numbers = true     # the same arrivals and sizes for every policy at a point

    [base.system]
    n_servers = 100
    speed_mix = [[1.0, 0.5], [0.5, 0.5]]
    load = 0.9
    [base.policy]
    id = "jsq"
    [base.run]
    jobs = 100000
    warmup = 100.0

    [axes]
    "system.load" = [0.5, 0.7, 0.9]
    "policy.id" = ["jsq", "jfsq", "jiq"]

Axis names are dotted paths into the scenario (``system.*``, ``policy.*``, ``run.*``); points are
the Cartesian product of the axes, in the order written.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hetlb import validation
from hetlb.errors import InputError
from hetlb.scenario import TABLES, Scenario, read_toml
from hetlb.version import __version__

SPEC_KEYS = {"name", "replications", "seed", "common_random_numbers", "base", "axes"}
MAX_RUNS = 1_000_000
"""The most runs (points x replications) a sweep may have: a larger one is refused before its
points are built."""
SWEPT_RUN_KEYS = ("replications", "seed")
"""Keys of [run] that belong to the whole sweep (the top of the spec), neither base nor axis."""


@dataclass(frozen=True)
class Point:
    """One point of a sweep: its axis values and the complete scenario mapping they give."""

    values: dict
    scenario: dict

    @property
    def model(self) -> str:
        """The point's model: "continuous" (the default) or "slotted"."""
        return self.scenario.get("system", {}).get("model", "continuous")

    @property
    def kernel(self) -> str:
        """The event loop that runs the point: "continuous", "dispatchers" (continuous time with
        ``dispatchers`` in [system]) or "slotted"."""
        if self.model == "continuous" and "dispatchers" in self.scenario.get("system", {}):
            return "dispatchers"
        return self.model

    @property
    def identity(self) -> str:
        """Content hash of the scenario: a point's name that does not depend on the spec around it."""
        return content_hash(self.scenario)

    def seed_identity(self, common_random_numbers: bool) -> str:
        """What the point's random streams are derived from: with common random numbers the
        policy is left out, so every policy at a point sees the same arrivals and sizes."""
        if not common_random_numbers:
            return self.identity
        return content_hash({key: value for key, value in self.scenario.items() if key != "policy"})


@dataclass(frozen=True)
class Unit:
    """One replication of one point: the smallest piece of work."""

    point_index: int
    replication: int
    scenario: dict
    seed_entropy: int
    seed_key: tuple
    key: str  # the result store's key: scenario, replication, seed and hetlb version

    @property
    def seed(self) -> np.random.SeedSequence:
        return np.random.SeedSequence(self.seed_entropy, spawn_key=self.seed_key)


@dataclass
class SweepSpec:
    """A base scenario (mapping with system, policy and run tables), axes, replications, seed.

    Parameters
    ----------
    base
        The base scenario: a mapping with [system], [policy] and [run] tables.
    axes
        Dotted key -> the values it takes (the grid is their product).
    replications
        Replications per point.
    seed
        The root seed.
    common_random_numbers
        Give every point the same streams, so that points can be paired.
    name
        The sweep's name in the store.
    source
        The file it was read from.
    """

    base: dict
    axes: dict = field(default_factory=dict)
    replications: int = 1
    seed: int = 0
    common_random_numbers: bool = True
    name: str = "sweep"
    source: str | None = None  # the file the spec was read from, if any (to say how to resume it)

    def __post_init__(self):
        validation.integer("replications", self.replications)
        validation.seed("seed", self.seed)
        validation.flag("common_random_numbers", self.common_random_numbers)
        validation.text("name", self.name)
        validation.table("base", self.base)
        for table in TABLES:
            validation.table(f"base.{table}", self.base.get(table, {}))
        for key in SWEPT_RUN_KEYS:
            if key in self.base.get("run", {}):
                raise InputError(f"base.run.{key}", "is set for the whole sweep: put it at the top of the spec")
        validation.table("axes", self.axes)
        runs = self.replications
        for path, values in self.axes.items():
            field = f"axes.{validation.shorten(path)}"
            if path.split(".")[0] not in TABLES or "." not in path or "" in path.split("."):
                raise InputError(field, "must be a dotted path starting with system., policy. or run.")
            if path in (f"run.{key}" for key in SWEPT_RUN_KEYS):
                raise InputError(field, "is set for the whole sweep: put it at the top of the spec")
            if not isinstance(values, list) or not values:
                raise InputError(field, f"must be a non-empty list of values, got {validation.shown(values)}")
            runs *= len(values)
        if runs > MAX_RUNS:
            raise InputError(
                "axes" if self.axes else "replications",
                f"the sweep has {runs:,} runs (points x replications); at most {MAX_RUNS:,}",
            )
        for path, values in self.axes.items():
            seen = set()
            for value in values:
                written = json.dumps(value, sort_keys=True, default=repr)
                if written in seen:
                    rule = f"repeats the value {validation.shown(value)}: each point once"
                    raise InputError(f"axes.{validation.shorten(path)}", rule)
                seen.add(written)

    @classmethod
    def from_mapping(cls, data: dict) -> SweepSpec:
        """A sweep spec from the tables of its TOML file, checked.

        Parameters
        ----------
        data
            The spec's tables: [base] (a scenario), [axes], and the other keys of SPEC_KEYS.

        Returns
        -------
        SweepSpec
            The checked spec.
        """
        validation.table("spec", data)
        unknown = sorted(set(data) - SPEC_KEYS)
        if unknown:
            allowed = ", ".join(sorted(SPEC_KEYS))
            raise InputError(validation.shorten(unknown[0]), f"unknown key in the sweep spec; allowed: {allowed}")
        if "base" not in data:
            raise InputError("base", "the spec needs a [base] scenario with [base.system]")
        return cls(
            base=data["base"],
            axes=dict(validation.table("axes", data.get("axes", {}))),
            replications=data.get("replications", 1),
            seed=data.get("seed", 0),
            common_random_numbers=data.get("common_random_numbers", True),
            name=data.get("name", "sweep"),
        )

    @classmethod
    def from_toml(cls, path) -> SweepSpec:
        """A sweep spec read from a TOML file, checked.

        Parameters
        ----------
        path
            The file (its resolved path is kept as the spec's ``source``).

        Returns
        -------
        SweepSpec
            The checked spec.
        """
        spec = cls.from_mapping(read_toml(path, field="spec"))
        return dataclasses.replace(spec, source=str(Path(path).resolve()))

    def to_mapping(self) -> dict:
        """The spec as a mapping that :meth:`from_mapping` reads back (the layout of a spec file)."""
        return {
            "name": self.name,
            "replications": self.replications,
            "seed": self.seed,
            "common_random_numbers": self.common_random_numbers,
            "base": copy.deepcopy(self.base),
            "axes": copy.deepcopy(self.axes),
        }

    def points(self) -> list[Point]:
        """Every point, each scenario checked (a bad point fails here, before any simulation)."""
        points = []
        for combination in itertools.product(*self.axes.values()):
            values = dict(zip(self.axes, combination))
            scenario = copy.deepcopy(self.base)
            for path, value in values.items():
                target = scenario
                for key in path.split(".")[:-1]:
                    target = target.setdefault(key, {})
                    if not isinstance(target, dict):
                        raise InputError(
                            f"axes.{validation.shorten(path)}", f"{key} is not a table in the base scenario"
                        )
                target[path.rsplit(".", 1)[1]] = value
            try:
                Scenario.from_mapping(scenario)
            except InputError as error:
                raise InputError(f"point {validation.shorten(str(values))}: {error.field}", error.rule) from None
            points.append(Point(values, scenario))
        return points

    def units(self, points: list[Point] | None = None) -> list[Unit]:
        """Every (point, replication), each with its own stream derived from the point's identity;
        ``points`` are this spec's :meth:`points` when already built.

        Parameters
        ----------
        points
            This spec's points, when already built.
        """
        units = []
        for index, point in enumerate(self.points() if points is None else points):
            seed_words = identity_words(point.seed_identity(self.common_random_numbers))
            for replication in range(self.replications):
                key = content_hash(
                    {
                        "scenario": point.scenario,
                        "replication": replication,
                        "seed": self.seed,
                        "crn": self.common_random_numbers,
                        "hetlb": __version__,
                    }
                )
                units.append(Unit(index, replication, point.scenario, self.seed, (*seed_words, replication), key))
        return units


def content_hash(value) -> str:
    """SHA-256 of the canonical JSON of ``value``."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def identity_words(identity: str) -> tuple:
    """Four 32-bit words of a hex digest, to extend a SeedSequence's spawn key."""
    return tuple(int(identity[i : i + 8], 16) for i in range(0, 32, 8))
