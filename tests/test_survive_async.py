"""Runs that survive, for the asynchronous algorithms and EORL (issue 14): a real ``esnb train``
process is SIGKILLed once its checkpoint holds a few iterations, resumed from its run folder,
and must end with its history continuous, its replay restored to exactly what the checkpoint
recorded, and its total budget reached.

Processes are waited on by what they wrote (a checkpoint's iteration), never by sleeping a
fixed time; timeouts only turn a hang into a failure. Each run starts its own process group, so
a SIGKILL takes the driver and its LocalCluster's workers at once (a node that dies).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from esnb.record import CheckpointError, load_checkpoint

pytestmark = pytest.mark.slow  # every test here starts a cluster or a CLI run

QUIET = ["--final-eval", "0", "--no-progress"]
AESRL = ["train", "aesrl", "--env", "InvertedPendulum-v5", "--actor-hidden", "16", "16",
         "--critic-hidden", "16", "16", "--rl-start-step", "150", "--critic-chunk", "50",
         "--batch-size", "16", "--max-episode-steps", "40", "--eval-episodes", "2",
         "--seed", "3"]
CEMRL = ["train", "cemrl", "--env", "InvertedPendulum-v5", "--actor-hidden", "16", "16",
         "--critic-hidden", "16", "16", "--pop-size", "4", "--rl-start-step", "40",
         "--batch-size", "16", "--max-episode-steps", "40", "--eval-episodes", "2",
         "--seed", "3"]
APEX = ["train", "apex", "--env", "CartPole-v1", "--num-actors", "2", "--min-size", "200",
        "--learner-chunk", "4", "--batch-size", "32", "--capacity", "2000",
        "--eval-interval", "0", "--seed", "3"]
IMPALA = ["train", "impala", "--env", "CartPole-v1", "--batch-size", "4",
          "--unroll-length", "10", "--envs-per-actor", "2", "--hidden", "16", "--seed", "3"]
EORL = ["train", "eorl", "--env", "bitflip", "--size", "5", "--subgoal", "1",
        "--variant", "EORL-ACTV", "--seed", "3"]


def start(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "esnb.cli", "-v", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def saved(path: Path) -> dict | None:
    """The meta of a run's checkpoint (None while there is none)."""
    try:
        return load_checkpoint(path)[0]
    except (FileNotFoundError, CheckpointError):
        return None


def kill_when_saved(proc: subprocess.Popen, checkpoint: Path, iterations: int,
                    timeout: float = 600, also=lambda: True) -> dict:
    """SIGKILL the run's process group once its checkpoint holds ``iterations`` (and
    ``also()`` holds); the meta of the checkpoint it left."""
    deadline = time.monotonic() + timeout
    while (saved(checkpoint) or {}).get("iteration", -1) < iterations or not also():
        if proc.poll() is not None:
            raise AssertionError(f"the run ended early:\n{proc.communicate()[1][-3000:]}")
        assert time.monotonic() < deadline, "the run made no progress"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    meta = saved(checkpoint)
    assert meta is not None
    return meta


def resume(out: Path, command: list[str], *extra: str, timeout: float = 900):
    p = subprocess.run([sys.executable, "-m", "esnb.cli", "-v", *command[:2], "--resume",
                        str(out), *QUIET, *extra], capture_output=True, text=True,
                       timeout=timeout)
    assert p.returncode == 0, p.stderr[-5000:]
    return p


def past(meta: dict, column: str, more: int) -> int:
    """A total budget ``more`` past what the checkpoint held in ``column``: the resumed run
    goes on a few iterations, not to the first run's total (its budget was only there to keep
    it going until it was killed)."""
    return int(pd.DataFrame(meta["history"])[column].iloc[-1]) + more


def check_resumed(out: Path, meta: dict, column: str, stderr: str) -> pd.DataFrame:
    """History 1..N without a gap or a repeat, its first rows those the checkpoint held, and
    the replay (if the run has one) restored with exactly the recorded size and inserted."""
    held = int(meta["iteration"])
    assert held >= 1
    h = pd.read_csv(out / "history.csv")
    assert h[column].tolist() == list(range(1, len(h) + 1))
    assert len(h) > held
    before = pd.DataFrame(meta["history"])
    for col in ("env_steps", "wall_time"):
        if col in before:
            assert h[col].iloc[:held].tolist() == pytest.approx(before[col].tolist()), col
    record = meta.get("replay")
    if record is not None:
        line = (f"replay restored from {out / record['file']}: {record['size']} items, "
                f"{record['inserted']} inserted")
        assert line in stderr, stderr[-3000:]
        assert record["inserted"] > 0
        # the resumed run's checkpoint names its own replay file; the old one is gone
        final = load_checkpoint(out / "checkpoint.npz")[0]["replay"]
        files = sorted(p.name for p in out.glob("checkpoint.replay-*.npz"))
        assert files == [final["file"]] and final["inserted"] >= record["inserted"]
    return h


def test_aesrl_resumes_after_a_kill_with_its_replay_and_critic(tmp_path):
    out = tmp_path / "aes"
    run = [*AESRL, "--workers", "0", "--steps", "1200", "--checkpoint-every", "0", *QUIET]
    meta = kill_when_saved(start([*run, "--out", str(out)]), out / "checkpoint.npz", 40)
    assert meta["replay"] is not None
    arrays = load_checkpoint(out / "checkpoint.npz")[1]
    assert "critic" in arrays and "critic_adam_m" in arrays  # the critic learner's state
    total = past(meta, "env_steps", 150)
    p = resume(out, AESRL, "--steps", str(total))
    h = check_resumed(out, meta, "update", p.stderr)
    assert h.env_steps.iloc[-1] >= total
    # the critic goes on from its saved updates (it never restarts from zero)
    held = int(meta["iteration"])
    assert (h.critic_updates.iloc[held:] >= h.critic_updates.iloc[held - 1]).all()


def test_cemrl_resumes_after_a_kill_with_its_replay(tmp_path):
    out = tmp_path / "cem"
    run = [*CEMRL, "--workers", "0", "--generations", "8", "--checkpoint-every", "0", *QUIET]
    meta = kill_when_saved(start([*run, "--out", str(out)]), out / "checkpoint.npz", 3)
    total = int(meta["iteration"]) + 2
    p = resume(out, CEMRL, "--generations", str(total))
    h = check_resumed(out, meta, "generation", p.stderr)
    assert len(h) == total


def test_apex_resumes_after_a_kill_with_its_replay(tmp_path):
    out = tmp_path / "apex"
    run = [*APEX, "--workers", "0", "--learner-steps", "240", "--checkpoint-every", "0",
           *QUIET]
    meta = kill_when_saved(start([*run, "--out", str(out)]), out / "checkpoint.npz", 15)
    total = past(meta, "learner_steps", 40)
    p = resume(out, APEX, "--learner-steps", str(total))
    h = check_resumed(out, meta, "iteration", p.stderr)
    assert h.learner_steps.iloc[-1] >= total
    # what the replay counted goes on from the checkpoint's moment
    held = int(meta["iteration"])
    assert h.replay_inserted.iloc[held] >= meta["replay"]["inserted"]


@pytest.mark.slow
def test_apex_on_a_local_cluster_resumes_after_the_whole_job_is_killed(tmp_path):
    """The driver, its scheduler and both workers killed at once (a node lost), then a new
    cluster resumes from the run folder: the replay comes back on a worker from its file."""
    out = tmp_path / "apex2"
    run = [*APEX, "--workers", "2", "--learner-steps", "3000", "--checkpoint-every", "0",
           "--replay-checkpoint-interval", "0.5", *QUIET]
    recovery = out / "checkpoint.replay-recovery.npz"  # the replay's, beside the run's
    meta = kill_when_saved(start([*run, "--out", str(out)]), out / "checkpoint.npz", 5,
                           also=recovery.exists)
    assert meta["replay"]["inserted"] >= 200 and meta["learner_steps"] < 3000
    total = past(meta, "learner_steps", 200)
    p = resume(out, APEX, "--workers", "2", "--learner-steps", str(total))
    h = check_resumed(out, meta, "iteration", p.stderr)
    assert h.learner_steps.iloc[-1] >= total
    # the replay's recovery checkpoints went into the run folder; removed when the run ended
    assert "replay-recovery" not in " ".join(p.name for p in out.iterdir())


def test_impala_resumes_after_a_kill(tmp_path):
    out = tmp_path / "impala"
    run = [*IMPALA, "--workers", "0", "--learner-steps", "300", "--checkpoint-every", "0",
           *QUIET]
    meta = kill_when_saved(start([*run, "--out", str(out)]), out / "checkpoint.npz", 5)
    arrays = load_checkpoint(out / "checkpoint.npz")[1]
    assert any(k.startswith("opt_") for k in arrays)  # the optimiser's state
    total = past(meta, "learner_steps", 40)
    p = resume(out, IMPALA, "--learner-steps", str(total))
    h = check_resumed(out, meta, "iteration", p.stderr)
    assert h.learner_steps.iloc[-1] >= total


def test_eorl_resumes_after_a_kill_with_its_population_and_buffer(tmp_path):
    out = tmp_path / "eorl"
    run = [*EORL, "--workers", "0", "--episodes", "150", "--checkpoint-every", "0", *QUIET]
    meta = kill_when_saved(start([*run, "--out", str(out)]), out / "checkpoint.npz", 20)
    arrays = load_checkpoint(out / "checkpoint.npz")[1]
    assert arrays["net.theta"].shape[0] > 1 and len(arrays["buffer.ids"]) > 0
    total = int(meta["iteration"]) + 20
    p = resume(out, EORL, "--episodes", str(total))
    h = check_resumed(out, meta, "episode", p.stderr)
    assert len(h) == total
    after = load_checkpoint(out / "checkpoint.npz")[0]
    assert after["buffer"]["counters"]["inserted"] > meta["buffer"]["counters"]["inserted"]


def test_a_checkpoint_refuses_a_replay_file_of_another_moment(tmp_path):
    """The pair is checked on load: a missing replay file, or one written for another
    checkpoint, is a clear error naming it."""
    from esnb.runners.apex import ApeX

    out = tmp_path / "run"
    r = ApeX("CartPole-v1", client=False, num_actors=2, seed=0, min_size=100, learner_chunk=4,
             batch_size=16, capacity=1000, eval_interval=0)
    r.keep_checkpoints(out / "checkpoint.npz", every=3600)
    try:
        r.step(3)
        first = r.save(out / "checkpoint.npz")
        old = out / load_checkpoint(first)[0]["replay"]["file"]
        kept = tmp_path / "old-replay.npz"
        os.link(old, kept)
        r.step(2)
        r.save(out / "checkpoint.npz")
    finally:
        r.close()
    meta = load_checkpoint(out / "checkpoint.npz")[0]
    now = out / meta["replay"]["file"]
    assert now.exists() and not old.exists()  # the earlier pair's replay file is gone
    os.replace(kept, now)  # the replay of an earlier moment under the recorded name
    with pytest.raises(CheckpointError, match=re.escape(f"{now} is not the replay")):
        ApeX.load(out / "checkpoint.npz", client=False)
    now.unlink()
    with pytest.raises(CheckpointError, match="which is missing"):
        ApeX.load(out / "checkpoint.npz", client=False)
