"""OpenAI-ES: Salimans, Ho, Chen, Sidor & Sutskever (2017), *Evolution Strategies as a
Scalable Alternative to Reinforcement Learning*, arXiv:1703.03864.

Search distribution N(theta, sigma^2 I). Each generation samples ``pairs`` offsets into the
shared noise table and evaluates the mirrored pair ``theta +- sigma*eps_j``. With shaped
fitness ``s`` (centered ranks by default) the gradient estimate, in the convention of OpenAI's
released code (which the IW-ES paper used), is

    g = (1/N) * sum_i s_i * eps_i,     N = 2 * pairs, eps_i signed for the mirrored half,

and theta takes one Adam step on ``-g + weight_decay * theta`` (:class:`esnb.es.adam.Adam`,
numpy float32: workers replicate it bitwise). numpy only: no torch here.

An update is data before it is applied: a :class:`Step` (the pairs that count, their shaped
returns, lr, weight decay) for the ordinary update, an :class:`~esnb.es.iw.IWUpdate` for an
importance-weighted reuse of the previous batch (Campos et al. 2018). :meth:`OpenAIES.tell`
and :meth:`OpenAIES.tell_iw` apply them; the driver and every worker's replica of theta call
the same two methods with the same data, and get the same bits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from esnb.es.adam import Adam
from esnb.es.gradient import es_gradient
from esnb.es.iw import Batch, IWGradient, IWUpdate, iw_gradient, noise_dots
from esnb.es.shaping import get_shaping
from esnb.noise import NoiseTable


@dataclass(frozen=True)
class Step:
    """One ordinary update as data.

    Attributes
    ----------
    indices : ndarray of int32
        Noise offsets of the pairs that count (non-finite ones left out).
    shaped : ndarray of float64, [pairs, 2]
        Their shaped returns.
    lr, weight_decay : float
        Adam's step size and decay for this update.
    sigma : float
        The rollouts' perturbation scale (IW-ES weights the batch with it).
    generation : int
        The generation that collected the batch.
    """

    indices: np.ndarray
    shaped: np.ndarray
    lr: float
    weight_decay: float = 0.0
    sigma: float = 0.0
    generation: int = 0

    @classmethod
    def of(cls, indices, returns, *, lr: float, weight_decay: float = 0.0,
           shaping: str = "centered_ranks", sigma: float = 0.0, generation: int = 0) -> Step:
        """The update of mirrored-pair ``returns [pairs, 2]`` shaped by ``shaping``."""
        returns = np.asarray(returns, dtype=np.float64).reshape(-1, 2)
        shaped = get_shaping(shaping)(returns) if len(returns) else np.zeros((0, 2))
        return cls(np.asarray(indices, dtype=np.int32), shaped, float(lr),
                   float(weight_decay), float(sigma), int(generation))

    @property
    def moves(self) -> bool:
        """False when no pair counts: theta does not move."""
        return len(self.indices) > 0


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
    """

    def __init__(self, theta: np.ndarray, noise: NoiseTable, lr: float = 0.01,
                 betas=(0.9, 0.999), eps: float = 1e-8):
        self.theta = np.array(theta, dtype=np.float32)
        self.adam = Adam(self.theta.size, betas, eps)
        self.lr = float(lr)
        self.noise = noise

    @property
    def dim(self) -> int:
        return self.theta.size

    def ask(self, rng: np.random.Generator, pairs: int) -> np.ndarray:
        """Noise offsets for ``pairs`` mirrored pairs."""
        return self.noise.sample_indices(rng, pairs, self.dim)

    def tell(self, step: Step) -> tuple[dict | None, Batch | None]:
        """The ordinary update: the gradient of ``step``'s shaped returns, one Adam step.

        Returns
        -------
        info : dict or None
            Norms of the step (history columns); None when ``step`` moves nothing.
        batch : Batch or None
            The batch as IW-ES reuses it (``theta_old``: theta before the step).
        """
        if not step.moves:
            return None, None
        indices = np.asarray(step.indices, dtype=np.int64)
        theta_old = self.theta.copy()
        g = es_gradient(self.noise, indices, step.shaped, self.dim)
        info = self.apply_gradient(g, lr=step.lr, weight_decay=step.weight_decay)
        return info, Batch(indices, step.shaped, theta_old, step.sigma, step.generation)

    def iw_gradient(self, batch: Batch, update: IWUpdate) -> IWGradient:
        """IW-ES's gradient from ``batch`` at the current theta (its ``eps_j . delta`` computed
        here, row by row, so any process gets the same bits)."""
        delta = self.theta.astype(np.float64) - batch.theta_old.astype(np.float64)
        dots = noise_dots(self.noise, batch.indices, delta)
        return iw_gradient(self.noise, batch, self.theta, update.sigma, clip=update.clip,
                           normalize=update.normalize, dots=dots)

    def tell_iw(self, batch: Batch, update: IWUpdate, gradient: IWGradient) -> dict:
        """Take an IW update (``gradient`` from :meth:`iw_gradient`); its step's norms."""
        info = self.apply_gradient(gradient.grad, lr=update.lr,
                                   weight_decay=update.weight_decay)
        batch.updates += 1
        return info

    def apply_gradient(self, g: np.ndarray, *, lr: float, weight_decay: float = 0.0) -> dict:
        """One Adam step on ``-g + weight_decay * theta``; returns norms for the history."""
        return adam_step(self.theta, self.adam, g, lr, weight_decay)

    def state_dict(self) -> dict[str, np.ndarray]:
        """Flat arrays: theta and Adam's moments and step count."""
        return {"theta": self.theta.copy(), **self.adam.state_dict()}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        theta = np.asarray(state["theta"], dtype=np.float32)
        if theta.shape != (self.dim,):
            raise ValueError(f"theta of shape {theta.shape}, expected ({self.dim},)")
        adam = Adam(self.dim, self.adam.betas, self.adam.eps)
        if "adam_exp_avg" in state:  # refused now, not at the next step
            adam.load_state_dict(state)
        self.theta, self.adam = theta.copy(), adam


def adam_step(theta: np.ndarray, adam: Adam, g: np.ndarray, lr: float,
              weight_decay: float = 0.0) -> dict:
    """``theta`` (in place) one Adam step on ``-g + weight_decay * theta``; the step's norms.

    The one update of ES and IW-ES: the driver and every worker replica call it with the same
    numbers and get the same bits."""
    before = theta.copy()
    grad = -np.asarray(g, dtype=np.float32)
    if weight_decay:
        grad += np.float32(weight_decay) * before
    adam.step(theta, grad, lr)
    theta_norm = float(np.linalg.norm(theta))
    step_norm = float(np.linalg.norm(theta - before))
    return {"grad_norm": float(np.linalg.norm(g)), "update_norm": step_norm,
            "theta_norm": theta_norm, "update_ratio": step_norm / max(theta_norm, 1e-12)}
