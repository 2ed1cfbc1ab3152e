"""What a policy is: an :class:`~esnb.nets.MLP` (esnb's one network family) plus what acting
needs -- the action kind and bounds, and observation normalisation.

A policy's parameters live in one flat float32 vector, laid out as its MLP's (layer after
layer, weight ``[out, in]`` then bias). The torch model and the numpy fast path read views of
that same vector, so ES perturbs and updates a single array.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from esnb.nets.mlp import MLP, init_normc

ACTIVATIONS = ("tanh", "relu")


@dataclass(frozen=True)
class PolicySpec:
    """Shape and behaviour of an MLP policy.

    Attributes
    ----------
    obs_dim : int
        Length of the (flattened) observation.
    act_dim : int
        Number of outputs: the action dimension (Box) or the number of actions (Discrete).
    hidden : tuple of int
        Hidden layer sizes; the IW-ES paper used two layers of 64 with tanh.
    activation : {"tanh", "relu"}
        Hidden activation; the output layer is linear.
    discrete : bool
        Discrete actions take the argmax of the outputs; Box actions clip them to the bounds.
    low, high : tuple of float
        Action bounds (Box only).
    obs_clip : float
        Normalised observations are clipped to ``[-obs_clip, obs_clip]`` (OpenAI-ES used 5).
    """

    obs_dim: int
    act_dim: int
    hidden: tuple[int, ...] = (64, 64)
    activation: str = "tanh"
    discrete: bool = False
    low: tuple[float, ...] = field(default=())
    high: tuple[float, ...] = field(default=())
    obs_clip: float = 5.0

    def __post_init__(self):
        object.__setattr__(self, "hidden", tuple(int(h) for h in self.hidden))
        object.__setattr__(self, "low", tuple(float(x) for x in self.low))
        object.__setattr__(self, "high", tuple(float(x) for x in self.high))
        if self.obs_dim < 1 or self.act_dim < 1:
            raise ValueError(
                f"obs_dim and act_dim must be >= 1, got {self.obs_dim}, {self.act_dim}")
        if any(h < 1 for h in self.hidden):
            raise ValueError(f"hidden layer sizes must be >= 1, got {self.hidden}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {self.activation!r}")
        if not self.discrete and self.low and len(self.low) != self.act_dim:
            raise ValueError("low/high must have act_dim entries")

    @property
    def sizes(self) -> tuple[int, ...]:
        return (self.obs_dim, *self.hidden, self.act_dim)

    @functools.cached_property
    def mlp(self) -> MLP:
        """The network: linear outputs (logits, or actions before the bounds are applied)."""
        return MLP(self.sizes, activation=self.activation)

    @property
    def layer_shapes(self) -> list[tuple[int, int]]:
        """``(out, in)`` of every linear layer."""
        return self.mlp.layer_shapes

    @property
    def num_params(self) -> int:
        return self.mlp.num_params

    def slices(self) -> list[tuple[slice, tuple[int, int], slice]]:
        """For each layer: (weight slice, weight shape, bias slice) into the flat vector."""
        return self.mlp.slices()

    def to_dict(self) -> dict:
        return {
            "obs_dim": self.obs_dim,
            "act_dim": self.act_dim,
            "hidden": list(self.hidden),
            "activation": self.activation,
            "discrete": self.discrete,
            "low": list(self.low),
            "high": list(self.high),
            "obs_clip": self.obs_clip,
        }

    @classmethod
    def from_dict(cls, d: dict) -> PolicySpec:
        return cls(**{**d, "hidden": tuple(d["hidden"]), "low": tuple(d["low"]),
                      "high": tuple(d["high"])})

    @classmethod
    def for_spaces(cls, observation_space, action_space, hidden=(64, 64), **kwargs) -> PolicySpec:
        """Build a spec from gymnasium spaces (Box observations; Box or Discrete actions)."""
        from gymnasium import spaces

        if not isinstance(observation_space, spaces.Box):
            raise ValueError(
                f"MLP policies need a Box observation space, got {observation_space}"
            )
        obs_dim = int(np.prod(observation_space.shape))
        if isinstance(action_space, spaces.Discrete):
            return cls(obs_dim, int(action_space.n), tuple(hidden), discrete=True, **kwargs)
        if isinstance(action_space, spaces.Box):
            return cls(
                obs_dim,
                int(np.prod(action_space.shape)),
                tuple(hidden),
                discrete=False,
                low=tuple(np.asarray(action_space.low, dtype=np.float64).ravel()),
                high=tuple(np.asarray(action_space.high, dtype=np.float64).ravel()),
                **kwargs,
            )
        raise ValueError(f"unsupported action space {action_space} (Box or Discrete expected)")


def init_params(spec: PolicySpec, rng: np.random.Generator, out_std: float = 0.01) -> np.ndarray:
    """Initial flat parameters: OpenAI-ES's normalised-column init, zero biases
    (:func:`esnb.nets.init_normc`): the first policies are near-deterministic and calm."""
    return init_normc(spec.mlp, rng, out_std)
