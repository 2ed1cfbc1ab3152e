"""Pixel environments: Atari (``ALE/<Game>-v5``) with DeepMind's preprocessing, and MinAtar.

``make_env("ALE/Pong-v5")`` and ``make_env("MinAtar/Breakout-v1")`` come here. Observations stay
``uint8``, channels first (what a conv torso takes): ``(4, 84, 84)`` for Atari, ``(k, 10, 10)``
for MinAtar. Choices, each with its source:

- **Atari preprocessing** is gymnasium's :class:`~gymnasium.wrappers.AtariPreprocessing` then
  :class:`~gymnasium.wrappers.FrameStackObservation`, bit for bit, in one wrapper that drives
  the emulator itself (:class:`~esnb.envs.atari_frames.AtariFrames`: 0.6x the CPU a step),
  set as in Mnih et al. 2015 (Nature
  DQN, "Methods: Preprocessing" and Extended Data Table 1), which Ape-X (Horgan et al. 2018)
  and IMPALA (Espeholt et al. 2018) follow: up to 30 no-op actions at reset; the action
  repeated 4 frames, the observation the pixel-wise max of the last two (flicker); grey,
  resized to 84x84 (``screen_size`` changes the side: 42 is RLlib's tuned fast Pong's, a
  quarter of the pixels); the last 4 observations stacked.
- **frameskip=1 on the ALE env**: v5 ids skip 4 frames themselves; the wrapper skips (and
  max-pools) instead, so the raw env must not skip too (16 frames per step otherwise).
- **repeat_action_probability=0**: v5 ids default to sticky actions (0.25, Machado et al. 2018,
  "Revisiting the ALE"), which came after DQN/Ape-X/IMPALA; those papers' protocol is
  deterministic emulation with no-op starts. Pass ``repeat_action_probability=0.25`` in
  ``env_kwargs`` for Machado et al.'s protocol.
- **Episode cap**: the v5 ids' own 108,000 frames (30 minutes of play, 27,000 agent steps) as
  in the papers' evaluation, made a TimeLimit of 27,000 agent steps outside the preprocessing
  (so actors see it as a time limit and bootstrap there); ``max_episode_steps`` replaces it
  (agent steps).
- **Life loss**: ``terminal_on_life_loss=True`` ends the episode at a lost life (Nature DQN's
  training signal); it is for learning actors only, never evaluation, so it is off unless
  asked. gymnasium's wrapper then restarts the game at the next ``reset`` (OpenAI baselines'
  ``EpisodicLifeEnv`` instead continues it): episodes are shorter, the terminal signal is the
  same.
- **Rewards are raw**: clipping to [-1, 1] is the learner's (each paper clips in its loss or
  its actor's transition, not in the game's score), so scores stay comparable to the papers'.
- **MinAtar** (Young & Tian 2019) as the ``minatar`` package registers it: its 10x10xk boolean
  channels become ``uint8`` ``(k, 10, 10)``; its own sticky actions (0.1) and difficulty ramping,
  as in that paper; no frame stack (the channels carry motion trails).
"""

from __future__ import annotations

import difflib
import importlib

import gymnasium as gym
import numpy as np

from esnb.envs.atari_frames import FRAME_SKIP, SCREEN_SIZE, AtariFrames

ATARI = "ALE/"
MINATAR = "MinAtar/"
#: id prefix -> (modules it needs, esnb extra that installs them)
EXTRAS = {ATARI: (("ale_py", "cv2"), "atari"), MINATAR: (("minatar",), "minatar")}
#: the v5 ids' cap of 108,000 emulator frames, in agent steps (FRAME_SKIP frames each)
ATARI_MAX_STEPS = 108_000 // FRAME_SKIP


def is_pixel_env(env_id) -> bool:
    """True for ids this module makes (``ALE/...``, ``MinAtar/...``); imports nothing."""
    return isinstance(env_id, str) and env_id.startswith(tuple(EXTRAS))


def check_vector_obs(env_id: str, algorithm: str) -> None:
    """Refuse a pixel environment for an algorithm whose networks take vector observations
    (ES, AES-RL/CEM-RL, EORL: MLPs; Ape-X and IMPALA until their conv torsos are wired in):
    one ``ValueError``, before any cluster starts."""
    if is_pixel_env(env_id):
        raise ValueError(f"{algorithm} takes vector observations (MLP networks); {env_id!r} "
                         f"is a pixel environment (uint8 frames)")


def _prefix(env_id: str) -> str:
    return next(p for p in EXTRAS if env_id.startswith(p))


def register_pixel_envs(env_id: str) -> list[str]:
    """Import the package ``env_id``'s family needs and register its ids with gymnasium;
    return the family's registered ids. A missing package names the esnb extra."""
    prefix = _prefix(env_id)
    modules, extra = EXTRAS[prefix]
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:
            raise ValueError(f"{env_id!r} needs the {extra} extra (module {module!r} is "
                             f"missing): pip install 'esnb[{extra}]'") from None
    if prefix == ATARI:
        import ale_py

        gym.register_envs(ale_py)
    elif not any(k.startswith(MINATAR) for k in gym.registry):
        from minatar.gym import register_envs

        register_envs()
    return sorted(k for k in gym.registry if k.startswith(prefix))


def check_pixel_id(env_id: str) -> None:
    """Raise ``ValueError`` for an unknown pixel id, naming the closest registered ones."""
    known = register_pixel_envs(env_id)
    if env_id in known:
        return
    close = difflib.get_close_matches(env_id, known, n=5, cutoff=0.5)
    hint = f"; close ids: {', '.join(close)}" if close else ""
    raise ValueError(f"unknown environment id {env_id!r}{hint}")


def _channels_first(obs: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.moveaxis(obs, -1, 0), dtype=np.uint8)


def make_pixel_env(env_id: str, max_episode_steps: int | None = None,
                   terminal_on_life_loss: bool = False, screen_size: int | None = None,
                   **kwargs) -> gym.Env:
    """A preprocessed pixel environment (see the module docstring for every choice).

    Parameters
    ----------
    env_id : str
        ``ALE/<Game>-v5`` or a MinAtar id (``MinAtar/Breakout-v1``).
    max_episode_steps : int, optional
        Cap in agent steps (after frame skipping); Atari's default is the v5 ids' own 108,000
        frames (:data:`ATARI_MAX_STEPS`), MinAtar has none.
    terminal_on_life_loss : bool
        Atari only: a lost life ends the episode (for learning actors, not evaluation).
    screen_size : int, optional
        Atari only: the frames' side (84 as the papers; 42 as RLlib's tuned fast Pong).
    **kwargs
        Passed to ``gymnasium.make`` (e.g. ``repeat_action_probability``, ``mode``).
    """
    check_pixel_id(env_id)
    if _prefix(env_id) == ATARI:
        if kwargs.get("frameskip", 1) != 1:
            raise ValueError(f"frameskip is the preprocessing's ({FRAME_SKIP}, max-pooled); "
                             f"do not pass frameskip={kwargs['frameskip']!r}")
        # the raw env's own observation is not read (AtariFrames reads the screens it pools)
        options = {"repeat_action_probability": 0.0, "obs_type": "grayscale", **kwargs,
                   "frameskip": 1}
        env = gym.make(env_id, disable_env_checker=True, **options)
        env = AtariFrames(env, terminal_on_life_loss=bool(terminal_on_life_loss),
                          screen_size=SCREEN_SIZE if screen_size is None else screen_size)
        if max_episode_steps is None:
            max_episode_steps = ATARI_MAX_STEPS
    else:
        if terminal_on_life_loss:
            raise ValueError(f"terminal_on_life_loss applies to ALE ids, not {env_id!r}")
        if screen_size is not None:
            raise ValueError(f"screen_size applies to ALE ids, not {env_id!r}")
        env = gym.make(env_id, disable_env_checker=True, **kwargs)
        h, w, k = env.observation_space.shape
        space = gym.spaces.Box(0, 1, shape=(k, h, w), dtype=np.uint8)
        env = gym.wrappers.TransformObservation(env, _channels_first, space)
    if max_episode_steps is not None:
        env = gym.wrappers.TimeLimit(env, int(max_episode_steps))
    return env
