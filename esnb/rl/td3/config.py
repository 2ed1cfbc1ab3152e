"""TD3's hyperparameters (no torch): :class:`TD3Config`, built from a run's settings.

:class:`TD3Config` has no defaults: the runners' settings (``esnb.runners.aesrl.config``) own
them, and :meth:`TD3Config.of` reads its fields from them by name; :data:`FIXED` holds the
constants no esnb runner varies. CPU sizes: this machine does ~270 critic updates/s at 400-300
and ~900/s at 64-64 (batch 100), so the laptop preset takes 64-64 and the paper preset 400-300.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

#: TD3's constants that no esnb runner varies (Fujimoto et al. 2018; torch's leaky ReLU slope)
FIXED = {"policy_delay": 2, "leaky_slope": 0.01}


@dataclass(frozen=True)
class TD3Config:
    """TD3's hyperparameters, built from a run's settings with :meth:`of`.

    Attributes
    ----------
    actor_hidden, critic_hidden : tuple of int
        Hidden sizes (paper: 400-300 both).
    batch_size : int
        Transitions per gradient step.
    actor_lr, critic_lr : float
        Adam step sizes.
    gamma : float
        Discount.
    tau : float
        Soft target update rate.
    policy_noise, noise_clip : float
        Target policy smoothing: ``N(0, policy_noise^2)`` clipped to ``+-noise_clip``, both in
        units of the action half-range.
    policy_delay : int
        Critic updates per actor update in :meth:`CriticLearner.td3_step`.
    leaky_slope : float
        Negative slope of the critic's leaky ReLU (torch's default 0.01).
    device : str
        Where :class:`CriticLearner` computes (``auto``, ``cpu``, ``cuda``, ``cuda:N``;
        resolved where it is built). :func:`train_actor`, on the evaluation workers, stays on
        the CPU.
    """

    actor_hidden: tuple[int, ...]
    critic_hidden: tuple[int, ...]
    batch_size: int
    actor_lr: float
    critic_lr: float
    gamma: float
    tau: float
    policy_noise: float
    noise_clip: float
    policy_delay: int
    leaky_slope: float
    device: str

    @classmethod
    def of(cls, settings: Any, **changes: Any) -> TD3Config:
        """The fields of ``settings`` (an AES-RL or CEM-RL config) with TD3's names, the
        :data:`FIXED` constants for the others, then ``changes``."""
        values = {f.name: FIXED[f.name] if f.name in FIXED else getattr(settings, f.name)
                  for f in fields(cls)}
        return cls(**{**values, **changes})

    def __post_init__(self):
        for name in ("actor_hidden", "critic_hidden"):
            sizes = tuple(int(h) for h in getattr(self, name))
            if not sizes or any(h < 1 for h in sizes):
                raise ValueError(f"{name} must be one or more sizes >= 1, got "
                                 f"{getattr(self, name)!r}")
            object.__setattr__(self, name, sizes)
        if int(self.batch_size) < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size!r}")
        for name in ("actor_lr", "critic_lr", "tau"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be > 0, got {v!r}")
        if not 0 <= self.gamma <= 1:
            raise ValueError(f"gamma must be in [0, 1], got {self.gamma!r}")
        if self.policy_noise < 0 or self.noise_clip < 0:
            raise ValueError("policy_noise and noise_clip must be >= 0")
        if int(self.policy_delay) < 1:
            raise ValueError(f"policy_delay must be >= 1, got {self.policy_delay!r}")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["actor_hidden"] = list(self.actor_hidden)
        d["critic_hidden"] = list(self.critic_hidden)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TD3Config:
        return cls(**d)
