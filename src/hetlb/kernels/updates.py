"""The dispatchers' estimates and the update messages that change them (the continuous model with
M dispatchers, hetlb.kernels.dispatchers; docs/reference/dispatchers.md).

Each dispatcher v holds ``estimate[v, s]``, its number in system of every server s, with the time
of the observation it holds (``estimate_time``) and, for jsq-lisf's order, when it last fell to 0
(or below c on a multi-slot server, ``idle_since``); with a least-key tree per view, a changed
estimate changes its key there too (:func:`set_estimate`).

Updates are messages ``(target m * N + s, value, observed time)`` sent at an event: piggyback at a
departure (or a rejection) to the job's dispatcher, push after a decision, pull after a departure,
snapshots at the poll times (:func:`schedule_snapshot`). A message with no delay is applied at once
(:func:`send`). The others wait in flight, each kind (signal) in its own segment of the
``flight_*`` arrays, O(1) per message (hetlb.kernels.flights): with a constant delay the messages
of a kind arrive in the order they were sent, so the segment is a FIFO ring and the kind's next
delivery is its head's; with exponential delays of mean d the P messages of a kind in flight are
memoryless, so the kind's next delivery comes after an exponential time of rate P / d, drawn
afresh whenever P changes, and delivers one of them chosen uniformly (removed by moving the last
into its place). The next delivery of all is the earliest of the kinds'. A message applies only if
what it observed is at least as recent as what the estimate holds (:func:`apply_message`); older
ones are counted as stale and dropped.

A dispatcher that counts what it sends (``increment``) adds to a delayed message the jobs it sent
to the server after the message's observation: a message in flight carries the number observed
minus the dispatcher's sends to that server until then (``dispatched``), and its delivery adds the
sends counted since, at most the buffer. Its estimate is then the number observed plus its own
jobs sent since, what a proxy's count of its requests in flight gives when the answers reach it
late.

The estimates' error and age are sampled at the arrivals (:func:`measure_estimate`). Every helper
takes scalars, records and plain arrays (the loop is compiled without numba's runtime; see
hetlb.kernels.dispatchers.advance).
"""

from hetlb.jit import njit, records
from hetlb.kernels.batch_servers import slot_key
from hetlb.kernels.flights import DELAY_NONE, put_in_flight
from hetlb.kernels.trees import set_key
from hetlb.policies import rules
from hetlb.signals import MESSAGE_KINDS

PIGGYBACK, PUSH, PULL, SNAPSHOT, PROBE, INCREMENT = range(len(MESSAGE_KINDS))
"""Kinds of updates, the index of their counts (hetlb.signals.MESSAGE_KINDS names them); the first
four are messages that may be delayed, ``probe`` counts a true probe's two messages per server
asked, ``increment`` a dispatcher's own dispatches (local, no message on the wire)."""


@njit(inline="always")
def set_estimate(key_code, estimate, idle_since, key_trees, servers, n_classes, class_speed, slots, v, s, value, at):
    """Set view v's estimate of server s to ``value`` at time ``at`` (its key in the view's tree too).
    ``slots``: the multi-slot servers' (records, speeds, capacities, curve tables), empty records
    for concurrency 1; on them ``idle_since`` is when the estimate last fell below c (a free slot),
    and the keys are those of hetlb.policies.rules.slot_selection_key."""
    if estimate[v, s] == value:
        return
    slot_servers, speed, capacity, curve_phi_table, curve_rate_table, curve_alpha, curve_tail = slots
    multi_slot = len(slot_servers) > 0
    if not multi_slot and value == 0:
        idle_since[v, s] = at
    if multi_slot and value < slot_servers[s].concurrency <= estimate[v, s]:
        idle_since[v, s] = at
    estimate[v, s] = value
    if len(key_trees) > 0:
        if multi_slot:
            key = slot_key(
                key_code,
                value,
                slot_servers[s],
                s,
                speed,
                capacity,
                curve_phi_table,
                curve_rate_table,
                curve_alpha,
                curve_tail,
                idle_since[v, s],
            )
        else:
            speed_class = servers[s].speed_class
            key = rules.selection_key(
                key_code, value, speed_class, n_classes, class_speed[speed_class], idle_since[v, s]
            )
        set_key(records(key_trees[v]), s, key)


@njit(inline="always")
def apply_message(
    key_code,
    estimate,
    estimate_time,
    idle_since,
    key_trees,
    dispatcher_counters,
    servers,
    n_classes,
    class_speed,
    slots,
    target,
    value,
    observed,
):
    """Deliver a message to view target // N: applied unless the estimate holds a newer observation."""
    n_servers = estimate.shape[1]
    v = target // n_servers
    s = target - v * n_servers
    if observed < estimate_time[v, s]:
        dispatcher_counters.stale += 1
        return
    dispatcher_counters.delivered += 1
    estimate_time[v, s] = observed
    set_estimate(
        key_code, estimate, idle_since, key_trees, servers, n_classes, class_speed, slots, v, s, value, observed
    )


@njit(inline="always")
def send(
    key_code,
    delay_law,
    delay_mean,
    estimate,
    estimate_time,
    idle_since,
    key_trees,
    flights,
    flight_observed,
    flight_target,
    flight_value,
    dispatched,
    messages,
    dispatcher_counters,
    servers,
    n_classes,
    class_speed,
    slots,
    kind,
    m,
    s,
    now,
    tagging,
    update_rng,
):
    """Dispatcher m learns server s's number in system at ``now`` by a message of ``kind`` (counted
    while ``tagging``): at once, or after the kind's delay (its value less m's sends to s so far,
    ``dispatched``, flat, given back at delivery)."""
    messages[kind] += tagging
    target = m * estimate.shape[1] + s
    value = servers[s].queue_len
    law = delay_law[kind]
    if law == DELAY_NONE:
        apply_message(
            key_code,
            estimate,
            estimate_time,
            idle_since,
            key_trees,
            dispatcher_counters,
            servers,
            n_classes,
            class_speed,
            slots,
            target,
            value,
            now,
        )
        return
    put_in_flight(
        flights,
        flight_observed,
        flight_target,
        flight_value,
        dispatcher_counters,
        law,
        delay_mean[kind],
        kind,
        target,
        value - dispatched[target],
        now,
        update_rng,
    )


@njit
def schedule_snapshot(dispatcher_model, counters, update_rng):
    """Move the next poll (in the one record of ``counters``) on from the one just made, or from
    time 0 before the first: its time and which dispatcher it polls (-1: every one, the aligned
    polls)."""
    dispatcher_counters = records(counters)[0]
    interval = dispatcher_model.snapshot_interval
    n_dispatchers = dispatcher_model.n_dispatchers
    if dispatcher_model.snapshot_aligned:
        dispatcher_counters.snapshot_dispatcher = -1
        dispatcher_counters.next_snapshot += (
            interval * update_rng.exponential() if dispatcher_model.snapshot_poisson else interval
        )
    elif dispatcher_model.snapshot_poisson:  # M independent Poisson clocks: one of rate M / tau, a uniform dispatcher
        dispatcher_counters.next_snapshot += interval / n_dispatchers * update_rng.exponential()
        dispatcher_counters.snapshot_dispatcher = rules.uniform_index(update_rng, n_dispatchers)
    else:
        dispatcher_counters.snapshot_index += 1
        if dispatcher_counters.snapshot_index == n_dispatchers:
            dispatcher_counters.snapshot_index = 0
            dispatcher_counters.snapshot_cycle += 1
        m = dispatcher_model.snapshot_order[dispatcher_counters.snapshot_index]
        dispatcher_counters.snapshot_dispatcher = m
        dispatcher_counters.next_snapshot = (
            dispatcher_model.snapshot_phase[m] + dispatcher_counters.snapshot_cycle * interval
        )


@njit(inline="always")
def measure_estimate(estimate, estimate_time, dispatcher_counters, servers, m, now, sampled):
    """Add dispatcher m's error and age for server ``sampled`` to the sums."""
    error = estimate[m, sampled] - servers[sampled].queue_len
    dispatcher_counters.error_samples += 1
    dispatcher_counters.error_sum += error
    dispatcher_counters.absolute_error_sum += abs(error)
    dispatcher_counters.age_sum += now - estimate_time[m, sampled]
