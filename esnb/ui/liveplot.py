"""``LivePlot``: a runner's history as a bokeh figure that grows while the run runs.

The figure is :class:`esnb.views.figures.RunFigure` — the drawing ``runner.plot()`` exports —
wrapped in ``jupyter_bokeh.BokehModel``, an ipywidget: it sits in any ipywidgets layout and
updates through its comm, without ``push_notebook`` or a bokeh server. New history rows and
control changes are appended with ``ColumnDataSource.stream`` (with rollover) by the UI pump
thread (:mod:`esnb.ui.pump`), at most ``1 / update_interval`` times a second.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from bokeh.events import DocumentReady
from jupyter_bokeh import BokehModel

from esnb.runners.plotspec import known_columns
from esnb.ui.pump import PUMP

if TYPE_CHECKING:
    from esnb.views.protocol import RunView
from esnb.views.figures import RunFigure


def _change_rows(runner: RunView) -> list[dict[str, Any]]:
    changes = runner.changes
    return changes.to_dict("records") if len(changes) else []


def load_bokehjs() -> bool:
    """Publish BokehJS into the notebook page, if this runs in a Jupyter kernel.

    jupyter_bokeh's view draws with the page's ``window.Bokeh`` and fails without it ("Failed
    to create view for 'BokehView' ... reading 'require'"); nothing loads it but bokeh's
    notebook loader. The core library (~1.3 MB, no CDN: it works offline and always matches
    the Python bokeh) goes inline, once per plot, so a plot made after a page reload still has
    it; ``BOKEH_RESOURCES=cdn`` loads it from the CDN instead. Returns whether it published.
    """
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None or getattr(shell, "kernel", None) is None:
        return False  # plain Python or a terminal IPython: no page to load into
    from bokeh.io.notebook import load_notebook
    from bokeh.resources import Resources
    from bokeh.settings import settings

    mode = settings.resources(default="inline")
    resources = Resources(mode=mode, components=["bokeh"]) if mode == "inline" else \
        Resources(mode=mode)
    load_notebook(resources=resources, hide_banner=True)
    return True


class LivePlot(BokehModel):
    """A live bokeh plot of ``runner``: return vs progress and wall time, runner panels,
    and a marker with a label wherever a control changed.

    Parameters
    ----------
    runner : RunView
        A runner (running, idle, finished, failed or loaded from a checkpoint) or an attached
        run (:class:`~esnb.views.protocol.RunView`): the plot starts with the
        history so far and follows whatever comes next.
    update_interval : float
        Seconds between updates (default 0.5: two per second at most).
    max_points : int
        Points kept per series in the browser; older ones roll over.
    width, height : int
        Smallest width of one panel (it follows the page) and the height of its frame.

    Notes
    -----
    Call :meth:`close` when done with it: the pump keeps a reference to every open plot.
    """

    def __init__(self, runner: RunView, *, update_interval: float = 0.5,
                 max_points: int = 20_000, width: int = 460, height: int = 300, **kwargs):
        if update_interval <= 0:
            raise ValueError(f"update_interval must be > 0, got {update_interval}")
        if max_points < 1:
            raise ValueError(f"max_points must be >= 1, got {max_points}")
        self.runner = runner
        self.update_interval = float(update_interval)
        self._drawn = threading.Condition()
        self._force = False
        self._last = 0.0
        self._closed = False
        self._resend = False
        records = runner.records
        self.run_figure = RunFigure(
            runner.panels(), runner.iteration_column, known_columns(runner, records),
            title=f"{runner.title} {runner.name}", width=width, height=height,
            max_points=int(max_points))
        # the history so far (a resumed run's included) goes in before the widget exists, so
        # the first render already shows it; from here on only the pump thread writes
        self._append(records)
        if getattr(runner, "final_evaluation", None):
            self.run_figure.mark_final(runner.final_evaluation)
        load_bokehjs()  # before the widget: the page must have BokehJS when its view is made
        super().__init__(self.run_figure.layout, **kwargs)
        # jupyter_bokeh's view drops the patches that reach it before it has rendered, and a
        # view made later (a page reload, the widget shown twice) starts from the document as
        # it was when this widget was made. A view that has rendered says so (BokehJS sends
        # DocumentReady through the comm): the pump then sends every view the whole data.
        self._document.on_event(DocumentReady, self._view_ready)
        PUMP.add(self)

    # -- what tests and notebooks read ------------------------------------------------------
    @property
    def sources(self):
        """The series' ColumnDataSources, per panel."""
        return self.run_figure.series_sources

    @property
    def rows_drawn(self) -> int:
        """History rows sent to the figure so far."""
        return self.run_figure.rows

    def marker_texts(self, panel: int = 0) -> list[str]:
        """Labels of the control-change markers of one panel."""
        return self.run_figure.marker_texts(panel)

    def wait_drawn(self, timeout: float = 10.0) -> LivePlot:
        """Block until every row the runner has now is drawn (for scripts and tests).

        Not for widget callbacks: it waits on the pump thread.
        """
        if PUMP.on_pump_thread():
            raise RuntimeError("wait_drawn() cannot run on the UI pump thread")
        target = len(self.runner.records)
        deadline = time.monotonic() + timeout
        with self._drawn:
            self._force = True
            PUMP.wake()
            while self.rows_drawn < target:
                left = deadline - time.monotonic()
                if left <= 0 or self not in PUMP:
                    raise TimeoutError(f"{self.rows_drawn} of {target} rows drawn after "
                                       f"{timeout} s")
                self._drawn.wait(min(left, 0.1))
        return self

    # -- the pump's side ---------------------------------------------------------------------
    def _append(self, records) -> None:
        new = records[self.run_figure.rows:]
        if not new:
            return
        last = new[-1].get(self.runner.iteration_column)
        # a change is drawn with the row of its iteration; the log is read after the rows, and
        # a change is logged before its row, so every change up to `last` is complete here
        pending = _change_rows(self.runner)[self.run_figure.changes:]
        take = []
        for c in pending:
            if last is None or c.get(self.runner.iteration_column, last) > last:
                break
            take.append(c)
        self.run_figure.add(new, take)

    def _sync_model(self, model, content: dict, buffers: list) -> None:
        # The page echoes back what it was sent (jupyter_bokeh's guard against echoes ends
        # before BokehJS announces an applied stream): a stream or a whole-data resend coming
        # back would be applied here a second time and double the data. The data flows one
        # way, kernel to page; everything else (ranges, DocumentReady) is taken as usual.
        kind = content.get("kind")
        if kind in ("ColumnsStreamed", "ColumnsPatched") or (
                kind == "ModelChanged" and content.get("attr") == "data"):
            return
        super()._sync_model(model, content, buffers)

    def _view_ready(self, _event) -> None:
        # the kernel's thread (a comm message): only the pump thread writes to the document
        self._resend = True
        PUMP.wake()

    def _resend_all(self) -> None:
        """Send each source's whole data again (to views that missed streamed rows)."""
        for src in self.run_figure.all_sources():
            data = src.data
            src.trigger("data", data, data)

    def _pump(self, now: float) -> None:
        if self._resend:
            self._resend = False
            self._resend_all()
        if not self._force and now - self._last < self.update_interval:
            return
        self._last = now
        self._force = False
        self._append(self.runner.records)
        final = getattr(self.runner, "final_evaluation", None)
        if final:
            self.run_figure.mark_final(final)
        with self._drawn:
            self._drawn.notify_all()

    def close(self) -> None:
        # idempotent: Widget.__del__ closes again, and BokehModel.close() would raise then;
        # at interpreter exit (PUMP is None) module globals are already gone
        if PUMP is None or self._closed:
            return
        self._closed = True
        PUMP.remove(self)
        super().close()
