"""A run folder belongs to one run, and says what it holds while the run goes (issue 36).

- A new run into a folder that holds a run is refused in one line naming the folder and the
  ways on; the run there is untouched. An unnamed run whose default folder is taken takes the
  next free name and says so.
- A live run holds its folder's lock: no second run starts there, whatever its ``attach.json``
  says; a damaged ``attach.json`` is one line in ``esnb runs``, ``esnb.runs()`` and
  ``esnb.attach``, and a copied one attaches nothing.
- ``history.csv`` and ``changes.csv`` are on disk after every iteration: a run killed with
  SIGKILL leaves its history readable.
"""

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import esnb
from esnb.cli import main
from esnb.live_history import CsvRows
from esnb.remote.folders import DamagedRun, RunEnded, alive, serving_info
from esnb.session.folder import FolderLock, check_new, lock_holder
from esnb.session.options import RunOptions
from esnb.session.plan import plan

SAFETY = 180.0  # seconds: a safety net for waits on a condition, never what a test measures
ES = ["--env", "CartPole-v1", "--population", "8", "--noise-size", "200000",
      "--max-episode-steps", "50", "--final-eval", "0", "--no-progress"]


def until(what, check, timeout=SAFETY):
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not {what} after {timeout} s")
        time.sleep(0.2)


def digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.iterdir()) if p.is_file()}


def esnb_cli(*args, cwd, **kw):
    return subprocess.run([sys.executable, "-m", "esnb.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=SAFETY, **kw)


def test_a_new_run_never_replaces_a_run(tmp_path, monkeypatch):
    first = esnb_cli("train", "es", *ES, "--workers", "0", "--generations", "2",
                     "--out", "runs/done", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    folder = tmp_path / "runs" / "done"
    before = digest(folder)
    again = esnb_cli("train", "es", *ES, "--workers", "0", "--generations", "3",
                     "--out", "runs/done", cwd=tmp_path)
    assert again.returncode != 0
    line = again.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert "runs/done holds a run already" in line and "--resume runs/done" in line
    assert "--name/--out" in line
    assert digest(folder) == before  # not a byte of the finished run changed
    # the same through the API (esnb.launch plans with this code): by name, into a killed
    # run's folder (a checkpoint, no summary)
    (folder / "summary.json").unlink()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"runs/done holds a run already \(checkpoint.npz"):
        plan("es", {"env": "CartPole-v1"}, RunOptions.of(name="done"), check_cluster_now=False)
    # resuming it is the way on
    resumed = plan("es", {}, RunOptions.of(resume="runs/done"), check_cluster_now=False)
    assert resumed.folder == Path("runs/done")


def test_an_unnamed_run_takes_the_next_free_name(tmp_path, capsys):
    taken = tmp_path / "runs" / "es-20261128-120000"
    (taken / "checkpoints").mkdir(parents=True)
    (taken.with_name(taken.name + "-2")).mkdir()
    (taken.with_name(taken.name + "-2") / "history.csv").write_text("generation\n1\n")
    (taken.with_name(taken.name + "-3")).mkdir()  # empty: free
    assert check_new(taken, chosen=False) == taken.with_name(taken.name + "-3")
    said = capsys.readouterr().err.strip()
    assert said == (f"esnb: {taken} holds another run; this run is es-20261128-120000-3 "
                    f"({taken.with_name(taken.name + '-3')})")
    # named by the user: refused, never renamed
    with pytest.raises(ValueError, match="holds a run already"):
        check_new(taken, chosen=True)
    # a folder holding only a plan or a log (a run that made nothing) is free
    spare = tmp_path / "runs" / "spare"
    spare.mkdir()
    (spare / "plan.json").write_text("{}")
    (spare / "run.log").write_text("")
    assert check_new(spare, chosen=True) == spare


def test_an_unnamed_plan_takes_the_free_name_for_its_folder_and_its_run(tmp_path, monkeypatch,
                                                                        capsys):
    """Two unnamed runs planned in the same second: the second is named and foldered
    ``<name>-2`` (the run's name is its folder's), said on stderr; the first is untouched."""
    import esnb.session.plan as planning

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(planning.time, "strftime", lambda fmt: "20261128-120000")
    first = plan("es", {"env": "CartPole-v1"}, RunOptions.of(), check_cluster_now=False)
    assert first.name == "es-20261128-120000"
    (first.folder / "history.csv").write_text("generation\n1\n")  # it ran
    second = plan("es", {"env": "CartPole-v1"}, RunOptions.of(), check_cluster_now=False)
    assert second.name == "es-20261128-120000-2"
    assert second.folder == Path("runs/es-20261128-120000-2") and second.folder.is_dir()
    assert "runs/es-20261128-120000 holds another run; this run is es-20261128-120000-2" in \
        capsys.readouterr().err
    assert (first.folder / "history.csv").read_text() == "generation\n1\n"


HOLD = """
import sys, time
from esnb.session.folder import FolderLock
lock = FolderLock(sys.argv[1]).acquire()
print("held", flush=True)
sys.stdin.read()  # until the test closes it
"""


def test_a_live_runs_lock_decides_not_its_file(tmp_path, monkeypatch):
    folder = tmp_path / "runs" / "live"
    folder.mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert lock_holder(folder) == holder.pid
        # no second run there, whatever the folder's files say (none at all here)
        with pytest.raises(ValueError, match=rf"belongs to a run that is running \(pid "
                                             rf"{holder.pid}\)"):
            FolderLock(folder).acquire()
        monkeypatch.chdir(tmp_path)
        with pytest.raises(ValueError, match="belongs to a run that is running"):
            plan("es", {"env": "CartPole-v1"}, RunOptions.of(out="runs/live"),
                 check_cluster_now=False)
    finally:
        holder.stdin.close()
        holder.wait(timeout=SAFETY)
    # the process gone, the lock went with it (no stale file claims the folder)
    assert lock_holder(folder) is None
    with FolderLock(folder):
        assert lock_holder(folder) == os.getpid()


def test_history_on_disk_while_a_run_goes(tmp_path):
    """A run killed with SIGKILL (no finish, no summary) leaves history.csv readable, row by
    row as its iterations went; checkpoints far apart do not matter."""
    run = subprocess.Popen(
        [sys.executable, "-m", "esnb.cli", "train", "es", *ES, "--workers", "0",
         "--generations", "100000", "--checkpoint-every", "100000", "--out", "runs/long",
         "--sigma", "0.05"], cwd=tmp_path, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, start_new_session=True)
    history = tmp_path / "runs" / "long" / "history.csv"

    def rows() -> int:
        try:
            return max(0, len(history.read_text().splitlines()) - 1)
        except OSError:
            return 0

    try:
        until("three generations on disk", lambda: rows() >= 3 or run.poll() is not None)
        assert run.poll() is None, run.stderr.read().decode()
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait(timeout=SAFETY)
    folder = history.parent
    assert not (folder / "summary.json").exists()  # it never finished
    table = pd.read_csv(history)
    assert len(table) >= 3
    assert table["generation"].tolist() == list(range(1, len(table) + 1))
    assert np.isfinite(table["return_mean"]).all() and (table["env_steps"].diff()[1:] > 0).all()
    changes = pd.read_csv(folder / "changes.csv")
    assert list(changes.columns) == ["generation", "wall_time", "env_steps", "name", "old",
                                     "new", "version", "origin"]
    # the lock died with the run: the folder is free to resume
    assert lock_holder(folder) is None


def test_csv_rows_match_what_pandas_writes(tmp_path):
    path = tmp_path / "h.csv"
    rows: list[dict] = []
    out = CsvRows(path)
    rows.append({"it": 1, "r": np.float32(1.5), "x": None})
    out.write(rows)
    rows.append({"it": 2, "r": float("nan"), "x": 3})
    out.write(rows)
    assert path.read_text().splitlines() == ["it,r,x", "1,1.5,", "2,,3"]
    rows.append({"it": 3, "r": 2.0, "x": 4, "eval": 7.25})  # a new column: written anew
    out.write(rows)
    got = pd.read_csv(path)
    want = pd.read_csv(pd.io.common.StringIO(pd.DataFrame(rows).to_csv(index=False)))
    pd.testing.assert_frame_equal(got, want)
    out.write(rows)  # nothing new: nothing written
    assert pd.read_csv(path).shape == (3, 4)


@pytest.mark.slow
def test_a_served_runs_folder_with_a_damaged_attach_file(tmp_path, monkeypatch, capsys):
    """A live served run whose attach.json is damaged: its folder is still its own, the
    listing and attach say what is wrong in one line, a copied file attaches nothing."""
    monkeypatch.chdir(tmp_path)
    run = esnb.launch("es", name="served", env="CartPole-v1", workers=1, population=8,
                      noise_size=200_000, max_episode_steps=50, final_eval=0,
                      generations=100_000)
    folder = tmp_path / "runs" / "served"
    try:
        assert run.dashboard_link is None  # no dashboard unless asked (esnb.serve.dashboard)
        # its scheduler's plain-HTTP server answers a health check and shows nothing else
        import urllib.error
        import urllib.request

        port = run.client.scheduler_info()["services"]["dashboard"]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=30) as page:
            assert page.status == 200
        for route in ("status", "info/main/workers.html", "json/counts.json", "metrics"):
            with pytest.raises(urllib.error.HTTPError) as err:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/{route}", timeout=30)
            assert err.value.code == 404, route
        good = (folder / "attach.json").read_text()
        (tmp_path / "runs" / "copy").mkdir()
        (tmp_path / "runs" / "copy" / "attach.json").write_text(good)
        with pytest.raises(RunEnded):  # a copied file: no live run there
            esnb.attach("copy")
        damaged = json.loads(good)
        del damaged["address"]
        (folder / "attach.json").write_text(json.dumps(damaged))
        with pytest.raises(DamagedRun, match=r"attach.json is damaged \(no address\)"):
            serving_info(folder)
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            assert esnb.runs().empty
        assert len(said) == 1 and "served/attach.json is damaged" in str(said[0].message)
        assert main(["runs"]) == 0
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and "attach.json is damaged (no address)" in err
        with pytest.raises(DamagedRun, match=f"running \\(pid {run.process.pid}\\)"):
            esnb.attach("served")
        # no second run into it, by name or by folder
        with pytest.raises(ValueError, match="belongs to a run that is running"):
            esnb.launch("es", name="served", env="CartPole-v1", workers=1)
        (folder / "attach.json").write_text(good)
        run.stop()
        until("the run ended", lambda: not run.serving())
        run.process.wait(timeout=SAFETY)
    finally:
        if alive(run.process.pid):
            os.killpg(run.process.pid, signal.SIGKILL)
    shutil.rmtree(tmp_path / "runs" / "copy")


def test_an_ended_served_run_answers_reads_only_and_keeps_its_folder_open(tmp_path):
    """The handler of a served run refuses work (set, step, pause, resume) once the run has
    ended, and still answers reads; serving makes only the credentials private."""
    import stat

    from distributed import Client, LocalCluster

    from esnb.remote.serve import Serving, credentials
    from esnb.runners.es import ES, ESConfig

    folder = tmp_path / "run"
    folder.mkdir(mode=0o755)
    security = credentials()
    with LocalCluster(n_workers=1, processes=False, security=security, host="127.0.0.1",
                      dashboard_address=None) as cluster, \
            Client(cluster, security=security) as client:
        runner = ES(client=client, config=ESConfig.build(
            env="CartPole-v1", population=8, noise_size=200_000, max_episode_steps=50))
        served = Serving(runner, client, folder, security)
        try:
            assert stat.S_IMODE(folder.stat().st_mode) == 0o755
            assert stat.S_IMODE((folder / "attach").stat().st_mode) == 0o700
            assert stat.S_IMODE((folder / "attach.json").stat().st_mode) == 0o600
            runner.start(generations=1)
            runner.wait()
            assert runner.state == "finished"
            for action, kwargs in (("set", {"values": {"sigma": 0.05}, "origin": "k"}),
                                   ("step", {"n": 1}), ("pause", {}), ("resume", {})):
                reply = served.handle(action, **kwargs)
                assert reply["error"].endswith(f"has ended (finished): {action} does "
                                               f"nothing now"), reply
            assert runner.controls["sigma"] != 0.05
            assert len(served.handle("history")["rows"]) == 1
            assert served.handle("state")["state"] == "finished"
        finally:
            served.close()
            runner.close()


def test_the_progress_esnb_runs_shows_is_the_last_line_its_run_said(tmp_path):
    """``esnb runs``'s progress column: the last line of the run's log said by its own
    progress (not another run's, not an error line); "" without a log or such a line."""
    from esnb.remote.folders import last_progress

    log = tmp_path / "run.log"
    assert last_progress(log, "a") == ""  # a served `esnb train`: its output is a terminal
    log.write_text("esnb: a: 5% (50/1,000 generations), ret 12.5, 0:09:30 left\n"
                   "esnb: b: 90% (900/1,000 generations), ret 99\n"
                   "esnb: a: 10% (100/1,000 generations), ret 20.1, 0:09:00 left\n"
                   "worker tcp://127.0.0.1:1 died (connection lost)\n")
    assert last_progress(log, "a") == "10% (100/1,000 generations), ret 20.1, 0:09:00 left"
    assert last_progress(log, "c") == ""
    # only the log's end is read: a long log's last line is still found
    with open(log, "a") as f:
        f.write("x" * 200_000 + "\nesnb: a: 15% (150/1,000 generations), ret 30\n")
    assert last_progress(log, "a") == "15% (150/1,000 generations), ret 30"
