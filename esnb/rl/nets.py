"""Networks of Ape-X (Horgan et al. 2018): a dueling Q-network (DQN) and the DPG actor and
critic, in torch for the learner and in numpy for the actors.

Each network is described by a frozen spec whose :meth:`shapes` fixes the order and shapes of
its parameters. The torch module registers its parameters in that order, so
``flat_params(module)`` is one float32 vector that the numpy forward functions read back with
:func:`unflatten`: actors never import torch, and one vector is what the learner publishes.

Dueling architecture: Wang et al. 2016, "Dueling Network Architectures for Deep RL":
``Q(s, a) = V(s) + A(s, a) - mean_a A(s, a)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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
    """A (dueling) Q-network over a flat observation.

    Attributes
    ----------
    obs_dim, n_actions : int
    hidden : tuple of int
        Torso sizes; the dueling heads are linear layers on the last one.
    dueling : bool
        Value + advantage heads (Ape-X); False: one linear head.
    activation : {"relu", "tanh"}
    """

    obs_dim: int
    n_actions: int
    hidden: tuple[int, ...] = (64, 64)
    dueling: bool = True
    activation: str = "relu"

    def __post_init__(self):
        object.__setattr__(self, "hidden", tuple(int(h) for h in self.hidden))
        _check_sizes("QNetSpec", self.obs_dim, self.n_actions, self.hidden, self.activation)

    def shapes(self) -> list[tuple[int, ...]]:
        sizes = (self.obs_dim, *self.hidden)
        out = []
        for i, o in zip(sizes[:-1], sizes[1:], strict=True):
            out += [(o, i), (o,)]
        last = sizes[-1]
        if self.dueling:
            out += [(1, last), (1,), (self.n_actions, last), (self.n_actions,)]
        else:
            out += [(self.n_actions, last), (self.n_actions,)]
        return out

    @property
    def num_params(self) -> int:
        return sum(int(np.prod(s)) for s in self.shapes())

    def to_dict(self) -> dict:
        return {"obs_dim": self.obs_dim, "n_actions": self.n_actions,
                "hidden": list(self.hidden), "dueling": self.dueling,
                "activation": self.activation}


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
    actor_hidden: tuple[int, ...] = (300, 200)
    critic_hidden: tuple[int, ...] = (400, 300)

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

    def actor_shapes(self) -> list[tuple[int, ...]]:
        sizes = (self.obs_dim, *self.actor_hidden, self.act_dim)
        out = []
        for i, o in zip(sizes[:-1], sizes[1:], strict=True):
            out += [(o, i), (o,)]
        return out

    def critic_shapes(self) -> list[tuple[int, ...]]:
        h1, h2 = self.critic_hidden
        return [(h1, self.obs_dim), (h1,), (h2, h1 + self.act_dim), (h2,), (1, h2), (1,)]

    @property
    def actor_params(self) -> int:
        return sum(int(np.prod(s)) for s in self.actor_shapes())

    @property
    def critic_params(self) -> int:
        return sum(int(np.prod(s)) for s in self.critic_shapes())

    def to_dict(self) -> dict:
        return {"obs_dim": self.obs_dim, "act_dim": self.act_dim, "low": list(self.low),
                "high": list(self.high), "actor_hidden": list(self.actor_hidden),
                "critic_hidden": list(self.critic_hidden)}


def unflatten(flat: np.ndarray, shapes: list[tuple[int, ...]]) -> list[np.ndarray]:
    """Views of ``flat`` with the given shapes, in order (sizes must add up)."""
    flat = np.asarray(flat)
    total = sum(int(np.prod(s)) for s in shapes)
    if flat.ndim != 1 or flat.size != total:
        raise ValueError(f"expected a flat vector of {total} parameters, got shape {flat.shape}")
    out, pos = [], 0
    for s in shapes:
        k = int(np.prod(s))
        out.append(flat[pos:pos + k].reshape(s))
        pos += k
    return out


# -- numpy forward passes (actors) -----------------------------------------------------------
def _act(x: np.ndarray, kind: str) -> np.ndarray:
    if kind == "relu":
        return np.maximum(x, 0.0, out=x)
    return np.tanh(x, out=x)


def q_values(spec: QNetSpec, params: list[np.ndarray], obs: np.ndarray) -> np.ndarray:
    """Q-values ``[batch, n_actions]`` of a batch of observations (float32)."""
    x = np.asarray(obs, dtype=np.float32).reshape(-1, spec.obs_dim)
    n_torso = 2 * len(spec.hidden)
    for k in range(0, n_torso, 2):
        x = _act(x @ params[k].T + params[k + 1], spec.activation)
    if not spec.dueling:
        return x @ params[n_torso].T + params[n_torso + 1]
    v = x @ params[n_torso].T + params[n_torso + 1]
    a = x @ params[n_torso + 2].T + params[n_torso + 3]
    return v + a - a.mean(axis=1, keepdims=True)


def dpg_action(spec: DPGSpec, params: list[np.ndarray], obs: np.ndarray) -> np.ndarray:
    """Deterministic actions ``[batch, act_dim]`` of the DPG actor (numpy, float32)."""
    x = np.asarray(obs, dtype=np.float32).reshape(-1, spec.obs_dim)
    n = len(params)
    for k in range(0, n - 2, 2):
        x = np.tanh(x @ params[k].T + params[k + 1])
    y = np.tanh(x @ params[n - 2].T + params[n - 1])
    low = np.asarray(spec.low, dtype=np.float32)
    high = np.asarray(spec.high, dtype=np.float32)
    return low + (y + 1.0) * (0.5 * (high - low))


def dpg_q(spec: DPGSpec, params: list[np.ndarray], obs: np.ndarray,
          action: np.ndarray) -> np.ndarray:
    """Critic values ``[batch]`` (numpy, float32)."""
    x = np.asarray(obs, dtype=np.float32).reshape(-1, spec.obs_dim)
    a = np.asarray(action, dtype=np.float32).reshape(-1, spec.act_dim)
    h = np.tanh(x @ params[0].T + params[1])
    h = np.tanh(np.concatenate([h, a], axis=1) @ params[2].T + params[3])
    return (h @ params[4].T + params[5])[:, 0]


# -- transitions and initial priorities (actors; numpy only) ----------------------------------
def transition_spec(obs_dim: int, act_shape: tuple[int, ...] = (),
                    act_dtype: str = "int64") -> dict:
    """Replay fields of an n-step transition (float32 observations)."""
    return {"obs": ((obs_dim,), np.float32), "action": (tuple(act_shape), np.dtype(act_dtype)),
            "reward": ((), np.float32), "next_obs": ((obs_dim,), np.float32),
            "discount": ((), np.float32)}


def dqn_td_errors(spec: QNetSpec, params: list[np.ndarray], batch: dict) -> np.ndarray:
    """n-step TD errors from one network copy (an actor's): numpy, no target network.

    An actor has a single copy of the parameters, so the bootstrap uses it for both choosing
    and evaluating the next action (``max_a q``); Ape-X uses these only as initial priorities.
    """
    q = q_values(spec, params, batch["obs"])
    q_sa = q[np.arange(len(q)), batch["action"]]
    q_next = q_values(spec, params, batch["next_obs"]).max(axis=1)
    target = batch["reward"] + batch["discount"] * q_next
    return (target - q_sa).astype(np.float64)


def split_dpg_params(spec: DPGSpec, flat: np.ndarray) -> tuple[list, list]:
    """A published DPG vector ``[actor | critic]`` as the numpy parameter lists."""
    flat = np.asarray(flat, dtype=np.float32)
    na = spec.actor_params
    return unflatten(flat[:na], spec.actor_shapes()), unflatten(flat[na:], spec.critic_shapes())


def dpg_td_errors(spec: DPGSpec, actor: list[np.ndarray], critic: list[np.ndarray],
                  batch: dict) -> np.ndarray:
    """n-step TD errors from an actor's single copy of both networks (numpy)."""
    q = dpg_q(spec, critic, batch["obs"], batch["action"])
    a_next = dpg_action(spec, actor, batch["next_obs"])
    q_next = dpg_q(spec, critic, batch["next_obs"], a_next)
    return (batch["reward"] + batch["discount"] * q_next - q).astype(np.float64)
