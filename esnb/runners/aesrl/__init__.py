"""AES-RL (Lee et al. 2020) and CEM-RL (Pourchot and Sigaud 2019), which share a TD3 critic,
a replay and their worker-side tasks: the runners (:mod:`.aesrl`, :mod:`.cemrl`), their
settings (:mod:`.config`), the tasks (:mod:`.tasks`), the critic (:mod:`.critic`), AES-RL's
evaluations in flight (:mod:`.pool`) and what both runners share (:mod:`.common`)."""

from esnb.lazy import lazy_names

_LAZY = {"AESRL": "esnb.runners.aesrl.aesrl", "CEMRL": "esnb.runners.aesrl.cemrl",
         "AESRLConfig": "esnb.runners.aesrl.config", "CEMRLConfig": "esnb.runners.aesrl.config",
         "train_cemrl": "esnb.runners.aesrl.cemrl"}
__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_names(__name__, _LAZY)
