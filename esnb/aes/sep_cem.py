"""sep-CEM: the cross-entropy method with a diagonal covariance, CEM-RL's distribution.

Pourchot and Sigaud 2019, "CEM-RL: Combining evolutionary and gradient-based methods for policy
search" (arXiv 1810.01222), section 3; restated by Lee et al. 2020 (AES-RL) eqs. 1-2. A
generation samples ``z_i ~ N(mu, diag(var))``, evaluates them, and keeps the ``K_e`` best:

    mu'  = sum_i lambda_i z_i
    var' = sum_i lambda_i (z_i - mu)^2 [/ K_e] + eps,   eps <- tau eps + (1 - tau) eps_limit

with ``lambda_i ∝ log((1 + K_e) / i)``. ``variance_form="code"`` (default) divides by ``K_e``
as both released codes do (CEM-RL's ``ES.py`` and AES-RL's ``CemrlPopulation``), which is what
produced the published numbers; ``"paper"`` follows eq. 2 as printed. ``eps`` decays from 1e-3
to 1e-5 with ``tau = 0.95`` per generation, after the update of ``mu`` and before ``var``'s, as
the released code.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from esnb.aes.rules import check_fitness, checkpoint_gaussian, elite_weights

VARIANCE_FORMS = ("code", "paper")


class SepCEM:
    """Diagonal-covariance CEM (ask/tell).

    Parameters
    ----------
    mu : array of shape (d,)
        Initial mean.
    pop_size : int
        Individuals per generation (CEM-RL: 10).
    n_elites : int, optional
        ``K_e`` (default half the population).
    var_init : float
        Initial variance (CEM-RL's sigma_init 1e-3, a variance).
    eps_init, eps_limit, eps_tau : float
        The additive variance and its decay per generation.
    antithetic : bool
        Mirrored pairs ``mu +- sqrt(var) eps`` (needs an even population).
    variance_form : {"code", "paper"}
        With or without the released code's extra ``1 / K_e``.
    """

    def __init__(self, mu, pop_size: int = 10, n_elites: int | None = None,
                 var_init: float = 1e-3, eps_init: float = 1e-3, eps_limit: float = 1e-5,
                 eps_tau: float = 0.95, antithetic: bool = False, variance_form: str = "code"):
        mu = np.asarray(mu, dtype=np.float64).ravel()
        if mu.size == 0 or not np.all(np.isfinite(mu)):
            raise ValueError("mu must be a non-empty finite vector")
        if int(pop_size) < 2:
            raise ValueError(f"pop_size must be >= 2, got {pop_size!r}")
        n_elites = int(pop_size) // 2 if n_elites is None else int(n_elites)
        if not 1 <= n_elites <= int(pop_size):
            raise ValueError(f"n_elites must be in [1, pop_size={pop_size}], got {n_elites!r}")
        if antithetic and int(pop_size) % 2:
            raise ValueError(f"antithetic sampling needs an even pop_size, got {pop_size}")
        if variance_form not in VARIANCE_FORMS:
            raise ValueError(f"variance_form must be one of {VARIANCE_FORMS}, got "
                             f"{variance_form!r}")
        for name, v in (("var_init", var_init), ("eps_init", eps_init),
                        ("eps_limit", eps_limit)):
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be >= 0, got {v!r}")
        if not 0.0 <= eps_tau <= 1.0:
            raise ValueError(f"eps_tau must be in [0, 1], got {eps_tau!r}")
        self.mu = mu
        self.var = np.full(mu.size, float(var_init))
        self.pop_size = int(pop_size)
        self.n_elites = n_elites
        self.weights = elite_weights(n_elites)
        self.eps = float(eps_init)
        self.eps_limit = float(eps_limit)
        self.eps_tau = float(eps_tau)
        self.antithetic = bool(antithetic)
        self.variance_form = variance_form
        self.generations = 0

    @property
    def dim(self) -> int:
        return self.mu.size

    def ask(self, rng: np.random.Generator, n: int | None = None) -> np.ndarray:
        """``n`` individuals (default ``pop_size``) as a float32 array ``[n, d]``."""
        n = self.pop_size if n is None else int(n)
        if self.antithetic and n % 2 == 0:
            half = rng.standard_normal((n // 2, self.dim))
            eps = np.concatenate([half, -half])
        else:
            eps = rng.standard_normal((n, self.dim))
        return (self.mu + eps * np.sqrt(self.var)).astype(np.float32)

    def tell(self, individuals, fitness) -> dict[str, Any]:
        """Update from a generation; returns the elites' indices and statistics.

        Raises ``ValueError`` (nothing changed) for a non-finite fitness or wrong shapes.
        """
        z = np.asarray(individuals, dtype=np.float64)
        f = np.asarray(fitness, dtype=np.float64).ravel()
        if z.ndim != 2 or z.shape[1] != self.dim or len(z) != len(f):
            raise ValueError(f"expected individuals [n, {self.dim}] with one fitness each, got "
                             f"{z.shape} and {f.shape}")
        if len(f) < self.n_elites:
            raise ValueError(f"need at least n_elites={self.n_elites} individuals, got {len(f)}")
        for value in f:
            check_fitness(value, 0.0)
        order = np.argsort(-f, kind="stable")[: self.n_elites]
        elites = z[order]
        old = self.mu
        eps = self.eps * self.eps_tau + (1.0 - self.eps_tau) * self.eps_limit
        mu = self.weights @ elites
        d = elites - old
        var = self.weights @ (d * d)
        if self.variance_form == "code":
            var = var / self.n_elites
        self.mu, self.var, self.eps = mu, var + eps, eps
        self.generations += 1
        return {"elites": order, "best": float(f[order[0]]), "eps": eps,
                "var_mean": float(self.var.mean()), "var_min": float(self.var.min()),
                "var_max": float(self.var.max()),
                "step_norm": float(np.linalg.norm(mu - old))}

    def state_dict(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        return ({"eps": self.eps, "generations": self.generations},
                {"mu": self.mu.copy(), "var": self.var.copy()})

    def load_state_dict(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        self.mu, self.var = checkpoint_gaussian(arrays, self.dim)
        self.eps = float(meta["eps"])
        self.generations = int(meta["generations"])
