"""Runs that survive: periodic checkpoints, SIGKILL / SIGINT / SIGTERM of a real CLI process and
resumes, and every bad input answered with one clear line (issue 14).

Processes are waited on by what they wrote (a checkpoint's iteration), never by sleeping a
fixed time; the timeouts are only there so a hang fails instead of blocking the suite.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from esnb import ES
from esnb.record import CheckpointError, load_checkpoint, save_checkpoint

# Hopper with a short cap: a generation takes a noticeable fraction of a second inline, so a
# run is still going when it is interrupted
RUN = ["train", "es", "--env", "Hopper-v5", "--max-episode-steps", "100", "--population", "16",
       "--noise-size", "1000000", "--seed", "4", "--workers", "0", "--final-eval", "0",
       "--no-progress", "--checkpoint-every", "0"]


def esnb(*args, env=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "esnb.cli", *args], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


def start(*args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "esnb.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def worker_processes(pid: int) -> list:
    """The LocalCluster worker processes under the driver ``pid`` (its nannies live in the
    driver): spawned ones, and those forked from esnb's forkserver (not the server itself)."""
    import psutil

    found = []
    for p in psutil.Process(pid).children(recursive=True):
        try:
            parent = p.parent()
            if "spawn_main" in " ".join(p.cmdline()) or (
                    parent is not None and parent.pid != pid
                    and "multiprocessing.forkserver" in " ".join(parent.cmdline())):
                found.append(p)
        except psutil.NoSuchProcess:
            continue
    return found


def saved_iteration(path: Path) -> int:
    """The generation a run's checkpoint holds (-1 while there is none)."""
    try:
        return int(load_checkpoint(path)[0]["iteration"])
    except (FileNotFoundError, CheckpointError):
        return -1


def wait_for_generation(proc: subprocess.Popen, checkpoint: Path, generation: int,
                        timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while saved_iteration(checkpoint) < generation:
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "the run made no progress"
        time.sleep(0.05)


def theta(folder: Path) -> np.ndarray:
    return load_checkpoint(folder / "checkpoint.npz")[1]["theta"]


@pytest.mark.slow
def test_a_run_killed_with_sigkill_resumes_bitwise(tmp_path):
    """SIGKILL of the driver mid-run, then --resume of its folder: the generations after the
    last checkpoint are recomputed identically and the run ends where an uninterrupted one
    does, bit for bit."""
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    p = esnb(*RUN, "--generations", "10", "--out", str(whole))
    assert p.returncode == 0, p.stderr

    proc = start(*RUN, "--generations", "10", "--out", str(killed))
    wait_for_generation(proc, killed / "checkpoint.npz", 3)
    proc.kill()
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    assert 3 <= saved_iteration(killed / "checkpoint.npz") < 10

    p = esnb("train", "es", "--resume", str(killed), "--no-progress", "--final-eval", "0")
    assert p.returncode == 0, p.stderr  # no budget given: it goes on to the run's own 10
    assert np.array_equal(theta(killed), theta(whole))
    a, b = (pd.read_csv(f / "history.csv") for f in (whole, killed))
    assert b.generation.tolist() == list(range(1, 11))
    assert np.array_equal(a.return_mean.to_numpy(), b.return_mean.to_numpy())


@pytest.mark.slow
@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupts_leave_a_checkpoint_and_one_line(tmp_path, sig, code):
    out = tmp_path / "run"
    proc = start(*RUN, "--generations", "100000", "--out", str(out))
    wait_for_generation(proc, out / "checkpoint.npz", 2)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if "resume with:" in ln]
    assert len(lines) == 1 and f"--resume {out}" in lines[0], err
    stopped = saved_iteration(out / "checkpoint.npz")
    assert stopped >= 2 and len(pd.read_csv(out / "history.csv")) == stopped
    # the printed command resumes it (here with a total budget a few generations on)
    p = esnb("train", "es", "--resume", str(out), "--generations", str(stopped + 2),
             "--no-progress", "--final-eval", "0")
    assert p.returncode == 0, p.stderr
    assert pd.read_csv(out / "history.csv").generation.tolist() == list(range(1, stopped + 3))


def test_a_second_ctrl_c_exits_at_once(tmp_path):
    out = tmp_path / "run"
    proc = start(*RUN, "--generations", "100000", "--out", str(out))
    wait_for_generation(proc, out / "checkpoint.npz", 1)
    proc.send_signal(signal.SIGINT)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130
    assert "Traceback" not in err


@pytest.mark.slow
def test_resume_applies_live_settings_and_refuses_fixed_ones(tmp_path):
    out = tmp_path / "run"
    assert esnb(*RUN, "--generations", "2", "--out", str(out)).returncode == 0
    p = esnb("train", "es", "--resume", str(out), "--sigma", "0.05", "--generations", "3",
             "--no-progress", "--final-eval", "0")
    assert p.returncode == 0, p.stderr
    changes = pd.read_csv(out / "changes.csv")
    assert changes[["generation", "name", "new"]].values.tolist() == [[3, "sigma", 0.05]]
    assert pd.read_csv(out / "history.csv").sigma.tolist() == [0.02, 0.02, 0.05]
    p = esnb("train", "es", "--resume", str(out), "--env", "Pendulum-v1", "--hidden", "32",
             "--generations", "4")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "fixed settings" in p.stderr and "env (saved 'Hopper-v5', given 'Pendulum-v1')" \
        in p.stderr and "hidden" in p.stderr


@pytest.mark.parametrize("args, env, message", [
    (["--steps", "nan"], None, "argument --steps: must be a finite number >= 0"),
    (["--generations", "inf"], None, "argument --generations: must be a finite number >= 0"),
    (["--workers", "-1"], None, "argument --workers: must be an integer >= 0"),
    (["--workers", "10000"], None, "a LocalCluster of 10000 worker processes"),
    (["--final-eval", "-1"], None, "argument --final-eval: must be an integer >= 0"),
    (["--name", ""], None, "--name must be a plain name"),
    (["--name", "../x"], None, "--name must be a plain name"),
    (["--out", "/proc/esnb-cannot-write-here"], None, "cannot write into /proc"),
    (["--max-episode-steps", "0"], None, "max_episode_steps must be an integer in [1, inf)"),
    (["--checkpoint-every", "-1"], None, "argument --checkpoint-every: must be a finite number"),
    (["--resume", "/nonexistent/run"], None, "no checkpoint at /nonexistent/run"),
    # a refused port is said at once, not after dask's 30 s of retries
    (["--address", "tcp://127.0.0.1:9"], None,
     "cannot reach a Dask scheduler at 'tcp://127.0.0.1:9': connection refused"),
    (["--address", "127.0.0.1:notaport"], None,
     "--address '127.0.0.1:notaport' is no scheduler address"),
    ([], {"DASK_ESNB__CLUSTER__DASHBOARD_ADDRESS": "garbage:xyz"},
     "esnb.cluster.dashboard-address (dask config"),
    # no setting names code to import (esnb.plot.drawer went, issue 21); typos are answered
    ([], {"DASK_ESNB__PLOT__DRAWER": "os:system"}, "esnb.plot.drawer (dask config"),
    ([], {"DASK_ESNB__CLUSTER__N_WORKER": "2"}, "did you mean esnb.cluster.n-workers?"),
    # keyword arguments the env takes but cannot use: its first step, said in one line
    (["--env", "Pendulum-v1", "--env-kwargs", '{"g": "abc"}'], None,
     "'Pendulum-v1' with env_kwargs {'g': 'abc'} fails on its first step: TypeError"),
    ([], {"DASK_ESNB__NOISE__SIZE": "0"}, "esnb.noise.size"),
    ([], {"DASK_ESNB__SERVE__DASHBOARD": "maybe"},
     "esnb.serve.dashboard (dask config: esnb.yaml, ~/.config/dask/ or DASK_ESNB__...) must be "
     "true or false, got 'maybe'"),
    ([], {"DASK_ESNB__MUJOCO__TIMER": "maybe"},
     "esnb.mujoco.timer (dask config: esnb.yaml, ~/.config/dask/ or DASK_ESNB__...) must be "
     "true or false, got 'maybe'"),
    (["--tasks-per-worker", "0"], None,
     "tasks_per_worker must be an integer in [1, 100,000], got 0"),
    (["--env-kwargs", '{"bogus": 1}'], None, "env_kwargs {'bogus': 1} do not fit"),
    (["--hidden", "ab"], None, "argument --hidden: must be a sequence of integers"),
    # trackers' destinations, before the run folder or any cluster (issue 36): not MLflow's
    # 4 minutes of retries, not a traceback from deep inside the tracker
    (["--mlflow", "http://127.0.0.1:1"], None,
     "--mlflow http://127.0.0.1:1: nothing answers at 127.0.0.1:1 (connection refused)"),
    (["--mlflow", "{tmp}/f/mlruns"], None, "--mlflow {tmp}/f/mlruns: {tmp}/f is a file, not a "
                                           "folder"),
    (["--tensorboard", "{tmp}/f/tb"], None, "--tensorboard {tmp}/f/tb: {tmp}/f is a file, not a "
                                            "folder"),
    (["--mlflow", "bogus://x"], None, "--mlflow bogus://x: MLflow stores no runs at a bogus:// "
                                      "URI"),
    # a record of control changes that is none: the flag and the file named
    (["--controls", "{tmp}/empty.csv"], None, "--controls {tmp}/empty.csv is empty"),
    (["--controls", "{tmp}/garbage.csv"], None, "--controls {tmp}/garbage.csv is no CSV text"),
    (["--controls", "{tmp}/noname.csv"], None,
     "--controls {tmp}/noname.csv lacks the column(s) name (its columns: 'generation', 'new')"),
])
def test_bad_inputs_are_one_clear_line(tmp_path, args, env, message):
    (tmp_path / "f").write_text("a file, not a folder")
    (tmp_path / "empty.csv").write_bytes(b"")
    (tmp_path / "garbage.csv").write_bytes(bytes(range(128, 256)) * 4)
    (tmp_path / "noname.csv").write_text("generation,new\n2,0.1\n")
    base = ["train", "es", "--env", "CartPole-v1", "--generations", "1", "--workers", "0",
            "--out", str(tmp_path / "run"), "--no-progress"]
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    p = esnb(*base, *args, env=env, timeout=120)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert message.replace("{tmp}", str(tmp_path)) in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args, message", [
    (["demo", "--steps", "-1"], "argument --steps: must be a finite number > 0"),
    (["bench", "es-scaling", "--generations", "-1"],
     "argument --generations: must be an integer >= 1"),
    (["bench", "replay", "--seconds", "nan"], "argument --seconds: must be a finite number > 0"),
    (["bench", "es-scaling", "--workers", "10000"], "a LocalCluster of 10000 worker processes"),
])
def test_demo_and_bench_flags_are_checked_too(args, message):
    p = esnb(*args, timeout=120)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert message in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_a_resumed_run_whose_env_kwargs_fail_here_is_one_line(tmp_path):
    """A checkpoint made where its env kwargs worked (an extra installed) resumed on a machine
    where they do not: refused before a cluster starts. (``rgb_array``: with pygame installed,
    esnb[video]'s, a ``human`` window would make SDL print its own line about the display.)"""
    out = tmp_path / "run"
    p = esnb("train", "es", "--env", "Pendulum-v1", "--generations", "1", "--workers", "0",
             "--population", "4", "--noise-size", "200000", "--final-eval", "0",
             "--out", str(out), "--no-progress")
    assert p.returncode == 0, p.stderr
    meta, arrays = load_checkpoint(out / "checkpoint.npz")
    meta["config"]["env_kwargs"] = {"render_mode": "rgb_array", "g": "abc"}
    save_checkpoint(out / "checkpoint.npz", "ES", meta, arrays)
    p = esnb("train", "es", "--resume", str(out), "--generations", "2", "--no-progress")
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert "fails on its first step" in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_an_env_typo_is_refused_before_a_cluster_starts(tmp_path):
    p = esnb("-v", "train", "es", "--env", "HalfCheetah-v9", "--workers", "2",
             "--out", str(tmp_path / "run"))
    assert p.returncode == 2 and "HalfCheetah-v5" in p.stderr
    assert "Scheduler" not in p.stderr and "Traceback" not in p.stderr  # no cluster was made
    assert not (tmp_path / "run").exists()


# -- the same rules in Python --------------------------------------------------------------
def test_controls_say_which_settings_are_fixed():
    r = ES("CartPole-v1", population=4, noise_size=200_000, client=False)
    with pytest.raises(ValueError, match="hidden is fixed for this run"):
        r.controls.set(hidden=(8,))
    with pytest.raises(ValueError, match=r"unknown control\(s\) 'sigmaa' \(did you mean sigma\?\)"):
        r.controls.set(sigmaa=0.1)
    assert r.controls.version == 0


def test_budgets_and_clusters_refuse_bad_numbers():
    from esnb import make_client

    r = ES("CartPole-v1", population=4, noise_size=200_000, client=False)
    for bad in (float("nan"), float("inf"), -1, True, "3"):
        with pytest.raises(ValueError, match="budget generations must be a finite number"):
            r.start(generations=bad)
    assert r.state == "idle"
    for bad in (0, -2, True, 1.5):
        with pytest.raises(ValueError, match="n_workers must be an integer >= 1"):
            make_client(bad)
    with pytest.raises(ValueError, match="a LocalCluster of 10000 worker processes"):
        make_client(10000)
    with pytest.raises(ValueError, match="dashboard_address must be 'host:port'"):
        make_client(2, dashboard_address="garbage:xyz")


def test_stop_in_a_notebook_leaves_a_checkpoint(tmp_path):
    r = ES("CartPole-v1", population=4, noise_size=200_000, client=False, eval_interval=0)
    r.keep_checkpoints(tmp_path / "nb" / "checkpoint.npz", every=3600)
    r.start()
    while r.iteration < 2:
        time.sleep(0.01)
    r.stop()
    r.wait()
    back = ES.load(tmp_path / "nb" / "checkpoint.npz")
    assert back.iteration == r.iteration and np.array_equal(back.theta, r.theta)


@pytest.mark.parametrize("damage, message", [
    (lambda m, a: a.__setitem__("theta", np.full_like(a["theta"], np.nan)), "'theta' holds NaN"),
    (lambda m, a: a.pop("adam_exp_avg"), "misses the arrays adam_exp_avg"),
    (lambda m, a: m.__setitem__("iteration", -3), "iteration must be a finite number >= 0"),
    (lambda m, a: m["config"].__setitem__("env_kwargs", {"bogus": 1}), "do not fit"),
    (lambda m, a: m["config"].__setitem__("sigma", -1.0), "sigma must be"),
    (lambda m, a: m.__setitem__("rng", "garbage"), "rng is not the state of a PCG64 generator"),
    (lambda m, a: m.__setitem__("eval_rng", {"state": 1}), "eval_rng is not the state of a"),
])
def test_checkpoints_are_checked_beyond_their_digest(tmp_path, damage, message):
    r = ES("CartPole-v1", population=4, noise_size=200_000, client=False, eval_interval=0)
    r.step(2)
    path = r.save(tmp_path / "ck.npz")
    meta, arrays = load_checkpoint(path)
    damage(meta, arrays)
    save_checkpoint(path, "ES", meta, arrays)  # a consistent digest: only the content is bad
    with pytest.raises(CheckpointError, match=message):
        ES.load(path)
