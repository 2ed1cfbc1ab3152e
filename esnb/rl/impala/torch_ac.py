"""The torch forward of IMPALA's actor-critic on frames (an
:class:`~esnb.rl.impala.actor_critic.ActorCriticSpec` with a conv torso) over a flat vector: the
learner's :class:`~esnb.rl.impala.learner.ActorCritic` differentiates it on its whole vector,
actors of pixel tasks run it on their published copy (no value head), imported lazily by
:class:`~esnb.rl.impala.actor_critic.NumpyActor`, so vector-observation actors stay torch-free.
"""

from __future__ import annotations

import numpy as np
import torch

from esnb.nets import torch_mlp
from esnb.nets.torch_conv import conv_forward


def frame_forward(spec, layout, flat: torch.Tensor, obs: torch.Tensor):
    """``(logits [N, act_dim], values [N] or None)`` of frames ``obs`` (``[N, C*H*W]`` or
    ``[N, C, H, W]``, uint8 or the same values as floats) from ``flat`` laid out as ``layout``
    (the spec's learner layout, or its actor layout: no ``value`` part, no values)."""
    p = torch_mlp.split(layout, flat)
    h = conv_forward(spec.torso, p["torso"][0], obs.reshape(-1, *spec.torso.in_shape))
    h = torch_mlp.forward(layout["fc"], p["fc"], h)
    logits = torch_mlp.forward(layout["policy"], p["policy"], h)
    if "value" not in p:
        return logits, None
    return logits, torch_mlp.forward(layout["value"], p["value"], h)[:, 0]


def frame_logits(spec, flat: torch.Tensor, obs) -> np.ndarray:
    """An actor's logits (numpy float32) of frames ``obs`` (uint8, as the env gives them) from
    its published copy ``flat`` (a CPU tensor in ``spec.actor_layout``)."""
    with torch.no_grad():
        x = torch.from_numpy(np.ascontiguousarray(obs))
        return frame_forward(spec, spec.actor_layout, flat, x)[0].numpy()
