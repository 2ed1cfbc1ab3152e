"""Torch twins of :mod:`esnb.rl.apex.nets`: each network is a :class:`~esnb.nets.FlatModule`
(one flat parameter, ``params()``/``load(flat)``) whose forward is
:func:`esnb.nets.torch_mlp.forward` over views of its spec's layout, so the learner
differentiates exactly the vector the numpy forwards read.

Initialisation is PyTorch's ``nn.Linear`` default (``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``)
drawn from an explicit ``torch.Generator``, part after part in layout order; DPG's output
layers start in ``U(-3e-3, 3e-3)`` as in DDPG (Lillicrap et al. 2016), so early actions and
values are near zero.
"""

from __future__ import annotations

import numpy as np
import torch

from esnb.nets import Layout, torch_mlp
from esnb.nets.conv import ConvTorso
from esnb.nets.torch_mlp import FlatModule
from esnb.rl.apex.nets import DPGSpec, QNetSpec
from esnb.rl.apex.torch_q import q_forward

#: DDPG's bound of the output layers' initial weights and biases
DPG_LAST_BOUND = 3e-3


def _init(layout: Layout, generator: torch.Generator, last_bound: dict | None = None
                ) -> torch.Tensor:
    """Every part's :func:`~esnb.nets.torch_mlp.init_fan_in`, in layout order (``last_bound``:
    the output layer's bound of the parts named in it); a conv torso's
    :meth:`~esnb.nets.conv.ConvTorso.init` (torch's default bounds too) from a numpy
    generator seeded by ``generator``."""
    last_bound = last_bound or {}

    def part(name, p):
        if isinstance(p, ConvTorso):
            seed = int(torch.randint(0, 2**62, (1,), generator=generator))
            return torch.from_numpy(p.init(np.random.default_rng(seed)))
        return torch_mlp.init_fan_in(p, generator, last_bound.get(name))

    return torch.cat([part(name, p) for name, p in layout.parts])


class QNetwork(FlatModule):
    """Dueling (or plain) Q-network of a :class:`~esnb.rl.apex.nets.QNetSpec`."""

    def __init__(self, spec: QNetSpec, generator: torch.Generator):
        super().__init__(spec.num_params, _init(spec.layout, generator))
        self.spec = spec

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return q_forward(self.spec, self.flat, obs)


class DPGActor(FlatModule):
    """Deterministic policy ``s -> a`` squashed into the action bounds (the ``actor`` part of
    the spec's layout)."""

    def __init__(self, spec: DPGSpec, generator: torch.Generator):
        mlp = spec.layout["actor"]
        super().__init__(mlp.num_params,
                         torch_mlp.init_fan_in(mlp, generator, DPG_LAST_BOUND))
        self.spec, self.mlp = spec, mlp
        low = torch.tensor(spec.low, dtype=torch.float32)
        high = torch.tensor(spec.high, dtype=torch.float32)
        self.register_buffer("low", low, persistent=False)
        self.register_buffer("half_range", 0.5 * (high - low), persistent=False)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        y = torch_mlp.forward(self.mlp, self.flat, obs)
        return self.low + (y + 1.0) * self.half_range


class DPGCritic(FlatModule):
    """``Q(s, a)``: observation in the first layer, action joining at the second (the spec's
    ``critic_layout``)."""

    def __init__(self, spec: DPGSpec, generator: torch.Generator):
        layout = spec.critic_layout
        super().__init__(layout.num_params,
                         _init(layout, generator, {"critic_out": DPG_LAST_BOUND}))
        self.spec, self.layout, self.mlps = spec, layout, dict(layout.parts)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        p, mlp = torch_mlp.split(self.layout, self.flat), self.mlps
        h = torch_mlp.forward(mlp["critic_in"], p["critic_in"], obs)
        q = torch_mlp.forward(mlp["critic_out"], p["critic_out"], torch.cat([h, action], dim=1))
        return q.squeeze(1)
