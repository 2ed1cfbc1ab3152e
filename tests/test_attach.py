"""Runs that outlive the notebook (:mod:`esnb.remote`): ``esnb.launch`` starts ``esnb train
--serve`` in a process of its own, kernels attach to it (``esnb.attach``), read its history,
set its controls through the run's own validation (recorded with their origin) and stop it; a
connection without the run's credentials is refused; killing the launching kernel leaves the
run going. Real processes, a real LocalCluster each; budgets in generations (the runs are
stopped by the tests), timeouts only as a safety net."""

import gc
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

import esnb
from esnb.cli import main
from esnb.controls import Controls
from esnb.remote.attach import connect
from esnb.remote.folders import alive, serving_info
from esnb.runners.es import ESConfig
from esnb.ui import dashboard

ROOT = Path(__file__).resolve().parents[1]
#: small and quick; a budget far beyond what the tests run: they stop the run
RUN = dict(env="CartPole-v1", workers=1, population=8, noise_size=200_000,
           max_episode_steps=100, eval_interval=0, final_eval=1, generations=100_000)
SAFETY = 120.0  # seconds: a safety net only, never what a test measures


def until(what, check, timeout=SAFETY):
    """Poll ``check()`` until true (a safety-net timeout, not a measurement)."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not {what} after {timeout} s")
        time.sleep(0.3)


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    """Run folders under tmp_path/runs; every run started here is ended after the test."""
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    for info_file in (tmp_path / "runs").glob("*/attach.json"):
        pid = json.loads(info_file.read_text())["pid"]
        if alive(pid):  # a failed test's run: this test started it
            os.killpg(pid, signal.SIGKILL)


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def local_error(**values) -> str:
    """The error a local runner's controls raise for ``values``."""
    with pytest.raises(ValueError) as err:
        ESConfig.build(env="CartPole-v1").controls().set(**values)
    return str(err.value)


@pytest.mark.slow
def test_launch_attach_steer_from_two_kernels_and_stop(in_tmp, capsys):
    a = esnb.launch("es", name="run-a", origin="kernel-a", **RUN)
    assert a.process is not None and a.name == "run-a"
    folder = in_tmp / "runs" / "run-a"
    listed = esnb.runs()
    assert listed.name.tolist() == ["run-a"] and listed.pid.tolist() == [a.process.pid]
    assert main(["runs"]) == 0
    assert capsys.readouterr().out.startswith(f"run-a  ES  pid {a.process.pid}  since ")
    # only this user reads the run's credentials; the run folder (its history) keeps its mode
    assert stat.S_IMODE(folder.stat().st_mode) == 0o777 & ~current_umask()
    assert stat.S_IMODE((folder / "attach").stat().st_mode) == 0o700
    for f in ("attach.json", "attach/cert.pem", "attach/key.pem"):
        assert stat.S_IMODE((folder / f).stat().st_mode) == 0o600, f
    assert serving_info(folder)["address"].startswith("tls://127.0.0.1:")
    # the run's command line carries its plan file, no setting: the plan is in its folder
    assert a.process.args[-2:] == ["run-plan", "runs/run-a/plan.json"]
    planned = json.loads((folder / "plan.json").read_text())
    assert planned["options"]["serve"] and planned["settings"]["population"] == 8
    assert planned["budget"] == {"generations": 100_000}

    with pytest.raises(ValueError, match=rf"^runs/run-a belongs to a run that is running "
                                         rf"\(pid {a.process.pid}\): attach to it"):
        esnb.launch("es", name="run-a", **RUN)  # a second run into its folder: refused
    b = esnb.attach("run-a", origin="kernel-b")
    until("3 generations", lambda: b.iteration >= 3)
    # esnb runs says how far it is: the last progress line of its log (said at generation 1,
    # the next at 5% of its 100,000)
    assert esnb.runs().progress.tolist()[0].startswith("0% (1/100,000 generations), ret ")
    assert main(["runs"]) == 0
    assert "  runs/run-a  0% (1/100,000 generations), ret " in capsys.readouterr().out
    figure = b.plot()  # the run's own panels, drawn from the fetched history
    assert len(b.plot_panels) >= 2 and len(figure.children) == len(b.plot_panels)
    first = len(b.history)
    until("more rows", lambda: len(b.history) > first)
    rows = b.history  # read once: the run goes on between two reads
    assert rows.generation.tolist() == list(range(1, len(rows) + 1))

    # a bad value: the local runner's error, nothing changed
    before, version = a.controls.as_dict(), a.controls.version
    for bad in ({"sigma": -1}, {"sigmaa": 0.1}, {"noise_size": 10}, {"population": 7}):
        with pytest.raises(ValueError) as err:
            a.controls.set(**bad)
        assert str(err.value) == local_error(**bad)
    assert a.controls.as_dict() == before and a.controls.version == version

    assert a.controls.set(sigma=0.05) == version + 1
    assert b.controls["sigma"] == 0.05
    # kernel b steers through the notebook's panel: its widgets, the run's controls
    board = dashboard(b)
    panel = board.panel
    panel._refresh()
    assert panel.status.value.startswith("<b>running</b>")
    assert panel.fields["sigma"].value == 0.05  # kernel a's change, shown in b's panel
    panel.buttons["pause"].click()
    until("paused", lambda: b.state == "paused")
    held = b.iteration
    panel.fields["lr"].value = 0.02
    assert panel.message_text == "✓ lr = 0.02 from the next generation (after resume)"
    panel.buttons["step"].click()
    until("one step", lambda: b.iteration == held + 1)
    assert b.state == "paused"
    panel.buttons["resume"].click()
    until("both changes applied", lambda: len(a.changes) == 2)
    drawn = board.plot.wait_drawn(timeout=SAFETY).rows_drawn  # the live plot: the run's rows
    assert drawn >= held + 1
    until("the change marked", lambda: any("lr" in t for t in board.plot.marker_texts()))
    assert board.record.disabled and "attached" in board.record.tooltip
    board.close()
    for handle in (a, b):  # each kernel sees the other's change, with its origin
        seen = handle.changes
        assert seen[["name", "new", "origin"]].values.tolist() == [
            ["sigma", 0.05, "kernel-a"], ["lr", 0.02, "kernel-b"]]
    # the history row that used them says so
    used = int(a.changes.generation.iloc[-1])
    assert a.history.set_index("generation").controls_version[used] == version + 2

    # no credentials, or another run's: refused, one line
    address = serving_info(folder)["address"]
    from distributed import Client
    from distributed.security import Security

    clients = [c for c in gc.get_objects() if isinstance(c, Client)]  # held: no id reused
    for target, security in ((address, None), (address.replace("tls://", "tcp://"), None),
                             (address, Security.temporary())):
        with pytest.raises(ValueError, match="only the user who started it can attach"):
            connect(target, security, "run-a", timeout=5)
        # the Client that failed is gone already: left to a later garbage collection, its
        # __del__ takes dask's LoopRunner lock, which the next Client's start may hold: a
        # deadlock (a CI run waited 10 minutes there)
        assert {id(c) for c in gc.get_objects() if isinstance(c, Client)} == {
            id(c) for c in clients}

    b.detach()
    with pytest.raises(ValueError, match="detached"):
        b.controls.set(sigma=0.03)
    a.stop()
    a.wait(timeout=SAFETY)
    assert a.state == "ended" and a.process.returncode == 0
    assert not (folder / "attach.json").exists() and not (folder / "attach").exists()
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["final_eval_episodes"] == 1
    # its log says how far it went in lines (the first generation, then where it stopped)
    log = (folder / "run.log").read_text()
    said = [ln for ln in log.splitlines() if ln.startswith("esnb: run-a: ")]
    ended_at = int(summary["last"]["generation"])
    assert "\r" not in log and said[0].startswith("esnb: run-a: 0% (1/100,000 generations), "
                                                 "ret "), log[-3000:]
    assert said[-1].startswith(f"esnb: run-a: {ended_at / 100_000:.0%} ({ended_at:,}/100,000 "
                               f"generations), ret ")
    # between them, a line at each 5% it passed (none on a quick machine)
    assert [line.split(", ")[0] for line in said[1:-1]] == [
        f"esnb: run-a: {5 * k}% ({5_000 * k:,}/100,000 generations)"
        for k in range(1, (ended_at - 1) // 5_000 + 1)]
    # a panel left open on the ended run reads the values it ended with (no error)
    assert a.controls.as_dict() == summary["controls"] and a.controls["lr"] == 0.02
    ended = dashboard(a)
    ended.panel._refresh()
    assert ended.panel.fields["sigma"].value == 0.05
    ended.close()
    changes = pd.read_csv(folder / "changes.csv")
    assert changes.origin.tolist() == ["kernel-a", "kernel-b"]
    assert len(a.history) == len(pd.read_csv(folder / "history.csv"))
    with pytest.raises(ValueError, match=r"'run-a' has ended \(its checkpoint: "
                                         r"runs/run-a/checkpoint.npz\)"):
        esnb.attach("run-a")
    with pytest.raises(ValueError, match=r"no run 'run-b' in runs/; runs to attach there: "
                                         r"none$"):
        esnb.attach("run-b")
    assert esnb.runs().empty
    assert main(["runs"]) == 0
    assert capsys.readouterr().out == ("no run to attach in runs/ (esnb train <algorithm> "
                                       "--serve starts one)\n")


KERNEL = """
import esnb
run = esnb.launch("es", name="orphan", **{run})
print(run.process.pid, flush=True)
import time
time.sleep(600)  # a kernel that lives on until killed
"""


@pytest.mark.slow
def test_killing_the_launching_kernel_leaves_the_run_going(in_tmp):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    kernel = subprocess.Popen([sys.executable, "-c", KERNEL.format(run=RUN)], cwd=in_tmp,
                              env=env, stdout=subprocess.PIPE, text=True)
    try:
        pid = int(kernel.stdout.readline())
    finally:
        kernel.kill()  # SIGKILL: nothing of the kernel runs after it
        kernel.wait()
    assert kernel.returncode == -signal.SIGKILL

    run = esnb.attach("orphan", origin="new kernel")
    assert run.pid == pid and alive(pid)
    now = run.iteration
    until("the run going on", lambda: run.iteration >= now + 2)
    run.controls.set(sigma=0.04)
    until("the change applied", lambda: len(run.changes) == 1)
    assert run.changes[["name", "new", "origin"]].values.tolist() == [
        ["sigma", 0.04, "new kernel"]]
    run.stop()
    run.wait(timeout=SAFETY)
    folder = in_tmp / "runs" / "orphan"
    assert (folder / "checkpoint.npz").exists() and (folder / "summary.json").exists()
    assert pd.read_csv(folder / "changes.csv").origin.tolist() == ["new kernel"]


@pytest.mark.slow
def test_a_killed_run_is_said_ended_with_its_checkpoint(in_tmp):
    run = esnb.launch("es", name="killed", checkpoint_every=0, **RUN)
    until("a checkpoint written", lambda: (in_tmp / "runs/killed/checkpoint.npz").exists())
    run.detach()
    os.killpg(run.pid, signal.SIGKILL)  # the run and its workers, where they stood
    run.process.wait()
    assert (in_tmp / "runs/killed/attach.json").exists()  # left behind: its process is gone
    assert esnb.runs().empty
    with pytest.raises(ValueError, match=r"^run 'killed' has ended \(its checkpoint: "
                                         r"runs/killed/checkpoint.npz\); nothing to attach"):
        esnb.attach("killed")
    assert run.state == "ended"


def test_launch_checks_everything_before_a_process_starts(in_tmp):
    with pytest.raises(ValueError, match=r"^sigma must be a number in \(0, 10\], got -1"):
        esnb.launch("es", env="CartPole-v1", sigma=-1, generations=5)
    with pytest.raises(ValueError, match="unknown algorithm 'ess'; known: aesrl, apex"):
        esnb.launch("ess", generations=5)
    # a scheduler the run does not own: one line, why
    for cluster in (None, "slurm"):
        with pytest.raises(ValueError, match=r"^--serve refuses a scheduler the run does not "
                                             r"own \(--address tcp://127.0.0.1:8786\): it "
                                             r"would add its handler .* cannot give it the "
                                             r"run's TLS; serve the run's own cluster") as err:
            esnb.launch("es", env="CartPole-v1", address="tcp://127.0.0.1:8786",
                        cluster=cluster, generations=5)
        assert "\n" not in str(err.value)
    for cluster in ("kubernetes", "address", 1):
        with pytest.raises(ValueError, match=r"^cluster must be 'local' or a batch system the "
                                             r"run starts and owns \(slurm, pbs, sge, lsf\), "
                                             r"got "):
            esnb.launch("es", env="CartPole-v1", cluster=cluster, generations=5)
    with pytest.raises(ValueError, match="--generations"):
        esnb.launch("es", env="CartPole-v1", generations=-5)
    with pytest.raises(ValueError, match="settings must be plain values"):
        esnb.launch("es", env="CartPole-v1", sigma=object(), generations=5)
    # a tracker's destination, in the kernel, not in the run's log (issue 36)
    with pytest.raises(ValueError, match=r"^--mlflow http://127.0.0.1:1: nothing answers at "
                                         r"127.0.0.1:1 \(connection refused\)$"):
        esnb.launch("es", env="CartPole-v1", mlflow="http://127.0.0.1:1", generations=5)
    assert not (in_tmp / "runs").exists()  # nothing made, nothing started
    assert esnb.runs().empty


def test_a_run_that_ends_before_serving_says_why(in_tmp, monkeypatch):
    # read by the run's process only (this one loaded dask's config already): it exits at once
    monkeypatch.setenv("DASK_ESNB__CLUSTER__TYPE", "nowhere")
    said = (r"^the es run 'early' ended \(exit 2\) before it could be attached: "
            r"esnb: error: esnb.cluster.type .* got 'nowhere' \(log: runs/early/run.log\)$")
    with pytest.raises(ValueError, match=said):
        esnb.launch("es", env="CartPole-v1", name="early", generations=5)
    assert (in_tmp / "runs" / "early" / "run.log").exists()


def test_serve_refuses_a_run_without_its_own_cluster(capsys, in_tmp):
    import dask.config

    assert main(["train", "es", "--env", "CartPole-v1", "--serve", "--workers", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("esnb: error: --serve needs a cluster of the run's own") and \
        "\n" not in err
    # a scheduler it does not own, named by --address or by dask config: one line, why
    for argv, config, where in (
            (["--address", "tcp://127.0.0.1:8786"], {}, "--address tcp://127.0.0.1:8786"),
            ([], {"esnb.cluster.type": "address"}, "esnb.cluster.type 'address'")):
        with dask.config.set(config):
            assert main(["train", "es", "--env", "CartPole-v1", "--serve", *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"esnb: error: --serve refuses a scheduler the run does not own "
                              f"({where}): it would add its handler to that scheduler and hand "
                              f"attached kernels credentials for it") and "\n" not in err
    assert not (in_tmp / "runs").exists()  # refused before any folder or cluster
    for text in ("[1]", "{sigma: 1}"):
        assert main(["train", "es", "--env", "CartPole-v1", "--workers", "0",
                     "--settings", text]) == 2
        assert "esnb: error: --settings must be a JSON object" in capsys.readouterr().err


@pytest.mark.parametrize("args, kwargs, error, message", [
    ((None,), {}, TypeError, "esnb.attach: name_or_folder must be a run's name or its folder "
                             "(a str or path), got None"),
    ((42,), {}, TypeError, "esnb.attach: name_or_folder must be a run's name or its folder "
                           "(a str or path), got 42"),
    (("",), {}, ValueError, "esnb.attach: name_or_folder must be a run's name or its folder, "
                            "got ''"),
    (("run-a",), {"folder": None}, TypeError, "esnb.attach: folder must be the folder of run "
                                              "folders (a str or path), got None"),
    (("run-a",), {"timeout": -1}, ValueError, "esnb.attach: timeout must be a finite number of "
                                              "seconds > 0, got -1"),
    (("run-a",), {"timeout": float("nan")}, ValueError, "esnb.attach: timeout must be a finite "
                                                        "number of seconds > 0, got nan"),
    (("run-a",), {"timeout": "5"}, ValueError, "esnb.attach: timeout must be a finite number "
                                               "of seconds > 0, got '5'"),
    (("run-a",), {"origin": 7}, TypeError, "esnb.attach: origin must be a str or None, got 7"),
])
def test_attach_names_the_argument_that_is_wrong(in_tmp, args, kwargs, error, message):
    """esnb.attach's arguments, each refused in one line naming it, before any folder is read
    or any connection made (issue 36)."""
    with pytest.raises(error) as err:
        esnb.attach(*args, **kwargs)
    assert str(err.value) == message


@pytest.mark.parametrize("values, message", [
    ({"sigma": 10**400}, "sigma must be a number in (0, 10], got an integer of about 401 "
                         "digits"),
    ({"population": -10**30}, "population must be an integer in [2, 100,000], got "
                              "-1000000000000000000000000000000"),
    ({"sigmaa": 10**400}, "sigmaa: an integer of about 401 digits cannot be sent to the run"),
    ({"lr": object()}, "lr must be a number in (0, 1], got <object object at"),
])
def test_an_attached_set_names_the_value_that_cannot_travel(values, message):
    """A value set through an attached handle that msgpack cannot carry to the run (an integer
    beyond 64 bits, an object): refused here in the line the run's own check gives, naming the
    control, and nothing is sent."""
    from esnb.remote.attach import AttachedControls
    from esnb.remote.serve import _controls_schema

    class Run:  # the handle's transport: nothing may reach it
        sent = []

        def _call(self, action, **kwargs):
            self.sent.append((action, kwargs))
            return {"version": 1}

    schema = _controls_schema(ESConfig.build(env="CartPole-v1").controls())  # as served
    run = Run()
    controls = AttachedControls(run, schema, {})
    with pytest.raises(ValueError) as err:
        controls.set(**values)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)
    assert run.sent == []


def test_a_change_records_who_made_it():
    c = Controls(ESConfig.build(env="CartPole-v1").controls().schema)
    c.set(sigma=0.05)
    c.apply({"lr": 0.02}, origin="kernel-b")
    assert [(ch.name, ch.origin) for ch in c.changes] == [("sigma", "local"), ("lr", "kernel-b")]


@pytest.mark.slow
def test_a_kernel_reading_as_its_run_stops_serving_turns_to_the_run_folder(tmp_path,
                                                                           monkeypatch):
    """A run stops serving between a kernel's look at ``attach.json`` and its next op (a
    dashboard's refresh met it in tutorial 04): every read of the handle turns to the run
    folder, whether the run's handler answers "ended" or has gone (dask then answers None)."""
    from esnb.record import write_run_folder
    from esnb.remote import attach as attached
    from esnb.remote.serve import HANDLER, credentials, serving
    from esnb.runners.es import ES
    from esnb.runners.executor import session

    folder = tmp_path / "run"
    folder.mkdir()
    security = credentials()
    config = ESConfig.build(**{k: v for k, v in RUN.items()
                               if k not in ("workers", "final_eval", "generations")})
    with session(1, None, security=security, host="127.0.0.1") as executor:
        runner = ES(client=executor, config=config, name="run")
        with serving(runner, executor, folder, security) as served:
            one, two = (esnb.attach(folder, origin=o) for o in ("one", "two"))
            runner.controls.set(sigma=0.05)
            runner.start(generations=2)
            runner.wait()
            until("2 generations seen", lambda: one.iteration == 2)  # states age 0.2 s
            assert len(one.records) == 2 and len(two.changes) == 1
            # the window: both kernels read attach.json just before the run stopped serving
            info = serving_info(folder)
            monkeypatch.setattr(attached, "serving_info", lambda _: info)
            write_run_folder(runner, folder)  # as the run does before it stops serving
            served.close()
            for handle in (one, two):
                if handle is two:  # a handler gone: dask's reply is None
                    served.scheduler.handlers.pop(HANDLER)
                    handle._state = (-1e9, {})
                board = dashboard(handle)
                board.panel._refresh()  # no error: the panel shows the ended run
                board.close()
                assert handle.state == "ended" and not handle.running and handle.error is None
                rows = pd.DataFrame(handle.records)  # the run folder's, now
                assert rows.generation.tolist() == [1, 2]
                assert rows.return_mean.tolist() == runner.history.return_mean.tolist()
                assert handle.iteration == 2 and handle.wall_time == 0.0
                assert handle.changes[["name", "new"]].values.tolist() == [["sigma", 0.05]]
                assert handle.controls.as_dict() == runner.controls.as_dict()
                assert handle.controls["sigma"] == 0.05  # from its summary.json
                with pytest.raises(ValueError, match=r"^run 'run' has ended \(its checkpoint: "):
                    handle.stop()
