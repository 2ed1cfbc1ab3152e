"""Tutorial 04 in a real browser: JupyterLab, headless Chromium, Run All, then a person's hand.

The server is started through ``binder/start`` (threads instead of worker processes, a small
noise table, the Dask dashboard behind ``/proxy/<port>/status``), as on mybinder.org. Chromium,
driven by Playwright, opens ``tutorials/04_live_control.ipynb`` (a copy) and

1. runs the whole tutorial with Run > Run All Cells;
2. checks that after Run All the dashboard is still there and usable (no "model not found"):
   status line with the proxied dashboard link, the run finished, buttons enabled for a
   finished run, the sigma slider at the value the tutorial set; the exercise printed plain
   text (no HTML); the live plot holds every generation with the change marker, its ticks read
   like ``2M`` (the page's own tick formatter asked), and the static figure of the last cell
   marks the final evaluation;
3. drags the sigma slider with the mouse: the panel says, rounded to 3 figures, that the value
   applies when the finished run continues; presses the panel's "start" button;
4. waits for the continued run to finish in the status line and for the plot to grow;
5. types a cell that prints the run's change log and history, and checks that the dragged
   value was recorded and took effect at the first generation of the continued run;
6. saves the notebook and reloads the page, as after a lost connection: the dashboard comes
   back from the kernel, and the plot (rebuilt from scratch in the page) holds every
   generation and the markers again;
7. types a cell that starts a run with ``esnb.launch``, restarts the kernel from the Kernel
   menu (the run's process lives on), attaches from the new kernel with ``esnb.attach`` and
   ``esnb.dashboard``, drags that panel's sigma slider, and checks that the run recorded the
   change with the new kernel as its origin; then stops the run.

Throughout, the page must log no console error (nor BokehJS's "could not set initial ranges")
and request nothing from another host (BokehJS comes from the installed bokeh, inline: no CDN).
Screenshots of the dashboard and of the static figure are saved under ``$ESNB_TEST_OUTPUT``
(CI's ``test-output/``) or the test's temporary directory, and their paths printed. Without
Chromium or Playwright the test is skipped and says why; with ``ESNB_REQUIRE_BROWSER=1`` (set
by ``.ci/run``) it fails instead.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "tutorials" / "04_live_control.ipynb"
TOKEN = "esnb-browser-test"

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("browser")]

# JavaScript run in the page: every ColumnDataSource of every BokehJS document, as plain data
BOKEH_SOURCES = """() => {
  const out = [];
  for (const doc of ((window.Bokeh && window.Bokeh.documents) || [])) {
    for (const m of doc.all_models) {
      if (m.type !== "ColumnDataSource") continue;
      const entries = m.data instanceof Map ? [...m.data.entries()] : Object.entries(m.data);
      const d = Object.fromEntries(entries.map(([k, v]) => [k, Array.from(v)]));
      d.name = m.name;
      out.push(d);
    }
  }
  return out;
}"""

# JavaScript: what each of the page's compact tick formatters writes for a few ticks
TICK_LABELS = """() => {
  const out = [];
  for (const doc of ((window.Bokeh && window.Bokeh.documents) || [])) {
    for (const m of doc.all_models) {
      if (m.type === "CustomJSTickFormatter") out.push(m.doFormat([0, 5e5, 2e6, 1.5e9], {loc: 0}));
    }
  }
  return out;
}"""

CHECK_CELL = (
    'import json; c = runner.changes; h = runner.history; print("ESNB-CHECK " + json.dumps('
    '{"state": runner.state, "plot_rows": len(board.plot.sources[0][0].data["x"]), '
    '"changes": [[int(g), n, o, v] for g, n, o, v in '
    'zip(c.generation, c.name, c.old, c.new)], "sigma": [[int(g), float(s)] for g, s in '
    'zip(h.generation, h.sigma)]}, default=str))'
)


# step 7: a run launched from the notebook, the kernel restarted, the run attached again
OUTLIVES = "browser-outlives"
LAUNCH_CELL = (
    f'import esnb; launched = esnb.launch("es", env="CartPole-v1", workers=1, name="{OUTLIVES}", '
    'generations=100_000, population=8, noise_size=1_000_000); '
    'print("ESNB-LAUNCHED", launched.name, launched.pid)'
)
ATTACH_CELL = (
    f'import esnb; run = esnb.attach("{OUTLIVES}"); remote_board = esnb.dashboard(run); '
    'remote_board'
)
# the run logs a change with the first generation that uses it: wait (up to 60 s) for that
# generation before reading the log, as one line (a typed cell is one line here)
RECORD_CELL = (
    'import json, os, time; next((i for i in range(600) if "sigma" in set(run.changes.name) '
    'or time.sleep(0.1)), None); '
    'c = run.changes; print("ESNB-ATTACHED " + json.dumps({"kernel": os.getpid(), '
    '"changes": [[int(g), n, str(v), o] for g, n, v, o in zip(c.generation, c.name, c.new, '
    'c.origin)], "iteration": run.iteration})); run.stop(); run.wait(120); '
    'print("ESNB-STOPPED", run.state)'
)


def _unavailable(reason: str):
    if os.environ.get("ESNB_REQUIRE_BROWSER"):
        pytest.fail(f"ESNB_REQUIRE_BROWSER is set but {reason}")
    pytest.skip(reason)


@pytest.fixture
def chromium() -> str:
    """Chromium's path, once Playwright and JupyterLab are known to be importable."""
    for module, what in (("playwright.sync_api", "Playwright"), ("jupyterlab", "JupyterLab")):
        try:
            __import__(module)
        except ImportError:
            _unavailable(f"{what} is not installed (pip install 'esnb[test]')")
    candidates = [os.environ.get("ESNB_CHROMIUM"), "chromium", "chromium-browser",
                  "google-chrome", "google-chrome-stable"]
    for name in filter(None, candidates):
        path = shutil.which(name)
        if path:
            return path
    _unavailable("no Chromium on this machine (Debian: apt-get install chromium; "
                 "or set ESNB_CHROMIUM)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cell_indices() -> tuple[int, int, int, int]:
    """Indices of the first code cell, the dashboard cell and the last code cell (the static
    figure), and the number of cells."""
    nb = json.loads(NOTEBOOK.read_text())
    sources = ["".join(c["source"]) if c["cell_type"] == "code" else None for c in nb["cells"]]
    first = next(i for i, s in enumerate(sources) if s is not None)
    board = next(i for i, s in enumerate(sources) if s and "esnb.dashboard(" in s)
    last = max(i for i, s in enumerate(sources) if s is not None)
    assert "runner.plot()" in sources[last], "tutorial 04's last code cell shows runner.plot()"
    assert not any(s and "board.close()" in s for s in sources), (
        "tutorial 04 must not close its board: Run All would leave 'model not found'")
    return first, board, last, len(sources)


@pytest.fixture
def output_dir(tmp_path) -> Path:
    out = os.environ.get("ESNB_TEST_OUTPUT")
    path = Path(out) / "browser" if out else tmp_path / "output"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def lab(tmp_path):
    """JupyterLab on a free loopback port, started through binder/start, on a copy of the
    tutorial; yields its base URL. Its settings, workspaces and runtime files live in
    tmp_path."""
    root = tmp_path / "root"
    root.mkdir()
    shutil.copy(NOTEBOOK, root / NOTEBOOK.name)
    settings = tmp_path / "settings" / "@jupyterlab"
    # no "Jupyter news?" toast over the page; every cell in the DOM (no virtual scrolling)
    for ext, values in {"apputils-extension/notification": {"fetchNews": "false",
                                                            "checkForUpdates": False},
                        "notebook-extension/tracker": {"windowingMode": "none"}}.items():
        f = settings / f"{ext}.jupyterlab-settings"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(json.dumps(values))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DASK_", "JUPYTERHUB_", "BOKEH_"))}
    env.update(
        ESNB_SMOKE="1",  # the tutorial's small mode, read by its parameters cell
        PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
        JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"),
        IPYTHONDIR=str(tmp_path / "ipython"),
    )
    port = _free_port()
    log = open(tmp_path / "jupyter.log", "w")
    server = subprocess.Popen(
        [str(ROOT / "binder" / "start"), sys.executable, "-m", "jupyterlab", "--no-browser",
         "--ip=127.0.0.1", f"--port={port}", "--port-retries=0",
         f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={root}", "--allow-root"],
        env=env, cwd=root, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={TOKEN}", timeout=5)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    pytest.fail("JupyterLab did not start:\n"
                                + (tmp_path / "jupyter.log").read_text()[-3000:])
                time.sleep(0.5)
        yield base
    finally:
        # the server shuts its kernels down (they run in sessions of their own)
        try:
            req = urllib.request.Request(f"{base}/api/shutdown?token={TOKEN}", method="POST")
            urllib.request.urlopen(req, timeout=10)
        except OSError:
            pass
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()
        log.close()


def test_tutorial_04_runs_and_its_slider_steers_the_run_in_a_real_browser(
        chromium, lab, output_dir, tmp_path):
    from playwright.sync_api import sync_playwright

    cell_indices = _cell_indices()
    t0 = time.monotonic()
    timings = {}

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True,
                                    args=["--no-sandbox", "--disable-dev-shm-usage"])
        page = browser.new_page(viewport={"width": 1400, "height": 1800})
        page_errors: list[str] = []
        page.on("pageerror", lambda exc: page_errors.append(str(exc)))
        console: list[tuple[str, str]] = []
        page.on("console", lambda msg: console.append((msg.type, msg.text)))
        foreign: list[str] = []  # requests to any other host than the Jupyter server
        page.on("request", lambda req: foreign.append(req.url)
                if not req.url.startswith((lab, "data:", "blob:", "about:")) else None)
        try:
            restarted_at = _drive(page, lab, cell_indices, output_dir, timings, t0, console)
            assert not page_errors, page_errors
            assert not foreign, f"requests outside the Jupyter server (a CDN?): {foreign[:5]}"
            bad = [(kind, text) for i, (kind, text) in enumerate(console)
                   if (kind == "error" or "could not set initial ranges" in text)
                   and not (i >= restarted_at and _stale_widget_view(text))]
            assert not bad, f"browser console: {bad[:5]}"
        except BaseException:
            shot = output_dir / "tutorial04-failure.png"
            page.screenshot(path=str(shot))
            print(f"\nscreenshot of the failure: {shot}")
            print("page errors:", page_errors[-5:])
            try:
                print("bokeh sources (column lengths):",
                      [{k: len(v) for k, v in d.items()} for d in page.evaluate(BOKEH_SOURCES)])
            except Exception as exc:  # the page may be gone
                print("bokeh sources unreadable:", exc)
            print("server log:", (tmp_path / "jupyter.log").read_text()[-2000:])
            raise
        finally:
            browser.close()
    print("\ntimings (s): " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()))


def _stale_widget_view(text: str) -> bool:
    """JupyterLab's own error when it draws (again, e.g. as the notebook scrolls) an output of
    a kernel that was restarted: that kernel's widget models are gone. A person sees "Error
    displaying widget: model not found" in those old outputs; it says nothing about esnb, whose
    widgets in the new kernel are checked to render."""
    return text.startswith("Error: widget model not found") and "get_model" in text


def _drive(page, base, cell_indices, output_dir, timings, t0, console) -> int:
    """Drive tutorial 04 as a person would; the number of console messages logged before the
    kernel was restarted."""
    first_code, board_idx, last_idx, n_cells = cell_indices

    def mark(name):
        timings[name] = time.monotonic() - t0

    page.set_default_timeout(60_000)
    page.goto(f"{base}/lab/tree/{NOTEBOOK.name}?token={TOKEN}&reset")
    page.wait_for_function(
        f"document.querySelectorAll('.jp-Notebook .jp-Cell').length === {n_cells}",
        timeout=180_000)
    # the frontend is connected to a started kernel
    page.locator("#jp-main-statusbar", has_text="| Idle").wait_for(timeout=180_000)
    mark("notebook open")

    cells = page.locator(".jp-Notebook .jp-Cell")
    # 1. Run > Run All Cells (retried once: a click can land while the page is still settling)
    prompt = cells.nth(first_code).locator(".jp-InputPrompt")
    for attempt in range(2):
        cells.nth(first_code).click()
        page.locator(".lm-MenuBar-item", has_text="Run").first.click()
        page.locator(".lm-Menu-item[data-command='runmenu:run-all']:visible").click()
        try:
            page.wait_for_function(
                "el => /\\[(\\*|\\d+)\\]/.test(el.innerText)", arg=prompt.element_handle(),
                timeout=20_000)
            break
        except Exception:
            if attempt:
                raise
    board = cells.nth(board_idx).locator(".jp-OutputArea")
    last_out = cells.nth(last_idx).locator(".jp-OutputArea")
    _wait_for_output(page, last_out, "final evaluation:", timeout=420)
    cells.nth(last_idx).locator("canvas").first.wait_for(state="visible")
    mark("Run All done")

    # 2. after Run All the panel is alive: nothing closed it, the run is finished
    status = board.locator(".widget-html-content", has_text="generation").first
    board.locator(".widget-html-content",
                  has_text=re.compile(r"finished · generation \d+")).wait_for()
    finished_at = int(re.search(r"generation (\d+)", status.inner_text()).group(1))
    assert not page.get_by_text("model not found").count()
    link = status.locator("a", has_text="Dask dashboard")
    assert re.fullmatch(r"/proxy/\d+/status", link.get_attribute("href")), (
        "binder/start's dashboard link (jupyter-server-proxy) should be in the status line")
    buttons = {name: board.locator("button", has_text=name).first
               for name in ("start", "pause", "resume", "step one", "stop")}
    assert buttons["start"].is_enabled() and buttons["step one"].is_enabled()
    assert buttons["pause"].is_disabled() and buttons["stop"].is_disabled()
    slider = board.locator(".widget-slider",
                           has=page.locator(".widget-label", has_text=re.compile(r"^sigma$")))
    readout = slider.locator(".widget-readout")
    assert float(readout.inner_text()) == pytest.approx(0.05)  # what the tutorial set
    # the exercise printed text, not markup
    exercise = cells.filter(has_text="panel says:").last.locator(".jp-OutputArea").inner_text()
    assert "population must be even" in exercise and "<span" not in exercise
    # the live plot: drawn, every generation, the change marker, compact ticks
    canvas = board.locator("canvas").first
    canvas.wait_for(state="visible")
    box = canvas.bounding_box()
    assert box["width"] > 100 and box["height"] > 100, box
    _wait_for_every_generation(page, finished_at)
    ticks = page.evaluate(TICK_LABELS)
    assert ticks and all(t == ["0", "500k", "2M", "1.5B"] for t in ticks), ticks
    # the static figure of the last cell marks the final evaluation
    page.wait_for_function(f"() => ({BOKEH_SOURCES})().some(d => d.name === "
                           f"'final evaluation' && d.x.length === 1)")
    last_out.scroll_into_view_if_needed()
    shot = output_dir / "tutorial04-static-plot.png"
    cells.nth(last_idx).screenshot(path=str(shot))
    print(f"\nscreenshot of the static figure: {shot}")
    mark("panel checked")

    # 3. drag the sigma slider to the right, as a person would, on the finished run
    _drag(page, slider, 12)
    # the kernel accepted it: the panel's message line comes back from Python, rounded
    message = board.locator(".widget-html-content", has_text="sigma =")
    message.wait_for(timeout=30_000)
    said = message.inner_text()
    new_text = re.search(r"sigma = ([0-9.eE+-]+)", said).group(1)
    new_sigma = float(new_text)
    assert float(f"{new_sigma:.3g}") == new_sigma, said  # 3 significant figures
    assert "applies when the run continues" in said and "next generation" not in said, said
    assert 0.05 < new_sigma < 0.1  # 12 pixels of a log slider: a small step
    assert float(readout.inner_text()) == pytest.approx(new_sigma)
    mark("slider moved")

    buttons["start"].click()  # the tutorial's budget again, from where it finished

    # 4. the continued run finishes, and the plot follows
    board.locator(".widget-html-content", has_text=re.compile(
        rf"finished · generation (?!{finished_at}\b)\d+")).wait_for(timeout=300_000)
    mark("run continued")
    total = int(re.search(r"generation (\d+)", status.inner_text()).group(1))
    assert total > finished_at + 1
    _wait_for_every_generation(page, total)

    board.scroll_into_view_if_needed()
    shot = output_dir / "tutorial04-dashboard.png"
    cells.nth(board_idx).screenshot(path=str(shot))
    print(f"screenshot of the dashboard after the run continued: {shot}")

    # 5. a cell typed into the notebook prints what the run recorded
    check_out = _type_cell(page, cells, n_cells, CHECK_CELL, after=last_idx)
    text = _wait_for_output(page, check_out, "ESNB-CHECK", timeout=60)
    mark("history read")
    record = json.loads(text.split("ESNB-CHECK", 1)[1].strip().splitlines()[0])

    assert record["state"] == "finished"
    # the kernel's side of the plot holds each generation once (the page echoes what it gets)
    assert record["plot_rows"] == total
    assert [c[1] for c in record["changes"]] == ["sigma", "sigma"], record["changes"]
    (g1, _, old1, new1), (generation, _, old, new) = record["changes"]
    assert (float(old1), float(new1)) == (0.02, 0.05)  # the tutorial's own change
    assert float(old) == 0.05 and float(new) == new_sigma
    # set on the finished run: the first generation of the continued run used it
    assert generation == finished_at + 1
    sigma = dict(record["sigma"])
    assert len(sigma) == total
    assert all(s == 0.05 for g, s in sigma.items() if g1 <= g < generation)
    assert all(s == new_sigma for g, s in sigma.items() if g >= generation)

    # 6. save, reload the page: the widgets come back from the kernel, and the new plot view
    #    (whose document starts as it was when the plot was made) is sent the whole data
    page.keyboard.press("Escape")
    page.keyboard.press("Control+s")
    page.locator(".lm-TabBar-tab.jp-mod-dirty").wait_for(state="detached")
    page.reload()
    page.wait_for_function(
        f"document.querySelectorAll('.jp-Notebook .jp-Cell').length === {n_cells + 1}",
        timeout=120_000)
    page.locator("#jp-main-statusbar", has_text="| Idle").wait_for(timeout=120_000)
    board.locator(".widget-html-content", has_text="finished").first.wait_for()
    board.locator("canvas").first.wait_for(state="visible")
    _wait_for_every_generation(page, total)
    mark("page reloaded")

    # 7. a run launched from the notebook outlives its kernel: launch, restart the kernel from
    #    the menu, attach from the new kernel, drag its sigma slider, see the change recorded
    n = n_cells + 1  # cells in the notebook; each typed cell goes at the end
    out = _type_cell(page, cells, n, 'import os; print("ESNB-PID", os.getpid())')
    old_kernel = int(_wait_for_output(page, out, "ESNB-PID", timeout=60)
                     .split("ESNB-PID", 1)[1].split()[0])
    out = _type_cell(page, cells, n + 1, LAUNCH_CELL)
    launched = _wait_for_output(page, out, "ESNB-LAUNCHED", timeout=180)
    run_pid = int(launched.split("ESNB-LAUNCHED", 1)[1].split()[1])
    page.locator(".lm-MenuBar-item", has_text="Kernel").first.click()
    page.locator(".lm-Menu-item[data-command='kernelmenu:restart']:visible").click()
    restarted_at = len(console)
    page.locator(".jp-Dialog .jp-mod-accept").click()  # "Restart"
    page.locator("#jp-main-statusbar", has_text="| Idle").wait_for(timeout=120_000)
    mark("kernel restarted")
    os.kill(run_pid, 0)  # the run's process is alive after its kernel went
    out = _type_cell(page, cells, n + 2, ATTACH_CELL)
    remote = out.locator(".widget-slider",
                         has=page.locator(".widget-label", has_text=re.compile(r"^sigma$")))
    remote.wait_for(timeout=60_000)
    out.locator("canvas").first.wait_for(state="visible")  # the run's live plot, drawn here
    _drag(page, remote, 12)
    said = out.locator(".widget-html-content", has_text="sigma =")
    said.wait_for(timeout=30_000)
    dragged = float(re.search(r"sigma = ([0-9.eE+-]+)", said.inner_text()).group(1))
    assert 0.02 < dragged < 0.05, said.inner_text()  # from the launched run's 0.02
    mark("attached slider moved")
    out = _type_cell(page, cells, n + 3, RECORD_CELL)
    text = _wait_for_output(page, out, "ESNB-STOPPED", timeout=180)
    record = json.loads(text.split("ESNB-ATTACHED", 1)[1].strip().splitlines()[0])
    assert record["kernel"] != old_kernel  # a new kernel attached
    sigma = [c for c in record["changes"] if c[1] == "sigma"]
    assert len(sigma) == 1 and float(sigma[0][2]) == pytest.approx(dragged), record
    assert sigma[0][3].endswith(f"pid {record['kernel']}"), record  # its origin: that kernel
    assert "ESNB-STOPPED ended" in text
    mark("attached run stopped")
    return restarted_at


def _drag(page, slider, pixels: int) -> None:
    """Drag ``slider``'s handle ``pixels`` to the right with the mouse, as a person would."""
    handle = slider.locator(".noUi-handle")
    handle.scroll_into_view_if_needed()
    hb = handle.bounding_box()
    x, y = hb["x"] + hb["width"] / 2, hb["y"] + hb["height"] / 2
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x + pixels, y, steps=6)
    page.mouse.up()


def _type_cell(page, cells, count: int, source: str, after: int | None = None):
    """In a notebook of ``count`` cells, insert a code cell below cell ``after`` (default: the
    last), type ``source`` into it and run it; its output area."""
    after = count - 1 if after is None else after
    cells.nth(after).click()
    page.keyboard.press("Escape")
    page.keyboard.press("b")  # insert a code cell below, selected
    page.wait_for_function(
        f"document.querySelectorAll('.jp-Notebook .jp-Cell').length === {count + 1}")
    page.keyboard.press("Enter")  # edit mode
    page.keyboard.insert_text(source)
    page.keyboard.press("Control+Enter")  # run it in place: no new cell after the last one
    return cells.nth(after + 1).locator(".jp-OutputArea")


def _wait_for_every_generation(page, generations: int) -> None:
    """Until the page's Bokeh plot holds every generation and the change marker's label."""
    page.wait_for_function(
        f"""() => {{
            const s = ({BOKEH_SOURCES})();
            return s.some(d => d.y && d.y.length === {generations})
                && s.some(d => d.text && d.text.some(t => String(t).startsWith("sigma")));
        }}""", timeout=30_000)


def _wait_for_output(page, output_area, text: str, timeout: float) -> str:
    """Wait for ``text`` in an output area; fail at once on a Python error in any cell."""
    deadline = time.monotonic() + timeout
    errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']",
                          has_text="Traceback")
    widget_errors = page.locator(".jupyter-widgets.widget-error, .jupyter-widgets-error-widget")
    while True:
        got = output_area.inner_text() if output_area.count() else ""
        if text in got:
            return got
        if errors.count():
            pytest.fail("a cell failed:\n" + errors.first.inner_text()[-3000:])
        if widget_errors.count():
            pytest.fail("a widget failed to render:\n" + widget_errors.first.inner_text()[:3000])
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {text!r} in the output after {timeout} s; it reads: "
                               f"{got[-1000:]!r}")
        time.sleep(0.25)
