"""Samplers: which stored items a batch takes, and their importance weights.

``UniformSampler`` draws stored items uniformly; ``PrioritizedSampler`` implements proportional
prioritisation (Schaul et al. 2016, "Prioritized Experience Replay"):

    P(i) = p_i^alpha / sum_k p_k^alpha,      w_i = (N * P(i))^-beta / max_j w_j,

where N is the number of stored items and the normaliser ``max_j w_j`` is the weight of the
item of *smallest* priority in the buffer (the largest weight any stored item could get),
found in O(1) with a min-tree, as the reference implementations do. Priorities must be finite
and > 0; a TD learner passes ``|delta| + eps`` (:meth:`PrioritizedSampler.from_td`).

A sampler sees slots (row numbers of the storage); the buffer owns which slots hold items.
"""

from __future__ import annotations

import numpy as np

from esnb.replay.trees import MinTree, SumTree, update_together


def check_priorities(priorities, n: int) -> np.ndarray:
    """``priorities`` as float64 of length ``n`` (a scalar is broadcast), or a ValueError."""
    try:
        p = np.asarray(priorities, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"priorities must be numbers, got {priorities!r:.80}") from None
    if p.ndim == 0:
        p = np.full(n, float(p))
    if p.shape != (n,):
        raise ValueError(f"priorities must be a scalar or an array of {n} values (one per item), "
                         f"got shape {p.shape}")
    # two reductions on the common path; the detailed checks only when something is off
    if n and not (p.min() > 0 and np.isfinite(p.sum())):
        if not np.all(np.isfinite(p)):
            raise ValueError("priorities must be finite, got "
                             f"{int(np.count_nonzero(~np.isfinite(p)))} non-finite value(s)")
        raise ValueError(f"priorities must be > 0 (pass |td error| + eps), got minimum "
                         f"{p.min():g}")
    return p


class UniformSampler:
    """Every stored item equally likely; importance weights are all 1.

    Sampling draws slots among those written and redraws the ones that hold no item, so it
    costs O(batch) while most written slots hold items, and falls back to listing the stored
    slots (O(capacity)) when fewer than a quarter do (after heavy eviction).
    """

    prioritized = False

    def bind(self, capacity: int) -> None:
        self.capacity = int(capacity)

    def add(self, slots: np.ndarray, priorities: np.ndarray | None) -> None:
        pass

    def remove(self, slots: np.ndarray) -> None:
        pass

    def update(self, slots: np.ndarray, priorities: np.ndarray) -> None:
        pass

    def sample(self, n: int, rng: np.random.Generator, valid: np.ndarray, filled: int,
               n_valid: int, beta: float) -> tuple[np.ndarray, np.ndarray]:
        if n_valid == filled:
            slots = rng.integers(0, filled, size=n)
        elif n_valid >= filled // 4:
            slots = rng.integers(0, filled, size=n)
            bad = ~valid[slots]
            while bad.any():
                slots[bad] = rng.integers(0, filled, size=int(bad.sum()))
                bad = ~valid[slots]
        else:
            slots = rng.choice(np.flatnonzero(valid[:filled]), size=n)
        return slots, np.ones(n, dtype=np.float32)

    def priorities(self, slots: np.ndarray) -> np.ndarray:
        return np.ones(len(slots))

    def state_dict(self) -> dict:
        return {"kind": "uniform"}

    def load_state_dict(self, state: dict) -> None:
        if state.get("kind") != "uniform":
            raise ValueError(f"state of a {state.get('kind')!r} sampler, this one is uniform")


class PrioritizedSampler:
    """Proportional prioritised sampling over a sum-tree, weights normalised with a min-tree.

    Parameters
    ----------
    alpha : float
        Priority exponent (0: uniform). Fixed: changing it would rewrite every leaf.
    beta : float
        Default importance-sampling exponent (a sample call may override it, for annealing).
    eps : float
        Added to ``|td error|`` by :meth:`from_td` so no item gets priority 0.
    """

    prioritized = True

    def __init__(self, alpha: float = 0.6, beta: float = 0.4, eps: float = 1e-6):
        for name, value, low in (("alpha", alpha, 0.0), ("beta", beta, 0.0), ("eps", eps, 0.0)):
            if not isinstance(value, (int, float)) or isinstance(value, bool) \
                    or not np.isfinite(value) or value < low:
                raise ValueError(f"{name} must be a finite number >= {low:g}, got {value!r}")
        if eps <= 0:
            raise ValueError(f"eps must be > 0, got {eps!r}")
        self.alpha = float(alpha)
        self.beta = float(beta)
        self.eps = float(eps)
        self.max_priority = 1.0

    def bind(self, capacity: int) -> None:
        self.capacity = int(capacity)
        self.sum_tree = SumTree(capacity)
        self.min_tree = MinTree(capacity)
        self._priority = np.zeros(capacity, dtype=np.float64)

    def from_td(self, td_errors) -> np.ndarray:
        """Priorities ``|td| + eps`` (float64)."""
        return np.abs(np.asarray(td_errors, dtype=np.float64)) + self.eps

    def _set(self, slots: np.ndarray, p: np.ndarray) -> None:
        self._priority.put(slots, p)
        leaf = p ** self.alpha if self.alpha != 1.0 else p
        update_together([self.sum_tree, self.min_tree], slots, [leaf, leaf])

    def add(self, slots: np.ndarray, priorities: np.ndarray | None) -> None:
        if priorities is None:
            # new items without a priority get the largest one seen, so each is replayed soon
            p = np.full(len(slots), self.max_priority)
        else:
            p = priorities
            if len(p):
                self.max_priority = max(self.max_priority, float(p.max()))
        self._set(slots, p)

    def update(self, slots: np.ndarray, priorities: np.ndarray) -> None:
        if len(priorities):
            self.max_priority = max(self.max_priority, float(priorities.max()))
        self._set(slots, priorities)

    def remove(self, slots: np.ndarray) -> None:
        if len(slots):
            self._priority[slots] = 0.0
            update_together([self.sum_tree, self.min_tree], slots, [0.0, np.inf])

    def priorities(self, slots: np.ndarray) -> np.ndarray:
        """The priorities ``p_i`` (before the exponent) stored at ``slots``."""
        return self._priority.take(slots)

    def sample(self, n: int, rng: np.random.Generator, valid: np.ndarray, filled: int,
               n_valid: int, beta: float) -> tuple[np.ndarray, np.ndarray]:
        slots, leaves = self.sum_tree.sample(n, rng, return_leaves=True)
        # w_i / max_w = (N P_i)^-beta / (N P_min)^-beta = (p_i^a / min_k p_k^a)^-beta: N and
        # the total cancel
        weights = (leaves / self.min_tree.min) ** (-beta)
        return slots, weights.astype(np.float32)

    def state_dict(self) -> dict:
        return {"kind": "prioritized", "alpha": self.alpha, "beta": self.beta, "eps": self.eps,
                "max_priority": self.max_priority}

    def load_state_dict(self, state: dict) -> None:
        if state.get("kind") != "prioritized":
            raise ValueError(f"state of a {state.get('kind')!r} sampler, this one is prioritized")
        if float(state["alpha"]) != self.alpha:
            raise ValueError(f"state has alpha {state['alpha']}, this sampler {self.alpha}")
        self.max_priority = float(state["max_priority"])

    def load_priorities(self, slots: np.ndarray, priorities: np.ndarray) -> None:
        """Bulk load (after a restore): leaves set, trees rebuilt once."""
        self._priority[slots] = priorities
        leaf = priorities ** self.alpha
        self.sum_tree.leaves[slots] = leaf
        self.min_tree.leaves[slots] = leaf
        self.sum_tree.rebuild()
        self.min_tree.rebuild()
