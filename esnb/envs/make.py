"""``make_env``: gymnasium ids with an episode cap and an error that suggests close ids."""

from __future__ import annotations

import difflib
import logging
import sys

import gymnasium as gym

from esnb.envs.pixels import check_pixel_id, is_pixel_env, make_pixel_env

log = logging.getLogger("esnb.envs")

_SEEN_MUJOCO_WARNINGS: set[str] = set()
_MUJOCO_HOOKED = False


def _route_mujoco_warnings() -> None:
    """Send MuJoCo's C-level warnings to ``logging`` once each, instead of stderr.

    MuJoCo 4 warns at every model compile that HalfCheetah's ``settotalmass`` is deprecated;
    every worker compiles models, and the repeated line buried real messages.
    """
    global _MUJOCO_HOOKED
    if _MUJOCO_HOOKED:
        return
    try:
        import mujoco
    except ImportError:
        return

    def warn(message: str) -> None:
        if message not in _SEEN_MUJOCO_WARNINGS:
            _SEEN_MUJOCO_WARNINGS.add(message)
            logging.getLogger("esnb.mujoco").info("MuJoCo: %s", message)

    mujoco.set_mju_user_warning(warn)
    _MUJOCO_HOOKED = True


def check_env_id(env_id: str) -> None:
    """Raise ``ValueError`` naming ``env_id`` and the closest registered ids if it is unknown."""
    import esnb.envs.registration  # noqa: F401  (registers esnb's own environments)

    if not isinstance(env_id, str):
        raise ValueError(f"environment id must be a string, got {env_id!r}")
    if is_pixel_env(env_id):  # registered on demand: ale-py/minatar are optional extras
        check_pixel_id(env_id)
        return
    if env_id in gym.registry:
        return
    close = difflib.get_close_matches(env_id, list(gym.registry), n=5, cutoff=0.5)
    hint = f"; close registered ids: {', '.join(close)}" if close else ""
    raise ValueError(f"unknown environment id {env_id!r}{hint}")


def make_env(env_id: str, seed: int | None = None, max_episode_steps: int | None = None,
             **kwargs) -> gym.Env:
    """Make a gymnasium environment.

    Parameters
    ----------
    env_id : str
        A registered gymnasium id (use the v5 MuJoCo envs, e.g. ``"HalfCheetah-v5"``), or a
        pixel id (``"ALE/Pong-v5"``, ``"MinAtar/Breakout-v1"``: :mod:`esnb.envs.pixels`).
    seed : int, optional
        Seeds the first ``reset`` (and the action space's generator).
    max_episode_steps : int, optional
        Episode cap; episodes reaching it end truncated. Defaults to the id's own limit.
    **kwargs
        Passed to ``gymnasium.make``.

    Raises
    ------
    ValueError
        For an unknown id (the message lists close registered ids) or a cap < 1.
    """
    check_env_id(env_id)
    if max_episode_steps is not None and int(max_episode_steps) < 1:
        raise ValueError(f"max_episode_steps must be >= 1, got {max_episode_steps}")
    _route_mujoco_warnings()
    try:
        if is_pixel_env(env_id):
            env = make_pixel_env(env_id, max_episode_steps=max_episode_steps, **kwargs)
        else:
            env = gym.make(env_id, max_episode_steps=max_episode_steps,
                           disable_env_checker=True, **kwargs)
    except TypeError as exc:  # an argument the environment does not take
        raise ValueError(f"env_kwargs {kwargs!r} do not fit {env_id!r}: {exc}") from None
    mujoco = sys.modules.get("mujoco")
    if mujoco is not None and isinstance(getattr(env.unwrapped, "model", None), mujoco.MjModel):
        from esnb.envs.mujoco_timer import timer_off

        timer_off()  # ~12% of mj_step, read by nothing in esnb (esnb.envs.mujoco_timer)
    if seed is not None:
        env.reset(seed=int(seed))
        env.action_space.seed(int(seed))
    return env


def check_env_works(env_id: str, env_kwargs: dict, max_episode_steps: int | None = None) -> None:
    """Make ``env_id`` with ``env_kwargs``, reset it and take one random step: a keyword the
    environment accepts but cannot use (``{"g": "abc"}``, a ``render_mode`` whose extra is
    missing) fails here as one ``ValueError`` instead of inside a run."""
    env = make_env(env_id, max_episode_steps=max_episode_steps, **env_kwargs)
    try:
        first_step(env, env_id, env_kwargs)
    finally:
        env.close()


def first_step(env: gym.Env, env_id: str, env_kwargs: dict) -> None:
    """Reset ``env`` and take one random step; whatever it raises becomes one ``ValueError``
    naming the id and its keyword arguments."""
    try:
        env.reset(seed=0)
        env.action_space.seed(0)
        env.step(env.action_space.sample())
    except Exception as exc:  # noqa: BLE001 - whatever the environment raises, said in one line
        detail = str(exc).splitlines()[0] if str(exc) else ""
        raise ValueError(f"{env_id!r} with env_kwargs {env_kwargs!r} fails on its first step: "
                         f"{type(exc).__name__}: {detail}") from None


def check_time_limit(env_id: str, limit: int | None, max_episode_steps: int | None) -> None:
    """Refuse an environment without a time limit of its own (MinAtar) when no
    ``max_episode_steps`` is given: actors would never end an episode that never ends."""
    if limit is None and max_episode_steps is None:
        raise ValueError(f"environment {env_id!r} has no time limit: pass max_episode_steps")


def time_limit(env: gym.Env) -> int | None:
    """The episode cap of ``env``'s ``TimeLimit`` wrappers (gymnasium's own, or one added
    around a preprocessing stack; the smallest if several), None without one."""
    caps, layer = [], env
    while isinstance(layer, gym.Wrapper):
        if type(layer).__name__ == "TimeLimit":
            caps.append(int(layer._max_episode_steps))
        layer = layer.env
    return min(caps) if caps else None


def env_spaces(env_id: str, **kwargs):
    """``(observation_space, action_space, max_episode_steps)`` of an id, from one instance
    that has taken a step (its keyword arguments work: :func:`first_step`)."""
    env = make_env(env_id, **kwargs)
    try:
        first_step(env, env_id, kwargs)
        return env.observation_space, env.action_space, time_limit(env)
    finally:
        env.close()
