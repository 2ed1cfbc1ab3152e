"""The torch forward of Ape-X's Q-network (:class:`esnb.rl.apex.nets.QNetSpec`) over a flat
vector: the learner's :class:`~esnb.rl.apex.torch_nets.QNetwork` differentiates it, and the
actors of pixel tasks run it on their published copy (:func:`esnb.rl.apex.nets.q_values`
imports this module only for a conv torso, so vector-observation actors stay torch-free).
"""

from __future__ import annotations

import numpy as np
import torch

from esnb.nets import torch_mlp
from esnb.nets.torch_conv import conv_forward


def q_forward(spec, flat: torch.Tensor, obs: torch.Tensor) -> torch.Tensor:
    """Q-values ``[B, n_actions]`` of ``obs`` from the flat vector ``flat``: what the learner
    differentiates and, for frames, what actors run on their published copy."""
    lay = spec.layout
    p = torch_mlp.split(lay, flat)
    if spec.torso is not None:
        h = conv_forward(spec.torso, p["torso"][0], obs.reshape(-1, *spec.torso.in_shape))
    else:
        h = torch_mlp.forward(lay["torso"], p["torso"], obs)
    if not spec.dueling:
        return torch_mlp.forward(lay["head"], p["head"], h)
    v = torch_mlp.forward(lay["value"], p["value"], h)
    a = torch_mlp.forward(lay["advantage"], p["advantage"], h)
    return v + a - a.mean(dim=1, keepdim=True)


def frame_q_values(spec, flat: torch.Tensor, obs) -> np.ndarray:
    """An actor's Q-values (numpy float32) of frames ``obs`` (uint8, as stored) from its
    published copy ``flat`` (a CPU tensor)."""
    with torch.no_grad():
        return q_forward(spec, flat, torch.from_numpy(np.ascontiguousarray(obs))).numpy()
