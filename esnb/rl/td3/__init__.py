"""TD3 (Fujimoto et al. 2018, "Addressing Function Approximation Error in Actor-Critic
Methods") as CEM-RL (Pourchot and Sigaud 2019) and AES-RL (Lee et al. 2020) use it; their
runners are :mod:`esnb.runners.aesrl`.

- :mod:`~esnb.rl.td3.actor`: the actor's numpy side (layout, initialisation, rollout forward,
  the replay's fields; no torch);
- :mod:`~esnb.rl.td3.learner`: the torch side (twin critic learner, actor training, settings).
"""

from esnb.lazy import lazy_names

_ACTOR, _LEARNER = "esnb.rl.td3.actor", "esnb.rl.td3.learner"
#: the public names, loaded on first use (the numpy ones never load torch)
_LAZY = {"NumpyTD3Actor": _ACTOR, "actor_mlp": _ACTOR, "actor_spec": _ACTOR,
         "init_actor": _ACTOR, "transition_spec": _ACTOR,
         "FIXED": _LEARNER, "CriticLearner": _LEARNER, "TD3Actor": _LEARNER,
         "TD3Config": _LEARNER, "TwinCritic": _LEARNER, "critic_from_flat": _LEARNER,
         "train_actor": _LEARNER}
__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_names(__name__, _LAZY)
