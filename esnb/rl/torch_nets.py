"""Torch versions of :mod:`esnb.rl.nets`: parameters registered in the specs' order, so a
module's flat vector is exactly what the numpy forward passes read.

Initialisation is PyTorch's ``nn.Linear`` default (``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``)
drawn from an explicit ``torch.Generator``; DPG's output layers start in ``U(-3e-3, 3e-3)`` as
in DDPG (Lillicrap et al. 2016), so early actions and values are near zero.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from esnb.rl.nets import DPGSpec, QNetSpec


class _ParamNet(nn.Module):
    """Parameters as a ParameterList in a fixed order of shapes."""

    def __init__(self, shapes, generator: torch.Generator, last_scale: float | None = None):
        super().__init__()
        params = []
        for k in range(0, len(shapes), 2):
            w_shape, b_shape = shapes[k], shapes[k + 1]
            bound = 1.0 / math.sqrt(w_shape[1])
            if last_scale is not None and k == len(shapes) - 2:
                bound = last_scale
            w = (torch.rand(w_shape, generator=generator) * 2 - 1) * bound
            b = (torch.rand(b_shape, generator=generator) * 2 - 1) * bound
            params += [nn.Parameter(w), nn.Parameter(b)]
        self.params = nn.ParameterList(params)


def flat_params(module: nn.Module) -> np.ndarray:
    """All parameters of ``module`` as one float32 numpy vector (a copy)."""
    with torch.no_grad():
        return torch.cat([p.reshape(-1) for p in module.parameters()]).numpy().astype(
            np.float32, copy=True)


def load_flat(module: nn.Module, flat) -> None:
    """Copy a flat vector (from :func:`flat_params`) into ``module``'s parameters."""
    flat = torch.as_tensor(np.asarray(flat, dtype=np.float32))
    total = sum(p.numel() for p in module.parameters())
    if flat.ndim != 1 or flat.numel() != total:
        raise ValueError(f"expected {total} parameters, got shape {tuple(flat.shape)}")
    pos = 0
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(flat[pos:pos + p.numel()].view_as(p))
            pos += p.numel()


class QNetwork(_ParamNet):
    """Dueling (or plain) Q-network of a :class:`~esnb.rl.nets.QNetSpec`."""

    def __init__(self, spec: QNetSpec, generator: torch.Generator):
        super().__init__(spec.shapes(), generator)
        self.spec = spec
        self._act = F.relu if spec.activation == "relu" else torch.tanh

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        p = self.params
        x = obs
        n_torso = 2 * len(self.spec.hidden)
        for k in range(0, n_torso, 2):
            x = self._act(F.linear(x, p[k], p[k + 1]))
        if not self.spec.dueling:
            return F.linear(x, p[n_torso], p[n_torso + 1])
        v = F.linear(x, p[n_torso], p[n_torso + 1])
        a = F.linear(x, p[n_torso + 2], p[n_torso + 3])
        return v + a - a.mean(dim=1, keepdim=True)


class DPGActor(_ParamNet):
    """Deterministic policy ``s -> a`` squashed into the action bounds."""

    def __init__(self, spec: DPGSpec, generator: torch.Generator):
        super().__init__(spec.actor_shapes(), generator, last_scale=3e-3)
        self.spec = spec
        low = torch.tensor(spec.low, dtype=torch.float32)
        high = torch.tensor(spec.high, dtype=torch.float32)
        self.register_buffer("low", low, persistent=False)
        self.register_buffer("half_range", 0.5 * (high - low), persistent=False)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        p = self.params
        x = obs
        n = len(p)
        for k in range(0, n - 2, 2):
            x = torch.tanh(F.linear(x, p[k], p[k + 1]))
        y = torch.tanh(F.linear(x, p[n - 2], p[n - 1]))
        return self.low + (y + 1.0) * self.half_range


class DPGCritic(_ParamNet):
    """``Q(s, a)``: observation in the first layer, action joining at the second."""

    def __init__(self, spec: DPGSpec, generator: torch.Generator):
        super().__init__(spec.critic_shapes(), generator, last_scale=3e-3)
        self.spec = spec

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        p = self.params
        h = torch.tanh(F.linear(obs, p[0], p[1]))
        h = torch.tanh(F.linear(torch.cat([h, action], dim=1), p[2], p[3]))
        return F.linear(h, p[4], p[5]).squeeze(1)


def adam_state(opt: torch.optim.Adam, module: nn.Module) -> dict[str, np.ndarray]:
    """Adam's moments (flat, in parameter order) and step count, as arrays for a checkpoint."""
    m, v, steps = [], [], []
    for p in module.parameters():
        st = opt.state.get(p, {})
        if "exp_avg" in st:
            m.append(st["exp_avg"].reshape(-1))
            v.append(st["exp_avg_sq"].reshape(-1))
            steps.append(float(st["step"]))
        else:
            m.append(torch.zeros(p.numel()))
            v.append(torch.zeros(p.numel()))
            steps.append(0.0)
    return {"m": torch.cat(m).numpy().copy(), "v": torch.cat(v).numpy().copy(),
            "step": np.array(steps, dtype=np.float64)}


def load_adam_state(opt: torch.optim.Adam, module: nn.Module, state: dict) -> None:
    """Inverse of :func:`adam_state`."""
    params = list(module.parameters())
    m = torch.as_tensor(np.asarray(state["m"], dtype=np.float32))
    v = torch.as_tensor(np.asarray(state["v"], dtype=np.float32))
    steps = np.asarray(state["step"], dtype=np.float64)
    total = sum(p.numel() for p in params)
    if m.numel() != total or v.numel() != total or len(steps) != len(params):
        raise ValueError(f"optimizer state for {m.numel()} parameters in {len(steps)} tensors, "
                         f"this model has {total} in {len(params)}")
    pos = 0
    for p, s in zip(params, steps, strict=True):
        k = p.numel()
        if s > 0:
            opt.state[p] = {"step": torch.tensor(float(s)),
                            "exp_avg": m[pos:pos + k].view_as(p).clone(),
                            "exp_avg_sq": v[pos:pos + k].view_as(p).clone()}
        pos += k
