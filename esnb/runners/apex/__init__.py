"""Ape-X DQN and DPG (Horgan et al. 2018): the runner (:mod:`.runner`), its settings
(:mod:`.config`), the actors' runtime (:mod:`.actor`: groups of environments acting with
local copies of the network), the actor loops (:mod:`.tasks`), the replay and loops they share
(:mod:`.backend`), the learner's loop (:mod:`.learner`) and the history row
(:mod:`.metrics`). The maths (networks, learners, n-step targets) is :mod:`esnb.rl.apex`."""

from esnb.lazy import lazy_names
from esnb.runners.registry import Algorithm, Budget

#: Ape-X's budgets (DQN and DPG)
BUDGETS = {"seconds": Budget("seconds", "learning time to run"),
           "learner-steps": Budget("learner_steps", "learner updates to run"),
           "steps": Budget("env_steps", "actor env steps to run")}
ALGORITHMS = (
    Algorithm("apex", runner="esnb.runners.apex.runner:ApeX",
              config="esnb.runners.apex.config:ApeXDQNConfig", budgets=BUDGETS,
              default_budget={"seconds": 180.0}, skip=("variant",),
              description="Ape-X DQN (Horgan et al. 2018): many epsilon-greedy actors, one "
                          "prioritized replay actor, one learner."),
    Algorithm("apex-dpg", runner="esnb.runners.apex.runner:ApeXDPG",
              config="esnb.runners.apex.config:ApeXDPGConfig", budgets=BUDGETS,
              default_budget={"seconds": 180.0}, skip=("variant",),
              description="Ape-X DPG (Horgan et al. 2018): Gaussian-noise actors, one "
                          "prioritized replay actor, one DPG learner."),
)

_LAZY = {"ApeX": "esnb.runners.apex.runner", "ApeXDPG": "esnb.runners.apex.runner",
         "ApeXConfig": "esnb.runners.apex.config", "ApeXDQNConfig": "esnb.runners.apex.config",
         "ApeXDPGConfig": "esnb.runners.apex.config"}
__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_names(__name__, _LAZY)
