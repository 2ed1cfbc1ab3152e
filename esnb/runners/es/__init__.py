"""OpenAI-ES and IW-ES on an executor, one generation at a time.

The driver (:mod:`.runner`, ``esnb.ES``) asks for noise offsets, env seeds and observation
flags; the workers roll out mirrored pairs on their own replica of theta (:mod:`.tasks`,
:mod:`.replica`), placed one task per worker in turn (:mod:`.dispatch`); the driver's
``OpenAIES.tell`` takes the step, described as data (:class:`esnb.es.Step`), and the next
generation's tasks carry that same ``Step`` so every replica applies it with the same call
and gets the same bits (checked by a checksum). IW-ES (:mod:`.iw`) reuses the batch for up to
K more updates, also sent as data (:class:`esnb.es.iw.IWUpdate`). Workers on the driver's host
read theta from a shared file instead (:mod:`.host_theta`). Settings: :mod:`.config`.
"""

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
