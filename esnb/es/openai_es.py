"""OpenAI-ES: Salimans, Ho, Chen, Sidor & Sutskever (2017), *Evolution Strategies as a
Scalable Alternative to Reinforcement Learning*, arXiv:1703.03864.

Search distribution N(theta, sigma^2 I). Each generation samples ``pairs`` offsets into the
shared noise table and evaluates the mirrored pair ``theta +- sigma*eps_j``. With shaped
fitness ``s`` (centered ranks by default) the gradient estimate, in the convention of OpenAI's
released code (which the IW-ES paper used), is

    g = (1/N) * sum_i s_i * eps_i,     N = 2 * pairs, eps_i signed for the mirrored half,

and theta takes one Adam step on ``-g + weight_decay * theta`` (``torch.optim.Adam`` on the
flat vector). Everything here is numpy/torch on the driver; rollouts happen elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from esnb.es.gradient import es_gradient
from esnb.es.shaping import get_shaping
from esnb.noise import NoiseTable


@dataclass
class Told:
    """What one :meth:`OpenAIES.tell` did: the norms of its step (history columns) and the
    batch it learned from, as IW-ES reuses it (``theta_old``: theta before the step)."""

    info: dict
    indices: np.ndarray
    shaped: np.ndarray
    theta_old: np.ndarray


class OpenAIES:
    """Ask/tell OpenAI-ES over a flat float32 parameter vector.

    Parameters
    ----------
    theta : ndarray of float32
        Initial parameters (copied).
    noise : NoiseTable
        The shared table (the driver's copy).
    lr : float
        Adam step size (live: pass it to every :meth:`tell`).
    betas, eps : Adam's other constants.

    Notes
    -----
    ``theta`` is a numpy view of the optimiser's parameter tensor: no copies between them.
    """

    def __init__(self, theta: np.ndarray, noise: NoiseTable, lr: float = 0.01,
                 betas=(0.9, 0.999), eps: float = 1e-8):
        self.param = torch.nn.Parameter(torch.tensor(np.asarray(theta, dtype=np.float32)))
        self.optimizer = torch.optim.Adam([self.param], lr=lr, betas=betas, eps=eps)
        self.noise = noise

    @property
    def theta(self) -> np.ndarray:
        return self.param.detach().numpy()

    @property
    def dim(self) -> int:
        return self.param.numel()

    def ask(self, rng: np.random.Generator, pairs: int) -> np.ndarray:
        """Noise offsets for ``pairs`` mirrored pairs."""
        return self.noise.sample_indices(rng, pairs, self.dim)

    def tell(self, indices: np.ndarray, returns: np.ndarray, *, lr: float,
             weight_decay: float = 0.0, shaping: str = "centered_ranks") -> Told:
        """Shape ``returns [pairs, 2]``, estimate the gradient and take one Adam step."""
        shaped = get_shaping(shaping)(returns)
        theta_old = self.theta.copy()
        g = es_gradient(self.noise, indices, shaped, self.dim)
        info = self.apply_gradient(g, lr=lr, weight_decay=weight_decay)
        return Told(info, np.asarray(indices), shaped, theta_old)

    def apply_gradient(self, g: np.ndarray, *, lr: float, weight_decay: float = 0.0) -> dict:
        """One Adam step on ``-g + weight_decay * theta``; returns norms for the history."""
        before = self.param.detach().clone()
        grad = torch.from_numpy(np.asarray(g, dtype=np.float32))
        if weight_decay:
            grad = -grad + weight_decay * before
        else:
            grad = -grad
        self.param.grad = grad
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.step()
        self.param.grad = None
        step = self.param.detach() - before
        theta_norm = float(torch.linalg.vector_norm(self.param.detach()))
        step_norm = float(torch.linalg.vector_norm(step))
        return {
            "grad_norm": float(np.linalg.norm(g)),
            "update_norm": step_norm,
            "theta_norm": theta_norm,
            "update_ratio": step_norm / max(theta_norm, 1e-12),
        }

    def state_dict(self) -> dict[str, np.ndarray]:
        """Flat arrays: theta and Adam's moments and step count."""
        st = self.optimizer.state.get(self.param, {})
        out = {"theta": self.theta.copy()}
        if st:
            out["adam_exp_avg"] = st["exp_avg"].numpy().copy()
            out["adam_exp_avg_sq"] = st["exp_avg_sq"].numpy().copy()
            out["adam_step"] = np.asarray(float(st["step"]), dtype=np.float64)
        return out

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        theta = np.asarray(state["theta"], dtype=np.float32)
        if theta.shape != (self.dim,):
            raise ValueError(f"theta of shape {theta.shape}, expected ({self.dim},)")
        for key in ("adam_exp_avg", "adam_exp_avg_sq"):  # refused now, not at the next step
            if key in state and np.shape(state[key]) != (self.dim,):
                raise ValueError(f"{key} of shape {np.shape(state[key])}, expected ({self.dim},)")
        with torch.no_grad():
            self.param.copy_(torch.from_numpy(theta.copy()))
        self.optimizer.state.clear()
        if "adam_exp_avg" in state:
            self.optimizer.state[self.param] = {
                "step": torch.tensor(float(state["adam_step"]), dtype=torch.float32),
                "exp_avg": torch.from_numpy(np.array(state["adam_exp_avg"], dtype=np.float32)),
                "exp_avg_sq": torch.from_numpy(
                    np.array(state["adam_exp_avg_sq"], dtype=np.float32)
                ),
            }
