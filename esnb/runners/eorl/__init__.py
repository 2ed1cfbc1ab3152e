"""EORL (Khadilkar 2023) and its baselines: the training loop (:mod:`.learner`: Monte-Carlo
DQNs sharing one buffer, one episode per call; EORL's population step in :mod:`.evolution`,
the baselines' rules in :mod:`.baselines` and :mod:`.cer`), the runners (:mod:`.runner`),
their settings (:mod:`.config`), the worker-side run of a table entry (:mod:`.tasks`), tables
of runs (:mod:`.table`), the table's column names (:mod:`.columns`) and ``esnb train eorl``'s
own flags (:mod:`.command`). The maths (the Q-network population, episodes and samples) is
:mod:`esnb.rl.eorl`."""

from esnb.lazy import lazy_names
from esnb.runners.registry import Algorithm, Budget

ALGORITHMS = (Algorithm(
    "eorl", runner="esnb.runners.eorl.runner:EORL", config="esnb.runners.eorl.config:EORLConfig",
    budgets={"episodes": Budget("episodes", "episodes to run, also the planned length E "
                                            "(on gridnav 1000 if no budget flag is given)")},
    default_budget={"episodes": 400},
    description="EORL (Khadilkar 2023): a population of Monte-Carlo DQNs sharing one buffer, "
                "with crossover and mutation; its baselines with --algorithm.",
    flags="esnb.runners.eorl.config:EORLCommand", adapt="esnb.runners.eorl.command:adapt",
    skip=("env_kwargs", "episodes")),)

_RUNNER = "esnb.runners.eorl.runner"
_CONFIG = "esnb.runners.eorl.config"
_LAZY = {
    "EORL": _RUNNER, "VAN": _RUNNER, "PER": _RUNNER, "HER": _RUNNER, "CBE": _RUNNER,
    "CER": _RUNNER, "CEMRLRoundRobin": _RUNNER, "EpisodeRunner": _RUNNER,
    "make_runner": _RUNNER, "runner_class": _RUNNER,
    "COLUMNS": "esnb.runners.eorl.columns", "EORLConfig": _CONFIG, "EpisodeConfig": _CONFIG,
    "PERConfig": _CONFIG, "HERConfig": _CONFIG, "CBEConfig": _CONFIG,
    "CERConfig": _CONFIG, "CEMRLRoundRobinConfig": _CONFIG,
    "RunSpec": "esnb.runners.eorl.tasks", "run_one": "esnb.runners.eorl.tasks",
    "run_table": "esnb.runners.eorl.table", "summarise": "esnb.runners.eorl.table",
    "specs_grid": "esnb.runners.eorl.table",
}
__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_names(__name__, _LAZY)
