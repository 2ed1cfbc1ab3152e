"""Ape-X's learner side: the two variants' networks and learners, and chunks of updates on
prefetched replay samples.

The learner samples ``learner_chunk`` batches per replay call and trains on them in a row;
the call for the next chunk is in flight while it trains and carries the previous chunk's new
priorities (so priorities reach the replay one chunk late, as in Ape-X's asynchronous
learner) and, every ``evict_interval`` updates, an eviction of the excess over the soft
capacity.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from esnb.controls import ControlSnapshot
from esnb.envs.pixels import check_vector_obs
from esnb.nets.conv import HEAD_HIDDEN, choose_torso
from esnb.rl.apex.dpg import DPGLearner
from esnb.rl.apex.dqn import DQNLearner
from esnb.rl.apex.nets import DPGSpec, QNetSpec, transition_spec


def build_dqn(cfg, obs_space, act_space, seed: int):
    """Ape-X DQN's dueling network spec, learner and replay transition spec (uint8
    observations for a conv torso over frames)."""
    if not hasattr(act_space, "n"):
        raise ValueError(f"Ape-X DQN needs discrete actions; {cfg.env} has {act_space} "
                         f"(use ApeXDPG)")
    torso = choose_torso(cfg.torso, cfg.env, obs_space, "apex")
    obs_dim = int(np.prod(obs_space.shape))
    hidden = cfg.hidden if torso is None else (HEAD_HIDDEN[torso.kind],)
    net = QNetSpec(obs_dim, int(act_space.n), hidden, dueling=cfg.dueling, torso=torso)
    spec = transition_spec(net.obs_shape, obs_dtype=net.obs_dtype)
    return net, dqn_learner(cfg, net, seed), spec


def dqn_learner(cfg, net: QNetSpec, seed: int) -> DQNLearner:
    """The DQN learner of settings ``cfg`` (an Ape-X DQN config) for ``net``."""
    return DQNLearner(net, lr=cfg.lr, grad_clip=cfg.grad_clip, target_period=cfg.target_period,
                      loss=cfg.loss, double=cfg.double, optimizer=cfg.optimizer, seed=seed,
                      device=cfg.device)


def build_dpg(cfg, obs_space, act_space, seed: int):
    """Ape-X DPG's actor-critic spec, learner and replay transition spec (vector
    observations only: continuous control from frames is not in the paper)."""
    check_vector_obs(cfg.env, "Ape-X DPG")
    obs_dim = int(np.prod(obs_space.shape))
    if not hasattr(act_space, "low") or hasattr(act_space, "n"):
        raise ValueError(f"Ape-X DPG needs Box actions; {cfg.env} has {act_space}")
    net = DPGSpec(obs_dim, int(np.prod(act_space.shape)), tuple(np.ravel(act_space.low)),
                  tuple(np.ravel(act_space.high)), cfg.actor_hidden, cfg.critic_hidden)
    return net, dpg_learner(cfg, net, seed), transition_spec(obs_dim, (net.act_dim,), "float32")


def dpg_learner(cfg, net: DPGSpec, seed: int) -> DPGLearner:
    """The DPG learner of settings ``cfg`` (an Ape-X DPG config) for ``net``."""
    return DPGLearner(net, actor_lr=cfg.actor_lr, critic_lr=cfg.critic_lr,
                      target_period=cfg.target_period, actor_clip=cfg.actor_clip,
                      critic_grad_clip=cfg.critic_grad_clip, seed=seed, device=cfg.device)


class ChunkLearner:
    """The learner with its replay traffic: prefetched chunks, priorities, evictions.

    Parameters
    ----------
    learner : DQNLearner or DPGLearner
    priority_eps : float
        Added to ``|TD error|`` for the new priorities.
    rate_controls : tuple of str
        The live step sizes passed to every update (``lr``; ``actor_lr``, ``critic_lr``).

    Attributes
    ----------
    steps, sampled : int
        Updates made and transitions sampled.
    cpu : float
        CPU seconds of the updates (this thread's: what they cost, however loaded the
        machine is).
    """

    def __init__(self, learner, priority_eps: float, rate_controls: tuple[str, ...]):
        self.learner = learner
        self.priority_eps = float(priority_eps)
        self.rate_controls = rate_controls
        self.steps = self.sampled = 0
        self.cpu = 0.0
        self._prefetch = None
        self._pending: tuple | None = None
        self._evict_due = False

    def forget(self) -> None:
        """Drop the call in flight and the pending priorities (ids of a lost replay)."""
        self._prefetch = self._pending = None

    def flush(self, replay) -> None:
        """Send the pending priorities now (before a replay checkpoint)."""
        if self._pending is not None:
            ids, priorities = self._pending
            self._pending = None
            replay.call("update_priorities", ids, priorities)

    def _exchange(self, replay, snap: ControlSnapshot):
        """Send the last chunk's priorities (and an eviction, when due) and ask for the next
        chunk, in one replay call."""
        ids, priorities = self._pending or (None, None)
        self._pending = None
        evict, self._evict_due = self._evict_due, False
        return replay.submit("exchange", ids, priorities, snap.batch_size, snap.learner_chunk,
                             snap.beta, evict)

    def chunk(self, replay, snap: ControlSnapshot, info: dict,
              after_update: Callable[[int], None]) -> bool:
        """One chunk of updates (``after_update(steps)`` after each); False when the replay
        had nothing to give."""
        fut = self._prefetch if self._prefetch is not None else self._exchange(replay, snap)
        t0 = time.perf_counter()
        data = replay.result(fut)
        self._prefetch = self._exchange(replay, snap)  # sampled while this chunk trains
        info["wait_time"] += time.perf_counter() - t0
        if data is None:
            return False
        t0, c0 = time.perf_counter(), time.thread_time()
        batch, ids, weights = data["batch"], data["ids"], data["weights"]
        kwargs = {name: getattr(snap, name) for name in self.rate_controls}
        priorities = np.empty(ids.shape, dtype=np.float64)
        for j in range(len(ids)):
            td, diag = self.learner.update({k: v[j] for k, v in batch.items()}, weights[j],
                                           target_period=snap.target_period, **kwargs)
            priorities[j] = np.abs(td) + self.priority_eps
            self.steps += 1
            self.sampled += ids.shape[1]
            info["diag"].append(diag)
            self._evict_due |= self.steps % snap.evict_interval == 0
            after_update(self.steps)
        priorities[~np.isfinite(priorities)] = 1.0
        info["learn_time"] += time.perf_counter() - t0
        cpu = time.thread_time() - c0
        info["learn_cpu"] += cpu
        self.cpu += cpu
        self._pending = (ids, priorities)
        return True
