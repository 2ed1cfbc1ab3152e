"""What a run's plot shows: panels of history columns, and how a runner adds its own.

This module imports neither bokeh nor ipywidgets, so a runner can declare its panels without
pulling in the notebook stack.

Extension point
---------------
Every runner gets two panels: return (``return_mean``, ``return_max``, ``eval_return``) against
its *progress* column and against wall time. Progress is ``env_steps`` when the history has it,
else the runner's ``iteration_column`` (``generation``, ``learner_step``, ...), so a runner that
counts learner steps only still gets a sensible x axis. A runner adds panels with a class
attribute or a method called ``plot_panels``; each entry is a :class:`PlotPanel` or a plain dict
with the same fields::

    class ApeX(Runner):
        iteration_column = "learner_step"
        plot_panels = (
            PlotPanel("replay", ["replay_size"], y_label="transitions"),
            {"title": "priorities", "y": ["priority_mean", "priority_max"], "y_axis_type": "log"},
        )

    class AESRL(Runner):
        def plot_panels(self):          # a method may depend on the run's configuration
            return [PlotPanel("update rules", [Series("p", "p"), Series("sigma", "σ")])]

A runner whose history has no return columns sets ``plot_default_panels = False``. The live
view (:class:`esnb.ui.LivePlot`), ``runner.plot()`` and the CLI's ``plot.html`` all draw from
:func:`panels_for`, so a panel declared once appears everywhere, with a marker wherever a
control changed. Name columns after what they hold; ``x`` may be ``"progress"``,
``"wall_time"``, ``"iteration"`` (the runner's iteration column) or any history column.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

X_ALIASES = ("progress", "iteration")
AXIS_TYPES = ("linear", "log")


@dataclass(frozen=True)
class Series:
    """One history column drawn as a line.

    Attributes
    ----------
    column : str
        History column (rows where it is missing or not finite are skipped).
    label : str, optional
        Legend entry (default: the column name).
    color : str, optional
        CSS colour (default: the next one of a fixed palette).
    points : bool
        Also draw a dot at every value; suits sparse series such as evaluations.
    """

    column: str
    label: str | None = None
    color: str | None = None
    points: bool = False

    @classmethod
    def coerce(cls, obj: Any) -> Series:
        if isinstance(obj, Series):
            return obj
        if isinstance(obj, str):
            return cls(obj)
        if isinstance(obj, Mapping):
            return cls(**obj)
        raise TypeError(f"a plot series is a column name, a dict or a Series, got {obj!r}")


@dataclass(frozen=True)
class PlotPanel:
    """One figure: some history columns against one x column.

    Attributes
    ----------
    title : str
        Figure title; ``{x}`` is replaced by the x axis label (``"return vs {x}"``).
    y : sequence of Series, str or dict
        The columns drawn.
    y_label : str
        Y axis label.
    x : str
        ``"progress"`` (env steps, else the iteration column), ``"iteration"``, ``"wall_time"``
        or a history column.
    y_axis_type : {"linear", "log"}
    """

    title: str
    y: Sequence[Series] = field(default_factory=tuple)
    y_label: str = ""
    x: str = "progress"
    y_axis_type: str = "linear"

    def __post_init__(self):
        if isinstance(self.y, (str, Series, Mapping)):
            series = (Series.coerce(self.y),)
        else:
            series = tuple(Series.coerce(s) for s in self.y)
        if not series:
            raise ValueError(f"plot panel {self.title!r} needs at least one series")
        object.__setattr__(self, "y", series)
        if not isinstance(self.x, str) or not self.x:
            raise ValueError(f"plot panel {self.title!r}: x must be a column name, got {self.x!r}")
        if self.y_axis_type not in AXIS_TYPES:
            raise ValueError(f"plot panel {self.title!r}: y_axis_type must be one of "
                             f"{AXIS_TYPES}, got {self.y_axis_type!r}")

    @classmethod
    def coerce(cls, obj: Any) -> PlotPanel:
        if isinstance(obj, PlotPanel):
            return obj
        if isinstance(obj, Mapping):
            return cls(**obj)
        raise TypeError(f"a plot panel is a PlotPanel or a dict, got {obj!r}")


RETURN_SERIES = (
    Series("return_mean", "mean return", "#1f77b4"),
    Series("return_max", "max return", "#aec7e8"),
    Series("eval_return", "eval (mean policy)", "#d62728", points=True),
)

RETURN_PANELS = (
    PlotPanel("return vs {x}", RETURN_SERIES, "return", x="progress"),
    PlotPanel("return vs {x}", RETURN_SERIES, "return", x="wall_time"),
)


def panels_for(runner: Any) -> list[PlotPanel]:
    """The panels drawn for ``runner``: the return panels, then what it declares.

    Raises
    ------
    TypeError
        If an entry of ``runner.plot_panels`` is neither a PlotPanel nor a dict.
    ValueError
        If a declared panel is malformed, or no panel is left.
    """
    panels = list(RETURN_PANELS) if getattr(runner, "plot_default_panels", True) else []
    extra = getattr(runner, "plot_panels", ())
    if callable(extra):
        extra = extra()
    panels += [PlotPanel.coerce(p) for p in (extra or ())]
    if not panels:
        raise ValueError(f"{type(runner).__name__} declares no plot panel")
    return panels


def known_columns(runner: Any, records: Sequence[Mapping] | None = None) -> set[str]:
    """History columns of ``runner``: those of its first row, else its progress counters."""
    if records:
        return set(records[-1])
    try:
        # before the first row, the budget counters say whether env steps will be logged
        counters = runner._progress()
    except Exception:  # a runner not yet able to report must still get a plot
        counters = {}
    return {k for k in counters if k == "env_steps"}


def resolve_x(x: str, iteration_column: str, columns: Iterable[str]) -> str:
    """The history column behind a panel's ``x``."""
    if x == "progress":
        return "env_steps" if "env_steps" in set(columns) else iteration_column
    if x == "iteration":
        return iteration_column
    return x


def axis_label(column: str) -> str:
    if column == "wall_time":
        return "wall time (s)"
    return column.replace("_", " ")


def return_columns(returns, std: bool = False) -> dict[str, float]:
    """``return_mean``/``_max``/``_min`` (and ``_std``) of a history row: the returns of the
    episodes an iteration finished (NaN when it finished none). The default plot panels
    (:data:`esnb.runners.plotspec.RETURN_PANELS`) read them."""
    returns = np.asarray(returns, dtype=np.float64)
    names = ("mean", "max", "min", "std") if std else ("mean", "max", "min")
    if not returns.size:
        return {f"return_{n}": np.nan for n in names}
    return {f"return_{n}": float(getattr(returns, n)()) for n in names}
