"""EORL's evolutionary operators on flat parameter vectors (Khadilkar 2023, section 3.2).

Based on Michalewicz et al. (1994) with a multiplicative noise factor ``N(1, sigma)`` drawn
for every parameter (``sigma = 0.25`` in the paper): the noise scales each parameter in
proportion to its magnitude. The cross ratio of two parents is
``(tau, 1 - tau) = softmax(A_i, A_j)`` of their fitness values.

- O-1 :func:`random_crossover`: each parameter from parent ``i`` with probability ``tau``,
  else from parent ``j``, times its own noise factor.
- O-2 :func:`linear_crossover`: ``(tau * theta_i + (1 - tau) * theta_j) * noise``.
- O-3 :func:`mutation`: ``theta_i * noise``.

Pure functions: every draw comes from the ``numpy.random.Generator`` passed in, and the
parents are never modified.
"""

from __future__ import annotations

import math

import numpy as np

SIGMA = 0.25  # the paper's noise factor std

#: operator names as they appear in histories
OPERATORS = ("random_crossover", "linear_crossover", "mutation")


def _check_sigma(sigma: float) -> float:
    sigma = float(sigma)
    if not (math.isfinite(sigma) and sigma >= 0.0):
        raise ValueError(f"noise factor std sigma must be a finite number >= 0, got {sigma!r}")
    return sigma


def _pair(theta_i, theta_j) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(theta_i)
    b = np.asarray(theta_j)
    if a.ndim != 1 or a.shape != b.shape:
        raise ValueError(
            f"parents must be flat vectors of one length, got shapes {a.shape} and {b.shape}"
        )
    return a, b


def _check_tau(tau: float) -> float:
    tau = float(tau)
    if not 0.0 <= tau <= 1.0:
        raise ValueError(f"cross ratio tau must be in [0, 1], got {tau!r}")
    return tau


def cross_ratio(fitness_i: float, fitness_j: float) -> float:
    """``tau`` of ``(tau, 1 - tau) = softmax(A_i, A_j)``, computed without overflow."""
    d = float(fitness_j) - float(fitness_i)
    if d >= 0:
        z = math.exp(-d)
        return z / (1.0 + z)
    return 1.0 / (1.0 + math.exp(d))


def noise_factor(size: int, sigma: float, rng: np.random.Generator, dtype=np.float32
                 ) -> np.ndarray:
    """``size`` independent draws of ``N(1, sigma)``."""
    sigma = _check_sigma(sigma)
    return (1.0 + sigma * rng.standard_normal(size)).astype(dtype, copy=False)


def random_crossover(theta_i, theta_j, tau: float, sigma: float, rng: np.random.Generator
                     ) -> np.ndarray:
    """O-1: every parameter from ``theta_i`` with probability ``tau``, else from ``theta_j``,
    times its own ``N(1, sigma)`` factor.

    Parameters
    ----------
    theta_i, theta_j : array of shape (P,)
        Flat parameters of the two parents.
    tau : float
        Probability of taking a parameter from ``theta_i`` (see :func:`cross_ratio`).
    sigma : float
        Std of the multiplicative noise factor.
    rng : numpy.random.Generator
        Source of the choices (drawn first) and of the noise.

    Returns
    -------
    numpy.ndarray
        The child, with the parents' dtype.
    """
    a, b = _pair(theta_i, theta_j)
    tau = _check_tau(tau)
    take_i = rng.random(a.size) < tau
    noise = noise_factor(a.size, sigma, rng, a.dtype)
    return np.where(take_i, a, b) * noise


def linear_crossover(theta_i, theta_j, tau: float, sigma: float, rng: np.random.Generator
                     ) -> np.ndarray:
    """O-2: ``(tau * theta_i + (1 - tau) * theta_j) * N(1, sigma)``, one factor per parameter."""
    a, b = _pair(theta_i, theta_j)
    tau = _check_tau(tau)
    noise = noise_factor(a.size, sigma, rng, a.dtype)
    return ((tau * a + (1.0 - tau) * b) * noise).astype(a.dtype, copy=False)


def mutation(theta_i, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """O-3: ``theta_i * N(1, sigma)``, one factor per parameter."""
    a = np.asarray(theta_i)
    if a.ndim != 1:
        raise ValueError(f"parent must be a flat vector, got shape {a.shape}")
    return a * noise_factor(a.size, sigma, rng, a.dtype)
