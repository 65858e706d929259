"""The integer code of every policy, and the option values of the LED update strategies.

The kernels branch on these codes (``policy_code == JSQ``); the registry gives each code its id,
parameters and definition. This module is plain Python so that the registry (and the theory that
reads it) can be imported without compiling a kernel.
"""

RANDOM = 0
WEIGHTED_RANDOM = 1
JSQ = 2
JFSQ = 3
JSSQ = 4
JIQ = 5
JFIQ = 6
POD = 7
SED = 8
JSQ_DF_DS = 9
JSQ_FIQ = 10
JSQ_LISF = 11

L_JSQ = 20
L_JBA = 21
L_POD = 22
"""The LED policies of 001, which decide on a dispatcher's local estimates."""

UPDATES = ("push", "pull")
PUSH_TRIGGERS = ("arrival", "every-slot")
PULL_TRIGGERS = ("departure-slot", "departure", "every-slot")
JBA_AVERAGES = ("plain", "rate-weighted")
JBA_EMPTY_SET = ("weighted-random", "l-jsq")
