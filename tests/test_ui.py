"""The notebook UI driven from a test: widgets and buttons of a real ES run on a LocalCluster.

Values are set and buttons clicked exactly as the browser's messages do it (``widget.value =``,
``button.click()``); nothing of the runner, the controls or the widgets is mocked.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from conftest import SMALL_NOISE

import esnb
from esnb.ui import ControlPanel, LivePlot, dashboard


def wait_until(predicate, timeout=30.0, interval=0.02, what="condition"):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


@pytest.fixture
def es_runner(client):
    runner = esnb.ES("CartPole-v1", population=20, noise_size=SMALL_NOISE, client=client,
                     eval_interval=3, eval_episodes=2)
    yield runner
    runner.stop()
    runner.wait(60)


def test_slider_change_takes_effect_at_the_next_generation(es_runner):
    board = dashboard(es_runner)
    try:
        es_runner.start(generations=40)
        wait_until(lambda: es_runner.iteration >= 3, what="3 generations")
        board.panel.fields["sigma"].value = 0.05  # what a slider release sends
        assert es_runner.controls["sigma"] == 0.05  # in the store at once
        assert "sigma" in board.panel.message.value
        es_runner.wait(120)

        hist = es_runner.history
        changes = es_runner.changes
        assert list(changes["name"]) == ["sigma"]
        first = int(changes["generation"].iloc[0])
        assert 3 < first <= 40  # set while it ran; the run went on
        assert (hist.loc[hist.generation < first, "sigma"] == 0.02).all()
        assert (hist.loc[hist.generation >= first, "sigma"] == 0.05).all()
        assert changes["old"].iloc[0] == 0.02 and changes["new"].iloc[0] == 0.05

        # the change is on the plot, at the env steps of the first generation that used it
        board.plot.wait_drawn()
        assert board.plot.marker_texts(0) == ["sigma 0.02→0.05"]
        marker_x = board.plot.run_figure.marker_sources[0].data["x"]
        assert marker_x == [float(hist.loc[hist.generation == first, "env_steps"].iloc[0])]
        wait_until(lambda: "finished" in board.panel.status.value, 60, what="status finished")
    finally:
        board.close()


def test_refused_value_reverts_widget_and_leaves_the_runner_untouched(es_runner):
    # held at its start, so that the values below reach it before its first generation on any
    # machine (a 6-generation run may otherwise end before they are typed)
    es_runner.start(generations=6, paused=True)
    panel = ControlPanel(es_runner)  # shown after the start this time
    try:
        version = es_runner.controls.version
        box = panel.fields["population"]
        box.value = 41
        assert "population must be even" in panel.message.value
        assert box.value == 20  # snapped back to the value in force
        box.value = 1
        assert "population must be an integer in [2, 100,000]" in panel.message.value
        assert box.value == 20
        panel.fields["lr"].value = 0.02  # a good value still goes through afterwards
        es_runner.resume()
        es_runner.wait(120)
        assert es_runner.controls["population"] == 20
        assert es_runner.controls.version == version + 1
        assert (es_runner.history["population"] == 20).all()
        assert list(es_runner.changes["name"]) == ["lr"]
    finally:
        panel.close()


def test_pause_step_resume_stop_buttons(es_runner):
    panel = ControlPanel(es_runner)
    b = panel.buttons
    try:
        b["start"].click()
        assert es_runner.running
        wait_until(lambda: es_runner.iteration >= 2, what="2 generations")
        b["pause"].click()
        wait_until(lambda: es_runner.state == "paused", 20, what="paused")
        held = es_runner.iteration
        time.sleep(0.8)  # ~10 CartPole generations' time
        assert es_runner.iteration == held  # pause really holds

        b["step"].click()
        wait_until(lambda: es_runner.iteration == held + 1, 20, what="one step")
        time.sleep(0.5)
        assert es_runner.iteration == held + 1 and es_runner.state == "paused"
        wait_until(lambda: "<b>paused</b>" in panel.status.value, 5, what="status paused")
        assert panel.buttons["resume"].disabled is False
        assert panel.buttons["pause"].disabled is True

        b["resume"].click()
        wait_until(lambda: es_runner.iteration >= held + 4, 30, what="resumed generations")
        b["stop"].click()
        es_runner.wait(30)
        assert es_runner.state == "stopped"
        gens = es_runner.history["generation"].to_numpy()
        assert np.array_equal(gens, np.arange(1, len(gens) + 1))  # none lost, none twice
        b["start"].click()  # a stopped run starts again from where it stopped
        wait_until(lambda: es_runner.iteration > gens[-1], 30, what="restart")
    finally:
        panel.close()


def test_live_plot_source_grows_while_the_run_runs(es_runner):
    plot = LivePlot(es_runner, update_interval=0.2)
    try:
        mean_src = plot.sources[0][0]
        assert len(mean_src.data["x"]) == 0
        es_runner.start()
        sizes = []
        deadline = time.monotonic() + 120  # only a hang ends it: a loaded machine is slow
        while len(set(sizes)) < 3 and time.monotonic() < deadline:
            time.sleep(0.15)  # nothing here asks the plot to update: the pump does it
            sizes.append(len(mean_src.data["x"]))
        assert sizes == sorted(sizes) and len(set(sizes)) >= 3, sizes
        es_runner.stop()
        es_runner.wait(60)
        plot.wait_drawn()
        hist = es_runner.history
        assert mean_src.data["x"] == hist["env_steps"].astype(float).tolist()
        assert mean_src.data["y"] == hist["return_mean"].tolist()
        wall_src = plot.sources[1][0]
        assert wall_src.data["x"] == hist["wall_time"].tolist()
        evals = hist["eval_return"].dropna()
        assert plot.sources[0][2].data["y"] == evals.tolist() and len(evals) >= 1
    finally:
        plot.close()


def test_widget_callbacks_do_not_wait_for_a_slow_generation(client):
    # ~1-3 s per generation: 300 Pendulum episodes of 200 steps each
    runner = esnb.ES("Pendulum-v1", population=300, noise_size=SMALL_NOISE, client=client,
                     eval_interval=0)
    panel = ControlPanel(runner)
    try:
        runner.start()
        wait_until(lambda: runner.iteration >= 1, 120, interval=0.005, what="generation 1")
        started = runner.iteration  # generation `started + 1` has just begun
        t0 = time.perf_counter()
        panel.fields["sigma"].value = 0.04
        t_set = time.perf_counter() - t0
        assert runner.controls["sigma"] == 0.04  # in the store before the generation ends
        t0 = time.perf_counter()
        panel.buttons["pause"].click()
        t_pause = time.perf_counter() - t0
        t0 = time.perf_counter()
        panel.buttons["step"].click()
        t_step = time.perf_counter() - t0
        assert runner.iteration == started, "the generation ended before the callbacks did"
        assert max(t_set, t_pause, t_step) < 0.1, (t_set, t_pause, t_step)
        # "step one" on a running runner pauses it after the generation in flight
        wait_until(lambda: runner.state == "paused", 60, what="paused")
        assert runner.iteration == started + 1
        panel.buttons["step"].click()  # paused: exactly one more, which uses the new sigma
        wait_until(lambda: runner.iteration == started + 2, 60, what="one step")
        time.sleep(0.3)
        assert runner.state == "paused" and runner.iteration == started + 2
        hist = runner.history
        assert hist["sigma"].iloc[-1] == 0.04 and hist["sigma"].iloc[0] == 0.02
    finally:
        panel.close()
        runner.stop()
        runner.wait(120)


def test_status_line_links_the_dask_dashboard(es_runner, client):
    panel = ControlPanel(es_runner)
    try:
        assert client.dashboard_link in panel.status.value
        es_runner.start(generations=3)
        es_runner.wait(60)
        wait_until(lambda: "finished" in panel.status.value, 5, what="status finished")
        status = panel.status.value
        assert "generation 3" in status and "env steps" in status and "steps/s" in status
        assert panel.buttons["start"].disabled is False and panel.buttons["stop"].disabled
    finally:
        panel.close()
