"""A trained policy as plain data: what ``esnb export``, ``runner.video()`` and ``esnb play``
take from a runner, small enough to pickle to a rendering process.

An :class:`ActingPolicy` is a :class:`~esnb.nets.policy.PolicySpec`, its flat parameters, the
observation normalisation it acts with and its action head. :meth:`ActingPolicy.numpy` is the
rollouts' own numpy forward (:class:`~esnb.nets.numpy_policy.NumpyPolicy`, normalisation folded
in), so an exported file can be checked against exactly what the run's episodes computed;
:class:`esnb.nets.export.ActingModule` is its torch twin with everything folded in.

This module imports numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from esnb.nets.numpy_policy import NumpyPolicy
from esnb.nets.policy import PolicySpec

#: ``"bounds"``: the MLP's output clipped to the action bounds (argmax for discrete actions),
#: ES's policy; ``"tanh"``: ``mid + half * tanh(output)``, TD3's actor (AES-RL, CEM-RL)
HEADS = ("bounds", "tanh")
#: ``esnb export``'s formats (:mod:`esnb.nets.export` writes them) and their files' suffixes
FORMATS = ("onnx", "torchscript")
SUFFIXES = {"onnx": ".onnx", "torchscript": ".pt"}


@dataclass(frozen=True, eq=False)
class ActingPolicy:
    """A deterministic MLP policy: parameters, observation normalisation and action head.

    Attributes
    ----------
    spec : PolicySpec
        Sizes, activation, action kind and bounds, observation clip.
    flat : ndarray of float32
        The parameters (:class:`~esnb.nets.MLP` layout).
    obs_mean, obs_std : ndarray or None
        ``clip((obs - mean) / std, -obs_clip, obs_clip)`` before the first layer; None: raw
        observations.
    head : {"bounds", "tanh"}
        How outputs become actions (:data:`HEADS`).
    """

    spec: PolicySpec
    flat: np.ndarray
    obs_mean: np.ndarray | None = None
    obs_std: np.ndarray | None = None
    head: str = "bounds"

    def __post_init__(self):
        if self.head not in HEADS:
            raise ValueError(f"head must be one of {HEADS}, got {self.head!r}")
        if self.head == "tanh" and (self.spec.discrete or not self.spec.high):
            raise ValueError("a tanh head needs a bounded Box action space")
        object.__setattr__(self, "flat", np.array(self.flat, dtype=np.float32))
        if (self.obs_mean is None) != (self.obs_std is None):
            raise ValueError("give both obs_mean and obs_std, or neither")
        for name in ("obs_mean", "obs_std"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, np.array(value, dtype=np.float64).ravel())

    def numpy(self):
        """``act(obs) -> action`` for one observation, as the run's rollouts compute it."""
        policy = NumpyPolicy(self.spec, self.flat, self.obs_mean, self.obs_std)
        if self.head == "bounds":
            return policy.act
        outputs = policy.outputs
        high = np.asarray(self.spec.high, dtype=np.float32)
        low = np.asarray(self.spec.low, dtype=np.float32)
        mid, half = (high + low) / 2, (high - low) / 2

        def act(obs):
            """TD3's squash, in the order its numpy actor applies it."""
            a = np.tanh(outputs(obs))
            a *= half
            a += mid
            return a

        return act

    def actions(self, observations) -> np.ndarray:
        """Actions for a batch ``[n, obs_dim]``, one observation at a time through
        :meth:`numpy` (the reference an exported file is checked against)."""
        act = self.numpy()
        return np.stack([np.asarray(act(np.asarray(o))).copy() for o in observations])
