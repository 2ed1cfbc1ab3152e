"""Ape-X DQN on Atari (issue 22): the replay keeps each 84x84 frame once (actors send stacks,
:class:`esnb.replay.stacks.StackStorage` stores the frames it has not seen recently), reads
back exactly what the environment gave, never samples an item whose frames are gone, and
resumes exactly; rewards are clipped to [-1, 1] where the n-step returns are built. All of it
driven by real ALE games (ale-py is in the test extra: missing, these fail)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from esnb.replay import PrioritizedReplayBuffer, ReplayBuffer, split_state
from esnb.replay.server import ReplayServer
from esnb.replay.stacks import StackStorage, is_frame_stack
from esnb.replay.transfer import local_call, pull, push
from esnb.rl.apex.nets import transition_spec
from esnb.runners.apex import ApeX
from esnb.runners.apex.actor import ActorConfig, ActorGroup

ENV = "ALE/Pong-v5"
FRAME = 84 * 84
#: per transition besides its frame: 2 x 4 int64 frame ids, an int64 action, float32 reward
#: and discount, a written flag (81 bytes); allowed up to 100
OVERHEAD = 100
SPEC = transition_spec((4, 84, 84), obs_dtype=np.uint8)
SMALL = dict(num_actors=2, seed=3, client=False, min_size=200, eval_interval=0,
             replay_checkpoint="", learner_chunk=4, batch_size=16, iteration_seconds=0.01,
             max_episode_steps=60, capacity=2000, inline_actor_steps=64)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def pong_net():
    a = ApeX(ENV, **SMALL)
    a.close()
    return a.net


def actor_batches(net, steps: int, n_step: int = 3, cap: int = 40, seed: int = 0,
                  actors=(0, 1), clip: str = "none"):
    """Batches the real actor code builds from Pong (2 actors, episodes capped at ``cap``
    so several end and reset), as they are pushed to the replay: ``(batch, prio, keys)``."""
    cfg = ActorConfig(ENV, "dqn", net, num_actors=len(actors), n_step=n_step,
                      max_episode_steps=cap, reward_clipping=clip)
    g = ActorGroup(cfg, list(actors), seed=seed)
    out = []
    for _ in range(steps // 50):
        g.step(50 // len(actors))
        taken = g.take()
        if taken is not None:
            out.append(taken)
    episodes = g.drain_episodes()
    g.close()
    return out, episodes


def fill(buf, batches) -> dict[int, dict]:
    """Add every batch; the transition each stored id was sent as."""
    sent = {}
    for batch, prio, keys in batches:
        ids = buf.add(batch, prio, keys)
        for j, i in enumerate(ids):
            if i >= 0:
                sent[int(i)] = {k: v[j] for k, v in batch.items()}
    return sent


def test_the_choice_of_storage_follows_the_observations():
    assert is_frame_stack((4, 84, 84), np.uint8)
    assert not is_frame_stack((4, 10, 10), np.uint8)  # MinAtar: channels, not frames
    assert not is_frame_stack((4, 84, 84), np.float32) and not is_frame_stack((8,), np.float32)
    # (MinAtar's runner passes its (4, 10, 10) spec through the same test; Pong's: the bytes
    # test below)
    c = ApeX("CartPole-v1", **{k: v for k, v in SMALL.items() if k != "max_episode_steps"})
    c.close()
    assert c.replay_config["frame_storage"] is False


def test_frames_read_back_equal_the_envs_stacks_across_episodes_and_n_step(pong_net):
    """Two actors' n-step transitions over ~15 episodes (resets and the n-step tails at their
    ends included), interleaved, plus a batch sent twice (dropped by the keys): every stored
    transition reads back exactly as the env gave it, at about one new frame each."""
    batches, episodes = actor_batches(pong_net, 1200, n_step=3)
    assert len(episodes) >= 10
    buf = PrioritizedReplayBuffer(4000, spec=SPEC, frame_storage=True)
    sent = fill(buf, batches + batches[:2])  # the repeats are dropped as duplicates
    assert buf.stats()["duplicates"] == sum(len(b[0]["action"]) for b in batches[:2])
    ids = np.array(sorted(sent))
    got = buf.storage.read(ids % buf.capacity)
    for k in SPEC:
        np.testing.assert_array_equal(got[k], np.stack([sent[i][k] for i in ids]), err_msg=k)
    # n-step transitions span 3 frames (next_obs != obs) and episode ends (discount 0)
    # (Pong's episodes are cut at 40 steps: the last two transitions are 2- and 1-step)
    np.testing.assert_allclose(np.unique(got["discount"]), [0.99**3, 0.99**2, 0.99], rtol=1e-6)
    assert not np.array_equal(got["obs"][:, 1:], got["next_obs"][:, :-1])
    # at most one new frame a transition, plus each episode's first and a few per batch
    frames = buf.storage.frames.frame_head
    assert frames <= len(ids) + 2 * len(episodes) + 8 * len(batches)
    assert frames < 1.2 * len(ids)


def test_replay_bytes_per_ale_transition_are_about_one_frame():
    a = ApeX(ENV, reward_clipping="abs_one", **SMALL)
    assert a.replay_config["frame_storage"] is True
    assert a.actor_cfg.reward_clipping == "abs_one"  # the setting reaches the actors
    try:
        while a.learner_steps < 8:
            a.step(1)
        h = a.history
        per = h.replay_bytes_per_transition.iloc[-1]
        assert per < 1.2 * FRAME + OVERHEAD
        assert per > FRAME  # the figure is real: the frame ring is counted
        assert h.replay_bytes.iloc[-1] == pytest.approx(per * SMALL["capacity"])
        # what ArrayStorage would hold: two stacks of four frames
        assert 2 * 4 * FRAME / per > 7
        assert np.isfinite(h.loss.dropna()).all() and h.loss.notna().any()
    finally:
        a.close()


@pytest.mark.parametrize("prioritized", [True, False])
def test_items_whose_frames_are_gone_are_never_sampled(pong_net, prioritized):
    """A frame ring of 150 frames behind 400 slots: most items lose their frames while
    their slots still hold them. Sampling drops those (counted as overwritten) and every
    item it returns is the one sent under its id."""
    batches, _ = actor_batches(pong_net, 800, n_step=3, seed=1)
    kw = dict(spec=SPEC, frame_storage=True, frame_capacity=150)
    buf = (PrioritizedReplayBuffer(400, **kw) if prioritized else ReplayBuffer(400, **kw))
    sent = {}
    rng = np.random.default_rng(0)
    for batch, prio, keys in batches:
        sent.update(fill(buf, [(batch, prio, keys)]))
        before = len(buf)
        out, ids, w = buf.sample(64, rng)
        assert np.isfinite(w).all()
        assert buf.storage.available(ids % buf.capacity).all()
        for j, i in enumerate(ids):
            np.testing.assert_array_equal(out["obs"][j], sent[int(i)]["obs"])
            np.testing.assert_array_equal(out["next_obs"][j], sent[int(i)]["next_obs"])
        assert len(buf) <= before
    st = buf.stats()
    assert st["overwritten"] > 0 and st["size"] < 400
    # items not sampled yet may still hold lost frames: reading them directly is refused
    stored = np.flatnonzero(buf._valid)
    gone = stored[~buf.storage.available(stored)]
    assert len(gone)
    with pytest.raises(ValueError, match="frames below id"):
        buf.storage.read(gone)


def test_checkpoint_resume_is_exact(pong_net, tmp_path):
    """One file (the replay's checkpoint, as a run writes it); the restored buffer has the
    same frames, ids, priorities and recent-frame look-up: it samples and stores what the
    uninterrupted one does."""
    batches, _ = actor_batches(pong_net, 800, n_step=3, seed=2)
    # the configuration a run's replay server is built from (esnb.replay.buffer_from_config)
    config = dict(capacity=500, prioritized=True, spec=SPEC, frame_storage=True,
                  frame_capacity=600, soft_capacity=300)
    server = ReplayServer(config, seed=0)
    a = server.buffer
    fill(a, batches[:8])
    a.evict()
    pull(local_call(server), tmp_path / "replay.npz")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["replay.npz"]  # one file
    restored = ReplayServer(config, seed=0)
    push(local_call(restored), tmp_path / "replay.npz", chunk_bytes=100_000)  # in pieces
    b = restored.buffer
    assert len(b) == len(a) == 300
    for buf in (a, b):  # go on identically: new batches, samples, priority updates
        fill(buf, batches[8:])
        rng = np.random.default_rng(5)
        buf.out = [buf.sample(32, rng) for _ in range(3)]
        buf.update_priorities(buf.out[0][1], np.arange(1, 33, dtype=float))
    assert a.stats() == b.stats()
    assert a.storage.frames.frame_head == b.storage.frames.frame_head
    np.testing.assert_array_equal(a.storage.frames.frames, b.storage.frames.frames)
    assert a.storage._recent == b.storage._recent
    for (x, ix, wx), (y, iy, wy) in zip(a.out, b.out, strict=True):
        np.testing.assert_array_equal(ix, iy)
        np.testing.assert_array_equal(wx, wy)
        for k in x:
            np.testing.assert_array_equal(x[k], y[k])
    sa, sb = split_state(a.state_dict())[1], split_state(b.state_dict())[1]
    assert sa.keys() == sb.keys()
    for k in sa:
        np.testing.assert_array_equal(sa[k], sb[k], err_msg=k)


def test_bad_input_one_line_each():
    with pytest.raises(ValueError, match="frame stacks"):
        StackStorage(10, transition_spec((4, 10, 10), obs_dtype=np.uint8))
    with pytest.raises(ValueError, match="needs its spec"):
        ReplayBuffer(10, frame_storage=True)
    with pytest.raises(ValueError, match="frame_capacity is a frame storage"):
        ReplayBuffer(10, spec=SPEC, frame_capacity=100)
    plain = ReplayBuffer(10, spec=SPEC)
    frames = ReplayBuffer(10, spec=SPEC, frame_storage=True)
    with pytest.raises(ValueError, match="with a frame storage"):
        plain.load_state_dict(frames.state_dict())
    with pytest.raises(ValueError, match="without a frame storage"):
        frames.load_state_dict(plain.state_dict())
    with pytest.raises(ValueError, match="reward_clipping must be one of"):
        ApeX(ENV, reward_clipping="sign", **SMALL)


def test_rewards_are_clipped_where_n_step_returns_are_built(pong_net):
    """Space Invaders pays 5-30 a hit: with abs_one every reward enters the n-step return as
    at most 1, episode returns stay the game's; none leaves them."""
    env = "ALE/SpaceInvaders-v5"
    raw, clipped = [], []
    for clip, out in (("none", raw), ("abs_one", clipped)):
        # (Space Invaders has Pong's 6 actions: Pong's network acts in both)
        cfg = ActorConfig(env, "dqn", pong_net, num_actors=1, n_step=1, max_episode_steps=200,
                          reward_clipping=clip)
        g = ActorGroup(cfg, [0], seed=1)
        g.step(200)
        out.append(g.take()[0]["reward"])
        out.append(g.drain_episodes())
        g.close()
    assert raw[0].max() >= 5  # the game's points
    np.testing.assert_array_equal(clipped[0], np.clip(raw[0], -1.0, 1.0))
    assert raw[1] == clipped[1] and raw[1][0][1] >= 5  # the same play, raw returns
    # n steps: each reward clipped before the discounted sum
    cfg = ActorConfig(env, "dqn", pong_net, num_actors=1, n_step=3, gamma=0.5,
                      max_episode_steps=200, reward_clipping="abs_one")
    g = ActorGroup(cfg, [0], seed=1)
    g.step(200)
    g3 = g.take()[0]["reward"]
    g.close()
    r = np.clip(raw[0], -1, 1)
    want = r[:-2] + 0.5 * r[1:-1] + 0.25 * r[2:]
    np.testing.assert_allclose(g3[:len(want)], want, rtol=1e-6)
    assert ApeX.Config.preset_values("paper")["reward_clipping"] == "abs_one"
    assert ApeX.Config.preset_values("laptop")["reward_clipping"] == "none"


@pytest.mark.slow
def test_cli_trains_apex_on_pong_on_a_local_cluster(tmp_path):
    out = tmp_path / "run"
    p = subprocess.run(
        [sys.executable, "-m", "esnb.cli", "train", "apex", "--env", ENV, "--workers", "2",
         "--learner-steps", "8", "--num-actors", "2", "--capacity", "2000", "--min-size", "200",
         "--batch-size", "16", "--learner-chunk", "4", "--max-episode-steps", "60",
         "--flush-size", "50", "--eval-interval", "0", "--final-eval", "0",
         "--reward-clipping", "abs_one",
         "--out", str(out)],
        capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    h = pd.read_csv(out / "history.csv")
    last = h.iloc[-1]
    assert last.learner_steps >= 8 and last.replay_inserted >= 200
    assert np.isfinite(h.loss.dropna()).all() and h.loss.notna().any()
    assert last.replay_bytes_per_transition < 1.2 * FRAME + OVERHEAD
    assert last.replay_duplicates == 0
    # the trained Q-network plays: one greedy game (its first 60 agent steps: the run's cap)
    # and its video from the screen ALE renders; exporting it is refused in one line
    video = tmp_path / "pong.mp4"
    p = subprocess.run([sys.executable, "-m", "esnb.cli", "play", str(out), "--episodes", "1",
                        "--video", str(video), "--json"], capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads(p.stdout)
    assert len(doc["returns"]) == 1 and -60 <= doc["returns"][0] <= 60
    assert doc["video"]["frames"] == 61 and video.stat().st_size > 1000
    p = subprocess.run([sys.executable, "-m", "esnb.cli", "export", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode != 0 and "Q-network on ALE/Pong-v5 is not exported" in p.stderr
    assert not (out / "policy.onnx").exists()
