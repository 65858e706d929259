"""The many-server (mean-field) limit N -> infinity of the complete-graph system with server classes.

Classes m = 0, 1, ... (fastest first) hold fractions alpha_m of the N servers, with speeds mu_m,
concurrencies c_m and rate curves phi_m (hetlb.model.servers; c_m = 1 is the papers' server): a
class-m server with n jobs completes them at rate mu_m phi_m(min(n, c_m)) (exponential sizes).
Jobs arrive as a Poisson stream of rate lambda per server (load rho = lambda / sum_m alpha_m
mu_m phi_m(c_m) < 1); every server has buffer b (jobs, counting those in service; None is
infinite). The state of the limit is the occupancy s_{m,i}: the fraction of class-m servers with
at least i jobs. (Paper 000 writes s_{m,i} for the fraction of *all* servers that are of class m
with at least i jobs: alpha_m times ours.) docs/background/mean-field.md derives every fixed point
used here.

Two kinds of limit:

- *Sampling* policies (``random``, ``weighted-random``, ``pod``, ``jsq-df-ds``, ``jiq-df-ds``): the
  drift is smooth and each server of class m is, in the limit, a birth-death chain with birth rate
  a_{m,j}(s) at level j and death rate mu_m phi_m(min(j + 1, c_m)). The fixed point is found by
  Newton's method on the occupancy of the sampling groups (:mod:`.truncation`,
  :mod:`.fixed_point_solver`); :func:`mean_field_trajectory` integrates the ODE.

Each function takes a :class:`hetlb.System` and has a lower-level form on arrays (class speeds
and fractions), named ``..._arrays``.
  JSQ(d_F, d_S) and JIQ(d_F, d_S) are for servers of one slot.
- *Ranking* policies (``jsq``, ``jiq``, ``jsq-lisf``, ``jfsq``, ``jfiq``, ``jsq-fiq``, ``jssq``,
  ``sed``): an arrival always finds a server of least key, so the levels are filled in increasing
  key up to a threshold and the fixed point is explicit (:mod:`.ranking` for servers of one slot,
  :mod:`.slot_filling` for several; jsq-lisf for one slot only). Their fluid limit is a
  differential inclusion (the drift jumps where a level empties); only the fixed point is provided.

Plain NumPy (SciPy for the ranking policies' root and the ODE, imported where used); nothing here
depends on the simulation kernels."""

from hetlb.theory.meanfield.classes import server_speeds
from hetlb.theory.meanfield.fixed_points import mean_field, mean_field_arrays
from hetlb.theory.meanfield.limit import MeanFieldLimit
from hetlb.theory.meanfield.policies import MEANFIELD_POLICIES, SAMPLING
from hetlb.theory.meanfield.sampling import pod_equal_servers_response_time
from hetlb.theory.meanfield.transients import (
    MeanFieldTrajectory,
    mean_field_settling_time,
    mean_field_trajectory,
    mean_field_trajectory_arrays,
)

__all__ = [
    "MEANFIELD_POLICIES",
    "MeanFieldLimit",
    "MeanFieldTrajectory",
    "mean_field",
    "mean_field_arrays",
    "mean_field_trajectory",
    "mean_field_trajectory_arrays",
    "pod_equal_servers_response_time",
    "mean_field_settling_time",
    "server_speeds",
    "SAMPLING",
]
