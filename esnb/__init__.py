"""esnb: evolution strategies and reinforcement learning on Dask, notebook-first.

Heavy modules (torch, distributed) load on first use, so a rollout worker that only needs
numpy and gymnasium starts fast and small. ``import esnb`` registers esnb's gymnasium
environments (``esnb/BitFlip-v0``, ``esnb/GridNav-v0``) without importing gymnasium itself.
"""

from __future__ import annotations

import esnb.config  # noqa: F401  (registers esnb's dask config defaults)
from esnb._version import __version__  # noqa: F401
from esnb.lazy import LazyMapping, after_import, lazy_names


def _register_envs() -> None:
    import esnb.envs.registration  # noqa: F401


# gymnasium's convention: importing the package registers its environments
# (``gymnasium.make("esnb/BitFlip-v0")``, ``"esnb/GridNav-v0"``), here once gymnasium is imported
after_import("gymnasium", _register_envs)

_NAMES = {
    "Runner": "esnb.runners.base",
    "TensorBoard": "esnb.views.tensorboard",
    "MLflow": "esnb.views.mlflow_tracker",
    "Video": "esnb.views.video",
    "RunView": "esnb.views.protocol",
    "make_client": "esnb.cluster",
    "Controls": "esnb.controls",
    "Control": "esnb.controls",
    "NoiseConfig": "esnb.noise",
    "NoiseTable": "esnb.noise",
    "make_env": "esnb.envs.make",
    "CheckpointError": "esnb.record",
    "dashboard": "esnb.ui",
    "launch": "esnb.session.launch",
    "attach": "esnb.remote.attach",
    "runs": "esnb.remote.attach",
    "AttachedRun": "esnb.remote.attach",
}


def _algorithm_names() -> dict[str, str]:
    """Every algorithm's runner and config class, by module (from the registry: read when the
    first of them is asked for, so that ``import esnb.noise`` loads no runner)."""
    from esnb.runners.registry import algorithms

    return {name: module for algo in algorithms().values()
            for name, module in algo.exports.items()}


# the registry's names are classes: a lower-case name (a submodule that ``from esnb import
# normals`` looks for first) is answered without reading the registry
_LAZY = LazyMapping(_algorithm_names, fixed=_NAMES, built=lambda name: name[:1].isupper())
__getattr__, __dir__ = lazy_names(__name__, _LAZY)
