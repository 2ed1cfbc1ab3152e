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

The networks are :mod:`esnb.rl.td3.nets`, the settings :mod:`esnb.rl.td3.config`.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from esnb.device import resolve_device, to_device
from esnb.nets.policy import PolicySpec
from esnb.rl.optim import Adam, adam_state, load_adam_state
from esnb.rl.td3.actor import init_actor
from esnb.rl.td3.config import TD3Config
from esnb.rl.td3.nets import TD3Actor, TwinCritic


def _tensors(batch: Mapping[str, np.ndarray], device) -> dict[str, torch.Tensor]:
    return {k: to_device(v, device) for k, v in batch.items()}


class CriticLearner:
    """The shared twin critic, its target and its Adam; trained against a given target policy.

    Parameters
    ----------
    spec : PolicySpec
        The actors' layout (:func:`~esnb.rl.td3.actor.actor_spec`): observation/action sizes
        and bounds.
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
        self.opt = Adam(self.critic.parameters(), lr=config.critic_lr)
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
            self.actor_opt = Adam(self.actor.parameters(), lr=c.actor_lr)
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


def train_actor(spec: PolicySpec, config: TD3Config, actor_flat, critic: TwinCritic,
                obs_batches: Iterable[np.ndarray], steps: int) -> tuple[np.ndarray, dict]:
    """Train an individual's actor: ``steps`` Adam steps (fresh optimiser) on ``-Q1(s, pi(s))``.

    Parameters
    ----------
    actor_flat : array
        The individual (flat, :func:`~esnb.rl.td3.actor.actor_spec` layout).
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
    opt = Adam(actor.parameters(), lr=config.actor_lr)
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
