"""Ape-X on real LocalClusters (worker processes): actor loops, the replay actor, throughput
columns, restarts, and a run that survives the loss of the replay's worker."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest

from esnb.runners.apex import ApeX, ApeXDPG

# small networks on a shared 2-core machine: one torch thread (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.2)


@pytest.mark.slow
def test_apex_on_a_cluster_reports_every_part_and_restarts_its_loops(client):
    runner = ApeX("CartPole-v1", num_actors=4, seed=0, client=client, min_size=500,
                  eval_interval=0, replay_checkpoint="", learner_chunk=8)
    try:
        runner.start(learner_steps=40)
        runner.wait(120)
        h = runner.history
        assert (h.loops_running == 2).any()  # two actor loops (4 actors, 2 workers) ran
        last = h.iloc[-1]
        assert last.learner_steps >= 40 and last.env_steps >= 500  # min_size came first
        assert last.replay_inserted >= 500 and last.replay_duplicates == 0
        assert h.episodes.iloc[-1] > 10 and np.isfinite(h.return_mean).any()
        for col in ("actor_steps_per_s", "inserts_per_s", "updates_per_s", "sampled_per_s"):
            assert h[col].iloc[-1] > 0, col
        assert last.sampled_per_s == pytest.approx(256 * last.updates_per_s, rel=0.01)
        assert (h.waiting.iloc[:3]).any()  # the learner waited for min_size first
        assert runner.backend.loops_running == 0  # loops end with the run
        steps, inserted = runner.env_steps, last.replay_inserted
        # a second start submits new loops that continue their actors' numbering
        runner.start(env_steps=1_000)
        runner.wait(120)
        last = runner.history.iloc[-1]
        assert runner.env_steps > steps and last.replay_inserted > inserted
        assert last.replay_duplicates == 0
        assert runner.evaluate(2).shape == (2,)
    finally:
        totals = runner.close()
    assert all(t["failures"] == 0 for t in totals)


@pytest.mark.slow
def test_apex_survives_the_loss_of_the_replay_worker(fresh_client, tmp_path):
    client = fresh_client
    path = tmp_path / "replay.npz"
    runner = ApeX("CartPole-v1", num_actors=4, seed=1, client=client, min_size=500,
                  eval_interval=0, replay_checkpoint=str(path), replay_checkpoint_interval=1.0,
                  learner_chunk=8)
    try:
        runner.start()
        wait_for(lambda: runner.learner_steps > 100 and path.exists(), 120,
                 "learning and a replay checkpoint")
        victim = runner.backend.replay.address
        before = runner.learner_steps
        pid = client.run(os.getpid, workers=[victim])[victim]
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: runner.records and runner.records[-1]["replay_recreations"] == 1, 60,
                 "the replay to be recreated")
        after = runner.learner_steps
        steps_after = runner.env_steps
        wait_for(lambda: runner.learner_steps > after + 100 and runner.env_steps > steps_after
                 + 2000, 120, "learning and acting to go on")
        # the loop that shared the killed worker comes back once the nanny has restarted it
        wait_for(lambda: runner.records[-1]["loop_restarts"] >= 1
                 and runner.records[-1]["loops_running"] == 2, 120, "the lost loop to restart")
        assert runner.running and runner.error is None
    finally:
        runner.stop()
        runner.wait(60)
        reports = list(runner.replay.recoveries) if runner.replay is not None else []
        runner.close()
    h = runner.history
    last = h.iloc[-1]
    assert last.replay_generation == 1 and last.replay_recreations == 1
    assert last.replay_checkpoints >= 1
    # the transitions lost: inserted before the loss - inserted in the restored checkpoint
    # (never a size difference: at its soft capacity the replay's size does not move)
    (report,) = reports
    assert report["lost"] == report["inserted_before"] - report["inserted_restored"] >= 0
    assert last.replay_lost == report["lost"]
    seen = h[h.replay_recreations == 0].replay_inserted.max()  # what history saw before
    assert report["inserted_before"] >= seen
    assert report["lost"] >= seen - report["inserted_restored"]
    assert h[h.replay_recreations == 1].replay_inserted.iloc[0] >= report["inserted_restored"]
    assert last.loop_restarts >= 1  # the loop that shared the killed worker came back
    assert runner.learner_steps > before
    assert victim not in client.scheduler_info()["workers"]


@pytest.mark.slow
def test_apex_dpg_runs_on_a_cluster(client):
    runner = ApeXDPG("InvertedPendulum-v5", num_actors=2, seed=0, client=client,
                     actor_hidden=(32, 32), critic_hidden=(32, 32), min_size=500,
                     eval_interval=20, eval_episodes=1, replay_checkpoint="", learner_chunk=4)
    try:
        runner.start(learner_steps=60)
        runner.wait(120)
    finally:
        runner.close()
    h = runner.history
    assert h.learner_steps.iloc[-1] >= 60 and h.env_steps.iloc[-1] > 500
    assert h.eval_return.notna().any() and np.isfinite(h.actor_loss.dropna()).all()
    assert h.replay_evicted.iloc[-1] >= 0 and "critic_lr" in h


@pytest.mark.parametrize("algo", ["apex", "aesrl"])
def test_the_last_checkpoint_of_a_stopped_run_holds_every_insert(tmp_path, client, algo):
    """Actor loops (Ape-X) and evaluations in flight (AES-RL) stop before the last checkpoint
    (``Runner._quiesce``): its replay file holds everything the replay took, so a resumed run
    loses nothing, also when the checkpoint a notebook's keeper writes is the last one."""
    from esnb.record import load_checkpoint
    from esnb.runners.aesrl import AESRL

    if algo == "apex":
        runner = ApeX("CartPole-v1", num_actors=4, seed=0, client=client, min_size=300,
                      eval_interval=0, learner_chunk=8)
    else:
        runner = AESRL("Pendulum-v1", seed=0, client=client, actor_hidden=(16, 16),
                       critic_hidden=(16, 16), rl_start_step=10**9, max_episode_steps=50)
    try:
        runner.keep_checkpoints(tmp_path / "checkpoint.npz", every=3600)  # at the end only
        runner.start()
        wait_for(lambda: runner.iteration >= 8, 300, "eight iterations")
        runner.stop()
        runner.wait(300)
        saved = load_checkpoint(tmp_path / "checkpoint.npz")[0]["replay"]
        replay = runner.backend.replay if algo == "apex" else runner.replay
        time.sleep(1.0)  # anything still inserting would show now
        assert replay.call("stats")["inserted"] == saved["inserted"] > 0
    finally:
        runner.close()
