"""TD3 pieces of AES-RL / CEM-RL: networks, the critic learner, actor training (torch only)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from esnb.rl.td3 import (
    FIXED,
    CriticLearner,
    NumpyTD3Actor,
    TD3Actor,
    TD3Config,
    TwinCritic,
    actor_spec,
    critic_from_flat,
    init_actor,
    train_actor,
)

OBS, ACT = 3, 2
SLOPE = FIXED["leaky_slope"]


def td3_config(**changes) -> TD3Config:
    """TD3's settings as a run builds them (AES-RL's laptop preset), with ``changes``."""
    from esnb.runners.aesrl.config import AESRLConfig

    return TD3Config.of(AESRLConfig.build(), **changes)


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """One intra-op thread, as on esnb's workers: on this shared 2-core machine torch's default
    two threads made these small updates ~10x slower under load (spin-waiting)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def spec(hidden=(16, 16), low=(-1.0, -2.0), high=(1.0, 0.0)):
    return actor_spec(OBS, ACT, low, high, hidden)


def test_numpy_actor_matches_torch_and_respects_bounds():
    s = spec()
    flat = init_actor(s, np.random.default_rng(0)) * 20  # saturate some outputs
    obs = np.random.default_rng(1).standard_normal((50, OBS)).astype(np.float32)
    with torch.no_grad():
        expected = TD3Actor(s, flat)(torch.as_tensor(obs)).numpy()
    actor = NumpyTD3Actor(s, flat)
    got = np.stack([actor.act(o) for o in obs])
    assert got == pytest.approx(expected, abs=1e-5)
    assert np.all(got >= [-1, -2]) and np.all(got <= [1, 0])


def test_numpy_actor_returns_a_fresh_array_that_noise_may_change_in_place():
    """AES-RL's exploration (esnb.envs.rollout.scaled_noise) adds noise to act()'s array in
    place, and run_episode records each action: every call must return a new array."""
    from esnb.envs.rollout import scaled_noise

    s = spec()
    actor = NumpyTD3Actor(s, init_actor(s, np.random.default_rng(0)))
    obs = np.ones(OBS, dtype=np.float32)
    first, second = actor.act(obs), actor.act(obs)
    assert first is not second and not np.shares_memory(first, second)
    clean = first.copy()
    noisy = scaled_noise(actor.act, np.float32(0.5) * actor.half, actor.low, actor.high,
                         np.random.default_rng(2))
    a = noisy(obs)
    assert not np.array_equal(a, clean) and np.array_equal(first, clean)
    assert np.all(a >= actor.low) and np.all(a <= actor.high)


def test_init_is_torch_linear_default():
    s = spec(hidden=(400, 300))
    flat = init_actor(s, np.random.default_rng(0))
    for w, (_o, i), b in s.slices():
        bound = 1 / np.sqrt(i)
        assert np.abs(flat[w]).max() <= bound and np.abs(flat[w]).max() > 0.95 * bound
        assert np.abs(flat[b]).max() <= bound


@pytest.mark.parametrize("hidden", [(16, 16), (200, 150)])  # batched and per-head paths
def test_twin_critic_heads_agree_with_q1(hidden):
    c = TwinCritic(OBS, ACT, hidden, SLOPE, generator=torch.Generator().manual_seed(0))
    o, a = torch.randn(7, OBS), torch.randn(7, ACT)
    q = c(o, a)
    assert q.shape == (2, 7)
    assert torch.allclose(q[0], c.q1(o, a), atol=1e-5)
    assert not torch.allclose(q[0], q[1])
    c2 = TwinCritic(OBS, ACT, hidden, SLOPE)
    c2.load_flat(c.flat())
    assert torch.allclose(c2(o, a), q)


def _bandit_batches(rng, k=400, b=64):
    """One-step episodes: r = -|a - a*|^2 with a* = (0.5, -1.5), done = 1, so Q(s, a) = r."""
    a = rng.uniform([-1, -2], [1, 0], size=(k, b, ACT)).astype(np.float32)
    r = -np.square(a - np.array([0.5, -1.5], dtype=np.float32)).sum(-1)
    obs = np.zeros((k, b, OBS), np.float32)  # a bandit: Q depends on the action only
    return {"obs": obs, "action": a, "reward": r.astype(np.float32),
            "next_obs": obs.copy(), "done": np.ones((k, b), np.float32)}


def test_critic_learns_q_and_actor_climbs_it():
    s = spec()
    cfg = td3_config(actor_hidden=(16, 16), critic_hidden=(32, 32), critic_lr=1e-2,
                    actor_lr=3e-3)
    learner = CriticLearner(s, cfg, seed=0)
    learner.set_target_policy(init_actor(s, np.random.default_rng(0)))
    rng = np.random.default_rng(0)
    stats = learner.train(_bandit_batches(rng, k=600))
    assert stats["updates"] == 600 and learner.updates == 600
    test = _bandit_batches(rng, k=1, b=500)
    with torch.no_grad():
        q = learner.critic(torch.as_tensor(test["obs"][0]), torch.as_tensor(test["action"][0]))
    err = np.abs(q.numpy() - test["reward"][0]).mean()
    assert err < 0.1 * np.abs(test["reward"]).mean()
    # the actor ascends Q1: its actions move to a* = (0.5, -1.5)
    version, flat = learner.publish()
    assert version == 1 and learner.version == 1
    critic = critic_from_flat(s, cfg, flat)
    actor0 = init_actor(s, np.random.default_rng(3))
    chunks = (np.zeros((100, 64, OBS), np.float32) for _ in range(10))
    trained, info = train_actor(s, cfg, actor0, critic, chunks, steps=300)
    assert info["steps"] == 300 and info["actor_loss_last"] < info["actor_loss_first"]
    act = NumpyTD3Actor(s, trained).act(np.zeros(OBS, np.float32))
    assert act == pytest.approx([0.5, -1.5], abs=0.15)
    assert not any(p.requires_grad for p in critic.parameters())


def test_train_actor_stops_at_steps_and_copes_with_short_data():
    s = spec()
    cfg = td3_config(actor_hidden=(16, 16), critic_hidden=(16, 16))
    critic = TwinCritic(OBS, ACT, (16, 16), SLOPE)
    chunks = [np.zeros((5, 8, OBS), np.float32)] * 3
    _, info = train_actor(s, cfg, init_actor(s, np.random.default_rng(0)), critic, chunks, 12)
    assert info["steps"] == 12
    _, info = train_actor(s, cfg, init_actor(s, np.random.default_rng(0)), critic, chunks, 99)
    assert info["steps"] == 15  # the data ran out first


def test_td3_step_delays_the_actor_and_the_targets():
    s = spec()
    cfg = td3_config(actor_hidden=(16, 16), critic_hidden=(16, 16), policy_delay=2)
    learner = CriticLearner(s, cfg, seed=1)
    batch = {k: v[0] for k, v in _bandit_batches(np.random.default_rng(0), k=1).items()}
    out = learner.td3_step(batch)
    assert np.isnan(out["actor_loss"])
    actor_before = learner.actor.params()
    target_before = learner.target.flat()
    assert np.array_equal(learner.actor_target.params(), actor_before)
    out = learner.td3_step(batch)
    assert np.isfinite(out["actor_loss"])
    assert not np.array_equal(learner.actor.params(), actor_before)
    assert not np.array_equal(learner.target.flat(), target_before)
    assert learner.updates == 2


def test_state_dict_round_trip_continues_identically():
    s = spec()
    cfg = td3_config(actor_hidden=(16, 16), critic_hidden=(16, 16))
    rng = np.random.default_rng(0)
    data = _bandit_batches(rng, k=20)
    a = CriticLearner(s, cfg, seed=5)
    a.set_target_policy(init_actor(s, rng))
    a.train(data, 10)
    state = {k: v.copy() for k, v in a.state_dict().items()}
    b = CriticLearner(s, cfg, seed=99)
    b.load_state_dict(state)
    rest = {k: v[10:] for k, v in data.items()}
    a.train(rest)
    b.train(rest)
    assert np.array_equal(a.critic.flat(), b.critic.flat())
    assert np.array_equal(a.target.flat(), b.target.flat())
    assert a.updates == b.updates == 20


@pytest.mark.parametrize("kwargs, match", [
    ({"actor_hidden": ()}, "actor_hidden"), ({"critic_lr": 0.0}, "critic_lr"),
    ({"gamma": 1.5}, "gamma"), ({"policy_delay": 0}, "policy_delay"),
    ({"batch_size": 0}, "batch_size"),
])
def test_config_rejects_bad_values(kwargs, match):
    with pytest.raises(ValueError, match=match):
        td3_config(**kwargs)


def test_actor_needs_finite_bounds_and_cpu_sizes_are_one_argument():
    with pytest.raises(ValueError, match="finite action bounds"):
        actor_spec(3, 1, [-np.inf], [np.inf], (8,))
    from esnb.runners.aesrl.config import AESRLConfig

    cfg = td3_config()
    assert cfg.actor_hidden == (64, 64) and cfg.policy_delay == 2
    paper = TD3Config.of(AESRLConfig.build("paper"))
    assert paper.critic_hidden == (400, 300) and paper.critic_lr == 1e-3
    assert TD3Config.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(TypeError):
        TD3Config()  # no defaults: the settings own them


def test_a_state_saved_with_in_out_weights_loads():
    """Before the critic was one flat vector its state held each head's weights ``[in, out]``
    and Adam's steps per tensor: such a state loads laid out ``[out, in]``."""
    s = spec()
    cfg = td3_config(actor_hidden=(16, 16), critic_hidden=(16, 8))
    a = CriticLearner(s, cfg, seed=5)
    a.set_target_policy(init_actor(s, np.random.default_rng(0)))
    a.train(_bandit_batches(np.random.default_rng(0), k=3))
    new = a.state_dict()
    sizes, old = (OBS + ACT, 16, 8, 1), dict(new)
    for k in ("critic", "critic_target", "critic_adam_m", "critic_adam_v"):
        parts, pos = [], 0
        for _head in range(2):
            for i, o in zip(sizes[:-1], sizes[1:]):
                parts += [new[k][pos:pos + o * i].reshape(o, i).T.ravel(),
                          new[k][pos + o * i:pos + o * i + o]]
                pos += o * i + o
        old[k] = np.concatenate(parts)
    old["critic_adam_step"] = np.full(12, new["critic_adam_step"][0])
    b = CriticLearner(s, cfg, seed=9)
    b.load_state_dict(old)
    for k, v in b.state_dict().items():
        assert np.array_equal(v, new[k]), k
