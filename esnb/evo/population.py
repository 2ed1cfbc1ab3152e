"""EORL's population bookkeeping: fitness, who runs next, parents and the replaced slot.

Khadilkar 2023, section 3.3. Every policy ``i`` has a fitness ``A_i`` (0 at the start); after
an episode run by ``i``, ``A_i <- q A_i + (1 - q) sum r`` (``q = 0.9``). The policy of an
episode is chosen epsilon-greedily over ``A`` (ties broken uniformly at random), except that
a freshly created child always runs next. An operator replaces ``argmin A`` (ties uniformly);
its parents are drawn uniformly from the ``ceil(n/2)`` fittest of the *other* policies (ties at
the cut broken uniformly), two distinct ones for a crossover. The child's fitness is
``tau A_i + (1 - tau) A_j`` (``A_i`` for a mutation).
"""

from __future__ import annotations

import math
import numbers

import numpy as np

Q = 0.9  # the paper's fitness smoothing


def check_population_size(n) -> int:
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 2:
        raise ValueError(f"population size n must be an integer >= 2, got {n!r}")
    return int(n)


def argmax_random_ties(values: np.ndarray, rng: np.random.Generator) -> int:
    """Index of the largest value, ties broken uniformly at random (one draw always)."""
    values = np.asarray(values)
    best = np.flatnonzero(values == values.max())
    return int(best[rng.integers(len(best))])


def argmin_random_ties(values: np.ndarray, rng: np.random.Generator) -> int:
    values = np.asarray(values)
    worst = np.flatnonzero(values == values.min())
    return int(worst[rng.integers(len(worst))])


class Population:
    """Fitness values and selection rules of ``n`` policies.

    Parameters
    ----------
    n : int
        Population size (>= 2).

    Attributes
    ----------
    fitness : numpy.ndarray
        ``A``, float64, shape (n,).
    fresh : int or None
        A child created by an operator that has not run yet (it runs next).
    """

    def __init__(self, n: int):
        self.n = check_population_size(n)
        self.fitness = np.zeros(self.n, dtype=np.float64)
        self.fresh: int | None = None

    def choose(self, epsilon: float, rng: np.random.Generator) -> int:
        """The policy that runs the next episode: a fresh child if there is one, else a
        uniform pick with probability ``epsilon``, else the fittest (ties uniformly)."""
        if self.fresh is not None:
            i, self.fresh = self.fresh, None
            return i
        if rng.random() < epsilon:
            return int(rng.integers(self.n))
        return argmax_random_ties(self.fitness, rng)

    def update(self, i: int, ret: float, q: float = Q) -> float:
        """``A_i <- q A_i + (1 - q) ret``; returns the new ``A_i``."""
        self.fitness[i] = q * self.fitness[i] + (1.0 - q) * float(ret)
        return float(self.fitness[i])

    def replaced_slot(self, rng: np.random.Generator) -> int:
        """``argmin A``, ties uniformly."""
        return argmin_random_ties(self.fitness, rng)

    def parent_pool(self, replaced: int, rng: np.random.Generator) -> np.ndarray:
        """The ``ceil(n/2)`` fittest policies other than ``replaced`` (ties at the cut broken
        uniformly at random), fittest first."""
        others = np.array([i for i in range(self.n) if i != replaced])
        k = min(math.ceil(self.n / 2), len(others))
        # sort by fitness descending, a random key breaking ties
        keys = rng.random(len(others))
        order = np.lexsort((keys, -self.fitness[others]))
        return others[order[:k]]

    def pick_parents(self, replaced: int, count: int, rng: np.random.Generator) -> np.ndarray:
        """``count`` distinct parents drawn uniformly from :meth:`parent_pool` (fewer if the
        pool is smaller)."""
        pool = self.parent_pool(replaced, rng)
        count = min(int(count), len(pool))
        return rng.choice(pool, size=count, replace=False)

    def install(self, slot: int, fitness: float) -> None:
        """A child took ``slot`` with this fitness; it runs the next episode."""
        self.fitness[slot] = float(fitness)
        self.fresh = int(slot)

    def state_dict(self) -> dict:
        return {"fitness": self.fitness.tolist(), "fresh": self.fresh}

    def load_state_dict(self, state: dict) -> None:
        fitness = np.asarray(state["fitness"], dtype=np.float64)
        if fitness.shape != (self.n,):
            raise ValueError(f"fitness of shape {fitness.shape}, expected ({self.n},)")
        self.fitness = fitness
        self.fresh = None if state["fresh"] is None else int(state["fresh"])
