"""Settings several algorithms share, declared once: the environment (a base class), RL's
discount and the torch learners' device (re-declared with :func:`~esnb.settings.derive`)."""

from __future__ import annotations

from dataclasses import dataclass

from esnb.device import device_problem
from esnb.settings.declare import Settings, setting


@dataclass(frozen=True)
class EnvSettings(Settings):
    """Base of the configs whose runs step gymnasium environments: which environment, its
    ``gymnasium.make`` arguments, its episode cap and the run's seed. A config that needs
    another default or a narrower help re-declares a field with
    :func:`~esnb.settings.derive`, which keeps the rest of the declaration."""

    env: str = setting("CartPole-v1", control=True, help="gymnasium environment id")
    seed: int = setting(0, low=0, control=True, help="seed of every random draw of the run")
    max_episode_steps: int | None = setting(None, kind="int", low=1,
                                            help="episode cap (none: the env's own limit; "
                                                 "reaching it is a truncation)")
    env_kwargs: dict = setting({}, help="extra gymnasium.make arguments (JSON on the CLI); "
                                        "Atari ids also take screen_size (84)")


@dataclass(frozen=True)
class RLSettings(Settings):
    """Declarations that value-based and actor-critic learners share; a config takes one with
    ``gamma: float = derive(RLSettings, "gamma")``."""

    gamma: float = setting(0.99, low=0.0, high=1.0, help="discount")
    # every torch learner's config takes it: device: str = derive(RLSettings, "device")
    device: str = setting("auto", kind="str", check=device_problem,
                          help="where the learner computes: auto (cuda when torch sees a CUDA "
                               "device where the learner is built, else cpu), cpu, cuda or "
                               "cuda:N; actors stay on CPUs")
