"""The constants of the format and the protocol, in one place (imported everywhere, never copied).

Nothing here imports anything, so every module of every package may use it: bench/validate.py
and bench/format.py as much as the evaluator, the trainer and the synthetic generator.
"""
from __future__ import annotations

from types import MappingProxyType

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"  # option letters, in order: options[i] is LETTERS[i]
NOTA = "None of the above"  # the optional final option (CVBench); compared case-insensitively
SUBSETS = ("SVS", "MVN")  # SSMNBench subsets: single-view sufficient, multi-view necessary
NO_SUBSET = "no_subset"  # subset key of samples without an SSMN subset (CVBench style)
AXES = ("spatial", "temporal")  # CVBench axes
GRANULARITIES = ("coarse", "fine")  # CVBench granularities
OVERALL = "overall"  # the all-subsets / all-axes key of the tables
K_T = MappingProxyType({"SVS": 3, "MVN": 2})  # K_T: most extra views (+k) per subset (read-only)
DEFAULT_N_BOOT = 1000  # cluster-bootstrap replicates of the 95 % intervals
