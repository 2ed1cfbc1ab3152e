"""``PrioritizedReplayBuffer``: a :class:`~esnb.replay.buffer.ReplayBuffer` whose sampler is
proportional prioritisation (Schaul et al. 2016, "Prioritized Experience Replay";
:class:`~esnb.replay.samplers.PrioritizedSampler` over a sum tree)."""

from __future__ import annotations

import numpy as np

from esnb.replay.buffer import ReplayBuffer
from esnb.replay.samplers import PrioritizedSampler


class PrioritizedReplayBuffer(ReplayBuffer):
    """A :class:`ReplayBuffer` with proportional prioritised sampling.

    Parameters
    ----------
    capacity : int
        Hard capacity.
    alpha : float
        Priority exponent: ``P(i) = p_i^alpha / sum_k p_k^alpha``.
    beta : float
        Default importance-sampling exponent (``sample(..., beta=)`` overrides it).
    eps : float
        Added to ``|td|`` by :meth:`from_td`.
    **kwargs
        As :class:`ReplayBuffer` (``spec``, ``soft_capacity``, ``eviction``, ``min_size``...).
    """

    def __init__(self, capacity: int, alpha: float = 0.6, beta: float = 0.4, eps: float = 1e-6,
                 **kwargs):
        if "sampler" in kwargs:
            raise ValueError("PrioritizedReplayBuffer makes its own sampler")
        super().__init__(capacity, sampler=PrioritizedSampler(alpha, beta, eps), **kwargs)

    @property
    def alpha(self) -> float:
        return self.sampler.alpha

    @property
    def beta(self) -> float:
        return self.sampler.beta

    @property
    def eps(self) -> float:
        return self.sampler.eps

    def from_td(self, td_errors) -> np.ndarray:
        """Priorities ``|td| + eps`` for :meth:`add` / :meth:`update_priorities`."""
        return self.sampler.from_td(td_errors)



__all__ = ["PrioritizedReplayBuffer"]
