"""``esnb.Impala`` on a real 2-worker LocalCluster (and inline): decoupled actors, V-trace
learner, live controls, lag injection, checkpoints, MuJoCo, the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from esnb.runners.impala import Impala
from esnb.runners.impala.tasks import actor_slots

SMALL = dict(hidden=(32, 32), envs_per_actor=4, batch_size=8, unroll_length=10,
             updates_per_iteration=5, eval_interval=0)


@pytest.fixture
def cart(client):
    r = Impala("CartPole-v1", client=client, seed=1, **SMALL)
    yield r
    r.close()


def test_cluster_run_records_lag_and_throughput(cart, client):
    cart.step(4)
    h = cart.history
    assert list(h.iteration) == [1, 2, 3, 4]
    assert cart.learner_steps == cart.version == 20
    assert list(h.learner_steps) == [5, 10, 15, 20]
    assert h.frames_trained.iloc[-1] == 20 * 8 * 10
    assert h.env_steps.iloc[-1] >= h.frames_trained.iloc[-1]
    assert cart.n_actors == 4  # 2 per worker
    hist = cart.lag_histogram()
    assert sum(hist.values()) == 20 * 8  # every unroll trained on has its lag recorded
    assert min(hist) >= 0 and (h.lag_min >= 0).all() and (h.lag_max >= h.lag_mean).all()
    # an iteration can train on unrolls queued earlier without an actor task finishing in
    # it (a loaded machine): its actor frames/s is 0 then, never negative or missing
    assert (h.actor_fps >= 0).all() and h.actor_fps.max() > 0
    assert (h.updates_per_s > 0).all()
    assert h.episodes.iloc[-1] > 0 and np.isfinite(h.return_mean).any()
    assert np.isfinite(h[["pg_loss", "baseline_loss", "entropy", "grad_norm"]]).all().all()
    # actor tasks ran on both workers: each holds actor state of this run. A slot's state is
    # made when its first task starts: on a loaded machine a slot's task can still be queued
    # behind another slot's when the 4 iterations end (seen before the executor too), so let
    # the tasks in flight finish first
    client.gather(list(cart.slots.inflight.values()))
    held = client.run(actor_slots, cart._run)
    assert len(held) == 2 and all(held.values())
    assert sorted(sum(held.values(), [])) == [0, 1, 2, 3]  # each slot lives on one worker


def test_live_controls_and_bad_values(cart):
    cart.step(1)
    version = cart.controls.version
    for bad in (dict(unroll_length=0), dict(batch_size=-1), dict(lr=0.0),
                dict(clip_rho_threshold=0.0), dict(clip_c_threshold=-1.0),
                dict(correction="retrace"), dict(actor_lag=-1), dict(vtrace_lambda=1.5),
                dict(entropy_cost=float("nan")), dict(discount=0.5)):
        with pytest.raises(ValueError, match=next(iter(bad))):
            cart.controls.set(**bad)
    assert cart.controls.version == version  # nothing changed
    cart.controls.set(unroll_length=6, batch_size=5, lr=3e-4, entropy_cost=0.0,
                      clip_rho_threshold=2.0)
    cart.step(2)
    h = cart.history
    last = h.iloc[-1]
    assert (last.unroll_length, last.batch_size, last.lr, last.entropy_cost) == (6, 5, 3e-4, 0)
    assert last.frames_trained - h.iloc[-3].frames_trained == 2 * 5 * 6 * 5
    assert last.dropped_unrolls >= 0
    changes = cart.changes
    assert set(changes.name) >= {"unroll_length", "batch_size", "lr"}
    assert (changes.iteration == 2).all()  # the iteration where they took effect


def test_lag_injection(cart):
    cart.controls.set(actor_lag=8)
    cart.step(6)
    h = cart.history
    # once 8 versions exist, every unroll was produced by parameters >= 8 versions old
    assert (h.lag_min.iloc[3:] >= 8).all()
    assert h.lag_mean.iloc[-1] >= 8
    assert min(k for k in cart.lag_histogram() if k > 0) >= 1


def test_no_correction_mode_runs(cart):
    cart.controls.set(correction="none", actor_lag=3)
    cart.step(2)
    assert cart.history.correction.iloc[-1] == "none"
    assert np.isfinite(cart.history.pg_loss).all()


def test_inline_is_reproducible_and_checkpoints_resume(tmp_path):
    kw = dict(SMALL, eval_interval=5, eval_episodes=2)
    a = Impala("CartPole-v1", client=False, seed=3, **kw)
    b = Impala("CartPole-v1", client=False, seed=3, **kw)
    c = Impala("CartPole-v1", client=False, seed=4, **kw)
    try:
        for r in (a, b, c):
            r.step(2)
        np.testing.assert_array_equal(a.params, b.params)
        assert not np.array_equal(a.params, c.params)
        assert np.isfinite(a.history.eval_return).any()  # inline evaluations land at once
        assert a.best is not None and a.best["eval_return"] == a.history.eval_return.max()
        assert a.evaluate(2, best=True).shape == (2,)
        path = a.save(tmp_path / "impala.npz")
        r = Impala.load(path, client=False)
        try:
            np.testing.assert_array_equal(r.params, a.params)
            assert r.version == a.version == 10 and r.iteration == 2
            assert r.lag_histogram() == a.lag_histogram()
            assert r.best["version"] == a.best["version"]
            np.testing.assert_array_equal(r.best["payload"]["params"], a.best["payload"]["params"])
            assert r.controls.as_dict() == a.controls.as_dict()
            r.step(1)
            assert r.version == 15 and len(r.history) == 3
        finally:
            r.close()
    finally:
        for r in (a, b, c):
            r.close()


def test_mujoco_gaussian_policy_runs(client):
    r = Impala("HalfCheetah-v5", client=client, seed=0, **SMALL)
    try:
        assert not r.spec.discrete and r.controls["obs_norm"]
        r.step(2)
        h = r.history
        assert h.learner_steps.iloc[-1] == 10
        assert np.isfinite(h[["pg_loss", "baseline_loss", "entropy"]]).all().all()
        # the Gaussian's entropy: sum(log_std) + d/2 log(2 pi e), log_std starting at -0.5
        assert h.entropy.iloc[0] == pytest.approx(6 * (-0.5 + 0.5 * np.log(2 * np.pi * np.e)),
                                                  abs=0.05)
        assert r.learner.obs_stats.count > 100  # normalisation statistics are gathered
        ev = r.evaluate(2)
        assert ev.shape == (2,) and np.isfinite(ev).all()
    finally:
        r.close()


@pytest.mark.parametrize("kw, match", [
    (dict(env="CartPol-v1"), "unknown environment id"),
    (dict(envs_per_actor=0), r"envs_per_actor must be an integer in \[1,"),
    (dict(actors=0), r"actors must be an integer in \[1,"),
    (dict(batch_size=0), "batch_size must be"),
    (dict(clip_pg_rho_threshold=0), "clip_pg_rho_threshold must be"),
    (dict(optimizer="sgd"), "optimizer must be one of"),
    (dict(learner_threads=0), "learner_threads must be"),
    (dict(min_task_runtime=-1), r"min_task_runtime must be a number in \[0,"),
    (dict(reward_clipping="sign"), "reward_clipping must be one of"),
    (dict(rmsprop_eps=0), "rmsprop_eps must be"),
    (dict(lr_schedule="cosine"), "lr_schedule must be one of 'constant', 'linear'"),
    (dict(lr_schedul="linear"), "unknown setting 'lr_schedul'"),
])
def test_bad_constructor_arguments(kw, match):
    kw = {"env": "CartPole-v1", **kw}
    with pytest.raises(ValueError, match=match):
        Impala(client=False, **kw)


def test_evaluate_rejects_bad_episodes():
    r = Impala("CartPole-v1", client=False, **SMALL)
    for bad in (0, -2, 1.5):
        with pytest.raises(ValueError, match="episodes must be an integer >= 1"):
            r.evaluate(bad)
    with pytest.raises(ValueError, match="best=True needs a periodic evaluation"):
        r.evaluate(1, best=True)


def test_cli_train_impala_inline(tmp_path):
    from esnb.cli import main

    out = tmp_path / "run"
    code = main(["train", "impala", "--env", "CartPole-v1", "--workers", "0",
                 "--learner-steps", "20", "--batch-size", "8", "--unroll-length", "10",
                 "--envs-per-actor", "4", "--hidden", "16", "--final-eval", "2",
                 "--out", str(out), "--no-progress"])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["algorithm"] == "Impala" and summary["final_eval_episodes"] == 2
    assert summary["last"]["learner_steps"] >= 20
    assert (out / "checkpoint.npz").exists() and (out / "history.csv").exists()


@pytest.mark.slow
def test_survives_a_killed_worker(fresh_client):
    import os
    import signal

    r = Impala("CartPole-v1", client=fresh_client, seed=2, **SMALL)
    try:
        r.step(2)
        victim = sorted(fresh_client.scheduler_info(n_workers=-1)["workers"])[0]
        pid = fresh_client.run(os.getpid, workers=[victim])[victim]
        os.kill(pid, signal.SIGKILL)  # a crash; its nanny starts a new worker
        r.step(4)
        assert r.version == 30 and r.history.learner_steps.iloc[-1] == 30
        assert np.isfinite(r.history.pg_loss).all()
    finally:
        r.close()


def test_paper_preset_and_resolved_settings():
    from esnb.runners.executor import InlineExecutor
    from esnb.runners.impala import ImpalaConfig

    paper = ImpalaConfig.build(preset="paper")
    assert (paper.optimizer, paper.rmsprop_eps, paper.rmsprop_decay) == ("rmsprop_tf", 0.1, 0.99)
    assert (paper.reward_clipping, paper.entropy_cost, paper.lr) == ("abs_one", 0.00025, 0.00048)
    assert (paper.unroll_length, paper.batch_size, paper.baseline_cost) == (100, 32, 0.5)
    assert paper.actors * paper.envs_per_actor == 48  # the README's 48 actors
    r = Impala("CartPole-v1", client=InlineExecutor(), preset="paper", **SMALL)
    try:
        group = r.learner.opt.param_groups[0]
        assert type(r.learner.opt).__name__ == "RMSpropTF" and not group["centered"]
        assert (group["eps"], group["decay"]) == (0.1, 0.99)
        assert r.controls["reward_clipping"] == "abs_one" and r.controls["entropy_cost"] == 2.5e-4
        assert r.controls["obs_norm"] is False  # none -> off for Discrete actions
        assert r.config_dict()["obs_norm"] is False and r.n_actors == 3
        r.step(1)
        assert r.history.learner_steps.iloc[-1] == 5
    finally:
        r.close()
    # an executor object inline runs exactly as client=False
    a = Impala("CartPole-v1", client=InlineExecutor(), seed=5, **SMALL)
    b = Impala("CartPole-v1", client=False, seed=5, **SMALL)
    try:
        a.step(1)
        b.step(1)
        np.testing.assert_array_equal(a.params, b.params)
        assert a.n_actors == b.n_actors == 2  # actors_per_worker x 1 inline worker
    finally:
        a.close()
        b.close()


def test_train_impala_help_shows_every_setting_with_its_default():
    import contextlib
    import io

    from esnb.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main(["train", "impala", "--help"])
    text = " ".join(out.getvalue().split())
    for part in ("--learner-steps N", "--steps N", "--preset {laptop,paper}",
                 "--rmsprop-eps RMSPROP_EPS", "[default: 0.1]",
                 "--reward-clipping {none,abs_one,soft_asymmetric}",
                 "[default: none; paper: abs_one]", "[default: 0.01; paper: 0.00025; live]",
                 "--obs-norm, --no-obs-norm"):
        assert part in text, part
