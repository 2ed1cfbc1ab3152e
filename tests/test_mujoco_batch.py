"""Batched MuJoCo lock step (esnb.envs.mujoco_batch) gives run_lockstep's episodes, bit for bit.

Per batched task, a task's worth of episodes (mixed seeds, some summing observations, some with
action noise, more episodes than rows so rows are refilled and packed) runs through
``run_batched`` and through ``run_lockstep``: every Episode field must be equal, bitwise. The
tasks the batch cannot give exactly (Ant, Humanoid: ``cfrc_ext``), and everything else
``supports`` refuses, stay on run_lockstep.
"""

import numpy as np
import pytest

from esnb.envs import FastEnv
from esnb.envs.lockstep import EpisodeSpec, run_lockstep
from esnb.envs.mujoco_batch import run_batched, supports
from esnb.envs.rollout import gaussian_noise
from esnb.nets import PolicySpec, init_params
from esnb.nets.batch_policy import BatchPolicy
from esnb.noise import NoiseConfig
from esnb.runners.es import tasks
from esnb.runners.es.tasks import PolicyPayload, RolloutConfig, es_pairs

WIDTH, EPISODES = 4, 10


def _specs(spec, params, noisy=(), huge=None, wide=None):
    """The episodes: seeds mixed, even ones summing observations; ``noisy`` ones with action
    noise (a fresh generator per call, so both runners draw the same), ``huge`` one with
    actions whose squares overflow float32 (an infinite cost ends it non-finite), ``wide`` one
    whose perturbation returns float64 actions."""
    out = []
    for i, p in enumerate(params):
        perturb = None
        if i in noisy:
            perturb = gaussian_noise(lambda a: a, 0.3, np.random.default_rng([i, 7]),
                                     spec.low, spec.high)
        elif i == huge:
            def perturb(a):
                return a * np.float32(1e25)
        elif i == wide:
            def perturb(a):
                return np.clip(a.astype(np.float64) * 0.7, -0.9, 0.9)
        out.append(EpisodeSpec(p if i % 3 else (lambda p=p: p), 1000 + 37 * i, i % 2 == 0,
                               perturb))
    return out


def _same(a, b):
    assert (a.ret, a.length, a.terminated, a.truncated, a.finite, a.obs_count) == \
        (b.ret, b.length, b.terminated, b.truncated, b.finite, b.obs_count)
    for x, y in ((a.obs_sum, b.obs_sum), (a.obs_sumsq, b.obs_sumsq)):
        assert (x is None and y is None) or x.tobytes() == y.tobytes()


def _both(env_id, steps, kwargs=None, out_std=1.0, **flags):
    """(batched, lockstep) episodes of one task's worth of episodes."""
    envs = [FastEnv(env_id, steps, kwargs) for _ in range(WIDTH)]
    assert supports(envs[0])
    spec = PolicySpec.for_spaces(envs[0].observation_space, envs[0].action_space)
    rng = np.random.default_rng(len(env_id))
    params = [init_params(spec, rng, out_std=out_std) for _ in range(EPISODES)]
    mean, std = rng.standard_normal(spec.obs_dim) * 0.1, rng.uniform(0.5, 2.0, spec.obs_dim)
    got = run_batched(envs[:1], BatchPolicy(spec, WIDTH, mean, std),
                      _specs(spec, params, **flags))
    want = run_lockstep(envs, BatchPolicy(spec, WIDTH, mean, std), _specs(spec, params, **flags))
    for a, b in zip(got, want, strict=True):
        _same(a, b)
    return want


@pytest.mark.parametrize("env_id,steps,out_std", [
    ("HalfCheetah-v5", 60, 1.0), ("Swimmer-v5", 60, 1.0), ("Hopper-v5", 150, 1.0),
    ("Walker2d-v5", 60, 0.1), ("InvertedPendulum-v5", 20, 0.1),
    ("InvertedDoublePendulum-v5", 10, 0.1)])
def test_batched_episodes_are_run_lockstep_episodes(env_id, steps, out_std):
    """Episodes ending by termination (falls) and by the time limit, refilled and packed rows,
    action noise, observation sums: the same bits."""
    eps = _both(env_id, steps, out_std=out_std, noisy=(1, 4))
    assert any(e.truncated and e.length == steps for e in eps)
    if not env_id.startswith(("HalfCheetah", "Swimmer")):  # these never terminate
        assert any(e.terminated for e in eps)
    if env_id != "InvertedPendulum-v5":  # its returns are counts of steps
        assert len({e.ret for e in eps}) == len(eps)


@pytest.mark.parametrize("env_id,kwargs", [
    ("HalfCheetah-v5", {"ctrl_cost_weight": 0.5, "forward_reward_weight": 2.0, "frame_skip": 3,
                        "exclude_current_positions_from_observation": False}),
    ("Hopper-v5", {"terminate_when_unhealthy": False, "healthy_reward": 2.5,
                   "healthy_angle_range": (-0.5, 0.5)}),
    ("Walker2d-v5", {"healthy_z_range": (0.5, 3.0), "ctrl_cost_weight": 0.01}),
    ("Swimmer-v5", {"exclude_current_positions_from_observation": False}),
    ("InvertedDoublePendulum-v5", {"healthy_reward": 3.0}),
])
def test_batched_honours_env_kwargs(env_id, kwargs):
    _both(env_id, 80, kwargs, noisy=(2,))


@pytest.mark.filterwarnings("ignore:overflow encountered in square")
def test_non_finite_rewards_and_other_action_dtypes():
    """An episode whose control cost overflows ends at its first step, not finite, as
    run_lockstep ends it; float64 actions from a perturbation are costed on their own dtype."""
    eps = _both("HalfCheetah-v5", 40, huge=3, wide=5, noisy=(1,))
    assert not eps[3].finite and eps[3].length == 1
    assert all(e.finite for i, e in enumerate(eps) if i != 3)


@pytest.mark.parametrize("env_id,kwargs,direct", [
    ("Ant-v5", None, True),  # cfrc_ext: gymnasium's mj_rnePostConstraint after the step
    ("Humanoid-v5", None, True),
    ("Hopper-v5", {"render_mode": "rgb_array"}, True),  # renders: gymnasium's own step
    ("Hopper-v5", None, False),  # gymnasium's step asked for
    ("CartPole-v1", None, True),  # not MuJoCo
])
def test_unsupported_environments_fall_back(env_id, kwargs, direct):
    env = FastEnv(env_id, 20, kwargs, direct=direct)
    assert not supports(env)
    assert tasks.lockstep_runner(env) is run_lockstep


def test_es_tasks_batch_supported_tasks_with_the_same_results():
    """es_pairs on a batched task gives the same arrays with and without the batch."""
    env = FastEnv("Hopper-v5", 100)
    assert tasks.lockstep_runner(env) is run_batched
    spec = PolicySpec.for_spaces(env.observation_space, env.action_space)
    cfg = RolloutConfig("Hopper-v5", spec, NoiseConfig(size=1 << 16, seed=3),
                        max_episode_steps=100, action_noise=0.05)
    rng = np.random.default_rng(5)
    payload = PolicyPayload(init_params(spec, rng), rng.standard_normal(spec.obs_dim),
                            rng.uniform(0.5, 2.0, spec.obs_dim), 0.1)
    indices, seeds = np.arange(9) * 301, np.arange(9) + 11
    collect = rng.random((9, 2)) < 0.4
    now = es_pairs(cfg, payload, indices, seeds, collect)
    before = es_pairs(cfg, payload, indices, seeds, collect, batched=False)
    for key in ("returns", "lengths", "terminated", "truncated", "finite", "obs_sum",
                "obs_sumsq", "obs_count", "steps"):
        assert np.array_equal(now[key], before[key]), key
