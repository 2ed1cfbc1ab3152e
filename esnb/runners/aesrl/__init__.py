"""AES-RL (Lee et al. 2020) and CEM-RL (Pourchot and Sigaud 2019), which share a TD3 critic,
a replay and their worker-side tasks: the runners (:mod:`.aesrl`, :mod:`.cemrl`), their
settings (:mod:`.config`), the tasks (:mod:`.tasks`), the critic (:mod:`.critic`), AES-RL's
evaluations in flight (:mod:`.pool`) and what both runners share (:mod:`.common`)."""

from esnb.lazy import lazy_names
from esnb.runners.registry import Algorithm, Budget

ALGORITHMS = (
    Algorithm("aesrl", runner="esnb.runners.aesrl.aesrl:AESRL",
              config="esnb.runners.aesrl.config:AESRLConfig",
              budgets={"steps": Budget("env_steps", "env steps to run"),
                       "updates": Budget("updates", "updates of (mu, var), one per evaluated "
                                                    "individual")},
              default_budget={"env_steps": 100_000},
              description="AES-RL (Lee et al. 2020): asynchronous ES + TD3 with a shared "
                          "critic, one update of the distribution per evaluated individual. "
                          "Laptop networks are 64-64 (--preset paper: 400-300)."),
    Algorithm("cemrl", runner="esnb.runners.aesrl.cemrl:CEMRL",
              config="esnb.runners.aesrl.config:CEMRLConfig",
              budgets={"steps": Budget("env_steps", "env steps to run (whole generations: the "
                                                    "last one may pass it)"),
                       "generations": Budget("generations", "generations to run")},
              default_budget={"env_steps": 100_000},
              description="CEM-RL (Pourchot and Sigaud 2019): sep-CEM + TD3, serial or, with "
                          "--parallel, parallel-synchronous (P-CEM-RL). Laptop networks are "
                          "64-64 (--preset paper: 400-300)."),
)

_LAZY = {"AESRL": "esnb.runners.aesrl.aesrl", "CEMRL": "esnb.runners.aesrl.cemrl",
         "AESRLConfig": "esnb.runners.aesrl.config", "CEMRLConfig": "esnb.runners.aesrl.config",
         "train_cemrl": "esnb.runners.aesrl.cemrl"}
__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_names(__name__, _LAZY)
