"""Runners: one folder per algorithm (its runner, its config, its worker-side tasks), the run
lifecycle they share (:mod:`esnb.runners.base`), and the one layer that knows inline from
Dask (:mod:`esnb.runners.executor`). Names load lazily: declaring plot panels
(:mod:`esnb.runners.plotspec`) imports no torch.
"""

from __future__ import annotations

from esnb.lazy import lazy_names

_LAZY = {"Runner": "esnb.runners.base", "ES": "esnb.runners.es"}

__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_names(__name__, _LAZY)
