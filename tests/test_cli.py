"""The ``esnb`` command, run as a real subprocess."""

import json
import subprocess
import sys

import pandas as pd
import pytest


def esnb(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "esnb.cli", *args], capture_output=True,
                          text=True, timeout=timeout)


def test_train_es_writes_a_run_folder_and_resumes(tmp_path):
    out = tmp_path / "run"
    p = esnb("train", "es", "--env", "CartPole-v1", "--generations", "3", "--workers", "0",
             "--population", "10", "--noise-size", "1000000", "--final-eval", "3",
             "--out", str(out), "--no-progress")
    assert p.returncode == 0, p.stderr
    for name in ("history.csv", "changes.csv", "summary.json", "plot.html", "checkpoint.npz"):
        assert (out / name).exists(), name
    h = pd.read_csv(out / "history.csv")
    assert h.generation.tolist() == [1, 2, 3]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["algorithm"] == "ES" and summary["final_eval_episodes"] == 3
    assert "bokeh" in (out / "plot.html").read_text().lower()

    out2 = tmp_path / "run2"
    p = esnb("train", "es", "--env", "CartPole-v1", "--generations", "2", "--workers", "0",
             "--resume", str(out / "checkpoint.npz"), "--out", str(out2), "--no-progress",
             "--final-eval", "0")
    assert p.returncode == 0, p.stderr
    assert pd.read_csv(out2 / "history.csv").generation.tolist() == [1, 2, 3, 4, 5]


def test_train_on_a_cluster_with_progress(tmp_path):
    p = esnb("train", "es", "--env", "CartPole-v1", "--generations", "2", "--workers", "2",
             "--population", "10", "--noise-size", "1000000", "--out", str(tmp_path / "r"))
    assert p.returncode == 0, p.stderr
    assert "generations" in p.stderr  # the tqdm bar
    assert pd.read_csv(tmp_path / "r" / "history.csv").workers.tolist() == [2, 2]


@pytest.mark.parametrize("args, message", [
    (["train", "es", "--env", "CartPole-v9", "--workers", "0"], "CartPole-v1"),
    (["train", "es", "--env", "CartPole-v1", "--workers", "0", "--sigma", "-1"], "sigma must be"),
    (["train", "es", "--env", "CartPole-v1", "--workers", "0", "--resume", "/nonexistent.npz"],
     "no checkpoint"),
])
def test_errors_are_one_clear_line(args, message):
    p = esnb(*args)
    assert p.returncode == 2
    assert message in p.stderr and "Traceback" not in p.stderr


@pytest.mark.slow
def test_demo_smoke(tmp_path):
    """The demo's code path on a tiny budget (the full demo is checked by hand: README)."""
    p = esnb("demo", "--steps", "40000", "--out", str(tmp_path / "demo"), "--no-progress")
    assert p.returncode == 0, p.stderr
    summary = json.loads((tmp_path / "demo" / "summary.json").read_text())
    assert summary["config"]["env"] == "HalfCheetah-v5"
    assert summary["last"]["env_steps"] == 40000 and summary["last"]["workers"] == 2
