"""Messages in flight: the updates a dispatcher receives late, O(1) per message.

Each kind of delayed update (piggyback, push, pull, snapshot) has its own segment of the
``flight_*`` arrays (observed time, target m * N + s, value) and a record in ``flights``
(FLIGHT_DTYPE). With a constant delay the messages of a kind arrive in the order they were sent,
so the segment is a FIFO ring and the kind's next delivery is its head's; with exponential delays
of mean d the P messages of a kind in flight are memoryless, so the kind's next delivery comes
after an exponential time of rate P / d, drawn afresh whenever P changes, and delivers one of
them chosen uniformly (the last takes its place). The next delivery of all is the earliest of the
kinds' (docs/reference/dispatchers.md); hetlb.kernels.updates sends through these helpers, and the
loop of hetlb.kernels.dispatchers delivers through them.
"""

import numpy as np

from hetlb.jit import njit
from hetlb.policies import rules

DELAY_NONE, DELAY_CONSTANT, DELAY_EXPONENTIAL = 0, 1, 2
DELAYED_KINDS = 4
"""The kinds PIGGYBACK .. SNAPSHOT, those that may be delayed: each has its record in ``flights``."""

FLIGHT_DTYPE = np.dtype(
    [("next", "f8"), ("offset", "i8"), ("capacity", "i8"), ("start", "i8"), ("count", "i8"), ("reserve", "i8")]
)
"""The messages in flight of one kind: the time of its next delivery (+inf when none), its segment
of the ``flight_*`` arrays (first entry, length), the position of its oldest message in the
segment (a ring, for a constant delay) and how many it holds, and the most one event may send."""


@njit(inline="always")
def find_next_delivery(flights, dispatcher_counters):
    """Set dispatcher_counters.next_message and dispatcher_counters.next_kind to the earliest of the kinds' next deliveries."""
    kind = 0
    for k in range(1, DELAYED_KINDS):
        if flights[k].next < flights[kind].next:
            kind = k
    dispatcher_counters.next_message = flights[kind].next
    dispatcher_counters.next_kind = kind


@njit(inline="always")
def put_in_flight(
    flights,
    flight_observed,
    flight_target,
    flight_value,
    dispatcher_counters,
    law,
    mean,
    kind,
    target,
    value,
    now,
    update_rng,
):
    """Put a message of ``kind`` observed ``now`` in flight: at the end of the kind's ring (constant
    delay) or of its pool (exponential delays, whose next delivery is drawn afresh)."""
    flight = flights[kind]
    position = flight.start + flight.count
    if position >= flight.capacity:
        position -= flight.capacity
    entry = flight.offset + position
    flight_observed[entry] = now
    flight_target[entry] = target
    flight_value[entry] = value
    flight.count += 1
    if flight.count + flight.reserve > flight.capacity:
        dispatcher_counters.flight_full = 1
    if law == DELAY_CONSTANT:
        if flight.count == 1:
            flight.next = now + mean
            if flight.next < dispatcher_counters.next_message:
                dispatcher_counters.next_message = flight.next
                dispatcher_counters.next_kind = kind
    else:
        flight.next = now + mean / flight.count * update_rng.exponential()
        find_next_delivery(flights, dispatcher_counters)


@njit(inline="always")
def take_from_flight(
    flights, flight_observed, flight_target, flight_value, dispatcher_counters, law, mean, now, update_rng
):
    """Take the message delivered now out of flight: the head of its kind's ring, or one of its
    kind's pool chosen uniformly (the last takes its place); return its (target, value, observed
    time)."""
    kind = dispatcher_counters.next_kind
    flight = flights[kind]
    flight.count -= 1
    if law == DELAY_CONSTANT:
        entry = flight.offset + flight.start
        flight.start += 1
        if flight.start == flight.capacity:
            flight.start = 0
        head = flight.offset + flight.start
        flight.next = flight_observed[head] + mean if flight.count > 0 else np.inf
    else:
        entry = flight.offset + rules.uniform_index(update_rng, flight.count + 1)
        flight.next = now + mean / flight.count * update_rng.exponential() if flight.count > 0 else np.inf
    target, value, observed = flight_target[entry], flight_value[entry], flight_observed[entry]
    if law != DELAY_CONSTANT:
        last = flight.offset + flight.count
        flight_target[entry], flight_value[entry], flight_observed[entry] = (
            flight_target[last],
            flight_value[last],
            flight_observed[last],
        )
    find_next_delivery(flights, dispatcher_counters)
    return target, value, observed
