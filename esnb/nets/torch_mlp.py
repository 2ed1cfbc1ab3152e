"""The torch twin of :mod:`esnb.nets.mlp`: the same function over views of one flat tensor,
so the learner differentiates exactly what actors compute in numpy.

``forward`` takes a flat vector ``[P]`` (one network) or a matrix ``[n, P]`` (a population
whose members share the input: EORL), never copying parameters into modules.
:class:`FlatModule` is a module over one such vector, :class:`ObsNormModule` one that reads
normalised observations, and :class:`MLPPolicy` the canonical policy: the torch twin of a
:class:`~esnb.nets.policy.PolicySpec` (whose numpy fast path is
:class:`~esnb.nets.numpy_policy.NumpyPolicy`).
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from esnb.nets.layout import Layout
from esnb.nets.mlp import MLP, normalise_obs
from esnb.nets.policy import PolicySpec


def activate(h: torch.Tensor, kind: str, slope: float = 0.01) -> torch.Tensor:
    if kind == "tanh":
        return torch.tanh(h)
    if kind == "relu":
        return torch.relu(h)
    if kind == "leaky_relu":
        return F.leaky_relu(h, slope)
    return h


def _sizes(part) -> list[int]:
    """An MLP's tensors one by one; a plain vector or a conv torso (split again by
    :func:`esnb.nets.torch_conv.conv_tensors`) as one piece."""
    return ([size for o, i in part.layer_shapes for size in (o * i, o)]
            if isinstance(part, MLP) else [Layout.size(part)])


def split(layout: Layout, flat: torch.Tensor) -> dict[str, tuple[torch.Tensor, ...]]:
    """Every part of ``flat`` (``[..., P]``) as its tensors, with one split: an MLP part as
    ``(W0, b0, W1, b1, ...)`` (weights flat), which :func:`forward` takes in place of the
    part's vector; a plain part as a 1-tuple. A split per part and then one per layer would
    copy the gradient twice in backward (Ape-X DPG's critic update: ~2% slower)."""
    per_part = [_sizes(part) for _, part in layout.parts]
    pieces = flat.split([size for sizes in per_part for size in sizes], dim=-1)
    out, pos = {}, 0
    for (name, _), sizes in zip(layout.parts, per_part):
        out[name] = pieces[pos:pos + len(sizes)]
        pos += len(sizes)
    return out


def forward(mlp: MLP, flat: torch.Tensor | tuple, x: torch.Tensor,
            inputs: list | None = None) -> torch.Tensor:
    """Outputs of ``x``: ``[B, out]`` for a flat ``[P]``; ``[n, B, out]`` for ``[n, P]``
    (``x`` of shape ``[B, in]`` is shared by the members, or ``[n, B, in]``). ``flat`` may
    also be the MLP's tensors from :func:`split`.

    ``inputs``, if given, receives every layer's input in order (``x``, expanded to
    ``[n, B, in]`` for a population, then each hidden activation): what a hand-written
    backward needs (EORL's)."""
    shapes = mlp.layer_shapes
    last = len(shapes) - 1
    # one split, not a slice per tensor: each slice's backward writes a full-size zero gradient
    # (measured: TD3's 400-300 critic update ~15% faster)
    p = flat if isinstance(flat, tuple) else flat.split(_sizes(mlp), dim=-1)
    if p[0].dim() == 1:
        for k, (o, i) in enumerate(shapes):
            if inputs is not None:
                inputs.append(x)
            x = activate(F.linear(x, p[2 * k].view(o, i), p[2 * k + 1]),
                         mlp.activation if k < last else mlp.output, mlp.slope)
        return x
    n = p[0].shape[0]
    h = x.expand(n, *x.shape[-2:]) if x.dim() == 2 else x
    for k, (o, i) in enumerate(shapes):
        if inputs is not None:
            inputs.append(h)
        h = torch.baddbmm(p[2 * k + 1].view(n, 1, o), h, p[2 * k].view(n, o, i).transpose(1, 2))
        h = activate(h, mlp.activation if k < last else mlp.output, mlp.slope)
    return h


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A tensor on any device as a new CPU numpy array (a copy, never a view of the
    module's memory)."""
    t = t.detach()
    return t.cpu().numpy() if t.device.type != "cpu" else t.numpy().copy()


def init_fan_in(mlp: MLP, generator: torch.Generator,
                last_bound: float | None = None) -> torch.Tensor:
    """torch ``nn.Linear``'s default init drawn from ``generator`` (weight then bias of each
    layer, ``U(-1/sqrt(in), 1/sqrt(in))``); ``last_bound`` replaces the output layer's bound
    (DDPG's ``3e-3``)."""
    parts = []
    slices = mlp.slices()
    for k, (_w, (o, i), _b) in enumerate(slices):
        bound = last_bound if (last_bound is not None and k == len(slices) - 1) else \
            1.0 / math.sqrt(i)
        parts.append(((torch.rand((o, i), generator=generator) * 2 - 1) * bound).reshape(-1))
        parts.append((torch.rand(o, generator=generator) * 2 - 1) * bound)
    return torch.cat(parts)


class FlatModule(nn.Module):
    """A module whose only parameter is one flat float32 vector (``self.flat``): one optimiser
    over it, one checkpoint array, and the numpy side reads the same numbers."""

    def __init__(self, num_params: int, flat=None):
        super().__init__()
        data = torch.zeros(int(num_params), dtype=torch.float32)
        if flat is not None:
            data.copy_(torch.as_tensor(np.asarray(flat, dtype=np.float32)).reshape(-1))
        self.flat = nn.Parameter(data)

    def params(self) -> np.ndarray:
        """The flat vector as a new CPU float32 numpy array, wherever the module is (what
        actors read and checkpoints keep)."""
        return to_numpy(self.flat)

    def load(self, flat) -> None:
        """Copy ``flat`` (numpy or a tensor on any device) into the vector, on its device."""
        flat = torch.as_tensor(np.asarray(flat, dtype=np.float32)).reshape(-1) \
            if not torch.is_tensor(flat) else flat.detach().reshape(-1)
        if flat.numel() != self.flat.numel():
            raise ValueError(f"expected {self.flat.numel()} parameters, got {flat.numel()}")
        with torch.no_grad():
            self.flat.copy_(flat)


class ObsNormModule(FlatModule):
    """A :class:`FlatModule` whose input is observations, normalised (once
    :meth:`set_obs_norm` gave the statistics) as ``clip((x - mean) / std, -obs_clip,
    obs_clip)`` (:func:`esnb.nets.mlp.normalise_obs`): ES's torch policy and IMPALA's
    actor-critic share it. ``obs_mean`` and ``obs_std`` are buffers."""

    def __init__(self, num_params: int, obs_dim: int, obs_clip: float, flat=None):
        super().__init__(num_params, flat)
        self.obs_clip = float(obs_clip)
        self.register_buffer("obs_mean", torch.zeros(obs_dim))
        self.register_buffer("obs_std", torch.ones(obs_dim))
        self.normalise = False

    def set_obs_norm(self, mean, std) -> None:
        """Normalise observations as ``clip((obs - mean) / std, -obs_clip, obs_clip)``."""
        self.obs_mean.copy_(torch.as_tensor(np.asarray(mean, dtype=np.float32)))
        self.obs_std.copy_(torch.as_tensor(np.asarray(std, dtype=np.float32)))
        self.normalise = True

    def inputs(self, obs) -> torch.Tensor:
        """``obs`` as float32, normalised if statistics were set."""
        x = torch.as_tensor(obs).to(torch.float32)
        if self.normalise:
            x = normalise_obs(x, self.obs_mean, self.obs_std, self.obs_clip)
        return x

    def obs_norm(self) -> tuple:
        """``(mean, std)`` as numpy (views on the CPU, copies from another device), or
        ``(None, None)`` without normalisation."""
        if not self.normalise:
            return None, None
        return self.obs_mean.cpu().numpy(), self.obs_std.cpu().numpy()


class MLPPolicy(ObsNormModule):
    """An MLP policy whose weights and biases are views of ``self.flat``.

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
        super().__init__(spec.num_params, spec.obs_dim, spec.obs_clip, flat)
        self.spec = spec

    def layers(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """``(weight [out, in], bias [out])`` views of ``flat`` for every layer."""
        return self.spec.mlp.layers(self.flat)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return forward(self.spec.mlp, self.flat, self.inputs(obs))

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
        """A :class:`~esnb.nets.numpy_policy.NumpyPolicy` over the same memory (no copy of
        the parameters)."""
        from esnb.nets.numpy_policy import NumpyPolicy

        return NumpyPolicy(self.spec, self.flat.detach().numpy(), *self.obs_norm())
