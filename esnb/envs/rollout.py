"""Whole-episode rollouts with as little Python per step as possible.

Vector environments do not help on CPU MuJoCo (measured); esnb parallelises whole rollouts
across processes instead, and keeps the per-step loop lean: gymnasium's bookkeeping wrappers
(``TimeLimit``, ``OrderEnforcing``, ``PassiveEnvChecker``) are stepped around, with the time
limit enforced here, and gymnasium's v5 MuJoCo tasks step through
:mod:`esnb.envs.mujoco_fast` (gymnasium's bits, computed from ``MjData`` directly). Any other
wrapper is kept and stepped through.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from esnb.envs.make import check_time_limit, make_env, time_limit

_BOOKKEEPING = ("TimeLimit", "OrderEnforcing", "PassiveEnvChecker")


@dataclass
class Episode:
    """What one rollout produced.

    ``finite`` is False when the environment returned a non-finite reward or observation: the
    episode stopped there and its numbers must not be averaged in. ``obs_sum``/``obs_sumsq``/
    ``obs_count`` are filled only when observations were collected (float64 sums over the
    observations the policy acted on); ``transitions`` only when recorded.
    """

    ret: float
    length: int
    terminated: bool
    truncated: bool
    finite: bool = True
    obs_sum: np.ndarray | None = None
    obs_sumsq: np.ndarray | None = None
    obs_count: int = 0
    transitions: dict[str, np.ndarray] | None = None


class FastEnv:
    """A gymnasium env prepared for fast rollouts.

    Parameters
    ----------
    env_id : str
        Registered gymnasium id.
    max_episode_steps : int, optional
        Episode cap (defaults to the id's own time limit, which must exist).
    env_kwargs : dict, optional
        Passed to ``gymnasium.make``.
    direct : bool
        Step gymnasium's v5 MuJoCo tasks through :mod:`esnb.envs.mujoco_fast` (the same bits,
        less Python per step); False keeps gymnasium's own step (benchmarks compare the two).

    Attributes
    ----------
    core : object
        What episodes step: ``reset(seed=)`` and ``step(action)`` of the unwrapped environment
        (or of :class:`esnb.envs.mujoco_fast.MujocoCore`), or the wrapped one when a wrapper
        other than gymnasium's bookkeeping is in the stack.
    """

    def __init__(self, env_id: str, max_episode_steps: int | None = None,
                 env_kwargs: dict | None = None, direct: bool = True):
        self.env = make_env(env_id, max_episode_steps=max_episode_steps, **(env_kwargs or {}))
        limit = time_limit(self.env)
        layer, wrappers = self.env, []
        while isinstance(layer, gym.Wrapper):
            wrappers.append(type(layer).__name__)
            layer = layer.env
        check_time_limit(env_id, limit, None)  # max_episode_steps, when given, is a TimeLimit
        self.limit = int(limit)
        stripped = all(w in _BOOKKEEPING for w in wrappers)
        self.core = self.env.unwrapped if stripped else self.env
        if stripped and direct and type(self.core).__module__.startswith("gymnasium.envs.mujoco"):
            from esnb.envs.mujoco_fast import fast_core  # imports mujoco: MuJoCo tasks only

            self.core = fast_core(self.core) or self.core
        self.observation_space = self.env.observation_space
        self.action_space = self.env.action_space
        self._obs_buf: np.ndarray | None = None

    def obs_buffer(self) -> np.ndarray:
        if self._obs_buf is None:
            dim = int(np.prod(self.observation_space.shape))
            self._obs_buf = np.empty((self.limit + 1, dim), dtype=np.float64)
        return self._obs_buf

    def close(self) -> None:
        self.env.close()


_local = threading.local()


def cached_env(env_id: str, max_episode_steps: int | None = None,
               env_kwargs: tuple = ()) -> FastEnv:
    """This thread's :class:`FastEnv` for the configuration (made once, then reused: each
    episode resets it with its own seed). ``env_kwargs`` is a hashable tuple of pairs."""
    return cached_envs(env_id, max_episode_steps, env_kwargs, 1)[0]


def cached_envs(env_id: str, max_episode_steps: int | None, env_kwargs: tuple,
                n: int) -> list[FastEnv]:
    """``n`` of this thread's environments for the configuration (episodes stepped in lock
    step each need their own; made on first need, then reused)."""
    cache = getattr(_local, "envs", None)
    if cache is None:
        cache = _local.envs = {}
    key = (env_id, max_episode_steps, tuple(env_kwargs))
    envs = cache.setdefault(key, [])
    while len(envs) < n:
        envs.append(FastEnv(env_id, max_episode_steps, dict(env_kwargs)))
    return envs[:n]


def run_episode(env: FastEnv, policy, seed: int, collect_obs: bool = False,
                record: bool = False) -> Episode:
    """Run one episode from ``reset(seed=seed)``: the one episode loop of esnb.

    Parameters
    ----------
    env : FastEnv
    policy : callable or object with ``act``
        ``act(obs) -> action``, exploration included (see :func:`gaussian_noise`,
        :func:`scaled_noise`, :func:`uniform_actions`).
    seed : int
        The environment's reset seed.
    collect_obs : bool
        Hook: float64 sums and squared sums of the observations acted on (observation
        normalisation statistics).
    record : bool
        Hook: the transitions, ``obs``, ``action``, ``reward``, ``next_obs`` (float64 arrays
        of the steps taken) and ``done`` (termination at the last step; a time limit is not
        one), only for a finite episode.

    Termination and truncation (time limit or cap) both end the rollout; which one is recorded.
    A non-finite reward ends it at once and a non-finite observation marks it; either makes
    ``finite`` False.
    """
    core, limit = env.core, env.limit
    step = core.step
    act = getattr(policy, "act", policy)
    obs, _ = core.reset(seed=int(seed))
    buf = env.obs_buffer() if (collect_obs or record) else None
    actions: list | None = [] if record else None
    rewards: list | None = [] if record else None
    total, t = 0.0, 0
    terminated = truncated = False
    finite = True
    while t < limit:
        if buf is not None:
            buf[t] = np.ravel(obs)
        a = act(obs)
        obs, r, terminated, truncated, _ = step(a)
        if actions is not None:
            actions.append(a)
            rewards.append(r)
        t += 1
        r = float(r)
        if not math.isfinite(r):
            finite = False
            break
        total += r
        if terminated or truncated:
            break
    ep = finish_episode(total, t, limit, terminated, truncated, finite, obs,
                        buf if collect_obs else None)
    if record and ep.finite:
        buf[t] = np.ravel(obs)
        done = np.zeros(t, dtype=bool)
        done[-1] = bool(terminated)
        ep.transitions = {"obs": buf[:t].copy(), "action": np.asarray(actions),
                          "reward": np.asarray(rewards, dtype=np.float64),
                          "next_obs": buf[1:t + 1].copy(), "done": done}
    return ep


def finish_episode(total: float, t: int, limit: int, terminated, truncated, finite: bool, obs,
                   seen: np.ndarray | None) -> Episode:
    """The :class:`Episode` of a loop that stopped after ``t`` steps (:func:`run_episode`'s and
    :func:`esnb.envs.lockstep.run_lockstep`'s): truncation by the limit, the last observation's
    finiteness, and the sums of ``seen[:t]`` (the observations acted on) when given."""
    truncated = bool(truncated or (not terminated and t >= limit))
    if finite and not np.all(np.isfinite(obs)):
        finite = False
    ep = Episode(total, t, bool(terminated), truncated, finite)
    if seen is not None and finite:
        seen = seen[:t]
        ep.obs_sum = seen.sum(axis=0)
        ep.obs_sumsq = np.square(seen).sum(axis=0)
        ep.obs_count = t
        if not (np.all(np.isfinite(ep.obs_sum)) and np.all(np.isfinite(ep.obs_sumsq))):
            ep.finite = False
    return ep


# -- exploration, as wrappers of a policy's act ----------------------------------------------
def gaussian_noise(act, std: float, rng: np.random.Generator, low=None, high=None):
    """``act`` plus N(0, std^2) on every action component, then clipped to ``[low, high]``
    when given (OpenAI-ES's ``ac_noise_std``: the starter adds the noise to the network's
    output and the environment bounds the result, so ``act`` gives the raw output and the
    bounds come after the noise, never before)."""
    if not std:
        return act
    std = float(std)
    bounds = None if low is None or not len(low) else (np.asarray(low, np.float32),
                                                       np.asarray(high, np.float32))

    def noisy(obs):
        a = act(obs)
        a = a + std * rng.standard_normal(a.shape).astype(np.float32)
        if bounds is not None:
            np.clip(a, bounds[0], bounds[1], out=a)
        return a

    return noisy


def scaled_noise(act, scale: np.ndarray, low: np.ndarray, high: np.ndarray,
                 rng: np.random.Generator):
    """``act`` plus ``scale * N(0, 1)`` per component, clipped to ``[low, high]`` (TD3's
    exploration with the scale a fraction of the half-range)."""
    dim = len(low)

    def noisy(obs):
        a = act(obs)
        a += scale * rng.standard_normal(dim, dtype=np.float32)
        np.clip(a, low, high, out=a)
        return a

    return noisy


def uniform_actions(low: np.ndarray, high: np.ndarray, rng: np.random.Generator):
    """Uniformly random Box actions (warm-up episodes that only fill a replay)."""

    def random(obs):
        return rng.uniform(low, high).astype(np.float32)

    return random
