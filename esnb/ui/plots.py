"""Static bokeh figures of a run's history: the same drawing for the CLI's HTML, notebooks
and the live view."""

from __future__ import annotations

import numpy as np
import pandas as pd
from bokeh.layouts import gridplot
from bokeh.models import ColumnDataSource, HoverTool, Span
from bokeh.plotting import figure

RETURN_SERIES = (
    ("return_mean", "mean return", "#1f77b4"),
    ("return_max", "max return", "#aec7e8"),
    ("eval_return", "eval (mean policy)", "#d62728"),
)


def history_figure(history: pd.DataFrame, changes: pd.DataFrame | None = None,
                   title: str = "", width: int = 520, height: int = 320):
    """Return vs env steps and vs wall time, with a marker wherever a control changed."""
    figs = []
    for x, label in (("env_steps", "env steps"), ("wall_time", "wall time (s)")):
        fig = figure(title=f"{title} — return vs {label}" if title else f"return vs {label}",
                     width=width, height=height, x_axis_label=label, y_axis_label="return",
                     tools="pan,wheel_zoom,box_zoom,reset,save")
        if len(history) and x in history:
            for col, name, color in RETURN_SERIES:
                if col not in history:
                    continue
                data = history[[x, col]].dropna()
                if data.empty:
                    continue
                src = ColumnDataSource({"x": data[x].to_numpy(), "y": data[col].to_numpy()})
                fig.line("x", "y", source=src, legend_label=name, color=color, line_width=2)
                if col == "eval_return":
                    fig.scatter("x", "y", source=src, color=color, size=5)
            fig.legend.location = "top_left"
            fig.legend.click_policy = "hide"
        if changes is not None and len(changes) and x in changes:
            for _, c in changes.iterrows():
                pos = c[x]
                if pos is None or (isinstance(pos, float) and np.isnan(pos)):
                    continue
                fig.add_layout(Span(location=float(pos), dimension="height",
                                    line_color="#888888", line_dash="dashed"))
        fig.add_tools(HoverTool(tooltips=[(label, "@x{0,0}"), ("return", "@y{0.0}")]))
        figs.append(fig)
    return gridplot([figs])
