"""Adam (Kingma and Ba 2015) on one flat float32 vector, in numpy.

Only correctly rounded IEEE float32 operations (+, -, *, /, sqrt) in a fixed order, so every
process computes the same bits from the same inputs: ES workers replicate the driver's update
exactly without torch (Salimans et al. 2017, Algorithm 2: only scalars travel). torch's own
Adam could not serve here: its CPU kernels fuse multiply-adds and its vectorised sqrt is not
correctly rounded (one ulp off in ~0.7% of elements, measured with AVX512), which no other
library reproduces.
"""

from __future__ import annotations

import math

import numpy as np


class Adam:
    """Adam's moments and step count for a ``dim``-vector.

    Parameters
    ----------
    dim : int
    betas : tuple of float
        Decay rates of the first and second moment (0.9, 0.999).
    eps : float
        Added to the root of the second moment (1e-8).
    """

    def __init__(self, dim: int, betas=(0.9, 0.999), eps: float = 1e-8):
        self.betas = (float(betas[0]), float(betas[1]))
        self.eps = float(eps)
        self.m = np.zeros(int(dim), dtype=np.float32)
        self.v = np.zeros(int(dim), dtype=np.float32)
        self.t = 0

    def step(self, theta: np.ndarray, grad: np.ndarray, lr: float) -> None:
        """Update ``theta`` (float32, in place) by one step along ``-grad``'s Adam direction."""
        b1, b2 = self.betas
        grad = np.asarray(grad, dtype=np.float32)
        self.t += 1
        self.m *= np.float32(b1)
        self.m += np.float32(1.0 - b1) * grad
        self.v *= np.float32(b2)
        self.v += np.float32(1.0 - b2) * (grad * grad)
        step_size = np.float32(lr / (1.0 - b1 ** self.t))
        denom = np.sqrt(self.v)
        denom /= np.float32(math.sqrt(1.0 - b2 ** self.t))
        denom += np.float32(self.eps)
        theta -= (step_size * self.m) / denom

    def state_dict(self) -> dict[str, np.ndarray]:
        return {"adam_exp_avg": self.m.copy(), "adam_exp_avg_sq": self.v.copy(),
                "adam_step": np.asarray(float(self.t), dtype=np.float64)}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        m = np.array(state["adam_exp_avg"], dtype=np.float32)
        v = np.array(state["adam_exp_avg_sq"], dtype=np.float32)
        t = float(state["adam_step"])
        if m.shape != self.m.shape or v.shape != self.v.shape:
            raise ValueError(f"Adam moments of shape {m.shape}/{v.shape}, expected "
                             f"{self.m.shape}")
        if not (t >= 0 and float(t).is_integer()) or (v < 0).any():
            raise ValueError(f"Adam's step must be a whole number >= 0 and its second moment "
                             f">= 0, got step {t}")
        self.m, self.v, self.t = m, v, int(t)
