"""Reinforcement-learning mathematics (no Dask): learners, losses, targets.

Modules: one per method (e.g. ``dqn.py`` for Ape-X's learner, ``vtrace.py`` for IMPALA).
Public names are re-exported below, one import line per module.
"""
from esnb.rl.nstep import NStepBuilder, apex_schedule  # noqa: E402,F401  (Ape-X)
from esnb.rl.vtrace import VTraceReturns, vtrace  # noqa: E402,F401  (IMPALA)
