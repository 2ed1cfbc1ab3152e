"""The parts of EORL's learners (Khadilkar 2023) below the learning: environments, the numbering
of distinct states, episodes and training samples.

An episode runs on esnb's one episode loop (:func:`esnb.envs.rollout.run_episode`) with an
epsilon-greedy act function (:func:`epsilon_greedy`) that numbers the states it acts on; the
greedy action of a state is computed once per episode (the network does not change within one).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from esnb.envs.make import make_env
from esnb.envs.rollout import FastEnv, run_episode
from esnb.rl.constants import BITFLIP_DECAY, ENV_IDS, GRIDNAV_DECAY, resolve_env


def default_eps_decay(env_id: str, episodes: int) -> float:
    """The paper's epsilon decay: 0.99 on BitFlip; on GridNav 0.995 / 0.998 / 0.999 for
    1000 / 2500 / 4000 episodes, and for other lengths the decay that ends where 1000 episodes
    at 0.995 end (``0.995^(1000/E)``)."""
    if resolve_env(env_id) == ENV_IDS["bitflip"]:
        return BITFLIP_DECAY
    if episodes in GRIDNAV_DECAY:
        return GRIDNAV_DECAY[episodes]
    return 0.995 ** (1000.0 / episodes)


def positive_int(name: str, value, low: int = 1) -> int:
    """``value`` as an int >= ``low``, else a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def make_eorl_env(env_id: str, env_kwargs: dict) -> FastEnv:
    """BitFlip or GridNav prepared for :func:`~esnb.envs.rollout.run_episode`, capped at its
    own timeout (these environments truncate themselves there: the cap never cuts earlier)."""
    probe = make_env(env_id, **env_kwargs)
    timeout = int(probe.unwrapped.timeout)
    probe.close()
    return FastEnv(env_id, max_episode_steps=timeout, env_kwargs=env_kwargs)


class StateIndex:
    """The distinct network inputs of a run, numbered in order of first sight.

    EORL's environments have few distinct observations, so the buffer stores a state's number
    and training runs the networks once per distinct state (see :mod:`esnb.rl.eorl.mc_dqn`).
    """

    def __init__(self, dim: int):
        self.dim = int(dim)
        self._ids: dict[bytes, int] = {}
        self._rows = np.zeros((256, self.dim), dtype=np.float32)
        self.size = 0

    def id(self, x: np.ndarray) -> int:
        """The number of input ``x`` (float32, shape (dim,)), registering it if new."""
        key = x.tobytes()
        i = self._ids.get(key)
        if i is None:
            i = self._ids[key] = self.size
            if self.size == len(self._rows):
                self._rows = np.concatenate([self._rows, np.zeros_like(self._rows)])
            self._rows[i] = x
            self.size += 1
        return i

    def ids(self, xs: np.ndarray) -> np.ndarray:
        xs = np.ascontiguousarray(xs, dtype=np.float32)
        return np.fromiter((self.id(x) for x in xs), dtype=np.int64, count=len(xs))

    @property
    def rows(self) -> np.ndarray:
        return self._rows[:self.size]

    def load(self, rows: np.ndarray) -> None:
        rows = np.asarray(rows, dtype=np.float32).reshape(-1, self.dim)
        self._ids = {}
        self._rows = np.zeros((max(256, len(rows)), self.dim), dtype=np.float32)
        self.size = 0
        for x in rows:
            self.id(x)


@dataclass
class Episode:
    """One episode: ``obs`` has the reset observation first (T + 1 rows); ``sids`` are the
    state numbers of the network inputs acted on (T; -1 when not numbered)."""

    obs: np.ndarray
    sids: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terminated: bool
    truncated: bool

    @property
    def length(self) -> int:
        return len(self.actions)

    @property
    def ret(self) -> float:
        return float(self.rewards.sum())


@dataclass
class Sample:
    """A member's training sample: buffer slots (or ids) and importance weights (None: 1)."""

    member: int
    sids: np.ndarray
    actions: np.ndarray
    returns: np.ndarray
    weights: np.ndarray | None = None
    ids: np.ndarray | None = None

    def subset(self, idx: np.ndarray) -> Sample:
        return Sample(self.member, self.sids[idx], self.actions[idx], self.returns[idx],
                      None if self.weights is None else self.weights[idx],
                      None if self.ids is None else self.ids[idx])


def epsilon_greedy(policy, features,
                   states: StateIndex | None, epsilon: float, rng: np.random.Generator,
                   limit: int, n_actions: int):
    """An act function for one episode, and the list it fills with the state numbers acted on.

    The per-step draws are made up front (``limit`` uniforms, then ``limit`` random actions:
    a fixed use of ``rng`` per episode, no per-step call cost); at step ``t`` the action is
    random when ``u[t] < epsilon``, else the member's greedy action ``policy.act(x)``
    (:meth:`~esnb.rl.eorl.mc_dqn.PopulationQNet.member_numpy`, esnb's one-observation numpy
    forward; computed once per distinct state).
    With ``states=None`` (evaluation) states are not numbered (the list gets -1).
    """
    u = rng.random(limit)
    random_actions = rng.integers(0, n_actions, size=limit)
    greedy: dict = {}
    sids: list[int] = []
    greedy_action = policy.act

    def act(obs):
        t = len(sids)
        x = features(obs)
        if states is not None:
            sid = states.id(x)
            sids.append(sid)
        else:
            sid = x.tobytes()
            sids.append(-1)
        if u[t] < epsilon:
            return int(random_actions[t])
        a = greedy.get(sid)
        if a is None:
            a = greedy[sid] = greedy_action(x)
        return a

    return act, sids


def play(env: FastEnv, act, sids: list[int], env_seed: int) -> Episode:
    """One episode of ``act`` (from :func:`epsilon_greedy`) from ``reset(seed=env_seed)``."""
    ep = run_episode(env, act, env_seed, record=True)
    if ep.transitions is None:
        raise RuntimeError("an EORL environment returned a non-finite reward or observation")
    tr = ep.transitions
    return Episode(np.concatenate([tr["obs"], tr["next_obs"][-1:]]),
                   np.asarray(sids, dtype=np.int64), tr["action"].astype(np.int64),
                   tr["reward"], ep.terminated, ep.truncated)
