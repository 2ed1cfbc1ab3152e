"""n-step transitions built on the fly from one environment stream, and Ape-X's per-actor
exploration schedule.

Horgan et al. 2018, "Distributed Prioritized Experience Replay": each actor keeps the last
``n`` steps and emits ``(s_t, a_t, G, s_{t+k}, discount)`` with
``G = sum_{j<k} gamma^j r_{t+j}``; ``k = n`` in mid-episode. At the end of an episode the
pending steps are emitted with the steps that are left (``k < n``): after a *termination*
``discount = 0`` (nothing to bootstrap from), after a *truncation* (time limit)
``discount = gamma^k`` and ``s_{t+k}`` is the last observation, so the learner bootstraps
from it as if the episode went on.
"""

from __future__ import annotations

from collections import deque

import numpy as np


def apex_schedule(n: int, base: float, alpha: float) -> np.ndarray:
    """Ape-X's per-actor exploration: ``base^(1 + alpha * i / (n - 1))`` for ``i = 0..n-1``.

    With ``base = 0.4, alpha = 7`` (the paper's epsilons) actor 0 explores with 0.4 and the
    last with 0.4^8 ~ 6.6e-4; a single actor gets ``base``.
    """
    if isinstance(n, bool) or int(n) != n or n < 1:
        raise ValueError(f"the number of actors must be an integer >= 1, got {n!r}")
    if not np.isfinite(base) or base < 0:
        raise ValueError(f"base must be a finite number >= 0, got {base!r}")
    if not np.isfinite(alpha):
        raise ValueError(f"alpha must be finite, got {alpha!r}")
    n = int(n)
    if n == 1:
        return np.array([float(base)])
    i = np.arange(n)
    return float(base) ** (1.0 + float(alpha) * i / (n - 1))


class NStepBuilder:
    """n-step transitions of one environment stream.

    Parameters
    ----------
    n : int
        Steps per transition (Ape-X: 3).
    gamma : float
        Discount per step.

    Examples
    --------
    >>> b = NStepBuilder(2, 0.5)
    >>> b.push("s0", 0, 1.0, "s1", False, False)
    []
    >>> b.push("s1", 1, 2.0, "s2", False, False)
    [('s0', 0, 2.0, 's2', 0.25)]
    >>> b.push("s2", 0, 4.0, "s3", True, False)
    [('s1', 1, 4.0, 's3', 0.0), ('s2', 0, 4.0, 's3', 0.0)]
    """

    def __init__(self, n: int, gamma: float):
        if isinstance(n, bool) or int(n) != n or n < 1:
            raise ValueError(f"n-step n must be an integer >= 1, got {n!r}")
        if not 0 <= gamma <= 1:
            raise ValueError(f"gamma must be in [0, 1], got {gamma!r}")
        self.n = int(n)
        self.gamma = float(gamma)
        self._powers = [self.gamma ** j for j in range(self.n + 1)]
        self._obs: deque = deque()
        self._act: deque = deque()
        self._rew: deque = deque()

    def __len__(self) -> int:
        return len(self._obs)

    def reset(self) -> None:
        """Forget pending steps (e.g. an episode abandoned without an end)."""
        self._obs.clear()
        self._act.clear()
        self._rew.clear()

    def _emit(self, next_obs, terminated: bool):
        powers = self._powers
        k = len(self._rew)
        g = 0.0
        for j, r in enumerate(self._rew):
            g += powers[j] * r
        discount = 0.0 if terminated else powers[k]
        out = (self._obs.popleft(), self._act.popleft(), g, next_obs, discount)
        self._rew.popleft()
        return out

    def push(self, obs, action, reward: float, next_obs, terminated: bool,
             truncated: bool) -> list[tuple]:
        """Record one step; return the transitions it completes, oldest first.

        Each transition is ``(obs, action, G, next_obs, discount)``.
        """
        self._obs.append(obs)
        self._act.append(action)
        self._rew.append(float(reward))
        if terminated or truncated:
            return [self._emit(next_obs, bool(terminated)) for _ in range(len(self._obs))]
        if len(self._obs) == self.n:
            return [self._emit(next_obs, False)]
        return []
