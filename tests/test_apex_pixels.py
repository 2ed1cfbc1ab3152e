"""Ape-X DQN on MinAtar (issue 22): the conv Q-network over uint8 frames, from the learner's
flat vector to the actors' torch forward, inline and on a real LocalCluster (minatar is in
the test extra: a missing one fails, it is not skipped)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from esnb.nets.conv import ConvTorso
from esnb.nets.torch_conv import conv_forward
from esnb.rl.apex.nets import q_values
from esnb.runners.apex import ApeX, ApeXDPG
from esnb.runners.apex.actor import ActorConfig, ActorGroup

ENV = "MinAtar/Breakout-v1"
#: MinAtar has no time limit of its own; Breakout's episodes end long before it
CAP = 1000
SMALL = dict(num_actors=2, seed=3, client=False, min_size=300, eval_interval=20,
             eval_episodes=1, replay_checkpoint="", learner_chunk=8, batch_size=32,
             iteration_seconds=0.01, max_episode_steps=CAP, capacity=4000,
             inline_actor_steps=64)


# small networks on a shared 2-core machine: one torch thread (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_minatar_channels_are_not_divided_by_255():
    """MinAtar's 0/1 channels go in as they are; ALE's 0..255 frames are scaled by 1/255."""
    assert ConvTorso("minatar", (4, 10, 10)).scale == 1.0
    assert ConvTorso("nature", (4, 84, 84)).scale == pytest.approx(1 / 255)
    torso = ConvTorso("minatar", (4, 10, 10))
    flat = torch.from_numpy(torso.init(np.random.default_rng(0)))
    frames = torch.from_numpy(np.random.default_rng(1).integers(0, 2, (5, 4, 10, 10),
                                                               dtype=np.uint8))
    out = conv_forward(torso, flat, frames)
    # the learner's float batches (raw values) give what the actors' uint8 forward gives
    torch.testing.assert_close(out, conv_forward(torso, flat, frames.float()))
    w, b = flat[:576].view(16, 4, 3, 3), flat[576:592]
    ref = torch.relu(torch.nn.functional.conv2d(frames.float(), w, b)).flatten(1)
    torch.testing.assert_close(out, ref)  # scale 1: no 1/255 anywhere
    with pytest.raises(ValueError, match="scale must be"):
        ConvTorso("minatar", (4, 10, 10), scale=0.0)


def test_inline_run_on_minatar_breakout_learns_from_uint8_replay():
    a = ApeX(ENV, **SMALL)
    assert a.net.torso.kind == "minatar" and a.net.torso.scale == 1.0
    assert [n for n, _ in a.net.layout.parts] == ["torso", "value", "advantage"]
    assert a.net.layout["value"].sizes == (1024, 128, 1)
    assert a.net.layout["advantage"].sizes == (1024, 128, 3)
    spec = a.replay_config["spec"]
    assert spec["obs"] == ((4, 10, 10), np.uint8) and spec["next_obs"] == spec["obs"]
    try:
        while a.learner_steps < 200:
            a.step(1)
        h = a.history
        for col in ("learner_steps", "env_steps", "loss", "q_mean", "replay_size",
                    "replay_bytes_per_transition", "eval_return"):
            assert col in h.columns, col
        assert h.learner_steps.iloc[-1] >= 200 and h.replay_size.iloc[-1] >= 300
        assert np.isfinite(h.loss.dropna()).all() and h.loss.notna().sum() > 10
        assert np.isfinite(h.eval_return).any()
        # 2 x 400 bytes of uint8 frames, an int64 action, float32 reward and discount
        assert h.replay_bytes_per_transition.iloc[-1] == 2 * 400 + 8 + 4 + 4
    finally:
        a.close()


def test_the_actors_greedy_action_is_the_learners_argmax():
    a = ApeX(ENV, **SMALL)
    try:
        while a.learner_steps < 16:  # trained a little: not the initial vector
            a.step(1)
        cfg = ActorConfig(ENV, "dqn", a.net, num_actors=2, max_episode_steps=CAP)
        g = ActorGroup(cfg, [0, 1], seed=5, exploration=0.0, exploration_alpha=0.0)
        g.set_params(a.params(), 1)
        g.step(30)
        assert g.obs.dtype == np.uint8 and g.obs.shape == (2, 4, 10, 10)
        batch, _, _ = g.take()
        obs = batch["obs"]
        assert obs.dtype == np.uint8 and obs.max() == 1
        q_actor = q_values(a.net, g._params, obs)  # torch forward on the published copy
        q_learner = a.learner.q(obs)  # the learner's own module
        np.testing.assert_allclose(q_actor, q_learner, rtol=1e-5, atol=1e-6)
        assert np.ptp(q_actor) > 0
        np.testing.assert_array_equal(q_actor.argmax(axis=1), q_learner.argmax(axis=1))
        # at epsilon 0 the actor's actions are the learner's argmax
        np.testing.assert_array_equal(g._actions(), a.learner.q(g.obs).argmax(axis=1))
        g.close()
    finally:
        a.close()


def test_the_greedy_policy_on_frames_is_what_evaluations_compute():
    """``acting_policy()`` (what videos play): the learner's published Q-network, its action
    for one frame stack the argmax of the learner's Q-values; exports refuse it in one line."""
    from esnb.runners.apex.actor import GreedyNetPolicy
    from esnb.runners.playback import export

    a = ApeX(ENV, **SMALL)
    try:
        while a.learner_steps < 16:
            a.step(1)
        policy = a.acting_policy()
        assert isinstance(policy, GreedyNetPolicy) and policy.env == ENV
        np.testing.assert_array_equal(policy.flat, a.params())
        act = policy.numpy()
        obs = np.random.default_rng(4).integers(0, 2, (24, 4, 10, 10), dtype=np.uint8)
        actions = [act(o) for o in obs]
        assert all(isinstance(x, int) for x in actions)
        assert actions == a.learner.q(obs).argmax(axis=1).tolist()
        with pytest.raises(ValueError, match="Ape-X's Q-network on MinAtar/Breakout-v1 is not "
                                             "exported .* esnb play RUN plays it"):
            export(a, "onnx", "unused.onnx")
    finally:
        a.close()


def test_the_dpg_policy_is_the_noise_free_action_within_the_bounds():
    from esnb.runners.apex.actor import greedy_policy

    a = ApeXDPG("InvertedPendulum-v5", num_actors=1, seed=1, client=False, min_size=100,
                eval_interval=0, replay_checkpoint="", learner_chunk=4, batch_size=16,
                iteration_seconds=0.01, capacity=1000, inline_actor_steps=64)
    try:
        act = a.acting_policy().numpy()
        obs = np.random.default_rng(5).normal(size=(8, 4)).astype(np.float32) * 3
        want = greedy_policy(a.net, a.params())(obs)
        got = np.stack([act(o) for o in obs])
        np.testing.assert_array_equal(got, want)
        assert np.all(np.abs(got) <= 3.0) and got.shape == (8, 1)
    finally:
        a.close()


def test_checkpoint_and_resume_on_minatar_continue_identically(tmp_path):
    """The learner, its optimiser and the uint8 replay come back exactly; actors restart
    their episodes (an environment's state is not checkpointed, as for every Ape-X run), so
    two resumes of one checkpoint continue identically, number for number."""
    a = ApeX(ENV, **SMALL)
    try:
        while a.learner_steps < 40:
            a.step(1)
        a.save(tmp_path / "ckpt.npz")
        size = a.history.replay_size.iloc[-1]
    finally:
        a.close()
    c, d = (ApeX.load(tmp_path / "ckpt.npz", client=False) for _ in range(2))
    try:
        for r in (c, d):
            np.testing.assert_array_equal(r.params(), a.params())
            assert r.net == a.net and r.learner_steps == a.learner_steps
            assert r.replay_config["spec"]["obs"] == ((4, 10, 10), np.uint8)
            r.step(4)
        cols = ["learner_steps", "env_steps", "loss", "q_mean", "replay_size"]
        hc, hd = c.history[cols].iloc[-4:], d.history[cols].iloc[-4:]
        np.testing.assert_array_equal(hc.to_numpy(), hd.to_numpy())
        assert hc.learner_steps.iloc[-1] > a.learner_steps
        assert hc.replay_size.iloc[0] >= size  # the checkpoint's replay came back
        np.testing.assert_array_equal(c.params(), d.params())
        assert not np.array_equal(c.params(), a.params())
    finally:
        c.close()
        d.close()


def test_bad_input_one_line_each():
    with pytest.raises(ValueError, match="torso 'minatar' takes frames"):
        ApeX("CartPole-v1", torso="minatar", client=False)
    with pytest.raises(ValueError, match="torso 'mlp' takes vector observations"):
        ApeX(ENV, torso="mlp", client=False, max_episode_steps=CAP)
    with pytest.raises(ValueError, match="torso"):
        ApeX(ENV, torso="resnet", client=False, max_episode_steps=CAP)
    with pytest.raises(ValueError, match="Ape-X DPG takes vector observations"):
        ApeXDPG(ENV, client=False, max_episode_steps=CAP)
    with pytest.raises(ValueError, match="no time limit: pass max_episode_steps"):
        ApeX(ENV, client=False)


def test_cli_refuses_dpg_on_minatar_before_a_cluster(tmp_path):
    p = subprocess.run([sys.executable, "-m", "esnb.cli", "train", "apex-dpg", "--env", ENV,
                        "--workers", "2", "--max-episode-steps", str(CAP),
                        "--out", str(tmp_path / "run"), "--no-progress"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode != 0
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, p.stderr
    assert "takes vector observations" in lines[0] and ENV in lines[0]
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_apex_dqn_on_minatar_on_a_local_cluster(client):
    runner = ApeX(ENV, num_actors=2, seed=0, client=client, min_size=300, eval_interval=0,
                  replay_checkpoint="", learner_chunk=8, batch_size=32,
                  max_episode_steps=CAP, capacity=4000)
    try:
        runner.start(learner_steps=40)
        runner.wait(300)
        h = runner.history
        last = h.iloc[-1]
        assert last.learner_steps >= 40 and last.replay_inserted >= 300
        assert last.replay_duplicates == 0 and last.replay_bytes_per_transition == 816
        assert h.episodes.iloc[-1] > 0 and np.isfinite(h.loss).any()
        assert runner.evaluate(1).shape == (1,)
    finally:
        runner.close()
