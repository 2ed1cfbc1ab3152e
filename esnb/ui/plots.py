"""The one bokeh drawing of a run, for the live view, notebooks and the CLI's HTML.

:class:`RunFigure` builds a figure per :class:`~esnb.runners.plotspec.PlotPanel` with one
``ColumnDataSource`` per drawn series and one per figure for control-change markers, and only
ever *appends* rows (``ColumnDataSource.stream``). :func:`history_figure` appends a finished
history in one go; :class:`esnb.ui.LivePlot` appends the rows a running runner adds. Both go
through :meth:`RunFigure.add`, so the static export and the live plot are the same drawing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
from bokeh.layouts import gridplot
from bokeh.models import ColumnDataSource, HoverTool, LabelSet
from bokeh.palettes import Category10_10
from bokeh.plotting import figure

from esnb.runners.plotspec import (
    RETURN_PANELS,
    PlotPanel,
    axis_label,
    known_columns,
    panels_for,
    resolve_x,
)

MARKER_COLOR = "#888888"


def _number(value: Any) -> float | None:
    """``value`` as a finite float, else None (missing, NaN, text)."""
    if value is None or isinstance(value, (str, bytes, bool)):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def change_text(changes: Sequence[Mapping[str, Any]]) -> str:
    """One label for the controls that changed at one iteration: ``sigma 0.02→0.05``."""
    return ", ".join(f"{c['name']} {_fmt(c['old'])}→{_fmt(c['new'])}" for c in changes)


class RunFigure:
    """Figures of a run's history that grow by appended rows.

    Parameters
    ----------
    panels : sequence of PlotPanel
    iteration_column : str
        The runner's iteration counter (``generation``, ``learner_step``...).
    columns : iterable of str
        History columns known now; decides whether "progress" means env steps.
    title : str
        Prefix of every figure title.
    width, height : int
        Size of one figure (they are laid out two per row).
    max_points : int, optional
        Rows kept per series in the browser (older ones roll over); None keeps all.
    """

    def __init__(self, panels: Sequence[PlotPanel], iteration_column: str,
                 columns=(), title: str = "", width: int = 460, height: int = 300,
                 max_points: int | None = None):
        columns = set(columns)
        self.iteration_column = iteration_column
        self.max_points = max_points
        self.panels = list(panels)
        self.x_columns = [resolve_x(p.x, iteration_column, columns) for p in self.panels]
        self.figures = []
        self.series_sources: list[list[ColumnDataSource]] = []
        self.marker_sources: list[ColumnDataSource] = []
        colors = iter(Category10_10 * 4)
        for panel, x in zip(self.panels, self.x_columns):
            name = panel.title.replace("{x}", axis_label(x))
            fig = figure(title=f"{title} — {name}" if title else name, width=width,
                         height=height, x_axis_label=axis_label(x), y_axis_label=panel.y_label,
                         y_axis_type=panel.y_axis_type,
                         tools="pan,wheel_zoom,box_zoom,reset,save")
            sources = []
            for s in panel.y:
                src = ColumnDataSource({"x": [], "y": []}, name=s.column)
                color = s.color or next(colors)
                label = s.label or s.column
                fig.line("x", "y", source=src, legend_label=label, color=color, line_width=2)
                if s.points:
                    fig.scatter("x", "y", source=src, legend_label=label, color=color, size=5)
                sources.append(src)
            fig.legend.location = "top_left"
            fig.legend.click_policy = "hide"
            fig.add_tools(HoverTool(tooltips=[(axis_label(x), "@x{0,0.[00]}"),
                                              ("value", "@y{0,0.[000]}")]))
            markers = ColumnDataSource({"x": [], "text": []}, name="control changes")
            fig.vspan(x="x", source=markers, line_color=MARKER_COLOR, line_dash="dashed",
                      line_width=1)
            # vertical labels from the bottom of the frame: they never depend on the y range
            fig.add_layout(LabelSet(x="x", y=4, y_units="screen", text="text", source=markers,
                                    angle=90, angle_units="deg", x_offset=-3,
                                    text_font_size="8pt", text_color="#555555",
                                    text_baseline="bottom"))
            self.figures.append(fig)
            self.series_sources.append(sources)
            self.marker_sources.append(markers)
        self.layout = gridplot(self.figures, ncols=2, merge_tools=True)
        self.rows = 0
        self.changes = 0

    def add(self, rows: Sequence[Mapping[str, Any]],
            changes: Sequence[Mapping[str, Any]] = ()) -> None:
        """Append history rows, and control changes that took effect at those or earlier rows.

        A marker sits at the x of the row of the iteration where its change took effect, when
        that row is passed in the same call (the live view passes each change with its row),
        else at the change log's own value of that column (iteration, wall time, env steps).
        In a live document each append is one ``stream`` per source that got points.
        """
        it = self.iteration_column
        x_at = {row.get(it): row for row in rows}
        for panel, x, sources in zip(self.panels, self.x_columns, self.series_sources):
            for s, src in zip(panel.y, sources):
                xs, ys = [], []
                for row in rows:
                    xv, yv = _number(row.get(x)), _number(row.get(s.column))
                    if xv is not None and yv is not None:
                        xs.append(xv)
                        ys.append(yv)
                if xs:
                    src.stream({"x": xs, "y": ys}, rollover=self.max_points)
        groups: dict[Any, list[Mapping[str, Any]]] = {}
        for c in changes:
            groups.setdefault(c.get(it), []).append(c)
        for x, src in zip(self.x_columns, self.marker_sources):
            xs, texts = [], []
            for iteration, group in groups.items():
                xv = _number(x_at.get(iteration, {}).get(x))
                if xv is None:  # the change log carries its own position for its columns
                    xv = _number(group[0].get(x))
                if xv is not None:
                    xs.append(xv)
                    texts.append(change_text(group))
            if xs:
                src.stream({"x": xs, "text": texts}, rollover=self.max_points)
        self.rows += len(rows)
        self.changes += len(changes)

    def marker_texts(self, panel: int = 0) -> list[str]:
        """Labels of the control-change markers of one figure."""
        return list(self.marker_sources[panel].data["text"])


def _records(frame: pd.DataFrame | None) -> list[dict[str, Any]]:
    if frame is None or len(frame) == 0:
        return []
    return frame.to_dict("records")


def history_figure(history: pd.DataFrame, changes: pd.DataFrame | None = None,
                   title: str = "", width: int = 460, height: int = 300, *,
                   runner: Any = None, panels: Sequence[PlotPanel] | None = None,
                   iteration_column: str | None = None):
    """The figure of a finished (or paused) run: what :class:`~esnb.ui.LivePlot` shows.

    Parameters
    ----------
    history, changes : pandas.DataFrame
        ``runner.history`` and ``runner.changes``.
    title : str
    width, height : int
        Size of one panel.
    runner : Runner, optional
        Supplies the panels (:func:`~esnb.runners.plotspec.panels_for`) and the iteration column.
    panels : sequence of PlotPanel, optional
        Overrides the runner's panels (default without a runner: the return panels).
    iteration_column : str, optional
        Default: the runner's, else ``"generation"``.

    Returns
    -------
    bokeh.models.GridPlot
    """
    if panels is None:
        panels = panels_for(runner) if runner is not None else list(RETURN_PANELS)
    if iteration_column is None:
        iteration_column = getattr(runner, "iteration_column", "generation")
    rows = _records(history)
    columns = set(history.columns) if rows else known_columns(runner)
    fig = RunFigure(panels, iteration_column, columns, title=title, width=width, height=height)
    fig.add(rows, _records(changes))
    return fig.layout
