"""IMPALA's actor-critic (Espeholt et al. 2018, arXiv 1802.01561): a policy head and a value
head over one flat float32 parameter vector, in torch for the learner and numpy for actors.

The flat vector is a :class:`~esnb.nets.Layout` (:attr:`ActorCriticSpec.layout`): the policy
MLP, the value MLP (one output), then, for continuous actions, one log-std per action
dimension (state-independent, as in most continuous actor-critics). Actors only need the
policy part and the log-stds (:attr:`ActorCriticSpec.actor_layout`,
:meth:`ActorCriticSpec.actor_params`), which is what the learner publishes.

On frames (``ActorCriticSpec(torso=ConvTorso(...))``, MinAtar and Atari) the network is the
paper's feed-forward one for Atari (Espeholt et al. 2018, figure 3, without the LSTM it adds
on DMLab): a conv torso (:mod:`esnb.nets.conv`), one shared fully connected layer ``fc``
(ReLU; 256 after IMPALA's torsos, MinAtar's 128), then a linear policy head (logits) and a
linear baseline head, all in the same flat vector: ``torso | fc | policy | value``. Its forward
is torch's (:mod:`esnb.rl.impala.torch_ac`): actors of pixel tasks import torch (lazily, in
:class:`NumpyActor`), vector-observation actors stay on numpy. Observations are uint8 frames,
scaled inside the network (``ConvTorso.scale``: 1/255 for ALE, 1 for MinAtar).

Policies:

- discrete actions: categorical over the policy MLP's logits;
- Box actions: diagonal Gaussian ``N(mean(x), exp(log_std)^2)``; the *unclipped* sample is
  what log-probs refer to, the environment receives it clipped to the action bounds.

Observations are optionally normalised as ``clip((x - mean) / std, -obs_clip, obs_clip)`` with
statistics the learner publishes with the parameters.

Actors step with :class:`NumpyActor` (a batched numpy forward over all of an actor's
environments: torch costs ~5x numpy's per small forward, docs/notes.md); the learner
computes the same function in torch (:mod:`esnb.rl.impala.learner`). This module imports numpy
only, so actor workers never load torch.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from esnb.nets import MLP, Layout, init_normc
from esnb.nets.conv import HEAD_HIDDEN, ConvTorso
from esnb.nets.mlp import init_orthogonal, normalise_obs, run
from esnb.nets.policy import PolicySpec

#: log-stds are clamped to this range (actor and learner alike) so exp() stays finite
LOG_STD_RANGE = (-5.0, 2.0)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


@dataclass(frozen=True)
class ActorCriticSpec:
    """Sizes and kind of an IMPALA actor-critic.

    Attributes
    ----------
    policy : PolicySpec
        The policy MLP (outputs logits, or Gaussian means).
    value : PolicySpec
        The value MLP (one output).
    init_log_std : float
        Initial log-std of Gaussian policies (the ``init_log_std`` setting).
    torso : ConvTorso, optional
        A conv torso over uint8 frames ``torso.in_shape``; ``policy`` and ``value`` are then
        the linear heads on the shared ``fc`` layer (their ``obs_dim`` is its width).
    """

    policy: PolicySpec
    value: PolicySpec
    init_log_std: float
    torso: ConvTorso | None = None

    def __post_init__(self):
        if self.value.act_dim != 1 or self.value.obs_dim != self.policy.obs_dim:
            raise ValueError("the value MLP must read the policy's observations and output 1")
        if self.torso is not None and (self.policy.hidden or self.value.hidden):
            raise ValueError("after a conv torso the policy and value heads are linear")

    @classmethod
    def for_spaces(cls, observation_space, action_space, hidden: tuple[int, ...],
                   activation: str, init_log_std: float,
                   torso: ConvTorso | None = None) -> ActorCriticSpec:
        """The spec for gymnasium spaces (Box observations; Discrete or Box actions) with the
        run's ``hidden``, ``activation`` and ``init_log_std`` settings; with a ``torso`` the
        frames' network (``hidden`` and ``activation`` are then the paper's: one ReLU layer of
        :data:`~esnb.nets.conv.HEAD_HIDDEN` units)."""
        if torso is not None:
            from gymnasium import spaces

            width = HEAD_HIDDEN[torso.kind]
            features = spaces.Box(-np.inf, np.inf, (width,), np.float32)
            policy = PolicySpec.for_spaces(features, action_space, hidden=(),
                                           activation="relu")
            return cls(policy, PolicySpec(width, 1, (), activation="relu"),
                       float(init_log_std), torso)
        policy = PolicySpec.for_spaces(observation_space, action_space, hidden=hidden,
                                       activation=activation)
        value = PolicySpec(policy.obs_dim, 1, tuple(hidden), activation=activation)
        return cls(policy, value, float(init_log_std))

    @property
    def discrete(self) -> bool:
        return self.policy.discrete

    @property
    def obs_dim(self) -> int:
        """One observation's size (frames: ``C * H * W``)."""
        return self.policy.obs_dim if self.torso is None else math.prod(self.torso.in_shape)

    @property
    def obs_dtype(self) -> np.dtype:
        """uint8 frames (a quarter of float32's bytes in unrolls), float32 vectors."""
        return np.dtype(np.uint8 if self.torso is not None else np.float32)

    @functools.cached_property
    def fc(self) -> MLP | None:
        """The shared ReLU layer after a conv torso (None without one)."""
        if self.torso is None:
            return None
        return MLP((self.torso.out_dim, self.policy.obs_dim), "relu", output="relu")

    def _trunk(self) -> list:
        return [] if self.torso is None else [("torso", self.torso), ("fc", self.fc)]

    @property
    def act_dim(self) -> int:
        return self.policy.act_dim

    @property
    def n_log_std(self) -> int:
        return 0 if self.discrete else self.act_dim

    @functools.cached_property
    def layout(self) -> Layout:
        """The learner's vector: (``torso``, ``fc``,) ``policy``, ``value`` and ``log_std``
        (empty if discrete)."""
        return Layout([*self._trunk(), ("policy", self.policy.mlp), ("value", self.value.mlp),
                       ("log_std", self.n_log_std)])

    @functools.cached_property
    def actor_layout(self) -> Layout:
        """An actor's vector: (``torso``, ``fc``,) ``policy`` and ``log_std``."""
        return Layout([*self._trunk(), ("policy", self.policy.mlp),
                       ("log_std", self.n_log_std)])

    @property
    def num_params(self) -> int:
        return self.layout.num_params

    def actor_params(self, flat: np.ndarray) -> np.ndarray:
        """What an actor needs (everything but the value head), as one new float32 vector."""
        parts = self.layout.split(np.asarray(flat, dtype=np.float32))
        return self.actor_layout.join(**{name: parts[name] for name, _ in self.actor_layout.parts})

    def to_dict(self) -> dict:
        out = {"policy": self.policy.to_dict(), "value": self.value.to_dict(),
               "init_log_std": self.init_log_std}
        if self.torso is not None:
            out["torso"] = {"kind": self.torso.kind, "in_shape": list(self.torso.in_shape),
                            "scale": self.torso.scale}
        return out


#: how :func:`init_actor_critic` draws the network (the ``init_scheme`` setting)
INIT_SCHEMES = ("default", "orthogonal")


def init_actor_critic(spec: ActorCriticSpec, rng: np.random.Generator,
                      scheme: str = "default") -> np.ndarray:
    """Initial flat parameters, log-stds at ``init_log_std``.

    ``default``: normalised-column init, a near-uniform first policy (output layer scaled to
    0.01), a unit-scale value output; a conv torso takes torch's default init
    (:meth:`~esnb.nets.conv.ConvTorso.init`), the ``fc`` layer unit-norm columns.
    ``orthogonal``: OpenAI baselines' A2C/PPO init: orthogonal weights and zero biases, gain
    sqrt(2) in the torso, ``fc`` and hidden layers, 0.01 on the policy's output, 1 on the value's.
    """
    if scheme not in INIT_SCHEMES:
        raise ValueError(f"init_scheme must be one of {INIT_SCHEMES}, got {scheme!r}")
    trunk = {}
    if scheme == "orthogonal":
        relu = float(np.sqrt(2.0))
        if spec.torso is not None:
            trunk = {"torso": spec.torso.init(rng, "orthogonal"),
                     "fc": init_orthogonal(spec.fc, rng, relu, relu)}
        pi = init_orthogonal(spec.policy.mlp, rng, relu, 0.01)
        v = init_orthogonal(spec.value.mlp, rng, relu, 1.0)
    else:
        if spec.torso is not None:
            trunk = {"torso": spec.torso.init(rng), "fc": init_normc(spec.fc, rng, out_std=1.0)}
        pi = init_normc(spec.policy.mlp, rng, out_std=0.01)
        v = init_normc(spec.value.mlp, rng, out_std=1.0)
    return spec.layout.join(**trunk, policy=pi, value=v,
                            log_std=np.full(spec.n_log_std, spec.init_log_std))


# --------------------------------------------------------------------------------------------
# numpy: the actors' fast path
# --------------------------------------------------------------------------------------------
class NumpyActor:
    """Batched numpy policy over ``[E, obs_dim]`` observations: samples actions and log-probs
    (a conv torso's logits come from torch, :func:`esnb.rl.impala.torch_ac.frame_logits`).

    Parameters
    ----------
    spec : ActorCriticSpec
    actor_params : ndarray of float32
        :meth:`ActorCriticSpec.actor_params` of the learner's flat vector.
    obs_mean, obs_std : ndarray, optional
        Observation normalisation (None: raw observations).
    """

    def __init__(self, spec: ActorCriticSpec, actor_params: np.ndarray, obs_mean=None,
                 obs_std=None):
        p = np.array(actor_params, dtype=np.float32)  # a copy: the layers are views of it
        n = spec.actor_layout.num_params
        if p.shape != (n,):
            raise ValueError(f"actor parameters must have shape ({n},), got {p.shape}")
        self.spec = spec
        parts = spec.actor_layout.split(p)
        if spec.torso is not None:  # frames: torch's forward (imported here, not by vectors)
            import torch

            self._flat = torch.from_numpy(p)
        else:
            self._layers = spec.policy.mlp.unpack(parts["policy"])
        self._mean = None if obs_mean is None else np.asarray(obs_mean, np.float32)
        self._std = None if obs_std is None else np.asarray(obs_std, np.float32)
        self._clip = float(spec.policy.obs_clip)
        if not spec.discrete:
            log_std = np.clip(parts["log_std"], *LOG_STD_RANGE).astype(np.float64)
            self.log_std = log_std
            self.std = np.exp(log_std)
            self._logp_const = -float(log_std.sum()) - spec.act_dim * _HALF_LOG_2PI
            self._low = np.asarray(spec.policy.low, np.float32) if spec.policy.low else None
            self._high = np.asarray(spec.policy.high, np.float32) if spec.policy.high else None

    def outputs(self, obs: np.ndarray) -> np.ndarray:
        """Logits (discrete) or Gaussian means for a batch ``[E, obs_dim]`` (float32)."""
        if self.spec.torso is not None:
            from esnb.rl.impala.torch_ac import frame_logits

            return frame_logits(self.spec, self._flat, obs)
        x = np.asarray(obs, dtype=np.float32).reshape(len(obs), -1)
        if self._mean is not None:
            x = normalise_obs(x, self._mean, self._std, self._clip)
        return run(self._layers, x)

    def sample(self, obs: np.ndarray, rng: np.random.Generator):
        """Draw one action per row from ``rng``.

        Returns
        -------
        actions : ndarray
            int64 ``[E]`` (discrete) or float32 ``[E, act_dim]`` unclipped samples.
        log_probs : ndarray of float32, shape [E]
            log mu(a|x) of those actions.
        """
        out = self.outputs(obs).astype(np.float64)
        if self.spec.discrete:
            out -= out.max(axis=1, keepdims=True)
            log_z = np.log(np.exp(out).sum(axis=1, keepdims=True))
            logp_all = out - log_z
            cdf = np.cumsum(np.exp(logp_all), axis=1)
            u = rng.random((len(out), 1))
            a = np.minimum((u > cdf).sum(axis=1), out.shape[1] - 1)
            return a.astype(np.int64), logp_all[np.arange(len(a)), a].astype(np.float32)
        z = rng.standard_normal(out.shape)
        a = out + self.std * z
        logp = self._logp_const - 0.5 * np.square(z).sum(axis=1)
        return a.astype(np.float32), logp.astype(np.float32)

    def env_actions(self, actions: np.ndarray) -> np.ndarray:
        """Sampled actions as the environment takes them (Box: clipped to the bounds)."""
        if self.spec.discrete or self._low is None:
            return actions
        return np.clip(actions, self._low, self._high)

    def greedy(self, obs: np.ndarray) -> np.ndarray:
        """The most likely action per row (argmax, or the clipped mean)."""
        out = self.outputs(obs)
        if self.spec.discrete:
            return out.argmax(axis=1)
        return self.env_actions(out)
