"""The one bokeh drawing of a run, for the live view, notebooks and the CLI's HTML.

:class:`RunFigure` builds a figure per :class:`~esnb.runners.plotspec.PlotPanel` with one
``ColumnDataSource`` per drawn series and one per figure for control-change markers, and only
ever *appends* rows (``ColumnDataSource.stream``). :func:`history_figure` appends a finished
history in one go; :class:`esnb.ui.LivePlot` appends the rows a running runner adds. Both go
through :meth:`RunFigure.add`, so the static export and the live plot are the same drawing.
:func:`plot` (``esnb.ui.plot(runner)``, ``runner.plot()``) draws a runner's whole history.

Its place is among the views, not in the UI: it draws with bokeh and knows no widget; it reads
a :class:`~esnb.views.protocol.RunView` (a local runner or an attached run) and nothing else of
it. ``runner.plot()`` calls it by name (:attr:`esnb.runners.base.Runner.drawing`: runners import
no view) and the run folder's ``plot.html`` is ``runner.plot()``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd
from bokeh.core.properties import value
from bokeh.layouts import gridplot
from bokeh.models import (
    ColumnDataSource,
    CustomJSTickFormatter,
    HoverTool,
    LabelSet,
    Legend,
    LegendItem,
)
from bokeh.palettes import Category10_10
from bokeh.plotting import figure

from esnb.record import finite_float
from esnb.runners.plotspec import RETURN_PANELS, PlotPanel, axis_label, known_columns, resolve_x

if TYPE_CHECKING:
    from esnb.views.protocol import RunView

MARKER_COLOR = "#888888"
FINAL_COLOR = "#8b0000"
#: the series a final evaluation belongs with (its mark goes on the panels that draw it)
EVAL_COLUMN = "eval_return"
#: pixels of one line of control-change labels; labels alternate between two lines, so
#: that two changes close together do not write over each other
LABEL_LINE = 12
#: pixels at the top of the plotting frame the control-change labels take
LABEL_BAND = 2 * LABEL_LINE + 2
#: the y ranges' padding (a fraction of the data's span, half above, half below): it keeps
#: the top LABEL_BAND pixels of a frame of >= 200 px free of data
Y_PADDING = 0.45
#: how many figures share a row
COLUMNS = 2

#: tick labels such as 500k, 2M, 1.5B (bokeh's default turns to 5.000e+5 above 1e5); kept
#: identical to :func:`compact_number`
COMPACT_TICKS_JS = """
const a = Math.abs(tick);
const units = [[1e9, "B"], [1e6, "M"], [1e3, "k"]];
for (const [u, s] of units) {
  if (a >= u) return String(parseFloat((tick / u).toPrecision(3))) + s;
}
return String(parseFloat(tick.toPrecision(6)));
"""


def compact_number(value: float) -> str:
    """``value`` as a tick label: ``500k``, ``2M``, ``1.25B``, ``0.02`` (3 significant
    figures from a thousand up); what the figures' linear axes show, in Python."""
    a = abs(value)
    for unit, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if a >= unit:
            return f"{float(f'{value / unit:.3g}'):g}{suffix}"
    return f"{float(f'{value:.6g}'):.16g}"


def compact_ticks() -> CustomJSTickFormatter:
    """A tick formatter that writes :func:`compact_number` labels in the browser."""
    return CustomJSTickFormatter(code=COMPACT_TICKS_JS)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def change_text(changes: Sequence[Mapping[str, Any]]) -> str:
    """One label for the controls that changed at one iteration: ``sigma 0.02→0.05``."""
    return ", ".join(f"{c['name']} {_fmt(c['old'])}→{_fmt(c['new'])}" for c in changes)


def final_text(final: Mapping[str, Any]) -> str:
    """The label of a final evaluation: ``final eval 3,152 (10 episodes)``."""
    mean = float(final["mean"])
    value = f"{mean:,.0f}" if abs(mean) >= 100 else f"{mean:.3g}"
    episodes = final.get("episodes")
    return f"final eval {value}" + (f" ({int(episodes)} episodes)" if episodes else "")


class RunFigure:
    """Figures of a run's history that grow by appended rows.

    Every figure follows the page's width (``sizing_mode="stretch_width"``), has compact
    ticks (``2M``) on its linear axes, its legend below the plotting frame (never over a
    curve), control changes as dashed lines labelled in a band above the frame, and, once
    :meth:`mark_final` is called, the final evaluation as a star on the panels that draw
    ``eval_return``.

    Parameters
    ----------
    panels : sequence of PlotPanel
    iteration_column : str
        The runner's iteration counter (``generation``, ``learner_step``...).
    columns : iterable of str
        History columns known now; decides whether "progress" means env steps.
    title : str
        Prefix of every figure title.
    width : int
        Smallest width of one figure in pixels (it stretches to the page).
    height : int
        Height of one figure in pixels (its plotting frame: ~90 less, 200 at least).
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
        self.final_sources: list[ColumnDataSource | None] = []
        # one invisible point per figure until its first data: BokehJS cannot compute the
        # initial ranges of a figure without any data and says so in the console
        self.anchor_sources: list[ColumnDataSource] = []
        self.final: dict[str, Any] | None = None
        self.final_items: list[LegendItem] = []
        colors = iter(Category10_10 * 4)
        frame_height = max(200, int(height) - 90)  # title, x axis and legend take ~90 px
        for panel, x in zip(self.panels, self.x_columns):
            name = panel.title.replace("{x}", axis_label(x))
            fig = figure(title=f"{title} — {name}" if title else name, min_width=int(width) // 2,
                         width=int(width), frame_height=frame_height,
                         sizing_mode="stretch_width", x_axis_label=axis_label(x),
                         y_axis_label=panel.y_label, y_axis_type=panel.y_axis_type,
                         tools="pan,wheel_zoom,box_zoom,reset,save")
            fig.xaxis.formatter = compact_ticks()
            if panel.y_axis_type == "linear":
                fig.yaxis.formatter = compact_ticks()
            anchor = ColumnDataSource({"x": [0.0], "y": [1.0 if panel.y_axis_type == "log"
                                                         else 0.0]}, name="anchor")
            fig.scatter("x", "y", source=anchor, visible=False)
            sources, items, lines = [], [], []
            for s in panel.y:
                src = ColumnDataSource({"x": [], "y": []}, name=s.column)
                color = s.color or next(colors)
                drawn = [fig.line("x", "y", source=src, color=color, line_width=2)]
                if s.points:
                    drawn.append(fig.scatter("x", "y", source=src, color=color, size=5))
                items.append(LegendItem(label=s.label or s.column, renderers=drawn))
                lines.append(drawn[0])
                sources.append(src)
            final_src = None
            if any(s.column == EVAL_COLUMN for s in panel.y):
                final_src = ColumnDataSource({"x": [], "y": []},
                                             name="final evaluation")
                star = fig.scatter("x", "y", source=final_src, marker="star", size=16,
                                   color=FINAL_COLOR, line_color="white")
                # its value goes in the legend (mark_final), not next to the star over a curve
                items.append(LegendItem(label="final eval", renderers=[star]))
                self.final_items.append(items[-1])
            # below the frame, two entries a row: it never covers a curve, and fits a narrow page
            fig.add_layout(Legend(items=items, orientation="horizontal", click_policy="hide",
                                  ncols=min(2, len(items)),
                                  label_text_font_size="8pt", glyph_width=16, spacing=8,
                                  padding=4, margin=2, border_line_alpha=0), "below")
            fig.add_tools(HoverTool(renderers=lines,
                                    tooltips=[(axis_label(x), "@x{0,0.[00]}"),
                                              ("value", "@y{0,0.[000]}")]))
            markers = ColumnDataSource({"x": [], "text": [], "y": []}, name="control changes")
            fig.vspan(x="x", source=markers, line_color=MARKER_COLOR, line_dash="dashed",
                      line_width=1)
            # labels along the frame's top (annotations are clipped to the frame; screen y
            # counts from its bottom), in a band the y range keeps free of data: 45% padding
            # leaves 15% of the frame (31 px of 200 > LABEL_BAND) above the highest point
            fig.y_range.range_padding = Y_PADDING
            fig.add_layout(LabelSet(x="x", y="y", y_units="screen", text="text",
                                    source=markers, x_offset=3, text_font_size="8pt",
                                    text_color="#555555", text_baseline="top"))
            self.figures.append(fig)
            self.series_sources.append(sources)
            self.marker_sources.append(markers)
            self.final_sources.append(final_src)
            self.anchor_sources.append(anchor)
        self.layout = gridplot(self.figures, ncols=COLUMNS, merge_tools=True,
                               sizing_mode="stretch_width")
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
        for panel, x, sources, anchor in zip(self.panels, self.x_columns, self.series_sources,
                                             self.anchor_sources):
            for s, src in zip(panel.y, sources):
                xs, ys = [], []
                for row in rows:
                    xv = finite_float(row.get(x), bools=False)
                    yv = finite_float(row.get(s.column), bools=False)
                    if xv is not None and yv is not None:
                        xs.append(xv)
                        ys.append(yv)
                if xs:
                    src.stream({"x": xs, "y": ys}, rollover=self.max_points)
                    if anchor.data["x"]:  # real data now decides the ranges
                        anchor.data = {"x": [], "y": []}
        groups: dict[Any, list[Mapping[str, Any]]] = {}
        for c in changes:
            groups.setdefault(c.get(it), []).append(c)
        for x, src, fig in zip(self.x_columns, self.marker_sources, self.figures):
            xs, texts, ys = [], [], []
            for iteration, group in groups.items():
                xv = finite_float(x_at.get(iteration, {}).get(x), bools=False)
                if xv is None:  # the change log carries its own position for its columns
                    xv = finite_float(group[0].get(x), bools=False)
                if xv is not None:
                    xs.append(xv)
                    texts.append(change_text(group))
                    line = (len(src.data["x"]) + len(ys)) % 2  # every other label a line lower
                    ys.append(fig.frame_height - 3 - line * LABEL_LINE)
            if xs:
                src.stream({"x": xs, "text": texts, "y": ys}, rollover=self.max_points)
        self.rows += len(rows)
        self.changes += len(changes)

    def mark_final(self, final: Mapping[str, Any]) -> None:
        """Mark a final evaluation (``runner.final_evaluation``: ``mean``, ``episodes`` and the
        x columns at the moment it was taken) on every panel that draws ``eval_return``."""
        if self.final is not None and dict(final) == self.final:
            return
        self.final = dict(final)
        mean = finite_float(final.get("mean"), bools=False)
        for x, src in zip(self.x_columns, self.final_sources):
            xv = finite_float(final.get(x), bools=False)
            if src is None or mean is None or xv is None:
                continue
            src.data = {"x": [xv], "y": [mean]}
        for item in self.final_items:
            item.label = value(final_text(final))  # a plain string could name a column

    def marker_texts(self, panel: int = 0) -> list[str]:
        """Labels of the control-change markers of one figure."""
        return list(self.marker_sources[panel].data["text"])

    def all_sources(self) -> list[ColumnDataSource]:
        """Every source whose data the kernel sends (series, markers, final marks, anchors)."""
        return [*(s for group in self.series_sources for s in group), *self.marker_sources,
                *(s for s in self.final_sources if s is not None), *self.anchor_sources]


def _records(frame: pd.DataFrame | None) -> list[dict[str, Any]]:
    if frame is None or len(frame) == 0:
        return []
    return frame.to_dict("records")


def history_figure(history: pd.DataFrame, changes: pd.DataFrame | None = None,
                   title: str = "", width: int = 460, height: int = 300, *,
                   runner: RunView | None = None, panels: Sequence[PlotPanel] | None = None,
                   iteration_column: str | None = None):
    """The figure of a finished (or paused) run: what :class:`~esnb.ui.LivePlot` shows.

    Parameters
    ----------
    history, changes : pandas.DataFrame
        ``runner.history`` and ``runner.changes``.
    title : str
    width, height : int
        Smallest width of one panel (it follows the page) and the height of its frame.
    runner : RunView, optional
        A runner or an attached run: supplies the panels (``runner.panels()``), the iteration column
        and the final evaluation (``runner.final_evaluation``), marked when there is one.
    panels : sequence of PlotPanel, optional
        Overrides the runner's panels (default without a runner: the return panels).
    iteration_column : str, optional
        Default: the runner's, else ``"generation"``.

    Returns
    -------
    bokeh.models.GridPlot
    """
    if panels is None:
        panels = runner.panels() if runner is not None else list(RETURN_PANELS)
    if iteration_column is None:
        iteration_column = getattr(runner, "iteration_column", "generation")
    rows = _records(history)
    columns = set(history.columns) if rows else known_columns(runner)
    fig = RunFigure(panels, iteration_column, columns, title=title, width=width, height=height)
    fig.add(rows, _records(changes))
    final = getattr(runner, "final_evaluation", None)
    if final:
        fig.mark_final(final)
    return fig.layout


def plot(runner: RunView):
    """The figure of a run's history so far (bokeh; ``runner.final_evaluation`` starred): a
    local runner's or an attached run's."""
    return history_figure(runner.history, runner.changes,
                          title=f"{runner.title} {runner.name}", runner=runner)
