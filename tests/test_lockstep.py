"""Lock-step episodes (esnb.envs.lockstep, esnb.nets.batch_policy) are run_episode's, bit for bit.

Each episode of a lock-step batch (its own parameters, seed, observation flag and action noise)
must give the :class:`Episode` that ``run_episode`` gives one at a time, whatever the width
(slots refilled as episodes end, or packed when none wait); ES's task results and θ then stay
as they were (the golden digests, ``tests/test_es_golden.py``, cover the whole run).
"""

import numpy as np
import pytest

from esnb.envs import FastEnv, run_episode
from esnb.envs.lockstep import EpisodeSpec, run_lockstep
from esnb.envs.rollout import gaussian_noise
from esnb.nets import NumpyPolicy, PolicySpec, init_params
from esnb.nets.batch_policy import BatchPolicy
from esnb.noise import NoiseConfig
from esnb.runners.es.tasks import PolicyPayload, RolloutConfig, es_pairs


def _setup(env_id, n, seed=0, relu=False, **kwargs):
    env = FastEnv(env_id, **kwargs)
    spec = PolicySpec.for_spaces(env.observation_space, env.action_space,
                                 activation="relu" if relu else "tanh")
    rng = np.random.default_rng(seed)
    params = [init_params(spec, rng, out_std=1.0) for _ in range(n)]
    mean = rng.standard_normal(spec.obs_dim)
    std = rng.uniform(0.5, 2.0, spec.obs_dim)
    return env, spec, params, mean, std


def _same_episode(a, b):
    assert (a.ret, a.length, a.terminated, a.truncated, a.finite, a.obs_count) == \
        (b.ret, b.length, b.terminated, b.truncated, b.finite, b.obs_count)
    for x, y in ((a.obs_sum, b.obs_sum), (a.obs_sumsq, b.obs_sumsq)):
        assert (x is None and y is None) or x.tobytes() == y.tobytes()


def test_batch_policy_acts_as_numpy_policy_bitwise():
    """Every row of a stacked forward is NumpyPolicy's action (tanh and relu, normalised or
    not, Box and discrete)."""
    rng = np.random.default_rng(1)
    for env_id, relu, norm in [("HalfCheetah-v5", False, True), ("Hopper-v5", True, False),
                               ("CartPole-v1", False, True)]:
        env, spec, params, mean, std = _setup(env_id, 7, relu=relu)
        mean, std = (mean, std) if norm else (None, None)
        batch = BatchPolicy(spec, 7, mean, std)
        for slot, p in enumerate(params):
            batch.load(slot, p)
        obs = rng.standard_normal((7, spec.obs_dim)) * 3
        for k in (7, 4, 1, 7):  # back to 7: the slices kept per live count are remade
            acts = batch.act(obs, k)
            for j in range(k):
                one = NumpyPolicy(spec, params[j], mean, std).act(obs[j])
                assert np.asarray(one).tobytes() == np.asarray(acts[j]).astype(
                    np.asarray(one).dtype).tobytes(), (env_id, k, j)


@pytest.mark.parametrize("env_id,width", [("HalfCheetah-v5", 4), ("Hopper-v5", 3),
                                          ("Walker2d-v5", 8), ("CartPole-v1", 5)])
def test_lockstep_episodes_are_run_episodes(env_id, width):
    """Episodes of different lengths (Hopper's and Walker's fall at different steps), more
    than the slots: refilled slots, packed slots, per-episode action noise and obs sums."""
    n = 8
    env, spec, params, mean, std = _setup(env_id, n, max_episode_steps=150)
    discrete = spec.discrete
    specs, expected = [], []
    for i, p in enumerate(params):
        noise = None if discrete or i % 3 == 0 else 0.2
        perturb = act = None
        if noise:
            perturb = gaussian_noise(lambda a: a, noise, np.random.default_rng([i, 1]),
                                     spec.low, spec.high)
        policy = NumpyPolicy(spec, p, mean, std)
        act = gaussian_noise(lambda o, f=policy.outputs: f(o).copy(), noise,
                             np.random.default_rng([i, 1]), spec.low, spec.high) if noise \
            else policy.act
        expected.append(run_episode(env, act, seed=100 + i, collect_obs=i % 2 == 0))
        specs.append(EpisodeSpec(p if i % 2 else (lambda p=p: p), 100 + i, i % 2 == 0,
                                 perturb))
    envs = [FastEnv(env_id, max_episode_steps=150) for _ in range(width)]
    got = run_lockstep(envs, BatchPolicy(spec, width, mean, std), specs)
    for a, b in zip(got, expected):
        _same_episode(a, b)
    lengths = {e.length for e in expected}
    assert len(lengths) > 1 or env_id == "HalfCheetah-v5"  # slots ended at different steps


def test_es_task_results_unchanged_by_lockstep():
    """es_pairs (lock step) against the one-at-a-time loop it replaced, on a pair task with
    observation flags and action noise."""
    env, spec, _, mean, std = _setup("Hopper-v5", 1, max_episode_steps=120)
    cfg = RolloutConfig("Hopper-v5", spec, NoiseConfig(size=1 << 16, seed=3),
                        max_episode_steps=120, action_noise=0.05)
    theta = init_params(spec, np.random.default_rng(4))
    payload = PolicyPayload(theta, mean, std, 0.1)
    indices, seeds = np.array([5, 900, 17, 4000, 33]), np.array([1, 2, 3, 4, 5])
    collect = np.array([[True, False], [False, True], [True, True], [False, False],
                        [True, False]])
    out = es_pairs(cfg, payload, indices, seeds, collect)
    from esnb.noise import get_noise_table
    table = get_noise_table(cfg.noise)
    for j in range(len(indices)):
        for member, sign in ((0, 1.0), (1, -1.0)):
            params = theta + np.float32(sign) * np.float32(0.1) * table.get(int(indices[j]),
                                                                             theta.size)
            act = gaussian_noise(NumpyPolicy(spec, params, mean, std).outputs, 0.05,
                                 np.random.default_rng([int(seeds[j]), member]),
                                 spec.low, spec.high)
            ep = run_episode(env, act, int(seeds[j]), collect_obs=bool(collect[j, member]))
            assert out["returns"][j, member] == ep.ret
            assert out["lengths"][j, member] == ep.length
            assert out["terminated"][j, member] == ep.terminated
    assert out["obs_count"].sum() == sum(out["lengths"][collect])


def test_bad_parameters_are_refused_in_one_line():
    _, spec, params, _, _ = _setup("Hopper-v5", 1)
    batch = BatchPolicy(spec, 2)
    with pytest.raises(ValueError, match="expected float32 parameters"):
        batch.load(0, params[0].astype(np.float64))


def test_es_action_noise_goes_on_the_raw_output_before_the_bounds():
    """es_pairs with parameters whose outputs pass the action bounds: each episode is
    run_episode's with the noise added to the network's raw output and the bounds after it
    (the OpenAI starter's order), and differs from the old clip-then-noise order."""
    env, spec, _, mean, std = _setup("Hopper-v5", 1, max_episode_steps=60)
    cfg = RolloutConfig("Hopper-v5", spec, NoiseConfig(size=1 << 16, seed=3),
                        max_episode_steps=60, action_noise=0.05)
    theta = 3.0 * init_params(spec, np.random.default_rng(4))  # outputs well past +-1
    payload = PolicyPayload(theta, mean, std, 0.1)
    out = es_pairs(cfg, payload, np.array([5]), np.array([1]), np.array([[False, False]]))
    from esnb.noise import get_noise_table
    params = theta + np.float32(0.1) * get_noise_table(cfg.noise).get(5, theta.size)
    policy = NumpyPolicy(spec, params, mean, std)
    raw = gaussian_noise(lambda o: policy.outputs(o).copy(), 0.05,
                         np.random.default_rng([1, 0]), spec.low, spec.high)
    old = gaussian_noise(policy.act, 0.05, np.random.default_rng([1, 0]))
    now, before = run_episode(env, raw, 1), run_episode(env, old, 1)
    assert out["returns"][0, 0] == now.ret and out["lengths"][0, 0] == now.length
    assert now.ret != before.ret  # the order matters for these parameters
