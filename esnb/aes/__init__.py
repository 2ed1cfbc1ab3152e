"""AES-RL's mathematics (Lee et al. 2020) and CEM-RL's sep-CEM (Pourchot and Sigaud 2019):
numpy only, no Dask.

- :mod:`esnb.aes.rules`: ``MEAN_RULES``, ``VARIANCE_RULES``, ``rl_probability``;
- :mod:`esnb.aes.distribution`: ``AsyncDistribution`` (one update per individual) and
  ``PopulationControl``; the paper's per-environment ranges (``env_defaults``);
- :mod:`esnb.aes.sep_cem`: ``SepCEM`` (one update per generation).
"""

from esnb.aes.distribution import AsyncDistribution, PopulationControl, env_defaults
from esnb.aes.rules import MEAN_RULES, VARIANCE_RULES, rl_probability
from esnb.aes.sep_cem import SepCEM

__all__ = ["MEAN_RULES", "VARIANCE_RULES", "AsyncDistribution", "PopulationControl", "SepCEM",
           "env_defaults", "rl_probability"]
