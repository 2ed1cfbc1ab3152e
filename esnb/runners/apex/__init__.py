"""Ape-X DQN and DPG (Horgan et al. 2018): the runner (:mod:`.runner`), its settings
(:mod:`.config`), the actor loops (:mod:`.tasks`), the replay and loops they share
(:mod:`.backend`) and the history row (:mod:`.metrics`)."""

from esnb.lazy import lazy_names

_LAZY = {"ApeX": "esnb.runners.apex.runner", "ApeXDPG": "esnb.runners.apex.runner",
         "ApeXConfig": "esnb.runners.apex.config", "ApeXDQNConfig": "esnb.runners.apex.config",
         "ApeXDPGConfig": "esnb.runners.apex.config"}
__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_names(__name__, _LAZY)
