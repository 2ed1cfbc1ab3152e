"""Running observation statistics kept as sums, as OpenAI-ES did.

Workers return ``(sum, sum of squares, count)`` of the observations of a sampled fraction of
rollouts; the driver adds them in a fixed order. Sums merge exactly and in any grouping, which
a running mean/variance would not.
"""

from __future__ import annotations

import numpy as np

EPS = 1e-2  # OpenAI-ES's prior: count 1e-2, sumsq 1e-2 -> mean 0, std 1 before any data
MIN_VAR = 1e-2  # std never falls below 0.1


class ObsStats:
    """Observation count, sum and sum of squares (float64)."""

    def __init__(self, dim: int):
        self.sum = np.zeros(dim, dtype=np.float64)
        self.sumsq = np.full(dim, EPS, dtype=np.float64)
        self.count = EPS

    def add(self, s: np.ndarray, ssq: np.ndarray, count: float) -> None:
        """Add another batch's sums."""
        self.sum += s
        self.sumsq += ssq
        self.count += float(count)

    def add_observations(self, obs: np.ndarray) -> None:
        obs = np.asarray(obs, dtype=np.float64).reshape(len(obs), -1)
        self.add(obs.sum(axis=0), np.square(obs).sum(axis=0), len(obs))

    @property
    def mean(self) -> np.ndarray:
        return self.sum / self.count

    @property
    def std(self) -> np.ndarray:
        return np.sqrt(np.maximum(self.sumsq / self.count - np.square(self.mean), MIN_VAR))

    def state_dict(self) -> dict:
        return {"sum": self.sum.copy(), "sumsq": self.sumsq.copy(), "count": self.count}

    def load_state_dict(self, state: dict) -> None:
        s = np.asarray(state["sum"], dtype=np.float64)
        if s.shape != self.sum.shape or np.shape(state["sumsq"]) != self.sum.shape:
            raise ValueError(
                f"observation statistics of shapes {s.shape} and "
                f"{np.shape(state['sumsq'])}, expected {self.sum.shape}")
        self.sum = s.copy()
        self.sumsq = np.asarray(state["sumsq"], dtype=np.float64).copy()
        self.count = float(state["count"])
