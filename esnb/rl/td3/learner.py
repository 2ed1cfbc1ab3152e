"""TD3 as CEM-RL and AES-RL use it: a shared twin critic, and actors trained against it.

Fujimoto et al. 2018, "Addressing Function Approximation Error in Actor-Critic Methods" (TD3);
networks and hyperparameters of Pourchot and Sigaud 2019 (CEM-RL), which Lee et al. 2020
(AES-RL) kept: actor 400-300 tanh with a tanh output scaled to the action bounds; twin critics
400-300 leaky ReLU on ``[s, a]``; batch 100, Adam 1e-3, discount 0.99, tau 0.005, target policy
noise 0.2 clipped at 0.5, policy delay 2.

In CEM-RL and AES-RL the critic and the actors learn *separately*, as the released codes do:

- :class:`CriticLearner` trains the twin critic with the TD3 target (clipped double Q, target
  policy smoothing) where the target policy is a given actor (AES-RL: the population mean;
  CEM-RL: the RL individual whose turn it is), soft-updating the target critic after every
  update (the released code's critic-only mode);
- :func:`train_actor` takes an individual's actor and ascends ``Q1(s, pi(s))`` for a number of
  steps with a fresh Adam (every step: with a frozen critic there is nothing to delay).

The policy delay applies where both learn together: :meth:`CriticLearner.td3_step` (plain TD3,
used by the tests and for reference).

An actor is one flat float32 vector in :class:`~esnb.nets.policy.PolicySpec` layout, so ES
samples, updates and ships one array and rollouts use :class:`~esnb.rl.td3.actor.NumpyTD3Actor`
(numpy: :mod:`esnb.rl.td3.actor` never imports torch).

:class:`TD3Config` has no defaults: the runners' settings (``esnb.runners.aesrl.config``) own
them, and :meth:`TD3Config.of` reads its fields from them by name. CPU sizes: this machine does
~270 critic updates/s at 400-300 and ~900/s at 64-64 (batch 100), so the laptop preset takes
64-64 and the paper preset 400-300.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from esnb.device import resolve_device, to_device
from esnb.nets import MLP
from esnb.nets.policy import PolicySpec
from esnb.nets.torch_mlp import FlatModule, forward
from esnb.rl.optim import adam_state, load_adam_state
from esnb.rl.td3.actor import NumpyTD3Actor, actor_mlp, actor_spec, init_actor, transition_spec

#: TD3's constants that no esnb runner varies (Fujimoto et al. 2018; torch's leaky ReLU slope)
FIXED = {"policy_delay": 2, "leaky_slope": 0.01}

@dataclass(frozen=True)
class TD3Config:
    """TD3's hyperparameters, built from a run's settings with :meth:`of`.

    Attributes
    ----------
    actor_hidden, critic_hidden : tuple of int
        Hidden sizes (paper: 400-300 both).
    batch_size : int
        Transitions per gradient step.
    actor_lr, critic_lr : float
        Adam step sizes.
    gamma : float
        Discount.
    tau : float
        Soft target update rate.
    policy_noise, noise_clip : float
        Target policy smoothing: ``N(0, policy_noise^2)`` clipped to ``+-noise_clip``, both in
        units of the action half-range.
    policy_delay : int
        Critic updates per actor update in :meth:`CriticLearner.td3_step`.
    leaky_slope : float
        Negative slope of the critic's leaky ReLU (torch's default 0.01).
    device : str
        Where :class:`CriticLearner` computes (``auto``, ``cpu``, ``cuda``, ``cuda:N``;
        resolved where it is built). :func:`train_actor`, on the evaluation workers, stays on
        the CPU.
    """

    actor_hidden: tuple[int, ...]
    critic_hidden: tuple[int, ...]
    batch_size: int
    actor_lr: float
    critic_lr: float
    gamma: float
    tau: float
    policy_noise: float
    noise_clip: float
    policy_delay: int
    leaky_slope: float
    device: str

    @classmethod
    def of(cls, settings: Any, **changes: Any) -> TD3Config:
        """The fields of ``settings`` (an AES-RL or CEM-RL config) with TD3's names, the
        :data:`FIXED` constants for the others, then ``changes``."""
        values = {f.name: FIXED[f.name] if f.name in FIXED else getattr(settings, f.name)
                  for f in fields(cls)}
        return cls(**{**values, **changes})

    def __post_init__(self):
        for name in ("actor_hidden", "critic_hidden"):
            sizes = tuple(int(h) for h in getattr(self, name))
            if not sizes or any(h < 1 for h in sizes):
                raise ValueError(f"{name} must be one or more sizes >= 1, got "
                                 f"{getattr(self, name)!r}")
            object.__setattr__(self, name, sizes)
        if int(self.batch_size) < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size!r}")
        for name in ("actor_lr", "critic_lr", "tau"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be > 0, got {v!r}")
        if not 0 <= self.gamma <= 1:
            raise ValueError(f"gamma must be in [0, 1], got {self.gamma!r}")
        if self.policy_noise < 0 or self.noise_clip < 0:
            raise ValueError("policy_noise and noise_clip must be >= 0")
        if int(self.policy_delay) < 1:
            raise ValueError(f"policy_delay must be >= 1, got {self.policy_delay!r}")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["actor_hidden"] = list(self.actor_hidden)
        d["critic_hidden"] = list(self.critic_hidden)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TD3Config:
        return cls(**d)


# -- the actor ------------------------------------------------------------------------------
class TD3Actor(FlatModule):
    """The actor in torch over one flat parameter vector (``self.flat``):
    ``mid + half * actor_mlp(obs)``."""

    def __init__(self, spec: PolicySpec, flat=None):
        super().__init__(spec.num_params, flat)
        self.spec = spec
        self.mlp = actor_mlp(spec)
        high = torch.tensor(spec.high, dtype=torch.float32)
        low = torch.tensor(spec.low, dtype=torch.float32)
        # "half" would shadow nn.Module.half()
        self.register_buffer("a_mid", (high + low) / 2, persistent=False)
        self.register_buffer("a_half", (high - low) / 2, persistent=False)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.a_mid + self.a_half * forward(self.mlp, self.flat, obs)


# -- the twin critic ------------------------------------------------------------------------
#: twin critics up to this width run as one batched pair (measured: a few % faster than the
#: heads one after the other at 64-64 and 128-128, 5-10% slower at 256-256 and 400-300)
BATCHED_MAX = 128


def _init_in_out(mlp: MLP, generator: torch.Generator | None) -> torch.Tensor:
    """``nn.Linear``'s default init with each weight drawn as an ``[in, out]`` matrix (the
    order this critic drew in when it stored ``x @ W`` weights: seeded runs keep their
    numbers), laid out ``[out, in]``."""
    parts = []
    for o, i in mlp.layer_shapes:
        bound = 1.0 / math.sqrt(i)
        parts.append(((torch.rand(i, o, generator=generator) * 2 - 1) * bound).T.reshape(-1))
        parts.append((torch.rand(o, generator=generator) * 2 - 1) * bound)
    return torch.cat(parts)


class TwinCritic(nn.Module):
    """Two Q-networks ``[s, a] -> 400 -> 300 -> 1`` (leaky ReLU): a population of two of one
    :class:`~esnb.nets.MLP` (``self.mlp``), Q1's flat vector then Q2's in one
    :class:`~esnb.nets.FlatModule` (``self.pair``).

    Small critics (width <= :data:`BATCHED_MAX`) run the pair as a population (one
    ``baddbmm`` per layer instead of two small matmuls: they are launch-bound on CPU); wider
    ones run the heads one after the other. The initial weights are drawn from ``generator``
    (torch's global one if None) unless ``flat`` is given.
    """

    def __init__(self, obs_dim: int, act_dim: int, hidden=(400, 300), slope: float = 0.01,
                 generator: torch.Generator | None = None, flat=None):
        super().__init__()
        self.mlp = MLP((obs_dim + act_dim, *hidden, 1), activation="leaky_relu", slope=slope)
        self.batched = max(self.mlp.sizes[1:-1]) <= BATCHED_MAX
        if flat is None:
            flat = torch.cat([_init_in_out(self.mlp, generator) for _head in range(2)])
        self.pair = FlatModule(2 * self.mlp.num_params, flat)

    def heads(self) -> torch.Tensor:
        """The parameters as ``[2, P]`` (a view: row 0 is Q1, row 1 is Q2)."""
        return self.pair.flat.view(2, self.mlp.num_params)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """Both Q values, ``[2, B]``."""
        x = torch.cat([obs, action], dim=-1)
        w = self.heads()
        if self.batched:
            return forward(self.mlp, w, x).squeeze(-1)
        q1, q2 = w.unbind()  # one [2, P] gradient for both heads
        return torch.stack([forward(self.mlp, q1, x), forward(self.mlp, q2, x)]).squeeze(-1)

    def q1(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """The first critic only, ``[B]`` (what the actor ascends)."""
        return forward(self.mlp, self.heads()[0], torch.cat([obs, action], dim=-1)).squeeze(-1)

    def flat(self) -> np.ndarray:
        return self.pair.params()

    def load_flat(self, flat) -> None:
        self.pair.load(flat)


def _tensors(batch: Mapping[str, np.ndarray], device) -> dict[str, torch.Tensor]:
    return {k: to_device(v, device) for k, v in batch.items()}


class CriticLearner:
    """The shared twin critic, its target and its Adam; trained against a given target policy.

    Parameters
    ----------
    spec : PolicySpec
        The actors' layout (:func:`actor_spec`): observation/action sizes and bounds.
    config : TD3Config
    seed : int
        Seeds the critic's initialisation and the target policy noise (a ``torch.Generator``
        on the CPU, whose draws are moved to the device: the same numbers on every device).

    Attributes
    ----------
    updates : int
        Critic updates made.
    version : int
        Bumped by :meth:`publish` (the number of published weights).
    """

    def __init__(self, spec: PolicySpec, config: TD3Config, seed: int = 0):
        self.spec = spec
        self.config = config
        self.device = resolve_device(config.device)
        self.generator = torch.Generator().manual_seed(int(seed))
        self.critic = TwinCritic(spec.obs_dim, spec.act_dim, config.critic_hidden,
                                 config.leaky_slope, self.generator).to(self.device)
        self.target = copy.deepcopy(self.critic)
        for p in self.target.parameters():
            p.requires_grad_(False)
        self.opt = torch.optim.Adam(self.critic.parameters(), lr=config.critic_lr)
        self.target_actor = TD3Actor(spec).to(self.device)
        self.target_actor.requires_grad_(False)
        self.actor: TD3Actor | None = None  # only for td3_step
        self.actor_target: TD3Actor | None = None
        self.actor_opt = None
        self.updates = 0
        self.version = 0

    def set_target_policy(self, flat) -> None:
        """The policy whose value the critic learns (``pi'`` of the TD3 target)."""
        self.target_actor.load(flat)

    def _critic_loss(self, b: dict[str, torch.Tensor], target_actor: TD3Actor):
        c = self.config
        with torch.no_grad():
            next_a = target_actor(b["next_obs"])
            half = target_actor.a_half
            noise = torch.randn(next_a.shape, generator=self.generator).to(self.device)
            noise = noise * c.policy_noise
            noise = noise.clamp(-c.noise_clip, c.noise_clip) * half
            low, high = target_actor.a_mid - half, target_actor.a_mid + half
            next_a = torch.maximum(torch.minimum(next_a + noise, high), low)
            q_next = self.target(b["next_obs"], next_a).min(dim=0).values
            y = b["reward"] + c.gamma * (1.0 - b["done"]) * q_next
        q = self.critic(b["obs"], b["action"])
        return F.mse_loss(q[0], y) + F.mse_loss(q[1], y), q

    def _soft_update(self, net: nn.Module, target: nn.Module) -> None:
        tau = self.config.tau
        with torch.no_grad():
            for p, t in zip(net.parameters(), target.parameters()):
                t.mul_(1.0 - tau).add_(p, alpha=tau)

    def update(self, batch: Mapping[str, np.ndarray]) -> tuple[float, float]:
        """One critic update (and target soft update); returns ``(loss, mean Q1)``."""
        b = _tensors(batch, self.device)
        loss, q = self._critic_loss(b, self.target_actor)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        self._soft_update(self.critic, self.target)
        self.updates += 1
        return float(loss.detach()), float(q[0].detach().mean())

    def train(self, batches: Mapping[str, np.ndarray], n: int | None = None) -> dict[str, float]:
        """Updates on stacked batches ``{field: [k, B, ...]}`` (the first ``n`` of them)."""
        k = len(next(iter(batches.values())))
        n = k if n is None else min(int(n), k)
        losses = np.empty(n)
        qs = np.empty(n)
        for j in range(n):
            losses[j], qs[j] = self.update({f: v[j] for f, v in batches.items()})
        return {"updates": n, "critic_loss": float(losses.mean()) if n else float("nan"),
                "q_mean": float(qs.mean()) if n else float("nan")}

    def td3_step(self, batch: Mapping[str, np.ndarray]) -> dict[str, float]:
        """Plain TD3: a critic update with the learner's own actor target, and every
        ``policy_delay`` updates an actor step and soft updates of both targets."""
        c = self.config
        if self.actor is None:
            rng = np.random.default_rng(int(torch.randint(2**31 - 1, (1,),
                                                          generator=self.generator)))
            self.actor = TD3Actor(self.spec, init_actor(self.spec, rng)).to(self.device)
            self.actor_target = copy.deepcopy(self.actor)
            self.actor_target.requires_grad_(False)
            self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=c.actor_lr)
        b = _tensors(batch, self.device)
        loss, q = self._critic_loss(b, self.actor_target)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        self.updates += 1
        out = {"critic_loss": float(loss.detach()), "actor_loss": float("nan")}
        if self.updates % c.policy_delay == 0:
            actor_loss = -self.critic.q1(b["obs"], self.actor(b["obs"])).mean()
            self.actor_opt.zero_grad(set_to_none=True)
            actor_loss.backward()
            self.actor_opt.step()
            self._soft_update(self.critic, self.target)
            self._soft_update(self.actor, self.actor_target)
            out["actor_loss"] = float(actor_loss.detach())
        return out

    def publish(self) -> tuple[int, np.ndarray]:
        """A new version of the critic's weights: ``(version, flat float32)``."""
        self.version += 1
        return self.version, self.critic.flat()

    # -- state -------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, np.ndarray]:
        """Critic, target, Adam moments and counters as arrays (checkpoints, recovery)."""
        adam = adam_state(self.opt, self.critic)
        return {"critic": self.critic.flat(), "critic_target": self.target.flat(),
                "critic_adam_m": adam["m"], "critic_adam_v": adam["v"],
                "critic_adam_step": adam["step"], "target_policy": self.target_actor.params(),
                "critic_counters": np.array([self.updates, self.version], dtype=np.int64),
                "critic_rng": self.generator.get_state().numpy().copy()}

    def load_state_dict(self, state: Mapping[str, np.ndarray]) -> None:
        """A state saved before the critic was one flat vector (Adam's steps per tensor) holds
        each weight ``[in, out]``: it is laid out ``[out, in]``, its moments with it."""
        steps = np.asarray(state["critic_adam_step"], dtype=np.float64).ravel()
        mlp = self.critic.mlp
        order = np.arange(2 * mlp.num_params)
        if steps.size > 1:  # every tensor took every step
            head = order[:mlp.num_params]
            head = np.concatenate([part for w, (o, i), b in mlp.slices()
                                   for part in (head[w].reshape(i, o).T.ravel(), head[b])])
            order, steps = np.concatenate([head, head + mlp.num_params]), steps.max(keepdims=True)
        flat = {k: np.asarray(state[k], dtype=np.float32).ravel()[order]
                for k in ("critic", "critic_target", "critic_adam_m", "critic_adam_v")}
        self.critic.load_flat(flat["critic"])
        self.target.load_flat(flat["critic_target"])
        load_adam_state(self.opt, self.critic, {"m": flat["critic_adam_m"],
                                                "v": flat["critic_adam_v"], "step": steps})
        self.target_actor.load(state["target_policy"])
        self.updates, self.version = (int(x) for x in state["critic_counters"])
        self.generator.set_state(torch.as_tensor(np.asarray(state["critic_rng"],
                                                            dtype=np.uint8)))


def critic_from_flat(spec: PolicySpec, config: TD3Config, flat) -> TwinCritic:
    """A frozen :class:`TwinCritic` holding published weights (for actor training)."""
    critic = TwinCritic(spec.obs_dim, spec.act_dim, config.critic_hidden, config.leaky_slope,
                        flat=flat)
    critic.requires_grad_(False)
    return critic


def train_actor(spec: PolicySpec, config: TD3Config, actor_flat, critic: TwinCritic,
                obs_batches: Iterable[np.ndarray], steps: int) -> tuple[np.ndarray, dict]:
    """Train an individual's actor: ``steps`` Adam steps (fresh optimiser) on ``-Q1(s, pi(s))``.

    Parameters
    ----------
    actor_flat : array
        The individual (flat, :func:`actor_spec` layout).
    critic : TwinCritic
        The shared critic (frozen).
    obs_batches : iterable of arrays ``[k, B, obs_dim]``
        Observations from the replay, in chunks of ``k`` batches; consumed until ``steps``.
    steps : int
        Actor steps (AES-RL: the env steps of the last 10 episodes).

    Returns
    -------
    (numpy.ndarray, dict)
        The trained flat actor and ``{"steps", "actor_loss_first", "actor_loss_last"}``.
    """
    actor = TD3Actor(spec, actor_flat)
    opt = torch.optim.Adam(actor.parameters(), lr=config.actor_lr)
    losses = []
    for chunk in obs_batches:
        for obs in torch.as_tensor(np.asarray(chunk, dtype=np.float32))[:steps - len(losses)]:
            loss = -critic.q1(obs, actor(obs)).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(loss.detach())
        if len(losses) >= steps:
            break
    first, last = (float(losses[0]), float(losses[-1])) if losses else (np.nan, np.nan)
    return actor.params(), {"steps": len(losses), "actor_loss_first": first,
                            "actor_loss_last": last}

__all__ = ["FIXED", "CriticLearner", "NumpyTD3Actor", "TD3Actor", "TD3Config",
           "TwinCritic", "actor_mlp", "actor_spec", "critic_from_flat", "init_actor",
           "train_actor", "transition_spec"]
