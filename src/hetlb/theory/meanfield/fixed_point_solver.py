"""The sampling policies' fixed point T = Phi(T) on a given number of levels: damped iterates, Newton's
method with a chain-rule Jacobian, pseudo-transient continuation."""

from __future__ import annotations

import numpy as np

from hetlb.errors import InputError
from hetlb.theory.meanfield.sampling import MAX_LEVELS, SamplingModel, birth_death_tails

RESIDUAL_TOLERANCE = 1e-10
"""Largest |Phi(T) - T| accepted at a fixed point of the sampling policies."""

NEWTON_STEPS = 50
START_STEPS = 40
START_TOLERANCE = 1e-2
DAMPED_STEPS = 20000
FD_STEP = 1e-7
HALVINGS = 6
PSEUDO_STEPS = 4 * MAX_LEVELS
MAX_PSEUDO_STEP = 1e12
PSEUDO_GROWTH = 2.0


def residual_of(model: SamplingModel, current: np.ndarray) -> np.ndarray:
    return model.step(current[None, :])[1][0] - current


def damped(model: SamplingModel, current: np.ndarray, steps: int, tolerance: float) -> np.ndarray:
    """Iterate T <- (T + Phi(T)) / 2 until |Phi(T) - T| < tolerance or ``steps`` iterations."""
    for _ in range(steps):
        residual = residual_of(model, current)
        if np.max(np.abs(residual)) < tolerance:
            break
        current = current + 0.5 * residual
    return current


def solve_sampling(model: SamplingModel, levels: int, guess) -> np.ndarray:
    """The fixed point T = Phi(T) of the groups' tails T_{g,1..L}: damped iterates of Phi from the
    empty system (or from ``guess``), then Newton's method with the Jacobian of phi_jacobian and a
    backtracking line search; pseudo-transient continuation when the line search stalls, and a
    long damped iteration followed by Newton's method when that fails too. All stop at
    |Phi(T) - T| < RESIDUAL_TOLERANCE."""
    size = model.n_groups * levels
    current = np.zeros(size) if guess is None else model.group_tails(guess)[:, 1:].ravel()
    current = damped(model, current, START_STEPS, START_TOLERANCE)
    solution = newton(model, current)
    if solution is None:
        solution = pseudo_transient(model, current)
    if solution is None:
        current = damped(model, current, DAMPED_STEPS, RESIDUAL_TOLERANCE)
        solution = newton(model, current)
        if solution is None:
            raise InputError(
                "load",
                f"{model.policy}'s mean-field fixed point did not converge on {levels} levels (its queues are "
                "near the limit of stability); try a finite --buffer, a lower --load or other --set p_fast/p_slow",
            )
    return model.step(solution[None, :])[0][0]


def newton(model: SamplingModel, current: np.ndarray) -> np.ndarray | None:
    """Newton's method on T - Phi(T) = 0 from ``current``; None when it does not converge."""
    size = current.size
    identity = np.eye(size)
    residual = residual_of(model, current)
    for _ in range(NEWTON_STEPS):
        if np.max(np.abs(residual)) < RESIDUAL_TOLERANCE:
            return current
        jacobian = phi_jacobian(model, current) - identity
        try:
            change = np.linalg.solve(jacobian, -residual)
        except np.linalg.LinAlgError:
            return None
        norm = np.max(np.abs(residual))
        for _ in range(HALVINGS):
            trial = np.clip(current + change, 0.0, 1.0)
            trial_residual = residual_of(model, trial)
            if np.max(np.abs(trial_residual)) < norm:
                break
            change = change / 2.0
        else:
            return None
        current, residual = trial, trial_residual
    return current if np.max(np.abs(residual)) < RESIDUAL_TOLERANCE else None


def pseudo_transient(model: SamplingModel, current: np.ndarray) -> np.ndarray | None:
    """Pseudo-transient continuation on dT/dtau = Phi(T) - T from ``current``: implicit Euler steps
    (I / delta - (dPhi/dT - I)) change = Phi(T) - T, the pseudo time step delta growing as the
    residual falls (PSEUDO_GROWTH times the ratio of successive residuals, up to Newton's method as
    delta grows without bound) and cut by 4 when a step more than doubles the residual. Small steps follow
    the flow towards the fixed point where Newton's line search stalls (jobs filling the queues of
    the slowest servers one level per step); None when it does not converge in PSEUDO_STEPS."""
    identity = np.eye(current.size)
    residual = residual_of(model, current)
    norm = float(np.max(np.abs(residual)))
    delta = 1.0
    for _ in range(PSEUDO_STEPS):
        if norm < RESIDUAL_TOLERANCE:
            return current
        try:
            change = np.linalg.solve(identity / delta - (phi_jacobian(model, current) - identity), residual)
        except np.linalg.LinAlgError:
            return None
        trial = np.clip(current + change, 0.0, 1.0)
        trial_residual = residual_of(model, trial)
        trial_norm = float(np.max(np.abs(trial_residual)))
        if trial_norm > 2.0 * norm:
            delta /= 4.0
            continue
        delta = min(PSEUDO_GROWTH * delta * norm / max(trial_norm, RESIDUAL_TOLERANCE), MAX_PSEUDO_STEP)
        current, residual, norm = trial, trial_residual, trial_norm
    return None


def phi_jacobian(model: SamplingModel, current: np.ndarray) -> np.ndarray:
    """dPhi/dT at the tails T_{g,1..L} = ``current`` (flattened), by the chain rule through the
    chains: a birth-death chain's tails s_i (i = 1..L) move with its log birth rate at level j as
    ds_i / d(log a_j) = s_{max(i, j+1)} - s_i s_{j+1}, and a class's birth rate a_{m,j} depends on
    its group's T_{g,j} and T_{g,j+1} and on the T_{g',1} of every group (true of pod, jsq-df-ds and
    jiq-df-ds). Those derivatives come from forward differences of the birth rates alone, with the
    levels j >= 2 perturbed three at a time (levels three apart touch disjoint birth rates): a few
    batched evaluations, and O(M L^2) work, instead of one evaluation of Phi per column."""
    n_groups, n_classes = model.n_groups, model.speed.size
    levels = current.size // n_groups
    inner = np.clip(current.reshape(n_groups, levels), 0.0, 1.0)
    step = np.where(inner + FD_STEP > 1.0, -FD_STEP, FD_STEP)  # stay inside [0, 1]
    level = np.arange(1, levels + 1)
    perturbations = [
        np.where((level == 1)[None, :] & (np.arange(n_groups) == g)[:, None], step, 0.0) for g in range(n_groups)
    ]
    perturbations += [np.where(((level >= 2) & (level % 3 == r))[None, :], step, 0.0) for r in range(3)]
    tails = np.ones((1 + len(perturbations), n_groups, levels + 1))
    tails[0, :, 1:] = inner
    tails[1:, :, 1:] = inner[None] + np.array(perturbations)
    birth = model.class_birth(tails)  # (batch, M, L): a_{m,j}, j = 0..L-1
    change = birth[1:] - birth[0]
    occupancy = birth_death_tails(birth[0], model.death[:, :levels])  # s_{m,i}, i = 1..L
    index = np.arange(levels)
    sensitivity = (
        occupancy[:, np.maximum(index[:, None], index[None, :])] - occupancy[:, :, None] * occupancy[:, None, :]
    )
    with np.errstate(divide="ignore", invalid="ignore"):  # ds_{m,i} / da_{m,j}; 0 where a_{m,j} = 0
        sensitivity = np.where(birth[0][:, None, :] > 0, sensitivity / birth[0][:, None, :], 0.0)
    own_step = step[model.group_of_class]  # (M, L): the step of T_{g(m),k}, k = 1..L
    colour = change[n_groups:]  # the three level-strided perturbations
    by_next = np.zeros((n_classes, levels))  # da_{m,j} / dT_{g(m),j+1}, j = 1..L-1
    by_same = np.zeros((n_classes, levels))  # da_{m,j} / dT_{g(m),j}, j = 2..L-1
    above_one, above_two = np.arange(1, levels), np.arange(2, levels)
    by_next[:, above_one] = colour[(above_one + 1) % 3, :, above_one].T / own_step[:, above_one]
    by_same[:, above_two] = colour[above_two % 3, :, above_two].T / own_step[:, above_two - 1]
    column = np.zeros((n_classes, levels, levels))  # ds_{m,i} / dT_{g(m),k}, k = 2..L
    column[:, :, 1:] = sensitivity[:, :, 1:] * by_next[:, None, 1:]
    column[:, :, 1:-1] += sensitivity[:, :, 2:] * by_same[:, None, 2:]
    weight = np.zeros((n_groups, n_classes))
    weight[model.group_of_class, np.arange(n_classes)] = model.fraction / model.group_fraction[model.group_of_class]
    jacobian = np.zeros((n_groups, levels, n_groups, levels))
    for g in range(n_groups):
        jacobian[g, :, g, :] = np.einsum("m,mik->ik", weight[g], column)
        for other in range(n_groups):  # the columns of T_{other,1}
            by_first = change[other] / step[other, 0]
            jacobian[g, :, other, 0] = np.einsum("m,mij,mj->i", weight[g], sensitivity, by_first)
    return jacobian.reshape(n_groups * levels, n_groups * levels)
