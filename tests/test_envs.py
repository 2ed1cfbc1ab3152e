import numpy as np
import pytest

from esnb.envs import FastEnv, ObsStats, make_env, run_episode
from esnb.envs.rollout import gaussian_noise, scaled_noise, uniform_actions
from esnb.nets import NumpyPolicy, PolicySpec, init_params


def test_unknown_id_names_it_and_suggests_close_ids():
    with pytest.raises(ValueError) as e:
        make_env("HalfCheetah-v9")
    msg = str(e.value)
    assert "'HalfCheetah-v9'" in msg and "HalfCheetah-v5" in msg
    with pytest.raises(ValueError, match="unknown environment id 'zzzz'"):
        make_env("zzzz")


def test_cap_truncates_and_termination_is_recorded():
    env = FastEnv("HalfCheetah-v5", max_episode_steps=50)
    spec = PolicySpec.for_spaces(env.observation_space, env.action_space)
    pol = NumpyPolicy(spec, init_params(spec, np.random.default_rng(0)))
    ep = run_episode(env, pol, seed=3)
    assert ep.length == 50 and ep.truncated and not ep.terminated and ep.finite
    # CartPole with a constant action falls over: terminated, not truncated
    cp = FastEnv("CartPole-v1")

    class Left:
        def act(self, obs):
            return 0

    ep = run_episode(cp, Left(), seed=0)
    assert ep.terminated and not ep.truncated and ep.length < 50


def test_same_seed_same_episode():
    env = FastEnv("Hopper-v5", max_episode_steps=200)
    spec = PolicySpec.for_spaces(env.observation_space, env.action_space)
    pol = NumpyPolicy(spec, init_params(spec, np.random.default_rng(0)))
    a, b = run_episode(env, pol, 5), run_episode(env, pol, 5)
    c = run_episode(env, pol, 6)
    assert a.ret == b.ret and a.length == b.length
    assert a.ret != c.ret


def test_observation_sums_merge_exactly():
    env = FastEnv("CartPole-v1")
    spec = PolicySpec.for_spaces(env.observation_space, env.action_space)
    pol = NumpyPolicy(spec, init_params(spec, np.random.default_rng(0)))
    eps = [run_episode(env, pol, s, collect_obs=True) for s in range(4)]
    stats = ObsStats(4)
    for ep in eps:
        stats.add(ep.obs_sum, ep.obs_sumsq, ep.obs_count)
    # replay the same episodes recording every observation the policy acted on
    seen = []
    for s in range(4):
        obs, _ = env.core.reset(seed=s)
        for _ in range(eps[s].length):
            seen.append(obs)
            obs, *_ = env.core.step(pol.act(obs))
    direct = ObsStats(4)
    direct.add_observations(np.array(seen))
    np.testing.assert_allclose(stats.mean, direct.mean, rtol=1e-12)
    np.testing.assert_allclose(stats.std, direct.std, rtol=1e-12)
    assert stats.count == direct.count


def test_recorded_transitions_are_the_steps_taken():
    """The record hook: obs, action, reward, next_obs, done of every step, chained."""
    env = FastEnv("Hopper-v5", max_episode_steps=300)
    rng = np.random.default_rng(0)
    low, high = env.action_space.low, env.action_space.high
    ep = run_episode(env, uniform_actions(low, high, rng), seed=1, record=True)
    tr = ep.transitions
    assert len(tr["obs"]) == len(tr["action"]) == len(tr["reward"]) == ep.length
    np.testing.assert_array_equal(tr["next_obs"][:-1], tr["obs"][1:])
    assert tr["reward"].sum() == pytest.approx(ep.ret)
    assert tr["done"].sum() == int(ep.terminated) and tr["done"][-1] == ep.terminated
    # replaying the recorded actions from the same seed gives the same observations
    obs, _ = env.core.reset(seed=1)
    for t in range(ep.length):
        np.testing.assert_array_equal(tr["obs"][t], obs)
        obs, *_ = env.core.step(tr["action"][t])
    np.testing.assert_array_equal(tr["next_obs"][-1], obs)


def test_exploration_wrappers_stay_in_bounds_and_are_seeded():
    low, high = np.full(3, -1.0, np.float32), np.full(3, 2.0, np.float32)

    def zero(obs):
        return np.zeros(3, np.float32)

    def draws(seed):
        act = scaled_noise(zero, np.float32(5.0), low, high, np.random.default_rng(seed))
        return np.array([act(None) for _ in range(200)])

    a = draws(3)
    assert a.min() == -1.0 and a.max() == 2.0 and np.array_equal(a, draws(3))
    noisy = gaussian_noise(zero, 0.1, np.random.default_rng(0))(None)
    assert noisy.dtype == np.float32 and 0 < np.abs(noisy).max() < 1
    assert gaussian_noise(zero, 0.0, None) is zero
