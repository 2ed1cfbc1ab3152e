"""The TD3 actor's numpy side (no torch): layout, initialisation, the rollout forward pass,
and the replay's transition fields. :mod:`esnb.rl.td3.nets` has the torch side.

The actor is an :class:`~esnb.nets.MLP` with a tanh output (:func:`actor_mlp`) whose values are
then mapped into the bounds, ``mid + half * tanh(...)``; its flat vector is laid out as the
MLP's (and as its :class:`~esnb.nets.policy.PolicySpec`'s, which carries the bounds).

Pourchot and Sigaud 2019 (CEM-RL) / Lee et al. 2020 (AES-RL): the actor is a tanh MLP whose
output is squashed by tanh into the action bounds; CEM-RL's initial mean is a torch
``nn.Linear``-initialised actor.
"""

from __future__ import annotations

import numpy as np

from esnb.nets import MLP, init_fan_in
from esnb.nets.numpy_policy import NumpyPolicy
from esnb.nets.policy import PolicySpec


def transition_spec(obs_dim: int, act_dim: int) -> dict:
    """The replay's fields per transition (``done`` is *termination*: a time limit is not)."""
    return {"obs": ((obs_dim,), "float32"), "action": ((act_dim,), "float32"),
            "reward": "float32", "next_obs": ((obs_dim,), "float32"), "done": "float32"}


def actor_spec(obs_dim: int, act_dim: int, low, high, hidden) -> PolicySpec:
    """The actor's layout: a tanh MLP (its output squashed into the bounds by
    :class:`NumpyTD3Actor` / :class:`esnb.rl.td3.nets.TD3Actor`)."""
    low = tuple(float(x) for x in np.ravel(low))
    high = tuple(float(x) for x in np.ravel(high))
    if len(low) != act_dim or not all(np.isfinite(low + high)) or any(
            h <= lo for lo, h in zip(low, high)):
        raise ValueError(f"TD3 needs finite action bounds low < high for {act_dim} dimensions, "
                         f"got {low} and {high}")
    return PolicySpec(int(obs_dim), int(act_dim), tuple(hidden), activation="tanh",
                      discrete=False, low=low, high=high)


def actor_mlp(spec: PolicySpec) -> MLP:
    """The actor's network: the spec's MLP with a tanh output (before the affine squash)."""
    return MLP(spec.sizes, activation=spec.activation, output="tanh")


def init_actor(spec: PolicySpec, rng: np.random.Generator) -> np.ndarray:
    """Flat parameters as torch's ``nn.Linear`` default draws them: weights and biases
    ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))`` (CEM-RL's initial mean is such an actor)."""
    return init_fan_in(spec.mlp, rng)


class NumpyTD3Actor:
    """The actor's forward pass in numpy for rollouts: ``mid + half * tanh(mlp(obs))``.

    One observation at a time on ES's compiled fast path (:class:`NumpyPolicy` over the spec's
    linear-output MLP, then tanh and the squash). ``act(obs)`` returns a new array each call
    (callers add exploration noise to it).
    """

    def __init__(self, spec: PolicySpec, flat: np.ndarray):
        self._outputs = NumpyPolicy(spec, np.asarray(flat, dtype=np.float32)).outputs
        high = np.asarray(spec.high, dtype=np.float32)
        low = np.asarray(spec.low, dtype=np.float32)
        self.mid = (high + low) / 2
        self.half = (high - low) / 2
        self.low, self.high = low, high

    def act(self, obs) -> np.ndarray:
        a = np.tanh(self._outputs(obs))
        a *= self.half
        a += self.mid
        return a
