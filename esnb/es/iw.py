"""Importance-Weighted ES: Campos, Giro-i-Nieto & Torres (2018), *Importance Weighted
Evolution Strategies*, arXiv:1811.04624.

A batch was sampled around ``theta_old`` with spread ``sigma_old``: ``x_i = theta_old +
sigma_old * eps_i`` (``eps_i`` a noise-table row, negated for the mirrored half), with shaped
fitness ``s_i``. After the ordinary update the mean has moved by ``delta = theta_new -
theta_old``; IW-ES makes more updates from the same batch, each weighting sample ``i`` by

    w_i = N(x_i; theta_new, sigma_new^2 I) / N(x_i; theta_old, sigma_old^2 I),

computed in log space in the stable form

    log w_i = 1/2 (1 - sigma_old^2/sigma_new^2) ||eps_i||^2 + sigma_old (eps_i . delta)/sigma_new^2
              - ||delta||^2 / (2 sigma_new^2) + d log(sigma_old / sigma_new),

clipped at ``c`` (the paper clips at 1), and the gradient, in OpenAI-ES's scale, is

    g = sum_i w_i s_i (sigma_old eps_i - delta) / (sigma_new * Z),   Z = sum_i w_i  (eq. 3)
                                                                     or Z = N (``"n"``).

With ``delta = 0`` and ``sigma_new = sigma_old`` every weight is 1 and ``g`` is the ordinary ES
gradient. Everything is float64; ``||eps_i||^2`` comes from the noise table's float64 prefix sum
(a float32 prefix over 25M entries is off by ~1e3). The O(n d) part is the dot products
``eps_j . delta``: :func:`noise_dots` computes them row by row, so workers holding the table can
compute them for chunks of rows and the driver gets bitwise the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from esnb.es.blas import one_thread
from esnb.es.gradient import weighted_noise_sum
from esnb.noise import NoiseTable

NORMALIZATIONS = ("sum", "n")
F32_MAX = float(np.finfo(np.float32).max)
DOT_ROWS = 16  # rows per float64 block in noise_dots: bounds its temporary at 16*d doubles


def noise_dots(noise: NoiseTable, indices: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """``noise[idx : idx + d] . delta`` for every index, in float64.

    Each row's sum is computed on its own (numpy's pairwise sum over one contiguous row), so the
    result for an index does not depend on which other indices share the call: chunks computed
    on different workers equal the driver's numbers bit for bit.
    """
    indices = np.asarray(indices, dtype=np.int64)
    delta = np.asarray(delta, dtype=np.float64)
    out = np.empty(indices.size, dtype=np.float64)
    # an overflowed delta gives inf/nan dots: the IW update detects them and is skipped, so
    # numpy's warning would only be noise in the user's log
    with np.errstate(over="ignore", invalid="ignore"):
        for start in range(0, indices.size, DOT_ROWS):
            rows = noise.gather(indices[start : start + DOT_ROWS], delta.size).astype(np.float64)
            rows *= delta
            out[start : start + DOT_ROWS] = rows.sum(axis=1)
    return out


def log_importance_weights(eps_dot_delta: np.ndarray, eps_sq: np.ndarray, delta_sq: float,
                           dim: int, sigma_old: float, sigma_new: float) -> np.ndarray:
    """Raw (unclipped) ``log w_i`` from the per-sample quantities, in float64.

    Parameters
    ----------
    eps_dot_delta : array [n]
        ``eps_i . delta`` (signed: the mirrored member of a pair has the opposite sign).
    eps_sq : array [n]
        ``||eps_i||^2``.
    delta_sq : float
        ``||delta||^2``.
    dim : int
        ``d``, the number of parameters.
    """
    if not (sigma_old > 0 and sigma_new > 0):
        raise ValueError(f"sigmas must be > 0, got sigma_old={sigma_old}, sigma_new={sigma_new}")
    so, sn = float(sigma_old), float(sigma_new)
    ratio = so * so / (sn * sn)
    with np.errstate(over="ignore", invalid="ignore"):  # callers check for non-finite values
        log_w = so * np.asarray(eps_dot_delta, dtype=np.float64) / (sn * sn)
        log_w -= float(delta_sq) / (2 * sn * sn)
        if ratio != 1.0:  # the ||eps||^2 and d log terms cancel exactly when sigma is unchanged
            log_w += 0.5 * (1.0 - ratio) * np.asarray(eps_sq, dtype=np.float64)
            log_w += dim * np.log(so / sn)
    return log_w


def importance_weights(eps: np.ndarray, delta: np.ndarray, sigma_old: float,
                       sigma_new: float | None = None, clip: float = 1.0) -> np.ndarray:
    """Clipped importance weights ``min(w_i, clip)`` for explicit perturbations.

    Parameters
    ----------
    eps : array [n, d]
        Signed unit perturbations the batch was sampled with.
    delta : array [d]
        ``theta_new - theta_old``.
    sigma_old, sigma_new : float
        Spread at sampling and now (``sigma_new`` defaults to ``sigma_old``).
    clip : float
        Upper bound ``c`` on each weight (> 0).
    """
    check_clip(clip)
    eps = np.asarray(eps, dtype=np.float64)
    delta = np.asarray(delta, dtype=np.float64)
    sigma_new = sigma_old if sigma_new is None else sigma_new
    with one_thread():  # as in iw_gradient: the bits must not depend on the thread count
        log_w = log_importance_weights(eps @ delta, np.einsum("ij,ij->i", eps, eps),
                                       float(delta @ delta), eps.shape[1], sigma_old, sigma_new)
    return np.exp(np.minimum(log_w, np.log(clip)))


def effective_sample_size(log_w: np.ndarray) -> float:
    """``(sum w)^2 / sum w^2`` from log-weights, without overflow (NaN if any is NaN)."""
    log_w = np.asarray(log_w, dtype=np.float64)
    if log_w.size == 0 or np.isnan(log_w).any():
        return float("nan")
    top = np.max(log_w)
    if not np.isfinite(top):
        return float("nan")
    w = np.exp(log_w - top)
    return float(w.sum() ** 2 / np.square(w).sum())


def check_clip(clip: float) -> None:
    if not (np.isfinite(clip) and clip > 0):
        raise ValueError(f"clip must be a finite number > 0, got {clip!r}")


@dataclass
class Batch:
    """What IW-ES keeps of a generation to reuse it.

    Attributes
    ----------
    indices : int array [pairs]
        Noise offsets of the mirrored pairs.
    shaped : array [pairs, 2]
        Shaped fitness of the ``+eps`` and ``-eps`` members.
    theta_old : float32 array [d]
        The mean the batch was sampled around.
    sigma_old : float
        The spread it was sampled with.
    generation : int
        The generation that collected it.
    updates : int
        IW updates already made from it (the ordinary update not counted).
    """

    indices: np.ndarray
    shaped: np.ndarray
    theta_old: np.ndarray
    sigma_old: float
    generation: int
    updates: int = 0

    @property
    def n(self) -> int:
        return 2 * len(self.indices)


@dataclass(frozen=True)
class IWUpdate:
    """One IW-ES update as data: the controls it was taken with (what the driver decided and
    every replica replays, computing the gradient itself)."""

    lr: float
    weight_decay: float
    sigma: float
    clip: float
    normalize: str


@dataclass
class IWGradient:
    """One attempted IW update's gradient (None if skipped) and its weights' statistics."""

    ess: float
    ess_frac: float
    clipped_frac: float
    weight_sum: float
    grad: np.ndarray | None
    skipped: str = ""


def iw_gradient(noise: NoiseTable, batch: Batch, theta: np.ndarray, sigma_new: float,
                clip: float = 1.0, normalize: str = "sum",
                dots: np.ndarray | None = None) -> IWGradient:
    """The IW-ES gradient at ``theta`` from ``batch``, with the statistics of its weights.

    ``dots`` are ``eps_j . delta`` per pair (one per pair, for the ``+eps`` member); computed
    here with :func:`noise_dots` when not given (the distributed path passes workers' numbers).
    Never returns a non-finite gradient: an overflow or an empty weight sum is reported in
    ``skipped`` with ``grad=None``.
    """
    check_clip(clip)
    if normalize not in NORMALIZATIONS:
        raise ValueError(f"normalize must be one of {NORMALIZATIONS}, got {normalize!r}")
    dim = theta.size
    delta = theta.astype(np.float64) - batch.theta_old.astype(np.float64)
    if dots is None:
        dots = noise_dots(noise, batch.indices, delta)
    dots = np.asarray(dots, dtype=np.float64)
    sigma_old = float(batch.sigma_old)
    if sigma_old != sigma_new:
        eps_sq = noise.squared_norms(batch.indices, dim)
    else:
        eps_sq = np.zeros(len(batch.indices))
    with one_thread():  # a long dot is split over BLAS threads, and its rounding with it
        delta_sq = float(delta @ delta)
    # column 0: +eps_j, column 1: -eps_j
    signed = np.stack([dots, -dots], axis=1)
    log_w = log_importance_weights(signed, np.stack([eps_sq, eps_sq], axis=1), delta_sq, dim,
                                   sigma_old, sigma_new)
    n = log_w.size
    if not np.all(np.isfinite(log_w)):
        return IWGradient(float("nan"), float("nan"), float("nan"), float("nan"), None,
                      "non-finite log-weights")
    ess = effective_sample_size(log_w)
    log_c = np.log(clip)
    clipped_frac = float(np.mean(log_w > log_c))
    top = float(log_w.max())
    if normalize == "sum" and top < log_c:
        # no weight reaches the clip, and eq. 3 is invariant to scaling every weight: shift by
        # the largest log-weight so tiny weights (a spent batch) cannot all underflow to 0
        w = np.exp(log_w - top)
        weight_sum = float(np.exp(top) * w.sum())
        z = float(w.sum())
    else:
        w = np.exp(np.minimum(log_w, log_c))
        weight_sum = float(w.sum())
        z = weight_sum if normalize == "sum" else float(n)
    if not (z > 0 and np.isfinite(z)):
        return IWGradient(ess, ess / n, clipped_frac, weight_sum, None, "weights sum to zero")
    ws = w * batch.shaped
    # sum_i w_i s_i eps_i over mirrored pairs, then the delta term
    grad = sigma_old * weighted_noise_sum(noise, batch.indices, ws[:, 0] - ws[:, 1], dim)
    grad -= delta * ws.sum()
    grad /= sigma_new * z
    # the parameters are float32: a gradient beyond float32's range would become inf, then NaN
    if not (np.all(np.isfinite(grad)) and np.abs(grad).max(initial=0) < F32_MAX):
        return IWGradient(ess, ess / n, clipped_frac, weight_sum, None, "non-finite gradient")
    return IWGradient(ess, ess / n, clipped_frac, weight_sum, grad)
