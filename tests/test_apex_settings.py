"""Ape-X's settings: one declaration per setting, the variants' defaults, the paper preset, the
command line (help and an inline smoke run) and the paper's optimizer."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from esnb.rl.apex.dqn import QNetSpec
from esnb.rl.optim import CenteredRMSprop
from esnb.runners.apex.config import ApeXDPGConfig, ApeXDQNConfig
from esnb.runners.apex.learner import dqn_learner


def test_variant_defaults_are_declared_once_per_variant():
    dqn, dpg = ApeXDQNConfig.build(), ApeXDPGConfig.build()
    assert (dqn.variant, dpg.variant) == ("dqn", "dpg")
    assert (dqn.env, dpg.env) == ("CartPole-v1", "InvertedPendulum-v5")
    assert (dqn.num_actors, dpg.num_actors) == (8, 4)
    assert (dqn.exploration, dqn.exploration_alpha) == (0.4, 7.0)
    assert (dpg.exploration, dpg.exploration_alpha) == (0.3, 0.0)
    assert (dqn.eviction, dpg.eviction) == ("fifo", "priority")
    assert (dqn.samples_per_insert, dpg.samples_per_insert) == (None, 16.0)
    assert dqn.target_period == dpg.target_period == 100
    assert dqn.soft == dqn.capacity // 2 == 65_536
    # the help of a re-declared setting follows the variant
    assert "Gaussian" in ApeXDPGConfig.declarations()["exploration"][0].help
    assert "epsilon" in ApeXDQNConfig.declarations()["exploration"][0].help
    # each learner's settings belong to its variant only
    assert "lr" in ApeXDQNConfig.names() and "lr" not in ApeXDPGConfig.names()
    assert "actor_lr" in ApeXDPGConfig.names() and "actor_lr" not in ApeXDQNConfig.names()
    live = set(dqn.controls().as_dict())
    assert {"lr", "batch_size", "beta", "exploration", "inline_actor_steps", "env",
            "num_actors"} <= live


def test_paper_preset_dqn_and_dpg():
    dqn = ApeXDQNConfig.build(preset="paper")
    assert dqn.optimizer == "rmsprop_centered" and dqn.lr == pytest.approx(0.00025 / 4)
    assert dqn.batch_size == 512 and dqn.target_period == 2500 and dqn.loss == "mse"
    assert dqn.soft_capacity == 2_000_000 and dqn.capacity >= dqn.soft_capacity
    assert dqn.min_size == 50_000 and dqn.num_actors == 360
    assert (dqn.n_step, dqn.grad_clip, dqn.alpha, dqn.beta) == (3, 40.0, 0.6, 0.4)
    assert (dqn.exploration, dqn.exploration_alpha, dqn.evict_interval) == (0.4, 7.0, 100)
    assert dqn.dueling and dqn.double and dqn.eviction == "fifo"
    dpg = ApeXDPGConfig.build(preset="paper")
    assert dpg.num_actors == 64 and dpg.samples_per_insert is None
    assert dpg.soft_capacity == 1_000_000 and dpg.capacity >= dpg.soft_capacity
    assert (dpg.actor_hidden, dpg.critic_hidden) == ((300, 200), (400, 300))
    assert (dpg.actor_lr, dpg.critic_lr, dpg.target_period, dpg.actor_clip) == \
        (1e-4, 1e-4, 100, 1.0)
    assert (dpg.exploration, dpg.eviction) == (0.3, "priority")
    # every difference from the laptop preset says why
    for cls in (ApeXDQNConfig, ApeXDPGConfig):
        for name, (meta, default) in cls.declarations().items():
            if meta.has_paper and meta.paper != default:
                assert meta.why, name


def test_config_checks_and_round_trip():
    with pytest.raises(ValueError, match="soft_capacity"):
        ApeXDQNConfig.build(capacity=1000, soft_capacity=2000)
    with pytest.raises(ValueError, match="never"):
        ApeXDQNConfig.build(capacity=1000, min_size=900)
    with pytest.raises(ValueError, match="ApeXDPG"):
        ApeXDQNConfig.build(variant="dpg")
    with pytest.raises(ValueError, match="optimizer must be one of"):
        ApeXDQNConfig.build(optimizer="sgd")
    with pytest.raises(ValueError, match="unknown setting 'actor_lr'"):
        ApeXDQNConfig.build(actor_lr=1e-3)
    cfg = ApeXDPGConfig.build(preset="paper", replay_resources=None, env_kwargs={"a": 1})
    assert ApeXDPGConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg


def test_variant_dpg_builds_the_dpg_runner():
    from esnb.runners.apex import ApeX, ApeXDPG

    runner = ApeX("InvertedPendulum-v5", variant="dpg", client=False, actor_hidden=(8,),
                  critic_hidden=(8, 8), replay_checkpoint="")
    assert type(runner) is ApeXDPG and runner.config.variant == "dpg"
    assert runner.config_dict()["actor_hidden"] == [8]
    assert ApeX("CartPole-v1", client=False, replay_checkpoint="").config.variant == "dqn"


# -- the paper's optimizer -------------------------------------------------------------------
def tf_centered_rmsprop(theta, grads, lr, decay, eps):
    """TensorFlow 1's ApplyCenteredRMSProp, written out: ms starts at 1, eps under the root."""
    ms, mg = np.ones_like(theta), np.zeros_like(theta)
    for g in grads:
        ms = decay * ms + (1 - decay) * g * g
        mg = decay * mg + (1 - decay) * g
        theta = theta - lr * g / np.sqrt(ms - mg * mg + eps)
    return theta


def test_centered_rmsprop_has_tensorflow_semantics():
    rng = np.random.default_rng(0)
    theta0 = rng.standard_normal(5)
    grads = rng.standard_normal((30, 5)) * 1e-2
    p = torch.nn.Parameter(torch.tensor(theta0))
    opt = CenteredRMSprop([p], lr=0.00025 / 4, decay=0.95, eps=1.5e-7)
    for g in grads:
        p.grad = torch.tensor(g)
        opt.step()
    expected = tf_centered_rmsprop(theta0, grads, 0.00025 / 4, 0.95, 1.5e-7)
    np.testing.assert_allclose(p.detach().numpy(), expected, rtol=1e-10, atol=1e-14)
    # not torch's RMSprop at the same numbers (eps outside the root, mean square from 0)
    q = torch.nn.Parameter(torch.tensor(theta0))
    torch_opt = torch.optim.RMSprop([q], lr=0.00025 / 4, alpha=0.95, eps=1.5e-7, centered=True)
    for g in grads:
        q.grad = torch.tensor(g)
        torch_opt.step()
    assert not np.allclose(q.detach().numpy(), expected, rtol=1e-3)
    with pytest.raises(ValueError, match="decay"):
        CenteredRMSprop([p], lr=1e-3, decay=1.0)


def test_dqn_learner_with_the_paper_optimizer_learns_and_checkpoints():
    spec = QNetSpec(4, 2, (16,), dueling=True)
    rng = np.random.default_rng(0)
    b = {"obs": rng.standard_normal((64, 4)).astype(np.float32),
         "next_obs": rng.standard_normal((64, 4)).astype(np.float32),
         "action": rng.integers(0, 2, 64), "discount": np.zeros(64, np.float32)}
    b["reward"] = b["obs"][:, 0].copy()  # a learnable target: q(s, a) = s_0
    paper = ApeXDQNConfig.build("paper", lr=1e-3, target_period=10)
    a = dqn_learner(paper, spec, seed=0)
    first, _ = a.update(b, np.ones(64))
    for _ in range(300):
        td, _ = a.update(b, np.ones(64))
    assert np.abs(td).mean() < 0.5 * np.abs(first).mean()
    meta, arrays = a.state_dict()
    assert meta["optimizer"] == "rmsprop_centered" and "opt.mean_square" in arrays
    c = dqn_learner(paper, spec, seed=9)
    c.load_state_dict(meta, arrays)
    for _ in range(3):
        np.testing.assert_array_equal(a.update(b, np.ones(64))[0], c.update(b, np.ones(64))[0])
    with pytest.raises(ValueError, match="adam"):
        dqn_learner(ApeXDQNConfig.build(), spec, seed=0).load_state_dict(meta, arrays)


# -- command line ----------------------------------------------------------------------------
def test_cli_help_shows_every_setting_with_its_default():
    from esnb.cli import build_parser

    for algo, cls in (("apex", ApeXDQNConfig), ("apex-dpg", ApeXDPGConfig)):
        parser = build_parser()
        sub = parser._subparsers._group_actions[0].choices["train"]
        text = sub._subparsers._group_actions[0].choices[algo].format_help()
        for name, (meta, _) in cls.declarations().items():
            if meta.cli:
                assert "--" + name.replace("_", "-") in text, name
        assert "--seconds" in text and "--learner-steps" in text and "--steps" in text
        assert "default: 180 seconds" in text


def test_cli_help_mentions_defaults_and_paper_values():
    out = subprocess.run([sys.executable, "-m", "esnb.cli", "train", "apex", "--help"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert "[default: 0.001; paper: 6.25e-05; live]" in text
    assert "--optimizer {adam,rmsprop_centered}" in text
    assert "default: adam; paper: rmsprop_centered" in text


def test_cli_inline_smoke_run(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "esnb.cli", "train", "apex", "--workers", "0",
         "--learner-steps", "20", "--min-size", "200", "--eval-interval", "10",
         "--eval-episodes", "1", "--final-eval", "2", "--no-progress",
         "--out", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["final_eval_episodes"] == 2
    import pandas as pd

    h = pd.read_csv(tmp_path / "run" / "history.csv")
    assert h.learner_steps.iloc[-1] >= 20 and h.eval_return.notna().any()
