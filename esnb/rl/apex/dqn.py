"""Ape-X DQN's learner: double Q-learning with n-step targets on a dueling network.

Horgan et al. 2018, "Distributed Prioritized Experience Replay", section 3.1: the loss of a
sampled transition ``(s_t, a_t, G, s_{t+n}, discount)`` is

    l = 1/2 (G + discount * q(s_{t+n}, argmax_a q(s_{t+n}, a; theta); theta^-) - q(s_t, a_t))^2

with ``G`` the n-step discounted return and ``discount = gamma^k`` (``k <= n`` steps actually
taken; 0 after a termination, so nothing is bootstrapped then). Double Q-learning: van Hasselt
et al. 2016; dueling network: Wang et al. 2016. Importance weights multiply each item's loss,
gradient norms are clipped (40 in the paper), the target network ``theta^-`` is a copy of the
online one made every ``target_period`` updates, and ``|TD error|`` goes back to the replay as
the new priorities. The paper's optimizer is centred RMSProp (lr 0.00025/4, decay 0.95,
epsilon 1.5e-7, TensorFlow's semantics: :class:`esnb.rl.optim.CenteredRMSprop`); Adam is the
default here, for small control tasks.

The transitions are dicts of arrays with fields ``obs``, ``action``, ``reward`` (the n-step
return), ``next_obs`` and ``discount``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from esnb.device import resolve_device, to_device
from esnb.rl.apex.nets import QNetSpec, dqn_td_errors, transition_spec  # noqa: F401 (re-exported)
from esnb.rl.apex.torch_nets import QNetwork
from esnb.rl.constants import DQN_LOSSES as LOSSES
from esnb.rl.constants import DQN_OPTIMIZERS as OPTIMIZERS
from esnb.rl.constants import PAPER_RMSPROP
from esnb.rl.optim import (
    Adam,
    CenteredRMSprop,
    Optimizer,
    load_optimizer_arrays,
    optimizer_arrays,
    retune,
    set_lr,
)


def make_optimizer(name: str, params, lr: float) -> Optimizer:
    """``"adam"`` or ``"rmsprop_centered"`` (the paper's, TensorFlow semantics)."""
    if name == "adam":
        return Adam(params, lr=lr)
    if name == "rmsprop_centered":
        return CenteredRMSprop(params, lr=lr, **PAPER_RMSPROP)
    raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {name!r}")


class DQNLearner:
    """The online and target networks, the optimizer, and one update per sampled batch.

    Parameters
    ----------
    spec : QNetSpec
        Network sizes.
    lr : float
        Step size (the paper: 0.00025/4 with centred RMSProp). Overridable per update (a live
        control).
    grad_clip : float
        Global gradient-norm clip (Ape-X: 40).
    target_period : int
        Updates between copies of the online network into the target network.
    loss : {"huber", "mse"}
        Per-item loss before the importance weights: Huber (delta 1, as DQN) or the paper's
        squared error ``1/2 delta^2``.
    double : bool
        Double Q-learning (Ape-X); False: ``max_a`` of the target network.
    optimizer : {"adam", "rmsprop_centered"}
        Adam, or the paper's centred RMSProp (see :func:`make_optimizer`).
    seed : int
        Seeds the initial parameters (a private ``torch.Generator``, on the CPU: the same
        initial parameters on every device).
    device : str or torch.device
        Where the networks, the optimizer's state and the batches live (``auto``: CUDA when
        available); :meth:`params`, TD errors and the state come back as CPU numpy.
    """

    def __init__(self, spec: QNetSpec, *, lr: float, grad_clip: float, target_period: int,
                 loss: str, double: bool, optimizer: str, seed: int, device="cpu"):
        if loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
        if not grad_clip > 0:
            raise ValueError(f"grad_clip must be > 0, got {grad_clip!r}")
        if int(target_period) < 1:
            raise ValueError(f"target_period must be >= 1, got {target_period!r}")
        self.spec = spec
        self.device = resolve_device(device)
        gen = torch.Generator().manual_seed(int(seed))
        self.online = QNetwork(spec, gen).to(self.device)
        self.target = QNetwork(spec, gen).to(self.device)
        self.target.load(self.online.params())
        self.target.requires_grad_(False)
        self.opt = make_optimizer(optimizer, self.online.parameters(), lr)
        self.optimizer = optimizer
        self.lr = float(lr)
        self.grad_clip = float(grad_clip)
        self.target_period = int(target_period)
        self.loss = loss
        self.double = bool(double)
        self.steps = 0
        self.last_target_copy = 0

    def params(self) -> np.ndarray:
        """The online network as one float32 vector (what actors load)."""
        return self.online.params()

    def q(self, obs) -> np.ndarray:
        with torch.no_grad():
            x = torch.as_tensor(np.asarray(obs, dtype=np.float32)).to(self.device)
            return self.online(x).cpu().numpy()

    def update(self, batch: dict, weights, *, lr: float | None = None,
               target_period: int | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """One gradient step on a sampled batch.

        Returns
        -------
        td : ndarray of float64
            TD errors of the batch before the step (for the new priorities).
        info : dict
            ``loss``, ``q_mean``, ``grad_norm`` and whether the target network was copied.
        """
        self.lr = retune(self.opt, lr, self.lr)
        if target_period is not None:
            self.target_period = int(target_period)
        # frames travel as the replay holds them (uint8: a quarter of the bytes to a GPU);
        # the conv torso scales them on the device
        frames = np.uint8 if self.spec.torso is not None else np.float32
        obs, nxt = (to_device(batch[k], self.device, frames) for k in ("obs", "next_obs"))
        rew, disc = (to_device(batch[k], self.device) for k in ("reward", "discount"))
        act = to_device(batch["action"], self.device, np.int64)
        w = to_device(weights, self.device)

        n = len(obs)
        if self.double:
            # one forward of the online net for s_t and s_{t+n}: small nets are overhead-bound
            q_both = self.online(torch.cat([obs, nxt]))
            q_all, q_next_online = q_both[:n], q_both[n:].detach()
        else:
            q_all = self.online(obs)
        q_sa = q_all.gather(1, act.view(-1, 1)).squeeze(1)
        with torch.no_grad():
            q_next_target = self.target(nxt)
            if self.double:
                a_next = q_next_online.argmax(dim=1, keepdim=True)
                q_next = q_next_target.gather(1, a_next).squeeze(1)
            else:
                q_next = q_next_target.max(dim=1).values
            target = rew + disc * q_next
        td = target - q_sa
        if self.loss == "huber":
            per_item = F.huber_loss(q_sa, target, reduction="none", delta=1.0)
        else:
            per_item = 0.5 * td.pow(2)
        loss = (w * per_item).mean()
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.online.parameters(), self.grad_clip)
        self.opt.step()
        self.steps += 1
        copied = False
        if self.steps - self.last_target_copy >= self.target_period:
            self.target.load(self.online.flat)  # on the device: no round trip to numpy
            self.last_target_copy = self.steps
            copied = True
        return td.detach().cpu().numpy().astype(np.float64), {
            "loss": float(loss.detach()), "q_mean": float(q_sa.detach().mean()),
            "grad_norm": float(grad_norm), "target_copied": copied}

    # -- checkpoints -------------------------------------------------------------------------
    def state_dict(self) -> tuple[dict, dict[str, np.ndarray]]:
        arrays = {"online": self.online.params(), "target": self.target.params(),
                  **optimizer_arrays(self.opt, self.online, "opt.")}
        meta = {"steps": self.steps, "last_target_copy": self.last_target_copy,
                "lr": self.lr, "target_period": self.target_period,
                "optimizer": self.optimizer}
        return meta, arrays

    def load_state_dict(self, meta: dict, arrays: dict[str, np.ndarray]) -> None:
        if meta.get("optimizer", "adam") != self.optimizer:
            raise ValueError(f"the state is of a {meta.get('optimizer')} learner, this one "
                             f"uses {self.optimizer}")
        self.online.load(arrays["online"])
        self.target.load(arrays["target"])
        load_optimizer_arrays(self.opt, self.online, arrays, "opt.")
        self.steps = int(meta["steps"])
        self.last_target_copy = int(meta["last_target_copy"])
        self.target_period = int(meta["target_period"])
        self.lr = float(meta["lr"])
        set_lr(self.opt, self.lr)
