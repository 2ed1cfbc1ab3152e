"""The canonical torch MLP policy: the torch twin (:mod:`esnb.nets.torch_mlp`) of a
:class:`~esnb.policies.PolicySpec`, over views of one flat float32 vector."""

from __future__ import annotations

import numpy as np
import torch

from esnb.nets.torch_mlp import FlatModule, forward
from esnb.policies.spec import PolicySpec


class MLPPolicy(FlatModule):
    """An MLP whose weights and biases are views of ``self.flat``.

    Parameters
    ----------
    spec : PolicySpec
        Sizes, activation and action kind.
    flat : array-like, optional
        Initial flat parameters (copied); zeros when omitted.

    Notes
    -----
    ``policy.flat`` is the only ``nn.Parameter``: optimisers, ES updates and checkpoints all
    act on one vector, and :meth:`numpy_policy` runs the same function without torch.
    """

    def __init__(self, spec: PolicySpec, flat=None):
        super().__init__(spec.num_params, flat)
        self.spec = spec
        self.register_buffer("obs_mean", torch.zeros(spec.obs_dim))
        self.register_buffer("obs_std", torch.ones(spec.obs_dim))
        self._normalise = False

    def set_obs_norm(self, mean, std) -> None:
        """Normalise observations as ``clip((obs - mean) / std, -obs_clip, obs_clip)``."""
        self.obs_mean.copy_(torch.as_tensor(np.asarray(mean, dtype=np.float32)))
        self.obs_std.copy_(torch.as_tensor(np.asarray(std, dtype=np.float32)))
        self._normalise = True

    def layers(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """``(weight [out, in], bias [out])`` views of ``flat`` for every layer."""
        return self.spec.mlp.layers(self.flat)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs.to(torch.float32)
        if self._normalise:
            c = self.spec.obs_clip
            x = torch.clamp((x - self.obs_mean) / self.obs_std, -c, c)
        return forward(self.spec.mlp, self.flat, x)

    @torch.no_grad()
    def act(self, obs) -> np.ndarray:
        """Actions for a batch (or one) of observations, as the numpy path computes them."""
        y = self.forward(torch.as_tensor(np.asarray(obs)))
        if self.spec.discrete:
            return y.argmax(dim=-1).numpy()
        if self.spec.high:
            low = torch.tensor(self.spec.low, dtype=torch.float32)
            high = torch.tensor(self.spec.high, dtype=torch.float32)
            y = torch.maximum(torch.minimum(y, high), low)
        return y.numpy()

    def numpy_policy(self):
        """A :class:`NumpyPolicy` over the same memory (no copy of the parameters)."""
        from esnb.policies.numpy_mlp import NumpyPolicy

        mean = self.obs_mean.numpy() if self._normalise else None
        std = self.obs_std.numpy() if self._normalise else None
        return NumpyPolicy(self.spec, self.flat.detach().numpy(), mean, std)
