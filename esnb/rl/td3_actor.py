"""The TD3 actor's numpy side (no torch): layout, initialisation, the rollout forward pass,
and the replay's transition fields. :mod:`esnb.rl.td3` has the torch side.

Pourchot and Sigaud 2019 (CEM-RL) / Lee et al. 2020 (AES-RL): the actor is a tanh MLP whose
output is squashed by tanh into the action bounds; CEM-RL's initial mean is a torch
``nn.Linear``-initialised actor.
"""

from __future__ import annotations

import math

import numpy as np

from esnb.policies.numpy_mlp import NumpyPolicy
from esnb.policies.spec import PolicySpec


def transition_spec(obs_dim: int, act_dim: int) -> dict:
    """The replay's fields per transition (``done`` is *termination*: a time limit is not)."""
    return {"obs": ((obs_dim,), "float32"), "action": ((act_dim,), "float32"),
            "reward": "float32", "next_obs": ((obs_dim,), "float32"), "done": "float32"}


def actor_spec(obs_dim: int, act_dim: int, low, high, hidden=(400, 300)) -> PolicySpec:
    """The actor's layout: a tanh MLP (its output squashed into the bounds by
    :class:`NumpyTD3Actor` / :class:`esnb.rl.td3.TD3Actor`)."""
    low = tuple(float(x) for x in np.ravel(low))
    high = tuple(float(x) for x in np.ravel(high))
    if len(low) != act_dim or not all(np.isfinite(low + high)) or any(
            h <= lo for lo, h in zip(low, high)):
        raise ValueError(f"TD3 needs finite action bounds low < high for {act_dim} dimensions, "
                         f"got {low} and {high}")
    return PolicySpec(int(obs_dim), int(act_dim), tuple(hidden), activation="tanh",
                      discrete=False, low=low, high=high)


def init_actor(spec: PolicySpec, rng: np.random.Generator) -> np.ndarray:
    """Flat parameters as torch's ``nn.Linear`` default draws them: weights and biases
    ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))`` (CEM-RL's initial mean is such an actor)."""
    flat = np.empty(spec.num_params, dtype=np.float32)
    for w, (o, i), b in spec.slices():
        bound = 1.0 / math.sqrt(i)
        flat[w] = rng.uniform(-bound, bound, size=o * i)
        flat[b] = rng.uniform(-bound, bound, size=o)
    return flat


class NumpyTD3Actor:
    """The actor's forward pass in numpy for rollouts: ``mid + half * tanh(mlp(obs))``.

    ``act(obs)`` returns a new array each call (callers add exploration noise to it).
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
