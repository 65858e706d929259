"""Servers that serve many jobs at once in the continuous-time models: the checks, the kernel's data
for the concurrency and the rate curves (hetlb.kernels.batch_servers), and the figures they add.

>>> import hetlb
>>> system = hetlb.System.from_speeds([1.0, 1.0], concurrency=4, rate_curve="saturating:alpha=0.2", load=0.8)
>>> result = hetlb.simulate(system, "jsq", jobs=20_000, seed=1)
>>> bool(0.0 < result.runs[0].slot_utilisation.mean() < 1.0)
True
"""

from __future__ import annotations

import numpy as np

from hetlb import validation
from hetlb.constants import UNLIMITED_CONCURRENCY
from hetlb.errors import InputError
from hetlb.kernels import batch_servers as kernel
from hetlb.model.system import System
from hetlb.policies import registry
from hetlb.policies.registry import Policy

MOST_SLOTS = int(np.iinfo(np.int32).max)
"""A concurrency as the kernel's server record holds it (int32): an unlimited one, or one beyond
this, is this many (the record's job counts are int32 too, so no server holds more)."""


def check_multi_slot_policy(system: System, policy: Policy, codes=kernel.CODES) -> None:
    """Refuse, in one line, a policy the multi-slot loops have no meaning or no rule for (``codes``:
    those the loop has a rule for)."""
    spec = policy.spec
    if spec.selection_key is not None:
        raise InputError(
            "policy",
            f"{spec.id} is registered with a key of (queue length, speed class, speed), which does not say what it "
            "does on servers that serve many jobs at once; run it with concurrency 1",
        )
    if spec.code == registry.JSQ_DF_DS:
        raise InputError(
            "policy",
            "jsq-df-ds splits the servers into fast and slow by speed and looks for idle ones, neither of which has "
            "one meaning on servers that serve many jobs at once; use jsq-fiq or pod, or concurrency 1",
        )
    if spec.code not in codes:
        raise InputError("policy", f"{spec.id} has no rule for servers that serve many jobs at once (concurrency > 1)")
    if spec.code == registry.JLU and np.any(system.concurrency >= UNLIMITED_CONCURRENCY):
        raise InputError("concurrency", "jlu joins the least n_s / c_s, which needs every concurrency finite")


def bucketed(policy_code: int, slot_state: kernel.SlotState) -> bool:
    """Whether the key buckets serve the policy on these multi-slot servers: its keys are integers
    (hetlb.kernels.batch_servers.BUCKETED_CODES) and no server can have unboundedly many jobs in
    service, so that a server's key stays below the job pool's size plus :func:`held_beyond_one`."""
    return policy_code in kernel.BUCKETED_CODES and bool(np.all(slot_state.slot_servers["room"] < MOST_SLOTS))


def held_beyond_one(slot_state: kernel.SlotState) -> int:
    """The most jobs a server can have in service, less one (those not in the job pool beyond the
    one of concurrency 1)."""
    return int(slot_state.slot_servers["room"].max()) - 1


def pack_slots(system: System) -> kernel.SlotModel:
    """The curves as tables of phi(b), phi(b) / b and b / phi(b) up to the largest finite min(c, buffer)
    (at most MAX_TABLE_JOBS), their formulas beyond, and each server's capacity mu phi(c)."""
    curves, _ = system.rate_curve_classes()
    most_in_service = np.minimum(system.concurrency, system.buffer.astype(np.int64))
    width = 1 + int(min(most_in_service.max(), kernel.MAX_TABLE_JOBS))
    jobs = np.arange(1, width)
    curve_phi = np.zeros((len(curves), width))
    curve_rate = np.zeros((len(curves), width))
    curve_job_time = np.zeros((len(curves), width))
    for i, curve in enumerate(curves):
        curve_phi[i, 1:] = curve.phi(jobs)
        curve_rate[i, 1:] = curve.per_job_rate(jobs)
        curve_job_time[i, 1:] = jobs / curve_phi[i, 1:]
    alpha = np.array([1.0 if curve.kind == "shared" else curve.alpha for curve in curves])
    tail = np.array([curve.values[-1] if curve.kind == "table" else 0.0 for curve in curves])
    return kernel.SlotModel(
        curve_phi=curve_phi,
        curve_rate=curve_rate,
        curve_alpha=alpha,
        curve_tail=tail,
        curve_job_time=curve_job_time,
        capacity=np.asarray(system.server_capacity, dtype=np.float64),
    )


def new_slot_state(system: System) -> kernel.SlotState:
    """Every multi-slot server empty at time 0, with its region of jobs in service."""
    n = system.n_servers
    _, curve_index = system.rate_curve_classes()
    slot_servers = np.zeros(n, kernel.SLOT_SERVER_DTYPE)
    slots = np.minimum(system.concurrency, MOST_SLOTS)
    room = np.minimum(slots, np.minimum(system.buffer, MOST_SLOTS))
    slot_servers["concurrency"] = slots
    slot_servers["room"] = room
    slot_servers["curve"] = curve_index
    capacity = np.minimum(room, kernel.INITIAL_SERVICE_ROOM)
    slot_servers["heap_capacity"] = capacity
    slot_servers["heap_offset"] = np.concatenate(([0], np.cumsum(capacity)[:-1]))
    counters = np.zeros(1, kernel.SLOT_COUNTER_DTYPE)
    counters["full_server"] = -1
    return kernel.SlotState(
        counters=counters,
        slot_servers=slot_servers,
        service=np.zeros(int(capacity.sum()), kernel.SERVICE_DTYPE),
        window_service_area=np.zeros(n),
    )


def grow_service_room(slot_state: kernel.SlotState) -> kernel.SlotState:
    """Double the region of jobs in service of the server whose region is full (at most its
    min(c, buffer)), laying the regions out again one after another."""
    slot_servers = slot_state.slot_servers.copy()
    full = int(slot_state.counters[0]["full_server"])
    capacity = slot_servers["heap_capacity"].astype(np.int64)
    capacity[full] = min(2 * capacity[full], int(slot_servers["room"][full]))
    total = int(capacity.sum())
    if total > MOST_SLOTS:
        raise InputError(
            "arrival_rate",
            f"more than {MOST_SLOTS:,} jobs in service at once, the most a run holds: lower the load or set a buffer",
        )
    validation.check_memory(
        "arrival_rate",
        kernel.SERVICE_DTYPE.itemsize * total,
        f"{total:,} jobs in service at once",
        "lower the load, limit the concurrency or set a buffer",
    )
    offset = np.concatenate(([0], np.cumsum(capacity)[:-1]))
    service = np.zeros(total, kernel.SERVICE_DTYPE)
    for s in np.flatnonzero(slot_servers["in_service"]):
        held = int(slot_servers["in_service"][s])
        old = int(slot_servers["heap_offset"][s])
        service[offset[s] : offset[s] + held] = slot_state.service[old : old + held]
    slot_servers["heap_capacity"] = capacity
    slot_servers["heap_offset"] = offset
    slot_state.counters[0]["full_server"] = -1
    return slot_state._replace(slot_servers=slot_servers, service=service)


def slot_keys(policy_code: int, queue_len: np.ndarray, speed: np.ndarray, slots) -> np.ndarray:
    """Every server's selection key (hetlb.kernels.batch_servers.slot_keys) holding ``queue_len``
    jobs, ``slots`` = (SlotModel, SlotState)."""
    slot_model, slot_state = slots
    return kernel.slot_keys(
        policy_code,
        queue_len,
        slot_state.slot_servers,
        speed,
        slot_model.capacity,
        slot_model.curve_phi,
        slot_model.curve_rate,
        slot_model.curve_alpha,
        slot_model.curve_tail,
    )


def no_slots() -> tuple[kernel.SlotModel, kernel.SlotState]:
    """The multi-slot data of a system whose servers serve one job at a time: empty arrays."""
    empty = np.zeros(0)
    model = kernel.SlotModel(np.zeros((0, 1)), np.zeros((0, 1)), empty, empty, np.zeros((0, 1)), empty)
    counters = np.zeros(1, kernel.SLOT_COUNTER_DTYPE)
    counters["full_server"] = -1
    state = kernel.SlotState(counters, np.zeros(0, kernel.SLOT_SERVER_DTYPE), np.zeros(0, kernel.SERVICE_DTYPE), empty)
    return model, state


def slot_figures(system: System, slot_state: kernel.SlotState, measured_time: float) -> dict:
    """Per server the time-average jobs in service E[b] and the utilisation E[b] / c (nan for
    unlimited c) over the measured window."""
    in_service = slot_state.window_service_area / measured_time
    with np.errstate(invalid="ignore", divide="ignore"):
        utilisation = np.where(
            system.concurrency >= UNLIMITED_CONCURRENCY, np.nan, in_service / system.concurrency.astype(np.float64)
        )
    return {"mean_in_service": in_service, "slot_utilisation": utilisation}
