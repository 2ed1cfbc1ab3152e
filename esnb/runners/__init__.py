"""Runners: the run lifecycle at this folder's root, and one folder per algorithm (its runner,
its config, its worker-side tasks).

The lifecycle: :mod:`.base` (``Runner``: settings, controls, history, checkpoints) on
:mod:`.lifecycle` (its background thread), :mod:`.budget`, :mod:`.checkpoint`, :mod:`.fork`,
:mod:`.schedule`, :mod:`.playback`, :mod:`.registry` (the algorithms), :mod:`.executor` (the
one layer that knows inline from Dask), the replay service (:mod:`.replay_service`,
:mod:`.replay_files`, :mod:`.replay_counts`), :mod:`.placement`, :mod:`.plotspec` (the panels a
runner declares: data, no bokeh) and :mod:`.sweep` (whole runs as tasks). What watches a run
lives in :mod:`esnb.views`, how a run is run in :mod:`esnb.session`: runners import neither.
Names load lazily.
"""

from __future__ import annotations

from esnb.lazy import lazy_names

_LAZY = {"Runner": "esnb.runners.base", "ES": "esnb.runners.es"}

__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_names(__name__, _LAZY)
