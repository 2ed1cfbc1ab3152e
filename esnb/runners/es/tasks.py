"""ES's worker-side tasks (run on Dask workers, or inline in the driver).

Workers keep per-process state across tasks: the noise table (built by
:class:`esnb.cluster.NoiseTablePlugin`) and one environment per configuration
(:func:`esnb.envs.rollout.cached_env`). Tasks receive
only seeds, offsets and the current parameters, and send back only returns, lengths, indices
and observation-statistic sums.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from esnb.envs.rollout import FastEnv, cached_env, gaussian_noise, run_episode
from esnb.noise import NoiseConfig, get_noise_table
from esnb.policies.numpy_mlp import NumpyPolicy
from esnb.policies.spec import PolicySpec


@dataclass(frozen=True)
class RolloutConfig:
    """What every rollout task of a run shares (small; sent with each task).

    Attributes
    ----------
    env_id : str
        Gymnasium id.
    spec : PolicySpec
        Policy architecture.
    noise : NoiseConfig
        Which noise table perturbations index into.
    max_episode_steps : int, optional
        Episode cap (None: the env's own limit).
    env_kwargs : tuple of (key, value)
        Extra ``gymnasium.make`` arguments, as a hashable tuple.
    action_noise : float
        Std of Gaussian noise added to Box actions during training rollouts (OpenAI-ES's
        ``ac_noise_std``; 0 by default).
    """

    env_id: str
    spec: PolicySpec
    noise: NoiseConfig = field(default_factory=NoiseConfig)
    max_episode_steps: int | None = None
    env_kwargs: tuple = ()
    action_noise: float = 0.0


@dataclass(frozen=True)
class PolicyPayload:
    """The parameters of one generation: scattered once, read by all its tasks."""

    theta: np.ndarray
    obs_mean: np.ndarray | None
    obs_std: np.ndarray | None
    sigma: float


def get_env(cfg: RolloutConfig) -> FastEnv:
    """This thread's environment for ``cfg`` (made once, reset with a seed per episode)."""
    return cached_env(cfg.env_id, cfg.max_episode_steps, cfg.env_kwargs)


def es_pairs(cfg: RolloutConfig, payload: PolicyPayload, indices: np.ndarray,
             env_seeds: np.ndarray, collect: np.ndarray) -> dict:
    """Evaluate mirrored pairs ``theta +- sigma * noise[idx]``.

    Each pair is computed the same way whichever task it lands in (its own env seed, its own
    observation sums), so results do not depend on how pairs were batched into tasks.

    Returns
    -------
    dict of arrays
        ``returns``, ``lengths``, ``terminated``, ``truncated``, ``finite`` (all [n, 2]);
        ``obs_sum``, ``obs_sumsq`` ([n, obs_dim], float64) and ``obs_count`` ([n]) summed over
        the members whose ``collect`` flag was set; ``seconds`` of compute and ``steps``.
    """
    t0 = time.perf_counter()
    env = get_env(cfg)
    noise = get_noise_table(cfg.noise)
    spec = cfg.spec
    theta = payload.theta
    dim = theta.size
    sigma = np.float32(payload.sigma)
    n = len(indices)
    out = {
        "returns": np.zeros((n, 2), dtype=np.float64),
        "lengths": np.zeros((n, 2), dtype=np.int64),
        "terminated": np.zeros((n, 2), dtype=bool),
        "truncated": np.zeros((n, 2), dtype=bool),
        "finite": np.ones((n, 2), dtype=bool),
        "obs_sum": np.zeros((n, spec.obs_dim), dtype=np.float64),
        "obs_sumsq": np.zeros((n, spec.obs_dim), dtype=np.float64),
        "obs_count": np.zeros(n, dtype=np.int64),
    }
    for j in range(n):
        eps = noise.get(int(indices[j]), dim)
        for member, sign in ((0, 1.0), (1, -1.0)):
            params = theta + np.float32(sign) * sigma * eps
            policy = NumpyPolicy(spec, params, payload.obs_mean, payload.obs_std)
            act = policy.act
            if cfg.action_noise and not spec.discrete:  # Box actions only (as OpenAI's)
                act = gaussian_noise(act, cfg.action_noise,
                                     np.random.default_rng([int(env_seeds[j]), member]))
            ep = run_episode(env, act, int(env_seeds[j]), collect_obs=bool(collect[j, member]))
            out["returns"][j, member] = ep.ret
            out["lengths"][j, member] = ep.length
            out["terminated"][j, member] = ep.terminated
            out["truncated"][j, member] = ep.truncated
            out["finite"][j, member] = ep.finite
            if ep.obs_count:
                out["obs_sum"][j] += ep.obs_sum
                out["obs_sumsq"][j] += ep.obs_sumsq
                out["obs_count"][j] += ep.obs_count
    out["steps"] = int(out["lengths"].sum())
    out["seconds"] = time.perf_counter() - t0
    return out


def evaluate(cfg: RolloutConfig, payload: PolicyPayload, env_seeds: np.ndarray) -> dict:
    """Noise-free episodes of ``theta`` (no action noise), one per seed."""
    t0 = time.perf_counter()
    env = get_env(cfg)
    policy = NumpyPolicy(cfg.spec, payload.theta, payload.obs_mean, payload.obs_std)
    n = len(env_seeds)
    returns = np.zeros(n, dtype=np.float64)
    lengths = np.zeros(n, dtype=np.int64)
    finite = np.ones(n, dtype=bool)
    for i, seed in enumerate(env_seeds):
        ep = run_episode(env, policy, int(seed))
        returns[i], lengths[i], finite[i] = ep.ret, ep.length, ep.finite
    return {"returns": returns, "lengths": lengths, "finite": finite,
            "steps": int(lengths.sum()), "seconds": time.perf_counter() - t0}


def raw_step_rate(cfg: RolloutConfig, steps: int, seed: int = 0) -> dict:
    """The env's own stepping rate (fixed zero/first action, no policy), for benchmarks."""
    env = get_env(cfg)
    core = env.core
    if cfg.spec.discrete:
        action = 0
    else:
        action = np.zeros(cfg.spec.act_dim, dtype=np.float32)
    core.reset(seed=seed)
    t0 = time.perf_counter()
    t = 0
    for _ in range(steps):
        _, _, term, trunc, _ = core.step(action)
        t += 1
        if term or trunc or t >= env.limit:
            core.reset(seed=seed)
            t = 0
    seconds = time.perf_counter() - t0
    return {"steps": steps, "seconds": seconds, "steps_per_s": steps / seconds}


def iw_dots(noise: NoiseConfig, delta: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """IW-ES's distributed weights (paper section 3.2): ``eps_j . delta`` for a chunk of
    offsets, computed where the noise table already is; only ``delta`` travels."""
    from esnb.es.iw import noise_dots

    return noise_dots(get_noise_table(noise), indices, delta)
