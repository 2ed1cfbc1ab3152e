"""V-trace off-policy targets (Espeholt et al. 2018, "IMPALA: Scalable Distributed Deep-RL with
Importance Weighted Actor-Learner Architectures", arXiv 1802.01561, section 4).

For an unroll of length T with behaviour policy mu (the actor's) and target policy pi (the
learner's), values V(x_t), per-step discounts gamma_t (0 where the episode terminated),
rewards r_t and the bootstrap value V(x_T)::

    rho_t = min(rho_bar, pi(a_t|x_t) / mu(a_t|x_t))
    c_t   = lambda * min(c_bar, pi(a_t|x_t) / mu(a_t|x_t))
    delta_t = rho_t (r_t + gamma_t V(x_{t+1}) - V(x_t))
    v_s - V(x_s) = delta_s + gamma_s c_s (v_{s+1} - V(x_{s+1})),   v_T = V(x_T)
    A_s = min(rho_bar_pg, pi/mu) (r_s + gamma_s v_{s+1} - V(x_s))

Defaults rho_bar = c_bar = rho_bar_pg = 1, lambda = 1. Targets carry no gradient.

Time-limit truncation is not a termination. The caller bootstraps it before calling: at a
truncated step it adds ``gamma * V(x_final)`` (the value of the observation the time limit cut
off) to ``r_t`` and sets ``gamma_t = 0``. Then ``delta_t = rho_t (r_t + gamma V(x_final) -
V(x_t))`` exactly, and the recursion does not leak into the next episode.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # torch is imported on first call: importing esnb.rl stays light
    import torch


class VTraceReturns(NamedTuple):
    """What :func:`vtrace` returns (both ``[T, B]``, detached).

    Attributes
    ----------
    vs : torch.Tensor
        V-trace value targets v_s.
    pg_advantages : torch.Tensor
        Policy-gradient advantages ``rho_pg_s (r_s + gamma_s v_{s+1} - V(x_s))``.
    """

    vs: torch.Tensor
    pg_advantages: torch.Tensor


def _check_threshold(name: str, value) -> float | None:
    if value is None:  # no clipping at all
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number > 0 or None, got {value!r}") from None
    if not (value > 0) or math.isnan(value):
        raise ValueError(f"{name} must be a number > 0 or None (no clipping), got {value!r}")
    return value


def _check_inputs(behavior_log_probs, target_log_probs, rewards, discounts, values,
                  bootstrap_value) -> None:
    import torch

    named = {"behavior_log_probs": behavior_log_probs, "target_log_probs": target_log_probs,
             "rewards": rewards, "discounts": discounts, "values": values}
    for name, t in {**named, "bootstrap_value": bootstrap_value}.items():
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if not t.is_floating_point():
            raise ValueError(f"{name} must be a floating-point tensor, got {t.dtype}")
    shape = values.shape
    if values.dim() != 2:
        raise ValueError(f"values must be time-major [T, B], got shape {tuple(shape)}")
    if shape[0] == 0 or shape[1] == 0:
        raise ValueError(f"T and B must be >= 1, got values of shape {tuple(shape)}")
    for name, t in named.items():
        if t.shape != shape:
            raise ValueError(
                f"{name} has shape {tuple(t.shape)} but values has {tuple(shape)}: all [T, B] "
                "inputs must agree")
    if bootstrap_value.shape != shape[1:]:
        raise ValueError(
            f"bootstrap_value must have shape [B] = ({shape[1]},), got "
            f"{tuple(bootstrap_value.shape)}")
    for name in ("behavior_log_probs", "target_log_probs"):
        t = named[name]
        if not torch.isfinite(t).all():
            bad = int((~torch.isfinite(t)).sum())
            raise ValueError(f"{name} has {bad} non-finite entries: log-probs must be finite")


def vtrace(behavior_log_probs: torch.Tensor, target_log_probs: torch.Tensor,
           rewards: torch.Tensor, discounts: torch.Tensor, values: torch.Tensor,
           bootstrap_value: torch.Tensor, clip_rho_threshold: float | None = 1.0,
           clip_pg_rho_threshold: float | None = 1.0, clip_c_threshold: float | None = 1.0,
           lambda_: float = 1.0) -> VTraceReturns:
    """V-trace targets and policy-gradient advantages, vectorised over the batch.

    Parameters
    ----------
    behavior_log_probs, target_log_probs : torch.Tensor, shape [T, B]
        log mu(a_t|x_t) and log pi(a_t|x_t) of the actions taken. Must be finite.
    rewards, discounts, values : torch.Tensor, shape [T, B]
        r_t, gamma_t (0 at a termination) and V(x_t).
    bootstrap_value : torch.Tensor, shape [B]
        V(x_T).
    clip_rho_threshold, clip_pg_rho_threshold, clip_c_threshold : float or None
        rho_bar, rho_bar_pg and c_bar (> 0); None leaves that ratio unclipped.
    lambda_ : float
        Trace coefficient in [0, 1].

    Returns
    -------
    VTraceReturns
        ``(vs, pg_advantages)``, both [T, B], in the inputs' dtype, with no gradient.

    Raises
    ------
    ValueError
        For shapes that disagree, T or B of 0, non-finite log-probs, thresholds <= 0, or
        ``lambda_`` outside [0, 1].
    """
    import torch

    rho_bar = _check_threshold("clip_rho_threshold", clip_rho_threshold)
    pg_bar = _check_threshold("clip_pg_rho_threshold", clip_pg_rho_threshold)
    c_bar = _check_threshold("clip_c_threshold", clip_c_threshold)
    try:
        lam = float(lambda_)
    except (TypeError, ValueError):
        raise ValueError(f"lambda_ must be a number in [0, 1], got {lambda_!r}") from None
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lambda_ must be a number in [0, 1], got {lambda_!r}")
    _check_inputs(behavior_log_probs, target_log_probs, rewards, discounts, values,
                  bootstrap_value)

    with torch.no_grad():
        ratios = torch.exp(target_log_probs - behavior_log_probs)
        rhos = ratios if rho_bar is None else torch.clamp(ratios, max=rho_bar)
        cs = lam * (ratios if c_bar is None else torch.clamp(ratios, max=c_bar))
        # V(x_{t+1}) for every t: the next value, and V(x_T) after the last step
        next_values = torch.cat([values[1:], bootstrap_value.unsqueeze(0)], dim=0)
        deltas = rhos * (rewards + discounts * next_values - values)

        # backward recursion on the corrections v_s - V(x_s); v_T - V(x_T) = 0
        corrections = torch.empty_like(values)
        acc = torch.zeros_like(bootstrap_value)
        for s in range(values.shape[0] - 1, -1, -1):
            acc = deltas[s] + discounts[s] * cs[s] * acc
            corrections[s] = acc
        vs = values + corrections

        next_vs = torch.cat([vs[1:], bootstrap_value.unsqueeze(0)], dim=0)
        pg_rhos = ratios if pg_bar is None else torch.clamp(ratios, max=pg_bar)
        pg_advantages = pg_rhos * (rewards + discounts * next_vs - values)
    return VTraceReturns(vs.detach(), pg_advantages.detach())
