"""AES-RL's asynchronous update rules as small pure functions in registries.

Lee et al. 2020, "An Efficient Asynchronous Method for Integrating Evolutionary and Gradient-based
Policy Search" (AES-RL), sections 3.2-3.4 and appendix C. The paper's formulas are restated
below; where the paper is silent or garbled, the authors' released code decided, and
every such choice is written next to the rule below.

A population distribution ``N(mu, diag(var))`` is updated after *each* evaluated individual
``z`` with fitness ``f(z)``, against ``f(mu)`` (the mean's own fitness):

- the **mean** moves as ``mu <- (1 - p) mu + p z``; ``MEAN_RULES[name](f_z, f_mu, **params)``
  returns ``p``;
- the **variance** (a diagonal of *variances*, elementwise: the transpose in eq. 11 is a typo
  for the Hadamard product) follows ``VARIANCE_RULES[name](var, mu_old, mu_new, z, p,
  **params)``;
- :func:`rl_probability` is the population control of eq. 3 (how likely a new individual is an
  RL individual).

Each rule takes only its own keyword parameters (named as in the formulas: ``r``, ``p_pos``,
``p_neg``, ``f_b``, ``n``); :func:`rule_params` lists them and :func:`call_rule` picks them out
of a larger mapping (a control snapshot). Every rule checks its inputs and raises ``ValueError``
naming the bad one; rules never modify their arguments.

Examples
--------
>>> MEAN_RULES["fixed_linear"](1500.0, 1000.0, r=2000.0)
0.25
>>> round(MEAN_RULES["relative_baseline"](1000.0, 1000.0, f_b=2000.0), 3)
0.5
"""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Callable, Mapping, Sequence

import numpy as np

#: online variance rules skip updates with p below this (the released code's 1e-3)
P_MIN = 1e-3


# -- checks ---------------------------------------------------------------------------------
def _finite(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return value


def check_fitness(f_z, f_mu) -> tuple[float, float]:
    """``(f_z, f_mu)`` as floats, or a ``ValueError`` naming the non-finite one."""
    return _finite("f(z) (the individual's fitness)", f_z), _finite("f(mu) (the mean's fitness)",
                                                                   f_mu)


def checkpoint_gaussian(arrays, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """``(mu, var)`` of a diagonal Gaussian from checkpoint arrays, as float64 copies: shapes
    ``(dim,)``, finite, variances > 0 -- else a ``ValueError`` (nothing is changed)."""
    mu = np.array(arrays["mu"], dtype=np.float64)
    var = np.array(arrays["var"], dtype=np.float64)
    if mu.shape != (dim,) or var.shape != (dim,):
        raise ValueError(f"checkpoint mean has {mu.size} and variance {var.size} parameters, "
                         f"expected {dim}")
    if not (np.all(np.isfinite(mu)) and np.all(np.isfinite(var)) and np.all(var > 0)):
        raise ValueError("checkpoint mean and variance must be finite, variances > 0")
    return mu, var


def _positive(name: str, value) -> float:
    value = _finite(name, value)
    if value <= 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    return value


def _unit(name: str, value) -> float:
    value = _finite(name, value)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {value!r}")
    return value


def _sigmoid(x: float) -> float:
    # numerically safe for any finite x
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def _clip(x: float, lo: float, hi: float) -> float:
    return min(max(x, lo), hi)


# -- mean rules -----------------------------------------------------------------------------
def one_plus_one(f_z: float, f_mu: float) -> float:
    """(1+1)-ES (eq. 5): ``p = 1`` if ``f(z) > f(mu)`` else ``0``."""
    f_z, f_mu = check_fitness(f_z, f_mu)
    return 1.0 if f_z > f_mu else 0.0


def fixed_linear(f_z: float, f_mu: float, *, r: float, p_pos: float = 1.0,
                 p_neg: float = 0.0) -> float:
    """Fixed range, linear (eqs. 6-7): ``p = p_sg * clip((f(z) - f(mu)) / r, -1, 1)``.

    ``p_sg = p_pos`` if ``f(z) > f(mu)`` else ``p_neg``; with ``p_neg > 0`` a worse individual
    gives a negative ``p`` (the mean moves away from it).
    """
    f_z, f_mu = check_fitness(f_z, f_mu)
    r = _positive("r (the fixed range)", r)
    p_pos, p_neg = _unit("p_pos", p_pos), _unit("p_neg", p_neg)
    p_sg = p_pos if f_z > f_mu else p_neg
    return p_sg * _clip((f_z - f_mu) / r, -1.0, 1.0)


def fixed_sigmoid(f_z: float, f_mu: float, *, r: float, p_pos: float = 1.0,
                  p_neg: float = 0.0) -> float:
    """Fixed range, sigmoid (eq. 8): ``p = p_sg * sigmoid((f(z) - f(mu)) / r)``.

    ``p_sg`` as in :func:`fixed_linear`: with the default ``p_neg = 0`` an individual that does
    not improve on the mean gives ``p = 0``.
    """
    f_z, f_mu = check_fitness(f_z, f_mu)
    r = _positive("r (the fixed range)", r)
    p_pos, p_neg = _unit("p_pos", p_pos), _unit("p_neg", p_neg)
    p_sg = p_pos if f_z > f_mu else p_neg
    return p_sg * _sigmoid((f_z - f_mu) / r)


def fixed_sigmoid_unsigned(f_z: float, f_mu: float, *, r: float) -> float:
    """The released code's sigmoid rule: ``p = sigmoid((f(z) - f(mu)) / r)``, no sign factor
    (a worse individual still pulls the mean by up to 0.5)."""
    f_z, f_mu = check_fitness(f_z, f_mu)
    r = _positive("r (the fixed range)", r)
    return _sigmoid((f_z - f_mu) / r)


def absolute_baseline(f_z: float, f_mu: float, *, f_b: float) -> float:
    """Absolute fitness baseline (eq. 9, guarded as the released code does).

    ``p = 0`` if ``f(z) <= f_b``, else ``clip((f(z) - f_b) / ((f(mu) - f_b) + (f(z) - f_b)),
    0, 1)``. The literal eq. 9 changes sign below ``f_b``; the guard keeps ``p`` in [0, 1].
    When the denominator is 0 (``f(mu) - f_b = -(f(z) - f_b) < 0``: z is above the baseline and
    the mean as far below it) ``p = 1``, the limit from the side where ``z`` is better.
    """
    f_z, f_mu = check_fitness(f_z, f_mu)
    f_b = _finite("f_b (the absolute baseline)", f_b)
    dz = f_z - f_b
    if dz <= 0:
        return 0.0
    denom = (f_mu - f_b) + dz
    if denom == 0:
        return 1.0
    return _clip(dz / denom, 0.0, 1.0)


def relative_baseline(f_z: float, f_mu: float, *, f_b: float, p_pos: float = 1.0,
                      p_neg: float = 0.0) -> float:
    """Relative fitness baseline (eq. 10): the baseline moves with the mean.

    ``f_rb = f(mu) - f_b``; ``p = 0`` when ``f(z) <= f_rb - f_b``; otherwise
    ``p = p_sg * clip((f(z) - f_rb) / (f_b + (f(z) - f_rb)), -1, 1)`` with ``p_sg = p_pos`` if
    ``f(z) >= f_rb`` else ``p_neg``. At ``f(z) = f(mu)``, ``p = 0.5``. The denominator is > 0
    wherever ``p`` is computed (it equals ``f(z) - (f_rb - f_b)``).
    """
    f_z, f_mu = check_fitness(f_z, f_mu)
    f_b = _positive("f_b (the relative baseline)", f_b)
    p_pos, p_neg = _unit("p_pos", p_pos), _unit("p_neg", p_neg)
    f_rb = f_mu - f_b
    if f_z <= f_rb - f_b:
        return 0.0
    p_sg = p_pos if f_z >= f_rb else p_neg
    return p_sg * _clip((f_z - f_rb) / (f_b + (f_z - f_rb)), -1.0, 1.0)


def rank_async(f_z: float, f_mu: float, *, filled: int, n: int = 10) -> float:
    """Rank-based "move oldest" (the paper's asynchronous rank-based comparison, the released
    code's ACEM-RL): ``p = 1 / n`` once the window of the last ``n`` individuals is full, else 0.

    The mean then moves by ``p`` toward the rank-weighted mean of the window's elites, not
    toward ``z`` (see :func:`rank_target`): ``mu <- mu + (m_elite - mu) / n``. Fitness only
    matters through the ranks, so ``f_z``/``f_mu`` are only checked.
    """
    check_fitness(f_z, f_mu)
    n = _count("n (the rank window)", n, 2)
    filled = _count("filled", filled, 0)
    return 1.0 / n if filled >= n else 0.0


def _count(name: str, value, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def elite_weights(n_elites: int) -> np.ndarray:
    """CEM's rank weights ``lambda_i ∝ log((1 + K_e) / i)``, i = 1..K_e, summing to 1."""
    k = _count("n_elites", n_elites, 1)
    w = np.log((1.0 + k) / np.arange(1, k + 1))
    return w / w.sum()


def rank_target(window_z: np.ndarray, window_f: Sequence[float],
                n_elites: int | None = None) -> np.ndarray:
    """The rank-weighted mean of the window's ``K_e`` best individuals (default half).

    Ties are broken by position (a stable sort), so the result is deterministic.
    """
    z = np.asarray(window_z, dtype=np.float64)
    f = np.asarray(window_f, dtype=np.float64)
    if z.ndim != 2 or len(z) != len(f) or len(f) == 0:
        raise ValueError(f"window_z must be [n, d] with one fitness each, got {z.shape} and "
                         f"{f.shape}")
    if not np.all(np.isfinite(f)):
        raise ValueError("the window's fitness values must be finite")
    k = max(1, len(f) // 2) if n_elites is None else _count("n_elites", n_elites, 1)
    order = np.argsort(-f, kind="stable")[:k]
    return elite_weights(len(order)) @ z[order]


#: name -> rule(f_z, f_mu, **params) -> p
MEAN_RULES: dict[str, Callable[..., float]] = {
    "one_plus_one": one_plus_one,
    "fixed_linear": fixed_linear,
    "fixed_sigmoid": fixed_sigmoid,
    "fixed_sigmoid_unsigned": fixed_sigmoid_unsigned,
    "absolute_baseline": absolute_baseline,
    "relative_baseline": relative_baseline,
    "rank_async": rank_async,
}


# -- variance rules -------------------------------------------------------------------------
def _check_vectors(var, mu_old, mu_new, z) -> tuple[np.ndarray, ...]:
    arrays = [np.asarray(a, dtype=np.float64) for a in (var, mu_old, mu_new, z)]
    shape = arrays[0].shape
    for name, a in zip(("var", "mu_old", "mu_new", "z"), arrays):
        if a.shape != shape or a.ndim != 1:
            raise ValueError(f"{name} must be a vector of the shape of var {shape}, got "
                             f"{a.shape}")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{name} has non-finite entries")
    if np.any(arrays[0] < 0):
        raise ValueError("var must be >= 0 elementwise (it holds variances)")
    return tuple(arrays)


def _online(var, mu_old, mu_new, z, n: float) -> np.ndarray:
    return var + ((z - mu_old) * (z - mu_new) - var) / n


def online_fixed(var, mu_old, mu_new, z, p: float, *, n: float = 10.0,
                 p_min: float = P_MIN) -> np.ndarray:
    """Online variance with a fixed window (eq. 11):
    ``var + ((z - mu_old) ⊙ (z - mu_new) - var) / n``.

    Unchanged when ``p < p_min`` (always when ``p <= 0``): the released code skips
    ``p < 1e-3``.
    """
    var, mu_old, mu_new, z = _check_vectors(var, mu_old, mu_new, z)
    p = _finite("p", p)
    n = _finite("n", n)
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n!r}")
    if p <= 0 or p < p_min:
        return var.copy()
    return _online(var, mu_old, mu_new, z, n)


def online_adaptive(var, mu_old, mu_new, z, p: float, *, p_min: float = P_MIN) -> np.ndarray:
    """Online variance with ``n = max((1 - p) / p, 1)`` (eq. 12): an important individual
    (large ``p``) weighs more. Unchanged when ``p < p_min`` (always when ``p <= 0``)."""
    var, mu_old, mu_new, z = _check_vectors(var, mu_old, mu_new, z)
    p = _finite("p", p)
    if p <= 0 or p < p_min:
        return var.copy()
    return _online(var, mu_old, mu_new, z, max((1.0 - p) / p, 1.0))


def success_rule(var, mu_old, mu_new, z, p: float, *, successes: Sequence[bool],
                 window: int = 10, threshold: float = 0.2, factor: float = 0.99) -> np.ndarray:
    """Rechenberg's 1/5th success rule over a sliding window of the last ``window`` updates.

    ``successes`` holds whether each past update succeeded (``p > 0``), this one last. With a
    full window the variance is multiplied by ``1 / factor`` when the success rate exceeds
    ``threshold`` and by ``factor`` otherwise; before that it is unchanged. (The released code
    stopped appending once its window was full, freezing the rate: a bug, not followed.)
    """
    var, mu_old, mu_new, z = _check_vectors(var, mu_old, mu_new, z)
    _finite("p", p)
    window = _count("window", window, 1)
    threshold = _unit("threshold", threshold)
    factor = _finite("factor", factor)
    if not 0.0 < factor <= 1.0:
        raise ValueError(f"factor must be in (0, 1], got {factor!r}")
    recent = list(successes)[-window:]
    if len(recent) < window:
        return var.copy()
    rate = sum(bool(s) for s in recent) / window
    return var / factor if rate > threshold else var * factor


def rank_window(var, mu_old, mu_new, z, p: float, *, window_z: np.ndarray,
                window_f: Sequence[float], eps: float, n_elites: int | None = None
                ) -> np.ndarray:
    """sep-CEM's variance over the window's elites (the rank rule's own variance):
    ``sum_i lambda_i (z_i - mu_old)^2 / K_e + eps``, the released code's form (with its extra
    ``1 / K_e``); ``eps`` is this update's additive variance, already decayed
    (:meth:`esnb.aes.AsyncDistribution.tell`). Unchanged while the window is not full
    (``p <= 0``)."""
    var, mu_old, mu_new, z = _check_vectors(var, mu_old, mu_new, z)
    p = _finite("p", p)
    eps = _finite("eps", eps)
    if eps < 0:
        raise ValueError(f"eps must be >= 0, got {eps!r}")
    if p <= 0:
        return var.copy()
    wz = np.asarray(window_z, dtype=np.float64)
    f = np.asarray(window_f, dtype=np.float64)
    k = max(1, len(f) // 2) if n_elites is None else _count("n_elites", n_elites, 1)
    order = np.argsort(-f, kind="stable")[:k]
    d = wz[order] - mu_old
    return elite_weights(len(order)) @ (d * d) / len(order) + eps


#: name -> rule(var, mu_old, mu_new, z, p, **params) -> new var
VARIANCE_RULES: dict[str, Callable[..., np.ndarray]] = {
    "online_fixed": online_fixed,
    "online_adaptive": online_adaptive,
    "success_rule": success_rule,
    "rank_window": rank_window,
}

#: parameters a runner supplies itself (not controls): the rule's state
STATE_PARAMS = ("successes", "window_z", "window_f", "filled", "eps")


# -- population control ---------------------------------------------------------------------
def rl_probability(n_rl: int, n_es: int, p_desired: float, k_rl: float = 50.0) -> float:
    """Eq. 3: ``p_rl = clip(-K_rl (n_rl / (n_rl + n_es) - p_desired) + 0.5, 0, 1)``.

    A P-controller on the share of RL individuals created so far; with no individual yet it
    returns ``p_desired``.
    """
    n_rl = _count("n_rl", n_rl, 0)
    n_es = _count("n_es", n_es, 0)
    p_desired = _unit("p_desired", p_desired)
    k_rl = _finite("k_rl", k_rl)
    if k_rl < 0:
        raise ValueError(f"k_rl must be >= 0, got {k_rl!r}")
    if n_rl + n_es == 0:
        return p_desired
    return _clip(-k_rl * (n_rl / (n_rl + n_es) - p_desired) + 0.5, 0.0, 1.0)


# -- dispatch -------------------------------------------------------------------------------
def _registry_name(registry: Mapping) -> str:
    return "mean rule" if registry is MEAN_RULES else "variance rule"


def get_rule(registry: Mapping[str, Callable], name: str) -> Callable:
    """``registry[name]``, or a ``ValueError`` listing the valid names."""
    if name not in registry:
        raise ValueError(f"unknown {_registry_name(registry)} {name!r}; valid: "
                         f"{', '.join(registry)}")
    return registry[name]


def rule_params(fn: Callable) -> tuple[str, ...]:
    """The keyword parameters of a rule (``r``, ``p_pos``, ...)."""
    return tuple(p.name for p in inspect.signature(fn).parameters.values()
                 if p.kind is inspect.Parameter.KEYWORD_ONLY)


def call_rule(registry: Mapping[str, Callable], name: str, *args, **available):
    """Call rule ``name`` with ``args`` and the parameters it takes out of ``available``."""
    fn = get_rule(registry, name)
    wanted = rule_params(fn)
    return fn(*args, **{k: v for k, v in available.items() if k in wanted})


__all__ = ["MEAN_RULES", "P_MIN", "STATE_PARAMS", "VARIANCE_RULES", "absolute_baseline",
           "call_rule", "check_fitness", "elite_weights", "fixed_linear", "fixed_sigmoid",
           "fixed_sigmoid_unsigned", "get_rule", "one_plus_one", "online_adaptive",
           "online_fixed", "rank_async", "rank_target", "rank_window", "relative_baseline",
           "rl_probability", "rule_params", "success_rule"]
