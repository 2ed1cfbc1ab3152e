"""``esnb/BitFlip-v0``: the 1-D bit-flipping task of Khadilkar 2023 (EORL, section 4.2.1).

Adapted there from Hindsight Experience Replay (Andrychowicz et al. 2017). The state is ``m``
bits, all zeros at the start; the goal is all ones. Action ``i`` flips bit ``i``. Every flip
that does not reach the goal costs ``1/(5m)``; reaching the goal ends the episode with +10 and
no step penalty on that step. After ``5m`` flips without the goal the episode is truncated
(no terminal reward), so a timed-out episode sums to exactly -1.

With ``subgoal=True`` the goal pays +10 only if the episode passed through the alternating
state ``s[i] = i mod 2`` (0101...) on the way, and +1 otherwise. Whether it did is not part of
the observation (as in the paper): the reward is not Markov in the observation.
"""

from __future__ import annotations

import numbers

import gymnasium as gym
import numpy as np

GOAL_REWARD = 10.0
DIRECT_REWARD = 1.0  # subgoal version: the goal reached without passing the subgoal


def _check_bits(n_bits) -> int:
    if isinstance(n_bits, bool) or not isinstance(n_bits, numbers.Integral) or n_bits < 2:
        raise ValueError(f"BitFlip n_bits (size) must be an integer >= 2, got {n_bits!r}")
    return int(n_bits)


def _check_subgoal(subgoal) -> bool:
    if isinstance(subgoal, (bool, np.bool_)):
        return bool(subgoal)
    if isinstance(subgoal, numbers.Integral) and subgoal in (0, 1):
        return bool(subgoal)
    raise ValueError(f"BitFlip subgoal must be one of False, True (or 0, 1), got {subgoal!r}")


class BitFlipEnv(gym.Env):
    """Flip bits from all zeros to all ones.

    Parameters
    ----------
    n_bits : int
        Number of bits ``m`` (>= 2); observation and action size.
    subgoal : bool
        Pay +10 only when the alternating state was visited on the way (else +1).

    Attributes
    ----------
    timeout : int
        ``5 * n_bits`` steps, after which the episode is truncated.
    step_penalty : float
        ``-1 / (5 * n_bits)``.
    subgoal_state : numpy.ndarray
        The alternating state ``[0, 1, 0, 1, ...]``.
    desired_goal : numpy.ndarray
        The all-ones observation (the goal input of goal-conditioned learners).
    """

    metadata = {"render_modes": []}

    def __init__(self, n_bits: int = 6, subgoal: bool = False):
        self.n_bits = _check_bits(n_bits)
        self.subgoal = _check_subgoal(subgoal)
        m = self.n_bits
        self.timeout = 5 * m
        self.step_penalty = -1.0 / (5 * m)
        self.observation_space = gym.spaces.MultiBinary(m)
        self.action_space = gym.spaces.Discrete(m)
        self.subgoal_state = (np.arange(m) % 2).astype(np.int8)
        self.desired_goal = np.ones(m, dtype=np.int8)
        # the state is also kept as an integer bitmask: goal and subgoal tests are one compare
        self._goal_code = (1 << m) - 1
        self._subgoal_code = sum(1 << i for i in range(1, m, 2))
        self._state = np.zeros(m, dtype=np.int8)
        self._code = 0
        self._t = 0
        self._passed = False

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._state = np.zeros(self.n_bits, dtype=np.int8)
        self._code = 0
        self._t = 0
        self._passed = False
        return self._state.copy(), {"passed_subgoal": False}

    def step(self, action):
        i = int(action)
        if not 0 <= i < self.n_bits:
            raise ValueError(f"BitFlip action must be in [0, {self.n_bits}), got {action!r}")
        state = self._state
        state[i] ^= 1
        self._code ^= 1 << i
        self._t += 1
        if self._code == self._subgoal_code:
            self._passed = True
        info = {"passed_subgoal": self._passed}
        if self._code == self._goal_code:
            reward = GOAL_REWARD if (not self.subgoal or self._passed) else DIRECT_REWARD
            return state.copy(), reward, True, False, info
        return state.copy(), self.step_penalty, False, self._t >= self.timeout, info

    # -- hindsight (used by HER) -------------------------------------------------------------
    def hindsight_rewards(self, observations: np.ndarray, goal: np.ndarray):
        """Rewards of a trajectory had ``goal`` been the goal (for hindsight relabelling).

        Parameters
        ----------
        observations : array, shape (T + 1, m)
            The observations of an episode, the reset observation first.
        goal : array, shape (m,)
            The substitute goal state.

        Returns
        -------
        rewards : numpy.ndarray
            Rewards up to and including the first step that reaches ``goal`` (the whole
            trajectory if it never does); the terminal step pays the goal reward by this
            environment's rule (with ``subgoal``: +10 only after the alternating state).
        reached : bool
            Whether the trajectory reached ``goal``.
        """
        obs = np.asarray(observations).reshape(len(observations), self.n_bits)
        goal = np.asarray(goal).reshape(self.n_bits)
        hit = np.flatnonzero(np.all(obs[1:] == goal, axis=1))
        if hit.size == 0:
            return np.full(len(obs) - 1, self.step_penalty), False
        t = int(hit[0]) + 1
        rewards = np.full(t, self.step_penalty)
        passed = bool(np.any(np.all(obs[1:t] == self.subgoal_state, axis=1)))
        rewards[-1] = GOAL_REWARD if (not self.subgoal or passed) else DIRECT_REWARD
        return rewards, True
