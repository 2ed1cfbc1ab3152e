"""IMPALA's pieces without Dask: policy heads (numpy vs torch), the unroll queue, the actor
task run in this process, truncation bootstrapping and the learner step."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from esnb.envs.make import env_spaces
from esnb.envs.rollout import FastEnv, run_episode
from esnb.rl.impala.actor_critic import ActorCriticSpec, NumpyActor, init_actor_critic
from esnb.rl.impala.learner import (
    ActorCritic,
    ImpalaLearner,
    LossConfig,
    clip_rewards,
    impala_loss,
    vtrace_inputs,
)
from esnb.rl.impala.unrolls import UnrollQueue
from esnb.rl.impala.vtrace import vtrace
from esnb.rl.optim import RMSprop
from esnb.runners.impala.config import ImpalaConfig
from esnb.runners.impala.tasks import ActorConfig, drop_actors, impala_evaluate, impala_unrolls


def learner_of(spec, flat, obs_norm: bool = False, **settings):
    """IMPALA's learner as a run builds it, from the laptop settings with ``settings``."""
    from esnb.runners.impala.runner import impala_learner

    return impala_learner(ImpalaConfig.build(obs_norm=obs_norm, **settings), spec, flat)


def loss_config(**changes) -> LossConfig:
    """The loss's coefficients as a run takes them (IMPALA's laptop preset), with ``changes``."""

    return LossConfig.of(ImpalaConfig.build(), **changes)


def make_spec(env):
    obs, act, _ = env_spaces(env)
    cfg = ImpalaConfig.build()
    return ActorCriticSpec.for_spaces(obs, act, (16, 16), cfg.activation, cfg.init_log_std)


def payload(spec, flat, version=0):
    return {"version": version, "params": spec.actor_params(flat), "obs_mean": None,
            "obs_std": None}


@pytest.fixture(scope="module")
def cartpole():
    spec = make_spec("CartPole-v1")
    return spec, init_actor_critic(spec, np.random.default_rng(0))


@pytest.mark.parametrize("env", ["CartPole-v1", "HalfCheetah-v5"])
def test_numpy_actor_log_probs_match_torch(env):
    spec = make_spec(env)
    rng = np.random.default_rng(1)
    flat = init_actor_critic(spec, rng)
    flat += rng.normal(0, 0.3, flat.shape).astype(np.float32)  # not a near-uniform policy
    mean = rng.normal(0, 1, spec.obs_dim).astype(np.float32)
    std = rng.uniform(0.5, 2, spec.obs_dim).astype(np.float32)
    actor = NumpyActor(spec, spec.actor_params(flat), mean, std)
    obs = rng.normal(0, 2, (64, spec.obs_dim)).astype(np.float32)
    a, logp = actor.sample(obs, np.random.default_rng(2))
    model = ActorCritic(spec, flat)
    model.set_obs_norm(mean, std)
    with torch.no_grad():
        out, values = model(torch.from_numpy(obs))
        lp, ent = model.log_prob_entropy(out, torch.from_numpy(a))
    np.testing.assert_allclose(logp, lp.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(actor.outputs(obs), out.numpy(), rtol=1e-5, atol=1e-5)
    assert values.shape == (64,) and torch.isfinite(ent).all()
    greedy = actor.greedy(obs)
    if spec.discrete:
        np.testing.assert_array_equal(greedy, out.argmax(1).numpy())
        assert a.dtype == np.int64
    else:
        assert a.shape == (64, spec.act_dim) and a.dtype == np.float32
        assert (greedy <= np.array(spec.policy.high, np.float32)).all()
        # entropy of a diagonal Gaussian: sum(log_std) + d/2 log(2 pi e)
        log_std = float(model.log_std().detach().sum())
        expected = log_std + spec.act_dim * 0.5 * np.log(2 * np.pi * np.e)
        assert float(ent[0]) == pytest.approx(expected, rel=1e-5)


def test_categorical_sampling_frequencies(cartpole):
    spec, flat = cartpole
    flat = flat.copy()
    flat[:spec.policy.num_params] += np.random.default_rng(3).normal(
        0, 1, spec.policy.num_params).astype(np.float32)
    actor = NumpyActor(spec, spec.actor_params(flat))
    obs = np.tile(np.array([[0.1, 0.5, -0.2, 0.3]], np.float32), (20000, 1))
    a, logp = actor.sample(obs, np.random.default_rng(4))
    p1 = float(np.exp(logp[a == 1][0]))
    assert np.mean(a == 1) == pytest.approx(p1, abs=0.015)


def test_actor_params_shape_checked(cartpole):
    spec, flat = cartpole
    with pytest.raises(ValueError, match="actor parameters must have shape"):
        NumpyActor(spec, flat)  # the full vector (with the value MLP) is not an actor's


def test_actor_task_continues_episodes_and_records_truncations():
    spec = make_spec("CartPole-v1")
    flat = init_actor_critic(spec, np.random.default_rng(0))
    cfg = ActorConfig(run="t-parts", env_id="CartPole-v1", spec=spec, envs_per_actor=3, seed=5,
                      max_episode_steps=7)
    try:
        r1 = impala_unrolls(cfg, payload(spec, flat, 4), 0, 0, 2, 5)
        r2 = impala_unrolls(cfg, payload(spec, flat, 5), 0, 1, 1, 5)
    finally:
        drop_actors("t-parts")
    assert r1["obs"].shape == (6, 6, 4) and r1["rewards"].shape == (5, 6)
    assert r1["version"] == 4 and r1["frames"] == 30 and r1["fresh"] and not r2["fresh"]
    # episodes continue: segment 2 starts where segment 1 ended, task 2 where task 1 ended
    np.testing.assert_array_equal(r1["obs"][0, 3:6], r1["obs"][5, 0:3])
    np.testing.assert_array_equal(r2["obs"][0], r1["obs"][5, 3:6])
    # a 7-step cap inside 10 steps: every env is truncated (or terminated) at least once
    ended = r1["terminated"] | r1["truncated"]
    assert not (r1["terminated"] & r1["truncated"]).any()
    assert r1["truncated"].sum() == len(r1["trunc_t"]) > 0
    assert r1["truncated"][r1["trunc_t"], r1["trunc_u"]].all()
    assert (r1["episode_lengths"] <= 7).all() and len(r1["episode_returns"]) == ended.sum()
    # behaviour log-probs are the actor's log mu(a|x)
    model = ActorCritic(spec, flat)
    with torch.no_grad():
        out, _ = model(torch.from_numpy(r1["obs"][:-1].reshape(-1, 4)))
        lp, _ = model.log_prob_entropy(out, torch.from_numpy(r1["actions"].reshape(-1)))
    np.testing.assert_allclose(r1["behaviour_log_probs"].reshape(-1), lp.numpy(), atol=1e-5)


def test_actor_task_is_reproducible():
    spec = make_spec("CartPole-v1")
    flat = init_actor_critic(spec, np.random.default_rng(0))
    outs = []
    for run in ("t-rep-a", "t-rep-b"):
        cfg = ActorConfig(run=run, env_id="CartPole-v1", spec=spec, envs_per_actor=2, seed=9)
        try:
            outs.append(impala_unrolls(cfg, payload(spec, flat), 1, 0, 2, 4))
        finally:
            drop_actors(run)
    for k in ("obs", "actions", "rewards", "behaviour_log_probs"):
        np.testing.assert_array_equal(outs[0][k], outs[1][k])


def test_greedy_evaluation_task(cartpole):
    spec, flat = cartpole
    cfg = ActorConfig(run="t-eval", env_id="CartPole-v1", spec=spec)
    res = impala_evaluate(cfg, payload(spec, flat), np.array([1, 2, 3]))
    assert res["returns"].shape == (3,) and res["finite"].all()
    assert res["steps"] == res["lengths"].sum() == res["returns"].sum()  # reward 1 per step


def one_at_a_time(cfg: ActorConfig, pl: dict, seeds) -> tuple[np.ndarray, np.ndarray]:
    """Greedy episodes as the one episode loop runs them, one after another: (returns,
    lengths)."""
    env = FastEnv(cfg.env_id, cfg.max_episode_steps, dict(cfg.env_kwargs))
    actor = NumpyActor(cfg.spec, pl["params"], pl["obs_mean"], pl["obs_std"])

    def act(obs):
        a = actor.greedy(np.ravel(obs)[None])[0]
        return int(a) if cfg.spec.discrete else a

    episodes = [run_episode(env, act, int(seed)) for seed in seeds]
    env.close()
    return (np.array([ep.ret for ep in episodes]), np.array([ep.length for ep in episodes]))


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_greedy_evaluation_in_lock_step_plays_the_episodes_one_at_a_time_would(env_id):
    """Five episodes stepped together (one batched forward a step) are the five episodes run
    one after another: the same lengths and returns, in the seeds' order."""
    spec = make_spec(env_id)
    flat = init_actor_critic(spec, np.random.default_rng(3))
    cfg = ActorConfig(run="t-lockstep", env_id=env_id, spec=spec, max_episode_steps=150)
    pl = payload(spec, flat)
    if env_id == "Pendulum-v1":  # normalised observations take the same path
        pl.update(obs_mean=np.array([0.1, -0.2, 0.3]), obs_std=np.array([0.9, 1.1, 2.0]))
    seeds = np.array([11, 5, 7, 3, 2])
    res = impala_evaluate(cfg, pl, seeds)
    returns, lengths = one_at_a_time(cfg, pl, seeds)
    np.testing.assert_array_equal(res["lengths"], lengths)
    if spec.discrete:  # the same actions: the same episodes, to the bit
        np.testing.assert_array_equal(res["returns"], returns)
        assert len(set(lengths.tolist())) > 1  # episodes end apart: slots refill and move
    else:  # a float32 product over 5 rows or 1 rounds apart (~1e-7 per action)
        np.testing.assert_allclose(res["returns"], returns, rtol=1e-9)
    assert res["steps"] == lengths.sum() and res["finite"].all()


def fake_result(T, U, version, D=4, trunc=((1, 2),), finite=None, seed=0):
    rng = np.random.default_rng(seed)
    truncated = np.zeros((T, U), bool)
    tt = np.array([t for t, _ in trunc], np.int64)
    tu = np.array([u for _, u in trunc], np.int64)
    truncated[tt, tu] = True
    return {"obs": rng.normal(size=(T + 1, U, D)).astype(np.float32),
            "actions": rng.integers(0, 2, (T, U)), "rewards": np.ones((T, U), np.float32),
            "terminated": np.zeros((T, U), bool), "truncated": truncated,
            "behaviour_log_probs": np.full((T, U), -0.69, np.float32),
            "trunc_t": tt, "trunc_u": tu,
            "trunc_obs": (tu[:, None] + 100 * version).astype(np.float32).repeat(D, 1),
            "finite": np.ones(U, bool) if finite is None else np.asarray(finite),
            "version": version}


def test_queue_batches_across_blocks_in_order():
    q = UnrollQueue()
    q.add(fake_result(3, 4, version=1, trunc=((1, 2), (0, 3))))
    q.add(fake_result(3, 4, version=2, trunc=((2, 1),)))
    assert q.ready(3) == 8
    b = q.take(6, 3)
    assert b.B == 6 and b.T == 3
    np.testing.assert_array_equal(b.versions, [1, 1, 1, 1, 2, 2])
    # truncations moved with their unrolls: block 1's u=2, 3 and block 2's u=1 (-> 5)
    got = sorted(zip(b.trunc_t.tolist(), b.trunc_b.tolist(), b.trunc_obs[:, 0].tolist(),
                     strict=True))
    assert got == [(0, 3, 103.0), (1, 2, 102.0), (2, 5, 201.0)]
    assert b.truncated[b.trunc_t, b.trunc_b].all()
    assert len(q) == 2
    with pytest.raises(ValueError, match="asked for 3, 2 queued"):
        q.take(3, 3)
    assert len(q) == 2  # nothing taken


def test_queue_drops_broken_and_other_length_unrolls():
    q = UnrollQueue()
    assert q.add(fake_result(3, 4, 1, trunc=((1, 1), (1, 3)), finite=[1, 0, 1, 1])) == 3
    assert q.dropped_nonfinite == 1
    b = q.take(3, 3)
    assert b.trunc_b.tolist() == [2]  # old unroll 1 (dropped) goes, 3 -> 2
    q.add(fake_result(5, 4, 2))
    q.add(fake_result(3, 2, 3, trunc=((0, 1),)))
    assert q.ready(3) == 2 and q.dropped_length == 4


def test_truncation_bootstraps_from_value_of_cut_off_state(cartpole):
    spec, flat = cartpole
    q = UnrollQueue()
    q.add(fake_result(4, 3, 0, trunc=((1, 2),)))
    batch = q.take(3, 4)
    model = ActorCritic(spec, flat)
    cfg = loss_config(discount=0.9)
    x = vtrace_inputs(model, batch, cfg)
    with torch.no_grad():
        _, v_cut = model(torch.from_numpy(batch.trunc_obs))
    assert float(x["discounts"][1, 2]) == 0.0 and float(x["discounts"][1, 1]) == pytest.approx(0.9)
    assert float(x["rewards"][1, 2]) == pytest.approx(1.0 + 0.9 * float(v_cut[0]), rel=1e-6)
    assert float(x["rewards"][0, 2]) == 1.0
    # no correction: target log-probs are the behaviour ones, so rho = c = 1
    x0 = vtrace_inputs(model, batch, loss_config(correction="none"))
    assert torch.equal(x0["target"], x0["behaviour"])
    with pytest.raises(ValueError, match="correction must be one of"):
        vtrace_inputs(model, batch, loss_config(correction="retrace"))


def test_reward_clipping_enters_vtrace_before_scaling_and_bootstrapping(cartpole):
    spec, flat = cartpole
    q = UnrollQueue()
    block = fake_result(4, 3, 0, trunc=((1, 2),))
    block["rewards"] = np.array([[-7.0, -0.5, 3.0], [0.25, 12.0, 2.0], [-1.0, 1.0, 0.0],
                                 [-30.0, 0.9, 5.0]], np.float32)
    q.add(block)
    batch = q.take(3, 4)
    model = ActorCritic(spec, flat)
    raw = torch.from_numpy(block["rewards"])
    with torch.no_grad():
        _, v_cut = model(torch.from_numpy(batch.trunc_obs))
    boot = 0.9 * float(v_cut[0])
    for mode, clipped in [
        ("none", raw),
        ("abs_one", raw.clamp(-1, 1)),
        # the released code: 5 tanh(r / 5), negative rewards weighted 0.3
        ("soft_asymmetric", torch.where(raw < 0, 0.3, 1.0) * 5 * torch.tanh(raw / 5)),
    ]:
        x = vtrace_inputs(model, batch, loss_config(discount=0.9, reward_clipping=mode,
                                                   reward_scale=2.0))
        want = 2.0 * clipped
        want[1, 2] += boot  # the truncation's bootstrap value is neither clipped nor scaled
        torch.testing.assert_close(x["rewards"], want, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(clip_rewards(raw, "abs_one"), raw.clamp(-1, 1))
    with pytest.raises(ValueError, match="reward_clipping must be one of"):
        vtrace_inputs(model, batch, loss_config(reward_clipping="sign"))


def test_rmsprop_epsilon_and_decay_are_settings(cartpole):
    spec, flat = cartpole
    learner = learner_of(spec, flat, optimizer="rmsprop", rmsprop_eps=0.01,
                         rmsprop_decay=0.95)
    group = learner.opt.param_groups[0]
    assert isinstance(learner.opt, RMSprop)  # torch.optim.RMSprop's rule (tests/test_optim.py)
    assert (group["eps"], group["alpha"], group["momentum"]) == (0.01, 0.95, 0)
    default = learner_of(spec, flat, optimizer="rmsprop").opt.param_groups[0]
    assert (default["eps"], default["alpha"]) == (0.1, 0.99)  # the released code's


def test_loss_gradient_and_learner_step(cartpole):
    spec, flat = cartpole
    q = UnrollQueue()
    q.add(fake_result(5, 4, 0))
    batch = q.take(4, 5)
    model = ActorCritic(spec, flat)
    loss, stats = impala_loss(model, batch, loss_config())
    loss.backward()
    assert model.flat.grad is not None and torch.isfinite(model.flat.grad).all()
    # the baseline term is baseline_cost * 1/2 sum (v_s - V)^2 with the V-trace targets
    x = vtrace_inputs(model, batch, loss_config())
    vt = vtrace(x["behaviour"], x["target"], x["rewards"], x["discounts"],
                x["values"][:5].detach(), x["values"][5].detach())
    expected = 0.5 * 0.5 * float((vt.vs - x["values"][:5].detach()).square().sum())
    assert stats["baseline_loss"] == pytest.approx(expected, rel=1e-5)
    # value_std: the spread of the values over the batch's states (0: a collapsed network)
    values = x["values"][:5].detach()
    assert stats["value_std"] == pytest.approx(float(values.std(correction=0)), rel=1e-5)
    assert stats["value_std"] > 0
    still = flat.copy()
    still[spec.layout.offsets()["value"]] = 0.0  # a value head that ignores its input
    _, flat_stats = impala_loss(ActorCritic(spec, still), batch, loss_config())
    assert flat_stats["value_std"] == 0.0

    learner = learner_of(spec, flat, lr=1e-2)
    before = learner.flat
    out = learner.step(batch, loss_config(), lr=1e-2, max_grad_norm=1.0)
    assert learner.version == 1 and out["grad_norm"] > 0
    assert not np.array_equal(before, learner.flat)
    batch.behaviour_log_probs[0, 0] = np.nan
    with pytest.raises(ValueError, match="behaviour_log_probs must be finite"):
        learner.step(batch, loss_config(), lr=1e-2)
    assert learner.version == 1


@pytest.mark.parametrize("optimizer", ["adam", "rmsprop"])
def test_learner_state_round_trip(cartpole, optimizer):
    spec, flat = cartpole
    q = UnrollQueue()
    for v in range(3):
        q.add(fake_result(5, 4, v, seed=v))
    learner = learner_of(spec, flat, optimizer=optimizer, obs_norm=True)
    learner.step(q.take(4, 5), loss_config(), lr=1e-3)
    meta, arrays = learner.state_dict()
    other = learner_of(spec, init_actor_critic(spec, np.random.default_rng(9)),
                       optimizer=optimizer, obs_norm=True)
    other.load_state_dict(meta, arrays)
    b = q.take(4, 5)
    learner.step(b, loss_config(), lr=1e-3)
    other.step(b, loss_config(), lr=1e-3)
    np.testing.assert_array_equal(learner.flat, other.flat)
    assert learner.version == other.version == 2
    np.testing.assert_array_equal(learner.obs_stats.mean, other.obs_stats.mean)
    with pytest.raises(ValueError, match="optimizer must be one of"):
        cfg = ImpalaConfig.build()
        ImpalaLearner(spec, flat, lr=cfg.lr, optimizer="sgd", obs_norm=False,
                      rmsprop_eps=cfg.rmsprop_eps, rmsprop_decay=cfg.rmsprop_decay)


def test_the_learners_wait_warning_names_a_running_evaluation():
    """The warning after a long wait for actors says when a greedy evaluation holds the
    workers' threads (its tasks go first), and only otherwise asks about the cluster."""
    from types import SimpleNamespace

    from esnb.runners.impala.feed import UnrollFeed

    feed = UnrollFeed()
    feed.evals = SimpleNamespace(pending=["eval-0", "eval-1"])
    assert feed._wait_reason() == (" while a greedy evaluation (2 tasks, ahead of theirs) runs "
                                   "on the workers")
    feed.evals.pending = []
    assert feed._wait_reason() == ": is the cluster alive?"
