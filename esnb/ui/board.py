"""``dashboard(runner)``: the control panel above the live plot, the one-liner of a notebook."""

from __future__ import annotations

import ipywidgets as widgets

from esnb.ui.liveplot import LivePlot
from esnb.ui.panel import ControlPanel


class Dashboard(widgets.VBox):
    """A :class:`ControlPanel` above a :class:`LivePlot` of the same runner.

    Attributes
    ----------
    panel : ControlPanel
    plot : LivePlot
    """

    def __init__(self, runner, *, budget: dict | None = None, update_interval: float = 0.5,
                 max_points: int = 20_000, width: int = 460, height: int = 300, **kwargs):
        self.runner = runner
        self.panel = ControlPanel(runner, budget=budget)
        self.plot = LivePlot(runner, update_interval=update_interval, max_points=max_points,
                             width=width, height=height)
        super().__init__([self.panel, self.plot], **kwargs)

    def close(self) -> None:
        # Widget.__del__ calls close() at interpreter exit, maybe before __init__ finished
        for part in (getattr(self, "panel", None), getattr(self, "plot", None)):
            if part is not None:
                part.close()
        super().close()


def dashboard(runner, **kwargs) -> Dashboard:
    """Controls, buttons, status and live plot of ``runner`` in one widget.

    Parameters
    ----------
    runner : esnb.runners.base.Runner
        Started or not, running, finished, failed or loaded from a checkpoint.
    **kwargs
        ``budget`` for the start button; ``update_interval``, ``max_points``, ``width``,
        ``height`` for the plot.

    Examples
    --------
    >>> runner = esnb.ES("CartPole-v1", client=client)      # doctest: +SKIP
    >>> board = esnb.ui.dashboard(runner); board              # doctest: +SKIP
    >>> runner.start(generations=100)                        # doctest: +SKIP
    """
    return Dashboard(runner, **kwargs)
