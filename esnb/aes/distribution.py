"""AES-RL's population: a diagonal Gaussian updated one individual at a time, and the
population control that decides which new individuals are RL individuals.

Lee et al. 2020 (AES-RL), sections 3.2-3.4. :class:`AsyncDistribution` holds ``(mu, var)``
(``var`` is a vector of *variances*: the paper's ``Sigma = sigma_init I`` with
``sigma_init = 1e-3`` and the released code's ``--sigma_init`` are variances) and applies
:mod:`esnb.aes.rules` to each evaluated individual against the *current* mean, whatever mean
the individual was sampled from; the difference is recorded as staleness. It also keeps the
state some rules need: the window of the last individuals (``rank_async``/``rank_window``)
and the recent successes (``success_rule``).

:meth:`AsyncDistribution.tell` checks everything (rule names, parameters, fitness, the
variance floor) before it changes anything: a bad value raises ``ValueError`` and leaves the
distribution as it was.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

import numpy as np

from esnb.aes.rules import (
    MEAN_RULES,
    VARIANCE_RULES,
    call_rule,
    check_fitness,
    checkpoint_gaussian,
    get_rule,
    rank_target,
    rl_probability,
)

#: Table 5 of the paper: the fixed range r (= |absolute f_b| = relative f_b), about 1/6 of
#: the best return reached in each environment
ENV_RANGES = {"HalfCheetah": 2000.0, "Hopper": 600.0, "Walker2d": 860.0, "Ant": 960.0,
              "Swimmer": 48.0, "Humanoid": 960.0}
#: appendix C: p_desired = 0.5 except Swimmer (0.1: RL gradients are deceptive there)
ENV_P_DESIRED = {"Swimmer": 0.1}
#: the rank rule's additive variance decays by this per window of updates (the released
#: ACEM-RL's ``--cemrl_tau`` default, utils/util.py; sep-CEM's generation uses 0.95)
RANK_EPS_TAU = 0.90


def env_defaults(env_id: str) -> dict[str, float]:
    """``r``, ``f_b_absolute``, ``f_b_relative`` and ``p_desired`` of the paper for ``env_id``
    (any version), or generic ones (r = 1000) for an environment the paper did not use."""
    base = env_id.split("-")[0].split("/")[-1]
    r = ENV_RANGES.get(base, 1000.0)
    return {"r": r, "f_b_absolute": -r, "f_b_relative": r,
            "p_desired": ENV_P_DESIRED.get(base, 0.5)}


def check_floor(var_floor) -> float:
    """The variance floor as a float, or a ``ValueError`` (it must be finite and > 0)."""
    try:
        v = float(var_floor)
    except (TypeError, ValueError):
        raise ValueError(f"var_floor must be a number > 0, got {var_floor!r}") from None
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"var_floor (the variance floor) must be finite and > 0, got "
                         f"{var_floor!r}")
    return v


class AsyncDistribution:
    """``N(mu, diag(var))`` updated by one individual at a time.

    Parameters
    ----------
    mu : array of shape (d,)
        Initial mean (kept in float64; samples are float32).
    var_init : float
        Initial variance of every coordinate (the paper's 1e-3).
    var_floor : float
        Lower limit of every variance after each update (the paper's sigma_limit, 1e-5: a
        variance).
    rank_window : int
        Individuals kept for the rank rule (``n``).
    success_window : int
        Updates the success rule looks back over.
    eps_init, eps_limit, eps_tau : float
        The rank rule's additive variance, decaying geometrically from ``eps_init`` to
        ``eps_limit`` by ``tau = eps_tau ** (1 / rank_window)`` per update: the released
        ACEM-RL's ``cemrl_tau`` (0.90) per window of updates. Each update decays it *before*
        adding it to the window's variance, as the released code does (see :meth:`tell`).

    Attributes
    ----------
    updates : int
        Calls of :meth:`tell` applied so far (the "version" of ``mu``; staleness counts these).
    """

    def __init__(self, mu, var_init: float = 1e-3, var_floor: float = 1e-5,
                 rank_window: int = 10, success_window: int = 10, eps_init: float = 1e-3,
                 eps_limit: float = 1e-5, eps_tau: float = RANK_EPS_TAU):
        mu = np.asarray(mu, dtype=np.float64).ravel()
        if mu.size == 0 or not np.all(np.isfinite(mu)):
            raise ValueError("mu must be a non-empty finite vector")
        if not (math.isfinite(var_init) and var_init > 0):
            raise ValueError(f"var_init must be > 0, got {var_init!r}")
        if int(rank_window) < 2:
            raise ValueError(f"rank_window must be >= 2, got {rank_window!r}")
        self.mu = mu
        self.var = np.full(mu.size, float(var_init))
        self.var_floor = check_floor(var_floor)
        self.rank_window = int(rank_window)
        self.window_z: deque[np.ndarray] = deque(maxlen=self.rank_window)
        self.window_f: deque[float] = deque(maxlen=self.rank_window)
        self.successes: deque[bool] = deque(maxlen=int(success_window))
        self.eps = float(eps_init)
        self.eps_limit = float(eps_limit)
        self.eps_decay = float(eps_tau) ** (1.0 / self.rank_window)
        self.updates = 0

    @property
    def dim(self) -> int:
        return self.mu.size

    def sample(self, rng: np.random.Generator) -> np.ndarray:
        """One individual ``mu + sqrt(var) * N(0, I)`` as float32."""
        return (self.mu + np.sqrt(self.var) * rng.standard_normal(self.dim)).astype(np.float32)

    def var_stats(self) -> dict[str, float]:
        return {"var_mean": float(self.var.mean()), "var_min": float(self.var.min()),
                "var_max": float(self.var.max()),
                "var_at_floor": float(np.mean(self.var <= self.var_floor * (1 + 1e-12)))}

    def tell(self, z, f_z: float, f_mu: float, mean_rule: str, var_rule: str,
             var_floor: float | None = None, **params: Any) -> dict[str, Any]:
        """Update ``(mu, var)`` with one evaluated individual; return what happened.

        Parameters
        ----------
        z : array of shape (d,)
            The individual (for an RL individual: its trained actor).
        f_z, f_mu : float
            Its fitness, and the current mean's.
        mean_rule, var_rule : str
            Names in :data:`~esnb.aes.rules.MEAN_RULES` / :data:`~esnb.aes.rules.VARIANCE_RULES`.
        var_floor : float, optional
            Change the floor (validated first).
        **params
            Rule parameters (``r``, ``p_pos``, ``p_neg``, ``f_b``, ``n``, ...); each rule takes
            the ones it needs.

        Returns
        -------
        dict
            ``p``, ``success``, ``step_norm`` (``|mu_new - mu_old|``), ``update`` (the number
            of this update) and the variance statistics after it.

        Raises
        ------
        ValueError
            Unknown rule, bad parameter, non-finite fitness or ``z``, bad floor. Nothing
            changes then.
        """
        # -- everything is checked on copies first; state is assigned only at the end --
        get_rule(MEAN_RULES, mean_rule)
        get_rule(VARIANCE_RULES, var_rule)
        floor = self.var_floor if var_floor is None else check_floor(var_floor)
        f_z, f_mu = check_fitness(f_z, f_mu)
        z = np.asarray(z, dtype=np.float64).ravel()
        if z.shape != self.mu.shape:
            raise ValueError(f"z has {z.size} parameters, the distribution {self.dim}")
        if not np.all(np.isfinite(z)):
            raise ValueError("z (the individual) has non-finite parameters")
        window_z = list(self.window_z) + [z]
        window_f = list(self.window_f) + [f_z]
        window_z, window_f = window_z[-self.rank_window:], window_f[-self.rank_window:]
        rank = mean_rule == "rank_async"
        # ``n`` of the rank rule is the window's size; the ``n`` in params is online_fixed's
        mean_params = {k: v for k, v in params.items() if k != "n"}
        if rank:
            mean_params.update(filled=len(window_f), n=self.rank_window)
        p = float(call_rule(MEAN_RULES, mean_rule, f_z, f_mu, **mean_params))
        if not math.isfinite(p):
            raise ValueError(f"mean rule {mean_rule!r} gave a non-finite p {p!r}")
        mu_old = self.mu
        if rank:
            target = rank_target(np.stack(window_z), window_f) if p > 0 else mu_old
        else:
            target = z
        mu_new = (1.0 - p) * mu_old + p * target
        successes = list(self.successes) + [p > 0]
        eps = self.eps
        if var_rule == "rank_window" and p > 0:
            # decay, then add: the released ACEM-RL (KyunghyunLee/aes-rl, core/population.py,
            # ACemrlPopulation) sets ``self.tau = float(np.power(args.cemrl_tau,
            # 1/population_size))`` (line 139), then in ``tell`` decays ``self.damp = self.damp *
            # self.tau + (1 - self.tau) * self.damp_limit`` (line 176) before ``self.var = 1 /
            # self.parents * self.weights @ (z * z) + self.damp * np.ones(...)`` (line 180);
            # ``--cemrl_tau`` defaults to 0.90 (utils/util.py)
            eps = eps * self.eps_decay + (1.0 - self.eps_decay) * self.eps_limit
        var_new = np.asarray(call_rule(VARIANCE_RULES, var_rule, self.var, mu_old, mu_new, z, p,
                                       successes=successes, window_z=np.stack(window_z),
                                       window_f=window_f, eps=eps, **params), dtype=np.float64)
        if var_new.shape != self.var.shape or not np.all(np.isfinite(var_new)):
            raise ValueError(f"variance rule {var_rule!r} gave a bad variance")
        np.maximum(var_new, floor, out=var_new)
        # -- apply --
        self.var_floor = floor
        self.window_z.append(z)
        self.window_f.append(f_z)
        self.successes.append(p > 0)
        self.eps = eps
        step = float(np.linalg.norm(mu_new - mu_old))
        self.mu = mu_new
        self.var = var_new
        self.updates += 1
        return {"p": p, "success": p > 0, "step_norm": step, "update": self.updates,
                **self.var_stats()}

    # -- checkpoints -------------------------------------------------------------------------
    def state_dict(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        arrays = {"mu": self.mu.copy(), "var": self.var.copy(),
                  "window_z": (np.stack(self.window_z) if self.window_z
                               else np.zeros((0, self.dim)))}
        meta = {"window_f": [float(f) for f in self.window_f],
                "successes": [bool(s) for s in self.successes], "eps": self.eps,
                "updates": self.updates, "var_floor": self.var_floor}
        return meta, arrays

    def load_state_dict(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        self.mu, self.var = checkpoint_gaussian(arrays, self.dim)
        self.window_z = deque(list(np.asarray(arrays["window_z"], dtype=np.float64)),
                              maxlen=self.rank_window)
        self.window_f = deque(meta["window_f"], maxlen=self.rank_window)
        self.successes = deque(meta["successes"], maxlen=self.successes.maxlen)
        self.eps = float(meta["eps"])
        self.updates = int(meta["updates"])
        self.var_floor = float(meta["var_floor"])


class PopulationControl:
    """Eq. 3's counts: how many RL and ES individuals were created (after the warm-up).

    Individuals created during the warm-up (before ``rl_start_step`` env steps) are ES
    individuals that are not counted, as in the released code. Eq. 3 reads the counts with
    one RL and one ES individual added (:data:`PRIOR`): the released code starts both of its
    counters at 1 (``total_rl_population = total_es_population = 1``), so the first
    probability is ``-K_rl (1/2 - p_desired) + 1/2`` and the controller's first decisions are
    damped by the pseudo-counts. ``n_rl``/``n_es`` count created individuals only.
    """

    #: pseudo-counts of RL and of ES individuals eq. 3 starts from (the released code's 1/1)
    PRIOR = 1

    def __init__(self):
        self.n_rl = 0
        self.n_es = 0

    def probability(self, p_desired: float, k_rl: float) -> float:
        return rl_probability(self.n_rl + self.PRIOR, self.n_es + self.PRIOR, p_desired, k_rl)

    def decide(self, rng: np.random.Generator, p_desired: float, k_rl: float,
               warmup: bool) -> tuple[bool, float]:
        """Whether the next individual is an RL individual, and the ``p_rl`` it was drawn
        with (0 during the warm-up); counts it."""
        if warmup:
            return False, 0.0
        p = self.probability(p_desired, k_rl)
        rl = bool(rng.random() < p)
        if rl:
            self.n_rl += 1
        else:
            self.n_es += 1
        return rl, p

    def uncount(self, rl: bool) -> None:
        """Forget an individual that was dropped before it was evaluated."""
        if rl:
            self.n_rl = max(0, self.n_rl - 1)
        else:
            self.n_es = max(0, self.n_es - 1)

    @property
    def rl_share(self) -> float:
        n = self.n_rl + self.n_es
        return self.n_rl / n if n else float("nan")
