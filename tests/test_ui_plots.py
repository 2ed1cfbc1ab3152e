"""What a person sees in tutorial 04 and in a run's plot, checked without a browser: log
sliders with a usable resolution, panel messages rounded and true for the run's state, plain
text for print, and the figure (compact ticks, legend below, page width, initial ranges, the
final evaluation, change labels in a band no data reaches). tests/test_browser.py checks the
same things in Chromium."""

from __future__ import annotations

import json
import shutil
import subprocess

import ipywidgets as widgets
import pytest
from bokeh.models import Legend, LegendItem
from bokeh.plotting import figure as Figure  # noqa: N812 - the class behind figure()
from conftest import SMALL_NOISE

import esnb
from esnb.controls import Control
from esnb.record import write_run_folder
from esnb.runners.plotspec import RETURN_PANELS
from esnb.ui import ControlPanel, RunFigure, history_figure
from esnb.ui.fields import control_widget
from esnb.views.figures import COMPACT_TICKS_JS, LABEL_BAND, Y_PADDING, compact_number


def inline_es(**kw):
    kw = {"population": 10, "noise_size": SMALL_NOISE, "eval_interval": 2,
          "eval_episodes": 1, **kw}
    return esnb.ES("CartPole-v1", **kw)


# -- sliders and messages ------------------------------------------------------------------------
def test_sigma_slider_moves_in_small_steps_around_its_value():
    sigma = Control("sigma", "float", 0.02, low=0, low_open=True, high=10, log=True)
    w = control_widget(sigma, 0.02)
    assert isinstance(w, widgets.FloatLogSlider)
    # a decade either side: 0.002 .. 0.2, so the 0.02 -> 0.263 is out of reach
    assert (10 ** w.min, 10 ** w.max) == (pytest.approx(0.002, rel=1e-2),
                                          pytest.approx(0.2, rel=1e-2))
    # 25 pixels of a ~250-pixel track (w.max - w.min over the track) is a 1.6x move at most
    decades_per_px = (w.max - w.min) / 250
    assert 10 ** (25 * decades_per_px) < 1.6
    assert 10 ** w.step - 1 < 0.012  # one step: ~1% of the value
    near_bound = control_widget(sigma, 5.0)  # cut at the schema's high bound
    assert 10 ** near_bound.max == pytest.approx(10.0, rel=3e-2) and 10 ** near_bound.max <= 10


def test_panel_rounds_a_dragged_value_and_says_when_it_applies():
    runner = inline_es(sigma=0.02)
    panel = ControlPanel(runner)
    try:
        panel.fields["sigma"].value = 0.09332543007969896  # what a drag sends
        assert runner.controls["sigma"] == 0.0933  # 3 significant figures in force
        assert panel.fields["sigma"].value == 0.0933
        assert panel.message_text == "✓ sigma = 0.0933 from the first generation"
        assert "<span" in panel.message.value and "<" not in panel.message_text
        runner.start(generations=2)
        runner.wait(60)
        assert runner.state == "finished"
        panel.fields["lr"].value = 0.0123456
        # a finished run: nothing happens "from the next generation" until it continues
        assert panel.message_text == ("✓ lr = 0.0123 (the run is finished: it applies when "
                                      "the run continues)")
        assert list(runner.changes.name) == ["sigma"]  # logged when it takes effect
        runner.start(generations=1)
        runner.wait(60)
        changes = runner.changes
        assert list(changes.name) == ["sigma", "lr"]
        assert changes.generation.tolist() == [1, 3] and changes.new.tolist() == [0.0933, 0.0123]
        panel.fields["population"].value = 41
        assert panel.message_text.startswith("✗ population must be even")
    finally:
        panel.close()


# -- the figure ----------------------------------------------------------------------------------
def test_compact_tick_labels():
    cases = {0: "0", 500_000: "500k", 2_000_000: "2M", 1_250_000: "1.25M", 2.5e9: "2.5B",
             1500: "1.5k", 0.02: "0.02", 250: "250", -3000: "-3k", 999: "999"}
    assert {v: compact_number(v) for v in cases} == cases


def test_compact_ticks_in_javascript_match_python():
    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        pytest.skip("no node.js to run the tick formatter's code (the browser test runs it)")
    values = [0, 500_000, 2_000_000, 1_250_000, 2.5e9, 1500, 0.02, 250, -3000, 999, 1e-4]
    script = (f"const f = (tick) => {{{COMPACT_TICKS_JS}}};\n"
              f"console.log(JSON.stringify({json.dumps(values)}.map(f)));")
    out = subprocess.run([node, "-e", script], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    assert json.loads(out) == [compact_number(v) for v in values]


def test_figure_layout_legend_width_and_initial_ranges():
    fig = RunFigure(RETURN_PANELS, "generation", {"env_steps"}, height=300)
    assert fig.layout.sizing_mode == "stretch_width"
    for f in fig.figures:
        assert f.sizing_mode == "stretch_width"
        assert [type(m) for m in f.below].count(Legend) == 1  # below the frame, not over it
        assert not any(isinstance(m, Legend) for m in f.center)
        assert f.xaxis[0].formatter.code == COMPACT_TICKS_JS
        assert f.y_range.range_padding == Y_PADDING
        # the padding keeps the top LABEL_BAND pixels free: half of it is above the data
        assert f.frame_height * (Y_PADDING / 2) / (1 + Y_PADDING) >= LABEL_BAND
    # before any data every figure holds one invisible point (BokehJS needs some data to
    # set its initial ranges); the first rows replace it
    assert all(a.data["x"] == [0.0] for a in fig.anchor_sources)
    fig.add([{"generation": 1, "env_steps": 1000.0, "wall_time": 0.5, "return_mean": 10.0}])
    assert all(a.data["x"] == [] for a in fig.anchor_sources)


def _final_items(layout):
    return [item for f in layout.select({"type": Figure}) for item in f.legend[0].items
            if isinstance(item, LegendItem) and "final" in str(item.label.value)]


def test_final_evaluation_is_marked_in_the_export_and_the_live_plot(tmp_path):
    runner = inline_es()
    runner.start(generations=4)
    runner.wait(60)
    runner.controls.set(sigma=0.05)
    runner.start(generations=2)
    runner.wait(60)
    returns = runner.evaluate_final(3)
    final = runner.final_evaluation
    last = runner.records[-1]
    assert final["mean"] == pytest.approx(returns.mean()) and final["episodes"] == 3
    assert final["env_steps"] == last["env_steps"] and final["generation"] == 6

    layout = runner.plot()
    stars = [r.data_source for f in layout.select({"type": Figure}) for r in f.renderers
             if r.data_source.name == "final evaluation"]
    assert len(stars) == 2  # both return panels
    xs = sorted(s.data["x"][0] for s in stars)
    assert xs == sorted([float(last["env_steps"]), float(last["wall_time"])])
    assert all(s.data["y"] == [pytest.approx(returns.mean())] for s in stars)
    labels = {item.label.value for item in _final_items(layout)}
    assert labels == {f"final eval {returns.mean():.3g} (3 episodes)"}

    live = esnb.ui.LivePlot(runner)
    try:
        live.wait_drawn()
        assert {i.label.value for i in _final_items(live.run_figure.layout)} == labels
        assert live.marker_texts(0) == ["sigma 0.02→0.05"]
    finally:
        live.close()

    # the CLI's run folder: the same marks in plot.html, and strict JSON
    folder = write_run_folder(runner, tmp_path / "run", {"nan": float("nan")})
    html = (folder / "plot.html").read_text()
    assert "final eval" in html
    assert "sigma 0.02→0.05" in html or "sigma 0.02\\u21920.05" in html
    assert "cdn.bokeh.org" not in html  # BokehJS inline: it opens offline
    summary = json.loads((folder / "summary.json").read_text(),
                         parse_constant=lambda c: pytest.fail(f"bare {c} in summary.json"))
    assert summary["nan"] is None


def test_history_figure_without_runner_has_no_final_mark():
    layout = history_figure(inline_es().history)
    assert all(not s.data_source.data["x"] for f in layout.select({"type": Figure})
               for s in f.renderers if s.data_source.name == "final evaluation")
