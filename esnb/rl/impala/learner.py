"""IMPALA's learner (Espeholt et al. 2018, arXiv 1802.01561): the torch actor-critic, the loss
and one optimiser step on a batch of unrolls.

One learner step, top to bottom (:meth:`ImpalaLearner.step`):

1. one forward pass over every observation of the batch: x_0..x_T of each unroll, plus the
   final observations cut off by a time limit inside the unrolls;
2. target log-probs log pi(a_t|x_t) and entropies of the actions the actors took;
3. rewards and discounts: rewards clipped (``reward_clipping``: none, the paper's [-1, 1],
   or the released code's ``soft_asymmetric``), then scaled; gamma_t = gamma, or 0 where the
   episode ended; at a time-limit truncation ``gamma * V(x_final)`` (current network, no
   gradient) is added to r_t, so the truncation bootstraps instead of terminating (see
   :mod:`esnb.rl.impala.vtrace`);
4. V-trace targets v_s and advantages A_s (no gradient), or, with ``correction="none"``,
   the same formulas with rho = c = 1 forced (target log-probs := behaviour log-probs);
5. loss = policy gradient ``-sum log pi(a_s|x_s) A_s`` + baseline
   ``baseline_cost * 1/2 sum (v_s - V(x_s))^2`` + entropy ``-entropy_cost * sum H(pi(.|x_s))``
   (sums over T and B, as the reference implementation);
6. clip the gradient's global norm, one optimiser step.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import torch
from torch import nn

from esnb.device import resolve_device
from esnb.envs.obs_stats import ObsStats
from esnb.nets.torch_mlp import ObsNormModule, forward, split, to_numpy
from esnb.rl.constants import CORRECTIONS, REWARD_CLIPPINGS
from esnb.rl.constants import IMPALA_OPTIMIZERS as OPTIMIZERS
from esnb.rl.impala.actor_critic import _HALF_LOG_2PI, LOG_STD_RANGE, ActorCriticSpec
from esnb.rl.impala.torch_ac import frame_forward
from esnb.rl.impala.unrolls import UnrollBatch
from esnb.rl.impala.vtrace import vtrace
from esnb.rl.optim import Adam, RMSprop, RMSpropTF


class ActorCritic(ObsNormModule):
    """The learner's network: ``forward(obs) -> (policy outputs, values)``.

    ``self.flat`` (:attr:`~esnb.rl.impala.actor_critic.ActorCriticSpec.layout`) is the only
    parameter: one optimiser, one checkpoint array, and the actors' vector is a slice of it.
    Observations are normalised as ES's policy does (:class:`~esnb.nets.torch_mlp.ObsNormModule`);
    frames (a conv torso) are not normalised but scaled inside the torso, and go through
    :func:`esnb.rl.impala.torch_ac.frame_forward`, the function actors run.
    """

    def __init__(self, spec: ActorCriticSpec, flat=None):
        super().__init__(spec.num_params, spec.obs_dim, spec.policy.obs_clip, flat)
        self.spec = spec

    def forward(self, obs: torch.Tensor):
        """``(logits or Gaussian means [N, act_dim], values [N])`` of ``obs`` ``[N, obs_dim]``."""
        if self.spec.torso is not None:
            return frame_forward(self.spec, self.spec.layout, self.flat, obs)
        x = self.inputs(obs)
        # one split of the whole vector (a slice per part would copy the gradient twice)
        parts = split(self.spec.layout, self.flat)
        return (forward(self.spec.policy.mlp, parts["policy"], x),
                forward(self.spec.value.mlp, parts["value"], x)[:, 0])

    def log_std(self) -> torch.Tensor:
        """Clamped log-stds of a Gaussian policy (as the actors clamp them)."""
        return torch.clamp(self.spec.layout.split(self.flat)["log_std"], *LOG_STD_RANGE)

    def log_prob_entropy(self, outputs: torch.Tensor, actions: torch.Tensor):
        """``(log pi(a|x) [N], entropy [N])`` of ``actions`` under these policy outputs."""
        if self.spec.discrete:
            logp_all = torch.log_softmax(outputs, dim=-1)
            logp = logp_all.gather(-1, actions.long().unsqueeze(-1))[:, 0]
            return logp, -(logp_all.exp() * logp_all).sum(-1)
        log_std = self.log_std()
        z = (actions - outputs) / log_std.exp()
        logp = (-0.5 * z.square() - log_std - _HALF_LOG_2PI).sum(-1)
        entropy = (log_std + 0.5 + _HALF_LOG_2PI).sum().expand(outputs.shape[0])
        return logp, entropy


@dataclass(frozen=True)
class LossConfig:
    """The loss's coefficients: one snapshot of the runner's controls, with their names (no
    defaults here: :class:`esnb.runners.impala.config.ImpalaConfig` owns them)."""

    discount: float
    baseline_cost: float
    entropy_cost: float
    clip_rho_threshold: float
    clip_pg_rho_threshold: float
    clip_c_threshold: float
    vtrace_lambda: float
    correction: str
    reward_scale: float
    reward_clipping: str

    @classmethod
    def of(cls, values: Any, **changes: Any) -> LossConfig:
        """The fields of ``values`` (settings or a control snapshot) that the loss reads, by
        name, then ``changes``."""
        return cls(**{**{f.name: getattr(values, f.name) for f in fields(cls)}, **changes})


def clip_rewards(rewards: torch.Tensor, mode: str) -> torch.Tensor:
    """Rewards as the loss sees them (``mode`` one of :data:`REWARD_CLIPPINGS`).

    ``abs_one`` clips to [-1, 1] (the paper's Atari and DMLab runs); ``soft_asymmetric``
    squashes ``5 tanh(r / 5)`` and scales negative rewards by 0.3 (the released code's
    DMLab-30 choice, ``scalable_agent/experiment.py``); ``none`` leaves them.
    """
    if mode == "none":
        return rewards
    if mode == "abs_one":
        return torch.clamp(rewards, -1.0, 1.0)
    if mode == "soft_asymmetric":
        squeezed = torch.tanh(rewards / 5.0)
        return torch.where(rewards < 0, 0.3 * squeezed, squeezed) * 5.0
    raise ValueError(f"reward_clipping must be one of {REWARD_CLIPPINGS}, got {mode!r}")


def vtrace_inputs(model: ActorCritic, batch: UnrollBatch, cfg: LossConfig) -> dict:
    """The network's view of a batch, and V-trace's inputs (steps 1-3 above).

    Returns
    -------
    dict of torch.Tensor
        ``logp`` and ``entropy`` [T, B] (differentiable), ``values`` [T+1, B]
        (differentiable; row T is the bootstrap value), and, without gradient, ``behaviour``
        [T, B], ``target`` [T, B] (= behaviour with ``correction="none"``), ``rewards`` [T, B]
        (clipped, scaled, truncations bootstrapped) and ``discounts`` [T, B].
    """
    if cfg.correction not in CORRECTIONS:
        raise ValueError(f"correction must be one of {CORRECTIONS}, got {cfg.correction!r}")
    T, B = batch.T, batch.B
    dev = model.flat.device  # the batch goes where the learner computes

    def tensor(a, dtype=None):
        return torch.from_numpy(np.ascontiguousarray(a, dtype=dtype)).to(dev)

    obs = tensor(batch.obs).reshape((T + 1) * B, -1)
    extra = tensor(batch.trunc_obs, batch.obs.dtype)  # uint8 frames stay uint8 to the torso
    outputs, values_all = model(torch.cat([obs, extra]) if len(extra) else obs)
    n = (T + 1) * B
    actions = tensor(batch.actions)
    actions = actions.reshape(T * B) if model.spec.discrete else actions.reshape(T * B, -1)
    logp, entropy = model.log_prob_entropy(outputs[:T * B], actions)

    rewards = tensor(batch.rewards, np.float32)
    rewards = clip_rewards(rewards, cfg.reward_clipping) * cfg.reward_scale
    ended = tensor(batch.terminated | batch.truncated)
    discounts = torch.where(ended, 0.0, cfg.discount).to(torch.float32)
    if len(extra):  # bootstrap time-limit truncations from the value of the cut-off state
        t, b = tensor(batch.trunc_t), tensor(batch.trunc_b)
        rewards = rewards.index_put((t, b), cfg.discount * values_all[n:].detach(),
                                    accumulate=True)
    behaviour = tensor(batch.behaviour_log_probs, np.float32)
    logp = logp.view(T, B)
    return {"logp": logp, "entropy": entropy.view(T, B), "values": values_all[:n].view(T + 1, B),
            "behaviour": behaviour,
            "target": logp.detach() if cfg.correction == "vtrace" else behaviour,
            "rewards": rewards, "discounts": discounts}


def impala_loss(model: ActorCritic, batch: UnrollBatch, cfg: LossConfig):
    """The IMPALA loss of one batch and its diagnostics.

    Returns
    -------
    loss : torch.Tensor
        Scalar, differentiable w.r.t. ``model.flat``.
    stats : dict of float
        ``pg_loss baseline_loss entropy rho_mean rho_clipped log_ratio_abs value_mean
        value_std vs_mean advantage_mean``.
    """
    x = vtrace_inputs(model, batch, cfg)
    T = batch.T
    logp, entropy, values, behaviour = x["logp"], x["entropy"], x["values"], x["behaviour"]
    vt = vtrace(behaviour, x["target"], x["rewards"], x["discounts"], values[:T].detach(),
                values[T].detach(), clip_rho_threshold=cfg.clip_rho_threshold,
                clip_pg_rho_threshold=cfg.clip_pg_rho_threshold,
                clip_c_threshold=cfg.clip_c_threshold, lambda_=cfg.vtrace_lambda)

    pg_loss = -(logp * vt.pg_advantages).sum()
    baseline_loss = cfg.baseline_cost * 0.5 * (vt.vs - values[:T]).square().sum()
    entropy_loss = -cfg.entropy_cost * entropy.sum()
    loss = pg_loss + baseline_loss + entropy_loss

    with torch.no_grad():
        log_ratio = logp.detach() - behaviour
        rho = log_ratio.exp()
        stats = {
            "pg_loss": float(pg_loss), "baseline_loss": float(baseline_loss),
            "entropy": float(entropy.detach().mean()), "rho_mean": float(rho.mean()),
            "rho_clipped": float((rho > cfg.clip_rho_threshold).float().mean()),
            "log_ratio_abs": float(log_ratio.abs().mean()),
            "value_mean": float(values[:T].detach().mean()), "vs_mean": float(vt.vs.mean()),
            # 0 when the network no longer tells the batch's states apart (a conv torso whose
            # units all gave up on the frames: the policy is a constant too, for good)
            "value_std": float(values[:T].detach().std(correction=0)),
            "advantage_mean": float(vt.pg_advantages.mean()),
        }
    return loss, stats


class ImpalaLearner:
    """The torch side of IMPALA: network, optimiser, observation statistics, versions.

    Parameters
    ----------
    spec : ActorCriticSpec
    flat : ndarray of float32
        Initial parameters (:func:`~esnb.rl.impala.actor_critic.init_actor_critic`).
    lr : float
        Initial learning rate (set per step by :meth:`step`).
    optimizer : {"adam", "rmsprop", "rmsprop_tf"}
        Adam (default; eps 1e-5), torch's RMSProp, or the reference's RMSProp with TensorFlow
        1's semantics (:class:`~esnb.rl.optim.RMSpropTF`; no momentum; the reference sums its
        loss over T x B, so gradients are large and its epsilon is large too).
    obs_norm : bool
        Keep running observation statistics and normalise with them.
    rmsprop_eps, rmsprop_decay : float
        RMSProp's epsilon and decay (the released code: 0.1 and 0.99).
    device : str or torch.device
        Where the network, the optimiser's state and the batches live (``auto``: CUDA when
        available); the actors' payload and the state are CPU numpy.

    Notes
    -----
    ``torch.optim.RMSprop`` is not TensorFlow 1's RMSProp at the same epsilon: TensorFlow
    divides by ``sqrt(ms + eps)`` and starts ``ms`` at one, torch divides by ``sqrt(ms) + eps``
    and starts it at zero. For small second moments TF's epsilon acts like torch's
    ``sqrt(eps)``: the paper's 0.1 is about torch's 0.32, and torch's 0.1 about TF's 0.01.
    ``rmsprop_eps`` is torch's for ``"rmsprop"`` and TensorFlow's for ``"rmsprop_tf"``.
    """

    def __init__(self, spec: ActorCriticSpec, flat: np.ndarray, *, lr: float, optimizer: str,
                 obs_norm: bool, rmsprop_eps: float, rmsprop_decay: float, device="cpu"):
        if optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")
        self.spec = spec
        self.device = resolve_device(device)
        self.model = ActorCritic(spec, flat).to(self.device)
        if optimizer == "adam":
            self.opt = Adam(self.model.parameters(), lr=lr, eps=1e-5)
        elif optimizer == "rmsprop_tf":  # the released code's: TF1 semantics, eps under the root
            self.opt = RMSpropTF(self.model.parameters(), lr=lr, decay=rmsprop_decay,
                                 eps=rmsprop_eps)
        else:
            self.opt = RMSprop(self.model.parameters(), lr=lr, alpha=rmsprop_decay,
                               eps=rmsprop_eps)
        self.obs_norm = bool(obs_norm)
        self.obs_stats = ObsStats(spec.obs_dim)
        self.version = 0  # bumped by every optimiser step: actors tag unrolls with it
        if self.obs_norm:
            self.model.set_obs_norm(self.obs_stats.mean, self.obs_stats.std)

    @property
    def flat(self) -> np.ndarray:
        """A copy of the flat parameters."""
        return self.model.params()

    def actor_payload(self) -> dict:
        """What actors need: version, actor parameters, observation normalisation."""
        mean = std = None
        if self.obs_norm:
            mean = self.obs_stats.mean.astype(np.float32)
            std = self.obs_stats.std.astype(np.float32)
        return {"version": self.version, "params": self.spec.actor_params(self.flat),
                "obs_mean": mean, "obs_std": std}

    def step(self, batch: UnrollBatch, cfg: LossConfig, lr: float,
             max_grad_norm: float = 40.0) -> dict:
        """One optimiser step on ``batch``; returns the loss diagnostics and ``grad_norm``."""
        for group in self.opt.param_groups:
            group["lr"] = float(lr)
        batch.check(self.spec)
        loss, stats = impala_loss(self.model, batch, cfg)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        if max_grad_norm > 0:
            grad_norm = nn.utils.clip_grad_norm_(self.model.parameters(), max_grad_norm)
        else:
            grad_norm = self.model.flat.grad.norm()
        self.opt.step()
        self.version += 1
        if self.obs_norm:  # after the step: the step used the statistics the actors had
            self.obs_stats.add_observations(batch.obs[:-1].reshape(-1, self.spec.obs_dim))
            self.model.set_obs_norm(self.obs_stats.mean, self.obs_stats.std)
        stats["grad_norm"] = float(grad_norm)
        stats["loss"] = float(loss.detach())
        return stats

    # -- checkpoints -------------------------------------------------------------------------
    def state_dict(self) -> tuple[dict, dict]:
        """``(meta, arrays)``: parameters, optimiser moments, observation sums, version."""
        arrays = {"flat": self.flat}
        meta = {"version": self.version}
        state = self.opt.state.get(self.model.flat, {})
        for k, v in state.items():
            if torch.is_tensor(v) and v.numel() > 1:
                arrays[f"opt_{k}"] = to_numpy(v)  # CPU: a checkpoint fits any device
            else:
                meta[f"opt_{k}"] = float(v)
        obs = self.obs_stats.state_dict()
        arrays.update(obs_sum=obs["sum"], obs_sumsq=obs["sumsq"])
        meta["obs_count"] = obs["count"]
        return meta, arrays

    def load_state_dict(self, meta: dict, arrays: dict) -> None:
        flat = np.asarray(arrays["flat"], dtype=np.float32)
        if flat.shape != (self.spec.num_params,):
            raise ValueError(f"checkpoint has {flat.shape[0]} parameters, this network "
                             f"{self.spec.num_params}")
        self.model.load(flat)
        state = {}
        for k, v in arrays.items():
            if k.startswith("opt_"):
                state[k[4:]] = torch.from_numpy(np.array(v)).to(self.device)
        for k, v in meta.items():
            if k.startswith("opt_"):
                state[k[4:]] = torch.tensor(float(v))
        if state:
            self.opt.state[self.model.flat] = state
        self.obs_stats.load_state_dict({"sum": arrays["obs_sum"], "sumsq": arrays["obs_sumsq"],
                                        "count": meta["obs_count"]})
        if self.obs_norm:
            self.model.set_obs_norm(self.obs_stats.mean, self.obs_stats.std)
        self.version = int(meta["version"])
