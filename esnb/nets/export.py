"""A policy leaves esnb: one torch module with the observation normalisation and the action
head folded in, written as ONNX (``onnxruntime`` and every ONNX runtime run it) or TorchScript
(``torch.jit.load``, no esnb needed).

The file maps ``obs`` (float32 ``[batch, obs_dim]``) to ``action``: float32 ``[batch,
act_dim]`` for Box actions (clipped to the bounds, or TD3's tanh squash), int64 ``[batch]`` for
discrete ones (the argmax). The batch dimension is dynamic.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import torch
from torch import nn

from esnb.nets.acting import FORMATS
from esnb.nets.mlp import normalise_obs
from esnb.nets.torch_mlp import forward


class ActingModule(nn.Module):
    """``obs -> action`` of an :class:`~esnb.nets.acting.ActingPolicy`, all in one graph.

    The normalisation and bounds are buffers (constants in the exported graph); the parameters
    are one flat buffer read as the MLP's views, as every esnb torch network reads them.
    """

    def __init__(self, policy):
        super().__init__()
        spec = policy.spec
        self.mlp = spec.mlp
        self.discrete = spec.discrete
        self.head = policy.head
        self.normalise = policy.obs_mean is not None
        self.obs_clip = float(spec.obs_clip)
        self.register_buffer("flat", torch.as_tensor(policy.flat.copy()))
        f32 = torch.float32
        if self.normalise:
            self.register_buffer("obs_mean", torch.as_tensor(policy.obs_mean, dtype=f32))
            self.register_buffer("obs_std", torch.as_tensor(policy.obs_std, dtype=f32))
        self.bounded = not spec.discrete and bool(spec.high)
        if self.bounded:
            high = torch.tensor(spec.high, dtype=f32)
            low = torch.tensor(spec.low, dtype=f32)
            self.register_buffer("low", low)
            self.register_buffer("high", high)
            self.register_buffer("a_mid", (high + low) / 2)
            self.register_buffer("a_half", (high - low) / 2)  # "half" is nn.Module.half()

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs.to(torch.float32)
        if self.normalise:
            x = normalise_obs(x, self.obs_mean, self.obs_std, self.obs_clip)
        y = forward(self.mlp, self.flat, x)
        if self.discrete:
            return y.argmax(dim=-1)
        if self.head == "tanh":
            return self.a_mid + self.a_half * torch.tanh(y)
        if self.bounded:
            return torch.maximum(torch.minimum(y, self.high), self.low)
        return y


def write(policy, path, fmt: str) -> Path:
    """Write ``policy`` (an :class:`~esnb.nets.acting.ActingPolicy`) to ``path`` as ``fmt``.

    Raises
    ------
    ValueError
        For a format not in :data:`FORMATS`.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; valid: {', '.join(FORMATS)}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    module = ActingModule(policy).eval()
    example = torch.zeros(2, policy.spec.obs_dim, dtype=torch.float32)
    with torch.no_grad(), warnings.catch_warnings():
        # torch marks TorchScript and its ONNX exporter deprecated; both still write files
        # every runtime reads (the torch.export-based exporter needs onnxscript besides)
        warnings.simplefilter("ignore", DeprecationWarning)
        if fmt == "torchscript":
            torch.jit.trace(module, example).save(str(path))
        else:
            torch.onnx.export(module, (example,), str(path), dynamo=False,
                              input_names=["obs"], output_names=["action"],
                              dynamic_axes={"obs": {0: "batch"}, "action": {0: "batch"}})
    return path
