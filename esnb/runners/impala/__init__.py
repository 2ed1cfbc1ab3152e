"""IMPALA with V-trace: the runner (:mod:`.runner`), its settings (:mod:`.config`), the
learner kept fed with unrolls (:mod:`.feed`), the driver's view of the actor slots
(:mod:`.slots`), greedy evaluations (:mod:`.evaluation`) and the worker-side tasks
(:mod:`.tasks`)."""

from esnb.lazy import lazy_names
from esnb.runners.registry import Algorithm, Budget

ALGORITHMS = (Algorithm(
    "impala", runner="esnb.runners.impala.runner:Impala",
    config="esnb.runners.impala.config:ImpalaConfig",
    budgets={"learner-steps": Budget("learner_steps", "learner steps to run"),
             "steps": Budget("env_steps", "env steps (actor frames) to run")},
    default_budget={"learner_steps": 1000},
    description="IMPALA with V-trace (Espeholt et al. 2018): actor slots on the workers, one "
                "learner correcting their unrolls."),)

_LAZY = {"Impala": "esnb.runners.impala.runner", "ImpalaConfig": "esnb.runners.impala.config"}
__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_names(__name__, _LAZY)
