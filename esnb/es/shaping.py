"""Fitness shaping: pure functions from returns ``[pairs, 2]`` to scores of the same shape.

Column 0 holds the returns of ``theta + sigma*eps``, column 1 those of ``theta - sigma*eps``.
Add a rule by decorating a function with ``@register("name")``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

SHAPINGS: dict[str, Callable[[np.ndarray], np.ndarray]] = {}


def register(name: str):
    def deco(fn):
        SHAPINGS[name] = fn
        return fn

    return deco


def get_shaping(name: str) -> Callable[[np.ndarray], np.ndarray]:
    try:
        return SHAPINGS[name]
    except KeyError:
        raise ValueError(
            f"unknown fitness shaping {name!r}; known: {', '.join(SHAPINGS)}"
        ) from None


@register("centered_ranks")
def centered_ranks(returns: np.ndarray) -> np.ndarray:
    """Ranks over all ``2*pairs`` returns scaled to [-0.5, 0.5] (OpenAI-ES's default).

    Ties keep their order of appearance (a stable sort), so the result is reproducible.
    """
    x = np.asarray(returns, dtype=np.float64)
    flat = x.ravel()
    ranks = np.empty(flat.size, dtype=np.float64)
    ranks[np.argsort(flat, kind="stable")] = np.arange(flat.size, dtype=np.float64)
    if flat.size > 1:
        ranks /= flat.size - 1
    return (ranks - 0.5).reshape(x.shape)


@register("raw")
def raw(returns: np.ndarray) -> np.ndarray:
    """The returns themselves (no shaping)."""
    return np.asarray(returns, dtype=np.float64).copy()


@register("sign")
def sign(returns: np.ndarray) -> np.ndarray:
    """Per mirrored pair, +-0.5 by which of the two did better (0 for a tie).

    The gradient then averages ``sign(R(theta+sigma eps) - R(theta-sigma eps)) * eps``: only the
    direction of each comparison counts, never its size.
    """
    x = np.asarray(returns, dtype=np.float64)
    s = 0.5 * np.sign(x[:, 0] - x[:, 1])
    return np.stack([s, -s], axis=1)
