"""esnb: evolution strategies and reinforcement learning on Dask, notebook-first.

Heavy modules (torch, distributed) load on first use, so a rollout worker that only needs
numpy and gymnasium starts fast and small. ``import esnb`` registers esnb's gymnasium
environments (``esnb/BitFlip-v0``, ``esnb/GridNav-v0``) without importing gymnasium itself.
"""

from __future__ import annotations

import esnb.config  # noqa: F401  (registers esnb's dask config defaults)
from esnb.lazy import after_import, lazy_names
from esnb.runners.registry import algorithms

__version__ = "0.1.0"


def _register_envs() -> None:
    import esnb.envs.registration  # noqa: F401


# gymnasium's convention: importing the package registers its environments
# (``gymnasium.make("esnb/BitFlip-v0")``, ``"esnb/GridNav-v0"``), here once gymnasium is imported
after_import("gymnasium", _register_envs)

_LAZY = {
    # every algorithm's runner and config class, from its registry entry
    **{name: module for algo in algorithms().values()
       for name, module in algo.exports.items()},
    "Runner": "esnb.runners.base",
    "TensorBoard": "esnb.runners.tensorboard",
    "MLflow": "esnb.runners.mlflow_tracker",
    "Video": "esnb.video",
    "make_client": "esnb.cluster",
    "Controls": "esnb.controls",
    "Control": "esnb.controls",
    "NoiseConfig": "esnb.noise",
    "NoiseTable": "esnb.noise",
    "make_env": "esnb.envs.make",
    "CheckpointError": "esnb.record",
    "dashboard": "esnb.ui",
    "launch": "esnb.remote.launch",
    "attach": "esnb.remote.attach",
    "runs": "esnb.remote.attach",
    "AttachedRun": "esnb.remote.attach",
}

__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_names(__name__, _LAZY)
