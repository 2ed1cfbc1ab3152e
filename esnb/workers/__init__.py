"""Functions that run on Dask workers (or inline, in the driver, when there is no cluster).

One module per algorithm family; workers keep per-process state across tasks (the noise
table, environments) in module-level caches, never in scattered data.
"""

from esnb.workers.es import (
    PolicyPayload,
    RolloutConfig,
    es_pairs,
    evaluate,
    get_env,
    iw_dots,
    raw_step_rate,
)

__all__ = ["PolicyPayload", "RolloutConfig", "es_pairs", "evaluate", "get_env", "iw_dots",
           "raw_step_rate"]
