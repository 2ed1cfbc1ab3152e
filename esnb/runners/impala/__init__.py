"""IMPALA with V-trace: the runner (:mod:`.runner`), its settings (:mod:`.config`), the
driver's view of the actor slots (:mod:`.slots`), greedy evaluations (:mod:`.evaluation`) and
the worker-side tasks (:mod:`.tasks`)."""

from esnb.lazy import lazy_names

_LAZY = {"Impala": "esnb.runners.impala.runner", "ImpalaConfig": "esnb.runners.impala.config"}
__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_names(__name__, _LAZY)
