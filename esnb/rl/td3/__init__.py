"""TD3 (Fujimoto et al. 2018, "Addressing Function Approximation Error in Actor-Critic
Methods") as CEM-RL (Pourchot and Sigaud 2019) and AES-RL (Lee et al. 2020) use it; their
runners are :mod:`esnb.runners.aesrl`.

- :mod:`~esnb.rl.td3.actor`: the actor's numpy side (layout, initialisation, rollout forward,
  the replay's fields; no torch);
- :mod:`~esnb.rl.td3.config`: :class:`TD3Config`, the run's settings by TD3's names (no torch);
- :mod:`~esnb.rl.td3.nets`: the torch networks (actor, twin critic);
- :mod:`~esnb.rl.td3.learner`: the twin critic's learner and actor training.
"""

from esnb.lazy import lazy_names

_ACTOR, _CONFIG = "esnb.rl.td3.actor", "esnb.rl.td3.config"
_NETS, _LEARNER = "esnb.rl.td3.nets", "esnb.rl.td3.learner"
#: the public names, loaded on first use (the numpy ones never load torch)
_LAZY = {"NumpyTD3Actor": _ACTOR, "actor_mlp": _ACTOR, "actor_spec": _ACTOR,
         "init_actor": _ACTOR, "transition_spec": _ACTOR,
         "FIXED": _CONFIG, "TD3Config": _CONFIG,
         "TD3Actor": _NETS, "TwinCritic": _NETS, "critic_from_flat": _NETS,
         "CriticLearner": _LEARNER, "train_actor": _LEARNER}
__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_names(__name__, _LAZY)
