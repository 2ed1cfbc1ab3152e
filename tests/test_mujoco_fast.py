"""esnb's direct MuJoCo step (esnb.envs.mujoco_fast) gives gymnasium v5's bits.

Every covered task is stepped beside gymnasium's own ``env.step`` (the registered env with its
wrappers) for whole episodes, on random and on policy actions, seeded: observations and rewards
must be bitwise equal, the flags equal, and the episode must end where gymnasium's does.
"""

import gymnasium as gym
import numpy as np
import pytest

from esnb.envs import FastEnv, run_episode
from esnb.envs.mujoco_fast import MujocoCore
from esnb.nets import NumpyPolicy, PolicySpec, init_params

COVERED = ["HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Swimmer-v5", "Ant-v5",
           "Humanoid-v5", "InvertedPendulum-v5", "InvertedDoublePendulum-v5"]

#: non-default settings each task reads in its step (gymnasium honours them; so must we)
KWARGS = [
    ("HalfCheetah-v5", {"ctrl_cost_weight": 0.5, "forward_reward_weight": 2.0, "frame_skip": 3,
                        "exclude_current_positions_from_observation": False}),
    ("Hopper-v5", {"terminate_when_unhealthy": False, "healthy_reward": 2.5,
                   "healthy_angle_range": (-0.5, 0.5)}),
    ("Walker2d-v5", {"healthy_z_range": (0.5, 3.0), "ctrl_cost_weight": 0.01}),
    ("Swimmer-v5", {"exclude_current_positions_from_observation": False}),
    ("Ant-v5", {"include_cfrc_ext_in_observation": False, "contact_force_range": (-2.0, 2.0),
                "main_body": "torso", "healthy_z_range": (0.3, 1.2)}),
    ("Humanoid-v5", {"include_cinert_in_observation": False, "include_cvel_in_observation": False,
                     "contact_cost_range": (-np.inf, 1e-4)}),
    ("InvertedDoublePendulum-v5", {"healthy_reward": 3.0}),
]


def _policy(env, seed):
    """A tanh MLP with large enough outputs to reach the action bounds."""
    spec = PolicySpec.for_spaces(env.observation_space, env.action_space)
    return NumpyPolicy(spec, init_params(spec, np.random.default_rng(seed), out_std=1.0))


def _same_bits(a, b):
    return np.asarray(a, np.float64).tobytes() == np.asarray(b, np.float64).tobytes()


def _episodes_side_by_side(env_id, kwargs, seeds, actions):
    """Step gymnasium's env and esnb's direct core together from the same seeds; return the
    steps compared."""
    ref = gym.make(env_id, **kwargs)
    fast = FastEnv(env_id, env_kwargs=kwargs)
    assert isinstance(fast.core, MujocoCore), env_id
    steps = 0
    for seed in seeds:
        act = actions(fast, seed)
        o_ref, _ = ref.reset(seed=seed)
        o_fast, _ = fast.core.reset(seed=seed)
        assert _same_bits(o_ref, o_fast)
        for t in range(1, fast.limit + 1):
            a = act(o_ref)
            o_ref, r_ref, term_ref, trunc_ref, _ = ref.step(a)
            o_fast, r_fast, term_fast, trunc_fast, _ = fast.core.step(a)
            steps += 1
            assert _same_bits(o_ref, o_fast), (env_id, seed, t)
            assert _same_bits(r_ref, r_fast) and type(r_ref) is type(r_fast), (env_id, seed, t)
            assert bool(term_ref) == bool(term_fast), (env_id, seed, t)
            # the core has no time limit: FastEnv's loop truncates at its limit, as TimeLimit
            assert bool(trunc_ref) == (t == fast.limit and not term_ref), (env_id, seed, t)
            if term_ref or trunc_ref:
                break
    ref.close()
    fast.close()
    return steps


def _random_actions(fast, seed):
    rng = np.random.default_rng(seed)
    low, high = fast.action_space.low, fast.action_space.high
    return lambda obs: rng.uniform(low, high).astype(np.float32)


def _policy_actions(fast, seed):
    return _policy(fast, seed).act


@pytest.mark.parametrize("env_id", COVERED)
def test_direct_step_is_gymnasiums_bitwise(env_id):
    steps = _episodes_side_by_side(env_id, {}, [0, 1], _random_actions)
    steps += _episodes_side_by_side(env_id, {}, [2, 3], _policy_actions)
    assert steps >= 8  # whole episodes, however short the task's falls


@pytest.mark.parametrize("env_id,kwargs", KWARGS, ids=[k for k, _ in KWARGS])
def test_direct_step_honours_env_kwargs(env_id, kwargs):
    assert _episodes_side_by_side(env_id, kwargs, [4], _random_actions) >= 2
    assert _episodes_side_by_side(env_id, kwargs, [5], _policy_actions) >= 2


def test_half_cheetah_whole_episode_to_the_time_limit():
    """A 1000-step episode compared at every step, then the episode loop's result against
    gymnasium's path (FastEnv(direct=False)) on the same policy and seed."""
    assert _episodes_side_by_side("HalfCheetah-v5", {}, [7], _policy_actions) == 1000
    direct, gym_path = FastEnv("HalfCheetah-v5"), FastEnv("HalfCheetah-v5", direct=False)
    assert not isinstance(gym_path.core, MujocoCore)
    pol = _policy(direct, 3)
    a = run_episode(direct, pol, 11, collect_obs=True)
    b = run_episode(gym_path, pol, 11, collect_obs=True)
    assert (a.ret, a.length, a.terminated, a.truncated) == (b.ret, b.length, b.terminated,
                                                             b.truncated)
    assert a.length == 1000 and a.truncated
    assert a.obs_sum.tobytes() == b.obs_sum.tobytes()
    assert a.obs_sumsq.tobytes() == b.obs_sumsq.tobytes()


def test_other_ids_and_rendering_keep_gymnasiums_step():
    """Ids this module does not reproduce (a v4 task, a classic-control one, a task it does not
    cover) and a rendering env step through gymnasium as before."""
    for env_id, kwargs in [("HalfCheetah-v4", {}), ("CartPole-v1", {}), ("Reacher-v5", {}),
                           ("HalfCheetah-v5", {"render_mode": "rgb_array"})]:
        env = FastEnv(env_id, env_kwargs=kwargs)
        assert not isinstance(env.core, MujocoCore), env_id
        assert env.core is env.env.unwrapped
        env.close()
