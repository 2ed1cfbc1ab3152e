"""Notebook widgets of a run: a local runner or an attached one, alike (each a
:class:`~esnb.views.protocol.SteeredRun`, the protocol these widgets are typed against).

- :func:`dashboard` (``esnb.ui.dashboard(runner)``): :class:`ControlPanel` above
  :class:`LivePlot`, the one-liner of a notebook;
- :class:`ControlPanel`: ipywidgets built from the runner's control schema, lifecycle buttons,
  a status line with the Dask dashboard link;
- :class:`LivePlot`: a bokeh figure in ``jupyter_bokeh.BokehModel``, appended to by one pump
  thread (:mod:`esnb.ui.pump` says why a thread);
- :func:`plot` (``esnb.ui.plot(runner)``, also ``runner.plot()``) and :func:`history_figure`:
  the same drawing of a finished run (:mod:`esnb.views.figures`).

Runners add plot panels without widget code: see :mod:`esnb.runners.plotspec` (``plot_panels``).
Names load lazily, so declaring panels (:class:`PlotPanel`, :class:`Series`) imports neither
bokeh nor ipywidgets.
"""

from __future__ import annotations

from esnb.lazy import lazy_names

_LAZY = {
    "ControlPanel": "esnb.ui.panel",
    "LivePlot": "esnb.ui.liveplot",
    "Dashboard": "esnb.ui.board",
    "dashboard": "esnb.ui.board",
    "plot": "esnb.views.figures",
    "history_figure": "esnb.views.figures",
    "RunFigure": "esnb.views.figures",
    "PlotPanel": "esnb.runners.plotspec",
    "Series": "esnb.runners.plotspec",
    "panels_for": "esnb.runners.plotspec",
}

__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_names(__name__, _LAZY)
