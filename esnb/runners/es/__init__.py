"""OpenAI-ES and IW-ES: the runner (:mod:`.runner`), its settings (:mod:`.config`), its
worker-side tasks (:mod:`.tasks`) and IW-ES's reuse of a batch (:mod:`.iw`)."""

from esnb.lazy import lazy_names
from esnb.runners.registry import Algorithm, Budget

ALGORITHMS = (Algorithm(
    "es", runner="esnb.runners.es.runner:ES", config="esnb.runners.es.config:ESConfig",
    budgets={"generations": Budget("generations", "generations to run"),
             "steps": Budget("env_steps", "env steps to run (whole generations: the last one "
                                          "may pass it)")},
    default_budget={"generations": 100},
    description="OpenAI-ES with a shared noise table (Salimans et al. 2017); IW-ES (Campos et "
                "al. 2018) with --iw-k."),)

_LAZY = {"ES": "esnb.runners.es.runner", "train_es": "esnb.runners.es.runner",
         "ESConfig": "esnb.runners.es.config"}
__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_names(__name__, _LAZY)
