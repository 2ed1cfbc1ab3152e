"""A run's budget: "this many more" units of its counters, turned into the absolute values at
which the run ends (the first one reached ends it)."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np


def make_target(now: Mapping[str, float], budget: Mapping[str, float | None]) -> dict[str, float]:
    """The counter values to reach: ``now[k] + budget[k]`` for every budget given (None: not
    given).

    Raises
    ------
    ValueError
        A counter the run does not keep (the known ones named), or an amount that is not a
        finite number >= 0.
    """
    target = {}
    for key, amount in budget.items():
        if amount is None:
            continue
        if key not in now:
            raise ValueError(f"unknown budget {key!r}; known: {', '.join(now)}")
        if isinstance(amount, bool) or not isinstance(amount, (int, float, np.number)) \
                or not math.isfinite(float(amount)) or amount < 0:
            raise ValueError(f"budget {key} must be a finite number >= 0, got {amount!r}")
        target[key] = now[key] + amount
    return target


def reached(now: Mapping[str, float], target: Mapping[str, float]) -> bool:
    """Whether any counter has reached its target (never, without a target)."""
    return any(now[k] >= v for k, v in target.items())


def remaining_fraction(now: Mapping[str, float], target: Mapping[str, float],
                       counters: tuple[str, ...] = ("env_steps", "learner_steps")) -> float:
    """``1 - now/target`` of the first of ``counters`` the run has a target for, clipped to
    [0, 1] (a linear decay to 0 over the run: IMPALA's learning rate); 1 without one."""
    for key in counters:
        if target.get(key, 0) > 0:
            return min(1.0, max(0.0, 1.0 - float(now[key]) / float(target[key])))
    return 1.0
