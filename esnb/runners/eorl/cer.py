"""Contrastive experience replay (CER, Khadilkar and Meisheri 2023), the EORL paper's CER
baseline, on EORL's Monte-Carlo DQN, buffer and budget.

What the source says (its abstract; the method section was not readable here): transitions
with *significant deviations in state* followed by *unusually large variations in subsequent
rewards* are marked as possible causal effects, and their state-action pairs are added to a
*separate replay buffer*, together with *contrastive* samples: transitions from a similar state
with a differing action; training includes this buffer. (Not Zhang and Sutton's 2017
"combined experience replay", which puts the newest transition in every batch.)

esnb's reading, every number of which is esnb's choice (the paper's thresholds and mixing
were not available; the EORL paper says only that it used CER's published settings):

- **State deviation** of the transition ``t`` (``s_t -> s_{t+1}``): ``d_t = ||x_{t+1} -
  x_t||_2`` on the observations. It is *significant* when ``d_t > mean(d) + state_z std(d)``,
  the mean and standard deviation over every transition seen so far (this episode's
  included); ``state_z = 2``.
- **Variation of the subsequent rewards**: the Monte-Carlo return from ``t``, ``G_t`` (the
  target of ``(s_t, a_t)``). It is *unusually large* when ``|G_t - mean(G)| > return_z
  std(G)`` over every return-to-go seen so far; both signs count (an unusually bad outcome is
  as informative as a good one); ``return_z = 2``.
- A transition is **marked** when both hold. On GridNav this fires where a subgoal is entered
  (the visited flag jumps by 1 while a move changes ``x/m`` by ``1/m``) in an episode whose
  outcome was unusual; on BitFlip every flip moves the observation by exactly 1, no deviation
  stands out, and CER trains as VAN (the EORL paper's BitFlip CER numbers differ from VAN's,
  so the original rule must see something there that the abstract does not describe).
- **Contrastive samples** of a marked ``(s, a)``: transitions of the main buffer (this episode
  included) from a state within ``contrast_radius`` (L2; 0: the same state) with an action
  other than ``a``; up to ``contrast_k`` (3) of them, drawn uniformly without replacement,
  enter the CER buffer with their own returns, after the marked transition itself.
- **The CER buffer** is a FIFO of ``cer_buffer_factor x timeout`` transitions (10, a tenth of
  the main buffer). Every transition still enters the main buffer, as in VAN.
- **Training batches**: of each sample of ``min(4096, main size)`` transitions,
  ``round(cer_fraction x size)`` (``cer_fraction = 0.25``, capped at the CER buffer's size)
  are drawn uniformly from the CER buffer and the rest from the main buffer, both without
  replacement.
"""

from __future__ import annotations

import math

import numpy as np

from esnb.replay import ReplayBuffer, join_state, split_state
from esnb.rl.eorl.episodes import Episode, Sample
from esnb.rl.eorl.mc_dqn import mc_returns
from esnb.runners.eorl.learner import MCLearner, draw

_SPEC = {"sid": "int64", "action": "int64", "ret": "float64"}


class Moments:
    """Running count, mean and standard deviation of every value added (float64 sums)."""

    def __init__(self):
        self.sums = np.zeros(3)  # count, sum, sum of squares

    def add(self, values: np.ndarray) -> None:
        v = np.asarray(values, dtype=np.float64)
        self.sums += (len(v), v.sum(), (v * v).sum())

    @property
    def mean(self) -> float:
        return float(self.sums[1] / self.sums[0]) if self.sums[0] else 0.0

    @property
    def std(self) -> float:
        if not self.sums[0]:
            return 0.0
        return math.sqrt(max(0.0, float(self.sums[2] / self.sums[0]) - self.mean ** 2))


def causal_marks(deviation: np.ndarray, returns: np.ndarray, dev: Moments, ret: Moments,
                 state_z: float, return_z: float) -> np.ndarray:
    """Which transitions CER marks: a significant state deviation *and* an unusual return.

    Parameters
    ----------
    deviation : array, shape (T,)
        ``||x_{t+1} - x_t||`` of each transition.
    returns : array, shape (T,)
        Monte-Carlo returns ``G_t``.
    dev, ret : Moments
        Statistics of every deviation and return seen so far (these included).
    state_z, return_z : float
        Thresholds in standard deviations.

    Returns
    -------
    ndarray of bool, shape (T,)
    """
    big_move = np.asarray(deviation) > dev.mean + state_z * dev.std
    unusual = np.abs(np.asarray(returns) - ret.mean) > return_z * ret.std
    return big_move & unusual


class CERLearner(MCLearner):
    """One Monte-Carlo DQN trained on its buffer mixed with a contrastive (CER) buffer.

    Parameters
    ----------
    cer_fraction : float
        Share of each training sample drawn from the CER buffer.
    cer_buffer_factor : int
        CER buffer capacity in multiples of the timeout.
    state_z, return_z : float
        Marking thresholds in standard deviations.
    contrast_radius : float
        L2 distance within which a state counts as similar (0: the same state).
    contrast_k : int
        Contrastive samples per marked transition, at most.
    **kwargs
        As :class:`~esnb.runners.eorl.learner.MCLearner` (``n`` is 1).
    """

    algorithm = "CER"

    def __init__(self, env: str, env_kwargs: dict | None, episodes: int, seed: int, *,
                 cer_fraction: float, cer_buffer_factor: int, state_z: float,
                 return_z: float, contrast_radius: float, contrast_k: int, **kwargs):
        self.cer_fraction, self.state_z = float(cer_fraction), float(state_z)
        self.return_z, self.contrast_radius = float(return_z), float(contrast_radius)
        self.contrast_k, self.cer_buffer_factor = int(contrast_k), int(cer_buffer_factor)
        kwargs.pop("n", None)
        super().__init__(env, env_kwargs, episodes, seed, n=1, **kwargs)
        self.cer_buffer = ReplayBuffer(self.cer_buffer_factor * self.timeout, spec=_SPEC)
        self.deviations, self.returns = Moments(), Moments()
        self.marked = self.contrasts = 0  # totals
        self.last_marked = self.last_contrasts = 0  # of the latest episode

    def store(self, ep: Episode, controls: dict) -> None:
        super().store(ep, controls)
        obs = np.asarray(ep.obs, dtype=np.float64).reshape(len(ep.obs), -1)
        deviation = np.linalg.norm(np.diff(obs, axis=0), axis=1)
        g = mc_returns(self.training_rewards(ep, controls))
        self.deviations.add(deviation)
        self.returns.add(g)
        marks = np.flatnonzero(causal_marks(deviation, g, self.deviations, self.returns,
                                            self.state_z, self.return_z))
        self.last_marked, self.last_contrasts = len(marks), 0
        for t in marks:
            picked = self.contrastive(int(ep.sids[t]), int(ep.actions[t]))
            n = len(self.buffer)
            a = self.buffer.storage.arrays
            self.cer_buffer.add({"sid": np.r_[ep.sids[t], a["sid"][:n][picked]],
                                 "action": np.r_[ep.actions[t], a["action"][:n][picked]],
                                 "ret": np.r_[g[t], a["ret"][:n][picked]]})
            self.last_contrasts += len(picked)
        self.marked += self.last_marked
        self.contrasts += self.last_contrasts

    def contrastive(self, sid: int, action: int) -> np.ndarray:
        """Main-buffer slots of up to ``contrast_k`` transitions from a state within
        ``contrast_radius`` of state ``sid`` with an action other than ``action``."""
        rows = self.states.rows.astype(np.float64)
        near = np.linalg.norm(rows - rows[sid], axis=1) <= self.contrast_radius
        n = len(self.buffer)
        a = self.buffer.storage.arrays
        slots = np.flatnonzero(near[a["sid"][:n]] & (a["action"][:n] != action))
        if len(slots) > self.contrast_k:
            slots = np.sort(self.rngs["sample"].choice(slots, size=self.contrast_k,
                                                       replace=False))
        return slots

    def sample(self, member: int, size: int) -> Sample:
        """``round(cer_fraction x size)`` transitions from the CER buffer (at most its size),
        the rest from the main buffer, each uniformly without replacement."""
        k = min(len(self.cer_buffer), int(round(self.cer_fraction * size)))
        main = draw(self.buffer, size - k, self.rngs["sample"])
        cer = draw(self.cer_buffer, k, self.rngs["sample"])
        return Sample(member, *(np.concatenate([m, c]) for m, c in zip(main, cer)))

    def run_episode(self, controls=None):
        row = super().run_episode(controls)
        row.update(cer_marked=self.last_marked, cer_contrasts=self.last_contrasts,
                   cer_buffer=len(self.cer_buffer))
        return row

    def state_dict(self):
        meta, arrays = super().state_dict()
        cer_meta, cer_arrays = split_state(self.cer_buffer.state_dict())
        meta.update(cer_buffer=cer_meta, cer_marked=self.marked, cer_contrasts=self.contrasts)
        arrays.update({f"cer.{k}": v for k, v in cer_arrays.items()})
        arrays["cer_moments"] = np.stack([self.deviations.sums, self.returns.sums])
        return meta, arrays

    def load_state_dict(self, meta, arrays):
        super().load_state_dict(meta, arrays)
        self.cer_buffer.load_state_dict(join_state(
            meta["cer_buffer"], {k[4:]: v for k, v in arrays.items() if k.startswith("cer.")}))
        moments = np.asarray(arrays["cer_moments"], dtype=np.float64)
        self.deviations.sums, self.returns.sums = moments[0].copy(), moments[1].copy()
        self.marked, self.contrasts = int(meta["cer_marked"]), int(meta["cer_contrasts"])
