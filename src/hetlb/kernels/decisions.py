"""A dispatcher's decision on its view of the queues, and the herd it makes (the continuous model with
M dispatchers, hetlb.kernels.dispatchers).

Dispatcher m decides on its *view*: its estimates ``estimate[m, s]`` of the numbers in system
(hetlb.kernels.updates), or, for exact knowledge and true probes, the one view of the truth. A
decision on a view is hetlb.policies.choice.choose_server over the job type's compatible servers,
O(degree); a ranking policy on a job type that may use every server reads the view's least-key
tree (hetlb.kernels.trees) instead, O(log N), the structure and draw of the single kernel's tree
path, so that with the truth as the one view the decisions are the same. On multi-slot servers a
ranking policy ranks them by the keys of hetlb.policies.rules.slot_selection_key
(:func:`least_slot_key_server`).

The herd (:func:`record_herd`): how often a decision goes to the server that another dispatcher
chose less than ``herd_window`` earlier.
"""

from hetlb.jit import njit, records
from hetlb.kernels.batch_servers import slot_key
from hetlb.kernels.trees import random_least_leaf
from hetlb.policies import rules
from hetlb.policies.choice import choose_server


@njit(inline="always")
def decide(
    decision_code,
    key_code,
    sample_size,
    jba_rate_weighted,
    jba_inclusive,
    jba_fallback,
    compat_indptr,
    compat_indices,
    server_class,
    speed,
    cumulative_speed,
    type_uses_tree,
    n_classes,
    estimate,
    idle_since,
    key_trees,
    keys,
    ties,
    sample,
    servers,
    slots,
    slot_ranking,
    job_type,
    v,
    policy_rng,
):
    """The server dispatcher view ``v`` sends a job of ``job_type`` to. On multi-slot servers
    (``slots`` as in :func:`set_estimate`) a ranking policy (``slot_ranking``) takes the keys of
    hetlb.policies.rules.slot_selection_key on the estimates; the others decide as for c = 1, on
    the number of jobs, weighing servers by their capacities (``speed`` and ``cumulative_speed``
    are then those of the capacities mu phi(c))."""
    lo = compat_indptr[job_type]
    hi = compat_indptr[job_type + 1]
    if type_uses_tree[job_type]:
        tree = records(key_trees[v])
        s = random_least_leaf(tree, policy_rng, servers)
        if len(slots[0]) > 0:
            falls_back = rules.slot_falls_back_to_uniform(key_code, tree[1].key)
        else:
            falls_back = rules.falls_back_to_uniform(key_code, tree[1].key, n_classes)
        if falls_back:
            s = compat_indices[lo + rules.uniform_index(policy_rng, hi - lo)]
        return s
    if slot_ranking:
        return least_slot_key_server(
            key_code, compat_indices, lo, hi, estimate[v], idle_since[v], slots, keys, ties, policy_rng
        )
    return choose_server(
        decision_code,
        compat_indices,
        lo,
        hi,
        estimate[v],
        server_class,
        n_classes,
        speed,
        cumulative_speed,
        idle_since[v],
        sample_size,
        jba_rate_weighted,
        jba_inclusive,
        jba_fallback,
        keys,
        ties,
        sample,
        policy_rng,
    )


@njit(inline="always")
def least_slot_key_server(key_code, candidates, lo, hi, estimate, idle_since, slots, keys, ties, rng):
    """A ranking policy's choice among ``candidates[lo:hi]`` on multi-slot servers, on the
    estimates: a least key of hetlb.policies.rules.slot_selection_key, ties at random; jiq and jfiq
    with no free slot among them fall back to a uniform candidate."""
    slot_servers, speed, capacity, curve_phi_table, curve_rate_table, curve_alpha, curve_tail = slots
    for i in range(lo, hi):
        s = candidates[i]
        keys[s] = slot_key(
            key_code,
            estimate[s],
            slot_servers[s],
            s,
            speed,
            capacity,
            curve_phi_table,
            curve_rate_table,
            curve_alpha,
            curve_tail,
            idle_since[s],
        )
    s, least = rules.least_key_server(candidates, lo, hi, keys, ties, rng)
    if rules.slot_falls_back_to_uniform(key_code, least):
        return candidates[lo + rules.uniform_index(rng, hi - lo)]
    return s


@njit(inline="always")
def record_herd(decisions, herd_same, herd_other, last_decision_time, last_decision_dispatcher, m, s, now, herd_window):
    """Count dispatcher m's decision for s, herded when s was chosen less than herd_window ago."""
    decisions[m] += 1
    if now - last_decision_time[s] < herd_window:
        if last_decision_dispatcher[s] == m:
            herd_same[m] += 1
        else:
            herd_other[m] += 1
