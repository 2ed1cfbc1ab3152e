"""``dashboard(runner)``: the control panel above the live plot, the one-liner of a notebook;
under the plot a "record episode" button and the video it renders."""

from __future__ import annotations

import html
import threading
from typing import TYPE_CHECKING

import ipywidgets as widgets

from esnb.ui.liveplot import LivePlot
from esnb.ui.panel import ERROR_STYLE, ControlPanel

if TYPE_CHECKING:
    from esnb.views.protocol import SteeredRun


class Dashboard(widgets.VBox):
    """A :class:`ControlPanel` above a :class:`LivePlot` of the same runner, and under it a
    "record episode" button: an episode of the current policy, rendered in another process
    (:meth:`~esnb.runners.base.Runner.video`; the run goes on), shown when ready.

    Attributes
    ----------
    panel : ControlPanel
    plot : LivePlot
    record : ipywidgets.Button
        "record episode" (disabled, with the reason as its tooltip, for an algorithm without
        a single policy).
    video_status : ipywidgets.HTML
        Rendering, or why there is no video.
    video_view : ipywidgets.HTML
        The last video.
    video : Video or None
        The last one asked for.
    """

    def __init__(self, runner: SteeredRun, *, budget: dict | None = None,
                 update_interval: float = 0.5, max_points: int = 20_000, width: int = 460,
                 height: int = 300, video: dict | None = None, **kwargs):
        self.runner = runner
        self.panel = ControlPanel(runner, budget=budget)
        self.plot = LivePlot(runner, update_interval=update_interval, max_points=max_points,
                             width=width, height=height)
        self.video_options = dict(video or {})
        self.video = None
        self.record = widgets.Button(description="record episode", icon="video-camera",
                                     layout=widgets.Layout(width="150px"))
        # on a thread: taking the policy waits for the iteration in progress (an ES
        # generation may last seconds), and a button's callback must not hold the kernel
        self.record.on_click(lambda _b: threading.Thread(
            target=self.record_episode, name="esnb-record-episode", daemon=True).start())
        try:
            runner.acting_policy()
        except ValueError as exc:  # said on the button: what the algorithm holds instead
            self.record.disabled, self.record.tooltip = True, str(exc)
        self.video_status = widgets.HTML()
        self.video_view = widgets.HTML()
        super().__init__([self.panel, self.plot,
                          widgets.HBox([self.record, self.video_status]), self.video_view],
                         **kwargs)

    def record_episode(self):
        """What the button does: render an episode of the current policy; the video shows
        under the plot when ready (returns the :class:`~esnb.views.video.Video`, or None when it
        could not start: the reason is shown)."""
        it = self.runner.iteration_column.replace("_", " ")
        self._say_video("rendering an episode of the current policy…")
        try:
            video = self.runner.video(wait=False, **self.video_options)
        except ValueError as exc:
            self._say_video(f"no video: {exc}", error=True)
            return None
        self.video = video

        def show(v):  # on the rendering pool's thread: widget updates are thread-safe
            if v is not self.video:
                return
            try:
                v.result()
            except ValueError as exc:
                self._say_video(f"no video: {exc}", error=True)
                return
            # the caption first: whoever sees the video sees what it shows
            self._say_video(f"{it} {v.iteration:,}: return {float(v.returns.sum()):,.2f}")
            self.video_view.value = v._repr_html_()

        video.add_done_callback(show)
        return video

    def _say_video(self, text: str, error: bool = False) -> None:
        style = ERROR_STYLE if error else "color:#555"
        self.video_status.value = f'<span style="{style}">{html.escape(text)}</span>'

    def close(self) -> None:
        # Widget.__del__ calls close() at interpreter exit, maybe before __init__ finished
        for part in (getattr(self, "panel", None), getattr(self, "plot", None)):
            if part is not None:
                part.close()
        for part in ("record", "video_status", "video_view"):
            if getattr(self, part, None) is not None:
                getattr(self, part).close()
        super().close()


def dashboard(runner: SteeredRun, **kwargs) -> Dashboard:
    """Controls, buttons, status and live plot of ``runner`` in one widget.

    Parameters
    ----------
    runner : SteeredRun
        A runner (started or not, running, finished, failed or loaded from a checkpoint), or
        an attached run (:class:`~esnb.views.protocol.SteeredRun`: either shows here).
    **kwargs
        ``budget`` for the start button; ``update_interval``, ``max_points``, ``width``,
        ``height`` for the plot; ``video``: what "record episode" passes to
        :meth:`~esnb.runners.base.Runner.video` (``max_steps``, ``size``, ``seed``).

    Examples
    --------
    >>> runner = esnb.ES("CartPole-v1", client=client)      # doctest: +SKIP
    >>> board = esnb.ui.dashboard(runner); board              # doctest: +SKIP
    >>> runner.start(generations=100)                        # doctest: +SKIP
    """
    return Dashboard(runner, **kwargs)
