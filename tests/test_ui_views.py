"""The UI's other cases on fast inline runs: widgets from schemas, runs started after the panel,
finished, failed or resumed from a checkpoint, the static export, and runner plot panels."""

from __future__ import annotations

import time
from dataclasses import dataclass

import ipywidgets as widgets
import pandas as pd
import pytest
from bokeh.models import ColumnDataSource
from bokeh.plotting import figure as Figure  # noqa: N812 - the class behind figure()
from conftest import SMALL_NOISE

import esnb
from esnb.controls import Control
from esnb.runners.base import Runner
from esnb.runners.plotspec import panels_for
from esnb.settings import Settings, setting
from esnb.ui import ControlPanel, LivePlot, PlotPanel, Series, dashboard, history_figure
from esnb.ui.fields import control_widget


def wait_until(predicate, timeout=30.0, interval=0.02, what="condition"):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def inline_es(**kw):
    kw = {"population": 10, "noise_size": SMALL_NOISE, "eval_interval": 2,
          "eval_episodes": 1, **kw}
    return esnb.ES("CartPole-v1", **kw)


def figure_summary(layout):
    """Titles, axis labels and every source's data of a layout, in drawing order."""
    out = []
    for fig in layout.select({"type": Figure}):
        sources = [r.data_source for r in fig.renderers]
        out.append((fig.title.text, fig.xaxis[0].axis_label,
                    [(s.name, dict(s.data)) for s in sources]))
    return sorted(out, key=lambda t: t[0])


# -- widgets from the schema ------------------------------------------------------------------
@pytest.mark.parametrize("control, value, kind", [
    (Control("sigma", "float", 0.02, low=0, low_open=True, high=10, log=True), 0.02,
     widgets.FloatLogSlider),
    (Control("lr", "float", 0.01, low=0, low_open=True, log=True), 0.01, widgets.FloatLogSlider),
    (Control("wd", "float", 0.0, low=0, high=1), 0.0, widgets.FloatSlider),
    (Control("x", "float", 0.5), 0.5, widgets.FloatText),
    (Control("k", "int", 4, low=0, high=20), 4, widgets.IntSlider),
    (Control("pop", "int", 40, low=2, high=100_000), 40, widgets.IntText),
    (Control("on", "bool", True), True, widgets.Checkbox),
    (Control("rule", "choice", "a", choices=("a", "b")), "b", widgets.Dropdown),
    (Control("env", "str", "x", live=False), "x", widgets.Text),
])
def test_control_widget_follows_the_schema(control, value, kind):
    w = control_widget(control, value)
    assert type(w) is kind
    assert w.value == value and w.description == control.name
    assert w.disabled is (not control.live)
    assert control.help in w.tooltip or control.allowed() in w.tooltip
    if kind is widgets.FloatLogSlider:  # one decade either side of the value
        assert 10 ** w.max == pytest.approx(value * 10, rel=1e-2)
        assert 10 ** w.min == pytest.approx(value / 10, rel=1e-2)
    if kind in (widgets.FloatSlider, widgets.IntSlider):
        assert (w.min, w.max) == (control.low, control.high)
    if kind is widgets.Dropdown:
        assert [v for _, v in w.options] == ["a", "b"]


def test_panel_has_every_control_fixed_ones_read_only():
    runner = inline_es()
    panel = ControlPanel(runner)
    try:
        assert list(panel.fields) == [c.name for c in runner.controls.schema]
        for c in runner.controls.schema:
            assert panel.fields[c.name].disabled is (not c.live)
        assert panel.fields["env"].value == "CartPole-v1"
        assert "inline (no Dask client)" in panel.status.value
        assert "<b>idle</b>" in panel.status.value
        assert panel.buttons["pause"].disabled and not panel.buttons["start"].disabled
    finally:
        panel.close()


def test_values_set_from_code_show_in_the_widgets():
    runner = inline_es()
    panel = ControlPanel(runner, status_interval=0.05)
    try:
        runner.controls.set(sigma=0.1, shaping="raw", lr=5e-7)  # lr below the slider's range
        wait_until(lambda: panel.fields["shaping"].value == "raw", 5, what="sync")
        assert panel.fields["sigma"].value == 0.1
        assert panel.fields["lr"].value == 5e-7  # the slider widened instead of clamping
        assert runner.controls["lr"] == 5e-7 and runner.controls.version == 1
    finally:
        panel.close()


# -- lifecycle cases ---------------------------------------------------------------------------
def test_start_and_step_buttons_of_a_panel_shown_before_the_run():
    runner = inline_es()
    board = dashboard(runner, budget={"generations": 4}, update_interval=0.1)
    try:
        board.panel.buttons["step"].click()  # idle: exactly one generation, then held
        wait_until(lambda: runner.iteration == 1 and runner.state == "paused", 30,
                   what="one step")
        board.panel.buttons["resume"].click()
        runner.wait(60)
        assert runner.state == "finished" and runner.iteration == 4
        board.plot.wait_drawn()
        assert board.plot.rows_drawn == 4
        board.panel.buttons["start"].click()  # the budget again, from where it finished
        runner.wait(60)
        assert runner.iteration == 8
        wait_until(lambda: "<b>finished</b>" in board.panel.status.value, 5, what="status")
        # the static export draws exactly what the live plot shows
        board.plot.wait_drawn()
        assert figure_summary(runner.plot()) == figure_summary(board.plot.run_figure.layout)
    finally:
        board.close()


class FailingES(esnb.ES):
    """An ES whose third generation raises, as a broken environment would."""

    def _iteration(self, snap):
        if self.iteration == 2:
            raise RuntimeError("environment exploded")
        return super()._iteration(snap)


def test_failed_run_shows_its_error_in_the_panel():
    runner = FailingES("CartPole-v1", population=10, noise_size=SMALL_NOISE)
    board = dashboard(runner)
    try:
        runner.start()
        with pytest.raises(RuntimeError):
            runner.wait(60)
        wait_until(lambda: "environment exploded" in board.panel.run_error.value, 5,
                   what="error in panel")
        assert "RuntimeError" in board.panel.run_error.value
        assert "<b>failed</b>" in board.panel.status.value
        assert not board.panel.buttons["start"].disabled
        board.plot.wait_drawn()
        assert board.plot.rows_drawn == 2  # what ran before the failure stays on the plot
    finally:
        board.close()


def test_plot_of_a_run_resumed_from_a_checkpoint_shows_its_history(tmp_path):
    runner = inline_es()
    runner.step(3)
    runner.controls.set(sigma=0.05)
    runner.step(2)
    path = runner.save(tmp_path / "run.npz")
    resumed = esnb.ES.load(path)
    plot = LivePlot(resumed, update_interval=0.1)
    try:
        mean = plot.sources[0][0]
        assert mean.data["y"] == runner.history["return_mean"].tolist()  # before any step
        assert plot.marker_texts(0) == plot.marker_texts(1) == ["sigma 0.02→0.05"]
        resumed.start(generations=2)
        resumed.wait(60)
        plot.wait_drawn()
        assert len(mean.data["x"]) == 7
        assert mean.data["x"] == resumed.history["env_steps"].astype(float).tolist()
    finally:
        plot.close()


def test_live_plot_rolls_over_old_points():
    runner = inline_es()
    runner.step(6)
    plot = LivePlot(runner, max_points=4)
    try:
        assert plot.sources[0][0].data["y"] == runner.history["return_mean"].tolist()[-4:]
    finally:
        plot.close()


# -- plot panels: the extension point ----------------------------------------------------------
@dataclass(frozen=True)
class LearnerConfig(Settings):
    lr: float = setting(0.1, low=0, low_open=True, log=True, live=True, help="step size")


class LearnerSteps(Runner):
    """A learner-step runner without env steps, declaring its own panels (like Ape-X)."""

    algorithm = "Learner"
    iteration_column = "learner_step"
    plot_panels = (
        PlotPanel("loss vs {x}", ["loss"], y_label="loss", y_axis_type="log"),
        {"title": "replay", "y": [{"column": "replay_size", "label": "transitions"}],
         "x": "wall_time"},
    )

    Config = LearnerConfig

    def __init__(self):
        super().__init__(LearnerConfig.build(), name="learner")

    def _iteration(self, snap):
        return {"loss": snap.lr / (self.iteration + 1), "replay_size": 100 * self.iteration,
                "return_mean": float(self.iteration)}


def test_runner_panels_and_learner_step_axis():
    runner = LearnerSteps()
    runner.step(3)
    runner.controls.set(lr=0.2)
    runner.step(2)
    panels = panels_for(runner)
    assert [p.title for p in panels][2:] == ["loss vs {x}", "replay"]
    plot = LivePlot(runner)
    try:
        rf = plot.run_figure
        assert rf.x_columns == ["learner_step", "wall_time", "learner_step", "wall_time"]
        assert [f.title.text.split(" — ")[1] for f in rf.figures] == [
            "return vs learner step", "return vs wall time (s)", "loss vs learner step",
            "replay"]
        assert rf.figures[2].y_scale.__class__.__name__ == "LogScale"
        assert plot.sources[2][0].data["x"] == [1.0, 2, 3, 4, 5]
        assert plot.sources[3][0].data["y"] == [0.0, 100, 200, 300, 400]
        assert rf.marker_sources[2].data["x"] == [4.0]  # the first step that used lr=0.2
        assert rf.marker_sources[2].data["text"] == ["lr 0.1→0.2"]
        assert rf.marker_sources[3].data["x"] == [runner.history["wall_time"].iloc[3]]
        assert figure_summary(runner.plot()) == figure_summary(rf.layout)
    finally:
        plot.close()


def test_runner_without_return_panels_and_bad_declarations():
    class NoReturns(LearnerSteps):
        plot_default_panels = False

        def plot_panels(self):
            return [PlotPanel("loss", [Series("loss", color="#000000", points=True)])]

    assert [p.title for p in panels_for(NoReturns())] == ["loss"]

    class Bad(LearnerSteps):
        plot_panels = ("loss",)

    with pytest.raises(TypeError, match="PlotPanel or a dict"):
        panels_for(Bad())
    with pytest.raises(ValueError, match="y_axis_type"):
        PlotPanel("x", ["loss"], y_axis_type="sqrt")
    with pytest.raises(ValueError, match="at least one series"):
        PlotPanel("x", [])


def test_history_figure_keeps_its_old_signature():
    history = pd.DataFrame({"generation": [1, 2], "env_steps": [10, 20], "wall_time": [.1, .2],
                            "return_mean": [1.0, 2.0], "eval_return": [float("nan"), 3.0]})
    changes = pd.DataFrame({"generation": [2], "wall_time": [.2], "env_steps": [20],
                            "name": ["sigma"], "old": [0.02], "new": [0.05], "version": [1]})
    layout = history_figure(history, changes, title="t")
    sources = {s.name: s.data for s in layout.select({"type": ColumnDataSource})}
    assert sources["eval_return"]["y"] == [3.0]
    assert sources["control changes"]["x"] in ([20.0], [0.2])
    empty = history_figure(pd.DataFrame(), None)
    assert len(list(empty.select({"type": Figure}))) == 2
