"""ES's worker-side tasks (run on Dask workers, or inline in the driver).

Workers keep per-process state across tasks: the noise table (built by
``executor.on_every_worker``), one environment per configuration
(:func:`esnb.envs.rollout.cached_env`) and each run's ES state (:mod:`.replica`). A
generation's tasks receive only the generation's small update, noise offsets, seeds and flags,
and send back only returns, lengths and observation-statistic sums.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np

from esnb.envs.lockstep import EpisodeSpec, run_lockstep
from esnb.envs.rollout import FastEnv, cached_env, cached_envs, gaussian_noise
from esnb.nets.batch_policy import BatchPolicy
from esnb.nets.policy import PolicySpec
from esnb.noise import NoiseConfig, get_noise_table
from esnb.runners.es import host_theta
from esnb.runners.es.replica import Sync, Update, replica_for


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
    obs_norm: bool = True


@dataclass(frozen=True)
class PolicyPayload:
    """Parameters and observation normalisation to roll out with (a replica's, or sent by the
    driver for :meth:`esnb.ES.evaluate`)."""

    theta: np.ndarray
    obs_mean: np.ndarray | None
    obs_std: np.ndarray | None
    sigma: float
    shared: bool = False  # theta mapped from the driver's file (:mod:`.host_theta`)


def warm_up(env_id: str, max_episode_steps: int | None, env_kwargs: tuple) -> None:
    """Make (and close) one environment of the run: unpickling this function imported this
    module's numpy/gymnasium stack, and making the environment imports MuJoCo and reads its
    model, so the first task of a cold worker does not (``executor.warm``). Once per
    configuration and process: runs of a sweep warm nothing twice."""
    key = (env_id, max_episode_steps, env_kwargs)
    if key not in _WARMED:
        _WARMED.add(key)
        FastEnv(env_id, max_episode_steps, dict(env_kwargs)).env.close()


_WARMED: set = set()


def get_env(cfg: RolloutConfig) -> FastEnv:
    """This thread's environment for ``cfg`` (made once, reset with a seed per episode)."""
    return cached_env(cfg.env_id, cfg.max_episode_steps, cfg.env_kwargs)


@dataclass(frozen=True)
class ReplicaContext:
    """What every replica task of a run reads: published once per run, not sent per task."""

    cfg: RolloutConfig
    token: str  # the run's replicas on the workers (:mod:`.replica`)


#: noise offsets are below 2**29 (a 2 GB table): bits 29 and 30 carry the statistic flags
FLAG_SHIFT = 29


def pack_pairs(indices: np.ndarray, env_seeds: np.ndarray, collect: np.ndarray) -> np.ndarray:
    """A task's pairs as one int32 array [2, pairs]: the noise offsets with the two
    observation-statistic flags in their bits 29-30, and the env seeds (< 2**31): 4 bytes per
    episode, one array header."""
    indices = np.asarray(indices, dtype=np.int64)
    if len(indices) and (indices.min() < 0 or indices.max() >= 1 << FLAG_SHIFT):
        raise ValueError(f"noise offsets must lie in [0, 2**{FLAG_SHIFT})")
    flags = collect[:, 0].astype(np.int64) | (collect[:, 1].astype(np.int64) << 1)
    return np.stack([indices | (flags << FLAG_SHIFT), np.asarray(env_seeds, np.int64)]
                    ).astype(np.int32)


def unpack_pairs(packed: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`pack_pairs`'s inverse: (indices int64, env seeds int64, collect bool [pairs, 2])."""
    head, seeds = (np.asarray(row, dtype=np.int64) for row in packed)
    flags = head >> FLAG_SHIFT
    return (head & ((1 << FLAG_SHIFT) - 1), seeds,
            np.stack([(flags & 1) > 0, (flags & 2) > 0], axis=1))


def replica_pairs(ctx: ReplicaContext, update: Update, packed: np.ndarray,
                  sync: Sync | None = None) -> dict:
    """A generation's task: bring this worker's replica of the run to the generation
    (``update``; or install ``sync``), then roll out its mirrored pairs (:func:`es_pairs`,
    ``packed`` by :func:`pack_pairs`). ``{"stale": True}`` when the replica cannot get there
    without a :class:`Sync`."""
    t0, cpu0 = time.perf_counter(), time.thread_time()
    payload = _payload(ctx, update, sync)
    if payload is None:
        return {"stale": True}
    return {**es_pairs(ctx.cfg, payload, *unpack_pairs(packed)), "checksum": update.checksum,
            "pid": os.getpid(), "host_theta": payload.shared,
            "replica_seconds": time.perf_counter() - t0, "replica_cpu": time.thread_time() - cpu0}


def replica_evaluate(ctx: ReplicaContext, update: Update, env_seeds: np.ndarray,
                     sync: Sync | None = None) -> dict:
    """Noise-free episodes of the generation's theta on this worker's replica."""
    t0, cpu0 = time.perf_counter(), time.thread_time()
    payload = _payload(ctx, update, sync)
    if payload is None:
        return {"stale": True}
    return {**evaluate(ctx.cfg, payload, env_seeds), "checksum": update.checksum,
            "pid": os.getpid(), "host_theta": payload.shared,
            "replica_seconds": time.perf_counter() - t0, "replica_cpu": time.thread_time() - cpu0}


def _payload(ctx: ReplicaContext, update: Update, sync: Sync | None) -> PolicyPayload | None:
    """The generation's parameters: the driver's file on its host (:mod:`.host_theta`), else
    this worker's replica brought up to date (None: stale, a :class:`Sync` is needed)."""
    cfg = ctx.cfg
    if sync is None:
        shared = host_theta.read(update, cfg.spec.num_params, cfg.spec.obs_dim, cfg.obs_norm)
        if shared is not None:
            return PolicyPayload(*shared, update.sigma, shared=True)
        if update.header:  # no file here after all: this worker needs the whole state
            return None
    replica = replica_for(cfg.noise, ctx.token, update, sync, cfg.obs_norm)
    if replica is None:
        return None
    return PolicyPayload(replica.es.theta, *replica.normalisation(), update.sigma)


def es_pairs(cfg: RolloutConfig, payload: PolicyPayload, indices: np.ndarray,
             env_seeds: np.ndarray, collect: np.ndarray, batched: bool = True) -> dict:
    """Evaluate mirrored pairs ``theta +- sigma * noise[idx]``.

    Each pair is computed the same way whichever task it lands in (its own env seed, its own
    observation sums), so results do not depend on how pairs were batched into tasks.
    ``batched=False`` keeps a MuJoCo task off the batch (:func:`lockstep_runner`; the same
    results, benchmarks compare the two).

    Returns
    -------
    dict of arrays
        ``returns``, ``lengths``, ``terminated``, ``truncated``, ``finite`` (all [n, 2]);
        ``obs_sum``, ``obs_sumsq`` ([n, obs_dim], float64) and ``obs_count`` ([n]) summed over
        the members whose ``collect`` flag was set; ``seconds`` of compute and ``steps``.
    """
    t0 = time.perf_counter()
    noise = get_noise_table(cfg.noise)
    spec = cfg.spec
    theta = payload.theta
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
    episodes = []
    for j in range(n):
        seed = int(env_seeds[j])
        for member, sign in ((0, 1.0), (1, -1.0)):
            perturb = None
            if cfg.action_noise and not spec.discrete:  # Box actions only (as OpenAI's)
                perturb = gaussian_noise(_same, cfg.action_noise,  # on the raw output
                                         np.random.default_rng([seed, member]),
                                         spec.low, spec.high)
            episodes.append(EpisodeSpec(_perturbed(theta, sign, sigma, noise, int(indices[j])),
                                        seed, bool(collect[j, member]), perturb))
    for e, ep in enumerate(_lockstep(cfg, payload, episodes, batched)):
        j, member = divmod(e, 2)
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


#: the most episodes a task steps at once. Each needs its own environment, kept per thread:
#: ~1.1 MB each for HalfCheetah or Humanoid (measured), so 16 add ~18 MB to a worker's 63 MB
#: USS (target <= 120, BENCHMARKS.md); a population of 64 on 2 workers fills them.
LOCKSTEP_WIDTH = 16


#: the most episodes a task steps at once as the rows of one MuJoCo batch: a row is only the
#: integration state (~100 doubles) and a policy slot, so a task's episodes all run together
#: (no tail of a few rows sharing a step's Python after the first ones end)
BATCH_WIDTH = 64


def _lockstep(cfg: RolloutConfig, payload: PolicyPayload, episodes: list,
              batched: bool = True) -> list:
    """Run ``episodes`` in lock step on this thread's environments, with the payload's
    observation normalisation: as the rows of one MuJoCo batch when the task has one
    (:func:`lockstep_runner`; one environment then does the resets), else
    :func:`esnb.envs.lockstep.run_lockstep` (``batched=False`` asks for it)."""
    env = get_env(cfg)
    run = lockstep_runner(env) if batched else run_lockstep
    most = LOCKSTEP_WIDTH if run is run_lockstep else BATCH_WIDTH
    width = max(1, min(len(episodes), most))
    policy = BatchPolicy(cfg.spec, width, payload.obs_mean, payload.obs_std)
    if run is not run_lockstep:
        return run([env], policy, episodes)
    envs = cached_envs(cfg.env_id, cfg.max_episode_steps, cfg.env_kwargs, width)
    return run_lockstep(envs, policy, episodes)


def lockstep_runner(env: FastEnv):
    """The lock-step runner for ``env``'s episodes: :func:`esnb.envs.mujoco_batch.run_batched`
    when :func:`esnb.envs.mujoco_batch.supports` it (a MuJoCo v5 task the batch gives exactly),
    else :func:`esnb.envs.lockstep.run_lockstep`. Only an environment stepped by
    :mod:`esnb.envs.mujoco_fast` (which imported MuJoCo) is asked: others import nothing."""
    if type(env.core).__module__ != "esnb.envs.mujoco_fast":
        return run_lockstep
    try:
        from esnb.envs import mujoco_batch
    except ImportError:  # MuJoCo before 4 has no mujoco.batch (pyproject allows 3)
        return run_lockstep

    return mujoco_batch.run_batched if mujoco_batch.supports(env) else run_lockstep


def _perturbed(theta: np.ndarray, sign: float, sigma: np.float32, noise, index: int):
    """The episode's parameters ``theta + sign * sigma * noise[index]``, made when it starts."""
    def params():
        return theta + np.float32(sign) * sigma * noise.get(index, theta.size)

    return params


def _same(action):
    return action


def evaluate(cfg: RolloutConfig, payload: PolicyPayload, env_seeds: np.ndarray) -> dict:
    """Noise-free episodes of ``theta`` (no action noise), one per seed."""
    t0 = time.perf_counter()
    episodes = [EpisodeSpec(payload.theta, int(seed)) for seed in env_seeds]
    done = _lockstep(cfg, payload, episodes)
    returns = np.array([ep.ret for ep in done], dtype=np.float64)
    lengths = np.array([ep.length for ep in done], dtype=np.int64)
    finite = np.array([ep.finite for ep in done], dtype=bool)
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
