"""Forking a run (``runner.fork(at=, **changes)``, ``esnb train --fork RUN --at N``): a new run
from the kept checkpoint nearest before an iteration, its controls changed, its parent
recorded; the same numbers as steering the original run that way."""

import json

import numpy as np
import pytest

from esnb.cli import main
from esnb.runners.es import ES
from esnb.runners.fork import kept
from esnb.runners.playback import load_run

CFG = dict(env="CartPole-v1", population=8, sigma=0.05, lr=0.03, seed=5, eval_interval=0,
           noise_size=200_000, tasks_per_worker=100, max_episode_steps=100)


def steered_at(iteration: int, generations: int, **changes) -> ES:
    """The original run steered by hand: ``changes`` made after ``iteration``."""
    r = ES(**CFG, client=False)
    r.step(iteration)
    r.controls.set(**changes)
    return r.step(generations - iteration)


def test_a_fork_starts_from_the_kept_checkpoint_before_it_and_records_its_parent(tmp_path):
    r = ES(**CFG, client=False)
    r.keep_checkpoints(tmp_path / "checkpoint.npz", every=1e9, keep=2)
    r.step(6)
    assert list(kept(tmp_path)) == [2, 4, 6]
    f = r.fork(at=5, sigma=0.1, name="branch")
    assert f.iteration == 4 and f.name == "branch" and f.controls["sigma"] == 0.1
    assert f.parent["iteration"] == 4 and f.parent["changes"] == {"sigma": 0.1}
    assert f.parent["name"] == r.name and f.parent["checkpoint"].endswith("generation-000004.npz")
    f.step(2)
    assert np.array_equal(f.theta, steered_at(4, 6, sigma=0.1).theta)
    assert f.changes.iloc[-1][["generation", "name", "new"]].tolist() == [5, "sigma", 0.1]
    f.save(tmp_path / "fork.npz")
    assert ES.load(tmp_path / "fork.npz", client=False).parent == f.parent


def test_bad_forks_get_one_line_and_start_nothing(tmp_path):
    r = ES(**CFG, client=False)
    with pytest.raises(ValueError, match="keeps no checkpoints"):
        r.fork(at=1)
    r.keep_checkpoints(tmp_path / "checkpoint.npz", every=1e9, keep=3)
    r.step(3)
    with pytest.raises(ValueError, match="no checkpoint at or before iteration 2: it kept 3"):
        r.fork(at=2)
    with pytest.raises(ValueError, match="live controls only; not: hidden"):
        r.fork(at=3, hidden=(8,))
    with pytest.raises(ValueError, match="sigma must be"):
        r.fork(at=3, sigma=-1.0)
    with pytest.raises(ValueError, match="at must be an iteration >= 1"):
        r.fork(at=0)


def test_esnb_train_fork_branches_a_run_folder(tmp_path, capsys):
    flags = ["train", "es", "--workers", "0", "--no-progress", "--final-eval", "0",
             "--checkpoint-every", "0"]
    flags += [f"--{k.replace('_', '-')}={v}" for k, v in CFG.items()]
    parent = tmp_path / "parent"
    assert main([*flags, "--generations", "6", "--keep-every", "2", "--out", str(parent)]) == 0
    child = tmp_path / "child"
    assert main([*flags, "--fork", str(parent), "--at", "5", "--sigma", "0.1",
                 "--generations", "6", "--out", str(child)]) == 0
    summary = json.loads((child / "summary.json").read_text())
    assert summary["parent"]["iteration"] == 4 and summary["parent"]["changes"] == {"sigma": 0.1}
    assert np.array_equal(load_run(child).theta, steered_at(4, 6, sigma=0.1).theta)
    assert main([*flags, "--at", "3", "--out", str(tmp_path / "x")]) == 2
    assert "--at needs --fork RUN" in capsys.readouterr().err
