"""``ControlPanel``: a runner's controls, buttons and status as ipywidgets.

The panel is built from the runner's control schema (:mod:`esnb.ui.fields` picks a widget per
control), so every runner, present or future, gets one without new widget code. Live controls
are editable, fixed ones are shown disabled.

Threads: widget callbacks run on the kernel's main thread and only call ``controls.set`` and
the runner's non-blocking lifecycle methods (``start``, ``pause``, ``resume``,
``step(1, block=False)``, ``stop``); none waits on a future or on an iteration. The status
line, the button states, a failed run's error and values set from code
(``runner.controls.set(...)``) are brought into the widgets by the UI pump thread
(:mod:`esnb.ui.pump`).
"""

from __future__ import annotations

import html
import threading
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from esnb.record import finite_float
from esnb.ui.fields import control_widget, rounded, short, show_value
from esnb.ui.pump import PUMP

if TYPE_CHECKING:
    from esnb.views.protocol import RunView, SteeredRun

ERROR_STYLE = "color:#b00020"
INFO_STYLE = "color:#2e7d32"

#: which buttons make sense in which runner state
BUTTONS_ENABLED = {
    "idle": {"start", "step"},
    "running": {"pause", "step", "stop"},
    "paused": {"resume", "step", "stop"},
    "stopped": {"start", "step"},
    "finished": {"start", "step"},
    "failed": {"start", "step"},
    "ended": set(),  # an attached run (esnb.remote) whose process has ended
    "detached": set(),
}


def _elapsed(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, sec = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {sec:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def dashboard_link(runner: RunView) -> str | None:
    """The Dask dashboard's address of the run's cluster (None inline)."""
    try:
        return runner.dashboard_link or None
    except Exception:  # no dashboard (e.g. bokeh missing on the scheduler): no link
        return None


def status_html(runner: RunView, row: dict | None, link: str | None) -> str:
    """One line: state, iteration, env steps, steps/s, elapsed, dashboard link."""
    it = runner.iteration_column.replace("_", " ")
    parts = [f"<b>{html.escape(runner.state)}</b>", f"{it} {runner.iteration:,}"]
    row = row or {}
    env_steps = finite_float(row.get("env_steps"))
    if env_steps is not None:
        parts.append(f"env steps {int(env_steps):,}")
    rate = finite_float(row.get("steps_per_s"))
    if rate is not None:
        parts.append(f"{rate:,.0f} steps/s")
    parts.append(f"elapsed {_elapsed(runner.wall_time)}")
    if link:
        href = html.escape(link, quote=True)
        parts.append(f'<a href="{href}" target="_blank">Dask dashboard</a>')
    else:
        parts.append("inline (no Dask client)")
    return " · ".join(parts)


def when_applied(runner: RunView) -> str:
    """When a control set now takes effect, said truly for every state of the run."""
    it = runner.iteration_column.replace("_", " ")
    state = runner.state
    if state in ("running", "paused"):
        return f"from the next {it}" + (" (after resume)" if state == "paused" else "")
    if state == "idle":
        return f"from the first {it}"
    return f"(the run is {state}: it applies when the run continues)"


class ControlPanel(widgets.VBox):
    """Widgets for ``runner``'s controls, lifecycle buttons and a status line.

    Parameters
    ----------
    runner : SteeredRun
        A runner, or an attached run (:class:`~esnb.views.protocol.SteeredRun`).
    budget : dict, optional
        What the start button passes to ``runner.start`` (e.g. ``{"generations": 100}``);
        default: run until stopped.
    status_interval : float
        Seconds between status refreshes.

    Attributes
    ----------
    fields : dict of str to ipywidgets.ValueWidget
        One widget per control, by name (fixed ones disabled).
    buttons : dict of str to ipywidgets.Button
        ``start pause resume step stop``.
    status : ipywidgets.HTML
        State, iteration, env steps, steps/s, elapsed, dashboard link.
    message : ipywidgets.HTML
        The outcome of the last action (a refused value's error, in red).
    message_text : str
        The same as plain text (for ``print``).
    run_error : ipywidgets.HTML
        Why the run failed, while it is failed.
    """

    def __init__(self, runner: SteeredRun, *, budget: dict | None = None,
                 status_interval: float = 0.25, **kwargs):
        self.runner = runner
        self.budget = dict(budget or {})
        self.status_interval = float(status_interval)
        self._local = threading.local()  # .syncing: a value we put into a widget ourselves
        self.message_text = ""
        self._last = 0.0
        self._seen_version = -1
        self._link = dashboard_link(runner)
        self.fields: dict[str, widgets.ValueWidget] = {}
        live_rows, fixed_rows = [], []
        values = runner.controls.as_dict()
        for control in runner.controls.schema:
            w = control_widget(control, values[control.name])
            self.fields[control.name] = w
            help_text = widgets.HTML(f'<span style="color:#666">{html.escape(control.help)}'
                                     "</span>")
            (live_rows if control.live else fixed_rows).append(widgets.HBox([w, help_text]))
            if control.live:
                w.observe(self._on_value(control.name), names="value")
        self.buttons = {
            "start": widgets.Button(description="start", icon="play", button_style="success"),
            "pause": widgets.Button(description="pause", icon="pause"),
            "resume": widgets.Button(description="resume", icon="play"),
            "step": widgets.Button(description="step one", icon="step-forward"),
            "stop": widgets.Button(description="stop", icon="stop", button_style="danger"),
        }
        actions = {"start": self._start, "pause": self._pause, "resume": self._resume,
                   "step": self._step, "stop": self._stop}
        for key, button in self.buttons.items():
            button.layout = widgets.Layout(width="110px")
            button.on_click(self._guarded(actions[key]))
        self.status = widgets.HTML()
        self.message = widgets.HTML()
        self.run_error = widgets.HTML()
        title = widgets.HTML(f"<b>{html.escape(runner.title)}</b> "
                             f"{html.escape(runner.name)}")
        children = [title, self.status, widgets.HBox(list(self.buttons.values())),
                    self.run_error, self.message, *live_rows]
        if fixed_rows:
            children += [widgets.HTML("<i>fixed for this run</i>"), *fixed_rows]
        super().__init__(children, **kwargs)
        self._refresh()
        PUMP.add(self)

    # -- widget callbacks (kernel thread; never block) --------------------------------------
    def _on_value(self, name: str):
        def handler(change):
            if getattr(self._local, "syncing", False):
                return
            new = rounded(self.fields[name], change["new"])
            try:
                self.runner.controls.set(**{name: new})
            except ValueError as exc:
                self._say(str(exc), error=True)
                # snap back to the value in force: the refused one never reached the runner
                self._show(name, self.runner.controls[name])
            else:
                if new != change["new"]:
                    self._show(name, new)
                self._say(f"{name} = {short(new)} {when_applied(self.runner)}")
            PUMP.wake()
        return handler

    def _guarded(self, action):
        def on_click(_button):
            try:
                action()
            except (RuntimeError, ValueError) as exc:
                self._say(str(exc), error=True)
            PUMP.wake()
        return on_click

    def _start(self):
        self.runner.start(**self.budget)
        self._say("started")

    def _pause(self):
        self.runner.pause()
        self._say("pausing after the current "
                  f"{self.runner.iteration_column.replace('_', ' ')}")

    def _resume(self):
        self.runner.resume()
        self._say("resumed")

    def _step(self):
        it = self.runner.iteration_column.replace("_", " ")
        if self.runner.running and self.runner.state != "paused":
            # the iteration in flight is the step: the runner counts it against a queued one
            self.runner.pause()
            self._say(f"pausing after the current {it}")
            return
        if not self.runner.running:
            self.runner.start(paused=True, **self.budget)
        self.runner.step(1, block=False)
        self._say(f"one {it}, then paused")

    def _stop(self):
        self.runner.stop()
        self._say("stopping after the current "
                  f"{self.runner.iteration_column.replace('_', ' ')}")

    def _say(self, text: str, error: bool = False) -> None:
        style = ERROR_STYLE if error else INFO_STYLE
        mark = "✗" if error else "✓"
        self.message_text = f"{mark} {text}"
        self.message.value = f'<span style="{style}">{html.escape(self.message_text)}</span>'

    def _show(self, name: str, value: Any) -> None:
        """Put ``value`` into a field without sending it back to the controls."""
        self._local.syncing = True
        try:
            show_value(self.fields[name], value)
        finally:
            self._local.syncing = False

    # -- the pump's side ---------------------------------------------------------------------
    def _refresh(self) -> None:
        runner = self.runner
        state = runner.state
        records = runner.records
        status = status_html(runner, records[-1] if records else None, self._link)
        if self.status.value != status:
            self.status.value = status
        enabled = BUTTONS_ENABLED.get(state, set(self.buttons))
        for key, button in self.buttons.items():
            disabled = key not in enabled
            if button.disabled != disabled:
                button.disabled = disabled
        error = runner.error if state == "failed" else None
        text = "" if error is None else (
            f'<span style="{ERROR_STYLE}"><b>run failed:</b> '
            f"{html.escape(type(error).__name__)}: {html.escape(str(error))}</span>")
        if self.run_error.value != text:
            self.run_error.value = text
        version = runner.controls.version
        if version != self._seen_version:
            # read the version before the values: a set() in between shows up next round
            self._seen_version = version
            for name, value in runner.controls.as_dict().items():
                self._show(name, value)

    def _pump(self, now: float) -> None:
        if now - self._last < self.status_interval:
            return
        self._last = now
        self._refresh()

    def close(self) -> None:
        if PUMP is None:  # Widget.__del__ at interpreter exit: module globals are gone
            return
        PUMP.remove(self)
        _close_tree(self.children)
        super().close()


def _close_tree(children) -> None:
    for child in children:
        _close_tree(getattr(child, "children", ()))
        child.close()
