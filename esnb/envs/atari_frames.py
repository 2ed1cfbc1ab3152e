"""DeepMind's Atari preprocessing and frame stack in one wrapper that drives the emulator itself.

:class:`AtariFrames` gives what gymnasium's :class:`~gymnasium.wrappers.AtariPreprocessing`
(no-op starts, the action repeated 4 frames, the max of the last two screens, grey, 84x84)
followed by :class:`~gymnasium.wrappers.FrameStackObservation` (the last 4, padded at reset with
the first) give, bit for bit: the same observations, rewards, terminations, truncations and
``info`` at every step, from the same seeds (``tests/test_pixel_envs.py`` steps both side by
side, lives lost, games over, caps hit, sticky actions on).

Why its own: a Pong agent step through gymnasium's chain cost 1.14 ms of CPU here, the
emulator's 4 frames 0.50 ms of it. The raw env copies a whole screen after every emulator frame
(its observation, which the preprocessing throws away: 4 per agent step), and the frame stack
rebuilds its stack through a deque, ``concatenate`` and ``deepcopy``. Here each emulator frame
is ``ale.act`` and the game-over checks the raw env makes, only the two screens the pooling
needs are read, and the stack is shifted in place (a copy goes out). The no-op starts and resets
still go through the raw env (its seeding and generator), as the wrapper's do.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

NOOP_MAX = 30
FRAME_SKIP = 4
SCREEN_SIZE = 84
STACK = 4


class AtariFrames(gym.Wrapper):
    """The preprocessed, stacked frames of a raw ALE env (``frameskip=1``): ``(4, 84, 84)`` uint8.

    Parameters
    ----------
    env : gymnasium.Env
        ``gymnasium.make("ALE/<Game>-v5", frameskip=1, ...)``.
    terminal_on_life_loss : bool
        A lost life ends the episode (as :class:`~gymnasium.wrappers.AtariPreprocessing`'s flag:
        the next ``reset`` starts a new game).
    screen_size : int
        Side of the square frames (the wrapper's ``screen_size``): 84 as the papers; 42 as
        RLlib's tuned fast Pong (``dim=42``), a quarter of the pixels.
    """

    def __init__(self, env: gym.Env, terminal_on_life_loss: bool = False,
                 screen_size: int = SCREEN_SIZE):
        super().__init__(env)
        base = env.unwrapped
        if getattr(base, "_frameskip", None) != 1:
            raise ValueError("AtariFrames skips frames itself: make the ALE env with frameskip=1")
        if getattr(base, "continuous", False):
            raise ValueError("AtariFrames takes discrete actions (continuous=False)")
        import cv2  # the atari extra's; imported once here, not per frame

        self._resize = cv2.resize
        self._area = cv2.INTER_AREA
        self.ale = base.ale
        self._actions = np.asarray(base._action_set)
        height, width = self.ale.getScreenDims()
        # [0]: the last frame's screen (the pooled result after _frame), [1]: the one before
        self._screens = [np.empty((height, width), np.uint8), np.empty((height, width), np.uint8)]
        if not isinstance(screen_size, int | np.integer) or not 8 <= screen_size <= 210:
            raise ValueError(f"screen_size must be an int in [8, 210], got {screen_size!r}")
        self.screen_size = int(screen_size)
        self._stack = np.zeros((STACK, self.screen_size, self.screen_size), np.uint8)
        self.terminal_on_life_loss = bool(terminal_on_life_loss)
        self.lives = 0
        self.observation_space = gym.spaces.Box(0, 255, self._stack.shape, np.uint8)

    def step(self, action) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        ale, screens = self.ale, self._screens
        code = self._actions[action]
        total, terminated, truncated = 0.0, False, False
        for t in range(FRAME_SKIP):
            total += 0.0 + ale.act(code, 1.0)  # the raw env's step: a float sum of frames
            terminated = ale.game_over(with_truncation=False)
            truncated = ale.game_truncated()
            if self.terminal_on_life_loss:
                lives = ale.lives()
                terminated = terminated or lives < self.lives
                self.lives = lives
            if terminated or truncated:
                break  # the screens kept are the last ones read (the wrapper's choice)
            if t == FRAME_SKIP - 2:
                ale.getScreenGrayscale(screens[1])
            elif t == FRAME_SKIP - 1:
                ale.getScreenGrayscale(screens[0])
        stack = self._stack
        stack[:-1] = stack[1:]
        stack[-1] = self._frame()
        return stack.copy(), total, terminated, truncated, self._info()

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        _, info = self.env.reset(seed=seed, options=options)
        noops = self.env.unwrapped.np_random.integers(1, NOOP_MAX + 1)
        for _ in range(noops):
            _, _, terminated, truncated, step_info = self.env.step(0)
            info.update(step_info)
            if terminated or truncated:
                _, info = self.env.reset(seed=seed, options=options)
        self.lives = self.ale.lives()
        self.ale.getScreenGrayscale(self._screens[0])
        self._screens[1].fill(0)
        self._stack[:] = self._frame()
        return self._stack.copy(), info

    def _frame(self) -> np.ndarray:
        """The max of the last two screens (in place, as the wrapper pools), resized."""
        last, before = self._screens
        np.maximum(last, before, out=last)
        size = self.screen_size
        return self._resize(last, (size, size), interpolation=self._area)

    def _info(self) -> dict[str, Any]:
        """The raw env's step ``info``."""
        ale = self.ale
        return {"lives": ale.lives(), "episode_frame_number": ale.getEpisodeFrameNumber(),
                "frame_number": ale.getFrameNumber()}
