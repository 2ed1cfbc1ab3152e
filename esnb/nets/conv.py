"""Convolutional torsos of the papers, as parts of the one flat-parameter family (no torch).

A :class:`ConvTorso` is a part of a :class:`~esnb.nets.Layout` like an
:class:`~esnb.nets.MLP`: a spec that knows its tensors' shapes, its parameter count, its output
size and a seeded initialisation, over one slice of a run's flat float32 vector (what a learner
publishes to actors and checkpoints). The fully connected layers after it are MLP parts of the
same layout, so a dueling Q-network is ``torso`` + ``value`` + ``advantage`` MLPs on the
torso's output, as in Wang et al. (2016), whose streams each have their own hidden layer. The
torch forward over the flat slice is :func:`esnb.nets.torch_conv.conv_forward`. Inputs are
frames ``[C, H, W]`` of raw values (uint8, or the same values as floats), multiplied by the
torso's ``scale`` in the forward: 1/255 for ALE's 0..255 grey frames (Mnih et al. 2015 divide
by 255), 1 for MinAtar, whose channels are already 0/1 booleans (Young & Tian 2019 feed them
as they are).

Kinds (``kind``):

- ``"nature"``: Mnih et al. (2015), Nature DQN, the torso of Ape-X DQN (Horgan et al. 2018,
  "the same dueling network architecture as Wang et al."): 32 8x8 stride 4, 64 4x4 stride 2,
  64 3x3 stride 1, ReLU, no padding (84x84 -> 64x7x7 = 3,136).
- ``"impala-shallow"``: Espeholt et al. (2018), figure 3 left: 16 8x8 stride 4, 32 4x4
  stride 2, ReLU.
- ``"impala-deep"``: figure 3 right (15 convolutions): for 16, 32, 32 channels a 3x3 stride 1
  convolution (padding 1), a 3x3 stride 2 max-pool (padding 1) and two residual blocks
  ``x + conv(relu(conv(relu(x))))``; a ReLU at the end (84x84 -> 32x11x11 = 3,872).
- ``"minatar"``: Young & Tian (2019), the MinAtar DQN's: 16 3x3 stride 1, ReLU
  (10x10 -> 16x8x8 = 1,024).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from esnb.nets.mlp import orthogonal

KINDS = ("nature", "impala-shallow", "impala-deep", "minatar")
#: how a torso's weights are drawn (:meth:`ConvTorso.init`)
TORSO_INITS = ("uniform", "orthogonal")
#: (out channels, kernel, stride) of the plain stacks
_PLAIN = {"nature": ((32, 8, 4), (64, 4, 2), (64, 3, 1)),
          "impala-shallow": ((16, 8, 4), (32, 4, 2)),
          "minatar": ((16, 3, 1),)}
#: the deep IMPALA torso's section widths
DEEP_CHANNELS = (16, 32, 32)
#: hidden units of the fully connected layer after each torso: MinAtar's DQN has one of 128
#: (Young & Tian 2019, section 4), the Nature DQN one of 512 (Mnih et al. 2015), which Wang et
#: al.'s dueling streams (Ape-X's network) each have; IMPALA's torsos feed one of 256
#: (Espeholt et al. 2018, figure 3)
HEAD_HIDDEN = {"minatar": 128, "nature": 512, "impala-shallow": 256, "impala-deep": 256}


def _conv_out(size: int, kernel: int, stride: int, pad: int = 0) -> int:
    return (size + 2 * pad - kernel) // stride + 1


@dataclass(frozen=True)
class ConvTorso:
    """A convolutional torso over frames ``in_shape = (C, H, W)``.

    Attributes
    ----------
    kind : {"nature", "impala-shallow", "impala-deep", "minatar"}
    in_shape : tuple of int
        Channels first: a stack of 4 84x84 grey frames is ``(4, 84, 84)``, MinAtar ``(k, 10, 10)``.
    scale : float, optional
        What the forward multiplies the raw frame values by (none: the kind's inputs, 1 for
        ``"minatar"``'s 0/1 channels, 1/255 for the others' 0..255 frames).
    """

    kind: str
    in_shape: tuple[int, int, int]
    scale: float | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"ConvTorso: kind must be one of {', '.join(KINDS)}, "
                             f"got {self.kind!r}")
        scale = (1.0 if self.kind == "minatar" else 1.0 / 255.0) if self.scale is None \
            else float(self.scale)
        if not (np.isfinite(scale) and scale > 0):
            raise ValueError(f"ConvTorso: scale must be a finite number > 0, got {self.scale!r}")
        object.__setattr__(self, "scale", scale)
        shape = tuple(int(s) for s in self.in_shape)
        if len(shape) != 3 or min(shape) < 1:
            raise ValueError(f"ConvTorso: in_shape must be (channels, height, width), got "
                             f"{self.in_shape!r}")
        object.__setattr__(self, "in_shape", shape)
        if min(self.out_shape[1:]) < 1:
            raise ValueError(f"ConvTorso {self.kind!r}: frames of {shape[1]}x{shape[2]} are too "
                             f"small for its kernels and strides")

    @cached_property
    def tensors(self) -> tuple[tuple[str, tuple[int, ...]], ...]:
        """``(name, shape)`` of every weight and bias, in the flat vector's order."""
        out: list[tuple[str, tuple[int, ...]]] = []

        def conv(name: str, c_in: int, c_out: int, k: int) -> None:
            out.extend(((f"{name}.w", (c_out, c_in, k, k)), (f"{name}.b", (c_out,))))

        c = self.in_shape[0]
        if self.kind == "impala-deep":
            for i, ch in enumerate(DEEP_CHANNELS):
                conv(f"s{i}.conv", c, ch, 3)
                for j in range(2):
                    conv(f"s{i}.res{j}.a", ch, ch, 3)
                    conv(f"s{i}.res{j}.b", ch, ch, 3)
                c = ch
        else:
            for i, (ch, k, _) in enumerate(_PLAIN[self.kind]):
                conv(f"conv{i}", c, ch, k)
                c = ch
        return tuple(out)

    @cached_property
    def out_shape(self) -> tuple[int, int, int]:
        """``(C, H, W)`` of the torso's output (before it is flattened)."""
        _, h, w = self.in_shape
        if self.kind == "impala-deep":
            for _ in DEEP_CHANNELS:  # the convolutions keep the size; the pools halve it
                h, w = _conv_out(h, 3, 2, 1), _conv_out(w, 3, 2, 1)
            return DEEP_CHANNELS[-1], h, w
        for _, k, s in _PLAIN[self.kind]:
            h, w = _conv_out(h, k, s), _conv_out(w, k, s)
        return _PLAIN[self.kind][-1][0], h, w

    @property
    def out_dim(self) -> int:
        """Size of the flattened output: the input of the MLP parts after it."""
        c, h, w = self.out_shape
        return c * h * w

    @property
    def num_params(self) -> int:
        return sum(int(np.prod(shape)) for _, shape in self.tensors)

    def init(self, rng: np.random.Generator, scheme: str = "uniform") -> np.ndarray:
        """Initial parameters from ``rng`` (float32). ``uniform``: every weight and bias uniform
        in ``±1/sqrt(fan_in)`` (torch's default for convolutions); ``orthogonal``: orthogonal
        weights at gain sqrt(2) (for ReLUs) and zero biases (OpenAI baselines' A2C and PPO)."""
        if scheme not in TORSO_INITS:
            raise ValueError(f"a torso's init scheme must be one of {TORSO_INITS}, "
                             f"got {scheme!r}")
        parts, fan_in = [], 1
        for name, shape in self.tensors:
            if scheme == "orthogonal":
                part = (orthogonal(shape, np.sqrt(2.0), rng) if name.endswith(".w")
                        else np.zeros(shape, np.float32))
                parts.append(part.ravel())
                continue
            if name.endswith(".w"):  # a bias takes the fan-in of its weight, just before it
                fan_in = int(np.prod(shape[1:]))
            bound = 1.0 / np.sqrt(fan_in)
            parts.append(rng.uniform(-bound, bound, size=shape).astype(np.float32).ravel())
        return np.concatenate(parts)


def scale_for(high) -> float:
    """The input scale of frames whose largest value is ``high`` (an observation space's
    ``high``): ``1/high``, so inputs lie in [0, 1] (1/255 for ALE frames, 1 for MinAtar's)."""
    top = float(np.max(high))
    return 1.0 / top if np.isfinite(top) and top > 0 else 1.0


def torso_for(obs_shape: tuple[int, ...], algorithm: str, deep: bool = False) -> ConvTorso | None:
    """The paper's torso for observations of ``obs_shape``, or None for vector observations.

    Frames ``(C, 84, 84)`` get Ape-X's Nature torso (``algorithm="apex"``) or IMPALA's
    (``"impala"``): the shallow one, or with ``deep`` the 15-layer residual one that gives the
    paper's best Atari results (Espeholt et al. 2018, section 5.3); MinAtar's ``(k, 10, 10)``
    always get the MinAtar DQN's.
    """
    shape = tuple(int(s) for s in obs_shape)
    if len(shape) != 3:
        return None
    if shape[1:] == (10, 10):
        return ConvTorso("minatar", shape)
    if algorithm == "impala":
        return ConvTorso("impala-deep" if deep else "impala-shallow", shape)
    return ConvTorso("nature", shape)


def choose_torso(choice: str, env: str, obs_space, algorithm: str) -> ConvTorso | None:
    """The conv torso of setting ``torso`` for ``obs_space`` (``auto``: :func:`torso_for`;
    ``auto-deep``: the same with ``deep``), scaled to [0, 1] by the space's ``high``; None for
    an MLP. A conv torso on vectors or ``mlp`` on frames: one ``ValueError``."""
    shape = tuple(obs_space.shape)
    frames = len(shape) == 3
    if choice in ("auto", "auto-deep"):
        torso = torso_for(shape, algorithm, deep=choice == "auto-deep")
    elif choice == "mlp":
        if frames:
            raise ValueError(f"torso 'mlp' takes vector observations; {env} gives frames of "
                             f"shape {shape} (use torso='auto' or a conv kind)")
        torso = None
    else:
        if not frames:
            raise ValueError(f"torso {choice!r} takes frames (channels, height, width); {env} "
                             f"gives observations of shape {shape} (use torso='auto' or 'mlp')")
        torso = ConvTorso(choice, shape)
    return None if torso is None else replace(torso, scale=scale_for(obs_space.high))
