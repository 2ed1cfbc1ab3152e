"""TD3's networks in torch: the actor over one flat vector (:class:`TD3Actor`) and the twin
critic (:class:`TwinCritic`), as Pourchot and Sigaud 2019 (CEM-RL) and Lee et al. 2020
(AES-RL) size them: actor 400-300 tanh with a tanh output scaled to the action bounds; twin
critics 400-300 leaky ReLU on ``[s, a]``. The actor's numpy side is :mod:`esnb.rl.td3.actor`.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from esnb.nets import MLP
from esnb.nets.policy import PolicySpec
from esnb.nets.torch_mlp import FlatModule, forward
from esnb.rl.td3.actor import actor_mlp
from esnb.rl.td3.config import TD3Config


class TD3Actor(FlatModule):
    """The actor in torch over one flat parameter vector (``self.flat``):
    ``mid + half * actor_mlp(obs)``."""

    def __init__(self, spec: PolicySpec, flat=None):
        super().__init__(spec.num_params, flat)
        self.spec = spec
        self.mlp = actor_mlp(spec)
        high = torch.tensor(spec.high, dtype=torch.float32)
        low = torch.tensor(spec.low, dtype=torch.float32)
        # "half" would shadow nn.Module.half()
        self.register_buffer("a_mid", (high + low) / 2, persistent=False)
        self.register_buffer("a_half", (high - low) / 2, persistent=False)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.a_mid + self.a_half * forward(self.mlp, self.flat, obs)


#: twin critics up to this width run as one batched pair (measured: a few % faster than the
#: heads one after the other at 64-64 and 128-128, 5-10% slower at 256-256 and 400-300)
BATCHED_MAX = 128


def _init_in_out(mlp: MLP, generator: torch.Generator | None) -> torch.Tensor:
    """``nn.Linear``'s default init with each weight drawn as an ``[in, out]`` matrix (the
    order this critic drew in when it stored ``x @ W`` weights: seeded runs keep their
    numbers), laid out ``[out, in]``."""
    parts = []
    for o, i in mlp.layer_shapes:
        bound = 1.0 / math.sqrt(i)
        parts.append(((torch.rand(i, o, generator=generator) * 2 - 1) * bound).T.reshape(-1))
        parts.append((torch.rand(o, generator=generator) * 2 - 1) * bound)
    return torch.cat(parts)


class TwinCritic(nn.Module):
    """Two Q-networks ``[s, a] -> hidden... -> 1`` (leaky ReLU; the paper's 400-300): a
    population of two of one :class:`~esnb.nets.MLP` (``self.mlp``), Q1's flat vector then
    Q2's in one :class:`~esnb.nets.FlatModule` (``self.pair``).

    Small critics (width <= :data:`BATCHED_MAX`) run the pair as a population (one
    ``baddbmm`` per layer instead of two small matmuls: they are launch-bound on CPU); wider
    ones run the heads one after the other.

    Parameters
    ----------
    obs_dim, act_dim : int
    hidden : tuple of int
        Hidden sizes (``TD3Config.critic_hidden``).
    slope : float
        Negative slope of the leaky ReLU (``TD3Config.leaky_slope``).
    generator : torch.Generator, optional
        Draws the initial weights (torch's global one if None) unless ``flat`` is given.
    flat : array, optional
        Both heads' weights (published weights).
    """

    def __init__(self, obs_dim: int, act_dim: int, hidden: tuple[int, ...], slope: float,
                 generator: torch.Generator | None = None, flat=None):
        super().__init__()
        self.mlp = MLP((obs_dim + act_dim, *hidden, 1), activation="leaky_relu", slope=slope)
        self.batched = max(self.mlp.sizes[1:-1]) <= BATCHED_MAX
        if flat is None:
            flat = torch.cat([_init_in_out(self.mlp, generator) for _head in range(2)])
        self.pair = FlatModule(2 * self.mlp.num_params, flat)

    def heads(self) -> torch.Tensor:
        """The parameters as ``[2, P]`` (a view: row 0 is Q1, row 1 is Q2)."""
        return self.pair.flat.view(2, self.mlp.num_params)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """Both Q values, ``[2, B]``."""
        x = torch.cat([obs, action], dim=-1)
        w = self.heads()
        if self.batched:
            return forward(self.mlp, w, x).squeeze(-1)
        q1, q2 = w.unbind()  # one [2, P] gradient for both heads
        return torch.stack([forward(self.mlp, q1, x), forward(self.mlp, q2, x)]).squeeze(-1)

    def q1(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """The first critic only, ``[B]`` (what the actor ascends)."""
        return forward(self.mlp, self.heads()[0], torch.cat([obs, action], dim=-1)).squeeze(-1)

    def flat(self) -> np.ndarray:
        return self.pair.params()

    def load_flat(self, flat) -> None:
        self.pair.load(flat)


def critic_from_flat(spec: PolicySpec, config: TD3Config, flat) -> TwinCritic:
    """A frozen :class:`TwinCritic` holding published weights (for actor training)."""
    critic = TwinCritic(spec.obs_dim, spec.act_dim, config.critic_hidden, config.leaky_slope,
                        flat=flat)
    critic.requires_grad_(False)
    return critic
