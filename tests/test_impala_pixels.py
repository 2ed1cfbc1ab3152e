"""IMPALA on frames (issue 22): the conv actor-critic over uint8 unrolls, from the learner's flat
vector to the actors' torch forward, inline, on a real LocalCluster and through the CLI on
Atari (minatar and ale-py are in the test extra: a missing one fails, it is not skipped)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from test_impala_parts import one_at_a_time

from esnb.nets.conv import ConvTorso
from esnb.rl.impala.actor_critic import ActorCriticSpec, NumpyActor, init_actor_critic
from esnb.rl.impala.learner import ActorCritic
from esnb.runners.impala import Impala, ImpalaConfig
from esnb.runners.impala.tasks import impala_evaluate, impala_unrolls

ENV = "MinAtar/Breakout-v1"
#: MinAtar has no time limit of its own
CAP = 500
SMALL = dict(client=False, seed=2, max_episode_steps=CAP, actors=2, envs_per_actor=4,
             unroll_length=10, batch_size=8, updates_per_iteration=2, eval_interval=0)

# small networks on a shared 2-core machine: one torch thread (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_inline_run_on_minatar_trains_on_uint8_unrolls():
    r = Impala(ENV, **SMALL)
    try:
        spec = r.spec
        assert spec.torso.kind == "minatar" and spec.torso.scale == 1.0
        assert r.config.obs_norm is False  # frames are scaled in the network, not normalised
        assert [n for n, _ in spec.layout.parts] == ["torso", "fc", "policy", "value",
                                                     "log_std"]
        assert spec.layout["fc"].sizes == (1024, 128)  # MinAtar DQN's one layer of 128
        assert spec.layout["policy"].sizes == (128, 3) and spec.layout["value"].sizes == (128, 1)
        assert [n for n, _ in spec.actor_layout.parts] == ["torso", "fc", "policy", "log_std"]
        # what an actor task hands the learner: uint8 frames, flattened, not float
        u = impala_unrolls(r.actor_config, r.learner.actor_payload(), slot=7, task=0,
                           segments=1, unroll_length=5)
        assert u["obs"].dtype == np.uint8 and u["obs"].shape == (6, 4, 400)
        assert u["trunc_obs"].dtype == np.uint8
        assert set(np.unique(u["obs"])) <= {0, 1}
        before = r.params
        r.step(2)
        h = r.history
        assert h.learner_steps.iloc[-1] == 4 and h.frames_trained.iloc[-1] == 4 * 10 * 8
        assert h.env_steps.iloc[-1] >= 4 * 10 * 8
        assert np.isfinite(h.loss).all() and (h.entropy > 1.0).all()  # ~ln 3 at the start
        assert not np.array_equal(r.params, before)
        assert r.evaluate(1).shape == (1,)
    finally:
        r.close()


def test_greedy_evaluation_on_frames_in_lock_step_plays_the_episodes_one_at_a_time_would():
    """Greedy episodes on frames, stepped together (one batched conv forward a step), are the
    episodes the one episode loop runs one after another with a single-frame forward."""
    r = Impala(ENV, **SMALL)
    try:
        cfg, pl = r.actor_config, r.learner.actor_payload()
        seeds = np.array([4, 9, 1, 6])
        res = impala_evaluate(cfg, pl, seeds)
        returns, lengths = one_at_a_time(cfg, pl, seeds)
        np.testing.assert_array_equal(res["lengths"], lengths)
        np.testing.assert_array_equal(res["returns"], returns)
        assert len(set(lengths.tolist())) > 1  # they end apart: slots refill and move
    finally:
        r.close()


def test_actor_logits_equal_the_learners_on_the_same_frames():
    """The actors' forward (their published copy, no value head) is the learner's, number for
    number, on MinAtar's 0/1 channels and on ALE's 0..255 stacks with the deep torso."""
    import gymnasium as gym

    rng = np.random.default_rng(0)
    cases = [(ConvTorso("minatar", (4, 10, 10)), 2), (ConvTorso("impala-deep", (4, 84, 84)), 256)]
    for torso, top in cases:
        obs_space = gym.spaces.Box(0, top - 1, torso.in_shape, np.uint8)
        cfg = ImpalaConfig.build()  # hidden and activation: the torso's own on frames
        spec = ActorCriticSpec.for_spaces(obs_space, gym.spaces.Discrete(6), cfg.hidden,
                                          cfg.activation, cfg.init_log_std, torso=torso)
        flat = init_actor_critic(spec, rng)
        assert spec.num_params == len(flat)
        frames = rng.integers(0, top, (5, spec.obs_dim), dtype=np.uint8)
        actor = NumpyActor(spec, spec.actor_params(flat))
        logits = actor.outputs(frames)
        with torch.no_grad():
            want, values = ActorCritic(spec, flat)(torch.from_numpy(frames))
        np.testing.assert_array_equal(logits, want.numpy())
        assert values.shape == (5,) and torch.isfinite(values).all()
        a, logp = actor.sample(frames, np.random.default_rng(1))
        ref = torch.log_softmax(want.double(), -1)[torch.arange(5), torch.from_numpy(a)]
        np.testing.assert_allclose(logp, ref.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(actor.greedy(frames), want.argmax(1).numpy())
    # ALE frames are divided by 255 inside the network: raw and pre-scaled floats agree
    assert cases[1][0].scale == pytest.approx(1 / 255)


def test_checkpoint_and_resume_on_minatar(tmp_path):
    """The learner and its optimiser come back exactly; actors restart their episodes (a
    checkpoint keeps no queue nor env states), so two resumes continue identically."""
    r = Impala(ENV, **SMALL)
    try:
        r.step(2)
        r.save(tmp_path / "ckpt.npz")
    finally:
        r.close()
    c, d = (Impala.load(tmp_path / "ckpt.npz", client=False) for _ in range(2))
    try:
        for x in (c, d):
            np.testing.assert_array_equal(x.params, r.params)
            assert x.spec == r.spec and x.version == r.version == 4
            x.step(1)
        np.testing.assert_array_equal(c.params, d.params)
        assert c.version == 6 and not np.array_equal(c.params, r.params)
        cols = ["learner_steps", "env_steps", "loss", "entropy"]
        np.testing.assert_array_equal(c.history[cols].iloc[-1:].to_numpy(),
                                      d.history[cols].iloc[-1:].to_numpy())
    finally:
        c.close()
        d.close()


def test_bad_input_one_line_each():
    with pytest.raises(ValueError, match="torso 'minatar' takes frames"):
        Impala("CartPole-v1", torso="minatar", client=False)
    with pytest.raises(ValueError, match="torso 'mlp' takes vector observations"):
        Impala(ENV, torso="mlp", client=False, max_episode_steps=CAP)
    with pytest.raises(ValueError, match="torso must be one of"):
        Impala(ENV, torso="resnet", client=False, max_episode_steps=CAP)
    with pytest.raises(ValueError, match="no time limit: pass max_episode_steps"):
        Impala(ENV, client=False)
    with pytest.raises(ValueError, match="obs_norm takes vector observations"):
        Impala(ENV, client=False, max_episode_steps=CAP, obs_norm=True)


def test_the_greedy_policy_on_frames_is_what_evaluations_compute():
    """``acting_policy()`` on frames (what videos play): the actors' conv network, its action
    the argmax the greedy evaluations take, for each observation; exports refuse it."""
    from esnb.rl.impala.acting import FramePolicy
    from esnb.runners.playback import export

    r = Impala(ENV, **SMALL)
    try:
        r.step(1)
        policy = r.acting_policy()
        assert isinstance(policy, FramePolicy) and policy.spec == r.spec
        payload = r.learner.actor_payload()
        np.testing.assert_array_equal(policy.flat, payload["params"])
        # parameters of larger spread than a fresh network's, so that frames differ in their
        # argmax and the comparison means something
        rng = np.random.default_rng(3)
        flat = rng.standard_normal(policy.flat.shape).astype(np.float32)
        greedy = NumpyActor(r.spec, flat).greedy
        act = FramePolicy(r.spec, flat, ENV).numpy()
        obs = rng.integers(0, 2, (16, r.spec.obs_dim), dtype=np.uint8)
        actions = [act(o.reshape(r.spec.torso.in_shape)) for o in obs]
        assert actions == greedy(obs).tolist() and len(set(actions)) > 1
        with pytest.raises(ValueError, match="conv network on MinAtar/Breakout-v1 is not "
                                             "exported .* esnb play RUN plays it"):
            export(r, "onnx", "unused.onnx")
    finally:
        r.close()
    with pytest.raises(ValueError, match="actor parameters must have shape"):
        FramePolicy(r.spec, np.zeros(3, np.float32))


def test_presets_on_atari_say_what_applies():
    laptop = ImpalaConfig.build(env="ALE/Pong-v5")
    paper = ImpalaConfig.build("paper", env="ALE/Pong-v5")
    assert laptop.torso == "auto" and paper.torso == "auto-deep"
    assert paper.reward_clipping == "abs_one" and laptop.reward_clipping == "none"
    assert ImpalaConfig.takes_frames
    # the laptop preset's Atari values (the first seen to move Pong on 2 cores), for ALE ids
    # only, under what is given; the paper preset keeps the paper's table
    assert (laptop.lr, laptop.lr_schedule, laptop.batch_size) == (5e-4, "constant", 32)
    assert (laptop.unroll_length, laptop.env_kwargs) == (20, {})  # the papers' 84x84
    assert laptop.eval_interval == 500
    assert (paper.lr, paper.batch_size, paper.unroll_length) == (0.0006, 32, 20)
    assert paper.env_kwargs == {}  # the papers' 84x84 frames
    cartpole = ImpalaConfig.build(env="CartPole-v1")
    assert (cartpole.lr, cartpole.batch_size, cartpole.env_kwargs) == (1e-3, 32, {})
    assert ImpalaConfig.build(env="ALE/Pong-v5", lr=1e-3, batch_size=8).batch_size == 8
    small = Impala("ALE/Pong-v5", client=False, env_kwargs={"screen_size": 42})
    try:  # the shallow torso over 42x42 frames (RLlib's fast Pong's), when asked
        assert small.spec.torso.kind == "impala-shallow"
        assert small.spec.torso.in_shape == (4, 42, 42)
        assert small.spec.layout["fc"].sizes == (288, 256)
    finally:
        small.close()
    # the paper preset's network on Pong: the deep residual torso, frames / 255, clipped
    # rewards in the loss (made, not stepped: 48 Atari environments are not a test's)
    r = Impala("ALE/Pong-v5", preset="paper", client=False)
    try:
        assert r.spec.torso.kind == "impala-deep" and r.spec.torso.in_shape == (4, 84, 84)
        assert r.spec.torso.scale == pytest.approx(1 / 255)
        assert r.spec.layout["fc"].sizes == (3872, 256) and r.spec.act_dim == 6
        assert r.controls["reward_clipping"] == "abs_one" and r.config.obs_norm is False
        assert r.actor_config.max_episode_steps is None  # the game's own 108,000 frames
    finally:
        r.close()


def test_cli_refuses_a_torso_that_does_not_fit_before_a_cluster(tmp_path, capsys):
    from esnb.cli import main

    code = main(["train", "impala", "--env", ENV, "--torso", "mlp", "--workers", "2",
                 "--max-episode-steps", str(CAP), "--out", str(tmp_path / "run"),
                 "--no-progress"])
    assert code != 0
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1, lines  # no cluster's log lines: it never started
    assert "torso 'mlp' takes vector observations" in lines[0] and ENV in lines[0]
    assert not (tmp_path / "run").exists()


def test_cli_trains_impala_on_pong_a_few_hundred_frames(tmp_path):
    """``esnb train impala --env ALE/Pong-v5`` end to end, inline: the shallow torso on
    (4, 84, 84) uint8 stacks, 2 learner steps of 2 unrolls of 20 steps (a few hundred frames
    with what the actor queued), one final greedy episode capped at 100 agent steps."""
    import pandas as pd

    out = tmp_path / "pong"
    p = subprocess.run([sys.executable, "-m", "esnb.cli", "train", "impala",
                        "--env", "ALE/Pong-v5", "--workers", "0", "--learner-steps", "2",
                        "--batch-size", "2", "--unroll-length", "20", "--envs-per-actor", "2",
                        "--actors", "1", "--updates-per-iteration", "1", "--eval-interval", "0",
                        "--max-episode-steps", "100", "--final-eval", "1",
                        "--out", str(out), "--no-progress"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    h = pd.read_csv(out / "history.csv")
    assert h.learner_steps.iloc[-1] == 2 and h.frames_trained.iloc[-1] == 80
    assert 80 <= h.env_steps.iloc[-1] <= 400 and np.isfinite(h.loss).all()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["final_eval_episodes"] == 1 and np.isfinite(summary["final_eval_mean"])
    r = Impala.load(out / "checkpoint.npz", client=False)
    try:
        assert r.spec.torso.kind == "impala-shallow" and r.spec.torso.in_shape == (4, 84, 84)
        assert r.spec.torso.scale == pytest.approx(1 / 255) and r.version == 2
    finally:
        r.close()
    # the trained agent plays: its final evaluation again, and a video of one game (its first
    # 100 agent steps: the run's cap) from the screen ALE renders
    video = tmp_path / "pong.mp4"
    p = subprocess.run([sys.executable, "-m", "esnb.cli", "play", str(out), "--video",
                        str(video), "--json"], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads(p.stdout)
    assert doc["returns"] == [summary["final_eval_mean"]]
    assert doc["video"]["frames"] == 101 and video.stat().st_size > 1000
    p = subprocess.run([sys.executable, "-m", "esnb.cli", "export", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode != 0 and "not exported (esnb export writes MLP policies)" in p.stderr
    assert not (out / "policy.onnx").exists()


@pytest.mark.slow
def test_impala_on_minatar_on_a_local_cluster(client):
    r = Impala(ENV, client=client, seed=0, max_episode_steps=CAP, envs_per_actor=4,
               unroll_length=10, batch_size=8, updates_per_iteration=5, eval_interval=5,
               eval_episodes=1)
    try:
        assert r.n_actors == 4  # 2 per worker
        r.start(learner_steps=10)
        r.wait(300)
        h = r.history
        assert h.learner_steps.iloc[-1] >= 10 and h.episodes.iloc[-1] > 0
        assert np.isfinite(h.loss).all() and h.tasks_done.sum() > 0
        assert r.evaluate(1).shape == (1,)
    finally:
        r.close()
