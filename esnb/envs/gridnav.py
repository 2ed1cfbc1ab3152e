"""``esnb/GridNav-v0``: 2-D grid navigation with subgoals, Khadilkar 2023 (EORL, section 4.2.2).

Adapted there from Contrastive Experience Replay (Khadilkar and Meisheri 2023). An ``m x m``
grid, cells ``[x, y]`` with ``1 <= x, y <= m``; the agent starts at ``[1, 1]``, the goal is
``[m, m]``, the subgoals are I1 at ``[1, m]`` and I2 at ``[m, 1]``. Actions UP (y + 1), DOWN
(y - 1), LEFT (x - 1), RIGHT (x + 1); a move off the grid leaves the agent where it is. With
probability ``stochasticity`` the chosen action is replaced by a uniformly random one (possibly
the same). The observation is ``[x/m, y/m, visited I1, visited I2]`` (float32).

Every step that does not reach the goal pays ``-1/tau``; reaching the goal ends the episode
with a terminal reward instead, by version (``subgoals``):

====  ==========================================================
"0"   +10
"1"   +10 if I1 was visited, else +1
"2+"  +10 if both were visited, +2 if one was, +1 if none
"2-"  +10 if both were visited, -1 if one was, +1 if none
====  ==========================================================

``tau``, the timeout (truncation, no terminal reward, so a timed-out episode sums to -1), is
10 times the length of the shortest path that earns +10: ``2(m - 1)`` for "0" and "1" (I1 is
a corner on a shortest path), ``4(m - 1)`` for "2+" and "2-" (both corners).
"""

from __future__ import annotations

import numbers

import gymnasium as gym
import numpy as np

SUBGOALS = ("0", "1", "2+", "2-")
ACTIONS = ("UP", "DOWN", "LEFT", "RIGHT")
_MOVES = ((0, 1), (0, -1), (-1, 0), (1, 0))

#: terminal reward by version, indexed by (visited I1, visited I2)
_TERMINAL = {
    "0": {(0, 0): 10.0, (1, 0): 10.0, (0, 1): 10.0, (1, 1): 10.0},
    "1": {(0, 0): 1.0, (1, 0): 10.0, (0, 1): 1.0, (1, 1): 10.0},
    "2+": {(0, 0): 1.0, (1, 0): 2.0, (0, 1): 2.0, (1, 1): 10.0},
    "2-": {(0, 0): 1.0, (1, 0): -1.0, (0, 1): -1.0, (1, 1): 10.0},
}


def check_subgoals(subgoals) -> str:
    """The version name for ``subgoals`` (ints 0 and 1 are accepted for "0" and "1")."""
    if isinstance(subgoals, numbers.Integral) and not isinstance(subgoals, bool):
        subgoals = str(int(subgoals))
    if subgoals not in SUBGOALS:
        raise ValueError(
            f"GridNav subgoals must be one of {', '.join(map(repr, SUBGOALS))}, got {subgoals!r}"
        )
    return subgoals


def shortest_rewarding_path(size: int, subgoals: str) -> int:
    """Steps of the shortest path from [1, 1] to [m, m] that earns +10."""
    return 4 * (size - 1) if subgoals in ("2+", "2-") else 2 * (size - 1)


class GridNavEnv(gym.Env):
    """Navigate an ``m x m`` grid from ``[1, 1]`` to ``[m, m]``, with optional subgoals.

    Parameters
    ----------
    size : int
        Side ``m`` of the grid (>= 2).
    subgoals : {"0", "1", "2+", "2-"}
        Which subgoals change the terminal reward (see the module docstring).
    stochasticity : float
        Probability in [0, 1] that an action is replaced by a uniformly random one.

    Attributes
    ----------
    timeout : int
        ``tau`` = 10 x the shortest path that earns +10.
    step_penalty : float
        ``-1 / tau``.
    desired_goal : numpy.ndarray
        The observation at the end of the shortest +10 path (the goal input of
        goal-conditioned learners): ``[1, 1, 0, 0]``, ``[1, 1, 1, 0]`` or ``[1, 1, 1, 1]``.
    """

    metadata = {"render_modes": []}

    def __init__(self, size: int = 8, subgoals: str = "0", stochasticity: float = 0.0):
        if isinstance(size, bool) or not isinstance(size, numbers.Integral) or size < 2:
            raise ValueError(f"GridNav size must be an integer >= 2, got {size!r}")
        self.size = m = int(size)
        self.subgoals = check_subgoals(subgoals)
        if isinstance(stochasticity, bool) or not isinstance(stochasticity, numbers.Real) or not (
            0.0 <= float(stochasticity) <= 1.0
        ):
            raise ValueError(
                f"GridNav stochasticity must be a number in [0, 1], got {stochasticity!r}"
            )
        self.stochasticity = float(stochasticity)
        self.timeout = 10 * shortest_rewarding_path(m, self.subgoals)
        self.step_penalty = -1.0 / self.timeout
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(4,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(4)
        self._terminal = _TERMINAL[self.subgoals]
        flags = {"0": (0, 0), "1": (1, 0), "2+": (1, 1), "2-": (1, 1)}[self.subgoals]
        self.desired_goal = np.array([1.0, 1.0, *flags], dtype=np.float32)
        self._x = self._y = 1
        self._v1 = self._v2 = 0
        self._t = 0

    def _obs(self) -> np.ndarray:
        m = self.size
        return np.array([self._x / m, self._y / m, self._v1, self._v2], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._x = self._y = 1
        self._v1 = self._v2 = 0
        self._t = 0
        return self._obs(), {}

    def step(self, action):
        a = int(action)
        if not 0 <= a < 4:
            raise ValueError(f"GridNav action must be in [0, 4) (UP, DOWN, LEFT, RIGHT), got "
                             f"{action!r}")
        if self.stochasticity and self.np_random.random() < self.stochasticity:
            a = int(self.np_random.integers(4))
        m = self.size
        dx, dy = _MOVES[a]
        x, y = self._x + dx, self._y + dy
        if 1 <= x <= m and 1 <= y <= m:
            self._x, self._y = x, y
        self._t += 1
        x, y = self._x, self._y
        if x == 1 and y == m:
            self._v1 = 1
        elif x == m and y == 1:
            self._v2 = 1
        if x == m and y == m:
            return self._obs(), self._terminal[(self._v1, self._v2)], True, False, {}
        return self._obs(), self.step_penalty, False, self._t >= self.timeout, {}

    # -- hindsight (used by HER) -------------------------------------------------------------
    def terminal_reward(self, visited_i1: bool, visited_i2: bool) -> float:
        """The goal reward of this version for these subgoal flags."""
        return self._terminal[(int(bool(visited_i1)), int(bool(visited_i2)))]

    def hindsight_rewards(self, observations: np.ndarray, goal: np.ndarray):
        """Rewards of a trajectory had ``goal`` (an observation) been the goal.

        The terminal step is the first one whose observation equals ``goal`` (position and
        subgoal flags); it pays this version's goal reward for the flags of ``goal``.

        Returns
        -------
        rewards : numpy.ndarray
            Up to and including the terminal step (the whole trajectory if never reached).
        reached : bool
        """
        obs = np.asarray(observations, dtype=np.float32).reshape(len(observations), 4)
        goal = np.asarray(goal, dtype=np.float32).reshape(4)
        hit = np.flatnonzero(np.all(obs[1:] == goal, axis=1))
        if hit.size == 0:
            return np.full(len(obs) - 1, self.step_penalty), False
        t = int(hit[0]) + 1
        rewards = np.full(t, self.step_penalty)
        rewards[-1] = self.terminal_reward(goal[2] > 0.5, goal[3] > 0.5)
        return rewards, True
