"""The torch forward of a :class:`~esnb.nets.conv.ConvTorso` over its slice of a flat vector.

Like :mod:`esnb.nets.torch_mlp`, the parameters are views of one flat tensor (no modules), so a
learner differentiates the vector it publishes and checkpoints, and an actor of a pixel task
(which may import torch) runs the same function on the published copy.

The convolutions compute in the channels-last layout (NHWC in memory, the same NCHW tensors to
the code): on a CPU, oneDNN's kernels for that layout made a whole learner update 1.6x faster
than the default layout for IMPALA's shallow and deep torsos and 1.4x for Ape-X's Nature torso
(2 torch threads; the shallow torso's forward and backward alone 1.8x with one), the outputs
equal to float rounding (``esnb bench learner --layout both``, BENCHMARKS.md).
:func:`memory_layout` switches it for a benchmark's side-by-side rounds.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F

from esnb.nets.conv import _PLAIN, DEEP_CHANNELS, ConvTorso

#: the memory layouts a torso can compute in (:func:`memory_layout`)
LAYOUTS = {"channels-last": torch.channels_last, "contiguous": torch.contiguous_format}
_layout = ["channels-last"]


@contextmanager
def memory_layout(name: str) -> Iterator[None]:
    """Compute every torso's convolutions in layout ``name`` (a key of :data:`LAYOUTS`) inside
    the ``with`` block, in this process: how ``esnb bench learner --layout both`` measures the
    layouts side by side. Not for runs: their layout is the faster one, channels-last."""
    if name not in LAYOUTS:
        raise ValueError(f"unknown memory layout {name!r}; known: {', '.join(LAYOUTS)}")
    before = _layout[0]
    _layout[0] = name
    try:
        yield
    finally:
        _layout[0] = before


def conv_tensors(torso: ConvTorso, flat: torch.Tensor) -> dict[str, torch.Tensor]:
    """``{name: tensor}`` views of ``flat`` (``[torso.num_params]``) in the torso's shapes."""
    if tuple(flat.shape) != (torso.num_params,):
        raise ValueError(f"ConvTorso {torso.kind!r} needs {torso.num_params} parameters, got "
                         f"shape {tuple(flat.shape)}")
    sizes = [math.prod(shape) for _, shape in torso.tensors]
    return {name: piece.view(shape) for (name, shape), piece
            in zip(torso.tensors, flat.split(sizes))}


def conv_forward(torso: ConvTorso, flat: torch.Tensor, frames: torch.Tensor) -> torch.Tensor:
    """The torso's flattened output ``[B, torso.out_dim]`` for ``frames`` ``[B, C, H, W]``:
    raw values (uint8, or the same values as floats, as a learner's batches arrive on its
    device), multiplied by ``torso.scale`` (explicit: MinAtar's 0/1 channels are not 0..255)."""
    if tuple(frames.shape[1:]) != torso.in_shape:
        raise ValueError(f"ConvTorso {torso.kind!r} takes frames of shape {torso.in_shape}, "
                         f"got {tuple(frames.shape[1:])}")
    p = conv_tensors(torso, flat)
    # the scale goes into the first convolution's weights (conv(s x, W) = conv(x, s W)): a
    # batch of 672 Atari stacks is 19M inputs, 16k weights, and multiplying the inputs cost
    # ~15% of an IMPALA learner step's CPU time (measured, BENCHMARKS.md)
    # the layout is made on the raw frames (uint8: a quarter of the bytes); the cast keeps it
    x = frames.contiguous(memory_format=LAYOUTS[_layout[0]]).to(flat.dtype)
    first = "s0.conv.w" if torso.kind == "impala-deep" else "conv0.w"
    p[first] = p[first] * torso.scale
    if torso.kind == "impala-deep":
        for i, _ in enumerate(DEEP_CHANNELS):
            x = F.conv2d(x, p[f"s{i}.conv.w"], p[f"s{i}.conv.b"], padding=1)
            x = F.max_pool2d(x, 3, stride=2, padding=1)
            for j in range(2):
                h = F.conv2d(torch.relu(x), p[f"s{i}.res{j}.a.w"], p[f"s{i}.res{j}.a.b"],
                             padding=1)
                x = x + F.conv2d(torch.relu(h), p[f"s{i}.res{j}.b.w"], p[f"s{i}.res{j}.b.b"],
                                 padding=1)
        x = torch.relu(x)
    else:
        for i, (_, _, stride) in enumerate(_PLAIN[torso.kind]):
            x = torch.relu(F.conv2d(x, p[f"conv{i}.w"], p[f"conv{i}.b"], stride=stride))
    return x.flatten(1)
