"""Networks of Ape-X (Horgan et al. 2018): a dueling Q-network (DQN) and the DPG actor and
critic, as :class:`~esnb.nets.Layout` s of :class:`~esnb.nets.MLP` s over one flat float32
vector: the learner's torch modules (:mod:`esnb.rl.apex.torch_nets`) differentiate it, actors read
it back in numpy (no torch), and it is what the learner publishes and checkpoints.

Dueling architecture: Wang et al. 2016, "Dueling Network Architectures for Deep RL":
``Q(s, a) = V(s) + A(s, a) - mean_a A(s, a)``.

On frames (``QNetSpec(torso=ConvTorso(...))``) the torso is a paper's convolutional one
(:mod:`esnb.nets.conv`) and each dueling stream has its own hidden layer, as in Wang et al.;
its forward is torch's (:mod:`esnb.rl.apex.torch_q`, imported only then), so actors of
pixel tasks import torch and vector-observation actors do not.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from esnb.nets import MLP, Layout
from esnb.nets.conv import ConvTorso
from esnb.nets.mlp import run

ACTIVATIONS = ("relu", "tanh")


def _check_sizes(name: str, obs_dim: int, out_dim: int, hidden: tuple[int, ...],
                 activation: str) -> None:
    if obs_dim < 1 or out_dim < 1:
        raise ValueError(f"{name}: input and output sizes must be >= 1, got {obs_dim}, {out_dim}")
    if not hidden or any(h < 1 for h in hidden):
        raise ValueError(f"{name}: hidden sizes must be one or more integers >= 1, got {hidden}")
    if activation not in ACTIVATIONS:
        raise ValueError(f"{name}: activation must be one of {ACTIVATIONS}, got {activation!r}")


@dataclass(frozen=True)
class QNetSpec:
    """A (dueling) Q-network over a flat observation, or over frames with a conv torso.

    Attributes
    ----------
    obs_dim, n_actions : int
        ``obs_dim``: the observation's size (frames: ``C * H * W``).
    hidden : tuple of int
        Vector observations: the MLP torso's sizes, the heads linear layers on the last one.
        Frames: the hidden layer of each head (one size): MinAtar's DQN has one fully
        connected layer of 128 after its convolution (Young & Tian 2019, section 4), the
        Nature DQN one of 512 (Mnih et al. 2015), and Wang et al.'s dueling streams each have
        their own.
    dueling : bool
        Value + advantage heads (Ape-X); False: one head.
    activation : {"relu", "tanh"}
    torso : ConvTorso, optional
        A convolutional torso over frames ``torso.in_shape`` (uint8 observations); none: an
        MLP over float32 vectors.
    """

    obs_dim: int
    n_actions: int
    hidden: tuple[int, ...]
    dueling: bool
    activation: str = "relu"
    torso: ConvTorso | None = None

    def __post_init__(self):
        object.__setattr__(self, "hidden", tuple(int(h) for h in self.hidden))
        _check_sizes("QNetSpec", self.obs_dim, self.n_actions, self.hidden, self.activation)
        if self.torso is not None:
            if int(np.prod(self.torso.in_shape)) != self.obs_dim:
                raise ValueError(f"QNetSpec: obs_dim {self.obs_dim} is not the torso's frames "
                                 f"{self.torso.in_shape}")
            if len(self.hidden) != 1:
                raise ValueError(f"QNetSpec: a conv torso's heads take one hidden size, got "
                                 f"{self.hidden}")

    @property
    def obs_shape(self) -> tuple[int, ...]:
        """One observation's shape as actors store it: the frames, or ``(obs_dim,)``."""
        return self.torso.in_shape if self.torso is not None else (self.obs_dim,)

    @property
    def obs_dtype(self) -> np.dtype:
        """uint8 frames (a quarter of float32's bytes in actors and replay), float32 vectors."""
        return np.dtype(np.uint8 if self.torso is not None else np.float32)

    @cached_property
    def layout(self) -> Layout:
        """``torso`` (every hidden layer followed by the activation), then the linear heads
        on its output: ``value`` (1) and ``advantage`` (``n_actions``), or one ``head``.
        With a conv torso each head has the hidden layer ``hidden`` (activation) first."""
        if self.torso is not None:
            torso = self.torso

            def head(n: int) -> MLP:
                return MLP((self.torso.out_dim, *self.hidden, n), self.activation)
        else:
            torso = MLP((self.obs_dim, *self.hidden), self.activation, output=self.activation)

            def head(n: int) -> MLP:
                return MLP((self.hidden[-1], n))

        heads = ([("value", head(1)), ("advantage", head(self.n_actions))]
                 if self.dueling else [("head", head(self.n_actions))])
        return Layout([("torso", torso), *heads])

    @property
    def num_params(self) -> int:
        return self.layout.num_params

    def to_dict(self) -> dict:
        out = {"obs_dim": self.obs_dim, "n_actions": self.n_actions,
               "hidden": list(self.hidden), "dueling": self.dueling,
               "activation": self.activation}
        if self.torso is not None:
            out["torso"] = {"kind": self.torso.kind, "in_shape": list(self.torso.in_shape),
                            "scale": self.torso.scale}
        return out


@dataclass(frozen=True)
class DPGSpec:
    """The DPG actor and critic (Ape-X DPG appendix: critic 400-tanh-300, actor 300-tanh-200).

    The critic reads the observation in its first layer and the action joins at the second,
    as in DDPG; both hidden layers use ``tanh``. The actor's output is squashed with ``tanh``
    into the action bounds.

    Attributes
    ----------
    obs_dim, act_dim : int
    low, high : tuple of float
        Action bounds (finite).
    actor_hidden, critic_hidden : tuple of int
        Two sizes each.
    """

    obs_dim: int
    act_dim: int
    low: tuple[float, ...]
    high: tuple[float, ...]
    actor_hidden: tuple[int, ...]
    critic_hidden: tuple[int, ...]

    def __post_init__(self):
        for f in ("low", "high"):
            object.__setattr__(self, f, tuple(float(x) for x in getattr(self, f)))
        for f in ("actor_hidden", "critic_hidden"):
            object.__setattr__(self, f, tuple(int(h) for h in getattr(self, f)))
        _check_sizes("DPGSpec actor", self.obs_dim, self.act_dim, self.actor_hidden, "tanh")
        _check_sizes("DPGSpec critic", self.obs_dim, 1, self.critic_hidden, "tanh")
        if len(self.critic_hidden) != 2:
            raise ValueError(f"critic_hidden must have two sizes (the action joins at the "
                             f"second layer), got {self.critic_hidden}")
        if len(self.low) != self.act_dim or len(self.high) != self.act_dim:
            raise ValueError(f"low/high must have act_dim={self.act_dim} entries")
        lo, hi = np.array(self.low), np.array(self.high)
        if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) and np.all(hi > lo)):
            raise ValueError(f"DPG needs finite action bounds with high > low, got {self.low}, "
                             f"{self.high}")

    @cached_property
    def layout(self) -> Layout:
        """The published vector ``[actor | critic]``: the ``actor`` (tanh hidden layers and
        output, before the squash into the bounds), then the critic's two pieces:
        ``critic_in`` (the observation's tanh layer) and ``critic_out`` (``[h1, action]`` ->
        tanh -> ``q``)."""
        actor = MLP((self.obs_dim, *self.actor_hidden, self.act_dim), "tanh", output="tanh")
        return Layout([("actor", actor), *self.critic_layout.parts])

    @cached_property
    def critic_layout(self) -> Layout:
        """The critic's own vector (its part of :attr:`layout`)."""
        h1, h2 = self.critic_hidden
        return Layout([("critic_in", MLP((self.obs_dim, h1), "tanh", output="tanh")),
                       ("critic_out", MLP((h1 + self.act_dim, h2, 1), "tanh"))])

    @property
    def num_params(self) -> int:
        return self.layout.num_params

    def to_dict(self) -> dict:
        return {"obs_dim": self.obs_dim, "act_dim": self.act_dim, "low": list(self.low),
                "high": list(self.high), "actor_hidden": list(self.actor_hidden),
                "critic_hidden": list(self.critic_hidden)}


# -- numpy forward passes (actors) -----------------------------------------------------------
def unpack(spec: QNetSpec | DPGSpec, flat) -> dict[str, list[tuple]]:
    """``{part: layers}``: every part's :meth:`esnb.nets.MLP.unpack` (views of a published
    vector ``flat``, float32). The forwards below take these or ``flat`` itself; an actor
    unpacks once per published vector (a forward of a few observations is overhead-bound:
    ~15 us from unpacked layers, ~30 us through ``MLP.forward`` on the parts of ``flat``)."""
    flat = np.asarray(flat, dtype=np.float32)
    if getattr(spec, "torso", None) is not None:  # frames: torch's forward reads the vector
        import torch

        return {"flat": torch.from_numpy(flat)}
    parts = spec.layout.split(flat)
    return {name: mlp.unpack(parts[name]) for name, mlp in spec.layout.parts}


def _unpacked(spec, params) -> dict[str, list[tuple]]:
    return params if isinstance(params, dict) else unpack(spec, params)


def q_values(spec: QNetSpec, params, obs: np.ndarray) -> np.ndarray:
    """Q-values ``[batch, n_actions]`` of a batch of observations (float32); ``params``: the
    flat vector or :func:`unpack` of it."""
    params = _unpacked(spec, params)
    if spec.torso is not None:
        from esnb.rl.apex.torch_q import frame_q_values

        return frame_q_values(spec, params["flat"], obs)
    h = run(params["torso"], np.asarray(obs, dtype=np.float32).reshape(-1, spec.obs_dim))
    if not spec.dueling:
        return run(params["head"], h)
    v = run(params["value"], h)
    a = run(params["advantage"], h)
    return v + a - a.mean(axis=1, keepdims=True)


def dpg_action(spec: DPGSpec, params, obs: np.ndarray) -> np.ndarray:
    """Deterministic actions ``[batch, act_dim]`` of the DPG actor (numpy, float32);
    ``params``: the published ``[actor | critic]`` vector or :func:`unpack` of it."""
    x = np.asarray(obs, dtype=np.float32).reshape(-1, spec.obs_dim)
    y = run(_unpacked(spec, params)["actor"], x)
    low = np.asarray(spec.low, dtype=np.float32)
    high = np.asarray(spec.high, dtype=np.float32)
    return low + (y + 1.0) * (0.5 * (high - low))


def dpg_q(spec: DPGSpec, params, obs: np.ndarray, action: np.ndarray) -> np.ndarray:
    """Critic values ``[batch]`` (numpy, float32)."""
    params = _unpacked(spec, params)
    x = np.asarray(obs, dtype=np.float32).reshape(-1, spec.obs_dim)
    a = np.asarray(action, dtype=np.float32).reshape(-1, spec.act_dim)
    h = run(params["critic_in"], x)
    return run(params["critic_out"], np.concatenate([h, a], axis=1))[:, 0]


# -- transitions and initial priorities (actors; numpy only) ----------------------------------
def transition_spec(obs_dim: int | tuple[int, ...], act_shape: tuple[int, ...] = (),
                    act_dtype: str = "int64", obs_dtype=np.float32) -> dict:
    """Replay fields of an n-step transition: observations of shape ``obs_dim`` (an int: a
    vector) and ``obs_dtype`` (float32 vectors; uint8 frames)."""
    shape = (int(obs_dim),) if np.ndim(obs_dim) == 0 else tuple(int(d) for d in obs_dim)
    obs = (shape, np.dtype(obs_dtype))
    return {"obs": obs, "action": (tuple(act_shape), np.dtype(act_dtype)),
            "reward": ((), np.float32), "next_obs": obs, "discount": ((), np.float32)}


def dqn_td_errors(spec: QNetSpec, params, batch: dict) -> np.ndarray:
    """n-step TD errors from one network copy (an actor's): numpy, no target network.

    An actor has a single copy of the parameters, so the bootstrap uses it for both choosing
    and evaluating the next action (``max_a q``); Ape-X uses these only as initial priorities.
    """
    params = _unpacked(spec, params)
    q = q_values(spec, params, batch["obs"])
    q_sa = q[np.arange(len(q)), batch["action"]]
    q_next = q_values(spec, params, batch["next_obs"]).max(axis=1)
    target = batch["reward"] + batch["discount"] * q_next
    return (target - q_sa).astype(np.float64)


def dpg_td_errors(spec: DPGSpec, params, batch: dict) -> np.ndarray:
    """n-step TD errors from an actor's single copy of both networks (numpy)."""
    params = _unpacked(spec, params)
    q = dpg_q(spec, params, batch["obs"], batch["action"])
    a_next = dpg_action(spec, params, batch["next_obs"])
    q_next = dpg_q(spec, params, batch["next_obs"], a_next)
    return (batch["reward"] + batch["discount"] * q_next - q).astype(np.float64)
