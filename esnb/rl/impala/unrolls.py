"""Unrolls between IMPALA's actors and its learner (Espeholt et al. 2018, arXiv 1802.01561):
the batch the learner trains on, and the FIFO queue that assembles batches from actor tasks.

Actor tasks return blocks of unrolls (:func:`esnb.runners.impala.tasks.impala_unrolls`); the learner
takes the oldest B unrolls of the current unroll length T, whichever tasks they came from.
Unrolls of another length (the ``unroll_length`` control changed) and unrolls an environment
broke (a non-finite reward or observation) are dropped and counted.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from esnb.rl.impala.actor_critic import ActorCriticSpec


@dataclass
class UnrollBatch:
    """B unrolls of T steps, time-major (numpy, as actors return them).

    Attributes
    ----------
    obs : float32 or uint8 [T+1, B, obs_dim]
        x_0..x_T; x_T is the bootstrap observation (the next unroll's first); frames are
        uint8, flattened (the network's torso restores their shape).
    actions : int64 [T, B] or float32 [T, B, act_dim]
        Actions as sampled (Box: before clipping to the bounds).
    rewards : float32 [T, B]
    terminated, truncated : bool [T, B]
        The episode ended after step t by termination / by a time limit (never both);
        ``terminated`` also where a life was lost and the game went on (the actors'
        ``life_loss``): no bootstrap across it either way.
    behaviour_log_probs : float32 [T, B]
        log mu(a_t|x_t) under the actor's parameters.
    trunc_t, trunc_b : int64 [n]
        Positions of the truncated steps.
    trunc_obs : [n, obs_dim], the dtype of ``obs``
        The observation each truncation cut off (its value bootstraps the step).
    versions : int64 [B]
        The parameter version each unroll's actor used.
    """

    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    behaviour_log_probs: np.ndarray
    trunc_t: np.ndarray
    trunc_b: np.ndarray
    trunc_obs: np.ndarray
    versions: np.ndarray

    @property
    def T(self) -> int:  # noqa: N802 - the paper's name
        return self.rewards.shape[0]

    @property
    def B(self) -> int:  # noqa: N802
        return self.rewards.shape[1]

    def check(self, spec: ActorCriticSpec) -> None:
        """Raise ``ValueError`` naming the first array whose shape or values are wrong."""
        T, B = self.rewards.shape if self.rewards.ndim == 2 else (0, 0)
        if T == 0 or B == 0:
            raise ValueError(f"rewards must be [T, B] with T, B >= 1, got {self.rewards.shape}")
        act_shape = (T, B) if spec.discrete else (T, B, spec.act_dim)
        want = {"obs": (T + 1, B, spec.obs_dim), "actions": act_shape, "terminated": (T, B),
                "truncated": (T, B), "behaviour_log_probs": (T, B), "versions": (B,),
                "trunc_obs": (len(self.trunc_t), spec.obs_dim), "trunc_b": self.trunc_t.shape}
        for name, shape in want.items():
            got = getattr(self, name).shape
            if got != shape:
                raise ValueError(f"{name} has shape {got}, expected {shape}")
        if self.obs.dtype != self.trunc_obs.dtype and len(self.trunc_obs):
            raise ValueError(f"trunc_obs has dtype {self.trunc_obs.dtype}, obs {self.obs.dtype}")
        if not np.isfinite(self.behaviour_log_probs).all():
            raise ValueError("behaviour_log_probs must be finite")


class UnrollQueue:
    """FIFO of unrolls received from actors, taken B at a time.

    Attributes
    ----------
    dropped_nonfinite : int
        Unrolls dropped because the environment returned a non-finite number.
    dropped_length : int
        Unrolls dropped because their length was not the current ``unroll_length``.
    dropped_frames : int
        Frames (steps) of all dropped unrolls.
    """

    _KEYS = ("obs", "actions", "rewards", "terminated", "truncated", "behaviour_log_probs")

    def __init__(self):
        self._blocks: deque[dict] = deque()
        self.dropped_nonfinite = 0
        self.dropped_length = 0
        self.dropped_frames = 0

    def __len__(self) -> int:
        return sum(b["n"] - b["cursor"] for b in self._blocks)

    @property
    def frames(self) -> int:
        """Frames (steps) of the queued unrolls."""
        return sum((b["n"] - b["cursor"]) * b["T"] for b in self._blocks)

    def add(self, result: dict) -> int:
        """Queue the unrolls of one actor task (its finite ones); returns how many."""
        keep = np.asarray(result["finite"], dtype=bool)
        block = {k: result[k] for k in self._KEYS}
        t_pos, u_pos, t_obs = result["trunc_t"], result["trunc_u"], result["trunc_obs"]
        if not keep.all():
            self.dropped_nonfinite += int((~keep).sum())
            self.dropped_frames += int((~keep).sum()) * int(block["rewards"].shape[0])
            new_index = np.cumsum(keep) - 1  # old unroll -> new position
            for k in self._KEYS:
                block[k] = block[k][:, keep]
            m = keep[u_pos]
            t_pos, u_pos, t_obs = t_pos[m], new_index[u_pos[m]], t_obs[m]
        n = int(keep.sum())
        if n == 0:
            return 0
        block.update(trunc_t=t_pos, trunc_u=u_pos, trunc_obs=t_obs, n=n, cursor=0,
                     T=block["rewards"].shape[0], version=int(result["version"]))
        self._blocks.append(block)
        return n

    def ready(self, T: int) -> int:
        """Unrolls of length ``T`` waiting (unrolls of other lengths are dropped here)."""
        kept = deque()
        for b in self._blocks:
            if b["T"] == T:
                kept.append(b)
            else:
                self.dropped_length += b["n"] - b["cursor"]
                self.dropped_frames += (b["n"] - b["cursor"]) * b["T"]
        self._blocks = kept
        return len(self)

    def take(self, B: int, T: int) -> UnrollBatch:
        """The oldest ``B`` unrolls of length ``T`` as one batch.

        Raises
        ------
        ValueError
            If fewer than ``B`` such unrolls are queued (nothing is taken then).
        """
        have = self.ready(T)
        if B < 1 or have < B:
            raise ValueError(f"a batch needs B >= 1 queued unrolls of length {T}; asked for "
                             f"{B}, {have} queued")
        parts, need, offset = [], B, 0
        tt, tb, to = [], [], []
        while need:
            b = self._blocks[0]
            c0 = b["cursor"]
            c1 = min(b["n"], c0 + need)
            parts.append({k: b[k][:, c0:c1] for k in self._KEYS}
                         | {"versions": np.full(c1 - c0, b["version"], dtype=np.int64)})
            m = (b["trunc_u"] >= c0) & (b["trunc_u"] < c1)
            tt.append(b["trunc_t"][m])
            tb.append(b["trunc_u"][m] - c0 + offset)
            to.append(b["trunc_obs"][m])
            need -= c1 - c0
            offset += c1 - c0
            b["cursor"] = c1
            if c1 == b["n"]:
                self._blocks.popleft()
        cat = {k: np.concatenate([p[k] for p in parts], axis=1) for k in self._KEYS}
        return UnrollBatch(
            **cat, versions=np.concatenate([p["versions"] for p in parts]),
            trunc_t=np.concatenate(tt).astype(np.int64),
            trunc_b=np.concatenate(tb).astype(np.int64),
            trunc_obs=np.concatenate(to))

    def clear(self) -> None:
        self._blocks.clear()
