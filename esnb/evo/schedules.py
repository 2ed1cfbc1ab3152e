"""When EORL calls an evolutionary operator (Khadilkar 2023, section 3.3).

At the end of episode ``e`` of ``E``, a crossover is called with probability ``p_cross``
(O-1 or O-2 equally likely); if none is, a mutation with probability ``p_mut``.

- **Uniform Random** (``"uniform"``): ``p_cross = kappa (1 - e/E)``, ``p_mut = mu (1 - e/E)``.
- **Active Random** (``"active"``): the reset point ``e*`` (0 at the start) is the last
  episode where an operator was called or the return was at least ``best - 0.05 |best|`` (95 %
  of the best seen, written so that it also means something when ``best <= 0``). Until the
  exploration rate has decayed to 0.05 the probabilities are Uniform Random's; from then on
  the multiplier of ``kappa`` and ``mu`` is ``(e - e*) / n`` clipped to ``[1 - e/E, 5]``, and
  the probabilities are clipped to 1: operators become likelier the longer good returns are
  missing near the end of training.

The paper gives no ``kappa``, ``mu`` for EORL-ACTV; esnb uses 0.05 and 0.05
(:data:`VARIANTS`).
"""

from __future__ import annotations

import math

import numpy as np

SCHEDULES = ("uniform", "active")

#: named EORL variants: (kappa, mu, schedule). EORL-ACTV's rates are esnb's choice.
VARIANTS = {
    "EORL-FIX": (0.0, 0.0, "uniform"),
    "EORL-05-00": (0.05, 0.0, "uniform"),
    "EORL-05-05": (0.05, 0.05, "uniform"),
    "EORL-10-05": (0.10, 0.05, "uniform"),
    "EORL-ACTV": (0.05, 0.05, "active"),
}

ACTIVE_EPSILON = 0.05  # Active Random switches on once epsilon has decayed this far
ACTIVE_MAX_MULTIPLIER = 5.0
GOOD_FRACTION = 0.05  # a return within 5 % of the best seen resets e*


def check_schedule(schedule: str) -> str:
    if schedule not in SCHEDULES:
        raise ValueError(
            f"unknown schedule {schedule!r}; valid: {', '.join(map(repr, SCHEDULES))}"
        )
    return schedule


def check_rate(name: str, value: float) -> float:
    """``value`` as a float in [0, 1], else a ValueError naming ``name``."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}") from None
    if not (math.isfinite(v) and 0.0 <= v <= 1.0):
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    return v


def variant_settings(name: str) -> tuple[float, float, str]:
    """``(kappa, mu, schedule)`` of a named variant."""
    if name not in VARIANTS:
        raise ValueError(f"unknown EORL variant {name!r}; valid: {', '.join(VARIANTS)}")
    return VARIANTS[name]


def decay_multiplier(episode: int, episodes: int) -> float:
    """``1 - e/E`` clipped at 0 (a run continued past ``E`` calls no more operators)."""
    return max(0.0, 1.0 - episode / episodes)


def uniform_probabilities(kappa: float, mu: float, episode: int, episodes: int
                          ) -> tuple[float, float]:
    """Uniform Random: ``(kappa (1 - e/E), mu (1 - e/E))``."""
    m = decay_multiplier(episode, episodes)
    return kappa * m, mu * m


def active_multiplier(episode: int, episodes: int, reset_episode: int, n: int) -> float:
    """``(e - e*) / n`` clipped to ``[1 - e/E, 5]``."""
    lo = decay_multiplier(episode, episodes)
    return float(np.clip((episode - reset_episode) / n, lo, max(lo, ACTIVE_MAX_MULTIPLIER)))


def active_probabilities(kappa: float, mu: float, episode: int, episodes: int,
                         reset_episode: int, n: int, epsilon: float) -> tuple[float, float]:
    """Active Random: Uniform Random's while ``epsilon > 0.05``, then the active multiplier;
    each probability clipped to 1."""
    if epsilon > ACTIVE_EPSILON:
        return uniform_probabilities(kappa, mu, episode, episodes)
    m = active_multiplier(episode, episodes, reset_episode, n)
    return min(1.0, kappa * m), min(1.0, mu * m)


def draw_operator(p_cross: float, p_mut: float, rng: np.random.Generator) -> str | None:
    """Crossover with probability ``p_cross`` (random or linear, equally likely), else mutation
    with probability ``p_mut``, else None. Always draws two uniforms (a fixed stream)."""
    u_cross, u_mut = rng.random(2)
    if u_cross < p_cross:
        return "random_crossover" if u_cross < 0.5 * p_cross else "linear_crossover"
    if u_mut < p_mut:
        return "mutation"
    return None


class ResetTracker:
    """Active Random's reset point ``e*`` and the best return seen.

    Tracked whatever the schedule, so switching to ``"active"`` mid-run (a live control)
    starts from the true state.
    """

    def __init__(self):
        self.best = -math.inf
        self.reset_episode = 0

    def observe_return(self, episode: int, ret: float) -> None:
        """Episode ``episode`` returned ``ret``: a new best or a return within 5 % resets."""
        ret = float(ret)
        if ret > self.best:
            self.best = ret
        if ret >= self.best - GOOD_FRACTION * abs(self.best):
            self.reset_episode = int(episode)

    def observe_operator(self, episode: int) -> None:
        self.reset_episode = int(episode)

    def state_dict(self) -> dict:
        return {"best": None if self.best == -math.inf else self.best,
                "reset_episode": self.reset_episode}

    def load_state_dict(self, state: dict) -> None:
        self.best = -math.inf if state["best"] is None else float(state["best"])
        self.reset_episode = int(state["reset_episode"])


def operator_probabilities(schedule: str, kappa: float, mu: float, episode: int, episodes: int,
                           tracker: ResetTracker, n: int, epsilon: float
                           ) -> tuple[float, float]:
    """``(p_cross, p_mut)`` at the end of ``episode`` under ``schedule``."""
    if check_schedule(schedule) == "uniform":
        return uniform_probabilities(kappa, mu, episode, episodes)
    return active_probabilities(kappa, mu, episode, episodes, tracker.reset_episode, n, epsilon)
