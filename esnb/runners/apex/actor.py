"""Ape-X actors without Dask: a group of environments acting with local copies of the
learner's network, building n-step transitions and their initial priorities.

Horgan et al. 2018, "Distributed Prioritized Experience Replay", Algorithm 1 and appendix:
every actor has its own environment and exploration rate (``eps_i = eps^(1 + alpha i/(N-1))``
for DQN; Gaussian action noise for DPG), keeps a local buffer of n-step transitions, computes
their priorities (|n-step TD error|) in a batch with its own copy of the parameters when it
flushes, and tags each transition with a key (actor id, sequence number) so the replay can
drop a batch it has already received.

One :class:`ActorGroup` steps several actors in lock-step so their network forward passes are
one batched call (numpy; torch for a conv Q-network over frames, which stay uint8 in the
buffer and the replay); an actor loop (:mod:`esnb.runners.apex.tasks`) runs one group, on a
worker or in this process.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from esnb.envs.rollout import FastEnv, run_episode
from esnb.rl.apex.nets import (
    DPGSpec,
    QNetSpec,
    dpg_action,
    dpg_td_errors,
    dqn_td_errors,
    q_values,
    unpack,
)
from esnb.rl.apex.nstep import NStepBuilder, apex_schedule
from esnb.rl.constants import APEX_REWARD_CLIPPINGS

VARIANTS = ("dqn", "dpg")


@dataclass(frozen=True)
class ActorConfig:
    """What every actor of a run shares (small; sent to each actor task).

    Attributes
    ----------
    env_id : str
        Gymnasium id.
    variant : {"dqn", "dpg"}
    net : QNetSpec or DPGSpec
        The network the learner publishes (DPG: ``[actor | critic]``).
    num_actors : int
        N, the number of actors of the run (the exploration schedule spans it).
    n_step : int
        Steps per transition (3).
    gamma : float
        Discount.
    priority_eps : float
        Added to ``|TD|`` for the initial priorities (the replay's ``eps``).
    max_episode_steps : int, optional
        Episode cap (default: the env's own).
    env_kwargs : tuple of (key, value)
        Extra ``gymnasium.make`` arguments.
    reward_clipping : {"none", "abs_one"}
        ``abs_one``: each reward clipped to [-1, 1] before it enters an n-step return.
    life_loss : bool
        A lost life (an env whose ``info`` has ``lives``: Atari) ends the pending n-step
        returns as a termination (discount 0) while the game goes on; the episode's return
        and length stay the whole game's.
    """

    env_id: str
    variant: str
    net: QNetSpec | DPGSpec
    num_actors: int
    n_step: int = 3
    gamma: float = 0.99
    priority_eps: float = 1e-6
    max_episode_steps: int | None = None
    env_kwargs: tuple = ()
    reward_clipping: str = "none"
    life_loss: bool = False

    def __post_init__(self):
        if self.reward_clipping not in APEX_REWARD_CLIPPINGS:
            raise ValueError(f"reward_clipping must be one of {APEX_REWARD_CLIPPINGS}, got "
                             f"{self.reward_clipping!r}")
        if self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {self.variant!r}")
        want = QNetSpec if self.variant == "dqn" else DPGSpec
        if not isinstance(self.net, want):
            raise ValueError(f"variant {self.variant!r} needs a {want.__name__}, got "
                             f"{type(self.net).__name__}")


class ActorGroup:
    """Several Ape-X actors stepped together.

    Parameters
    ----------
    cfg : ActorConfig
    actor_ids : sequence of int
        Which of the run's ``num_actors`` actors this group runs (ids in ``[0, N)``).
    seed : int
        Seeds the environments (one seed per actor, from ``(seed, actor id)``) and the
        exploration draws.
    exploration : float
        DQN: the base epsilon (0.4); DPG: the noise std as a fraction of the action half-range.
    exploration_alpha : float
        Spread of the schedule across actors (DQN: 7; DPG default 0, one sigma for all).
    """

    def __init__(self, cfg: ActorConfig, actor_ids, seed: int, exploration: float = 0.4,
                 exploration_alpha: float = 7.0):
        ids = [int(i) for i in actor_ids]
        if not ids or min(ids) < 0 or max(ids) >= cfg.num_actors or len(set(ids)) != len(ids):
            raise ValueError(f"actor_ids must be distinct ids in [0, {cfg.num_actors}), got {ids}")
        self.cfg = cfg
        self.actor_ids = np.array(ids, dtype=np.int64)
        self.k = len(ids)
        self.envs = [FastEnv(cfg.env_id, cfg.max_episode_steps, dict(cfg.env_kwargs))
                     for _ in ids]
        self.rng = np.random.default_rng([int(seed), 0x5EED, *ids])
        self._env_seeds = [int(np.random.SeedSequence([int(seed), i]).generate_state(1)[0])
                           for i in ids]
        self.builders = [NStepBuilder(cfg.n_step, cfg.gamma) for _ in ids]
        self._obs_shape, self._obs_dtype = obs_layout(cfg.net)
        starts = [e.core.reset(seed=s) for e, s in zip(self.envs, self._env_seeds, strict=True)]
        self.obs = np.stack([self._as_obs(obs) for obs, _ in starts])
        #: each actor's lives (-1: its env counts none)
        self.lives = np.array([int(info.get("lives", -1)) for _, info in starts], dtype=np.int64)
        self.t = np.zeros(self.k, dtype=np.int64)
        self.ep_return = np.zeros(self.k)
        self.seq = np.zeros(self.k, dtype=np.int64)
        self.env_steps = 0
        self.episodes: list[tuple[int, float, int]] = []
        self.nonfinite = 0
        self._n_pending = 0
        self._buf = self._allocate(1024)
        self.params_version = -1
        self._params = None
        self.set_exploration(exploration, exploration_alpha)
        if cfg.variant == "dpg":
            spec = cfg.net
            self._low = np.asarray(spec.low, dtype=np.float32)
            self._high = np.asarray(spec.high, dtype=np.float32)
            self._half = 0.5 * (self._high - self._low)

    def _as_obs(self, obs) -> np.ndarray:
        """One observation as the network and the replay take it (a float32 vector; uint8
        frames kept as they are)."""
        return np.asarray(obs, dtype=self._obs_dtype).reshape(self._obs_shape)

    # -- configuration -----------------------------------------------------------------------
    def set_exploration(self, base: float, alpha: float) -> None:
        """Epsilons (DQN) or noise fractions (DPG) of this group's actors from the schedule."""
        self.exploration = apex_schedule(self.cfg.num_actors, base, alpha)[self.actor_ids]

    def set_params(self, flat: np.ndarray, version: int) -> None:
        """Load the learner's published parameters (unpacked once: every step reads them)."""
        self._params = unpack(self.cfg.net, np.array(flat, dtype=np.float32))
        self.params_version = int(version)

    def set_sequence_start(self, marks) -> None:
        """Continue numbering after the replay's high-water marks (one per actor)."""
        self.seq = np.maximum(self.seq, np.asarray(marks, dtype=np.int64) + 1)

    @property
    def pending(self) -> int:
        return self._n_pending

    def _allocate(self, size: int) -> dict[str, np.ndarray]:
        """The local buffer: preallocated rows, written one transition at a time (a list of
        tuples stacked at flush time cost more than the environment step)."""
        obs = (size, *self._obs_shape)
        if self.cfg.variant == "dqn":
            action = np.zeros(size, dtype=np.int64)
        else:
            action = np.zeros((size, self.cfg.net.act_dim), dtype=np.float32)
        return {"obs": np.zeros(obs, self._obs_dtype), "action": action,
                "reward": np.zeros(size, np.float32),
                "next_obs": np.zeros(obs, self._obs_dtype),
                "discount": np.zeros(size, np.float32), "actor": np.zeros(size, np.int64),
                "seq": np.zeros(size, np.int64)}

    def _append(self, obs, action, ret, next_obs, discount, actor: int, seq: int) -> None:
        i = self._n_pending
        buf = self._buf
        if i == len(buf["seq"]):
            bigger = self._allocate(2 * i)
            for k, a in buf.items():
                bigger[k][:i] = a
            self._buf = buf = bigger
        buf["obs"][i] = obs
        buf["action"][i] = action
        buf["reward"][i] = ret
        buf["next_obs"][i] = next_obs
        buf["discount"][i] = discount
        buf["actor"][i] = actor
        buf["seq"][i] = seq
        self._n_pending = i + 1

    # -- acting ------------------------------------------------------------------------------
    def _actions(self) -> np.ndarray:
        cfg = self.cfg
        if cfg.variant == "dqn":
            n_act = cfg.net.n_actions
            if self._params is None:
                return self.rng.integers(0, n_act, size=self.k)
            greedy = q_values(cfg.net, self._params, self.obs).argmax(axis=1)
            explore = self.rng.random(self.k) < self.exploration
            return np.where(explore, self.rng.integers(0, n_act, size=self.k), greedy)
        if self._params is None:
            return self.rng.uniform(self._low, self._high, size=(self.k, len(self._low))
                                    ).astype(np.float32)
        a = dpg_action(cfg.net, self._params, self.obs)
        noise = self.rng.standard_normal(a.shape).astype(np.float32)
        a = a + noise * (self.exploration[:, None] * self._half).astype(np.float32)
        return np.clip(a, self._low, self._high)

    def step(self, rounds: int) -> int:
        """Step every actor ``rounds`` times; returns the env steps taken."""
        append = self._append
        clip = self.cfg.reward_clipping == "abs_one"
        life_loss = self.cfg.life_loss
        for _ in range(int(rounds)):
            actions = self._actions()
            for j in range(self.k):
                env = self.envs[j]
                # a numpy integer: gymnasium's Discrete.contains is ~1.5x slower on an int
                a = actions[j]
                nxt, r, term, trunc, info = env.core.step(a)
                self.t[j] += 1
                r = float(r)
                nxt = self._as_obs(nxt)
                # a sum is finite iff every entry is (short of overflow): one call, not two
                if not (math.isfinite(r) and math.isfinite(nxt.sum())):
                    # a broken step ends the episode without a transition
                    self.nonfinite += 1
                    self.builders[j].reset()
                    self._reset(j)
                    continue
                trunc = bool(trunc) or (not term and self.t[j] >= env.limit)
                self.ep_return[j] += r
                # clipped here, where rewards are summed into n-step returns: the replay and
                # the learner only ever see the sums (and the initial priorities agree)
                if clip:
                    r = min(1.0, max(-1.0, r))
                lives, lost = int(info.get("lives", -1)), False
                if life_loss:  # the returns end as at a termination, the game goes on
                    lost = 0 <= lives < self.lives[j]
                self.lives[j] = lives
                for tr in self.builders[j].push(self.obs[j].copy(), a, r, nxt,
                                                bool(term) or lost, trunc):
                    append(*tr, self.actor_ids[j], self.seq[j])
                    self.seq[j] += 1
                if term or trunc:
                    self.episodes.append((int(self.actor_ids[j]), float(self.ep_return[j]),
                                          int(self.t[j])))
                    self._reset(j)
                else:
                    self.obs[j] = nxt
        steps = int(rounds) * self.k
        self.env_steps += steps
        return steps

    def _reset(self, j: int) -> None:
        obs, info = self.envs[j].core.reset()
        self.obs[j] = self._as_obs(obs)
        self.lives[j] = int(info.get("lives", -1))
        self.t[j] = 0
        self.ep_return[j] = 0.0

    # -- flushing ----------------------------------------------------------------------------
    def take(self, max_items: int | None = None):
        """Pending transitions as ``(batch, priorities, keys)`` (oldest first), or None.

        Priorities are ``|n-step TD| + priority_eps`` from this group's current parameters.
        """
        m = self._n_pending
        if m == 0:
            return None
        n = m if max_items is None else min(int(max_items), m)
        buf = self._buf
        batch = {k: buf[k][:n].copy() for k in ("obs", "action", "reward", "next_obs",
                                                  "discount")}
        keys = (buf["actor"][:n].copy(), buf["seq"][:n].copy())
        for a in buf.values():  # keep the rest at the front (numpy copes with the overlap)
            a[:m - n] = a[n:m]
        self._n_pending = m - n
        if self._params is None:
            td = np.ones(n)
        elif self.cfg.variant == "dqn":
            td = dqn_td_errors(self.cfg.net, self._params, batch)
        else:
            td = dpg_td_errors(self.cfg.net, self._params, batch)
        priorities = np.abs(td) + self.cfg.priority_eps
        priorities[~np.isfinite(priorities)] = 1.0
        return batch, priorities, keys

    def drain_episodes(self) -> list[tuple[int, float, int]]:
        """Episodes finished since the last call: ``(actor id, return, length)``."""
        out, self.episodes = self.episodes, []
        return out

    def close(self) -> None:
        for e in self.envs:
            e.close()


def obs_layout(net: QNetSpec | DPGSpec) -> tuple[tuple[int, ...], np.dtype]:
    """``(shape, dtype)`` of one observation for ``net``: uint8 frames for a conv Q-network,
    else a float32 vector."""
    if isinstance(net, QNetSpec):
        return net.obs_shape, net.obs_dtype
    return (net.obs_dim,), np.dtype(np.float32)


def greedy_policy(net: QNetSpec | DPGSpec, flat: np.ndarray):
    """``act(obs_batch) -> actions``: greedy (DQN) or noise-free (DPG) actions of the
    published parameters ``flat``."""
    params = unpack(net, flat)
    if isinstance(net, QNetSpec):
        return lambda obs: q_values(net, params, obs).argmax(axis=1)
    return lambda obs: dpg_action(net, params, obs)


def greedy_returns(cfg: ActorConfig, flat: np.ndarray, env: FastEnv, seeds) -> np.ndarray:
    """Returns of noise-free episodes of the published parameters ``flat``, one episode per
    seed (:func:`esnb.envs.rollout.run_episode`)."""
    policy = GreedyNetPolicy(cfg.net, flat).numpy()
    return np.array([run_episode(env, policy, int(seed)).ret for seed in seeds])


@dataclass(frozen=True, eq=False)
class GreedyNetPolicy:
    """Ape-X's network acting as its greedy evaluations act (DQN: the argmax of Q, on vectors
    or frames; DPG: the noise-free action), as plain data: what ``runner.video()``,
    ``esnb play RUN --video`` and the dashboard's record button play. It pickles to the
    rendering process as the spec and an array.

    Attributes
    ----------
    net : QNetSpec or DPGSpec
    flat : ndarray of float32
        The parameters as published to the actors.
    env : str
        The environment it was trained on (what the refusal to export names).
    """

    net: QNetSpec | DPGSpec
    flat: np.ndarray
    env: str = ""

    @property
    def not_exported(self) -> str:
        """Why ``esnb export`` does not write it (one line)."""
        kind = "Q-network" if isinstance(self.net, QNetSpec) else "DPG network"
        return (f"Ape-X's {kind} on {self.env or 'its environment'} is not exported (esnb "
                f"export writes the MLP policies of ES, AES-RL and IMPALA); esnb play RUN "
                f"plays it and --video records it")

    def numpy(self):
        """``act(obs)``: the action for one observation, as the environment gives it."""
        act = greedy_policy(self.net, self.flat)
        shape, dtype = obs_layout(self.net)
        discrete = isinstance(self.net, QNetSpec)

        def one(obs):
            a = act(np.asarray(obs, dtype).reshape(1, *shape))[0]
            return int(a) if discrete else a

        return one
