"""Views of a run, which a runner never needs: the one bokeh drawing (:mod:`.figures`), the
experiment trackers (:mod:`.tracking`: :mod:`.tensorboard`, :mod:`.mlflow_tracker`), episodes
as video (:mod:`.video`), and what they read of a run (:mod:`.protocol`: :class:`RunView`,
implemented by a local :class:`~esnb.runners.base.Runner` and an attached
:class:`~esnb.remote.attach.AttachedRun` alike).

A view takes any :class:`RunView`; runners declare their plot panels
(:mod:`esnb.runners.plotspec`) and name the drawing and the renderer behind ``runner.plot()``
and ``runner.video()`` without importing them. Names load lazily: a rendering process imports
:mod:`.video` alone.
"""

from __future__ import annotations

from esnb.lazy import lazy_names

_LAZY = {
    "RunView": "esnb.views.protocol",
    "SteeredRun": "esnb.views.protocol",
    "ControlsView": "esnb.views.protocol",
    "plot": "esnb.views.figures",
    "history_figure": "esnb.views.figures",
    "RunFigure": "esnb.views.figures",
    "Tracker": "esnb.views.tracking",
    "TensorBoard": "esnb.views.tensorboard",
    "MLflow": "esnb.views.mlflow_tracker",
    "Video": "esnb.views.video",
    "VideoRecorder": "esnb.views.video",
}

__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_names(__name__, _LAZY)
