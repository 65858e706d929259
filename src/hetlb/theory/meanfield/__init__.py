"""The many-server (mean-field) limit N -> infinity of the complete-graph system with speed classes.

Classes m = 0, 1, ... (fastest first) hold fractions alpha_m of the N servers, with service rates
mu_m; jobs arrive at rate lambda per server (load rho = lambda / sum_m alpha_m mu_m < 1); every
server has buffer b (jobs, counting the one in service; None is infinite). The state of the limit
is the occupancy s_{m,i}: the fraction of class-m servers with at least i jobs. (Paper 000 writes
s_{m,i} for the fraction of *all* servers that are of class m with at least i jobs: alpha_m times
ours.) docs/background/mean-field.md derives every fixed point used here.

Two kinds of limit:

- *Sampling* policies (``random``, ``weighted-random``, ``pod``, ``jsq-df-ds``, ``jiq-df-ds``): the
  drift is smooth and each server of class m is, in the limit, a birth-death chain with birth rate
  a_{m,j}(s) at level j and death rate mu_m. The fixed point is found by Newton's method on the
  occupancy of the sampling groups; :func:`mean_field_trajectory` integrates the ODE.
- *Ranking* policies (``jsq``, ``jiq``, ``jsq-lisf``, ``jfsq``, ``jfiq``, ``jsq-fiq``, ``jssq``,
  ``sed``): at rho < 1 a positive fraction of the servers stays idle (or, for ``sed``, below the
  threshold key), so an arrival always finds a least-key server and the fixed point is explicit:
  no queueing except for ``sed``. Their fluid limit is a differential inclusion (the drift jumps
  where a level empties); only the fixed point is provided.

Plain NumPy (SciPy for the ranking policies' root and the ODE, imported where used); nothing here
depends on the simulation kernels.
"""

from hetlb.theory.meanfield.classes import server_speeds
from hetlb.theory.meanfield.fixed_points import mean_field
from hetlb.theory.meanfield.limit import MeanFieldLimit
from hetlb.theory.meanfield.policies import MEANFIELD_POLICIES, SAMPLING
from hetlb.theory.meanfield.sampling import pod_equal_servers_response_time
from hetlb.theory.meanfield.transients import MeanFieldTrajectory, mean_field_settling_time, mean_field_trajectory

__all__ = [
    "MEANFIELD_POLICIES",
    "MeanFieldLimit",
    "MeanFieldTrajectory",
    "mean_field",
    "mean_field_trajectory",
    "pod_equal_servers_response_time",
    "mean_field_settling_time",
    "server_speeds",
    "SAMPLING",
]
