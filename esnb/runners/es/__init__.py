"""OpenAI-ES and IW-ES: the runner (:mod:`.runner`), its settings (:mod:`.config`), its
worker-side tasks (:mod:`.tasks`) and IW-ES's reuse of a batch (:mod:`.iw`)."""

from esnb.lazy import lazy_names

_LAZY = {"ES": "esnb.runners.es.runner", "train_es": "esnb.runners.es.runner",
         "ESConfig": "esnb.runners.es.config"}
__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_names(__name__, _LAZY)
